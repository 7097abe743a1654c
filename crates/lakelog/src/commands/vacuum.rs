//! `lakelog vacuum`: delete data files removed from a table longer ago than the retention (at
//! least 7 days unless forced), and files no commit references.

use std::process::ExitCode;

use chrono::TimeDelta;
use clap::Args;
use lake::StorageConfig;
use lake::maintenance::VacuumOptions;

/// Arguments of `lakelog vacuum`.
#[derive(Debug, Args)]
pub struct VacuumArgs {
    /// The table: a local path or s3://bucket/prefix.
    #[arg(long, value_name = "URI")]
    pub table: String,
    /// Delete files removed longer ago than this many hours. Below 168 (7 days) time travel to
    /// recent versions and queries running now may break, so it needs --force.
    #[arg(long, default_value_t = 168)]
    pub retention_hours: u32,
    /// Accept a retention below 168 hours and below the table's delta.deletedFileRetentionDuration.
    #[arg(long)]
    pub force: bool,
    /// Only list the files that would be deleted.
    #[arg(long)]
    pub dry_run: bool,
    /// Only files removed by commits, not files that no commit references.
    #[arg(long)]
    pub lite: bool,
    /// No spinner.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Runs `lakelog vacuum`.
pub fn run(args: &VacuumArgs) -> anyhow::Result<ExitCode> {
    let runtime = super::runtime()?;
    runtime.block_on(async {
        let storage = StorageConfig::from_env();
        let mut table = lake::Table::open(&args.table, &storage).await?;
        let spinner = super::spinner(args.quiet, format!("vacuum {}", args.table));
        let options = VacuumOptions {
            retention: TimeDelta::hours(i64::from(args.retention_hours)),
            force: args.force,
            dry_run: args.dry_run,
            full: !args.lite,
        };
        let report = table.vacuum(&options).await;
        spinner.finish_and_clear();
        let report = report?;
        if report.dry_run {
            for file in &report.files {
                println!("{file}");
            }
            println!("would delete {} files", report.files.len());
        } else {
            println!("deleted {} files", report.files.len());
        }
        Ok(ExitCode::SUCCESS)
    })
}
