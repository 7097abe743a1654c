//! The deduplicating compaction's benchmark (BENCHMARKS.md, "Compaction with duplicate removal"):
//! writes one day of game-event-like rows with 1% duplicates into a local Delta table, then
//! compacts it with `gameId+eventId` as key and prints the time and the process's peak RSS. The
//! erasure's ("Erasing players") runs on the same table: `forget DIR PLAYERS` erases the rows of
//! that many devices (every 300th: `device-0`, `device-300`, ...) and purges their files.
//!
//! ```sh
//! cargo run --profile local -p lake --example dedup_bench -- generate /tmp/dedup-10m 10000000
//! cargo run --profile local -p lake --example dedup_bench -- compact /tmp/dedup-10m 512
//! # A late file into the compacted partition: 10,000 rows from event 9,895,000 on, the first
//! # 4,949 of them copies of events the table has.
//! cargo run --profile local -p lake --example dedup_bench -- generate /tmp/dedup-10m 10000 9895000
//! cargo run --profile local -p lake --example dedup_bench -- compact /tmp/dedup-10m 512
//! ```
//!
//! Each step is a process of its own, so that the peak RSS is the compaction's alone.

use std::sync::Arc;
use std::time::Instant;

use arrow::array::{Date32Array, Float64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use lake::maintenance::CompactOptions;
use lake::{Retry, StorageConfig, Table, TableSpec};
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};

/// The day every row is on: long closed.
const DAY: i32 = 20_393; // 2025-10-31
const ROWS_PER_FILE: u64 = 100_000;
const FILES_PER_COMMIT: u64 = 20;
/// Share of rows that repeat an earlier one (a client's resend, a redelivered batch).
const DUPLICATE_RATE: f64 = 0.01;

fn spec() -> TableSpec {
    let schema = Arc::new(Schema::new(vec![
        Field::new("gameId", DataType::Utf8, false),
        Field::new("eventId", DataType::Utf8, false),
        Field::new("eventName", DataType::Utf8, false),
        Field::new(
            "eventTime",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ),
        Field::new("device_id", DataType::Utf8, true),
        Field::new("amount", DataType::Float64, true),
        Field::new("eventDate", DataType::Date32, false),
    ]));
    TableSpec::new("game_events", schema, &["eventDate"])
}

