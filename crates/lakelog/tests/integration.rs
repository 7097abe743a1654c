//! The integration tests of `lakelog`, one test binary: each file beside this one is a module of it
//! (every binary links the crate's whole dependency tree, so one links once).

mod catalog;
mod check_cli;
mod common;
mod demo;
mod games_cli;
mod ingest_cli;
mod maintenance_cli;
mod parse_cli;
mod report_access;
mod report_game;
mod season;
mod send_events_cli;
mod serve_pipeline;
mod teardown_cli;
