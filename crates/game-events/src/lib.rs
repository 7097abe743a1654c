//! Mobile game events: the event model, validation, server-side stamping and the Kinesis record
//! envelope of lakelog's game pipeline. No AWS client and no async dependency (the `kinesis`
//! feature brings `aws_lambda_events`' types, for [`packed::unpack_records`]).
//!
//! Game clients POST one event object or `{"events": [...]}` to the API. [`parse_body`] reads
//! and validates a body, listing every problem of every invalid event by index and field;
//! [`GameEvent::stamp`] gives an event the server's `eventTime` (epoch seconds) and its `eventId`
//! (the client's UUID, or a new one). Each event travels through Kinesis in the seed's shape: the
//! API Gateway proxy request as JSON with `body` replaced by the stamped event ([`Envelope`]), and
//! the sink reads it back with [`decode_record`]. A request's events may travel packed, several
//! in one compressed record ([`packed`]).
//!
//! ```
//! use chrono::{TimeZone, Utc};
//! use game_events::{Envelope, decode_record, parse_body};
//!
//! let body = br#"{"events": [{"eventName": "purchaseEvent",
//!                             "eventParams": {"amount": 4.99, "device_id": "D-1", "sku": "gems"}}]}"#;
//! let events = parse_body(body)?;
//! let received = Utc.timestamp_opt(1_717_243_200, 0).unwrap();
//! let event = events.into_iter().next().unwrap().into_owned().unwrap();
//! let stamped = event.stamp(received);
//!
//! let request = serde_json::json!({"httpMethod": "POST", "path": "/events", "body": "..."});
//! let envelope = Envelope::new(request.as_object().unwrap().clone());
//! let record = envelope.record(&stamped)?;
//!
//! let back = decode_record(&record)?;
//! assert_eq!(back.event_time.timestamp(), 1_717_243_200);
//! assert_eq!(back.booking(), Some(4.99));
//! assert_eq!(back.event_params.unwrap().extra["sku"], "gems");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#[cfg(feature = "arrow")]
pub mod batch;
mod body;
mod borrowed;
mod envelope;
mod error;
mod event;
mod fast;
pub mod json;
mod keys;
mod limits;
mod names;
mod object;
pub mod packed;
mod params;
mod span;
pub mod time;

pub use body::{BodyEvent, parse_body};
/// The owned and the validating paths on their own, for checking that the one-pass parser agrees
/// with them (the `api_body` fuzz target); [`parse_body`] already answers through the validating
/// one whenever a body is invalid.
#[cfg(feature = "reference")]
pub use body::{parse_events, parse_events_reference};
pub use borrowed::BorrowedEvent;
pub use envelope::{BODY, DERIVED_ID_NAMESPACE, Envelope, IS_BASE64_ENCODED, decode_record};
pub use error::{BodyError, EventProblem, FieldProblem, InvalidEvents, RecordError};
pub use event::{
    EVENT_ID, EVENT_NAME, EVENT_PARAMS, EVENT_TIME, EVENTS, EventParams, GAME_ID, GameEvent, MAX_EVENTS_PER_REQUEST,
    MAX_RECORD_BYTES, PARAM_FIELDS, PROBE_EVENT, PROBE_GAME, PURCHASE_EVENT, RESERVED_FIELDS, StampedEvent,
};
pub use limits::Limits;
