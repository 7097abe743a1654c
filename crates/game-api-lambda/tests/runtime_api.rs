//! The real `bootstrap` binary, run as Lambda runs it: a local Runtime API feeds it the sample
//! requests of `events/`, its records go to a Kinesis stand-in, and a missing or bad setting ends
//! its init with a message a person reads.

use std::path::Path;
use std::time::Duration;

use lakelog_tests::runtime_api::{Answer, Function};
use lakelog_tests::{StandIn, read_stream, unique_name};
use serde_json::Value;

const BINARY: &str = env!("CARGO_BIN_EXE_game-api-lambda");
/// The timeout template.yaml gives the API function.
const TIMEOUT: Duration = Duration::from_secs(15);
const WAIT: Duration = Duration::from_secs(60);

fn sample(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/../../events/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// The status and the JSON body of an API Gateway proxy response.
fn response(answer: Answer) -> (u64, Value) {
    let Answer::Response(response) = answer else {
        panic!("the function failed: {answer:?}");
    };
    let body = response["body"]
        .as_str()
        .unwrap_or_else(|| panic!("no body: {response}"));
    (
        response["statusCode"].as_u64().unwrap(),
        serde_json::from_str(body).unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_the_sample_requests_with_their_events_in_kinesis() {
    let standin = StandIn::connect().await.unwrap();
    let kinesis = aws_sdk_kinesis::Client::new(&standin.sdk_config());
    let stream = unique_name("runtime-api");
    kinesis
        .create_stream()
        .stream_name(&stream)
        .shard_count(1)
        .send()
        .await
        .unwrap();

    let mut vars: Vec<(&str, String)> = Function::standin_vars(standin.endpoint());
    vars.push(("GAME_EVENTS_STREAM", stream.clone()));
    vars.push(("METRICS_NAMESPACE", "lakelog/test".to_owned()));
    let vars: Vec<(&str, &str)> = vars.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let function = Function::start_with_timeout(Path::new(BINARY), &vars, TIMEOUT).unwrap();

    let mut written = 0;
    for (name, events) in [
        ("apigw-single-event.json", 1),
        ("apigw-batch.json", 3),
        ("apigw-gzip-base64.json", 3),
    ] {
        let answer = tokio::task::block_in_place(|| function.invoke(&sample(name), WAIT)).unwrap();
        let (status, body) = response(answer);
        assert_eq!(status, 200, "{name}: {body}");
        assert_eq!(body["written"], events, "{name}: {body}");
        assert_eq!(body["results"].as_array().unwrap().len(), events, "{name}: {body}");
        written += events;
    }

    // A body that is not JSON is refused in words, and nothing is written.
    let mut bad: Value = serde_json::from_slice(&sample("apigw-single-event.json")).unwrap();
    bad["body"] = Value::from("{not json");
    let answer = tokio::task::block_in_place(|| function.invoke(bad.to_string().as_bytes(), WAIT)).unwrap();
    let (status, body) = response(answer);
    assert_eq!(status, 400, "{body}");
    assert!(body["message"].as_str().unwrap().contains("JSON"), "{body}");

    let records = read_stream(&kinesis, &stream).await.unwrap();
    assert_eq!(records.len(), written);
    let exited = function.stop();
    assert!(!exited.stderr.contains("panicked"), "{}", exited.stderr);

    // Its metrics, as CloudWatch would read them from the function's output.
    let sum =
        |name: &str, unit: &str, dimensions: &[(&str, &str)]| exited.metric_sum("lakelog/test", name, unit, dimensions);
    let api = [("Function", "game-api")];
    assert_eq!(sum("Requests", "Count", &api), 4.0);
    assert_eq!(sum("EventsAccepted", "Count", &api), written as f64);
    assert_eq!(sum("Answered2xx", "Count", &api), 3.0);
    assert_eq!(sum("Answered4xx", "Count", &api), 1.0);
    assert_eq!(sum("Answered503", "Count", &api), 0.0);
    assert!(sum("Latency", "Milliseconds", &api) > 0.0);
    assert_eq!(
        sum(
            "RequestsRefused",
            "Count",
            &[("Function", "game-api"), ("Reason", "NotJson")]
        ),
        1.0
    );
}

/// Starts the binary with `vars` and returns the message of the init error it must report.
fn init_error(vars: &[(&str, &str)]) -> String {
    Function::expect_init_error(Path::new(BINARY), vars, WAIT).unwrap()
}

#[test]
fn a_missing_or_bad_setting_ends_init_in_words() {
    assert_eq!(
        init_error(&[]),
        "the function cannot start: GAME_EVENTS_STREAM is not set"
    );
    let message = init_error(&[
        ("GAME_EVENTS_STREAM", "game-events"),
        ("GAME_EVENTS_PARTITION_KEY", "user"),
    ]);
    assert!(message.contains("GAME_EVENTS_PARTITION_KEY"), "{message}");
    assert!(message.contains("random"), "{message}");
    let message = init_error(&[
        ("GAME_EVENTS_STREAM", "game-events"),
        ("METRICS_NAMESPACE", "AWS/Lambda"),
    ]);
    assert!(message.contains("METRICS_NAMESPACE"), "{message}");
}
