//! The delivery guarantees under storage faults: writers go through the fault-injecting proxy
//! (`lakelog_tests::faults`), which throttles, fails requests it carried out, drops connections
//! and delays; DuckDB then reads the tables straight from the stand-in and checks that every table
//! is readable, every valid line or event is there exactly once, and every malformed one is in the
//! rejects once.
//!
//! The suite runs at a low fault rate; `LAKELOG_FAULT_RATE=0.05 scripts/test -- faults` runs it at
//! 5% of requests for each kind of fault.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use access_log_ingest::{Ingestor, ObjectReader, ObjectRef, TableTemplate};
use aws_lambda_events::encodings::SecondTimestamp;
use aws_lambda_events::event::kinesis::{KinesisEventRecord, KinesisRecord};
use aws_sdk_s3::primitives::ByteStream;
use chrono::{TimeZone, Utc};
use fixtures::game::{Synth, SynthConfig as GameSynthConfig};
use fixtures::log_lines::{SynthConfig, corpus};
use game_events::Envelope;
use game_sink::{Config, Settle, Sink};
use lake::maintenance::{BinOutcome, CompactObserver, CompactOptions};
use lake::{Retry, StorageConfig};
use lakelog_tests::faults::{FaultCounts, FaultProxy, FaultRates, Target};
use lakelog_tests::{StandIn, duckdb};
use s3_access_log::{AccessLogRecord, parse_lines};

/// The suite's rate of each kind of fault, unless `LAKELOG_FAULT_RATE` says otherwise.
const SUITE_RATE: f64 = 0.02;

/// Rounds of redelivery before a test gives up.
const ROUNDS: usize = 30;

/// A commit's tries in these tests: bounded like an invocation, waits shorter than production's.
fn retry() -> Retry {
    Retry::within(Duration::from_secs(60)).with_delays(Duration::from_millis(10), Duration::from_millis(400))
}

fn storage(endpoint: &str, standin: &StandIn) -> StorageConfig {
    standin.storage_via(endpoint)
}

