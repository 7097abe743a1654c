//! The Kinesis record of an event, in the seed's shape: the API Gateway proxy request as JSON, with
//! `body` replaced by the stamped event object. Both directions: [`Envelope`] writes records,
//! [`decode_record`] reads the stamped event back out of one.

use std::io::Write;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::body::BodyEvent;
use crate::error::{FieldProblem, RecordError, describe};
use crate::event::{EVENT_ID, EVENT_NAME, EVENT_PARAMS, EVENT_TIME, EventParams, GAME_ID, StampedEvent};
use crate::time;

/// The envelope field that holds the event.
pub const BODY: &str = "body";

/// The envelope field that says whether `body` is base64; always `false` in a record.
pub const IS_BASE64_ENCODED: &str = "isBase64Encoded";

/// Namespace of the ids [`decode_record`] derives for records without an `eventId`.
pub const DERIVED_ID_NAMESPACE: Uuid = Uuid::from_u128(0x6c61_6b65_6c6f_4761_6d65_4576_656e_7473);

/// The part of every record of one request that does not depend on the event: the request,
/// serialised once, so that each record is that prefix, the event and a closing brace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// `{...,"body":` — everything of the record before the event.
    prefix: Vec<u8>,
}

impl Envelope {
    /// The envelope of `request`, the API Gateway proxy request as a JSON object. Its `body` is
    /// dropped (each record gets its event there) and `isBase64Encoded` is set to `false`.
    pub fn new(mut request: Map<String, Value>) -> Self {
        request.remove(BODY);
        request.insert(IS_BASE64_ENCODED.to_owned(), Value::Bool(false));
        let request = Value::Object(request);
        // Serialising a `Value` cannot fail (its keys are strings); `to_vec` writes straight into
        // the buffer, where `Display` goes through a formatter adapter.
        let mut prefix = serde_json::to_vec(&request).unwrap_or_else(|_| request.to_string().into_bytes());
        // `{...}` -> `{...,"body":`; the map is never empty, it holds isBase64Encoded.
        prefix.pop();
        prefix.extend_from_slice(b",\"body\":");
        Self { prefix }
    }

    /// The envelope of a request already serialised: `json` is the text of a JSON object without
    /// a `body` field and with `isBase64Encoded` `false` (what [`Envelope::new`] makes of a
    /// request); each record is that object with `body`, the event, as its last field. `None`
    /// when `json` is not the text of an object.
    pub fn from_object_json(mut json: Vec<u8>) -> Option<Self> {
        while json.last().is_some_and(u8::is_ascii_whitespace) {
            json.pop();
        }
        let open = json.iter().position(|b| !b.is_ascii_whitespace())?;
        if json[open] != b'{' || open + 1 == json.len() || json.pop() != Some(b'}') {
            return None;
        }
        // `{...}` -> `{...,"body":`, or `{` -> `{"body":` for an empty object.
        if json[open + 1..].iter().any(|b| !b.is_ascii_whitespace()) {
            json.push(b',');
        }
        json.extend_from_slice(b"\"body\":");
        Some(Self { prefix: json })
    }

    /// Bytes the envelope adds to each event: the record is this plus the event's JSON.
    pub fn overhead(&self) -> usize {
        self.prefix.len() + 1
    }

    /// Appends the record of `event` to `out`.
    pub fn write_record(&self, event: &StampedEvent, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
        out.write_all(&self.prefix).map_err(serde_json::Error::io)?;
        serde_json::to_writer(&mut *out, event)?;
        out.push(b'}');
        Ok(())
    }

    /// Appends the record of an event of a request body, stamped with `time` (to the whole
    /// second) and `event_id`: the record [`Envelope::write_record`] writes for the
    /// [`StampedEvent`], with the fields the model does not read copied as the client wrote them.
    pub fn write_body_event(
        &self,
        event: &BodyEvent<'_>,
        time: DateTime<Utc>,
        event_id: Uuid,
        game: Option<&str>,
        out: &mut Vec<u8>,
    ) -> Result<(), serde_json::Error> {
        out.extend_from_slice(&self.prefix);
        event.write_stamped(time, event_id, game, out)?;
        out.push(b'}');
        Ok(())
    }

    /// The record of `event`.
    pub fn record(&self, event: &StampedEvent) -> Result<Vec<u8>, serde_json::Error> {
        let mut out = Vec::with_capacity(self.prefix.len() + 512);
        self.write_record(event, &mut out)?;
        Ok(out)
    }
}

