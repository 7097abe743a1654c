//! Each Kinesis record once in the tables, however Lambda delivers it again: the whole batch after
//! its commit landed, the part after a partial failure, the halves of a bisected batch, and the
//! records of a parent shard after a reshard; and however writers and the committer meet: a batch
//! staged and delivered again before any commit, writers of many shards staging at once, two
//! committers at once, parked records replayed twice or from another folder.

use aws_lambda_events::event::kinesis::KinesisEventRecord;
use aws_lambda_events::kinesis::KinesisRecord;
use chrono::{TimeZone, Utc};
use fixtures::game::{Synth, SynthConfig};
use game_events::Envelope;
use game_sink::{BatchReport, Config, Sink};
use lake::{Retry, StorageConfig};

const STREAM_ARN: &str = "arn:aws:kinesis:us-east-1:123456789012:stream/game-events";

/// `n` records of shard `shard`, numbered from `first`; every 10th cannot be decoded, and the
/// events alternate between two games that share their eventIds.
fn records(shard: usize, first: usize, n: usize) -> Vec<KinesisEventRecord> {
    let mut synth = Synth::new(SynthConfig {
        seed: 11 + shard as u64,
        devices: 20,
        ..SynthConfig::default()
    });
    let envelope = Envelope::new(serde_json::Map::new());
    let time = Utc.with_ymd_and_hms(2026, 11, 30, 23, 59, 0).unwrap();
    (first..first + n)
        .map(|i| {
            let mut kinesis = KinesisRecord::default();
            *kinesis.data = if i % 10 == 9 {
                b"{not json".to_vec()
            } else {
                let game = if i.is_multiple_of(2) {
                    "space-miners"
                } else {
                    "tiny-towns"
                };
                // Two games' clients may send the same ids: the key is (game, eventId).
                let mut event = synth.event(time).stamp(time + chrono::Duration::seconds(i as i64));
                event.event_id = uuid::Uuid::from_u128((i / 2) as u128 + 1);
                envelope.record(&event.with_game(game)).unwrap()
            };
            kinesis.sequence_number = format!("4959{shard:02}{i:050}");
            kinesis.partition_key = format!("pk-{i}");
            let mut record = KinesisEventRecord::default();
            record.event_id = Some(format!("shardId-{shard:012}:{}", kinesis.sequence_number));
            record.event_source_arn = Some(STREAM_ARN.to_owned());
            record.kinesis = kinesis;
            record
        })
        .collect()
}

fn rejects_in(records: &[KinesisEventRecord]) -> u64 {
    records.iter().filter(|r| r.kinesis.data.starts_with(b"{not")).count() as u64
}

async fn rows(uri: &str) -> u64 {
    let table = lake::Table::open(uri, &StorageConfig::default()).await.unwrap();
    table.file_stats().unwrap().rows
}

async fn sink() -> (tempfile::TempDir, Sink, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("game_events").to_str().unwrap().to_owned();
    let rejects = format!("{events}_rejects");
    let sink = Sink::open(&Config::new(&events, None).unwrap(), &StorageConfig::default())
        .await
        .unwrap();
    (dir, sink, events, rejects)
}

async fn process(sink: &Sink, batch: &[KinesisEventRecord]) -> BatchReport {
    let report = sink.process(batch, &Retry::default()).await;
    assert_eq!(report.retry_from, None, "{report:?}");
    report
}

#[tokio::test]
async fn a_batch_delivered_again_after_its_commit_adds_nothing() {
    let (_dir, sink, events, rejects) = sink().await;
    let batch = records(0, 0, 40);
    let first = process(&sink, &batch).await;
    assert_eq!((first.rows, first.rejected as u64), (36, 4));
    assert_eq!(first.already_committed, 0);
    // Lambda timed out after the commit: the same batch again.
    let again = process(&sink, &batch).await;
    assert_eq!((again.rows, again.rejected, again.already_committed), (0, 0, 40));
    assert!(again.events.is_empty(), "no live figures for what was already counted");
    assert_eq!((rows(&events).await, rows(&rejects).await), (36, 4));
}

#[tokio::test]
async fn the_part_after_a_partial_failure_and_a_bisected_batch_add_nothing_twice() {
    let (_dir, sink, events, rejects) = sink().await;
    let batch = records(0, 0, 60);
    // A bisected batch: its first half, then (the function erred after that commit) the whole
    // batch, then its second half again.
    process(&sink, &batch[..30]).await;
    let whole = process(&sink, &batch).await;
    assert_eq!(whole.already_committed, 30);
    let second = process(&sink, &batch[30..]).await;
    assert_eq!(second.rows, 0);
    // A partial failure reported from record 45: Lambda delivers from there, with later records.
    let mut resumed = batch[45..].to_vec();
    resumed.extend(records(0, 60, 20));
    let report = process(&sink, &resumed).await;
    assert_eq!(report.already_committed, 15);
    let expected_rejects = rejects_in(&batch) + rejects_in(&records(0, 60, 20));
    assert_eq!(rows(&rejects).await, expected_rejects);
    assert_eq!(rows(&events).await, 80 - expected_rejects);
}

