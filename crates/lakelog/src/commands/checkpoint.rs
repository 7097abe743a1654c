//! `lakelog checkpoint`: write a checkpoint of a table's current version and delete log files
//! older than its `delta.logRetentionDuration` that the checkpoint makes unnecessary.

use std::process::ExitCode;

use clap::Args;
use lake::StorageConfig;

/// Arguments of `lakelog checkpoint`.
#[derive(Debug, Args)]
pub struct CheckpointArgs {
    /// The table: a local path or s3://bucket/prefix.
    #[arg(long, value_name = "URI")]
    pub table: String,
    /// Keep expired log files.
    #[arg(long)]
    pub no_cleanup: bool,
    /// No spinner.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Runs `lakelog checkpoint`.
pub fn run(args: &CheckpointArgs) -> anyhow::Result<ExitCode> {
    let runtime = super::runtime()?;
    runtime.block_on(async {
        let storage = StorageConfig::from_env();
        let mut table = lake::Table::open(&args.table, &storage).await?;
        let spinner = super::spinner(args.quiet, format!("checkpoint {}", args.table));
        let report = table.checkpoint(!args.no_cleanup).await;
        spinner.finish_and_clear();
        let report = report?;
        println!(
            "version {}: {}, {} expired log files deleted",
            report.version,
            if report.created {
                "checkpoint written"
            } else {
                "already checkpointed"
            },
            report.logs_removed
        );
        Ok(ExitCode::SUCCESS)
    })
}