/// Reads the stamped event out of the data of a Kinesis record.
///
/// The data is the API Gateway request as JSON with the event object as `body` (a `body` that is a
/// JSON string holding the event object is read too). The event needs `eventName` (a string) and
/// `eventTime` (epoch seconds, whole or fractional); its `eventParams` must have the seed's types
/// and a `client_event_time` that [`time::parse_client_time`] reads. A record without `eventId`
/// (older producers wrote none) gets an id derived from its data (a v5 UUID in
/// [`DERIVED_ID_NAMESPACE`]), so redeliveries of one record keep one id.
pub fn decode_record(data: &[u8]) -> Result<StampedEvent, RecordError> {
    if crate::packed::is_packed(data) {
        // A packed record is unpacked first (`packed::unpack_records`); one still packed here is
        // one that could not be.
        return Err(RecordError::Packed(match crate::packed::unpack(data) {
            Err(e) => e,
            Ok(records) => crate::packed::PackedError::NotUnpacked { events: records.len() },
        }));
    }
    let value: Value = serde_json::from_slice(data).map_err(|e| RecordError::NotJson { reason: e.to_string() })?;
    let mut envelope = match value {
        Value::Object(map) => map,
        other => {
            return Err(RecordError::NotAnObject {
                found: describe(&other),
            });
        }
    };
    let body = match envelope.remove(BODY) {
        None | Some(Value::Null) => return Err(RecordError::NoBody),
        Some(Value::Object(body)) => body,
        Some(Value::String(text)) => match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(body)) => body,
            Ok(other) => {
                return Err(RecordError::BadBody {
                    found: format!("a string holding {}", describe(&other)),
                });
            }
            Err(e) => {
                return Err(RecordError::BadBody {
                    found: format!("a string that is not JSON ({e})"),
                });
            }
        },
        Some(other) => {
            return Err(RecordError::BadBody {
                found: describe(&other),
            });
        }
    };
    stamped_from_map(body, data)
}

fn stamped_from_map(mut body: Map<String, Value>, data: &[u8]) -> Result<StampedEvent, RecordError> {
    let mut problems = Vec::new();
    let event_name = match body.remove(EVENT_NAME) {
        None | Some(Value::Null) => return Err(RecordError::NoEventName),
        Some(Value::String(name)) => name,
        Some(other) => {
            problems.push(FieldProblem::expected(EVENT_NAME, "a string", &other));
            String::new()
        }
    };
    let event_time = match body.remove(EVENT_TIME) {
        None | Some(Value::Null) => return Err(RecordError::NoEventTime),
        Some(Value::Number(n)) => match time::from_number(&n) {
            Ok(t) => Some(t),
            Err(e) => {
                problems.push(FieldProblem::new(EVENT_TIME, e.to_string()));
                None
            }
        },
        Some(other) => {
            problems.push(FieldProblem::expected(EVENT_TIME, "epoch seconds (a number)", &other));
            None
        }
    };
    let event_id = match body.remove(EVENT_ID) {
        None | Some(Value::Null) => Some(Uuid::new_v5(&DERIVED_ID_NAMESPACE, data)),
        Some(Value::String(s)) => match Uuid::try_parse(&s) {
            Ok(id) => Some(id),
            Err(_) => {
                problems.push(FieldProblem::expected(EVENT_ID, "a UUID", &Value::String(s)));
                None
            }
        },
        Some(other) => {
            problems.push(FieldProblem::expected(EVENT_ID, "a UUID string", &other));
            None
        }
    };
    let game_id = match body.remove(GAME_ID) {
        None | Some(Value::Null) => None,
        Some(Value::String(game)) => Some(game),
        Some(other) => {
            problems.push(FieldProblem::expected(GAME_ID, "a string", &other));
            None
        }
    };
    let event_params = body
        .remove(EVENT_PARAMS)
        .and_then(|v| EventParams::from_value(v, &mut problems));
    match (event_time, event_id) {
        (Some(event_time), Some(event_id)) if problems.is_empty() => Ok(StampedEvent {
            event_name,
            event_time,
            event_id,
            game_id,
            event_params,
            extra: body,
        }),
        _ => Err(RecordError::BadFields(problems)),
    }
}

#[cfg(test)]
mod tests {
    use chrono::DateTime;
    use serde_json::json;

    use super::*;
    use crate::event::GameEvent;

    fn request() -> Map<String, Value> {
        json!({
            "resource": "/events",
            "path": "/events",
            "httpMethod": "POST",
            "headers": {"content-type": "application/json"},
            "requestContext": {"requestId": "r-1", "requestTimeEpoch": 1_717_243_200_123_i64},
            "body": "{\"events\": []}",
            "isBase64Encoded": true
        })
        .as_object()
        .unwrap()
        .clone()
    }

    fn stamped(event: Value) -> StampedEvent {
        let time = DateTime::parse_from_rfc3339("2024-06-01T12:00:00Z").unwrap().to_utc();
        GameEvent::from_value(event).unwrap().stamp(time)
    }

    #[test]
    fn records_have_the_seed_shape_and_decode_back() {
        let envelope = Envelope::new(request());
        let event = stamped(json!({
            "eventName": "purchaseEvent",
            "eventParams": {"amount": 4.99, "device_id": "d-1", "client_event_time": "2024-06-01 11:59:58", "sku": "x"},
            "level": 7
        }));
        let record = envelope.record(&event).unwrap();
        assert_eq!(
            record.len(),
            envelope.overhead() + serde_json::to_vec(&event).unwrap().len()
        );
        let value: Value = serde_json::from_slice(&record).unwrap();
        assert_eq!(value["httpMethod"], json!("POST"));
        assert_eq!(value["isBase64Encoded"], json!(false));
        assert_eq!(value["requestContext"]["requestId"], json!("r-1"));
        assert_eq!(value["body"]["eventName"], json!("purchaseEvent"));
        assert_eq!(value["body"]["eventTime"], json!(1_717_243_200));
        assert_eq!(value["body"]["eventId"], json!(event.event_id.to_string()));
        assert_eq!(value["body"]["eventParams"]["sku"], json!("x"));
        assert_eq!(value["body"]["level"], json!(7));
        assert_eq!(decode_record(&record).unwrap(), event);
    }

