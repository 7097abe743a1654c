//! Responding to a request: an API Gateway proxy request in, a JSON response out.
//!
//! Everything is checked before anything is written ([`prepare`]): the method, content type and
//! encoding, the body, every event, and the size of every record. Then the records are written
//! ([`deliver`]) and the response says, per event, whether it was.
//!
//! | status | when |
//! |---|---|
//! | 200 | every event written; `results` has each `eventId` with its shard and sequence number |
//! | 403 | no API key, or a key of no game (`lakelog serve`; API Gateway refuses these itself) |
//! | 400 | empty body, not base64 or gzip when marked so, not JSON, not an event or batch, or invalid events (`errors` lists every invalid event and field); nothing written |
//! | 405 | not a POST |
//! | 413 | body over 10 MiB (decoded), over 500 events, or an event whose record would pass Kinesis' 1 MiB |
//! | 415 | a content type other than JSON in UTF-8, an encoding other than gzip |
//! | 429 | some events unwritten because the game's lane of the stream is full (every failure a throughput one, after `throttled_budget`); `Retry-After`, and `results` says which: resend only those, later |
//! | 500 | a defect: a record could not be assembled |
//! | 503 | some events still unwritten when the time budget ran out; `Retry-After`, and `results` says which (status `failed`): resend only those, with the `eventId` the response gives; or the game of the key could not be looked up |

use std::time::Instant;

use aws_lambda_events::apigw::{ApiGatewayProxyRequest, ApiGatewayProxyResponse};
use aws_lambda_events::encodings::Body;
use aws_lambda_events::http::{HeaderMap, HeaderValue, header};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use game_events::json::write_str;
use game_events::{BodyError, BodyEvent, MAX_RECORD_BYTES, parse_body};
use serde::Serialize;
use serde_json::json;
use tracing::{debug, warn};
use uuid::Uuid;

use crate::config::{ApiConfig, PartitionKey};
use crate::deliver::{Delivery, Outcome, deliver};
use crate::games::{Game, GameError, Games};
use crate::pack::Packs;
use crate::request::{RequestError, accepts_gzip, body_bytes, envelope};
use crate::sink::{MAX_PARTITION_KEY_CHARS, PutEntry, RecordSink};

