//! `respond`, the API function's behaviour, driven by the sample requests in `events/`, with the
//! in-memory stream and fault-injecting sinks in place of Kinesis: what is written, what is
//! answered, and what bad requests get. Needs the `testing` feature (`cargo test -p game-api
//! --features testing`; the workspace's test command enables every feature).

use std::collections::HashSet;
use std::io::Write;
use std::time::Duration;

use aws_lambda_events::apigw::{ApiGatewayProxyRequest, ApiGatewayProxyResponse};
use aws_lambda_events::encodings::Body;
use aws_lambda_events::event::kinesis::KinesisEventRecord;
use aws_lambda_events::http::{HeaderValue, Method};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use flate2::Compression;
use flate2::write::GzEncoder;
use game_api::testing::{FailingSink, FlakySink, LostReplySink, sample_games};
use game_api::{ApiConfig, DeliveryConfig, LocalStream, PartitionKey, RecordFormat, RecordSink, respond};
use game_events::decode_record;
use game_events::packed::unpack_records;
use serde_json::{Value, json};
use uuid::Uuid;

fn request(name: &str) -> ApiGatewayProxyRequest {
    let path = format!("{}/../../events/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn with_body(body: &str) -> ApiGatewayProxyRequest {
    let mut request = request("apigw-single-event.json");
    request.body = Some(body.to_owned());
    request
}

fn body(response: &ApiGatewayProxyResponse) -> Value {
    match &response.body {
        Some(Body::Text(text)) => serde_json::from_str(text).unwrap(),
        other => panic!("not a text body: {other:?}"),
    }
}

fn quick() -> ApiConfig {
    ApiConfig {
        delivery: DeliveryConfig {
            budget: Duration::from_secs(5),
            first_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(5),
            throttled_budget: Duration::from_secs(5),
        },
        ..ApiConfig::default()
    }
}

async fn call<S: RecordSink>(request: ApiGatewayProxyRequest, sink: &S, config: &ApiConfig) -> ApiGatewayProxyResponse {
    respond(&request, &sample_games(), sink, config).await
}

fn record_json(record: &KinesisEventRecord) -> Value {
    serde_json::from_slice(&record.kinesis.data.0).unwrap()
}

#[tokio::test]
async fn a_single_event_is_stamped_and_written_in_the_seed_envelope() {
    let stream = LocalStream::new("game-events");
    let response = call(request("apigw-single-event.json"), &stream, &quick()).await;
    assert_eq!(response.status_code, 200, "{:?}", response.body);
    assert_eq!(response.headers["content-type"], "application/json");
    let answer = body(&response);
    assert_eq!(answer["written"], 1);
    let result = &answer["results"][0];
    assert_eq!(result["status"], "written");
    let id: Uuid = result["eventId"].as_str().unwrap().parse().unwrap();
    assert_eq!(id.get_version_num(), 4, "the server assigns a random UUID");
    // ... and tells the client to send its own, reused on retries.
    let message = answer["message"].as_str().unwrap();
    assert!(
        message.contains("1 came without an eventId") && message.contains("reuse it on every retry"),
        "{message}"
    );

    let records = unpack_records(&stream.drain()).into_owned();
    assert_eq!(records.len(), 1);
    let record = &records[0];
    assert_eq!(result["sequenceNumber"], record.kinesis.sequence_number.as_str());
    assert_eq!(result["shardId"], "shardId-000000000000");
    assert_eq!(record.kinesis.partition_key, id.to_string());
    let envelope = record_json(record);
    // The seed's shape: the request, with the event object as body.
    assert_eq!(envelope["httpMethod"], "POST");
    assert_eq!(envelope["resource"], "/events");
    assert_eq!(envelope["isBase64Encoded"], false);
    assert_eq!(
        envelope["requestContext"]["requestId"],
        "c6af9ac6-7b61-11e6-9a41-93e8deadbeef"
    );
    assert_eq!(envelope["requestContext"]["identity"]["sourceIp"], "203.0.113.7");
    assert_eq!(envelope["body"]["eventName"], "scoreAdjustment");
    // requestTimeEpoch 1717243200123 ms, to the second.
    assert_eq!(envelope["body"]["eventTime"], 1_717_243_200);
    assert_eq!(envelope["body"]["eventId"], id.to_string());
    assert_eq!(envelope["body"]["eventParams"]["scoreAdjustment"], 120);
    // The API key never reaches the stream.
    let text = String::from_utf8(record.kinesis.data.0.clone()).unwrap();
    assert!(!text.contains("EXAMPLEKEY"), "{text}");
    assert!(envelope["headers"].get("x-api-key").is_none());

    let event = decode_record(&record.kinesis.data.0).unwrap();
    assert_eq!(event.event_id, id);
    assert_eq!(event.event_time.timestamp(), 1_717_243_200);
}

async fn batch_is_written(name: &str) {
    let stream = LocalStream::new("game-events");
    let response = call(request(name), &stream, &quick()).await;
    assert_eq!(response.status_code, 200, "{:?}", response.body);
    let answer = body(&response);
    let ids: Vec<&str> = answer["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["eventId"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 3);
    assert_eq!(
        ids[0], "0b5e8a52-7d4d-4f4b-9c39-6d9a8a0c1e11",
        "the client's id is kept"
    );
    assert_eq!(ids[1], "7d0c6a8e-2b1f-4c3d-9e5a-8f7b6c5d4e3f");
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 3);

    let records = unpack_records(&stream.drain()).into_owned();
    let events: Vec<_> = records
        .iter()
        .map(|r| decode_record(&r.kinesis.data.0).unwrap())
        .collect();
    let written: Vec<String> = events.iter().map(|e| e.event_id.to_string()).collect();
    assert_eq!(written, ids, "one record per event, in order");
    assert_eq!(events[0].booking(), Some(4.99));
    assert_eq!(events[0].event_params.as_ref().unwrap().extra["item_sku"], "gems_500");
    assert_eq!(events[1].event_params.as_ref().unwrap().score_adjustment, Some(-15));
    assert_eq!(events[2].extra["sessionId"], "s-20240601-0042");
    assert_eq!(events[2].event_params.as_ref().unwrap().extra["level"], 12);
    for (record, result) in records.iter().zip(answer["results"].as_array().unwrap()) {
        assert_eq!(result["sequenceNumber"], record.kinesis.sequence_number.as_str());
        let envelope = record_json(record);
        assert_eq!(envelope["isBase64Encoded"], false);
        assert!(envelope["body"].is_object());
    }
}

#[tokio::test]
async fn a_batch_is_written_in_order() {
    batch_is_written("apigw-batch.json").await;
}

#[tokio::test]
async fn a_base64_gzip_body_is_the_same_batch() {
    let gz = request("apigw-gzip-base64.json");
    assert!(gz.is_base64_encoded);
    batch_is_written("apigw-gzip-base64.json").await;
}

#[tokio::test]
async fn device_id_as_partition_key() {
    let stream = LocalStream::new("game-events");
    let config = ApiConfig {
        partition_key: PartitionKey::DeviceId,
        ..quick()
    };
    let response = call(request("apigw-batch.json"), &stream, &config).await;
    assert_eq!(response.status_code, 200);
    let keys: Vec<String> = unpack_records(&stream.drain())
        .into_owned()
        .into_iter()
        .map(|r| r.kinesis.partition_key)
        .collect();
    assert_eq!(
        keys,
        [
            "9F4D2C1B-3A5E-4B7D-8C9E-1A2B3C4D5E6F",
            "9F4D2C1B-3A5E-4B7D-8C9E-1A2B3C4D5E6F",
            "2E8F0A1C-4B6D-4F3A-8E2C-7D9B1A3C5E70"
        ]
    );
    // An event without a device id is keyed by its eventId.
    let response = call(with_body(r#"{"eventName": "levelUp"}"#), &stream, &config).await;
    let id = body(&response)["results"][0]["eventId"].as_str().unwrap().to_owned();
    assert_eq!(
        unpack_records(&stream.drain()).into_owned()[0].kinesis.partition_key,
        id
    );
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

/// A request with `body` as base64, optionally gzip-marked.
fn base64_request(body: &[u8], gzip_marked: bool) -> ApiGatewayProxyRequest {
    let mut request = request("apigw-single-event.json");
    request.body = Some(STANDARD.encode(body));
    request.is_base64_encoded = true;
    if gzip_marked {
        request
            .headers
            .insert("content-encoding", HeaderValue::from_static("gzip"));
    }
    request
}

#[tokio::test]
async fn bad_requests_get_their_status_and_a_clear_message_and_write_nothing() {
    let events = |n: usize| format!("{{\"events\": [{}]}}", vec![r#"{"eventName":"levelUp"}"#; n].join(","));
    let huge = format!(
        r#"{{"events": [{{"eventName": "levelUp"}}, {{"eventName": "levelUp", "eventParams": {{"blob": "{}"}}}}]}}"#,
        "x".repeat(1 << 20)
    );
    let mut get = request("apigw-single-event.json");
    get.http_method = Method::GET;
    let mut text = request("apigw-single-event.json");
    text.headers
        .insert("content-type", HeaderValue::from_static("text/plain"));
    let mut brotli = request("apigw-single-event.json");
    brotli
        .headers
        .insert("content-encoding", HeaderValue::from_static("br"));
    let mut no_body = request("apigw-single-event.json");
    no_body.body = None;

    let cases: Vec<(&str, ApiGatewayProxyRequest, i64, &str)> = vec![
        (
            "malformed JSON",
            with_body(r#"{"eventName": "levelUp""#),
            400,
            "the body is not valid JSON: EOF while parsing an object at line 1 column 23",
        ),
        (
            "wrong types",
            with_body(r#"{"eventName": "scoreAdjustment", "eventParams": {"scoreAdjustment": "ten", "amount": [1]}}"#),
            400,
            "1 of 1 events are invalid; nothing was written",
        ),
        (
            "missing eventName",
            with_body(r#"{"eventParams": {"device_id": "d"}}"#),
            400,
            "1 of 1 events are invalid; nothing was written",
        ),
        (
            "501 events",
            with_body(&events(501)),
            413,
            "501 events in one request: at most 500 are accepted, send the rest in another request",
        ),
        (
            "a parameter over 1 KB",
            with_body(&huge),
            400,
            "1 of 2 events are invalid",
        ),
        (
            "gzip garbage",
            base64_request(b"\x1f\x8b\x08\x00garbage", true),
            400,
            "the body is marked gzip but cannot be decompressed: ",
        ),
        (
            "base64 garbage",
            {
                let mut r = request("apigw-single-event.json");
                r.body = Some("!!not base64!!".into());
                r.is_base64_encoded = true;
                r
            },
            400,
            "the body is marked base64 but is not valid base64: ",
        ),
        (
            "empty body",
            with_body(""),
            400,
            "the body is empty: send one event object or {\"events\": [...]}",
        ),
        ("no body", no_body, 400, "the body is empty"),
        (
            "not an event",
            with_body("[1, 2]"),
            400,
            "expected one event object or {\"events\": [...]}, found an array",
        ),
        (
            "no events",
            with_body(r#"{"events": []}"#),
            400,
            "\"events\" is empty: a request carries 1 to 500 events",
        ),
        ("GET", get, 405, "GET is not allowed: send events with POST"),
        (
            "text/plain",
            text,
            415,
            "Content-Type \"text/plain\" is not supported: send application/json (UTF-8)",
        ),
        (
            "brotli",
            brotli,
            415,
            "Content-Encoding \"br\" is not supported: send the body as is or with gzip",
        ),
    ];
    let stream = LocalStream::new("game-events");
    for (what, request, status, message) in cases {
        let response = call(request, &stream, &quick()).await;
        assert_eq!(response.status_code, status, "{what}: {:?}", response.body);
        assert_eq!(response.headers["content-type"], "application/json", "{what}");
        let answer = body(&response);
        let text = answer["message"].as_str().unwrap();
        assert!(
            text.starts_with(message),
            "{what}: {text:?} does not start with {message:?}"
        );
        assert_eq!(stream.received(), 0, "{what}: nothing may be written");
    }
}

#[tokio::test]
async fn invalid_events_are_all_listed_by_index_and_field() {
    let stream = LocalStream::new("game-events");
    let body_text = r#"{"events": [
        {"eventName": "levelUp"},
        {"eventName": 5, "eventParams": {"scoreAdjustment": 1.5}},
        {"eventName": "purchaseEvent", "eventParams": {"device_id": "d"}},
        {"eventParams": {"client_event_time": "noon"}}
    ]}"#;
    let response = call(with_body(body_text), &stream, &quick()).await;
    assert_eq!(response.status_code, 400);
    let answer = body(&response);
    assert_eq!(answer["message"], "3 of 4 events are invalid; nothing was written");
    assert_eq!(
        answer["errors"],
        json!([
            {"index": 1, "field": "eventName", "problem": "expected a string, found a number (5)"},
            {"index": 1, "field": "eventParams.scoreAdjustment",
             "problem": "expected a whole number from -2147483648 to 2147483647, found a number (1.5)"},
            {"index": 2, "field": "eventParams.amount", "problem": "required for a purchaseEvent"},
            {"index": 3, "field": "eventName", "problem": "required"},
            {"index": 3, "field": "eventParams.client_event_time",
             "problem": "expected a date and time like 2024-06-01T12:00:00Z or 2024-06-01 12:00:00.123, found \"noon\""}
        ])
    );
    assert_eq!(stream.received(), 0);
}

#[tokio::test]
async fn the_size_limits_name_the_events() {
    let stream = LocalStream::new("game-events");
    let big = "y".repeat((1 << 20) + 10);
    let body_text = format!(
        r#"{{"events": [{{"eventName": "a", "eventParams": {{"b": "{big}"}}}}, {{"eventName": "b"}}, {{"eventName": "c", "x": "{big}"}}]}}"#
    );
    let response = call(with_body(&body_text), &stream, &quick()).await;
    // Values are bounded long before a record reaches Kinesis' 1 MiB: each parameter is named.
    assert_eq!(response.status_code, 400);
    let answer = body(&response);
    let named: Vec<(u64, &str)> = answer["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["index"].as_u64().unwrap(), e["field"].as_str().unwrap()))
        .collect();
    assert_eq!(named, [(0, "eventParams.b"), (2, "x")]);
    // A body that inflates beyond 10 MiB is refused while decompressing.
    let bomb = gzip(&vec![b' '; (10 << 20) + 1]);
    let response = call(base64_request(&bomb, true), &stream, &quick()).await;
    assert_eq!(response.status_code, 413);
    assert!(
        body(&response)["message"]
            .as_str()
            .unwrap()
            .contains("once decompressed")
    );
    assert_eq!(stream.received(), 0);
}

/// Events of `response` with the given status.
fn ids_with_status(response: &ApiGatewayProxyResponse, status: &str) -> HashSet<String> {
    body(response)["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == status)
        .map(|r| r["eventId"].as_str().unwrap().to_owned())
        .collect()
}

fn ids_in(records: &[KinesisEventRecord]) -> Vec<String> {
    records
        .iter()
        .map(|r| decode_record(&r.kinesis.data.0).unwrap().event_id.to_string())
        .collect()
}

fn synth_batch(n: usize, seed: u64) -> String {
    let mut synth = fixtures::game::Synth::new(fixtures::game::SynthConfig {
        seed,
        ..Default::default()
    });
    let events = synth.events(n, chrono::Utc::now());
    json!({"events": events}).to_string()
}

#[tokio::test]
async fn throttled_entries_are_retried_until_all_are_written() {
    let sink = FlakySink::new(LocalStream::new("game-events"), 0.4, 11);
    // One event a record: hundreds of records, some refused in every round.
    let config = ApiConfig {
        record_format: RecordFormat::Seed,
        ..quick()
    };
    let response = call(with_body(&synth_batch(500, 1)), &sink, &config).await;
    assert_eq!(response.status_code, 200, "{:?}", response.body);
    assert!(sink.refused() > 100, "{}", sink.refused());
    let acknowledged = ids_with_status(&response, "written");
    let stored = ids_in(&unpack_records(&sink.inner().drain()));
    assert_eq!(acknowledged.len(), 500);
    assert_eq!(stored.len(), 500, "every event exactly once");
    assert_eq!(stored.into_iter().collect::<HashSet<_>>(), acknowledged);
}

#[tokio::test]
async fn events_still_throttled_after_the_budget_get_429_and_are_not_acknowledged() {
    let sink = FlakySink::new(LocalStream::new("game-events"), 0.5, 3);
    let config = ApiConfig {
        delivery: DeliveryConfig {
            budget: Duration::from_millis(30),
            first_backoff: Duration::from_millis(20),
            max_backoff: Duration::from_millis(20),
            throttled_budget: Duration::from_millis(30),
        },
        record_format: RecordFormat::Seed,
        ..ApiConfig::default()
    };
    let response = call(with_body(&synth_batch(200, 2)), &sink, &config).await;
    // Refused for throughput only: the client is told to slow down, not that the API failed.
    assert_eq!(response.status_code, 429, "{:?}", response.body);
    assert_eq!(response.headers["retry-after"], "1");
    let answer = body(&response);
    let written = ids_with_status(&response, "written");
    let failed = ids_with_status(&response, "failed");
    assert_eq!(written.len() + failed.len(), 200);
    assert!(!failed.is_empty() && !written.is_empty());
    assert_eq!(answer["failed"], failed.len());
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .contains("share of the stream is full: slow down); resend only the events with status \"failed\"")
    );
    for result in answer["results"].as_array().unwrap() {
        if result["status"] == "failed" {
            assert_eq!(result["errorCode"], "ProvisionedThroughputExceededException");
        }
    }
    // Nothing acknowledged is missing, nothing unwritten is acknowledged.
    let stored: HashSet<String> = ids_in(&unpack_records(&sink.inner().drain())).into_iter().collect();
    assert_eq!(stored, written);
    assert!(stored.is_disjoint(&failed));
}

#[tokio::test]
async fn a_stream_that_throttles_every_call_acknowledges_nothing() {
    let sink = FailingSink::throttled();
    let config = ApiConfig {
        delivery: DeliveryConfig {
            budget: Duration::from_millis(200),
            first_backoff: Duration::from_millis(5),
            max_backoff: Duration::from_millis(20),
            throttled_budget: Duration::from_millis(200),
        },
        ..ApiConfig::default()
    };
    let response = call(request("apigw-batch.json"), &sink, &config).await;
    assert_eq!(response.status_code, 429);
    assert!(ids_with_status(&response, "written").is_empty());
    assert_eq!(ids_with_status(&response, "failed").len(), 3);
    assert!(sink.calls() > 2, "retried: {}", sink.calls());
}

#[tokio::test]
async fn a_lost_reply_is_not_an_acknowledgement() {
    let stream = LocalStream::new("game-events");
    let sink = LostReplySink::new(&stream);
    let config = ApiConfig {
        delivery: DeliveryConfig {
            budget: Duration::from_millis(50),
            first_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(10),
            throttled_budget: Duration::from_millis(50),
        },
        ..ApiConfig::default()
    };
    let response = call(request("apigw-single-event.json"), &sink, &config).await;
    assert_eq!(response.status_code, 503);
    // The record may be in the stream (more than once, from retries), but the client was told to
    // resend it; its eventId identifies the copies.
    let failed = ids_with_status(&response, "failed");
    let stored: HashSet<String> = ids_in(&unpack_records(&stream.drain())).into_iter().collect();
    assert_eq!(stored, failed);
}

/// Every event the API answers 200 for is a record the sink decodes, at every nesting depth the
/// body may have, for a field and a parameter of a single event and of a batch; what the sink
/// could not decode is refused with 400 naming the event and the field.
#[tokio::test]
async fn every_record_written_decodes_in_the_sink_at_every_nesting_depth() {
    let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    type Shape = fn(&str) -> String;
    let shapes: [(&str, Shape, &str); 4] = [
        ("field", |v| format!(r#"{{"eventName": "e", "deep": {v}}}"#), "deep"),
        (
            "parameter",
            |v| format!(r#"{{"eventName": "e", "eventParams": {{"deep": {v}}}}}"#),
            "eventParams.deep",
        ),
        (
            "field in a batch",
            |v| format!(r#"{{"events": [{{"eventName": "a"}}, {{"eventName": "e", "deep": {v}}}]}}"#),
            "deep",
        ),
        (
            "parameter in a batch",
            |v| {
                format!(r#"{{"events": [{{"eventName": "a"}}, {{"eventName": "e", "eventParams": {{"deep": {v}}}}}]}}"#)
            },
            "eventParams.deep",
        ),
    ];
    for (what, shape, field) in shapes {
        let mut deepest_written = 0;
        for depth in 1..=130 {
            let stream = LocalStream::new("game-events");
            let response = call(with_body(&shape(&nested(depth))), &stream, &quick()).await;
            match response.status_code {
                200 => {
                    deepest_written = depth;
                    for record in unpack_records(&stream.drain()).into_owned() {
                        decode_record(&record.kinesis.data.0)
                            .unwrap_or_else(|e| panic!("{what} nested {depth} deep: the sink cannot decode: {e}"));
                    }
                }
                400 => {
                    assert!(stream.is_empty());
                    let answer = body(&response);
                    let named = answer["errors"]
                        .as_array()
                        .is_some_and(|errors| errors.iter().any(|e| e["field"] == field));
                    // Past serde_json's own limit the body itself is not JSON it reads.
                    assert!(
                        named || answer["message"].as_str().unwrap_or_default().contains("recursion"),
                        "{what} nested {depth} deep: {answer}"
                    );
                }
                other => panic!("{what} nested {depth} deep: {other} {:?}", response.body),
            }
        }
        assert!(deepest_written >= 120, "{what}: only {deepest_written} deep written");
    }
}

/// A record stays in proportion to what its event says: white space between tokens is not copied
/// past a small allowance, and a client time is a bounded text.
#[tokio::test]
async fn padded_events_are_stored_compactly_or_refused() {
    let stream = LocalStream::new("game-events");
    let pad = " ".repeat(900_000);
    let padded = format!(r#"{{"eventName"{pad}: "levelUp", "eventParams": {{"level": 3}} }}"#);
    let response = call(with_body(&padded), &stream, &quick()).await;
    assert_eq!(response.status_code, 200, "{:?}", response.body);
    let records = unpack_records(&stream.drain()).into_owned();
    assert_eq!(records.len(), 1);
    let data = &records[0].kinesis.data.0;
    assert!(data.len() < 4096, "a record of {} bytes", data.len());
    let event = decode_record(data).unwrap();
    assert_eq!(event.event_name, "levelUp");

    // Pretty-printed events are still copied as written.
    let pretty = "{\n  \"eventName\": \"levelUp\",\n  \"eventParams\": {\n    \"level\": 3\n  }\n}";
    let response = call(with_body(pretty), &stream, &quick()).await;
    assert_eq!(response.status_code, 200, "{:?}", response.body);
    let record = String::from_utf8(unpack_records(&stream.drain()).into_owned().remove(0).kinesis.data.0).unwrap();
    assert!(record.contains("\"eventParams\": {\n    \"level\": 3\n  }"), "{record}");

    let late = format!(r#"{{"eventName": "e", "eventParams": {{"client_event_time": "{pad}2024-06-01T12:00:00Z"}}}}"#);
    let response = call(with_body(&late), &stream, &quick()).await;
    assert_eq!(response.status_code, 400, "{:?}", response.body);
    let answer = body(&response);
    assert_eq!(
        answer["errors"][0]["field"], "eventParams.client_event_time",
        "{answer}"
    );
    assert!(stream.is_empty());
}

/// A batch goes into the stream packed: one record holding every event in order, each event
/// answered with that record's shard and sequence number; the sink's unpacking gives back each
/// event's own record.
#[tokio::test]
async fn a_batch_travels_packed_in_one_record() {
    let stream = LocalStream::new("game-events");
    let response = call(with_body(&synth_batch(100, 5)), &stream, &quick()).await;
    assert_eq!(response.status_code, 200, "{:?}", response.body);
    let records = stream.drain();
    assert_eq!(records.len(), 1);
    assert!(game_events::packed::is_packed(&records[0].kinesis.data));
    let answer = body(&response);
    let results = answer["results"].as_array().unwrap();
    assert_eq!(results.len(), 100);
    assert!(
        results
            .iter()
            .all(|r| r["sequenceNumber"] == records[0].kinesis.sequence_number.as_str())
    );
    let answered: Vec<&str> = results.iter().map(|r| r["eventId"].as_str().unwrap()).collect();
    let stored = ids_in(&unpack_records(&records));
    assert_eq!(stored, answered, "every event once, in order");
}
