//! `lakelog`: run lakelog's pipelines and reports on one machine.
//!
//! The binary is a thin clap front end; each subcommand lives in [`commands`] and calls the same
//! library code the Lambda functions use.

pub mod cli;
pub mod commands;

use std::process::ExitCode;

use cli::{Cli, Command};

/// Runs one parsed command line. Diagnostics go to standard error, at the level `LAKELOG_LOG`
/// sets (default `warn`; `error` for the demo).
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    // The demo says what happens itself, including the refusals it provokes on purpose.
    let default = if matches!(cli.command, Command::Demo(_)) {
        "error"
    } else {
        "warn"
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("LAKELOG_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    match cli.command {
        Command::Demo(args) => commands::demo::run(&args),
        Command::Parse(args) => commands::parse::run(&args),
        Command::Ingest(args) => commands::ingest::run(&args),
        Command::GenerateLogs(args) => commands::generate::run(&args),
        Command::Report(args) => commands::report::run(&args),
        Command::Optimize(args) => commands::optimize::run(&args),
        Command::Vacuum(args) => commands::vacuum::run(&args),
        Command::Checkpoint(args) => commands::checkpoint::run(&args),
        Command::Catalog(args) => commands::catalog::run(&args),
        Command::Games(args) => commands::games::run(&args),
        Command::Teardown(args) => commands::teardown::run(&args),
        Command::Check(args) => commands::check::run(&args),
        Command::Replay(args) => commands::replay::run(&args),
        Command::Forget(args) => commands::forget::run(&args),
        Command::Serve(args) => commands::serve::run(&args),
        Command::SendEvents(args) => commands::send_events::run(&args),
    }
}