fn s3_via(standin: &StandIn, endpoint: &str) -> aws_sdk_s3::Client {
    let config = aws_sdk_s3::config::Builder::from(&standin.sdk_config())
        .endpoint_url(endpoint)
        .force_path_style(true)
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

/// The access-log tables of the lake bucket `lake`, one per observed bucket.
fn template(lake: &str) -> TableTemplate {
    TableTemplate::parse("table", &format!("s3://{lake}/access_logs/{{bucket}}")).unwrap()
}

/// An ingest instance writing tables under `s3://LAKE/access_logs/`, reading and writing
/// through `endpoint` (the proxy, or the stand-in itself).
fn ingestor(standin: &StandIn, lake: &str, endpoint: &str, concurrency: usize) -> Ingestor {
    let template = template(lake);
    let rejects = template.default_rejects();
    Ingestor::new(
        template,
        rejects,
        storage(endpoint, standin),
        ObjectReader::s3(s3_via(standin, endpoint)),
        concurrency,
    )
}

/// Puts a raw log object straight into the stand-in.
async fn put_log(standin: &StandIn, raw: &str, key: &str, data: Vec<u8>) -> ObjectRef {
    standin
        .s3()
        .put_object()
        .bucket(raw)
        .key(key)
        .body(ByteStream::from(data))
        .send()
        .await
        .unwrap();
    ObjectRef::S3 {
        bucket: raw.to_owned(),
        key: key.to_owned(),
    }
}

fn report(test: &str, counts: FaultCounts, rounds: usize) {
    eprintln!(
        "{test}: {} requests; faulted: {} slow down, {} failed after carried out, {} dropped after carried out, {} delayed; {rounds} rounds",
        counts.requests, counts.slow_down, counts.fail_after, counts.drop_after, counts.delay
    );
}

/// The suite's rates: [`SUITE_RATE`] (or `LAKELOG_FAULT_RATE`) for every request, and more for
/// commits, checkpoints, log reads and LISTs.
fn suite_rates() -> FaultRates {
    FaultRates::from_env_or(SUITE_RATE).stressing_the_log()
}

/// Fails unless the run met each fault on the path it is for: commits whose answer was lost (at
/// least `commits` of them), refused checkpoints (at least `checkpoints`: a committer of staged
/// work commits too seldom to write one in a short run), and failed log reads (the read-back of a
/// commit's unknown outcome among them) and LISTs. A test that passes without them proves nothing.
fn assert_faults_hit_their_paths(proxy: &FaultProxy, commits: u64, checkpoints: u64) {
    if !suite_rates().any() {
        return;
    }
    for target in Target::ALL {
        eprintln!("  {target:?}: {:?}", proxy.counts_for(target));
    }
    let hit = |target: Target, what: &str, faulted: u64, at_least: u64| {
        assert!(
            faulted >= at_least,
            "{what}: {faulted} faulted, expected at least {at_least}: {:?}",
            proxy.counts_for(target)
        );
    };
    let commit = proxy.counts_for(Target::Commit);
    hit(
        Target::Commit,
        "commits carried out, answer lost",
        commit.ambiguous(),
        commits,
    );
    let checkpoint = proxy.counts_for(Target::Checkpoint);
    hit(
        Target::Checkpoint,
        "checkpoint writes",
        checkpoint.failures(),
        checkpoints,
    );
    let log = proxy.counts_for(Target::LogRead);
    hit(
        Target::LogRead,
        "log reads (500 or reset)",
        log.fail_after + log.drop_after,
        1,
    );
    hit(Target::List, "LISTs", proxy.counts_for(Target::List).failures(), 1);
}

/// Rows per `log_object` of a table, as DuckDB reads it from the stand-in.
fn per_object(endpoint: &str, table: &str) -> HashMap<String, u64> {
    let sql = format!("SELECT log_object, count(*) FROM delta_scan('{table}') GROUP BY 1");
    duckdb(endpoint, &sql)
        .unwrap_or_else(|e| panic!("DuckDB cannot read {table}: {e:#}"))
        .into_iter()
        .map(|r| (r[0].as_str().unwrap_or_default().to_owned(), r[1].as_u64().unwrap_or(0)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_log_ingest_loses_nothing_and_duplicates_nothing_under_faults() {
    ingest_under_faults(false).await;
}

/// The function's way: instances stage, two committers pass at once beside them and after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn staged_access_logs_are_committed_once_under_faults() {
    ingest_under_faults(true).await;
}

/// Runs committer passes over the access-log tables until one finds nothing staged.
async fn commit_all_staged(ingestor: &Ingestor) {
    for _ in 0..ROUNDS * 4 {
        match ingestor.commit_staged(&retry()).await {
            Ok(tables) if tables.iter().all(|(_, r)| r.as_ref().is_ok_and(|c| c.links == 0)) => return,
            Ok(tables) => {
                for (table, result) in tables {
                    if let Err(e) = result {
                        eprintln!("commit of {table} failed, the next pass tries again: {e}");
                    }
                }
            }
            Err(e) => eprintln!("commit pass failed, the next one tries again: {e}"),
        }
    }
    panic!("the staged objects were never all committed");
}

/// 48 objects, each delivered to three of eight instances, under the suite's faults: committed
/// by each instance (`staged` false: an ingestor that commits itself), or staged and committed by two
/// committers at once (the function's way). DuckDB then counts every object's rows once.
async fn ingest_under_faults(staged: bool) {
    let standin = StandIn::connect().await.unwrap();
    let raw = standin.create_bucket("faults-raw").await.unwrap();
    let lake = standin.create_bucket("faults-lake").await.unwrap();

    // 48 small log objects of two observed buckets, 2% malformed lines, put straight into the
    // stand-in: enough commits that each table passes two checkpoint versions, so that the run
    // meets checkpoints even when a commit due one lands with its answer lost (the checkpoint is
    // then left to a later commit).
    let mut expected: BTreeMap<String, HashMap<String, u64>> = BTreeMap::new();
    let mut expected_rejects: HashMap<String, u64> = HashMap::new();
    let mut objects = Vec::new();
    for i in 0..48u64 {
        let data = corpus(
            SynthConfig {
                seed: 500 + i,
                malformed_rate: 0.02,
                quirk_rate: 0.2,
                buckets: vec!["web-assets".into(), "data-exports".into()],
                ..SynthConfig::default()
            },
            6_000,
        );
        let key = format!("logs/2026-11-30-10-{:02}-00-FAULTS{i:02}", i % 60);
        let uri = format!("s3://{raw}/{key}");
        for (_, _, parsed) in parse_lines(&data) {
            match parsed {
                Ok(AccessLogRecord { bucket: Some(b), .. }) => {
                    *expected
                        .entry(b.into_owned())
                        .or_default()
                        .entry(uri.clone())
                        .or_insert(0) += 1;
                }
                _ => *expected_rejects.entry(uri.clone()).or_insert(0) += 1,
            }
        }
        objects.push(put_log(&standin, &raw, &key, data).await);
    }
    assert!(
        expected_rejects.values().sum::<u64>() > 0,
        "the corpus has malformed lines"
    );

    let proxy = FaultProxy::start(standin.endpoint(), 15, suite_rates()).await.unwrap();
    let rejects = template(&lake).default_rejects();
    // Eight instances; each object is in the notifications of three of them.
    let instances: Vec<Ingestor> = (0..8)
        .map(|_| ingestor(&standin, &lake, proxy.endpoint(), 4).with_staging(staged))
        .collect();
    let committers = [0, 1].map(|_| ingestor(&standin, &lake, proxy.endpoint(), 4));
    let delivered = std::sync::atomic::AtomicBool::new(false);
    let committing = async {
        let mut passes = 0;
        while staged && !delivered.load(std::sync::atomic::Ordering::Relaxed) {
            let retry = retry();
            let (a, b) = tokio::join!(committers[0].commit_staged(&retry), committers[1].commit_staged(&retry));
            passes += usize::from(a.is_ok()) + usize::from(b.is_ok());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        passes
    };
    let delivering = async {
        let mut queues: Vec<Vec<ObjectRef>> = (0..8)
            .map(|n| {
                objects
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| [n, (n + 1) % 8, (n + 3) % 8].contains(&(i % 8)))
                    .map(|(_, o)| o.clone())
                    .collect()
            })
            .collect();
        let mut rounds = 0;
        while queues.iter().any(|q| !q.is_empty()) {
            rounds += 1;
            assert!(
                rounds <= ROUNDS,
                "messages still failing after {ROUNDS} redeliveries: {queues:?}"
            );
            // Two objects a message batch: many commits, so that checkpoints are written too.
            let runs = instances.iter().zip(&queues).map(|(instance, queue)| async move {
                let mut failed = Vec::new();
                for batch in queue.chunks(2) {
                    let outcomes = instance.ingest(batch, &retry(), &()).await;
                    // SQS delivers again what failed.
                    failed.extend(
                        outcomes
                            .into_iter()
                            .filter_map(|(object, result)| result.err().map(|e| (object, e))),
                    );
                }
                failed
            });
            let failed = futures::future::join_all(runs).await;
            for (queue, failed) in queues.iter_mut().zip(failed) {
                for (object, e) in &failed {
                    eprintln!("round {rounds}: {object} failed, redelivered: {e}");
                }
                *queue = failed.into_iter().map(|(o, _)| o).collect();
            }
        }
        delivered.store(true, std::sync::atomic::Ordering::Relaxed);
        rounds
    };
    let (rounds, passes) = tokio::join!(delivering, committing);
    if staged {
        eprintln!("{passes} committer passes beside the instances");
        commit_all_staged(&committers[0]).await;
    }
    report("access-log ingest", proxy.counts(), rounds);
    assert_faults_hit_their_paths(&proxy, if staged { 1 } else { 3 }, u64::from(!staged));

    for (bucket, rows) in &expected {
        let table = format!("s3://{lake}/access_logs/{bucket}");
        assert_eq!(
            &per_object(standin.endpoint(), &table),
            rows,
            "rows of {table} per log object"
        );
    }
    assert_eq!(
        per_object(standin.endpoint(), &rejects),
        expected_rejects,
        "rejected lines per log object"
    );
}

/// Kinesis records of `events` generated events, the sequence numbers of one shard, with one
/// undecodable record every 97, over three days from 2026-11-20.
fn shard_records(shard: usize, events: usize, synth: &mut Synth) -> Vec<KinesisEventRecord> {
    let start = Utc.with_ymd_and_hms(2026, 11, 20, 0, 0, 0).unwrap();
    shard_records_from(start, shard, events, synth)
}

/// [`shard_records`] over three days from `start`.
fn shard_records_from(
    start: chrono::DateTime<Utc>,
    shard: usize,
    events: usize,
    synth: &mut Synth,
) -> Vec<KinesisEventRecord> {
    let request = serde_json::json!({"httpMethod": "POST", "path": "/events", "resource": "/events"});
    let envelope = Envelope::new(request.as_object().cloned().unwrap_or_default());
    (0..events)
        .map(|i| {
            let time = start + chrono::Duration::seconds((i * 331 + shard * 17) as i64 % (3 * 86_400));
            let mut kinesis = KinesisRecord::default();
            *kinesis.data = if i % 97 == 96 {
                b"{not json".to_vec()
            } else {
                let game = if shard.is_multiple_of(2) {
                    "space-miners"
                } else {
                    "tiny-towns"
                };
                envelope.record(&synth.event(time).stamp(time).with_game(game)).unwrap()
            };
            kinesis.approximate_arrival_timestamp = SecondTimestamp(time);
            kinesis.partition_key = format!("pk-{i}");
            kinesis.sequence_number = format!("{shard}{i:055}");
            let mut record = KinesisEventRecord::default();
            record.event_id = Some(format!("shardId-{shard:012}:{}", kinesis.sequence_number));
            record.kinesis = kinesis;
            record
        })
        .collect()
}

/// Delivers `batch` to `sink` again from the first record not committed until the whole of it
/// is, as Kinesis does; returns the rows and rejects it wrote and the redeliveries it took.
async fn deliver(sink: &Sink, batch: &[KinesisEventRecord]) -> (u64, usize, usize) {
    let (mut rows, mut rejected, mut redeliveries, mut from) = (0, 0, 0, 0);
    loop {
        let report = sink.process(&batch[from..], &retry()).await;
        rows += report.rows;
        rejected += report.rejected;
        match report.redeliver_from(&batch[from..]) {
            None => return (rows, rejected, redeliveries),
            Some(offset) => {
                redeliveries += 1;
                assert!(redeliveries <= ROUNDS * 4, "batch still failing: {report:?}");
                from += offset;
            }
        }
    }
}

/// Runs committer passes until one finds nothing staged, as the committer function does every few
/// seconds: a pass that fails (faults) leaves its work staged for the next.
async fn commit_all(sink: &Sink) {
    for _ in 0..ROUNDS * 4 {
        match sink.commit_staged(&retry()).await.both() {
            Ok(pass) if pass.events.links + pass.rejects.links == 0 => {
                assert_eq!(
                    pass.events.left + pass.rejects.left,
                    0,
                    "links off their chains: {pass:?}"
                );
                return;
            }
            Ok(_) => {}
            Err(e) => eprintln!("commit pass failed, the next one tries again: {e}"),
        }
    }
    panic!("the staged work was never all committed");
}

/// Delivers the records of one shard to its sink in batches of 100, as Kinesis does, and then
/// each batch again as Lambda does after an error that followed the commit: the whole batch, and
/// its second half (bisected). The redeliveries of committed batches must write nothing; returns
/// the redeliveries.
async fn run_shard(sink: &Sink, records: &[KinesisEventRecord]) -> usize {
    let mut redeliveries = 0;
    for batch in records.chunks(100) {
        redeliveries += deliver(sink, batch).await.2;
        for again in [batch, &batch[batch.len() / 2..]] {
            let (rows, rejected, retried) = deliver(sink, again).await;
            assert_eq!((rows, rejected), (0, 0), "a committed batch delivered again wrote rows");
            redeliveries += retried + 1;
        }
    }
    redeliveries
}

fn event_id(record: &KinesisEventRecord) -> Option<String> {
    let data: serde_json::Value = serde_json::from_slice(&record.kinesis.data).ok()?;
    data["body"]["eventId"].as_str().map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn game_sink_and_compaction_lose_nothing_under_faults() {
    let standin = StandIn::connect().await.unwrap();
    let bucket = standin.create_bucket("faults-game").await.unwrap();
    let table = StandIn::s3_uri(&bucket, "game_events");
    let rejects_table = StandIn::s3_uri(&bucket, "game_events_rejects");
    let proxy = FaultProxy::start(standin.endpoint(), 16, suite_rates()).await.unwrap();
    let storage = storage(proxy.endpoint(), &standin);
    // The sinks pack their small files every few commits, beside the compaction below.
    let config = Config::new(&table, Some(&rejects_table))
        .unwrap()
        .with_settle(Some(Settle::after(8)));

    let mut synth = Synth::new(GameSynthConfig {
        devices: 300,
        ..GameSynthConfig::default()
    });
    // Three days from three days ago: the first is closed (late events, which the sinks pack
    // too), the other two still open.
    let start = (Utc::now().date_naive() - chrono::Days::new(3))
        .and_hms_opt(0, 0, 0)
        .unwrap()
        .and_utc();
    let shards: Vec<Vec<KinesisEventRecord>> = (0..4).map(|s| shard_records_from(start, s, 600, &mut synth)).collect();
    let expected_ids: HashSet<String> = shards.iter().flatten().filter_map(event_id).collect();
    let expected_rows = shards.iter().flatten().filter_map(event_id).count();
    assert_eq!(expected_ids.len(), expected_rows, "the generator's ids are distinct");
    let expected_rejects = shards.iter().flatten().filter(|r| event_id(r).is_none()).count();

    // One sink instance per shard, as Lambda runs them; an instance that cannot open its tables
    // fails its invocation and is started again.
    let mut sinks = Vec::new();
    for _ in &shards {
        let mut tries = 0;
        let sink = loop {
            tries += 1;
            match Sink::open(&config, &storage).await {
                Ok(sink) => break sink,
                Err(e) if tries < ROUNDS => eprintln!("sink did not start, starting again: {e}"),
                Err(e) => panic!("sink never started: {e}"),
            }
        };
        sinks.push(sink);
    }

    // Compaction with deduplication beside the appends: every partition is closed for it.
    let compaction = async {
        let options = CompactOptions {
            dedup_key: Some(game_events::batch::DEDUP_KEY.into()),
            now: Utc::now() + chrono::Duration::days(30),
            target_file_size: 1 << 20,
            ..CompactOptions::default()
        };
        let mut runs = 0;
        for _ in 0..6 {
            tokio::time::sleep(Duration::from_millis(700)).await;
            let Ok(mut t) = lake::Table::open(&table, &storage).await else {
                continue;
            };
            match t.compact(&options, &()).await {
                Ok(_) => runs += 1,
                Err(e) => eprintln!("compaction failed, tried again at the next run: {e}"),
            }
        }
        runs
    };
    let appends = futures::future::join_all(
        sinks
            .iter()
            .zip(&shards)
            .map(|(sink, records)| run_shard(sink, records)),
    );
    let (redeliveries, compactions) = tokio::join!(appends, compaction);
    let redeliveries: usize = redeliveries.iter().sum();
    eprintln!("{compactions} compactions completed beside the appends");
    // The sinks committed after each batch (four committers at once); what a failed pass left
    // staged is committed now.
    commit_all(&sinks[0]).await;

    // Before the last compaction, at write time: every event is there once, rows counted, though
    // every batch was delivered again and faults failed commits on the way.
    let counted = duckdb(
        standin.endpoint(),
        &format!(
            "SELECT (SELECT count(*) FROM delta_scan('{table}')), \
             (SELECT count(*) FROM (SELECT DISTINCT \"gameId\", \"eventId\" FROM delta_scan('{table}')))"
        ),
    )
    .unwrap();
    assert_eq!(
        (counted[0][0].as_u64(), counted[0][1].as_u64()),
        (Some(expected_rows as u64), Some(expected_rows as u64)),
        "rows and distinct (gameId, eventId) before compaction"
    );

    // A last compaction, still under faults, tried until it completes: then each event once.
    let options = CompactOptions {
        dedup_key: Some(game_events::batch::DEDUP_KEY.into()),
        now: Utc::now() + chrono::Duration::days(30),
        ..CompactOptions::default()
    };
    let mut done = false;
    for _ in 0..ROUNDS {
        let Ok(mut t) = lake::Table::open(&table, &storage).await else {
            continue;
        };
        match t.compact(&options, &()).await {
            Ok(_) => {
                done = true;
                break;
            }
            Err(e) => eprintln!("final compaction failed, trying again: {e}"),
        }
    }
    assert!(done, "the final compaction never completed");
    // The sinks packed small files on the way (compaction before the last closes every
    // partition).
    let mut history = Vec::new();
    for _ in 0..ROUNDS {
        use futures::TryStreamExt as _;
        let Ok(t) = lake::Table::open(&table, &storage).await else {
            continue;
        };
        if let Ok(read) = t.delta().history(None).try_collect::<Vec<_>>().await {
            history = read;
            break;
        }
    }
    let packings = history.iter().filter(|c| lake::maintenance::is_packing(c)).count();
    eprintln!("{packings} packings in {} versions", history.len());
    assert!(packings > 0, "the sinks never packed their small files");
    report("game sink and compaction", proxy.counts(), redeliveries);
    assert_faults_hit_their_paths(&proxy, 3, 1);

    let rows = duckdb(
        standin.endpoint(),
        &format!("SELECT \"eventId\" FROM delta_scan('{table}')"),
    )
    .unwrap();
    let ids: Vec<String> = rows
        .iter()
        .map(|r| r[0].as_str().unwrap_or_default().to_owned())
        .collect();
    let unique: HashSet<String> = ids.iter().cloned().collect();
    assert_eq!(ids.len(), unique.len(), "every event once after compaction");
    assert_eq!(unique, expected_ids, "no event lost");
    let rejected = duckdb(
        standin.endpoint(),
        &format!("SELECT count(DISTINCT \"sequenceNumber\"), count(*) FROM delta_scan('{rejects_table}')"),
    )
    .unwrap();
    assert_eq!(
        (rejected[0][0].as_u64(), rejected[0][1].as_u64()),
        (Some(expected_rejects as u64), Some(expected_rejects as u64)),
        "every bad record rejected, once"
    );
}

/// A new bucket for a game sink's tables: the `game_events` and rejects locations, and the
/// sink's configuration of them.
async fn game_lake(standin: &StandIn, name: &str) -> (String, String, Config) {
    let bucket = standin.create_bucket(name).await.unwrap();
    let (events, rejects) = (
        StandIn::s3_uri(&bucket, "game_events"),
        StandIn::s3_uri(&bucket, "game_events_rejects"),
    );
    let config = Config::new(&events, Some(&rejects)).unwrap();
    (events, rejects, config)
}

/// Counts DuckDB finds in the game tables: events, distinct (gameId, eventId), rejects.
fn game_counts(endpoint: &str, events: &str, rejects: &str) -> (u64, u64, u64) {
    let row = duckdb(
        endpoint,
        &format!(
            "SELECT (SELECT count(*) FROM delta_scan('{events}')), \
             (SELECT count(*) FROM (SELECT DISTINCT \"gameId\", \"eventId\" FROM delta_scan('{events}'))), \
             (SELECT count(*) FROM delta_scan('{rejects}'))"
        ),
    )
    .unwrap();
    let n = |i: usize| row[0][i].as_u64().unwrap();
    (n(0), n(1), n(2))
}

/// Nothing can be staged (every write of a staged link refused): longer than the old budget of
/// ten retries, a batch is retried and nothing lost; past the point where the stream would drop
/// its records, a batch is parked whole, and `replay` brings it in once, however often it runs and
/// from whichever folder, leaving out the records a redelivery of the parked batch staged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unwritable_tables_lose_nothing_and_parked_records_replay_once() {
    let standin = StandIn::connect().await.unwrap();
    let (events, rejects, config) = game_lake(&standin, "parking-game").await;
    let parked = format!("{events}_parked");
    let direct = storage(standin.endpoint(), &standin);
    let healthy = Sink::open(&config, &direct).await.unwrap();
    let proxy = FaultProxy::start(standin.endpoint(), 21, FaultRates::none())
        .await
        .unwrap();
    let faulty = storage(proxy.endpoint(), &standin);
    let mut synth = Synth::new(GameSynthConfig {
        devices: 50,
        ..GameSynthConfig::default()
    });
    // Records that arrived days ago (shard_records' times are of 2026-11-20 to -23).
    let records = shard_records(0, 300, &mut synth);
    let expected_rejects = records.iter().filter(|r| event_id(r).is_none()).count() as u64;
    let expected_events = records.len() as u64 - expected_rejects;
    let refuse_staging = FaultRates {
        slow_down: 1.0,
        only_paths: Some(format!("{}/", lake::staging::STAGING_DIR)),
        only_writes: true,
        ..FaultRates::none()
    };

    // Without parking: every try refused, twelve deliveries (more than the old ten retries).
    let retrying = Sink::open(&config, &faulty).await.unwrap();
    proxy.set_rates(refuse_staging.clone());
    let short =
        Retry::within(Duration::from_millis(300)).with_delays(Duration::from_millis(5), Duration::from_millis(20));
    for _ in 0..12 {
        let report = retrying.process(&records[..100], &short).await;
        assert_eq!(
            report.retry_from.as_deref(),
            Some(records[0].kinesis.sequence_number.as_str())
        );
        assert_eq!((report.rows, report.parked), (0, 0));
    }
    assert!(proxy.counts().slow_down >= 12, "{:?}", proxy.counts());
    // The store recovers: the batch is delivered again and lands whole.
    proxy.set_rates(FaultRates::none());
    let (rows, rejected, _) = deliver(&retrying, &records[..100]).await;
    let rejects_first = records[..100].iter().filter(|r| event_id(r).is_none()).count();
    assert_eq!((rows, rejected), (100 - rejects_first as u64, rejects_first));

    // With parking: the records are past the point of parking, so the failing batch is parked
    // (events and rejects each where they belong) and Lambda moves on.
    let parking = config
        .clone()
        .with_parking(game_sink::Parking::new(&parked, 24).unwrap());
    let parking_sink = Sink::open(&parking, &faulty).await.unwrap();
    proxy.set_rates(refuse_staging);
    let report = parking_sink.process(&records[100..200], &short).await;
    assert_eq!(report.retry_from, None, "{report:?}");
    assert_eq!((report.rows, report.parked), (0, 100), "{report:?}");
    // Half the parked batch comes again (a function stopped after parking it, before it
    // answered) and is staged now: the replay must leave those records out.
    proxy.set_rates(FaultRates::none());
    deliver(&parking_sink, &records[100..150]).await;
    // The stream moves on: the next batch lands, and the shard's position passes the parked one.
    deliver(&parking_sink, &records[200..]).await;
    let (rows, _, rejects_in) = game_counts(standin.endpoint(), &events, &rejects);
    assert!(
        rows < expected_events && rejects_in < expected_rejects,
        "the parked batch is not in yet"
    );

    // Replayed twice, the second time from a copy in another folder: the parked records once.
    let folder = lake::Folder::open(&parked, &direct).unwrap();
    let names = folder.list().await.unwrap();
    assert_eq!(names.len(), 2, "one object per table: {names:?}");
    let copy = lake::Folder::open(&format!("{events}_parked_copy"), &direct).unwrap();
    for name in &names {
        copy.put(name, folder.get(name).await.unwrap()).await.unwrap();
        let replayed = healthy.replay(&folder, name, &retry()).await.unwrap();
        assert!(
            matches!(replayed, game_sink::Replayed::Committed(n) if n > 0),
            "{replayed:?}"
        );
    }
    assert!(folder.list().await.unwrap().is_empty(), "replayed objects are deleted");
    for name in &names {
        let again = healthy.replay(&copy, name, &retry()).await.unwrap();
        assert_eq!(again, game_sink::Replayed::AlreadyIn);
    }
    assert_eq!(
        game_counts(standin.endpoint(), &events, &rejects),
        (expected_events, expected_events, expected_rejects),
        "every event once (rows and distinct keys) and every reject once"
    );
}

/// Every commit PUT is answered by a dropped connection and carried out three seconds later,
/// after the committer's deadline: the committer must not delete the staged files the late version
/// names, so the table stays readable with every row; the next pass commits nothing again, and a
/// redelivery adds nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_that_lands_after_its_deadline_keeps_its_files() {
    let standin = StandIn::connect().await.unwrap();
    let (events, rejects, config) = game_lake(&standin, "late-commit").await;
    let healthy = Sink::open(&config, &storage(standin.endpoint(), &standin))
        .await
        .unwrap();
    let proxy = FaultProxy::start(standin.endpoint(), 22, FaultRates::none())
        .await
        .unwrap();
    // A client that gives up on a request at once, as one whose request timed out does (the
    // store's own retries would otherwise outlast the write's delay).
    let mut gives_up = storage(proxy.endpoint(), &standin);
    gives_up.extra.insert("max_retries".into(), "0".into());
    let late = Sink::open(&config, &gives_up).await.unwrap();
    let mut synth = Synth::new(GameSynthConfig::default());
    let records = shard_records(0, 50, &mut synth);
    let staged = late.stage(&records).await;
    assert_eq!((staged.retry_from.as_deref(), staged.rows), (None, 50), "{staged:?}");
    proxy.set_rates(FaultRates {
        late_write: 1.0,
        late_write_delay: Duration::from_secs(3),
        only_paths: Some("_delta_log/".into()),
        ..FaultRates::none()
    });
    let short =
        Retry::within(Duration::from_secs(1)).with_delays(Duration::from_millis(10), Duration::from_millis(100));
    let pass = late.commit_staged(&short).await.both();
    assert!(pass.is_err(), "the committer gave up: {pass:?}");
    assert!(proxy.counts().late_write >= 1, "{:?}", proxy.counts());
    // The write lands after the committer gave up.
    tokio::time::sleep(Duration::from_secs(5)).await;
    proxy.set_rates(FaultRates::none());
    assert_eq!(game_counts(standin.endpoint(), &events, &rejects), (50, 50, 0));
    // The next pass finds the links behind the late version's positions.
    let next = healthy.commit_staged(&retry()).await.both().unwrap();
    assert_eq!(next.events.links, 0, "{next:?}");
    // Kinesis delivers the batch again: the chain says it is in.
    let again = healthy.process(&records, &retry()).await;
    assert_eq!((again.rows, again.already_committed), (0, 50), "{again:?}");
    assert_eq!(game_counts(standin.endpoint(), &events, &rejects), (50, 50, 0));
}

/// The tenth commit's checkpoint is slow (every checkpoint write waits 8 s) and the invocation's
/// deadline near: the batch must be answered as committed at the deadline, the checkpoint left
/// to the next writer, and a redelivery adds nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_checkpoint_stops_at_the_deadline() {
    let standin = StandIn::connect().await.unwrap();
    let (events, rejects, config) = game_lake(&standin, "slow-checkpoint").await;
    let proxy = FaultProxy::start(standin.endpoint(), 23, FaultRates::none())
        .await
        .unwrap();
    let sink = Sink::open(&config, &storage(proxy.endpoint(), &standin)).await.unwrap();
    let mut synth = Synth::new(GameSynthConfig::default());
    let records = shard_records(0, 90, &mut synth);
    // Versions 1 to 9, one batch each (no rejects among the first 90 records).
    for batch in records[..81].chunks(9) {
        let report = sink.process(batch, &retry()).await;
        assert_eq!((report.retry_from.as_deref(), report.post_commit_failures), (None, 0));
    }
    proxy.set_rates(FaultRates {
        only_paths: Some("checkpoint".into()),
        ..FaultRates::delaying_writes(Duration::from_secs(8), Duration::from_secs(8))
    });
    // Version 10 writes a checkpoint after the commit; the invocation has two seconds.
    let near = Retry::within(Duration::from_secs(2)).with_delays(Duration::from_millis(10), Duration::from_millis(100));
    let report = sink.process(&records[81..], &near).await;
    assert_eq!(report.retry_from, None, "the batch is in: {report:?}");
    assert_eq!(report.post_commit_failures, 1, "the checkpoint was stopped: {report:?}");
    assert!(proxy.counts().delay >= 1, "{:?}", proxy.counts());
    proxy.set_rates(FaultRates::none());
    let again = sink.process(&records[81..], &retry()).await;
    assert_eq!((again.rows, again.already_committed), (0, 9), "{again:?}");
    assert_eq!(game_counts(standin.endpoint(), &events, &rejects), (90, 90, 0));
}

/// S3 carries out every commit PUT and then answers 500, then refuses every checkpoint write:
/// the commits landed, and must be taken for landed (files kept, sources recorded), not for failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_answered_500_after_landing_are_kept() {
    let standin = StandIn::connect().await.unwrap();
    let raw = standin.create_bucket("faults-500-raw").await.unwrap();
    let lake = standin.create_bucket("faults-500-lake").await.unwrap();
    let mut objects = Vec::new();
    let mut expected = HashMap::new();
    for i in 0..12u64 {
        let data = corpus(
            SynthConfig {
                seed: 900 + i,
                malformed_rate: 0.0,
                buckets: vec!["web-assets".into()],
                ..SynthConfig::default()
            },
            6_000,
        );
        let key = format!("logs/2026-11-30-11-00-{i:02}-LANDED");
        let rows = parse_lines(&data)
            .filter(|(_, _, parsed)| matches!(parsed, Ok(AccessLogRecord { bucket: Some(_), .. })))
            .count();
        expected.insert(format!("s3://{raw}/{key}"), rows as u64);
        objects.push(put_log(&standin, &raw, &key, data).await);
    }
    let proxy = FaultProxy::start(standin.endpoint(), 17, FaultRates::none())
        .await
        .unwrap();
    let ingestor = ingestor(&standin, &lake, proxy.endpoint(), 1);
    // The table exists first (its creation is tested under faults above).
    let first = ingestor.ingest(&objects[..1], &retry(), &()).await;
    assert!(first[0].1.is_ok(), "{first:?}");
    // Then every commit is carried out and answered 500; object_store's retry of the PUT then
    // meets the commit itself (412), which delta-rs reports as a version taken by another writer.
    proxy.set_rates(FaultRates {
        fail_after: 1.0,
        only_paths: Some("_delta_log/".into()),
        once_per_path: true,
        only_writes: true,
        ..FaultRates::none()
    });
    for object in &objects[1..6] {
        let outcome = ingestor.ingest(std::slice::from_ref(object), &retry(), &()).await;
        assert!(outcome[0].1.is_ok(), "{outcome:?}");
    }
    assert!(proxy.counts().fail_after >= 5, "{:?}", proxy.counts());
    // Then every checkpoint write (version 9's, every 10 commits) is carried out and its
    // connection dropped: the version landed, only the post-commit step failed.
    proxy.set_rates(FaultRates {
        drop_after: 1.0,
        only_paths: Some("checkpoint".into()),
        only_writes: true,
        ..FaultRates::none()
    });
    for object in &objects[6..] {
        let outcome = ingestor.ingest(std::slice::from_ref(object), &retry(), &()).await;
        assert!(outcome[0].1.is_ok(), "{outcome:?}");
    }
    assert!(
        proxy.counts().drop_after >= 1,
        "no checkpoint write was refused: {:?}",
        proxy.counts()
    );
    proxy.set_rates(FaultRates::none());
    let table = format!("s3://{lake}/access_logs/web-assets");
    assert_eq!(per_object(standin.endpoint(), &table), expected);
    // Delivered again, nothing is added.
    let again = ingestor.ingest(&objects, &retry(), &()).await;
    assert!(
        again
            .iter()
            .all(|(_, r)| r.as_ref().is_ok_and(|r| r.already_ingested())),
        "{again:?}"
    );
    assert_eq!(per_object(standin.endpoint(), &table), expected);
}