    #[test]
    fn envelopes_of_serialised_requests_write_the_same_records() {
        let mut map = request();
        map.remove(BODY);
        map.insert(IS_BASE64_ENCODED.to_owned(), Value::Bool(false));
        let json = serde_json::to_vec(&map).unwrap();
        let event = stamped(json!({"eventName": "levelUp"}));
        let from_json = Envelope::from_object_json(json).unwrap();
        assert_eq!(
            from_json.record(&event).unwrap(),
            Envelope::new(request()).record(&event).unwrap()
        );
        let empty = Envelope::from_object_json(b" { } \n".to_vec()).unwrap();
        let record: Value = serde_json::from_slice(&empty.record(&event).unwrap()).unwrap();
        assert_eq!(record, json!({"body": serde_json::to_value(&event).unwrap()}));
        for not_an_object in [&b""[..], b"[]", b"\"{}\"", b"{"] {
            assert_eq!(Envelope::from_object_json(not_an_object.to_vec()), None);
        }
    }

    #[test]
    fn string_bodies_and_records_without_event_id() {
        let data = json!({"body": "{\"eventName\": \"levelUp\", \"eventTime\": 1717243200.5}"}).to_string();
        let event = decode_record(data.as_bytes()).unwrap();
        assert_eq!(event.event_name, "levelUp");
        assert_eq!(event.event_time.timestamp_millis(), 1_717_243_200_500);
        assert_eq!(event.event_id.get_version_num(), 5);
        // The same record always gets the same id; another record another one.
        assert_eq!(decode_record(data.as_bytes()).unwrap().event_id, event.event_id);
        let other = json!({"body": {"eventName": "levelUp", "eventTime": 1_717_243_200}}).to_string();
        assert_ne!(decode_record(other.as_bytes()).unwrap().event_id, event.event_id);
    }

    #[test]
    fn bad_records_say_what_and_where() {
        let cases: [(&[u8], &str); 12] = [
            (b"\x00garbage", "record data is not JSON: expected value at line 1 column 1"),
            (b"[1]", "record data is an array, not a JSON object (the API Gateway request)"),
            (b"{\"headers\": {}}", "record has no body (the event object)"),
            (b"{\"body\": null}", "record has no body (the event object)"),
            (b"{\"body\": 5}", "body: expected the event object, found a number (5)"),
            (b"{\"body\": \"[]\"}", "body: expected the event object, found a string holding an array"),
            (b"{\"body\": {\"eventTime\": 1}}", "body.eventName: required"),
            (b"{\"body\": {\"eventName\": \"x\"}}", "body.eventTime: required (the server's stamp, epoch seconds)"),
            (
                b"{\"body\": {\"eventName\": \"x\", \"eventTime\": \"noon\"}}",
                "body.eventTime: expected epoch seconds (a number), found a string (\"noon\")",
            ),
            (
                b"{\"body\": {\"eventName\": \"x\", \"eventTime\": 1e300}}",
                "body.eventTime: epoch seconds out of range: 1e+300",
            ),
            (
                b"{\"body\": {\"eventName\": 1, \"eventTime\": 1, \"eventId\": \"x\"}}",
                "body.eventName: expected a string, found a number (1); body.eventId: expected a UUID, found a string (\"x\")",
            ),
            (
                b"{\"body\": {\"eventName\": \"x\", \"eventTime\": 1, \"eventParams\": {\"scoreAdjustment\": \"3\", \"client_event_time\": \"soon\"}}}",
                "body.eventParams.scoreAdjustment: expected a whole number from -2147483648 to 2147483647, found \
                 a string (\"3\"); body.eventParams.client_event_time: expected a date and time like \
                 2024-06-01T12:00:00Z or 2024-06-01 12:00:00.123, found \"soon\"",
            ),
        ];
        for (data, want) in cases {
            let err = decode_record(data).unwrap_err();
            assert!(
                err.to_string().starts_with(want),
                "{}:\n  {err}\n  {want}",
                String::from_utf8_lossy(data)
            );
        }
    }

    #[test]
    fn envelope_never_carries_the_request_body() {
        let envelope = Envelope::new(request());
        let event = stamped(json!({"eventName": "x"}));
        let record = String::from_utf8(envelope.record(&event).unwrap()).unwrap();
        assert!(!record.contains("\\\"events\\\""), "{record}");
        assert_eq!(record.matches("\"body\"").count(), 1);
        let empty = Envelope::new(Map::new()).record(&event).unwrap();
        let value: Value = serde_json::from_slice(&empty).unwrap();
        assert_eq!(value.as_object().unwrap().len(), 2);
    }
}
