//! The deployment's canary: the library behind the scheduled `canary-lambda` Lambda.
//!
//! An EventBridge schedule invokes the function; [`handler::handle`] sends a probe event of the
//! reserved probe game through the stack's public endpoint ([`canary::probe`]), waits for its row
//! in `game_events`, emits the accept-to-row time and whether it landed ([`metrics`]: the
//! `ProbeNotLanded` alarm reads them), and asks the maintenance function to erase the probes.

pub mod config;
pub mod handler;
pub mod metrics;

pub use config::Config;
pub use handler::{Canary, HandlerError, Report, handle};