/// Runs the ignored test `name` of this binary as a child process, with `values` in the
/// variables `names` and the stand-in's endpoint, its standard output piped for its
/// `LAKELOG-CHILD` lines: a writer, committer or compactor that the test kills mid-way.
fn spawn_child<const N: usize>(name: &str, names: [&str; N], values: [&str; N], standin: &str) -> std::process::Child {
    // The harness names a test by its path below the binary's root: `faults::killed_writer`.
    let name = match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::{name}"),
        None => name.to_owned(),
    };
    std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &name, "--ignored", "--nocapture"])
        .envs(names.into_iter().zip(values))
        .env(lakelog_tests::ENDPOINT_VAR, standin)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Variables that hand the killed writer its work.
const CHILD_VARS: [&str; 4] = [
    "LAKELOG_CHILD_ENDPOINT",
    "LAKELOG_CHILD_RAW",
    "LAKELOG_CHILD_KEY",
    "LAKELOG_CHILD_LAKE",
];

/// The writer that [`a_writer_killed_after_staging_adds_nothing_when_redelivered`] starts as a
/// process of its own: it stages one object as the function does, says so, and waits to be killed
/// before it answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the writer process of a_writer_killed_after_staging_adds_nothing_when_redelivered"]
async fn killed_writer() {
    let [endpoint, raw, key, lake] = CHILD_VARS.map(|v| std::env::var(v).unwrap_or_else(|_| panic!("{v} is not set")));
    let standin = StandIn::connect().await.unwrap();
    let outcome = ingestor(&standin, &lake, &endpoint, 1)
        .with_staging(true)
        .ingest(&[ObjectRef::S3 { bucket: raw, key }], &retry(), &())
        .await;
    assert!(outcome[0].1.is_ok(), "{outcome:?}");
    println!("LAKELOG-CHILD staged");
    tokio::time::sleep(Duration::from_secs(600)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_killed_after_staging_adds_nothing_when_redelivered() {
    use std::io::BufRead as _;

    let standin = StandIn::connect().await.unwrap();
    let raw = standin.create_bucket("killed-raw").await.unwrap();
    let lake = standin.create_bucket("killed-lake").await.unwrap();
    let data = corpus(
        SynthConfig {
            seed: 4242,
            malformed_rate: 0.05,
            buckets: vec!["web-assets".into()],
            ..SynthConfig::default()
        },
        40_000,
    );
    let key = "logs/2026-11-30-12-00-00-KILLED".to_owned();
    let uri = format!("s3://{raw}/{key}");
    let (mut rows, mut rejected) = (0u64, 0u64);
    for (_, _, parsed) in parse_lines(&data) {
        match parsed {
            Ok(AccessLogRecord { bucket: Some(_), .. }) => rows += 1,
            _ => rejected += 1,
        }
    }
    put_log(&standin, &raw, &key, data).await;
    let proxy = FaultProxy::start(standin.endpoint(), 18, FaultRates::from_env_or(SUITE_RATE))
        .await
        .unwrap();

    // The writer, a process of this test binary, killed (SIGKILL) once it has staged.
    let mut child = spawn_child(
        "killed_writer",
        CHILD_VARS,
        [proxy.endpoint(), &raw, &key, &lake],
        standin.endpoint(),
    );
    let stdout = child.stdout.take().unwrap();
    let committed = tokio::task::spawn_blocking(move || {
        std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .any(|line| line.contains("LAKELOG-CHILD staged"))
    })
    .await
    .unwrap();
    // Already gone if it failed; then `committed` says so below.
    let _ = child.kill();
    let status = child.wait().unwrap();
    assert!(committed, "the writer never staged (exit: {status})");
    assert!(!status.success(), "the writer was killed, it did not answer");

    // Redelivered to a new instance, which stages it again, before and after the committer ran:
    // the object's rows once.
    let object = ObjectRef::S3 {
        bucket: raw.clone(),
        key,
    };
    let instance = ingestor(&standin, &lake, proxy.endpoint(), 1).with_staging(true);
    let again = instance.ingest(std::slice::from_ref(&object), &retry(), &()).await;
    assert!(again[0].1.as_ref().is_ok_and(|r| !r.already_ingested()), "{again:?}");
    commit_all_staged(&ingestor(&standin, &lake, proxy.endpoint(), 1)).await;
    let after = instance.ingest(std::slice::from_ref(&object), &retry(), &()).await;
    assert!(after[0].1.as_ref().is_ok_and(|r| r.already_ingested()), "{after:?}");
    let table = format!("s3://{lake}/access_logs/web-assets");
    assert_eq!(
        per_object(standin.endpoint(), &table),
        HashMap::from([(uri.clone(), rows)])
    );
    assert!(rejected > 0, "the object has malformed lines");
    assert_eq!(
        per_object(standin.endpoint(), &template(&lake).default_rejects()),
        HashMap::from([(uri, rejected)])
    );
}

/// Variables that hand the killed compaction its table.
const COMPACTOR_VARS: [&str; 2] = ["LAKELOG_CHILD_ENDPOINT", "LAKELOG_CHILD_TABLE"];

/// How the killed compaction runs: every untagged file a bin of its own, so that it commits many
/// times and a kill lands between or inside bins.
fn bin_by_bin() -> CompactOptions {
    CompactOptions {
        dedup_key: Some(game_events::batch::DEDUP_KEY.into()),
        now: Utc::now() + chrono::Duration::days(30),
        target_file_size: 1,
        ..CompactOptions::default()
    }
}

/// The compaction that [`a_compaction_killed_midway_loses_nothing`] starts as a process of its
/// own: it says when each bin is committed, and when it is done (it should never be).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the process of a_compaction_killed_midway_loses_nothing"]
async fn killed_compactor() {
    struct Say;
    impl CompactObserver for Say {
        fn bin_done(&self, _: &BinOutcome) {
            println!("LAKELOG-CHILD bin committed");
        }
    }
    let [endpoint, table] = COMPACTOR_VARS.map(|v| std::env::var(v).unwrap_or_else(|_| panic!("{v} is not set")));
    let standin = StandIn::connect().await.unwrap();
    let mut t = lake::Table::open(&table, &storage(&endpoint, &standin)).await.unwrap();
    t.compact(&bin_by_bin(), &Say).await.unwrap();
    println!("LAKELOG-CHILD done");
}

/// A compaction killed (SIGKILL) between or inside its bins, as a Lambda past its timeout is:
/// the table stays readable with every event once, and the next run finishes the work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compaction_killed_midway_loses_nothing() {
    use std::io::BufRead as _;

    let standin = StandIn::connect().await.unwrap();
    let (events, rejects, config) = game_lake(&standin, "killed-compaction").await;
    let direct = storage(standin.endpoint(), &standin);
    let sink = Sink::open(&config, &direct).await.unwrap();
    let mut synth = Synth::new(GameSynthConfig::default());
    let records = shard_records(0, 600, &mut synth);
    for batch in records.chunks(20) {
        deliver(&sink, batch).await;
    }
    let expected = game_counts(standin.endpoint(), &events, &rejects);
    assert_eq!(expected, (594, 594, 6));

    // Each data file written by the compaction takes a little while, so that it is killed
    // while it works.
    let proxy = FaultProxy::start(standin.endpoint(), 24, FaultRates::none())
        .await
        .unwrap();
    proxy.set_rates(FaultRates::delaying_writes(
        Duration::from_millis(150),
        Duration::from_millis(400),
    ));
    let mut child = spawn_child(
        "killed_compactor",
        COMPACTOR_VARS,
        [proxy.endpoint(), &events],
        standin.endpoint(),
    );
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let (committed, mut lines) = tokio::task::spawn_blocking(move || {
        let committed = lines
            .by_ref()
            .map_while(Result::ok)
            .any(|line| line.contains("LAKELOG-CHILD bin committed"));
        (committed, lines)
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let _ = child.kill();
    let status = child.wait().unwrap();
    let finished = lines
        .by_ref()
        .map_while(Result::ok)
        .any(|line| line.contains("LAKELOG-CHILD done"));
    assert!(committed, "the compaction never committed a bin (exit: {status})");
    assert!(!finished, "the compaction finished before it was killed");
    assert!(proxy.counts().delay > 0, "{:?}", proxy.counts());

    assert_eq!(
        game_counts(standin.endpoint(), &events, &rejects),
        expected,
        "rows after the kill"
    );
    let mut table = lake::Table::open(&events, &direct).await.unwrap();
    let report = table.compact(&bin_by_bin(), &()).await.unwrap();
    assert!(!report.bins.is_empty(), "the killed run left work: {report:?}");
    assert_eq!(
        game_counts(standin.endpoint(), &events, &rejects),
        expected,
        "rows after the next run"
    );
    let again = table.compact(&bin_by_bin(), &()).await.unwrap();
    assert_eq!(again.bins_planned, 0, "the next run finished the work: {again:?}");
}

/// VACUUM as maintenance runs it, while a reader still reads the version before a compaction
/// and a writer has written its data files but not yet committed them: the reader finds every
/// file of its version, and the writer's commit names files that are there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vacuum_beside_a_reader_and_a_writer_loses_nothing() {
    let standin = StandIn::connect().await.unwrap();
    let (events, rejects, config) = game_lake(&standin, "vacuum-game").await;
    let direct = storage(standin.endpoint(), &standin);
    let sink = Sink::open(&config, &direct).await.unwrap();
    let mut synth = Synth::new(GameSynthConfig::default());
    let records = shard_records(0, 400, &mut synth);
    for batch in records[..300].chunks(30) {
        deliver(&sink, batch).await;
    }

    // The reader loads the table, then a compaction removes every file of its version.
    let reader = lake::Table::open(&events, &direct).await.unwrap();
    let files: Vec<_> = reader
        .delta()
        .snapshot()
        .unwrap()
        .log_data()
        .iter()
        .map(|f| f.path().into_owned())
        .collect();
    let mut table = lake::Table::open(&events, &direct).await.unwrap();
    let compacted = table.compact(&bin_by_bin(), &()).await.unwrap();
    assert_eq!(compacted.files_removed(), files.len(), "{compacted:?}");

    // The writer's commit is held up 4 s after its data files are written; VACUUM runs then.
    let proxy = FaultProxy::start(standin.endpoint(), 25, FaultRates::none())
        .await
        .unwrap();
    proxy.set_rates(FaultRates {
        only_paths: Some("_delta_log/0".into()),
        ..FaultRates::delaying_writes(Duration::from_secs(4), Duration::from_secs(4))
    });
    let writer = Sink::open(&config, &storage(proxy.endpoint(), &standin)).await.unwrap();
    let write = deliver(&writer, &records[300..]);
    let vacuum = async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let mut table = lake::Table::open(&events, &direct).await.unwrap();
        table
            .vacuum(&lake::maintenance::VacuumOptions::default())
            .await
            .unwrap()
    };
    let ((rows, _, _), vacuumed) = tokio::join!(write, vacuum);
    assert!(proxy.counts().delay >= 1, "{:?}", proxy.counts());
    assert_eq!(rows, 99, "the writer's batch is in");
    assert!(
        vacuumed.files.is_empty(),
        "VACUUM deleted files within the retention: {vacuumed:?}"
    );

    let (bucket, prefix) = events.trim_start_matches("s3://").split_once('/').unwrap();
    for path in &files {
        let found = standin
            .s3()
            .head_object()
            .bucket(bucket)
            .key(format!("{prefix}/{path}"))
            .send()
            .await;
        assert!(found.is_ok(), "{path} of the reader's version is gone: {found:?}");
    }
    assert_eq!(game_counts(standin.endpoint(), &events, &rejects), (396, 396, 4));
    // A retention under the minimum is refused: it would take files from such readers.
    let mut table = lake::Table::open(&events, &direct).await.unwrap();
    let short = lake::maintenance::VacuumOptions {
        retention: chrono::TimeDelta::hours(1),
        ..lake::maintenance::VacuumOptions::default()
    };
    assert!(table.vacuum(&short).await.is_err());
}

/// S3 stalls: every request is held 30 s. The sink's handler answers before the invocation's
/// deadline all the same (a commit try and the S3 calls under it are stopped, not waited for),
/// asking for the whole batch again; once the store answers, the redelivered batch lands every
/// event and reject once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sink_answers_by_its_deadline_when_the_store_stalls() {
    use aws_lambda_events::event::kinesis::KinesisEvent;
    use lambda_runtime::{Context, LambdaEvent};

    let standin = StandIn::connect().await.unwrap();
    let (events, rejects, config) = game_lake(&standin, "stalled-store").await;
    let proxy = FaultProxy::start(standin.endpoint(), 26, FaultRates::none())
        .await
        .unwrap();
    // Opened while the store answers, as a warm instance is.
    let stalled = Sink::open(&config, &storage(proxy.endpoint(), &standin)).await.unwrap();
    let mut synth = Synth::new(GameSynthConfig {
        devices: 20,
        ..GameSynthConfig::default()
    });
    let records = shard_records(0, 60, &mut synth);
    let expected_rejects = records.iter().filter(|r| event_id(r).is_none()).count() as u64;
    let expected_events = records.len() as u64 - expected_rejects;
    proxy.set_rates(FaultRates {
        delay: 1.0,
        min_delay: Duration::from_secs(30),
        max_delay: Duration::from_secs(30),
        ..FaultRates::none()
    });

    let now_ms = || u64::try_from(Utc::now().timestamp_millis()).unwrap();
    let mut context = Context::default();
    context.deadline = now_ms() + 8_000;
    let mut event = KinesisEvent::default();
    event.records = records.clone();
    let response = game_sink_lambda::handler::handle(
        LambdaEvent::new(event, context.clone()),
        &stalled,
        &game_sink_lambda::metrics::Reporter::new(emf::DEFAULT_NAMESPACE, 0),
        None,
    )
    .await
    .unwrap();
    assert!(
        now_ms() < context.deadline,
        "the handler answered after the invocation's deadline"
    );
    let retry_from: Vec<Option<String>> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone())
        .collect();
    assert_eq!(retry_from, [Some(records[0].kinesis.sequence_number.clone())]);

    // The store answers again: the batch, delivered again, lands once.
    proxy.set_rates(FaultRates::none());
    let healthy = Sink::open(&config, &storage(standin.endpoint(), &standin))
        .await
        .unwrap();
    deliver(&healthy, &records).await;
    assert_eq!(
        game_counts(standin.endpoint(), &events, &rejects),
        (expected_events, expected_events, expected_rejects),
        "every event once (rows and distinct keys) and every reject once"
    );
}