/// Why a request is refused before anything is written.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    /// The method, headers or body encoding.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// The request's key names no game, or its game could not be looked up.
    #[error(transparent)]
    Game(#[from] GameError),
    /// The body's JSON or its events.
    #[error(transparent)]
    Body(#[from] BodyError),
    /// Events too large for a Kinesis record.
    #[error("{}", too_large_message(.events))]
    RecordTooLarge {
        /// Index and record size (data and partition key) of each event over the limit.
        events: Vec<(usize, usize)>,
    },
    /// Events whose JSON in their record is over what the game's limits allow an event
    /// ([`game_events::Limits::max_event_json_bytes`]): a number written with thousands of digits,
    /// say, which no other bound catches.
    #[error("{}", event_too_large_message(.events, *.limit))]
    EventTooLarge {
        /// Index and bytes of JSON of each event over the limit.
        events: Vec<(usize, usize)>,
        /// The most bytes of JSON an event may take.
        limit: usize,
    },
    /// An event could not be serialised (never expected).
    #[error("an event could not be serialised: {0}")]
    Internal(String),
}

fn too_large_message(events: &[(usize, usize)]) -> String {
    let list: Vec<String> = events
        .iter()
        .map(|(index, bytes)| format!("event {index} ({bytes} bytes)"))
        .collect();
    format!(
        "{} too large: a Kinesis record, with the request envelope and the partition key, holds at most {MAX_RECORD_BYTES} bytes",
        list.join(", ")
    )
}

fn event_too_large_message(events: &[(usize, usize)], limit: usize) -> String {
    let list: Vec<String> = events
        .iter()
        .map(|(index, bytes)| format!("event {index} ({bytes} bytes of JSON)"))
        .collect();
    format!(
        "{} too large: with this game's limits on texts, parameters and values, an event takes at most {limit} \
         bytes of JSON",
        list.join(", ")
    )
}

impl ApiError {
    /// The HTTP status of the refusal.
    pub fn status(&self) -> u16 {
        match self {
            ApiError::Request(RequestError::MethodNotAllowed { .. }) => 405,
            ApiError::Request(RequestError::UnsupportedMediaType { .. } | RequestError::UnsupportedEncoding { .. }) => {
                415
            }
            ApiError::Request(RequestError::TooLarge { .. })
            | ApiError::Body(BodyError::TooManyEvents { .. })
            | ApiError::RecordTooLarge { .. }
            | ApiError::EventTooLarge { .. } => 413,
            ApiError::Request(RequestError::BadBase64 { .. } | RequestError::BadGzip { .. }) | ApiError::Body(_) => 400,
            ApiError::Game(e) => e.status(),
            ApiError::Internal(_) => 500,
        }
    }

    /// A short name of the refusal's kind, for metrics: one of a fixed few.
    pub fn reason(&self) -> &'static str {
        match self {
            ApiError::Request(RequestError::MethodNotAllowed { .. }) => "MethodNotAllowed",
            ApiError::Request(RequestError::UnsupportedMediaType { .. } | RequestError::UnsupportedEncoding { .. }) => {
                "UnsupportedMediaType"
            }
            ApiError::Request(RequestError::TooLarge { .. })
            | ApiError::Body(BodyError::TooManyEvents { .. })
            | ApiError::RecordTooLarge { .. }
            | ApiError::EventTooLarge { .. } => "TooLarge",
            ApiError::Request(RequestError::BadBase64 { .. } | RequestError::BadGzip { .. }) => "BadEncoding",
            ApiError::Body(BodyError::Empty | BodyError::NotJson { .. }) => "NotJson",
            ApiError::Body(BodyError::Invalid(_)) => "InvalidEvents",
            ApiError::Body(_) => "NotAnEventOrBatch",
            ApiError::Game(GameError::ApiGateway { .. }) => "GameLookup",
            ApiError::Game(_) => "NoGame",
            ApiError::Internal(_) => "Internal",
        }
    }
}

/// What became of one request: what [`answer`] reports besides the response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answered {
    /// The game of the request's key; `None` when the key named none.
    pub game: Option<String>,
    /// The response's status.
    pub status: u16,
    /// Events written to the stream.
    pub written: usize,
    /// Events of a valid request left unwritten (a 429 or 503).
    pub failed: usize,
    /// Why the request was refused ([`ApiError::reason`]); `None` when it was valid.
    pub refused: Option<&'static str>,
    /// Time spent answering.
    pub elapsed: std::time::Duration,
}

/// A request whose every event is valid, stamped and serialised into its record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    /// The `eventId` of each event, in request order.
    pub event_ids: Vec<Uuid>,
    /// The record of each event, in request order.
    pub entries: Vec<PutEntry>,
    /// Events that came without an `eventId` and got one from the server.
    pub assigned_ids: usize,
}

/// When API Gateway received the request (`requestContext.requestTimeEpoch`), if it says.
pub fn request_time(request: &ApiGatewayProxyRequest) -> Option<DateTime<Utc>> {
    let millis = request.request_context.request_time_epoch;
    (millis > 0).then(|| DateTime::from_timestamp_millis(millis)).flatten()
}

