//! A simulated year of the staged pipeline: a seeded world drives the real code of the lake crate
//! (staging writers, the committer, compaction, checkpoints with log cleanup, VACUUM, retention,
//! erasure and purge) through 400 days of quiet streams, reshards, committer outages longer than
//! VACUUM's retention, killed writers and committers, two committers at once, writes that land but
//! answer an error, a link of an unknown format, and a `txn` retention of one second (any value a
//! user may set: here every quiet stream's `txn` expires within days). On a quarter of the days its
//! store (`store_faults`) fails 5% of requests, half of them after they were done, and lists slowly. After each day it checks the
//! invariants of docs/protocol.md by name; at checkpoints it counts every row with DuckDB, an
//! independent reader. A failure prints its seed; `LAKELOG_SIM_SEEDS=<seed>` replays it.
//!
//! `LAKELOG_SIM_SEEDS` (comma-separated) and `LAKELOG_SIM_DAYS` run more: the soak command of
//! BENCHMARKS.md.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Date32Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use lake::maintenance::{CompactOptions, VacuumOptions};
use lake::{Advance, Erasure, LakeError, Retry, StorageConfig, Table, TableSpec};
use rand::rngs::SmallRng;
use rand::{Rng as _, SeedableRng as _};

/// The seeds CI runs.
const SEEDS: [u64; 2] = [1, 2];

/// Days each seed lives through.
const DAYS: u32 = 400;

/// The share of days that are stormy, and the share of requests that fail on them.
const STORMY: f64 = 0.25;
const FAULT_RATE: f64 = 0.05;

/// Check the rows with DuckDB every this many days (and on the last).
const READ_EVERY: u32 = 100;

/// The days of the committer's outage: longer than VACUUM's retention (which the simulation
/// sets to zero, the harshest a user can force).
const OUTAGE: std::ops::Range<u32> = 200..215;

fn spec() -> TableSpec {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new(
            "at",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ),
        Field::new("day", DataType::Date32, false),
    ]));
    let mut spec = TableSpec::new("simulated", schema, &["day"]);
    for (key, value) in [
        ("delta.setTransactionRetentionDuration", "interval 1 second"),
        ("delta.logRetentionDuration", "interval 1 second"),
        ("delta.checkpointInterval", "5"),
    ] {
        spec.properties.insert(key.to_owned(), value.to_owned());
    }
    spec
}

/// One stream of the world: a shard, with its schedule.
struct Stream {
    name: &'static str,
    /// Stages on days `d` with `d % every == offset`, from `from` until `until`.
    every: u32,
    offset: u32,
    from: u32,
    until: u32,
    /// The last sequence number produced; records are `name:seq`.
    produced: u64,
}

impl Stream {
    fn due(&self, day: u32) -> bool {
        (self.from..self.until).contains(&day) && day % self.every == self.offset
    }
}

/// What the world knows: each acknowledged record with its day, and the erased ones.
#[derive(Default)]
struct Truth {
    acknowledged: BTreeMap<String, i32>,
    erased: BTreeSet<String>,
    expired_before: Option<i32>,
}

impl Truth {
    fn expected(&self) -> BTreeSet<&String> {
        self.acknowledged
            .iter()
            .filter(|(id, day)| !self.erased.contains(*id) && self.expired_before.is_none_or(|b| **day >= b))
            .map(|(id, _)| id)
            .collect()
    }
}

/// The first simulated day, as days since the Unix epoch: the year ends today, so that retention
/// (which counts back from now) drops what a user's would.
fn first_day(days: u32) -> i32 {
    (chrono::Utc::now().timestamp() / 86_400) as i32 - days as i32
}

fn batch(ids: &[String], day: i32) -> RecordBatch {
    let n = ids.len();
    RecordBatch::try_new(
        spec().schema,
        vec![
            Arc::new(StringArray::from(ids.to_vec())),
            Arc::new(TimestampMicrosecondArray::from(vec![i64::from(day) * 86_400_000_000; n]).with_timezone("UTC")),
            Arc::new(Date32Array::from(vec![day; n])),
        ],
    )
    .expect("the simulation's batch")
}

