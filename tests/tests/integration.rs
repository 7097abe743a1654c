//! The integration tests of `lakelog-tests`, one test binary: each file beside this one is a module of it
//! (every binary links the crate's whole dependency tree, so one links once).

mod access_logs;
mod access_report;
mod alarms;
mod docs;
mod faults;
mod game_api;
mod game_pipeline;
mod game_simulation;
mod iceberg;
mod maintenance;
mod release;
mod simulation;
mod standins;
mod store_faults;
mod structure;
mod template;
