//! The handler as Lambda calls it, driven by `events/kinesis-*.json`: the sink's report becomes
//! the batch item failure Lambda retries from. What the sink writes is tested beside it
//! (`crates/game-sink/tests`).

use std::path::Path;

use aws_lambda_events::event::kinesis::KinesisEvent;
use aws_lambda_events::event::sqs::SqsEvent;
use aws_lambda_events::event::streams::KinesisEventResponse;
use game_sink::{Config, Sink};
use game_sink_lambda::handler;
use game_sink_lambda::metrics::Reporter;
use lake::StorageConfig;
use lambda_runtime::{Context, LambdaEvent};

fn sample<T: serde::de::DeserializeOwned>(name: &str) -> T {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../events").join(name);
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

async fn invoke(event: &KinesisEvent, sink: &Sink) -> KinesisEventResponse {
    handler::handle(
        LambdaEvent::new(event.clone(), Context::default()),
        sink,
        &Reporter::new(emf::DEFAULT_NAMESPACE, 0),
        None,
    )
    .await
    .unwrap()
}

fn failures(response: &KinesisEventResponse) -> Vec<String> {
    response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone().unwrap())
        .collect()
}

/// A sink of the table `name` in `dir` (its rejects beside it): the table's location, the
/// sink's settings and the sink.
async fn open(dir: &Path, name: &str) -> (String, Config, Sink) {
    let events = dir.join(name).to_str().unwrap().to_owned();
    let config = Config::new(&events, None).unwrap();
    let sink = Sink::open(&config, &StorageConfig::default()).await.unwrap();
    (events, config, sink)
}

#[tokio::test]
async fn the_first_record_not_committed_is_the_one_failure_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (_, _, sink) = open(dir.path(), "game_events").await;
    let event: KinesisEvent = sample("kinesis-bad-record.json");
    // Committed: nothing to retry.
    assert!(failures(&invoke(&event, &sink).await).is_empty());

    // The rejects table cannot be written (its directory became a file): the events before the
    // first reject are committed, and Lambda retries from that reject.
    let (_, config, sink) = open(dir.path(), "other_events").await;
    std::fs::rename(&config.rejects_table, format!("{}.moved", config.rejects_table)).unwrap();
    std::fs::write(&config.rejects_table, b"not a directory").unwrap();
    let first_reject = event.records[1].kinesis.sequence_number.clone();
    assert_eq!(failures(&invoke(&event, &sink).await), [first_reject]);
}

/// The function's two roles: a Kinesis batch is staged, and nothing is in the table until the
/// schedule's tick runs committer passes, which stop before the invocation's deadline.
#[tokio::test]
async fn batches_are_staged_and_the_tick_commits_them_before_its_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let (events, _, sink) = open(dir.path(), "game_events").await;
    let event: KinesisEvent = sample("kinesis-game-events.json");
    assert!(failures(&invoke(&event, &sink).await).is_empty());
    let rows = |uri: String| async move {
        let table = lake::Table::open(&uri, &StorageConfig::default()).await.unwrap();
        table.file_stats().unwrap().rows
    };
    assert_eq!(rows(events.clone()).await, 0, "staged, not committed");

    let now_ms = u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap();
    // Five seconds are kept back to answer: about a second and a half of passes, one each 0.5 s.
    let deadline = now_ms + 6_500;
    let metrics = Reporter::new(emf::DEFAULT_NAMESPACE, 0);
    let summary = handler::commit(deadline, &sink, &metrics, std::time::Duration::from_millis(500)).await;
    let finished = u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap();
    assert!(finished < deadline, "answered after the deadline");
    // The first pass commits; the second finds nothing staged and ends the tick.
    assert_eq!(summary.passes, 2, "{summary:?}");
    assert_eq!((summary.failed, summary.commits), (0, 1), "{summary:?}");
    // Four records, one of them repeating another's eventId.
    assert_eq!(summary.rows, 3, "{summary:?}");
    assert_eq!(rows(events).await, 3);
}

fn deadline_in(ms: u64) -> u64 {
    u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap() + ms
}

/// The commit queue's wake-ups (`events/sqs-commit-wake.json`) run one pass that commits what was
/// staged; when a table cannot be committed, every wake-up is reported for SQS to deliver again.
#[tokio::test]
async fn wake_ups_commit_what_is_staged_and_come_back_when_a_commit_fails() {
    let dir = tempfile::tempdir().unwrap();
    let (events, _, sink) = open(dir.path(), "game_events").await;
    let metrics = Reporter::new(emf::DEFAULT_NAMESPACE, 0);
    let wake_ups: SqsEvent = sample("sqs-commit-wake.json");
    let woken = |deadline| {
        let mut context = Context::default();
        context.deadline = deadline;
        handler::commit_woken(LambdaEvent::new(wake_ups.clone(), context), &sink, &metrics)
    };

    assert!(failures(&invoke(&sample("kinesis-game-events.json"), &sink).await).is_empty());
    let response = woken(deadline_in(30_000)).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let table = lake::Table::open(&events, &StorageConfig::default()).await.unwrap();
    // Four records, one of them repeating another's eventId.
    assert_eq!(table.file_stats().unwrap().rows, 3);

    // The next batch is staged, but the events table's log cannot be written: both wake-ups
    // come back, and the staged rows wait for the next pass.
    assert!(failures(&invoke(&sample("kinesis-bad-record.json"), &sink).await).is_empty());
    let log = Path::new(&events).join("_delta_log");
    std::fs::rename(&log, log.with_extension("moved")).unwrap();
    std::fs::write(&log, b"not a directory").unwrap();
    let response = woken(deadline_in(30_000)).await;
    let reported: Vec<_> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect();
    let sent: Vec<_> = wake_ups
        .records
        .iter()
        .map(|r| r.message_id.as_deref().unwrap())
        .collect();
    assert_eq!(reported, sent);
}
