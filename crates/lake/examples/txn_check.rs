//! Measures the exactly-once check on a table that already holds many `txn` ids.
//!
//! ```text
//! cargo run --profile bench -p lake --example txn_check -- build DIR 100000 1000
//! /usr/bin/time -v cargo run --profile bench -p lake --example txn_check -- check DIR
//! ```
//!
//! `build` writes `TXNS` transaction ids in `COMMITS` commits (each with one small data file), as
//! a busy access-log table accumulates them; checkpoints are written as lakelog's writers space
//! them. `check` then does what an ingest invocation does: open the table, and check a
//! source that is there and one that is not, printing the time of each step and the peak RSS.

use std::sync::Arc;
use std::time::Instant;

use arrow::array::{Date32Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use lake::{StorageConfig, Table, TableSpec};

fn spec() -> TableSpec {
    let schema = Arc::new(Schema::new(vec![
        Field::new("source", DataType::Utf8, false),
        Field::new("day", DataType::Date32, false),
    ]));
    TableSpec::new("txn_bench", schema, &["day"])
}

fn source(i: usize) -> String {
    format!("s3://raw-logs/access-logs/2024-06-01-00-00-00-{i:016X}")
}

fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|kb| kb.parse::<f64>().ok()))
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let storage = StorageConfig::from_env();
    match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["build", dir, txns, commits] => {
            let (txns, commits): (usize, usize) = (txns.parse()?, commits.parse()?);
            let per_commit = txns.div_ceil(commits);
            let mut table = Table::open_or_create(dir, &spec(), &storage).await?;
            let started = Instant::now();
            for c in 0..commits {
                let mut files = Vec::with_capacity(per_commit);
                for i in c * per_commit..((c + 1) * per_commit).min(txns) {
                    let id = source(i);
                    if i == c * per_commit {
                        let mut writer = table.writer(&id)?;
                        let batch = RecordBatch::try_new(
                            spec().schema,
                            vec![
                                Arc::new(StringArray::from(vec![id.as_str()])),
                                Arc::new(Date32Array::from(vec![19_875])),
                            ],
                        )?;
                        writer.write(batch).await?;
                        files.push(writer.finish().await?);
                    } else {
                        files.push(lake::SourceFiles::empty(&id));
                    }
                }
                table.commit_sources(files, &lake::Retry::default()).await?;
            }
            println!(
                "built {txns} txn ids in {commits} commits in {:.1} s",
                started.elapsed().as_secs_f64()
            );
        }
        ["check", dir] => {
            let t0 = Instant::now();
            let table = Table::open(dir, &storage).await?;
            let opened = t0.elapsed();
            let t1 = Instant::now();
            let hit = table.is_committed(&source(12_345)).await?;
            let hit_time = t1.elapsed();
            let t2 = Instant::now();
            let miss = table.is_committed("s3://raw-logs/access-logs/never-seen").await?;
            let miss_time = t2.elapsed();
            println!(
                "version {:?}: open {:.0} ms, check of a present id {:.0} ms ({hit}), of an absent id {:.0} ms ({miss}), peak RSS {:.0} MB",
                table.delta().version(),
                opened.as_secs_f64() * 1e3,
                hit_time.as_secs_f64() * 1e3,
                miss_time.as_secs_f64() * 1e3,
                peak_rss_mb()
            );
        }
        _ => return Err("usage: txn_check build DIR TXNS COMMITS | txn_check check DIR".into()),
    }
    Ok(())
}