/// S3 stalls for the access-log function too: every request held 30 s. Its handler answers
/// before the invocation's deadline, every message to be retried; once the store answers, the
/// messages delivered again land every line of every object once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ingest_answers_by_its_deadline_when_the_store_stalls() {
    use aws_lambda_events::event::sqs::SqsEvent;
    use lambda_runtime::{Context, LambdaEvent};

    let standin = StandIn::connect().await.unwrap();
    let raw = standin.create_bucket("stalled-raw").await.unwrap();
    let lake = standin.create_bucket("stalled-lake").await.unwrap();
    let mut expected: HashMap<String, u64> = HashMap::new();
    let mut messages = Vec::new();
    for i in 0..3u64 {
        let data = corpus(
            SynthConfig {
                seed: 900 + i,
                malformed_rate: 0.0,
                buckets: vec!["stalled-assets".into()],
                ..SynthConfig::default()
            },
            4_000,
        );
        let key = format!("logs/2026-11-30-11-00-0{i}-STALLED{i}");
        expected.insert(format!("s3://{raw}/{key}"), parse_lines(&data).count() as u64);
        put_log(&standin, &raw, &key, data).await;
        let body = serde_json::json!({"Records": [{
            "eventSource": "aws:s3",
            "eventName": "ObjectCreated:Put",
            "s3": {"bucket": {"name": raw}, "object": {"key": key}},
        }]});
        messages.push(serde_json::json!({"messageId": format!("m{i}"), "body": body.to_string()}));
    }
    let event = |context: Context| {
        let sqs: SqsEvent = serde_json::from_value(serde_json::json!({ "Records": messages })).unwrap();
        LambdaEvent::new(sqs, context)
    };
    let proxy = FaultProxy::start(standin.endpoint(), 27, FaultRates::none())
        .await
        .unwrap();
    proxy.set_rates(FaultRates {
        delay: 1.0,
        min_delay: Duration::from_secs(30),
        max_delay: Duration::from_secs(30),
        ..FaultRates::none()
    });
    let stalled = ingestor(&standin, &lake, proxy.endpoint(), 2).with_read_deadline(true);
    let now_ms = || u64::try_from(Utc::now().timestamp_millis()).unwrap();
    let mut context = Context::default();
    context.deadline = now_ms() + 8_000;
    let response = access_log_lambda::handler::handle(event(context.clone()), &stalled, emf::DEFAULT_NAMESPACE)
        .await
        .unwrap();
    assert!(
        now_ms() < context.deadline,
        "the handler answered after the invocation's deadline"
    );
    let mut failed: Vec<String> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone())
        .collect();
    failed.sort();
    assert_eq!(failed, ["m0", "m1", "m2"]);

    // The store answers again: the messages, delivered again, land every line once.
    proxy.set_rates(FaultRates::none());
    let healthy = ingestor(&standin, &lake, standin.endpoint(), 2);
    let response = access_log_lambda::handler::handle(event(Context::default()), &healthy, emf::DEFAULT_NAMESPACE)
        .await
        .unwrap();
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let table = format!("s3://{lake}/access_logs/stalled-assets");
    assert_eq!(
        per_object(standin.endpoint(), &table),
        expected,
        "every line of every object once"
    );
}