/// A writer's pass over one stream: the records after its staged position up to `produced`.
/// Returns the records staged (acknowledged), or `None` when staging failed or was refused.
async fn stage(table: &mut Table, stream: &Stream, day: i32, lose_answer: bool) -> Result<Vec<String>, LakeError> {
    let from = table.staged_position(stream.name).await?;
    let after = from.as_deref().map_or(0, |p| p.parse::<u64>().unwrap_or(0));
    if after >= stream.produced {
        return Ok(Vec::new());
    }
    let ids: Vec<String> = (after + 1..=stream.produced)
        .map(|s| format!("{}:{s}", stream.name))
        .collect();
    let mut writer = table.writer("kinesis")?;
    writer.write(batch(&ids, day)).await?;
    let files = writer.finish().await?;
    let advance = Advance {
        stream: stream.name.to_owned(),
        from,
        to: stream.produced.to_string(),
    };
    table.stage(files, &advance).await?;
    if lose_answer {
        // The link landed, and its answer was lost: not acknowledged; the stream's records come
        // again, and the next pass finds them staged.
        return Ok(Vec::new());
    }
    Ok(ids)
}

/// Every file under `dir`, relative to it.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(relative) = path.strip_prefix(dir) {
                out.push(relative.to_path_buf());
            }
        }
    }
    out
}

/// An invariant that did not hold: its name (docs/protocol.md), the day, and what was seen.
fn broke(seed: u64, day: u32, invariant: &str, detail: impl std::fmt::Display) -> ! {
    panic!(
        "seed {seed}, day {day}: invariant {invariant} broken: {detail}\n  replay: LAKELOG_SIM_SEEDS={seed} \
         cargo test -p lakelog-tests --test integration simulation"
    )
}

