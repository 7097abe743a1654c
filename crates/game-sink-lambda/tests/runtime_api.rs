//! The real `bootstrap` binary, run as Lambda runs it: a local Runtime API feeds it the sample
//! Kinesis batches of `events/`, which it stages and for which it sends wake-ups to an SQS
//! stand-in; then those wake-ups, on which it commits, and its schedule's tick, which finds
//! nothing left;
//! its tables are on an S3 stand-in and read back with DuckDB, and a missing setting ends its init
//! with a message a person reads.

use std::path::Path;
use std::time::Duration;

use lakelog_tests::runtime_api::{Answer, Function};
use lakelog_tests::{StandIn, duckdb};
use serde_json::{Value, json};

const BINARY: &str = env!("CARGO_BIN_EXE_game-sink-lambda");
/// The timeout template.yaml gives the sink function.
const TIMEOUT: Duration = Duration::from_secs(120);
const WAIT: Duration = Duration::from_secs(120);
/// A short timeout for the function that also commits: its schedule's tick runs committer passes
/// until 5 s before the deadline.
const TICK_TIMEOUT: Duration = Duration::from_secs(8);

fn sample(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/../../events/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn response(answer: Answer) -> Value {
    match answer {
        Answer::Response(response) => response,
        other => panic!("the function failed: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_the_sample_batches_and_reports_no_failures() {
    let standin = StandIn::connect().await.unwrap();
    let bucket = standin.create_bucket("runtime-sink").await.unwrap();
    let events = StandIn::s3_uri(&bucket, "game_events");
    let rejects = StandIn::s3_uri(&bucket, "game_events_rejects");

    // A Glue database the function registers its tables in at init.
    let glue = aws_sdk_glue::Client::new(&standin.sdk_config());
    let database = bucket.replace('-', "_");
    let input = aws_sdk_glue::types::DatabaseInput::builder()
        .name(&database)
        .build()
        .unwrap();
    glue.create_database().database_input(input).send().await.unwrap();

    let mut vars: Vec<(&str, String)> = Function::standin_vars(standin.endpoint());
    vars.push(("GAME_EVENTS_TABLE_URI", events.clone()));
    vars.push(("GLUE_DATABASE", database.clone()));
    vars.push(("GAME_EVENTS_COMMIT_INTERVAL_SECONDS", "1".to_owned()));
    vars.push(("GAME_EVENTS_KPI_EVENT_NAMES", "50".to_owned()));
    let sqs = aws_sdk_sqs::Client::new(&standin.sdk_config());
    let queue = sqs.create_queue().queue_name(&bucket).send().await.unwrap();
    let queue = queue.queue_url().unwrap().to_owned();
    vars.push(("GAME_EVENTS_COMMIT_QUEUE_URL", queue.clone()));
    let vars: Vec<(&str, &str)> = vars.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let function = Function::start_with_timeout(Path::new(BINARY), &vars, TICK_TIMEOUT).unwrap();

    for name in ["kinesis-game-events.json", "kinesis-bad-record.json"] {
        let answer = tokio::task::block_in_place(|| function.invoke(&sample(name), WAIT)).unwrap();
        assert_eq!(response(answer), json!({"batchItemFailures": []}), "{name}");
    }
    // Staged, not committed: the tables have no rows yet.
    let count = |table: &str| {
        duckdb(
            standin.endpoint(),
            &format!("SELECT count(*) FROM delta_scan('{table}')"),
        )
        .unwrap()
    };
    assert_eq!(count(&events), [[json!(0)]]);
    // A wake-up a batch, delivered as the queue's event source mapping delivers them: one pass
    // commits both batches, one commit a table.
    let mut wake_ups = Vec::new();
    while wake_ups.len() < 2 {
        let received = sqs
            .receive_message()
            .queue_url(&queue)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .send()
            .await
            .unwrap();
        wake_ups.extend(received.messages().iter().map(|m| {
            json!({
                "messageId": m.message_id(), "receiptHandle": m.receipt_handle(), "body": m.body(),
                "attributes": {}, "messageAttributes": {}, "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:commits", "awsRegion": "us-east-1",
            })
        }));
    }
    assert_eq!(wake_ups.len(), 2, "one wake-up a batch that staged rows");
    assert!(
        wake_ups.iter().all(|m| m["body"] == r#"{"lakelog":"commit"}"#),
        "{wake_ups:?}"
    );
    let event = serde_json::to_vec(&json!({ "Records": wake_ups })).unwrap();
    let answer = tokio::task::block_in_place(|| function.invoke(&event, WAIT)).unwrap();
    assert_eq!(response(answer), json!({"batchItemFailures": []}));
    assert_eq!(count(&events), [[json!(5)]]);
    // The schedule's tick, the net under a lost wake-up: nothing is left, so it ends at its first
    // pass.
    let answer = tokio::task::block_in_place(|| function.invoke(&sample("scheduled-commit.json"), WAIT)).unwrap();
    let summary = response(answer);
    assert_eq!(summary["failed"], 0, "{summary}");
    assert_eq!(
        (&summary["passes"], &summary["commits"]),
        (&json!(1), &json!(0)),
        "{summary}"
    );
    // Both tables are in the catalog as Delta tables at their locations: the function registers
    // them once it has opened them, beside its first batch.
    for (name, location) in [("game_events", &events), ("game_events_rejects", &rejects)] {
        let started = std::time::Instant::now();
        let table = loop {
            match glue.get_table().database_name(&database).name(name).send().await {
                Ok(found) => break found,
                Err(e) if started.elapsed() > WAIT => panic!("{name} never registered: {e:?}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        };
        let table = table.table().unwrap();
        assert_eq!(table.parameters().unwrap()["table_type"], "DELTA", "{name}");
        let registered = table.storage_descriptor().unwrap().location().unwrap();
        assert_eq!(registered, format!("{location}/"), "{name}");
    }
    // And their Iceberg views, as Iceberg tables whose entries name the views' newest metadata
    // files: PyIceberg, through its Glue catalog, reads what DuckDB's Delta reader reads.
    for name in ["game_events_iceberg", "game_events_rejects_iceberg"] {
        let started = std::time::Instant::now();
        while glue
            .get_table()
            .database_name(&database)
            .name(name)
            .send()
            .await
            .is_err()
        {
            assert!(started.elapsed() < WAIT, "{name} never registered");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    lakelog_tests::assert_glue_views_mirror(
        Some(standin.endpoint()),
        &database,
        &[events.clone(), rejects.clone()],
        None,
    );
    let exited = function.stop();
    assert!(!exited.stderr.contains("panicked"), "{}", exited.stderr);

    // Its metrics, in the default namespace: the sink's health and the live KPIs.
    let sum =
        |name: &str, unit: &str, dimensions: &[(&str, &str)]| exited.metric_sum("lakelog", name, unit, dimensions);
    let sink = [("Function", "game-sink")];
    assert_eq!(sum("Records", "Count", &sink), 8.0);
    assert_eq!(sum("Rows", "Count", &sink), 5.0);
    assert_eq!(sum("Duplicates", "Count", &sink), 1.0);
    assert_eq!(sum("Rejects", "Count", &sink), 2.0);
    assert_eq!(sum("BatchesFailed", "Count", &sink), 0.0);
    assert!(sum("LagSeconds", "Seconds", &sink) > 0.0, "the samples arrived in 2024");
    assert_eq!(sum("Events", "Count", &[]), 5.0);
    assert_eq!(sum("Events", "Count", &[("EventName", "purchaseEvent")]), 2.0);
    let bookings = sum("Bookings", "None", &[("EventName", "purchaseEvent")]);
    assert!((bookings - 9.98).abs() < 1e-9, "{bookings}");

    // An independent reader: the first batch's three distinct events (its repeated purchase
    // written once), the second batch's two valid ones (a client's resend of two of them: new
    // records, so new rows until compaction; KPIs count distinct ids), and its two broken records.
    let rows = duckdb(
        standin.endpoint(),
        &format!("SELECT count(*), count(DISTINCT eventId) FROM delta_scan('{events}')"),
    )
    .unwrap();
    assert_eq!(rows, [[json!(5), json!(3)]], "rows and distinct events");
    let rejected = duckdb(
        standin.endpoint(),
        &format!("SELECT count(*) FROM delta_scan('{rejects}')"),
    )
    .unwrap();
    assert_eq!(rejected, [[json!(2)]]);
}

#[test]
fn a_missing_setting_ends_init_in_words() {
    let message = Function::expect_init_error(Path::new(BINARY), &[], WAIT).unwrap();
    assert_eq!(message, "the function cannot start: GAME_EVENTS_TABLE_URI is not set");
}

/// Tables are opened beside the first poll, not before it: a table that cannot be opened (its
/// bucket does not exist) does not stop the function, but every batch is answered with its first
/// record as the one to retry from, and the log says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_that_cannot_be_opened_retries_every_batch() {
    let standin = StandIn::connect().await.unwrap();
    let mut vars: Vec<(&str, String)> = Function::standin_vars(standin.endpoint());
    vars.push((
        "GAME_EVENTS_TABLE_URI",
        "s3://lakelog-no-such-bucket/game_events".into(),
    ));
    let vars: Vec<(&str, &str)> = vars.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let function = Function::start_with_timeout(Path::new(BINARY), &vars, TIMEOUT).unwrap();
    function.init_time(WAIT).expect("init does not wait for the tables");

    let batch = sample("kinesis-game-events.json");
    let first: Value = serde_json::from_slice(&batch).unwrap();
    let first = first["Records"][0]["kinesis"]["sequenceNumber"].clone();
    for _ in 0..2 {
        let answer = tokio::task::block_in_place(|| function.invoke(&batch, WAIT)).unwrap();
        assert_eq!(
            response(answer),
            json!({"batchItemFailures": [{"itemIdentifier": first}]})
        );
    }
    let exited = function.stop();
    let log = format!("{}{}", exited.stdout, exited.stderr);
    assert!(log.contains("s3://lakelog-no-such-bucket/game_events"), "{log}");
    assert!(log.contains("the tables cannot be opened"), "{log}");
    assert_eq!(
        exited.metric_sum("lakelog", "BatchesFailed", "Count", &[("Function", "game-sink")]),
        2.0
    );
}