/// What a child process tells its test, a line on standard output; once the test stopped
/// reading (it has what it waits for, and kills the child), the line is dropped.
fn say(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stdout(), "{line}");
}

/// Variables that hand the killed committer its table.
const COMMITTER_VARS: [&str; 2] = ["LAKELOG_CHILD_ENDPOINT", "LAKELOG_CHILD_EVENTS"];

/// The committer that [`a_committer_killed_midway_commits_each_batch_once`] starts as a process of
/// its own: it says when its pass has committed, then goes on (deleting the committed links,
/// packing) until it is killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the process of a_committer_killed_midway_commits_each_batch_once"]
async fn killed_committer() {
    let [endpoint, events] = COMMITTER_VARS.map(|v| std::env::var(v).unwrap_or_else(|_| panic!("{v} is not set")));
    let standin = StandIn::connect().await.unwrap();
    let config = Config::new(&events, None).unwrap().with_settle(Some(Settle::after(8)));
    let sink = Sink::new(&config, &storage(&endpoint, &standin));
    loop {
        match sink.commit_staged(&retry()).await.both() {
            Ok(pass) if pass.events.links > 0 => say("LAKELOG-CHILD committed"),
            Ok(_) => say("LAKELOG-CHILD nothing left"),
            Err(e) => say(&format!("LAKELOG-CHILD failed: {e}")),
        }
    }
}