#[tokio::test]
async fn after_a_reshard_the_children_are_written_and_the_parent_is_not_again() {
    let (_dir, sink, events, _rejects) = sink().await;
    let parent = records(0, 0, 30);
    process(&sink, &parent).await;
    // The children's sequence numbers are their own: lower than the parent's last one.
    let children = [records(1, 0, 20), records(2, 0, 20)];
    for child in &children {
        let report = process(&sink, child).await;
        assert_eq!(report.already_committed, 0);
        assert_eq!(report.rows, 20 - rejects_in(child));
    }
    // The parent's last batch comes again (its lease moved during the reshard).
    assert_eq!(process(&sink, &parent[10..]).await.rows, 0);
    let expected = 30 - rejects_in(&parent) + children.iter().map(|c| 20 - rejects_in(c)).sum::<u64>();
    assert_eq!(rows(&events).await, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_handed_the_same_batch_write_it_once() {
    let (dir, sink, events, rejects) = sink().await;
    // A second instance of the function, with tables of its own handle.
    let other = Sink::open(&Config::new(&events, None).unwrap(), &StorageConfig::default())
        .await
        .unwrap();
    let batch = records(3, 0, 50);
    let retry = Retry::default();
    let (a, b) = tokio::join!(sink.process(&batch, &retry), other.process(&batch, &retry));
    // One of them may be refused (the other moved the shard first): Lambda delivers its batch
    // again, and then it finds everything in.
    for report in [a, b] {
        if report.retry_from.is_some() {
            let again = process(&sink, &batch).await;
            assert_eq!(again.rows, 0);
        }
    }
    assert_eq!(rows(&events).await, 50 - rejects_in(&batch));
    assert_eq!(rows(&rejects).await, rejects_in(&batch));
    drop(dir);
}

#[tokio::test]
async fn delivered_until_committed_a_batch_is_in_once_and_nothing_is_handed_back() {
    let (_dir, sink, events, rejects) = sink().await;
    let batch = records(0, 0, 40);
    let no_wait = |_| std::time::Duration::ZERO;
    let (report, rest) = sink
        .process_until_committed(&batch, &Retry::default(), 3, no_wait)
        .await;
    assert!(rest.is_empty(), "{report:?}");
    assert_eq!((report.rows, report.rejected as u64), (36, 4));
    let (again, rest) = sink
        .process_until_committed(&batch, &Retry::default(), 3, no_wait)
        .await;
    assert!(rest.is_empty());
    assert_eq!((again.rows, again.already_committed), (0, 40));
    assert_eq!((rows(&events).await, rows(&rejects).await), (36, 4));
}

/// Stages `batch` as the function's writer does, and checks that all of it was staged.
async fn stage(sink: &Sink, batch: &[KinesisEventRecord]) -> BatchReport {
    let report = sink.stage(batch).await;
    assert_eq!(report.retry_from, None, "{report:?}");
    report
}

#[tokio::test]
async fn a_staged_batch_delivered_again_before_any_commit_is_staged_once() {
    let (_dir, sink, events, rejects) = sink().await;
    let batch = records(0, 0, 40);
    let first = stage(&sink, &batch).await;
    assert_eq!((first.rows, first.rejected as u64), (36, 4));
    // Nothing is in the tables until the committer runs.
    assert_eq!((rows(&events).await, rows(&rejects).await), (0, 0));
    // The writer was killed after staging, before it answered: another instance gets the batch.
    let other = Sink::open(&Config::new(&events, None).unwrap(), &StorageConfig::default())
        .await
        .unwrap();
    let again = stage(&other, &batch).await;
    assert_eq!((again.rows, again.already_committed), (0, 40));
    // Bisected: its halves again, then the batch with later records.
    stage(&other, &batch[..20]).await;
    stage(&other, &batch[20..]).await;
    let mut more = batch[30..].to_vec();
    more.extend(records(0, 40, 20));
    let resumed = stage(&sink, &more).await;
    assert_eq!(resumed.already_committed, 10);
    let commit = sink.commit_staged(&Retry::default()).await.both().unwrap();
    assert!(commit.events.version.is_some());
    let all = records(0, 0, 60);
    assert_eq!(rows(&rejects).await, rejects_in(&all));
    assert_eq!(rows(&events).await, 60 - rejects_in(&all));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_shards_stage_at_once_and_one_commit_takes_them_all() {
    let (_dir, sink, events, rejects) = sink().await;
    let shards: Vec<Vec<KinesisEventRecord>> = (0..8).map(|shard| records(shard, 0, 30)).collect();
    let (config, storage) = (Config::new(&events, None).unwrap(), StorageConfig::default());
    let writers: Vec<Sink> = (0..8).map(|_| Sink::new(&config, &storage)).collect();
    for round in 0..3 {
        let staged = futures::future::join_all(
            writers
                .iter()
                .zip(&shards)
                .map(|(writer, records)| writer.stage(&records[round * 10..round * 10 + 10])),
        )
        .await;
        assert!(staged.iter().all(|r| r.retry_from.is_none()), "{staged:?}");
    }
    let before = lake::Table::open(&events, &StorageConfig::default())
        .await
        .unwrap()
        .delta()
        .version();
    let commit = sink.commit_staged(&Retry::default()).await.both().unwrap();
    assert_eq!((commit.events.links, commit.events.streams), (24, 8));
    let table = lake::Table::open(&events, &StorageConfig::default()).await.unwrap();
    // One commit (a packing of small files may follow it).
    assert!(table.delta().version() >= before.map(|v| v + 1));
    let expected_rejects: u64 = shards.iter().map(|s| rejects_in(s)).sum();
    assert_eq!(rows(&rejects).await, expected_rejects);
    assert_eq!(rows(&events).await, 240 - expected_rejects);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_committers_at_once_commit_each_batch_once() {
    let (_dir, sink, events, rejects) = sink().await;
    let other = Sink::open(&Config::new(&events, None).unwrap(), &StorageConfig::default())
        .await
        .unwrap();
    let mut expected = 0;
    for shard in 0..4 {
        for first in [0, 25] {
            let batch = records(shard, first, 25);
            expected += 25 - rejects_in(&batch);
            stage(&sink, &batch).await;
        }
    }
    let retry = Retry::default();
    let (a, b) = tokio::join!(sink.commit_staged(&retry), other.commit_staged(&retry));
    // The one whose guard broke committed nothing; a later pass finds nothing left.
    let links: usize = [a, b].into_iter().filter_map(|c| c.events.ok()).map(|c| c.links).sum();
    let after = sink.commit_staged(&retry).await.both().unwrap();
    assert_eq!(links + after.events.links, 8);
    assert_eq!(rows(&events).await, expected);
    assert_eq!(rows(&rejects).await, 200 - expected);
}

/// `records` with every run of `per` consecutive records of one-event data packed into one record
/// ([`game_events::packed`]), which keeps the run's last sequence number.
fn packed(records: &[KinesisEventRecord], per: usize) -> Vec<KinesisEventRecord> {
    records
        .chunks(per)
        .map(|run| {
            let mut record = run[run.len() - 1].clone();
            *record.kinesis.data = game_events::packed::pack(run.iter().map(|r| r.kinesis.data.as_slice()));
            record
        })
        .collect()
}

/// Packed records (a request's events in one compressed record) land each event once, beside
/// one-event records in the same batch; delivered again, whole or from a packed record on, they
/// add nothing; one that cannot be unpacked is one reject that says why.
#[tokio::test]
async fn packed_records_land_each_event_once() {
    let (_dir, sink, events, rejects) = sink().await;
    let plain = records(0, 0, 60);
    let mut batch = packed(&plain[..40], 10);
    batch.extend_from_slice(&plain[40..]);
    let mut broken = records(0, 60, 1).remove(0);
    *broken.kinesis.data = game_events::packed::PACKED_V1.to_vec();
    broken.kinesis.data.extend_from_slice(b"not gzip");
    batch.push(broken);
    let first = process(&sink, &batch).await;
    let want_rejects = rejects_in(&plain) + 1;
    assert_eq!(
        (first.rows, first.rejected as u64),
        (60 - rejects_in(&plain), want_rejects),
        "{first:?}"
    );
    let again = process(&sink, &batch).await;
    assert_eq!((again.rows, again.rejected), (0, 0), "{again:?}");
    let resumed = process(&sink, &batch[2..]).await;
    assert_eq!((resumed.rows, resumed.rejected), (0, 0), "{resumed:?}");
    assert_eq!(
        (rows(&events).await, rows(&rejects).await),
        (60 - rejects_in(&plain), want_rejects)
    );
    let reasons: Vec<String> = crate::sample_batches::rows(&rejects)
        .await
        .iter()
        .flat_map(|(_, batch)| {
            let reasons = batch.column_by_name("reason").unwrap();
            let reasons = reasons.as_any().downcast_ref::<arrow::array::StringArray>().unwrap();
            reasons.iter().flatten().map(str::to_owned).collect::<Vec<_>>()
        })
        .collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("lakelog-packed/1") && r.contains("not gzip")),
        "{reasons:?}"
    );
}
