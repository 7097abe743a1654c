//! The real `bootstrap` binary, run as Lambda runs it: a local Runtime API feeds it
//! `events/sqs-s3-notification.json` (its two objects uploaded to an S3 stand-in: one in S3's JSON
//! form, one of text gzipped under a key that needs decoding) twice, which it stages, then its schedule's tick
//! (`events/scheduled-commit.json`), on which it commits, then the notifications once more; DuckDB
//! reads every row once. A missing setting ends its init with a message a person reads.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use aws_sdk_s3::primitives::ByteStream;
use fixtures::log_lines::{SynthConfig, corpus};
use flate2::Compression;
use flate2::write::GzEncoder;
use lakelog_tests::runtime_api::{Answer, Function};
use lakelog_tests::{StandIn, duckdb};
use serde_json::{Value, json};

const BINARY: &str = env!("CARGO_BIN_EXE_access-log-lambda");
/// The timeout template.yaml gives the ingest function.
const TIMEOUT: Duration = Duration::from_secs(300);
const WAIT: Duration = Duration::from_secs(120);
/// A short timeout, so that the schedule's tick, which runs committer passes until 5 s before the
/// deadline, ends in 3 s.
const TICK_TIMEOUT: Duration = Duration::from_secs(8);

/// The bucket the sample event names.
const SAMPLE_BUCKET: &str = "raw-logs";

fn lines(seed: u64) -> Vec<u8> {
    corpus(
        SynthConfig {
            seed,
            malformed_rate: 0.0,
            buckets: vec!["web-assets".into()],
            ..SynthConfig::default()
        },
        64 * 1024,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingests_the_sample_notifications_once_staged_twice_then_delivered_again() {
    let standin = StandIn::connect().await.unwrap();
    let raw = standin.create_bucket("runtime-raw").await.unwrap();
    let lake = standin.create_bucket("runtime-lake").await.unwrap();
    let s3 = standin.s3();

    let plain = fixtures::cloudwatch_json::from_text(&lines(1));
    assert!(
        plain
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .all(s3_access_log::json::is_json_record)
    );
    let mut with_reject = lines(2);
    with_reject.extend_from_slice(b"this is not an access log line\n");
    let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
    gz.write_all(&with_reject).unwrap();
    let objects = [
        ("access-logs/2024-06-01-00-05-02-5F1E0EXAMPLE", plain.clone()),
        (
            "access-logs/with space and + café/2024-06-01-00-06-11-EXAMPLE.gz",
            gz.finish().unwrap(),
        ),
    ];
    for (key, body) in objects {
        s3.put_object()
            .bucket(&raw)
            .key(key)
            .body(ByteStream::from(body))
            .send()
            .await
            .unwrap();
    }
    let event = std::fs::read_to_string(format!(
        "{}/../../events/sqs-s3-notification.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
    .replace(SAMPLE_BUCKET, &raw);

    let template = StandIn::s3_uri(&lake, "access_logs/{bucket}");
    let mut vars: Vec<(&str, String)> = Function::standin_vars(standin.endpoint());
    vars.push(("ACCESS_LOG_TABLE_URI", template));
    let vars: Vec<(&str, &str)> = vars.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let function = Function::start_with_timeout(Path::new(BINARY), &vars, TICK_TIMEOUT).unwrap();
    let tick = std::fs::read(format!(
        "{}/../../events/scheduled-commit.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    // SQS delivers the same messages again (a visibility timeout ran out) before the committer
    // ran, and once more after: nothing lands twice.
    for delivery in 0..3 {
        if delivery == 2 {
            let answer = tokio::task::block_in_place(|| function.invoke(&tick, WAIT)).unwrap();
            let Answer::Response(summary) = answer else {
                panic!("the tick failed: {answer:?}");
            };
            assert_eq!(summary["failed"], 0, "{summary}");
            assert_eq!(
                summary["commits"], 2,
                "the rows' table and the rejects table: {summary}"
            );
        }
        let answer = tokio::task::block_in_place(|| function.invoke(event.as_bytes(), WAIT)).unwrap();
        let Answer::Response(response) = answer else {
            panic!("delivery {delivery}: the function failed: {answer:?}");
        };
        assert_eq!(response, json!({"batchItemFailures": []}), "delivery {delivery}");
    }
    let exited = function.stop();
    assert!(!exited.stderr.contains("panicked"), "{}", exited.stderr);

    let count = |text: &[u8]| text.iter().filter(|b| **b == b'\n').count() as u64;
    let want_rows = (count(&plain) + count(&with_reject) - 1) as f64;
    // Its metrics: the first two deliveries stage both objects, the third finds them committed.
    let sum = |name: &str, unit: &str| exited.metric_sum("lakelog", name, unit, &[("Function", "access-log")]);
    assert_eq!(sum("Objects", "Count"), 4.0);
    assert_eq!(sum("ObjectsAlreadyIngested", "Count"), 2.0);
    assert_eq!(sum("ObjectsFailed", "Count"), 0.0);
    assert_eq!(sum("Rows", "Count"), 2.0 * want_rows);
    assert_eq!(sum("RejectedLines", "Count"), 2.0);
    assert_eq!(sum("Commits", "Count"), 0.0, "instances stage, they do not commit");
    assert!(sum("LagSeconds", "Seconds") > 0.0);
    assert_eq!(sum("MessagesFailed", "Count"), 0.0);
    let committer =
        |name: &str, unit: &str| exited.metric_sum("lakelog", name, unit, &[("Function", "access-log-committer")]);
    assert_eq!(committer("RowsCommitted", "Count"), want_rows + 1.0, "each object once");
    assert_eq!(committer("Commits", "Count"), 2.0);

    let table = StandIn::s3_uri(&lake, "access_logs/web-assets");
    let rows = duckdb(
        standin.endpoint(),
        &format!("SELECT count(*), count(DISTINCT log_object) FROM delta_scan('{table}')"),
    )
    .unwrap();
    let want = count(&plain) + count(&with_reject) - 1;
    assert_eq!(rows, [[Value::from(want), json!(2)]]);
    let rejects = StandIn::s3_uri(&lake, "access_logs/_rejects");
    let rejected = duckdb(
        standin.endpoint(),
        &format!("SELECT count(*) FROM delta_scan('{rejects}')"),
    )
    .unwrap();
    assert_eq!(rejected, [[json!(1)]]);
}

#[test]
fn a_missing_or_bad_setting_ends_init_in_words() {
    for (vars, want) in [
        (vec![], "ACCESS_LOG_TABLE_URI is not set"),
        (
            vec![
                ("ACCESS_LOG_TABLE_URI", "s3://lake/access_logs/{bucket}"),
                ("INGEST_CONCURRENCY", "0"),
            ],
            "INGEST_CONCURRENCY",
        ),
    ] {
        let function = Function::start_with_timeout(Path::new(BINARY), &vars, TIMEOUT).unwrap();
        let init = match function.init_time(WAIT) {
            Err(Some(init)) => init,
            other => panic!("no init error: {other:?}"),
        };
        assert_eq!(init.error_type, "Runtime.InitError");
        let message = init.body["errorMessage"].as_str().unwrap().to_owned();
        assert!(message.starts_with("the function cannot start: "), "{message}");
        assert!(message.contains(want), "{message}");
        assert_eq!(function.exit(WAIT).code, Some(1));
    }
}