/// A well-mixed 64-bit value of `n` (splitmix64), so that event `n`'s fields look random.
fn mix(n: u64) -> u64 {
    let mut z = n.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The rows `events` stand for: event `n`'s fields follow from `n`, so a duplicate is the same row.
fn batch(events: &[u64]) -> RecordBatch {
    let ids = events.iter().map(|&n| {
        uuid::Uuid::from_u128((u128::from(mix(n)) << 64) | u128::from(mix(!n)))
            .hyphenated()
            .to_string()
    });
    let micros = events
        .iter()
        .map(|&n| i64::from(DAY) * 86_400_000_000 + (mix(n) % 86_400_000_000) as i64);
    RecordBatch::try_new(
        spec().schema,
        vec![
            Arc::new(StringArray::from_iter_values(
                events
                    .iter()
                    .map(|&n| if n % 3 == 0 { "puzzle-quest" } else { "space-rally" }),
            )),
            Arc::new(StringArray::from_iter_values(ids)),
            Arc::new(StringArray::from_iter_values(
                events
                    .iter()
                    .map(|&n| if n % 50 == 0 { "purchaseEvent" } else { "levelUp" }),
            )),
            Arc::new(TimestampMicrosecondArray::from_iter_values(micros).with_timezone("UTC")),
            Arc::new(StringArray::from_iter(
                events.iter().map(|&n| Some(format!("device-{}", mix(n) % 300_000))),
            )),
            Arc::new(Float64Array::from_iter(
                events
                    .iter()
                    .map(|&n| (n % 50 == 0).then_some((mix(n) % 100) as f64 + 0.99)),
            )),
            Arc::new(Date32Array::from_iter_values(events.iter().map(|_| DAY))),
        ],
    )
    .expect("the columns follow the schema")
}

/// Appends `rows` rows of events `first..` (and copies of earlier ones among them).
async fn generate(dir: &str, rows: u64, first: u64) -> anyhow::Result<()> {
    let storage = StorageConfig::default();
    let mut table = Table::open_or_create(dir, &spec(), &storage).await?;
    let mut rng = StdRng::seed_from_u64(7);
    let (mut next_event, mut duplicates) = (first, 0u64);
    let mut pending = Vec::new();
    let mut written = 0u64;
    while written < rows {
        let len = ROWS_PER_FILE.min(rows - written);
        let events: Vec<u64> = (0..len)
            .map(|_| {
                if next_event > 0 && rng.random_bool(DUPLICATE_RATE) {
                    duplicates += 1;
                    // A copy of an event of the last hundred thousand or so.
                    next_event - 1 - rng.random_range(0..next_event.min(100_000))
                } else {
                    next_event += 1;
                    next_event - 1
                }
            })
            .collect();
        let mut writer = table.writer(&format!("file-{first}-{written}"))?;
        for chunk in events.chunks(8192) {
            writer.write(batch(chunk)).await?;
        }
        pending.push(writer.finish().await?);
        written += len;
        if pending.len() as u64 == FILES_PER_COMMIT || written == rows {
            table
                .commit_appends(std::mem::take(&mut pending), &Retry::default())
                .await?;
        }
    }
    println!(
        "{dir}: {written} rows, {duplicates} duplicates, events {first} to {}",
        next_event - 1
    );
    Ok(())
}

async fn run_compaction(dir: &str, memory_mb: u64) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut table = Table::open(dir, &StorageConfig::default()).await?;
    let options = CompactOptions {
        dedup_key: Some("gameId+eventId".into()),
        dedup_memory: memory_mb << 20,
        grace: chrono::TimeDelta::zero(),
        ..CompactOptions::default()
    };
    let report = table.compact(&options, &()).await?;
    let rows: u64 = report.bins.iter().map(|b| b.rows).sum();
    println!(
        "{dir}: {} files -> {}, {rows} rows kept, {} duplicates removed in {:.1} s, peak RSS {} MB",
        report.files_removed(),
        report.files_added(),
        report.duplicates(),
        started.elapsed().as_secs_f64(),
        peak_rss_mb().map_or_else(|| "unknown".to_owned(), |mb| mb.to_string()),
    );
    Ok(())
}

async fn run_erasure(dir: &str, players: u64) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut table = Table::open(dir, &StorageConfig::default()).await?;
    let ids = (0..players).map(|k| format!("device-{}", k * 300));
    let erasure = lake::Erasure::new(ids).equals("device_id");
    let report = table.erase(&erasure, &Retry::default()).await?;
    let erased = started.elapsed();
    let purge = table.purge(&erasure).await?;
    let read: u64 = report.files.iter().map(|f| f.bytes).sum();
    println!(
        "{dir}: {players} players: {} rows removed; {} of {} files rewritten ({:.1} MB read, {:.1} MB written) in {:.1} s; \
         purge and proof scan ({} files, {:.1} MB) {:.1} s, {} files deleted, {} still holding; peak RSS {} MB",
        report.rows_removed,
        report.files.len(),
        report.files_scanned,
        read as f64 / 1e6,
        report.bytes_written as f64 / 1e6,
        erased.as_secs_f64(),
        purge.after.files,
        purge.after.bytes as f64 / 1e6,
        (started.elapsed() - erased).as_secs_f64(),
        purge.deleted.len(),
        purge.after.holding.len(),
        peak_rss_mb().map_or_else(|| "unknown".to_owned(), |mb| mb.to_string()),
    );
    Ok(())
}

/// The process's peak resident set (`VmHWM`), in MB.
fn peak_rss_mb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024 / 1_000_000)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["generate", dir, rows] => runtime.block_on(generate(dir, rows.parse()?, 0)),
        ["generate", dir, rows, first] => runtime.block_on(generate(dir, rows.parse()?, first.parse()?)),
        ["compact", dir, memory_mb] => runtime.block_on(run_compaction(dir, memory_mb.parse()?)),
        ["forget", dir, players] => runtime.block_on(run_erasure(dir, players.parse()?)),
        _ => anyhow::bail!(
            "usage: dedup_bench generate DIR ROWS [FIRST_EVENT] | dedup_bench compact DIR MEMORY_MB | dedup_bench forget DIR PLAYERS"
        ),
    }
}