/// Eight shards' batches staged, and a committer killed (SIGKILL) once its commit landed, while
/// it deletes the links and packs files, as a Lambda past its timeout is: the next committer
/// commits nothing twice and the rest once, and every batch delivered again adds nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_committer_killed_midway_commits_each_batch_once() {
    use std::io::BufRead as _;

    let standin = StandIn::connect().await.unwrap();
    let (events, rejects, config) = game_lake(&standin, "killed-committer").await;
    let direct = storage(standin.endpoint(), &standin);
    let writer = Sink::open(&config, &direct).await.unwrap();
    let mut synth = Synth::new(GameSynthConfig::default());
    let shards: Vec<Vec<KinesisEventRecord>> = (0..8).map(|s| shard_records(s, 200, &mut synth)).collect();
    for shard in &shards {
        for batch in shard[..100].chunks(20) {
            assert_eq!(writer.stage(batch).await.retry_from, None);
        }
    }
    // Every write the committer makes after its commit (deleting links, packing) takes a while.
    let proxy = FaultProxy::start(standin.endpoint(), 27, FaultRates::none())
        .await
        .unwrap();
    proxy.set_rates(FaultRates::delaying_writes(
        Duration::from_millis(100),
        Duration::from_millis(300),
    ));
    let mut child = spawn_child(
        "killed_committer",
        COMMITTER_VARS,
        [proxy.endpoint(), &events],
        standin.endpoint(),
    );
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let committed = tokio::task::spawn_blocking(move || {
        lines
            .by_ref()
            .map_while(Result::ok)
            .any(|line| line.contains("LAKELOG-CHILD committed"))
    });
    // The writers go on beside it: the second half of every shard.
    for shard in &shards {
        for batch in shard[100..].chunks(20) {
            assert_eq!(writer.stage(batch).await.retry_from, None);
        }
    }
    let committed = committed.await.unwrap();
    let _ = child.kill();
    let status = child.wait().unwrap();
    assert!(committed, "the committer never committed (exit: {status})");
    proxy.set_rates(FaultRates::none());

    // The next committer, and every batch delivered again.
    commit_all(&writer).await;
    for shard in &shards {
        let again = writer.stage(shard).await;
        assert_eq!((again.retry_from.as_deref(), again.rows), (None, 0), "{again:?}");
    }
    commit_all(&writer).await;
    let all: Vec<&KinesisEventRecord> = shards.iter().flatten().collect();
    let expected_rejects = all.iter().filter(|r| event_id(r).is_none()).count() as u64;
    let expected_events = all.len() as u64 - expected_rejects;
    assert_eq!(
        game_counts(standin.endpoint(), &events, &rejects),
        (expected_events, expected_events, expected_rejects),
        "every event once (rows and distinct keys) and every reject once"
    );
}

