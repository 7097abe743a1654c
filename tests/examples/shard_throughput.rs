//! Records a second into one `game_events` table from 1, 4, 16 and 32 simulated shards, each
//! with a writer of its own (the sink's library code, as its Lambda runs it), on the S3 stand-in
//! behind a proxy that holds every request as long as S3 takes to answer.
//!
//! ```text
//! eval "$(scripts/standins start)"
//! cargo run --profile local -p lakelog-tests --example shard_throughput -- \
//!     [SECONDS] [BATCH] [LATENCY_MS] [MODE] [INTERVAL_MS] [SHARDS...]
//! ```
//!
//! Each writer stages batches of BATCH (default 1,000) records of its shard as fast as it can for
//! SECONDS (default 30), every request held LATENCY_MS (default 30). MODE `staged` (default) runs
//! one committer beside them, a pass every INTERVAL_MS (default 5,000), as the function's schedule
//! does; MODE `commit-each` has every writer call `Sink::process` for each batch: here that stages
//! the batch and runs a committer pass (many committers contending); built at a commit before
//! staged writers (BENCHMARKS.md says how), it is the sink's old shape, one commit per batch. After
//! the run every staged link is committed and the table's rows are checked against the records
//! staged. One line per shard count: records staged a second, records committed a second within
//! the run, commits a second, the wait of the oldest link of each pass (p50, p99, max), links per
//! pass and a pass's time, and the data files written per hour into the one `eventDate` partition
//! (the events are of the last hour).
//!
//! MODE `staged-nopack` is `staged` with the committer's packing of small files off.
//! MODE `pass` measures the committer alone: for each number given in place of SHARDS, that many
//! links (batches of BATCH records over 32 shards) are staged first, then one committer pass (no
//! packing) commits them all, timed.
//! MODE `requests` counts the S3 requests of committer passes, by how S3 prices them: a batch is
//! staged and a pass (no packing) commits it, as many times as the number given in place of SHARDS
//! (default 20); printed, the mean per batch and per pass after the first (which creates the
//! Iceberg view), the view's share, and the requests of a pass that finds nothing staged. Run it
//! with `ICEBERG_VIEW=off` for the passes without the view.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use aws_lambda_events::encodings::SecondTimestamp;
use aws_lambda_events::event::kinesis::{KinesisEventRecord, KinesisRecord};
use fixtures::game::{Synth, SynthConfig};
use game_events::Envelope;
use game_sink::{Config, Sink};
use lake::Retry;
use lakelog_tests::faults::{FaultProxy, FaultRates, PricedCounts, Target};
use lakelog_tests::{StandIn, percentile};

/// Encoded events for one shard's writer, reused batch after batch with new sequence numbers.
fn payloads(shard: usize, n: usize) -> Vec<Vec<u8>> {
    let mut synth = Synth::new(SynthConfig {
        seed: 1000 + shard as u64,
        devices: 1000,
        ..SynthConfig::default()
    });
    let envelope = Envelope::new(serde_json::Map::new());
    let now = chrono::Utc::now();
    (0..n)
        .map(|i| {
            let time = now - chrono::Duration::seconds(i as i64 % 3600);
            envelope
                .record(&synth.event(time).stamp(time).with_game("space-miners"))
                .unwrap_or_default()
        })
        .collect()
}

fn batch(shard: usize, first: u64, payloads: &[Vec<u8>]) -> Vec<KinesisEventRecord> {
    let now = chrono::Utc::now();
    payloads
        .iter()
        .enumerate()
        .map(|(i, data)| {
            let mut kinesis = KinesisRecord::default();
            *kinesis.data = data.clone();
            kinesis.approximate_arrival_timestamp = SecondTimestamp(now);
            kinesis.partition_key = format!("pk-{i}");
            kinesis.sequence_number = format!("4959{shard:03}{:049}", first + i as u64);
            let mut record = KinesisEventRecord::default();
            record.event_id = Some(format!("shardId-{shard:012}:{}", kinesis.sequence_number));
            record.event_source_arn = Some("arn:aws:kinesis:us-east-1:123456789012:stream/bench".into());
            record.kinesis = kinesis;
            record
        })
        .collect()
}

/// Stages (and in `commit-each` mode commits) batches of one shard until `until`; returns the
/// records staged.
async fn writer(sink: Sink, shard: usize, size: usize, commit_each: bool, until: Instant) -> u64 {
    let pool = payloads(shard, size * 2);
    let retry = Retry::default();
    let (mut next, mut staged, mut round) = (0u64, 0u64, 0usize);
    while Instant::now() < until {
        let offset = (round % 2) * size;
        round += 1;
        let records = batch(shard, next, &pool[offset..offset + size]);
        let mut from = 0;
        loop {
            let report = if commit_each {
                sink.process(&records[from..], &retry).await
            } else {
                sink.stage(&records[from..]).await
            };
            match report.redeliver_from(&records[from..]) {
                None => break,
                Some(offset) => from += offset,
            }
        }
        next += size as u64;
        staged += size as u64;
    }
    staged
}

