//! The canary's tests against the local stand-ins, as one binary.

mod runtime_api;
