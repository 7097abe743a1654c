//! `lakelog optimize`: compaction of a table's closed partitions (with removal of duplicate rows
//! by a key), the maintenance Lambda's code on one machine, with a progress bar.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use chrono::TimeDelta;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use lake::StorageConfig;
use lake::maintenance::{BinOutcome, CompactObserver, CompactOptions, CompactionPlan};

/// Arguments of `lakelog optimize`.
#[derive(Debug, Args)]
pub struct OptimizeArgs {
    /// The table: a local path or s3://bucket/prefix.
    #[arg(long, value_name = "URI")]
    pub table: String,
    /// Drop rows whose key was already seen in their partition or the day before, keeping the
    /// first: a column, or columns joined by + (game_events: gameId+eventId).
    #[arg(long, value_name = "COLUMN[+COLUMN]")]
    pub dedup_key: Option<String>,
    /// MiB the keys of new rows may take while duplicates are looked for; more are taken in
    /// several passes over the key columns.
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u64).range(16..=1 << 20))]
    pub dedup_memory_mb: u64,
    /// Target size of the compacted files, in MiB.
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub target_file_mb: u64,
    /// Compact a partition once its date ended this many hours ago (tables without a date
    /// partition column: files this old).
    #[arg(long, default_value_t = 48)]
    pub grace_hours: u32,
    /// Start no new bin after this many seconds; the next run goes on.
    #[arg(long, value_name = "SECONDS")]
    pub max_seconds: Option<u64>,
    /// First drop the date partitions older than this many days, and delete their files (the
    /// maintenance function's `#retain-days`); 0 keeps every day.
    #[arg(long, value_name = "DAYS", value_parser = clap::value_parser!(u32).range(0..=36_500))]
    pub retain_days: Option<u32>,
    /// Print the plan and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

struct Bar(ProgressBar);

impl CompactObserver for Bar {
    fn planned(&self, plan: &CompactionPlan) {
        self.0.set_length(plan.bytes());
        self.0.set_message(format!(
            "{} partitions, {} files to rewrite",
            plan.partitions.len(),
            plan.files()
        ));
    }

    fn file_read(&self, bytes: u64) {
        self.0.inc(bytes);
    }

    fn bin_done(&self, outcome: &BinOutcome) {
        self.0.set_message(format!(
            "{}: {} files -> {} (version {})",
            outcome.partition, outcome.files_removed, outcome.files_added, outcome.version
        ));
    }
}

/// Runs `lakelog optimize`.
pub fn run(args: &OptimizeArgs) -> anyhow::Result<ExitCode> {
    let runtime = super::runtime()?;
    runtime.block_on(optimize(args))
}

async fn optimize(args: &OptimizeArgs) -> anyhow::Result<ExitCode> {
    let storage = StorageConfig::from_env();
    let mut table = lake::Table::open(&args.table, &storage).await?;
    let options = CompactOptions {
        target_file_size: args.target_file_mb << 20,
        grace: TimeDelta::hours(i64::from(args.grace_hours)),
        dedup_key: args.dedup_key.clone(),
        dedup_memory: args.dedup_memory_mb << 20,
        stop_at: args.max_seconds.map(|s| Instant::now() + Duration::from_secs(s)),
        dry_run: args.dry_run,
        ..CompactOptions::default()
    };
    if args.dry_run {
        let plan = table.plan_compaction(&options)?;
        for partition in &plan.partitions {
            println!(
                "{}: {} files, {:.1} MB in {} bins",
                partition.label,
                partition.files(),
                partition.bytes() as f64 / 1e6,
                partition.bins()
            );
        }
        println!(
            "plan: {} of {} files ({:.1} MB) in {} partitions would be rewritten in {} commits; {} partitions still open",
            plan.files(),
            plan.active_files,
            plan.bytes() as f64 / 1e6,
            plan.partitions.len(),
            plan.bins(),
            plan.open_partitions
        );
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(days) = args.retain_days.filter(|&d| d > 0) {
        let expired = table.expire(days, &lake::Retry::default()).await?;
        match (expired.before, expired.version) {
            (None, _) => println!("retention: the table has no date partition column; every row stays"),
            (Some(before), Some(version)) => println!(
                "retention: dropped {} partitions before {before} ({} files, {} rows, {:.1} MB) in version {version}; {} files deleted",
                expired.partitions.len(),
                expired.files,
                expired.rows,
                expired.bytes as f64 / 1e6,
                expired.purged
            ),
            (Some(before), None) if expired.files > 0 => {
                eprintln!("lakelog optimize: a concurrent commit rewrote files before {before}; run again")
            }
            (Some(before), None) => println!("retention: no partition before {before}"),
        }
    }
    let bar = if args.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(0)
    };
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {bytes}/{total_bytes} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let started = Instant::now();
    let progress = Bar(bar);
    let report = table.compact(&options, &progress).await?;
    progress.0.finish_and_clear();
    println!(
        "compacted {} of {} partitions: {} -> {} files ({} commits, {} files rewritten, {:.1} MB), {} duplicate rows removed, in {:.1} s",
        report
            .bins
            .iter()
            .map(|b| &b.partition)
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        report.partitions_planned,
        report.files_before,
        report.files_after,
        report.bins.len(),
        report.files_removed(),
        report.bytes_removed() as f64 / 1e6,
        report.duplicates(),
        started.elapsed().as_secs_f64()
    );
    for partition in &report.conflicts {
        eprintln!("lakelog optimize: {partition}: a concurrent commit rewrote files of this partition; run again");
    }
    if report.stopped_early {
        eprintln!("lakelog optimize: stopped at --max-seconds; run again to go on");
    }
    Ok(ExitCode::SUCCESS)
}
