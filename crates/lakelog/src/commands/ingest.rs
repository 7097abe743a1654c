//! `lakelog ingest`: land raw access-log objects (local files, directories, S3 prefixes) in Delta
//! tables through the same code path as the Lambda. Also the backfill command.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use access_log_ingest::{IngestError, IngestObserver, Ingestor, ObjectReader, ObjectRef, ObjectReport, TableTemplate};
use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use lake::StorageConfig;

use crate::cli::IngestArgs;

/// Totals of an ingest run.
#[derive(Debug, Default)]
pub struct Totals {
    objects: AtomicU64,
    already: AtomicU64,
    failed: AtomicU64,
    bytes: AtomicU64,
    rows: AtomicU64,
    rejects: AtomicU64,
}

impl Totals {
    fn line(&self) -> String {
        format!(
            "{} MB, {} rows, {} rejects",
            self.bytes.load(Ordering::Relaxed) / 1_000_000,
            self.rows.load(Ordering::Relaxed),
            self.rejects.load(Ordering::Relaxed)
        )
    }
}

struct Bar<'t> {
    bar: ProgressBar,
    totals: &'t Totals,
}

impl IngestObserver for Bar<'_> {
    fn read(&self, bytes: u64) {
        self.totals.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.bar.set_message(self.totals.line());
    }

    fn done(&self, object: &ObjectRef, result: &Result<ObjectReport, IngestError>) {
        let t = self.totals;
        t.objects.fetch_add(1, Ordering::Relaxed);
        match result {
            Ok(report) => {
                t.rows.fetch_add(report.rows, Ordering::Relaxed);
                t.rejects.fetch_add(report.rejects, Ordering::Relaxed);
                if report.already_ingested() {
                    t.already.fetch_add(1, Ordering::Relaxed);
                }
            }
            Err(e) => {
                t.failed.fetch_add(1, Ordering::Relaxed);
                self.bar
                    .suspend(|| eprintln!("lakelog ingest: {object}: not ingested: {e}"));
            }
        }
        self.bar.inc(1);
        self.bar.set_message(t.line());
    }
}

/// Runs `lakelog ingest`.
pub fn run(args: &IngestArgs) -> anyhow::Result<ExitCode> {
    let runtime = super::runtime()?;
    runtime.block_on(ingest(args))
}

/// Commits what was staged in the tables, and returns the tables whose commit failed (each named
/// on standard error).
async fn commit_staged(ingestor: &Ingestor, bar: &ProgressBar) -> usize {
    match ingestor.commit_staged(&lake::Retry::default()).await {
        Ok(tables) => tables
            .into_iter()
            .filter_map(|(table, result)| result.err().map(|e| (table, e)))
            .inspect(|(table, e)| bar.println(format!("lakelog ingest: {table}: not committed: {e}")))
            .count(),
        Err(e) => {
            bar.println(format!("lakelog ingest: not committed: {e}"));
            1
        }
    }
}

async fn ingest(args: &IngestArgs) -> anyhow::Result<ExitCode> {
    let table = TableTemplate::parse("--table", &args.table)?;
    let rejects = match &args.rejects_table {
        Some(uri) => uri.clone(),
        None => table.default_rejects(),
    };
    let storage = StorageConfig::from_env();
    let needs_s3 = args.paths.iter().any(|p| p.starts_with("s3://"));
    let reader = if needs_s3 {
        ObjectReader::s3(access_log_ingest::s3_client(None, &storage).await)
    } else {
        ObjectReader::local()
    };
    let mut objects: Vec<ObjectRef> = Vec::new();
    for path in &args.paths {
        let found = reader.list(path).await.with_context(|| format!("cannot list {path}"))?;
        objects.extend(found);
    }
    // The functions' path: the objects are staged, then committed, a commit per table per chunk.
    let ingestor = Ingestor::new(table, rejects, storage, reader, usize::from(args.concurrency))
        .with_schema_changes(args.evolve_schema)
        .with_staging(true);
    let totals = Totals::default();
    let bar = if args.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(objects.len() as u64)
    };
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} objects, {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let progress = Bar { bar, totals: &totals };
    let started = Instant::now();
    let mut uncommitted = 0;
    for chunk in objects.chunks(args.objects_per_commit.max(1)) {
        ingestor.ingest(chunk, &lake::Retry::default(), &progress).await;
        uncommitted += commit_staged(&ingestor, &progress.bar).await;
    }
    ingestor.settled().await;
    progress.bar.finish_and_clear();
    let seconds = started.elapsed().as_secs_f64();
    let bytes = totals.bytes.load(Ordering::Relaxed);
    let failed = totals.failed.load(Ordering::Relaxed);
    println!(
        "ingested {} objects ({} already in the tables, {} failed): {} rows, {} rejects, {:.1} MB in {:.1} s ({:.1} MB/s)",
        totals.objects.load(Ordering::Relaxed),
        totals.already.load(Ordering::Relaxed),
        failed,
        totals.rows.load(Ordering::Relaxed),
        totals.rejects.load(Ordering::Relaxed),
        bytes as f64 / 1e6,
        seconds,
        bytes as f64 / 1e6 / seconds.max(1e-9),
    );
    if uncommitted > 0 {
        eprintln!(
            "lakelog ingest: {uncommitted} commits failed; their objects are staged, and the next \
             lakelog ingest of the tables (or the deployed functions' committer) commits them"
        );
    }
    Ok(if failed == 0 && uncommitted == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