/// Checks the request and builds the record of every event, stamped with the request's time
/// (or `now` when API Gateway gives none) and `game`, and checked against `game`'s limits;
/// writes nothing.
pub fn prepare(
    request: &ApiGatewayProxyRequest,
    game: &Game,
    config: &ApiConfig,
    now: DateTime<Utc>,
) -> Result<Prepared, ApiError> {
    let body = body_bytes(request, config.max_body_bytes)?;
    let events = parse_body(&body)?;
    game.limits.check(&events).map_err(BodyError::from)?;
    let time = request_time(request).unwrap_or(now);
    let envelope = envelope(request);
    // Every record is written into one buffer, which the entries then share: one allocation per
    // request instead of one per event. A record is the envelope, the stamp (`eventId` and
    // `eventTime`, 62 bytes) and about as many bytes as its event had in the body: reserved with
    // room to spare, since growing the buffer would copy every record written so far.
    let mut buffer = Vec::with_capacity(events.len() * (envelope.overhead() + 128) + body.len());
    let mut records = Vec::with_capacity(events.len());
    let mut event_ids = Vec::with_capacity(events.len());
    let mut too_large = Vec::new();
    let mut assigned_ids = 0;
    let event_budget = game.limits.max_event_json_bytes();
    let mut over_budget = Vec::new();
    for (index, event) in events.iter().enumerate() {
        let event_id = event.event_id().unwrap_or_else(|| {
            assigned_ids += 1;
            Uuid::new_v4()
        });
        let pseudonymised;
        let event = match &game.pseudonym {
            Some(pseudonym) => {
                let owned = event
                    .clone()
                    .into_owned()
                    .ok_or_else(|| ApiError::Internal(format!("event {index}: not read back as an event")))?;
                pseudonymised = BodyEvent::Owned(Box::new(pseudonym.apply(owned)));
                &pseudonymised
            }
            None => event,
        };
        let start = buffer.len();
        envelope
            .write_body_event(event, time, event_id, Some(&game.id), &mut buffer)
            .map_err(|e| ApiError::Internal(format!("event {index}: {e}")))?;
        let partition_key = match config.partition_key {
            PartitionKey::DeviceId => event
                .device_id()
                .filter(|id| !id.is_empty() && id.chars().count() <= MAX_PARTITION_KEY_CHARS)
                .map(str::to_owned),
            PartitionKey::Random => None,
        }
        .unwrap_or_else(|| {
            event_id
                .hyphenated()
                .encode_lower(&mut Uuid::encode_buffer())
                .to_owned()
        });
        let size = buffer.len() - start + partition_key.len();
        if size > MAX_RECORD_BYTES {
            too_large.push((index, size));
        }
        let event_bytes = (buffer.len() - start).saturating_sub(envelope.overhead());
        if event_bytes > event_budget {
            over_budget.push((index, event_bytes));
        }
        event_ids.push(event_id);
        records.push((start..buffer.len(), partition_key));
    }
    if !too_large.is_empty() {
        return Err(ApiError::RecordTooLarge { events: too_large });
    }
    if !over_budget.is_empty() {
        return Err(ApiError::EventTooLarge {
            events: over_budget,
            limit: event_budget,
        });
    }
    let buffer = Bytes::from(buffer);
    let entries = records
        .into_iter()
        .map(|(range, partition_key)| PutEntry {
            data: buffer.slice(range),
            explicit_hash_key: game.lane.map(|lane| lane.hash_key(&partition_key)),
            partition_key,
        })
        .collect();
    Ok(Prepared {
        event_ids,
        entries,
        assigned_ids,
    })
}

/// Checks the request, writes its events, as the game of its key in `games`, through `sink`,
/// and says what became of each.
pub async fn respond<S: RecordSink>(
    request: &ApiGatewayProxyRequest,
    games: &Games,
    sink: &S,
    config: &ApiConfig,
) -> ApiGatewayProxyResponse {
    answer(request, games, sink, config).await.0
}

/// [`respond`], and what became of the request in figures (for the function's metrics). The
/// answer is gzip when the client takes it ([`accepts_gzip`]) and it is long enough to gain:
/// data transfer out is billed by the byte, and a batch's answer shrinks about sixfold.
pub async fn answer<S: RecordSink>(
    request: &ApiGatewayProxyRequest,
    games: &Games,
    sink: &S,
    config: &ApiConfig,
) -> (ApiGatewayProxyResponse, Answered) {
    // Boxed: one more level of nested futures passes the compiler's layout depth in the function.
    let (response, answered) = Box::pin(answer_plain(request, games, sink, config)).await;
    let response = if accepts_gzip(request) {
        gzip_response(response)
    } else {
        response
    };
    (response, answered)
}

