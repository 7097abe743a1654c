//! The handler driven by the sample events in `events/`, without S3: notification parsing, test
//! events, and which messages are reported for retry.

use access_log_ingest::{Ingestor, ObjectReader, TableTemplate};
use access_log_lambda::handler::handle;
use aws_lambda_events::event::sqs::SqsEvent;
use lake::StorageConfig;
use lambda_runtime::{Context, LambdaEvent};

fn event(name: &str) -> SqsEvent {
    let path = format!("{}/../../events/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn local_ingestor(dir: &std::path::Path) -> Ingestor {
    let template = TableTemplate::parse("table", &format!("{}/{{bucket}}", dir.display())).unwrap();
    let rejects = template.default_rejects();
    Ingestor::new(template, rejects, StorageConfig::default(), ObjectReader::local(), 2)
}

fn failures(response: &aws_lambda_events::event::sqs::SqsBatchResponse) -> Vec<&str> {
    response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect()
}

#[tokio::test]
async fn test_event_succeeds_without_work() {
    let dir = tempfile::tempdir().unwrap();
    let response = handle(
        LambdaEvent::new(event("sqs-s3-test-event.json"), Context::default()),
        &local_ingestor(dir.path()),
        emf::DEFAULT_NAMESPACE,
    )
    .await
    .unwrap();
    assert!(response.batch_item_failures.is_empty());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "no table touched");
}

#[tokio::test]
async fn unreadable_objects_fail_only_their_messages() {
    let dir = tempfile::tempdir().unwrap();
    // Without an S3 client the notification's objects cannot be read: both messages fail.
    let mut sqs = event("sqs-s3-notification.json");
    let response = handle(
        LambdaEvent::new(sqs.clone(), Context::default()),
        &local_ingestor(dir.path()),
        emf::DEFAULT_NAMESPACE,
    )
    .await
    .unwrap();
    assert_eq!(
        failures(&response),
        vec![
            "00000001-1111-2222-3333-444455556666",
            "00000002-1111-2222-3333-444455556666"
        ]
    );
    // A test event and a body that is not a notification next to them: only the latter fails.
    let mut test = event("sqs-s3-test-event.json").records.remove(0);
    test.message_id = Some("test".into());
    let mut garbage = test.clone();
    garbage.message_id = Some("garbage".into());
    garbage.body = Some("{\"not\": \"a notification\"}".into());
    sqs.records = vec![test, garbage];
    let response = handle(
        LambdaEvent::new(sqs, Context::default()),
        &local_ingestor(dir.path()),
        emf::DEFAULT_NAMESPACE,
    )
    .await
    .unwrap();
    assert_eq!(failures(&response), vec!["garbage"]);
}

#[tokio::test]
async fn sns_wrapped_notifications_are_unwrapped() {
    let dir = tempfile::tempdir().unwrap();
    let response = handle(
        LambdaEvent::new(event("sqs-sns-s3-notification.json"), Context::default()),
        &local_ingestor(dir.path()),
        emf::DEFAULT_NAMESPACE,
    )
    .await
    .unwrap();
    // The object it names is in S3, which this ingestor cannot read, so the message is retried.
    assert_eq!(failures(&response), vec!["00000003-1111-2222-3333-444455556666"]);
    let body = event("sqs-sns-s3-notification.json").records[0].body.clone().unwrap();
    let parsed = access_log_ingest::notification::parse_body(&body).unwrap();
    assert_eq!(
        parsed,
        access_log_ingest::notification::Notification::Objects(vec![access_log_ingest::ObjectRef::S3 {
            bucket: "raw-logs".into(),
            key: "access-logs/2024-06-01-00-07-45-SNSEXAMPLE".into()
        }])
    );
}

/// The committer's tick ends after a pass that reached every table and found nothing staged or
/// waiting, instead of running its passes for the whole tick: an idle deployment pays a pass a
/// minute.
#[tokio::test]
async fn an_idle_committer_tick_ends_after_one_pass() {
    let dir = tempfile::tempdir().unwrap();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let summary = access_log_lambda::handler::commit(
        now_ms + 300_000,
        &local_ingestor(dir.path()),
        emf::DEFAULT_NAMESPACE,
        std::time::Duration::from_millis(20),
    )
    .await;
    assert_eq!(
        (summary.passes, summary.commits, summary.failed),
        (1, 0, 0),
        "{summary:?}"
    );
}