/// The world of one seed; the faults its store injected.
async fn live(seed: u64, days: u32) -> u64 {
    let mut rng = SmallRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().expect("a temporary folder");
    let root = dir.path().join("t");
    let uri = root.to_str().expect("a UTF-8 path").to_owned();
    let storage = StorageConfig::default();
    std::fs::create_dir_all(&root).expect("the table's folder");
    let faults = crate::store_faults::register(&root, seed);
    let mut table = Table::open_or_create(&uri, &spec(), &storage).await.expect("the table");
    let mut streams = vec![
        Stream {
            name: "busy-a",
            every: 1,
            offset: 0,
            from: 0,
            until: u32::MAX,
            produced: 0,
        },
        Stream {
            name: "busy-b",
            every: 2,
            offset: 1,
            from: 0,
            until: u32::MAX,
            produced: 0,
        },
        // A game's quiet lane: a batch every 45 days.
        Stream {
            name: "quiet",
            every: 45,
            offset: 3,
            from: 0,
            until: u32::MAX,
            produced: 0,
        },
        // A rejects shard: a batch every 61 days.
        Stream {
            name: "rejects",
            every: 61,
            offset: 7,
            from: 0,
            until: u32::MAX,
            produced: 0,
        },
        // A reshard on day 150: the parent closes, two children start.
        Stream {
            name: "parent",
            every: 1,
            offset: 0,
            from: 0,
            until: 150,
            produced: 0,
        },
        Stream {
            name: "child-1",
            every: 3,
            offset: 0,
            from: 150,
            until: u32::MAX,
            produced: 0,
        },
        Stream {
            name: "child-2",
            every: 40,
            offset: 5,
            from: 150,
            until: u32::MAX,
            produced: 0,
        },
    ];
    let mut truth = Truth::default();
    let first = first_day(days);
    let retry = Retry::default();
    let mut read_at = Vec::new();
    for day in 0..days {
        let date = first + day as i32;
        // A stormy day: requests fail now and then (some after they were done), listings are
        // slow. Every actor meets it, as functions meet S3's errors; each then runs again in calm
        // (the next tick, the next invocation), and the day's invariants are checked in calm.
        let stormy = rng.random_bool(STORMY);
        faults.set(if stormy { FAULT_RATE } else { 0.0 }, stormy);
        // The writers.
        for stream in &mut streams {
            let due = stream.due(day);
            if due {
                stream.produced += rng.random_range(1..=4);
            }
            if !due && rng.random_bool(0.9) {
                continue;
            }
            if rng.random_bool(0.04) {
                // A writer killed after writing its files, before its link: orphans for VACUUM.
                if let Ok(mut writer) = table.writer("kinesis")
                    && writer
                        .write(batch(&[format!("{}:orphan", stream.name)], date))
                        .await
                        .is_ok()
                {
                    drop(writer.finish().await);
                }
                continue;
            }
            let lose = rng.random_bool(0.05);
            // On an error (another writer staged first, or the newest link is unreadable until
            // the committer sets it aside) the records come again.
            if let Ok(ids) = stage(&mut table, stream, date, lose).await {
                for id in ids {
                    truth.acknowledged.insert(id, date);
                }
            }
        }
        // A link of a format this release does not read, as the next of busy-a.
        if day == 100 {
            faults.set(0.0, false);
            let from = table
                .staged_position("busy-a")
                .await
                .expect("position")
                .unwrap_or_default();
            let folder = root.join("_lakelog_staged").join(hex("busy-a"));
            std::fs::create_dir_all(&folder).expect("folder");
            std::fs::write(folder.join(format!("{from}.json")), br#"{"format":2,"links":[]}"#).expect("link");
            faults.set(if stormy { FAULT_RATE } else { 0.0 }, stormy);
        }
        // The committer: one pass a day, two at once now and then, killed after its commit
        // sometimes (its links left behind), stopped for the outage.
        let mut report = None;
        if !OUTAGE.contains(&day) {
            let saved: Vec<(PathBuf, Vec<u8>)> = if rng.random_bool(0.05) {
                files_under(&root.join("_lakelog_staged"))
                    .into_iter()
                    .map(|p| root.join("_lakelog_staged").join(p))
                    .filter_map(|p| std::fs::read(&p).ok().map(|b| (p, b)))
                    .collect()
            } else {
                Vec::new()
            };
            let two = if rng.random_bool(0.1) {
                Table::open(&uri, &storage).await.ok()
            } else {
                None
            };
            let pass = if let Some(mut other) = two {
                let (a, b) = tokio::join!(table.commit_staged(2_000, &retry), other.commit_staged(2_000, &retry));
                a.or(b)
            } else {
                table.commit_staged(2_000, &retry).await
            };
            match pass {
                Ok(done) => report = Some(done),
                Err(e) => {
                    // The next tick, in calm (a minute later: before maintenance, which refuses
                    // to VACUUM past a link it cannot read until the committer has set it aside).
                    calm(&faults, stormy, seed, day, "committer_progresses", e);
                    match table.commit_staged(2_000, &retry).await {
                        Ok(done) => report = Some(done),
                        Err(e) => broke(seed, day, "committer_progresses", e),
                    }
                }
            }
            for (path, bytes) in saved {
                if !path.exists() {
                    let _ = std::fs::write(path, bytes);
                }
            }
        }
        // Maintenance: compaction now and then, a checkpoint with log cleanup and VACUUM (zero
        // retention, forced) every day.
        if rng.random_bool(0.2) {
            let options = CompactOptions {
                grace: chrono::TimeDelta::zero(),
                now: chrono::Utc::now(),
                ..CompactOptions::default()
            };
            if let Err(e) = table.compact(&options, &()).await {
                calm(&faults, stormy, seed, day, "maintenance_runs", e);
                if let Err(e) = table.compact(&options, &()).await {
                    broke(seed, day, "maintenance_runs", e);
                }
            }
        }
        if let Err(e) = table.checkpoint(true).await {
            calm(&faults, stormy, seed, day, "maintenance_runs", e);
            if let Err(e) = table.checkpoint(true).await {
                broke(seed, day, "maintenance_runs", e);
            }
        }
        let vacuum = VacuumOptions {
            retention: chrono::TimeDelta::zero(),
            force: true,
            dry_run: false,
            full: true,
        };
        if let Err(e) = table.vacuum(&vacuum).await {
            calm(&faults, stormy, seed, day, "maintenance_runs", e);
            if let Err(e) = table.vacuum(&vacuum).await {
                broke(seed, day, "maintenance_runs", e);
            }
        }
        // Erasure of three acknowledged records, and retention of the last 300 days.
        if day == 120 || day == 330 {
            let ids: Vec<String> = truth
                .expected()
                .into_iter()
                .filter(|id| id.starts_with("busy-a") || id.starts_with("quiet"))
                .take(3)
                .cloned()
                .collect();
            let erasure = Erasure::new(ids.iter().cloned()).equals("id");
            // Staged links first, as `forget` does, so that their rows are erased too; what fails
            // in the storm is done again in calm, as maintenance takes the request again.
            let forget = async |table: &mut Table| {
                table.commit_staged(2_000, &retry).await?;
                table.erase(&erasure, &retry).await?;
                table.purge(&erasure).await
            };
            let purge = match forget(&mut table).await {
                Ok(purge) => purge,
                Err(e) => {
                    calm(&faults, stormy, seed, day, "erased_ids_in_no_file", e);
                    forget(&mut table)
                        .await
                        .unwrap_or_else(|e| broke(seed, day, "erased_ids_in_no_file", e))
                }
            };
            if !purge.after.holding.is_empty() && purge.kept.iter().all(|(_, why)| !why.contains("staged")) {
                broke(seed, day, "erased_ids_in_no_file", format!("{:?}", purge.after.holding));
            }
            // Nor does a staged link's statistics (a quiet stream keeps its newest for months).
            for link in files_under(&root.join("_lakelog_staged")) {
                let text = std::fs::read_to_string(root.join("_lakelog_staged").join(&link)).unwrap_or_default();
                if let Some(id) = ids.iter().find(|id| text.contains(&format!("\\\"{id}\\\""))) {
                    broke(
                        seed,
                        day,
                        "erased_ids_in_no_file",
                        format!("{} names {id}", link.display()),
                    );
                }
            }
            truth.erased.extend(ids);
        }
        if day == 360 {
            if let Err(e) = table.expire(300, &retry).await {
                calm(&faults, stormy, seed, day, "maintenance_runs", e);
                table.expire(300, &retry).await.expect("retention");
            }
            truth.expired_before = Some((chrono::Utc::now().timestamp() / 86_400) as i32 - 300);
        }
        // The next tick, in calm: the committer commits what the storm left.
        faults.set(0.0, false);
        if stormy && !OUTAGE.contains(&day) {
            match table.commit_staged(2_000, &retry).await {
                Ok(done) => report = Some(done),
                Err(e) => broke(seed, day, "committer_progresses", e),
            }
        }
        // The day's invariants.
        table.refresh().await.expect("refresh");
        for file in table.delta().snapshot().expect("snapshot").log_data().iter() {
            let path = root.join(
                percent_encoding::percent_decode_str(&file.path())
                    .decode_utf8_lossy()
                    .as_ref(),
            );
            if !path.exists() {
                broke(seed, day, "every_named_file_exists", path.display());
            }
        }
        if let Some(report) = &report {
            let waiting = report.left + report.stranded;
            if waiting > 0 && report.oldest_left_ms.is_none() && report.stranded == 0 {
                broke(seed, day, "nothing_waits_unseen", format!("{report:?}"));
            }
            if report.stranded > 0 {
                broke(seed, day, "positions_are_known", format!("{report:?}"));
            }
        }
        if (day + 1) % READ_EVERY == 0 || day + 1 == days {
            read_at.push(day);
            check_rows(seed, day, &mut table, &truth).await;
        }
    }
    assert!(!read_at.is_empty());
    let injected = faults.injected.load(std::sync::atomic::Ordering::Relaxed);
    assert!(days < 50 || injected > 0, "the storms injected no fault");
    injected
}

/// Turns the faults off after `error` met in a storm, so that the step runs again in calm (the
/// next invocation); an error on a calm day breaks `invariant`.
fn calm(
    faults: &crate::store_faults::Faults,
    stormy: bool,
    seed: u64,
    day: u32,
    invariant: &str,
    error: impl std::fmt::Display,
) {
    if !stormy {
        broke(seed, day, invariant, error);
    }
    faults.set(0.0, false);
}

/// Every acknowledged record (not erased, not expired) is in the table exactly once, and nothing
/// else is: first committing what is staged, as the next passes would.
async fn check_rows(seed: u64, day: u32, table: &mut Table, truth: &Truth) {
    for _ in 0..5 {
        match table.commit_staged(2_000, &Retry::default()).await {
            Ok(done) if done.left == 0 => break,
            Ok(_) => {}
            Err(e) => broke(seed, day, "committer_progresses", e),
        }
    }
    let uri = table.uri().to_owned();
    let rows = lakelog_tests::duckdb(
        "",
        &format!("SELECT id, count(*) FROM delta_scan('{uri}') GROUP BY id ORDER BY id"),
    )
    .unwrap_or_else(|e| broke(seed, day, "independent_reader_reads", e));
    let mut found: BTreeMap<String, i64> = BTreeMap::new();
    for row in rows {
        if let (Some(id), Some(n)) = (row[0].as_str(), row[1].as_i64()) {
            found.insert(id.to_owned(), n);
        }
    }
    if let Err(e) = exactly_once(&found, truth.expected(), "the table") {
        broke(seed, day, "acknowledged_exactly_once", e);
    }
    let erased: Vec<&String> = found.keys().filter(|id| truth.erased.contains(*id)).collect();
    if !erased.is_empty() {
        broke(seed, day, "erased_ids_in_no_file", format!("{erased:?} read back"));
    }
    // Records not acknowledged (a lost answer, retried) may be in: never twice, checked above.
    // The Iceberg view, brought up to date as the maintenance pass would, reads the same rows.
    if let Err(e) = table.mirror_iceberg(lake::iceberg_view::DEFAULT_HISTORY).await {
        broke(seed, day, "iceberg_view_mirrors", e);
    }
    match lakelog_tests::view_difference(None, &uri) {
        Ok(None) => {}
        Ok(Some(difference)) => broke(seed, day, "iceberg_view_mirrors", difference),
        Err(e) => broke(seed, day, "independent_reader_reads", e),
    }
}

/// `acknowledged_exactly_once` over the rows an independent reader counted per id (`found`): no
/// id twice, and every one of `expected` there; what broke it, naming `what` was read.
pub(crate) fn exactly_once<'a>(
    found: &BTreeMap<String, i64>,
    expected: impl IntoIterator<Item = &'a String>,
    what: &str,
) -> Result<(), String> {
    if let Some((id, n)) = found.iter().find(|(_, n)| **n != 1) {
        return Err(format!("{id} is in {what} {n} times"));
    }
    let missing: Vec<&String> = expected
        .into_iter()
        .filter(|id| !found.contains_key(id.as_str()))
        .take(5)
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("acknowledged, not in {what}: {missing:?}"))
    }
}

