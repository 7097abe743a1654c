//! The `lakelog` command: parses its arguments ([`lakelog::cli`]) and runs the command.

use std::process::ExitCode;

use clap::Parser;
use lakelog::cli::Cli;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match lakelog::run(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("lakelog: {err:#}");
            ExitCode::FAILURE
        }
    }
}
