//! The command line, as clap types.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Land S3 access logs and game events in Delta Lake, and answer the questions they exist for.
#[derive(Debug, Parser)]
#[command(name = "lakelog", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Parse S3 server access log files and print one JSON object per line.
    ///
    /// Parsed lines go to standard output with the access_logs column names as keys; lines that
    /// cannot be parsed go to standard error as {"log_object", "log_line", "reason", "line"}.
    /// Files may be plain or gzip (detected by content). The exit status is 0 unless a file cannot
    /// be read.
    Parse(ParseArgs),
}

/// Arguments of `lakelog parse`.
#[derive(Debug, Args)]
pub struct ParseArgs {
    /// Log files to parse; `-` (the default) reads standard input.
    #[arg(value_name = "FILE|-", default_value = "-")]
    pub files: Vec<PathBuf>,
}
