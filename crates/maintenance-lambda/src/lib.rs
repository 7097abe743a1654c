//! Keeps lakelog's Delta tables healthy: the library behind the scheduled `maintenance-lambda`
//! Lambda.
//!
//! An EventBridge schedule invokes the function; [`handler::handle`] runs one pass of
//! [`lake::maintenance`] over every table of the deployment ([`config`]: `LAKE_TABLES`, where a
//! prefix ending in `/*` stands for every table under it, such as the access-log tables, one per
//! observed bucket): compaction of closed partitions (removing duplicate rows where the table has a
//! deduplication key), a checkpoint with expired log cleanup, and VACUUM. Work stops starting when
//! the invocation's remaining time falls below a reserve; every commit is complete, and the next
//! run goes on where this one stopped.

pub mod config;
pub mod handler;
pub mod metrics;
pub mod rotation;

pub use config::{Config, ConfigError, Location, TableEntry};
pub use handler::{HandlerError, Maintainer, Report, TableSummary, handle};
