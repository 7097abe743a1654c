//! Runs the game events API's handler on arbitrary request bodies, with the in-memory stream as
//! sink. No input may panic; the answer is always JSON with a known status; a 200 answers for
//! exactly the records that reached the stream (same eventIds, in order, each record decoding to
//! the event the reference parser reads from the body, stamped with the request's time and the
//! answered eventId), and any other answer leaves the stream untouched. The body parser's one-pass
//! fast path (owned or borrowed) and its reference path must give the same result for the same
//! bytes.
//!
//! The first byte picks how the body is sent: as text or base64 (`isBase64Encoded`), declared
//! gzip or not, and with which content type; the rest is the body.

#![no_main]

use std::sync::LazyLock;

use aws_lambda_events::apigw::ApiGatewayProxyRequest;
use aws_lambda_events::encodings::Body;
use aws_lambda_events::http::{HeaderValue, Method};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use game_api::body_bytes;
use game_api::{ApiConfig, Game, Games, LocalStream, respond};
use game_events::{Limits, decode_record};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime")
});

/// Room for the request envelope a record holds besides its event: the fuzzed request has no
/// headers or context beyond a few fields.
const ENVELOPE_ALLOWANCE: usize = 16 * 1024;

const CONTENT_TYPES: [Option<&str>; 4] = [
    None,
    Some("application/json"),
    Some("application/json; charset=utf-8"),
    Some("text/plain"),
];

fn request(data: &[u8]) -> ApiGatewayProxyRequest {
    let (flags, body) = data.split_first().map_or((0, data), |(f, rest)| (*f, rest));
    let mut request = ApiGatewayProxyRequest::default();
    request.http_method = Method::POST;
    request.request_context.http_method = Method::POST;
    request.request_context.request_time_epoch = 1_717_243_200_123;
    if flags & 1 == 1 {
        request.is_base64_encoded = true;
        request.body = Some(STANDARD.encode(body));
    } else {
        // A text body must be a string: invalid UTF-8 is replaced, as API Gateway would.
        request.body = Some(String::from_utf8_lossy(body).into_owned());
    }
    if flags & 2 == 2 {
        request
            .headers
            .insert("content-encoding", HeaderValue::from_static("gzip"));
    }
    if let Some(content_type) = CONTENT_TYPES[usize::from(flags >> 2) % CONTENT_TYPES.len()] {
        request
            .headers
            .insert("content-type", HeaderValue::from_static(content_type));
    }
    request
}

fuzz_target!(|data: &[u8]| {
    let body = data.get(1..).unwrap_or_default();
    assert_eq!(
        game_events::parse_events(body),
        game_events::parse_events_reference(body),
        "the fast and the reference parser disagree"
    );
    let borrowed = game_events::parse_body(body).map(|events| {
        let owned: Option<Vec<_>> = events.into_iter().map(game_events::BodyEvent::into_owned).collect();
        owned.expect("every event of the body converts into a GameEvent")
    });
    assert_eq!(
        borrowed,
        game_events::parse_events_reference(body),
        "the borrowed and the reference parser disagree"
    );
    let request = request(data);
    let stream = LocalStream::with_capacity("fuzz", 1000);
    let config = ApiConfig::default();
    // What the handler reads: the body once decoded as the request says.
    let expected = body_bytes(&request, config.max_body_bytes)
        .ok()
        .and_then(|bytes| game_events::parse_events_reference(&bytes).ok());
    let games = Games::keys([("fuzz-key".to_owned(), Game::new("fuzz").expect("a game name"))]);
    let mut request = request;
    request.request_context.identity.api_key = Some("fuzz-key".to_owned());
    let response = RUNTIME.block_on(respond(&request, &games, &stream, &config));
    let Some(Body::Text(text)) = &response.body else {
        panic!("no JSON text body: {:?}", response.body)
    };
    let answer: Value = serde_json::from_str(text).expect("the body is JSON");
    let records = stream.drain();
    match response.status_code {
        200 => {
            let results = answer["results"].as_array().expect("results");
            assert_eq!(results.len(), records.len(), "one record per event");
            assert!(!records.is_empty());
            let expected = expected.expect("a 200 answers a valid body");
            assert_eq!(expected.len(), records.len(), "one record per event of the body");
            for ((result, record), want) in results.iter().zip(&records).zip(expected) {
                assert_eq!(result["status"], "written");
                assert_eq!(result["sequenceNumber"], record.kinesis.sequence_number.as_str());
                let event = decode_record(&record.kinesis.data.0).expect("every record decodes");
                // A record stays in proportion to its event: within the budget the limits give
                // an event, plus the request's envelope.
                assert!(
                    record.kinesis.data.0.len() <= ENVELOPE_ALLOWANCE + Limits::default().max_event_json_bytes(),
                    "a record of {} bytes",
                    record.kinesis.data.0.len()
                );
                assert_eq!(result["eventId"], event.event_id.to_string().as_str());
                assert_eq!(event.event_time.timestamp(), 1_717_243_200);
                // serde_json reads floats with best-effort precision (no `float_roundtrip`): a
                // number of many digits, read from the client's text or from what serde_json
                // wrote for it, can differ in the last bit. Anything more is a wrong record.
                // The API stamps the game of the request's key.
                let mut want = want.stamp_with_id(event.event_time, event.event_id);
                want.game_id = Some("fuzz".to_owned());
                let (got, want) = (
                    serde_json::to_value(&event).expect("an event serialises"),
                    serde_json::to_value(&want).expect("an event serialises"),
                );
                assert!(
                    same_to_the_last_bit(&got, &want),
                    "the record holds its event: {got} != {want}"
                );
            }
        }
        400 | 413 | 415 => {
            assert!(records.is_empty(), "a refused request wrote records");
            assert!(!answer["message"].as_str().expect("a message").is_empty());
        }
        other => panic!("unexpected status {other}: {text}"),
    }
});

/// `a` and `b` are equal, but for floating-point numbers one unit in the last place apart
/// (integers must be equal).
fn same_to_the_last_bit(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x != y => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => {
                x.is_sign_negative() == y.is_sign_negative() && x.to_bits().abs_diff(y.to_bits()) <= 1
            }
            _ => false,
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_to_the_last_bit(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(key, x)| y.get(key).is_some_and(|y| same_to_the_last_bit(x, y)))
        }
        _ => a == b,
    }
}
