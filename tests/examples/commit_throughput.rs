//! Commit throughput on one table of the S3 stand-in: how many commits a second one table takes
//! from 1, 4, 16 and 32 concurrent writers, with their latency, tries and outcome, without and
//! with injected faults.
//!
//! ```text
//! eval "$(scripts/standins start)"
//! cargo run --profile local -p lakelog-tests --example commit_throughput -- [SECONDS] [FAULT_RATE] [WRITERS...]
//! ```
//!
//! Each writer commits, for SECONDS (default 20) per writer count, small files of one source per
//! commit: `ingest` shape (a `txn` per source, as the access-log ingest) and `sink` shape (plain
//! appends, as the game sink). FAULT_RATE (default 0) is the share of requests of each fault kind
//! (see `lakelog_tests::faults`). Prints one line per shape and writer count.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Date32Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use lake::{Retry, StorageConfig, TableSpec};
use lakelog_tests::faults::{FaultProxy, FaultRates};
use lakelog_tests::{StandIn, percentile};

fn spec() -> TableSpec {
    let schema = Arc::new(Schema::new(vec![
        Field::new("source", DataType::Utf8, false),
        Field::new("day", DataType::Date32, false),
    ]));
    TableSpec::new("commits", schema, &["day"])
}

#[derive(Default)]
struct WriterStats {
    latencies: Vec<Duration>,
    tries: u64,
    failed: u64,
}

async fn writer(
    uri: String,
    storage: StorageConfig,
    shape: &'static str,
    id: usize,
    until: Instant,
) -> anyhow::Result<WriterStats> {
    let mut table = lake::Table::open(&uri, &storage).await?;
    let mut stats = WriterStats::default();
    let mut n = 0u64;
    while Instant::now() < until {
        n += 1;
        let source = format!("s3://raw/{shape}/{id}/{n}");
        let batch = RecordBatch::try_new(
            spec().schema,
            vec![
                Arc::new(StringArray::from(vec![source.as_str(); 10])),
                Arc::new(Date32Array::from(vec![20_000; 10])),
            ],
        )?;
        let started = Instant::now();
        let result = async {
            let mut w = table.writer(&source)?;
            w.write(batch).await?;
            let files = w.finish().await?;
            let retry = Retry::within(Duration::from_secs(60));
            if shape == "ingest" {
                table.commit_sources(vec![files], &retry).await
            } else {
                table.commit_appends(vec![files], &retry).await
            }
        }
        .await;
        match result {
            Ok(outcome) => {
                stats.latencies.push(started.elapsed());
                stats.tries += u64::from(outcome.attempts);
            }
            Err(e) => {
                stats.failed += 1;
                eprintln!("{shape} writer {id}: {e}");
            }
        }
    }
    Ok(stats)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let seconds: u64 = args.first().map_or(Ok(20), |a| a.parse())?;
    let rate: f64 = args.get(1).map_or(Ok(0.0), |a| a.parse())?;
    let writers: Vec<usize> = if args.len() > 2 {
        args[2..].iter().map(|a| a.parse()).collect::<Result<_, _>>()?
    } else {
        vec![1, 4, 16, 32]
    };
    let standin = StandIn::connect().await?;
    let proxy = FaultProxy::start(standin.endpoint(), 42, FaultRates::uniform(rate)).await?;
    let storage = standin.storage_via(proxy.endpoint());
    let bucket = standin.create_bucket("commit-bench").await?;
    println!("shape   writers  commits  commits/s  p50 ms  p99 ms  tries/commit  failed  (faults {rate})");
    for shape in ["ingest", "sink"] {
        for &count in &writers {
            let uri = StandIn::s3_uri(&bucket, &format!("{shape}-{count}"));
            lake::Table::open_or_create(&uri, &spec(), &storage).await?;
            let before = proxy.counts();
            let started = Instant::now();
            let until = started + Duration::from_secs(seconds);
            let tasks: Vec<_> = (0..count)
                .map(|id| tokio::spawn(writer(uri.clone(), storage.clone(), shape, id, until)))
                .collect();
            let mut latencies = Vec::new();
            let (mut tries, mut failed) = (0, 0);
            for task in tasks {
                let stats = task.await??;
                latencies.extend(stats.latencies);
                tries += stats.tries;
                failed += stats.failed;
            }
            let elapsed = started.elapsed().as_secs_f64();
            latencies.sort();
            let commits = latencies.len();
            let after = proxy.counts();
            println!(
                "{shape:<7} {count:>7} {commits:>8} {:>10.1} {:>7.0} {:>7.0} {:>13.2} {failed:>7}  ({} requests faulted of {})",
                commits as f64 / elapsed,
                percentile(&latencies, 0.5).unwrap_or_default().as_secs_f64() * 1000.0,
                percentile(&latencies, 0.99).unwrap_or_default().as_secs_f64() * 1000.0,
                tries as f64 / commits.max(1) as f64,
                after.failures() - before.failures(),
                after.requests - before.requests,
            );
        }
    }
    Ok(())
}