/// Bodies shorter than this are answered as they are: gzip's own 20 bytes would eat the gain.
const GZIP_MIN_BYTES: usize = 256;

/// `response` with its text body gzip-compressed (binary, so base64 to API Gateway, which passes
/// it on as bytes: the API's binary media types are `*/*`), `Content-Encoding: gzip` and `Vary:
/// Accept-Encoding`; a short body, or one that cannot be compressed, as it is.
fn gzip_response(mut response: ApiGatewayProxyResponse) -> ApiGatewayProxyResponse {
    use std::io::Write;
    let Some(Body::Text(text)) = &response.body else {
        return response;
    };
    if text.len() < GZIP_MIN_BYTES {
        return response;
    }
    let mut encoder = flate2::write::GzEncoder::new(Vec::with_capacity(text.len() / 4), flate2::Compression::default());
    let Ok(compressed) = encoder.write_all(text.as_bytes()).and_then(|()| encoder.finish()) else {
        return response;
    };
    response.body = Some(Body::Binary(compressed));
    response.is_base64_encoded = true;
    response
        .headers
        .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    response
        .headers
        .insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    response
}

async fn answer_plain<S: RecordSink>(
    request: &ApiGatewayProxyRequest,
    games: &Games,
    sink: &S,
    config: &ApiConfig,
) -> (ApiGatewayProxyResponse, Answered) {
    let started = Instant::now();
    let request_id = request.request_context.request_id.as_deref().unwrap_or("");
    let refused = |error: ApiError, game: Option<String>| {
        let status = error.status();
        warn!(request_id, status, game, error = %error, "request refused");
        let answered = Answered {
            game,
            status,
            written: 0,
            failed: 0,
            refused: Some(error.reason()),
            elapsed: started.elapsed(),
        };
        (error_response(&error), answered)
    };
    let game = match games.resolve(request).await {
        Ok(game) => game,
        Err(error) => return refused(error.into(), None),
    };
    let game_id = Some(game.id.clone());
    let prepared = match prepare(request, &game, config, Utc::now()) {
        Ok(prepared) => prepared,
        Err(error) => return refused(error, game_id),
    };
    let packs = Packs::new(&prepared.entries, config.record_format, config.partition_key);
    let delivery = packs.per_event(
        deliver(sink, &packs.entries, &config.delivery).await,
        prepared.entries.len(),
    );
    let response = delivery_response(&prepared, &delivery, config);
    let elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
    if delivery.failed() == 0 {
        // Its figures are in the request's metrics; at the default level a written request adds
        // no line of its own to the log, which CloudWatch Logs bills by the byte.
        debug!(
            request_id,
            status = 200,
            events = prepared.entries.len(),
            calls = delivery.calls,
            rounds = delivery.rounds,
            elapsed_ms,
            "events written"
        );
    } else {
        warn!(
            request_id,
            status = delivery_status(&delivery),
            events = prepared.entries.len(),
            written = delivery.written(),
            failed = delivery.failed(),
            calls = delivery.calls,
            rounds = delivery.rounds,
            elapsed_ms,
            "events not written"
        );
    }
    let answered = Answered {
        game: game_id,
        status: delivery_status(&delivery),
        written: delivery.written(),
        failed: delivery.failed(),
        refused: None,
        elapsed: started.elapsed(),
    };
    (response, answered)
}

/// A JSON response.
pub fn json_response(
    status: u16,
    body: &impl Serialize,
    extra_headers: &[(header::HeaderName, String)],
) -> ApiGatewayProxyResponse {
    let text = serde_json::to_string(body)
        .unwrap_or_else(|e| json!({"message": format!("the response could not be serialised: {e}")}).to_string());
    text_response(status, text, extra_headers)
}

