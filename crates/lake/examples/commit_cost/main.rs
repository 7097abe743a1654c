//! The cost of one small commit as the open partition grows (BENCHMARKS.md, "Commit cost and
//! table size"): what the game sink pays per batch when its day's partition already holds many
//! small files.
//!
//! ```sh
//! cargo run --profile local -p lake --example commit_cost -- grow /tmp/commits 1000
//! cargo run --profile local -p lake --example commit_cost -- commit /tmp/commits 100
//! cargo run --profile local -p lake --example commit_cost -- grow /tmp/commits 10000
//! cargo run --profile local -p lake --example commit_cost -- commit /tmp/commits 100
//! ```
//!
//! `grow` adds small data files (one row each, 1,000 a commit) to one partition until the table has
//! that many. `commit` then opens the table as a sink does and makes that many commits of one file
//! of 100 rows with the stream's position, each as the sink commits a batch (checkpoints as
//! lakelog's writers space them), and prints the milliseconds per commit: mean, median,
//! the slowest, and the mean of those that wrote a checkpoint. Neither packs small files.
//!
//! `day DIR COMMITS [SETTLE_FILES [CHECKPOINT_INTERVAL]]` is a sink's day: that many such commits
//! into today's (open) partition of a new table, each followed by [`lake::Table::settle`] as the
//! game sink does (packing once `SETTLE_FILES` small files are there, default
//! [`Settle::DEFAULT_FILES`]; 0 never packs), and each preceded by what the sink does before a
//! batch (the newest version, the stream's position in it). The table's
//! `delta.checkpointInterval` is `CHECKPOINT_INTERVAL` (default 10, lakelog's): writers consider
//! a checkpoint every that many commits and space them further as they grow. It prints, after 1,000 to 100,000 commits (and
//! at the end), the milliseconds per commit over the last 1,000 commits, packing included (mean,
//! median, slowest, and the mean of those that wrote a checkpoint), and the active files:
//!
//! ```sh
//! cargo run --profile local -p lake --example commit_cost -- day /tmp/day 100000
//! ```
//!
//! `iceberg DIR COMMITS [SETTLE_FILES]` is the same day with the Iceberg view's snapshot timed
//! apart after each pass (run with `ICEBERG_VIEW=off`, so that commits do not mirror themselves):
//!
//! ```sh
//! ICEBERG_VIEW=off cargo run --profile local -p lake --example commit_cost -- iceberg /tmp/view 10000
//! ```
//!
//! The tables are local, but their logs are listed as S3 lists them (see `listing`): the local
//! file store reads the whole `_delta_log` directory for every listing, which S3 does not.

use std::sync::Arc;
use std::time::Instant;

use arrow::array::{Date32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use lake::maintenance::Settle;

mod listing;
use lake::{Advance, Retry, StorageConfig, Table, TableSpec};

/// The open partition's day.
const DAY: i32 = 20_393;
/// Files added by one commit of `grow`.
const GROW_FILES_PER_COMMIT: usize = 1000;
/// Rows of one measured commit's file.
const ROWS_PER_COMMIT: usize = 100;
/// The stream whose position the commits advance.
const STREAM: &str = "kinesis:bench/shardId-000000000000";

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("eventId", DataType::Utf8, false),
        Field::new("n", DataType::Int64, false),
        Field::new("eventDate", DataType::Date32, false),
    ]))
}

fn spec() -> TableSpec {
    TableSpec::new("commit_cost", schema(), &["eventDate"])
}

fn rows_on(day: i32, first: usize, count: usize) -> Result<RecordBatch, arrow::error::ArrowError> {
    let ids: Vec<String> = (first..first + count).map(|i| format!("event-{i:012}")).collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(StringArray::from(ids)),
            Arc::new(Int64Array::from_iter_values((first..first + count).map(|i| i as i64))),
            Arc::new(Date32Array::from(vec![day; count])),
        ],
    )
}

async fn file_of(
    table: &Table,
    source: &str,
    first: usize,
    count: usize,
) -> Result<lake::SourceFiles, Box<dyn std::error::Error>> {
    file_on(table, source, DAY, first, count).await
}

async fn file_on(
    table: &Table,
    source: &str,
    day: i32,
    first: usize,
    count: usize,
) -> Result<lake::SourceFiles, Box<dyn std::error::Error>> {
    let mut writer = table.writer(source)?;
    writer.write(rows_on(day, first, count)?).await?;
    Ok(writer.finish().await?)
}

/// Milliseconds: mean, median and slowest of `times`.
fn summary(times: &[f64]) -> (f64, f64, f64) {
    let mut sorted = times.to_vec();
    sorted.sort_by(f64::total_cmp);
    (
        times.iter().sum::<f64>() / times.len().max(1) as f64,
        sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN),
        sorted.last().copied().unwrap_or(f64::NAN),
    )
}