#[derive(Default)]
struct CommitterStats {
    passes: u64,
    commits: u64,
    rows: u64,
    files: usize,
    waits_ms: Vec<i64>,
    /// Each pass that committed: its links and how long it took.
    passes_done: Vec<(usize, Duration)>,
}

async fn committer(sink: Sink, interval: Duration, until: Instant) -> CommitterStats {
    let mut stats = CommitterStats::default();
    let retry = Retry::default();
    while Instant::now() < until {
        let started = Instant::now();
        stats.passes += 1;
        match sink.commit_staged(&retry).await.both() {
            Ok(pass) => {
                stats.commits += u64::from(pass.events.version.is_some()) + u64::from(pass.rejects.version.is_some());
                stats.rows += pass.events.rows;
                stats.files += pass.events.files;
                stats.waits_ms.extend(pass.events.oldest_wait_ms);
                if pass.events.links > 0 {
                    stats.passes_done.push((pass.events.links, started.elapsed()));
                }
            }
            Err(e) => eprintln!("commit pass failed: {e}"),
        }
        tokio::time::sleep_until((started + interval).into()).await;
    }
    stats
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: u64| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    let seconds = arg(0, 30);
    let size = arg(1, 1000) as usize;
    let latency = Duration::from_millis(arg(2, 30));
    let mode = args.get(3).map_or("staged", String::as_str).to_owned();
    let interval = Duration::from_millis(arg(4, 5000));
    let shard_counts: Vec<usize> = if args.len() > 5 {
        args[5..].iter().filter_map(|a| a.parse().ok()).collect()
    } else {
        vec![1, 4, 16, 32]
    };
    let commit_each = match mode.as_str() {
        "staged" | "staged-nopack" | "pass" | "requests" => false,
        "commit-each" => true,
        other => anyhow::bail!("MODE is staged, staged-nopack, commit-each, pass or requests, not {other}"),
    };
    let standin = StandIn::connect().await?;
    let proxy = FaultProxy::start(standin.endpoint(), 1, FaultRates::held(latency)).await?;
    let storage = standin.storage_via(proxy.endpoint());
    println!(
        "mode {mode}, batches of {size}, every request held {} ms, {seconds} s per line, committer every {} ms",
        latency.as_millis(),
        interval.as_millis()
    );
    if mode == "requests" {
        let passes = if args.len() > 5 { shard_counts[0] } else { 20 };
        let bucket = standin.create_bucket("requests").await?;
        let table = StandIn::s3_uri(&bucket, "game_events");
        let config = Config::new(&table, None)?.with_settle(None);
        let sink = Sink::open(&config, &storage).await?;
        let pool = payloads(0, size);
        let (mut batches, mut passes_seen) = (Vec::new(), Vec::new());
        let targets = |proxy: &FaultProxy| Target::ALL.map(|t| proxy.counts_for(t).requests);
        let mut by_target = [0u64; 5];
        for i in 0..passes.max(2) {
            let before = proxy.priced();
            let report = sink.stage(&batch(0, (i * size) as u64, &pool)).await;
            anyhow::ensure!(report.retry_from.is_none(), "staging failed: {report:?}");
            let staged = proxy.priced();
            let targets_before = targets(&proxy);
            let pass = sink.commit_staged(&Retry::default()).await.both()?;
            anyhow::ensure!(pass.events.links == 1, "a pass commits the batch: {pass:?}");
            if i > 0 {
                batches.push(staged.since(&before));
                passes_seen.push(proxy.priced().since(&staged));
                for (sum, (after, before)) in by_target.iter_mut().zip(targets(&proxy).iter().zip(targets_before)) {
                    *sum += after - before;
                }
            }
        }
        let view = if lake::iceberg_view::enabled() { "on" } else { "off" };
        for (what, counts) in [("sink batch", &batches), ("committer pass", &passes_seen)] {
            let n = counts.len() as f64;
            let mean = |f: fn(&PricedCounts) -> u64| counts.iter().map(f).sum::<u64>() as f64 / n;
            println!(
                "Iceberg view {view}: per {what} (mean of {} after the first): {:.2} PUT-priced, {:.2} GET, {:.2} DELETE; of which the view's: {:.2} PUT-priced, {:.2} GET, {:.2} DELETE",
                counts.len(),
                mean(|c| c.put),
                mean(|c| c.get),
                mean(|c| c.delete),
                mean(|c| c.view_put),
                mean(|c| c.view_get),
                mean(|c| c.view_delete),
            );
        }
        // A pass that finds nothing staged, as a committer's tick makes every minute.
        let before = proxy.priced();
        let pass = sink.commit_staged(&Retry::default()).await.both()?;
        anyhow::ensure!(pass.events.links == 0, "nothing was staged: {pass:?}");
        let idle = proxy.priced().since(&before);
        println!(
            "Iceberg view {view}: an idle pass: {} PUT-priced, {} GET, {} DELETE",
            idle.put, idle.get, idle.delete
        );
        let n = passes_seen.len() as f64;
        println!(
            "per committer pass, by target: {}",
            Target::ALL
                .iter()
                .zip(by_target)
                .map(|(t, sum)| format!("{t:?} {:.2}", sum as f64 / n))
                .collect::<Vec<_>>()
                .join(", ")
        );
        return Ok(());
    }
    if mode == "pass" {
        println!("links  records  pass ms  ms per link  rows checked");
        for links in shard_counts {
            let bucket = standin.create_bucket("pass").await?;
            let table = StandIn::s3_uri(&bucket, "game_events");
            let config = Config::new(&table, None)?.with_settle(None);
            Sink::open(&config, &storage).await?;
            let stagers: Vec<_> = (0..32)
                .map(|shard| {
                    let writer = Sink::new(&config, &storage);
                    let batches = links / 32 + usize::from(shard < links % 32);
                    tokio::spawn(async move {
                        let pool = payloads(shard, size);
                        for i in 0..batches {
                            let report = writer.stage(&batch(shard, (i * size) as u64, &pool)).await;
                            if report.retry_from.is_some() {
                                return Err(anyhow::anyhow!("staging failed: {report:?}"));
                            }
                        }
                        Ok(())
                    })
                })
                .collect();
            for stager in stagers {
                stager.await??;
            }
            let started = Instant::now();
            let pass = Sink::new(&config, &storage)
                .commit_staged(&Retry::default())
                .await
                .both()?;
            let took = started.elapsed().as_secs_f64() * 1e3;
            let rows = lake::Table::open(&table, &storage).await?.file_stats()?.rows;
            println!(
                "{links:>5}  {:>7}  {took:>7.0}  {:>11.1}  {}",
                links * size,
                took / links.max(1) as f64,
                if pass.events.links == links && rows == (links * size) as u64 {
                    "all once"
                } else {
                    "MISMATCH"
                }
            );
        }
        return Ok(());
    }
    println!(
        "shards  staged/s  committed/s  commits  commits/s  wait p50 ms  p99 ms  max ms  links/pass  pass ms (mean, max)  files/partition-hour  rows checked"
    );
    for shards in shard_counts {
        let bucket = standin.create_bucket("shards").await?;
        let table = StandIn::s3_uri(&bucket, "game_events");
        let config = Config::new(&table, None)?;
        let config = if mode == "staged-nopack" {
            config.with_settle(None)
        } else {
            config
        };
        Sink::open(&config, &storage).await?;
        let started = Instant::now();
        let until = started + Duration::from_secs(seconds);
        let done = Arc::new(AtomicU64::new(0));
        let writers: Vec<_> = (0..shards)
            .map(|shard| {
                let sink = Sink::new(&config, &storage);
                let done = Arc::clone(&done);
                tokio::spawn(async move {
                    let staged = writer(sink, shard, size, commit_each, until).await;
                    done.fetch_add(staged, Ordering::Relaxed);
                })
            })
            .collect();
        let committing = (!commit_each).then(|| tokio::spawn(committer(Sink::new(&config, &storage), interval, until)));
        for writer in writers {
            writer.await?;
        }
        let elapsed = started.elapsed().as_secs_f64();
        let stats = match committing {
            Some(task) => task.await?,
            None => CommitterStats::default(),
        };
        // What is still staged is committed now, and the table checked.
        let last = Sink::new(&config, &storage);
        loop {
            let pass = last.commit_staged(&Retry::default()).await.both()?;
            if pass.events.links == 0 {
                break;
            }
        }
        let staged = done.load(Ordering::Relaxed);
        let read = lake::Table::open(&table, &storage).await?;
        let rows = read.file_stats()?.rows;
        let version = read.delta().version().unwrap_or(0);
        let mut waits = stats.waits_ms.clone();
        waits.sort_unstable();
        let (commits, committed) = if commit_each {
            (version, staged)
        } else {
            (stats.commits, stats.rows)
        };
        let links_per_pass =
            stats.passes_done.iter().map(|p| p.0).sum::<usize>() as f64 / stats.passes_done.len().max(1) as f64;
        let pass_ms: Vec<f64> = stats.passes_done.iter().map(|p| p.1.as_secs_f64() * 1e3).collect();
        let mean_pass = pass_ms.iter().sum::<f64>() / pass_ms.len().max(1) as f64;
        let max_pass = pass_ms.iter().copied().fold(0.0, f64::max);
        println!(
            "{shards:>6}  {:>8.0}  {:>11.0}  {commits:>7}  {:>9.2}  {:>11}  {:>6}  {:>6}  {links_per_pass:>10.1}  {mean_pass:>8.0}, {max_pass:>6.0}  {:>20.0}  {}",
            staged as f64 / elapsed,
            committed as f64 / elapsed,
            commits as f64 / elapsed,
            percentile(&waits, 0.5).unwrap_or(0),
            percentile(&waits, 0.99).unwrap_or(0),
            waits.last().copied().unwrap_or(0),
            stats.files as f64 / elapsed * 3600.0,
            if rows == staged {
                format!("{rows} = staged")
            } else {
                format!("{rows} != {staged} staged")
            }
        );
    }
    Ok(())
}