/// A response whose body is `text`, already JSON.
fn text_response(status: u16, text: String, extra_headers: &[(header::HeaderName, String)]) -> ApiGatewayProxyResponse {
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    for (name, value) in extra_headers {
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.insert(name.clone(), value);
        }
    }
    let mut response = ApiGatewayProxyResponse::default();
    response.status_code = i64::from(status);
    response.headers = headers;
    response.body = Some(Body::Text(text));
    response.is_base64_encoded = false;
    response
}

/// The response to a refused request: `{"message": ...}`, and `errors` listing every problem of
/// every invalid event.
pub fn error_response(error: &ApiError) -> ApiGatewayProxyResponse {
    let status = error.status();
    let mut headers = Vec::new();
    if status == 405 {
        headers.push((header::ALLOW, "POST".to_owned()));
    }
    let body = match error {
        ApiError::Body(BodyError::Invalid(invalid)) => json!({
            "message": format!(
                "{} of {} events are invalid; nothing was written",
                invalid.invalid, invalid.events
            ),
            "errors": invalid.problems,
        }),
        ApiError::RecordTooLarge { events } => json!({
            "message": error.to_string(),
            "errors": events
                .iter()
                .map(|(index, bytes)| json!({"index": index, "bytes": bytes, "limit": MAX_RECORD_BYTES}))
                .collect::<Vec<_>>(),
        }),
        ApiError::EventTooLarge { events, limit } => json!({
            "message": error.to_string(),
            "errors": events
                .iter()
                .map(|(index, bytes)| json!({"index": index, "bytes": bytes, "limit": limit}))
                .collect::<Vec<_>>(),
        }),
        _ => json!({"message": error.to_string()}),
    };
    json_response(status, &body, &headers)
}

/// The status of a delivery: 200 when every event was written, 429 when the others were refused
/// for throughput only, else 503.
fn delivery_status(delivery: &Delivery) -> u16 {
    if delivery.failed() == 0 {
        200
    } else if delivery.throttled() {
        429
    } else {
        503
    }
}

/// 200 when every event was written, else 429 or 503 with `Retry-After`; each lists every event.
pub fn delivery_response(prepared: &Prepared, delivery: &Delivery, config: &ApiConfig) -> ApiGatewayProxyResponse {
    let (written, failed) = (delivery.written(), delivery.failed());
    if failed == 0 {
        let message = if prepared.assigned_ids == 0 {
            format!("{written} events written")
        } else {
            // A retry after a lost answer would get another id: a second event no one can tell
            // from the first.
            format!(
                "{written} events written; {} came without an eventId and got one here: send your own (a UUID \
                 made with the event) and reuse it on every retry, so that a retry after a lost answer is not \
                 counted twice",
                prepared.assigned_ids
            )
        };
        let body = delivery_body(&message, written, failed, &prepared.event_ids, &delivery.outcomes);
        text_response(200, body, &[])
    } else {
        let retry_after = config.retry_after_seconds();
        let why = if delivery.throttled() {
            "this game's share of the stream is full: slow down"
        } else {
            "the stream did not take them in time"
        };
        let message = format!(
            "{failed} of {} events could not be written ({why}); resend only the events with status \"failed\", \
             with the eventId given here, after {retry_after} s",
            written + failed
        );
        let body = delivery_body(&message, written, failed, &prepared.event_ids, &delivery.outcomes);
        text_response(
            delivery_status(delivery),
            body,
            &[(header::RETRY_AFTER, retry_after.to_string())],
        )
    }
}