fn hex(text: &str) -> String {
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

/// The seeds to live through: `LAKELOG_SIM_SEEDS` (comma-separated), else `default`.
pub(crate) fn seeds(default: &[u64]) -> Vec<u64> {
    std::env::var("LAKELOG_SIM_SEEDS")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| default.to_vec())
}

/// The days each seed lives: `LAKELOG_SIM_DAYS`, else `default`.
pub(crate) fn days(default: u32) -> u32 {
    std::env::var("LAKELOG_SIM_DAYS")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simulated_year_keeps_every_invariant() {
    let days = days(DAYS);
    // The seeds' worlds side by side, each with its own table (a panic names its seed).
    let worlds: Vec<_> = seeds(&SEEDS)
        .into_iter()
        .map(|seed| {
            tokio::spawn(async move {
                let started = std::time::Instant::now();
                let faults = live(seed, days).await;
                eprintln!(
                    "simulation: seed {seed}, {days} days in {:.1} s ({:.1} simulated days/s), {faults} faults injected",
                    started.elapsed().as_secs_f64(),
                    f64::from(days) / started.elapsed().as_secs_f64()
                );
            })
        })
        .collect();
    for world in worlds {
        if let Err(e) = world.await {
            std::panic::resume_unwind(e.into_panic());
        }
    }
}