/// A sink's day of `commits` small commits into today's partition, packing as `settle` says.
async fn day(
    dir: &str,
    commits: usize,
    settle: Option<Settle>,
    checkpoint_interval: u64,
) -> Result<(), Box<dyn std::error::Error>> {
    const WINDOW: usize = 1000;
    let storage = StorageConfig::from_env();
    let today = chrono::Utc::now().date_naive().to_epoch_days();
    let mut spec = spec();
    spec.properties
        .insert("delta.checkpointInterval".into(), checkpoint_interval.to_string());
    let mut table = Table::open_or_create(dir, &spec, &storage).await?;
    // Whether each commit wrote a checkpoint.
    let mut checkpointed = Vec::with_capacity(commits);
    let mut times = Vec::with_capacity(commits);
    let (mut packings, mut packed_ms, mut packed_files) = (0usize, 0.0f64, 0usize);
    // Commits whose checkpoint (every tenth) failed.
    let mut post_commit_failures = 0usize;
    let started = Instant::now();
    for c in 1..=commits {
        // The stream's position: the commits made before this one.
        let position = (c - 1) as u128;
        let at = Instant::now();
        // As the sink begins each batch: the newest version, and how far the stream is in it.
        table.refresh().await?;
        let from = table.position(STREAM).await?;
        if from != (position > 0).then(|| position.to_string()) {
            return Err(format!("commit {c}: the table has position {from:?}, {position} expected").into());
        }
        let file = file_on(&table, "kinesis", today, c * ROWS_PER_COMMIT, ROWS_PER_COMMIT).await?;
        let advance = Advance {
            stream: STREAM.to_owned(),
            from,
            to: (position + 1).to_string(),
        };
        // Each commit has its own deadline, as each invocation of a sink has.
        let outcome = table
            .commit_appends_at(vec![file], &[advance], &Retry::default())
            .await?;
        post_commit_failures += usize::from(outcome.post_commit_failed);
        checkpointed.push(outcome.checkpointed);
        if let Some(settle) = &settle {
            let packing = Instant::now();
            if let Some(report) = table.settle(settle, None).await? {
                packings += 1;
                packed_ms += packing.elapsed().as_secs_f64() * 1e3;
                packed_files += report.files_removed();
            }
        }
        times.push(at.elapsed().as_secs_f64() * 1e3);
        if [1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000].contains(&c) || c == commits {
            let window = c.saturating_sub(WINDOW)..c;
            let (mean, median, slowest) = summary(&times[window.clone()]);
            let checkpoints: Vec<f64> = window.filter(|&i| checkpointed[i]).map(|i| times[i]).collect();
            println!(
                "{c} commits ({:.0} s): last {} commits mean {mean:.1} ms, median {median:.1} ms, slowest {slowest:.1} ms, \
                 {} checkpoints {:.1} ms; \
                 {} active files; {packings} packings so far ({packed_files} files, {packed_ms:.0} ms in all); \
                 {post_commit_failures} failed post-commit steps",
                started.elapsed().as_secs_f64(),
                WINDOW.min(c),
                checkpoints.len(),
                summary(&checkpoints).0,
                files_of(&table)?,
            );
        }
    }
    Ok(())
}

/// A sink's day as `day` makes it (each commit followed by packing as the sink settles), with the
/// Iceberg view brought up to date after each pass and timed on its own: the process must run
/// with `ICEBERG_VIEW=off`, so that the commits do not mirror themselves. Prints, every 1,000
/// passes, the milliseconds the view's snapshot took (mean, median, slowest), the metadata bytes
/// it wrote per pass, and what the view's metadata folder holds (objects, bytes).
async fn iceberg(dir: &str, commits: usize, settle: Option<Settle>) -> Result<(), Box<dyn std::error::Error>> {
    const WINDOW: usize = 1000;
    if lake::iceberg_view::enabled() {
        return Err("run with ICEBERG_VIEW=off: the passes mirror the view themselves, to time it apart".into());
    }
    let storage = StorageConfig::from_env();
    let today = chrono::Utc::now().date_naive().to_epoch_days();
    let mut table = Table::open_or_create(dir, &spec(), &storage).await?;
    let (mut times, mut bytes) = (Vec::with_capacity(commits), Vec::with_capacity(commits));
    let started = Instant::now();
    for c in 1..=commits {
        let file = file_on(&table, "kinesis", today, c * ROWS_PER_COMMIT, ROWS_PER_COMMIT).await?;
        table.commit_appends(vec![file], &Retry::default()).await?;
        if let Some(settle) = &settle {
            table.settle(settle, None).await?;
        }
        let at = Instant::now();
        let mirrored = table.mirror_iceberg(lake::iceberg_view::DEFAULT_HISTORY).await?;
        times.push(at.elapsed().as_secs_f64() * 1e3);
        bytes.push(mirrored.map_or(0, |m| m.bytes_written) as f64);
        if c % WINDOW == 0 || c == commits {
            let window = c.saturating_sub(WINDOW)..c;
            let (mean, median, slowest) = summary(&times[window.clone()]);
            let (objects, stored) = folder_size(&std::path::Path::new(dir).join(lake::iceberg_view::METADATA_FOLDER))?;
            println!(
                "{c} passes ({:.0} s): the view's snapshot over the last {} passes: mean {mean:.1} ms, median \
                 {median:.1} ms, slowest {slowest:.1} ms, {:.0} metadata bytes written a pass; {} active files; \
                 metadata folder: {objects} objects, {stored} bytes",
                started.elapsed().as_secs_f64(),
                WINDOW.min(c),
                summary(&bytes[window]).0,
                files_of(&table)?,
            );
        }
    }
    Ok(())
}

