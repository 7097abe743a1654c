//! `lakelog`: run lakelog's pipelines and reports on one machine.
//!
//! The binary is a thin clap front end; each subcommand lives in [`commands`] and calls the same
//! library code the Lambda functions use.

pub mod cli;
pub mod commands;
pub mod input;

use std::process::ExitCode;

use cli::{Cli, Command};

/// Runs one parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Parse(args) => commands::parse::run(&args),
    }
}
