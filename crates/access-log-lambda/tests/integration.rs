//! The integration tests of `access-log-lambda`, one test binary: each file beside this one is a module of it
//! (every binary links the crate's whole dependency tree, so one links once).

mod handler_events;
mod runtime_api;