/// Variables that hand the killed sink writer its table and shard.
const SINK_WRITER_VARS: [&str; 2] = ["LAKELOG_CHILD_ENDPOINT", "LAKELOG_CHILD_EVENTS"];

/// The sink writer that [`a_sink_writer_killed_while_staging_adds_nothing_twice`] starts as a
/// process of its own: it stages its shard's batches one after the other, saying so after each,
/// until it is killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the process of a_sink_writer_killed_while_staging_adds_nothing_twice"]
async fn killed_sink_writer() {
    let [endpoint, events] = SINK_WRITER_VARS.map(|v| std::env::var(v).unwrap_or_else(|_| panic!("{v} is not set")));
    let standin = StandIn::connect().await.unwrap();
    let sink = Sink::new(&Config::new(&events, None).unwrap(), &storage(&endpoint, &standin));
    let mut synth = Synth::new(GameSynthConfig::default());
    let records = shard_records(0, 400, &mut synth);
    for batch in records.chunks(20) {
        let report = sink.stage(batch).await;
        say(&format!("LAKELOG-CHILD staged {}", report.retry_from.is_none()));
    }
    say("LAKELOG-CHILD done");
}

/// A sink writer killed (SIGKILL) in the middle of its batches, after some were staged and while
/// another's files or link are being written: Kinesis hands the shard's records to a new instance
/// from the first it was not told of; with the committer's passes, every event and reject once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sink_writer_killed_while_staging_adds_nothing_twice() {
    use std::io::BufRead as _;

    let standin = StandIn::connect().await.unwrap();
    let (events, rejects, config) = game_lake(&standin, "killed-sink-writer").await;
    let direct = storage(standin.endpoint(), &standin);
    let sink = Sink::open(&config, &direct).await.unwrap();
    // The same records the child generates (same seed and shard).
    let mut synth = Synth::new(GameSynthConfig::default());
    let records = shard_records(0, 400, &mut synth);
    let proxy = FaultProxy::start(standin.endpoint(), 28, FaultRates::none())
        .await
        .unwrap();
    proxy.set_rates(FaultRates::delaying_writes(
        Duration::from_millis(20),
        Duration::from_millis(200),
    ));
    let mut child = spawn_child(
        "killed_sink_writer",
        SINK_WRITER_VARS,
        [proxy.endpoint(), &events],
        standin.endpoint(),
    );
    let lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    // Killed once it answered three batches, somewhere in the fourth.
    let answered = tokio::task::spawn_blocking(move || {
        lines
            .map_while(Result::ok)
            .filter(|line| line.contains("LAKELOG-CHILD staged true"))
            .take(3)
            .count()
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    let _ = child.kill();
    let status = child.wait().unwrap();
    assert_eq!(
        answered, 3,
        "the writer staged fewer than three batches (exit: {status})"
    );
    assert!(!status.success(), "the writer was killed");

    // A committer pass between, then the shard from the fourth batch on (Kinesis was told of
    // three), and the whole shard once more (a lease that moved).
    commit_all(&sink).await;
    for from in [60, 0] {
        for batch in records[from..].chunks(20) {
            assert_eq!(sink.stage(batch).await.retry_from, None);
        }
    }
    commit_all(&sink).await;
    let expected_rejects = records.iter().filter(|r| event_id(r).is_none()).count() as u64;
    let expected_events = records.len() as u64 - expected_rejects;
    assert_eq!(
        game_counts(standin.endpoint(), &events, &rejects),
        (expected_events, expected_events, expected_rejects),
        "every event once (rows and distinct keys) and every reject once"
    );
}