/// The body of a 200 or 503 answer: `message`, `written`, `failed`, and `results` with one object
/// per event: its `eventId` and `status`, then `shardId` and `sequenceNumber` when it was written,
/// `errorCode` and `errorMessage` when it failed. Written field by field, as serde would write the
/// same structure, without a serialiser call per field.
fn delivery_body(message: &str, written: usize, failed: usize, event_ids: &[Uuid], outcomes: &[Outcome]) -> String {
    let mut out = Vec::with_capacity(128 + event_ids.len() * 160);
    out.extend_from_slice(b"{\"message\":");
    write_str(&mut out, message);
    out.extend_from_slice(format!(",\"written\":{written},\"failed\":{failed},\"results\":[").as_bytes());
    for (index, (id, outcome)) in event_ids.iter().zip(outcomes).enumerate() {
        if index > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"eventId\":\"");
        out.extend_from_slice(id.hyphenated().encode_lower(&mut Uuid::encode_buffer()).as_bytes());
        match outcome {
            Outcome::Written(written) => {
                out.extend_from_slice(b"\",\"status\":\"written\",\"shardId\":");
                write_str(&mut out, &written.shard_id);
                out.extend_from_slice(b",\"sequenceNumber\":");
                write_str(&mut out, &written.sequence_number);
            }
            Outcome::Failed(failure) => {
                out.extend_from_slice(b"\",\"status\":\"failed\",\"errorCode\":");
                write_str(&mut out, &failure.code);
                out.extend_from_slice(b",\"errorMessage\":");
                write_str(&mut out, &failure.message);
            }
        }
        out.push(b'}');
    }
    out.extend_from_slice(b"]}");
    // Every piece written is UTF-8: the text given and serde_json's escapes.
    String::from_utf8(out).unwrap_or_else(|err| String::from_utf8_lossy(err.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delivery_bodies_are_the_json_of_every_result() {
        use crate::sink::{EntryFailure, Written};
        let ids = [Uuid::from_u128(1), Uuid::from_u128(2)];
        let outcomes = [
            Outcome::Written(Written {
                shard_id: "shardId-000000000000".into(),
                sequence_number: "4959001".into(),
            }),
            Outcome::Failed(EntryFailure {
                code: "ProvisionedThroughputExceededException".into(),
                message: "Rate exceeded for \"shard\"\n\\ é".into(),
            }),
        ];
        let body = delivery_body("1 of 2 \"events\"", 1, 1, &ids, &outcomes);
        let value: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            value,
            json!({
                "message": "1 of 2 \"events\"",
                "written": 1,
                "failed": 1,
                "results": [
                    {"eventId": ids[0], "status": "written", "shardId": "shardId-000000000000", "sequenceNumber": "4959001"},
                    {"eventId": ids[1], "status": "failed", "errorCode": "ProvisionedThroughputExceededException",
                     "errorMessage": "Rate exceeded for \"shard\"\n\\ é"}
                ]
            })
        );
        assert_eq!(
            delivery_body("none", 0, 0, &[], &[]),
            r#"{"message":"none","written":0,"failed":0,"results":[]}"#
        );
    }

    #[test]
    fn statuses() {
        let cases: [(ApiError, u16); 8] = [
            (RequestError::MethodNotAllowed { method: "GET".into() }.into(), 405),
            (
                RequestError::UnsupportedMediaType {
                    content_type: "text/xml".into(),
                }
                .into(),
                415,
            ),
            (RequestError::UnsupportedEncoding { encoding: "br".into() }.into(), 415),
            (RequestError::BadGzip { reason: "x".into() }.into(), 400),
            (
                RequestError::TooLarge {
                    limit: 1,
                    decompressed: true,
                }
                .into(),
                413,
            ),
            (BodyError::TooManyEvents { count: 501, max: 500 }.into(), 413),
            (BodyError::Empty.into(), 400),
            (
                ApiError::RecordTooLarge {
                    events: vec![(3, 2 << 20)],
                },
                413,
            ),
        ];
        for (error, status) in cases {
            assert_eq!(error.status(), status, "{error}");
        }
        assert_eq!(
            ApiError::RecordTooLarge {
                events: vec![(3, 1_100_000), (7, 2_000_000)]
            }
            .to_string(),
            "event 3 (1100000 bytes), event 7 (2000000 bytes) too large: a Kinesis record, with the request \
             envelope and the partition key, holds at most 1048576 bytes"
        );
    }
}