/// The objects in `dir` and their bytes.
fn folder_size(dir: &std::path::Path) -> std::io::Result<(usize, u64)> {
    let mut found = (0, 0);
    for entry in std::fs::read_dir(dir)? {
        let metadata = entry?.metadata()?;
        found.0 += 1;
        found.1 += metadata.len();
    }
    Ok(found)
}

fn files_of(table: &Table) -> Result<usize, lake::LakeError> {
    Ok(table.file_stats()?.files as usize)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The log listed as S3 lists it, from the version known on: see `listing`.
    listing::install()?;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let storage = StorageConfig::from_env();
    match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["day", dir, commits, rest @ ..] => {
            let settle = match rest.first() {
                Some(files) => Some(files.parse::<usize>()?).filter(|f| *f > 0).map(Settle::after),
                None => Some(Settle::default()),
            };
            let interval = rest.get(1).map_or(Ok(10), |i| i.parse::<u64>())?.max(1);
            day(dir, commits.parse()?, settle, interval).await?;
        }
        ["iceberg", dir, commits, rest @ ..] => {
            let settle = match rest.first() {
                Some(files) => Some(files.parse::<usize>()?).filter(|f| *f > 0).map(Settle::after),
                None => Some(Settle::default()),
            };
            iceberg(dir, commits.parse()?, settle).await?;
        }
        ["grow", dir, files] => {
            let target: usize = files.parse()?;
            let mut table = Table::open_or_create(dir, &spec(), &storage).await?;
            let started = Instant::now();
            while files_of(&table)? < target {
                let have = files_of(&table)?;
                let mut sources = Vec::new();
                for i in have..(have + GROW_FILES_PER_COMMIT).min(target) {
                    sources.push(file_of(&table, "grow", i, 1).await?);
                }
                table.commit_appends(sources, &Retry::default()).await?;
            }
            println!(
                "{dir}: {} files, version {:?} ({:.1} s)",
                files_of(&table)?,
                table.delta().version(),
                started.elapsed().as_secs_f64()
            );
        }
        ["commit", dir, commits] => {
            let commits: usize = commits.parse()?;
            let opening = Instant::now();
            let mut table = Table::open(dir, &storage).await?;
            let opened = opening.elapsed();
            let files = files_of(&table)?;
            let mut position: Option<String> = table.position(STREAM).await?;
            let mut times = Vec::with_capacity(commits);
            let mut checkpointing = Vec::new();
            for c in 0..commits {
                let started = Instant::now();
                let file = file_of(&table, "kinesis", 1_000_000_000 + c * ROWS_PER_COMMIT, ROWS_PER_COMMIT).await?;
                let to = (position.as_deref().map_or(0, |p| p.parse::<u128>().unwrap_or(0)) + 1).to_string();
                let advance = Advance {
                    stream: STREAM.to_owned(),
                    from: position.clone(),
                    to: to.clone(),
                };
                let outcome = table
                    .commit_appends_at(vec![file], &[advance], &Retry::default())
                    .await?;
                let ms = started.elapsed().as_secs_f64() * 1e3;
                times.push(ms);
                if outcome.checkpointed {
                    checkpointing.push(ms);
                }
                position = Some(to);
            }
            let (mean, median, slowest) = summary(&times);
            println!(
                "{dir}: {files} files; opened in {:.0} ms; {commits} commits: mean {mean:.1} ms, median {median:.1} ms, slowest {slowest:.1} ms; \
                 the {} that wrote a checkpoint: mean {:.1} ms; the others: mean {:.1} ms",
                opened.as_secs_f64() * 1e3,
                checkpointing.len(),
                summary(&checkpointing).0,
                (times.iter().sum::<f64>() - checkpointing.iter().sum::<f64>())
                    / (times.len() - checkpointing.len()).max(1) as f64,
            );
        }
        _ => {
            return Err(
                "usage: commit_cost grow DIR FILES | commit_cost commit DIR COMMITS | commit_cost day DIR COMMITS [SETTLE_FILES [CHECKPOINT_INTERVAL]]"
                    .into(),
            );
        }
    }
    Ok(())
}
