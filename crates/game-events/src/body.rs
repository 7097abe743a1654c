//! Request bodies: one event object, or `{"events": [...]}`.

use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use crate::borrowed::BorrowedEvent;
use crate::error::{BodyError, EventProblem, InvalidEvents, describe};
use crate::event::{EVENTS, GameEvent, MAX_EVENTS_PER_REQUEST};

/// Reads the events of a request body (UTF-8 JSON, already decoded and decompressed) and validates
/// all of them: either every event is valid and they are returned in order, or the error lists
/// every problem of every invalid event (see [`GameEvent::from_value`] for the rules).
///
/// A body is one event object, or an object whose only field is `events`, an array of 1 to
/// [`MAX_EVENTS_PER_REQUEST`] event objects.
#[cfg(any(test, feature = "reference"))]
pub fn parse_events(body: &[u8]) -> Result<Vec<GameEvent>, BodyError> {
    // Valid bodies, the common case, in one pass; anything else through the path that lists every
    // problem.
    let fast = crate::fast::parse(body).and_then(|events| events.into_iter().map(BorrowedEvent::into_owned).collect());
    match fast {
        Some(events) => Ok(events),
        None => parse_events_reference(body),
    }
}

/// An event of a body accepted by [`parse_body`]: borrowed from the body when the one-pass parser
/// read it, a [`GameEvent`] when the reference path did. Either way the same event as the
/// reference path makes of it.
#[derive(Debug, Clone)]
#[allow(
    clippy::large_enum_variant,
    reason = "the borrowed event is the common case and is read in place, without an allocation of its own"
)]
pub enum BodyEvent<'a> {
    /// Read by the one-pass parser (every valid body the fast path takes).
    Borrowed(BorrowedEvent<'a>),
    /// Read by the reference path (valid bodies the fast path gives up on).
    Owned(Box<GameEvent>),
}

impl BodyEvent<'_> {
    /// The client's `eventId`, if it sent one.
    pub fn event_id(&self) -> Option<Uuid> {
        match self {
            Self::Borrowed(event) => event.event_id(),
            Self::Owned(event) => event.event_id,
        }
    }

    /// `eventParams.device_id`, if any.
    pub fn device_id(&self) -> Option<&str> {
        match self {
            Self::Borrowed(event) => event.device_id(),
            Self::Owned(event) => event.event_params.as_ref()?.device_id.as_deref(),
        }
    }

    /// The event as a [`GameEvent`]; `None` only if the parser's checks and `serde_json` disagree
    /// (see [`BorrowedEvent::into_owned`]).
    pub fn into_owned(self) -> Option<GameEvent> {
        match self {
            Self::Borrowed(event) => event.into_owned(),
            Self::Owned(event) => Some(*event),
        }
    }

    /// Appends the JSON of the event stamped with `time` (to the whole second), `event_id` and
    /// `game`: the fields and values of [`GameEvent::stamp_with_id`]'s [`crate::StampedEvent`].
    pub fn write_stamped(
        &self,
        time: DateTime<Utc>,
        event_id: Uuid,
        game: Option<&str>,
        out: &mut Vec<u8>,
    ) -> serde_json::Result<()> {
        match self {
            Self::Borrowed(event) => event.write_stamped(time, event_id, game, out),
            Self::Owned(event) => {
                let mut stamped = event.clone().stamp_with_id(time, event_id);
                stamped.event_id = event_id;
                stamped.game_id = game.map(str::to_owned);
                serde_json::to_writer(out, &stamped)
            }
        }
    }
}

/// Reads the events of a request body (UTF-8 JSON, already decoded and decompressed) and validates
/// all of them: either every event is valid and they are returned in order, or the error lists
/// every problem of every invalid event (see [`GameEvent::from_value`] for the rules). Valid events
/// are borrowed from `body` where the one-pass parser reads them, so that their text is not copied
/// (see [`BorrowedEvent`]); the same events and errors as the validating path,
/// `parse_events_reference` (feature `reference`).
pub fn parse_body(body: &[u8]) -> Result<Vec<BodyEvent<'_>>, BodyError> {
    match crate::fast::parse(body) {
        Some(events) => Ok(events.into_iter().map(BodyEvent::Borrowed).collect()),
        None => Ok(parse_events_reference(body)?
            .into_iter()
            .map(|event| BodyEvent::Owned(Box::new(event)))
            .collect()),
    }
}

/// The events of a body through a `serde_json::Value` of the whole body: slower, but it names every
/// problem of every event. [`parse_body`] answers through it whenever anything is wrong, and gives
/// the same result as it for every body (the `api_body` fuzz target checks that).
pub fn parse_events_reference(body: &[u8]) -> Result<Vec<GameEvent>, BodyError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(BodyError::Empty);
    }
    let value: Value = serde_json::from_slice(body).map_err(|e| BodyError::NotJson { reason: e.to_string() })?;
    let items = match value {
        Value::Object(mut map) if map.contains_key(EVENTS) => {
            let events = map.remove(EVENTS).unwrap_or(Value::Null);
            if let Some(other) = map.keys().next() {
                return Err(BodyError::Batch(format!(
                    "a batch body has only \"events\", found also {other:?}"
                )));
            }
            match events {
                Value::Array(items) => items,
                other => {
                    return Err(BodyError::Batch(format!(
                        "\"events\" must be an array of event objects, found {}",
                        describe(&other)
                    )));
                }
            }
        }
        Value::Object(map) => vec![Value::Object(map)],
        other => {
            return Err(BodyError::Shape {
                found: describe(&other),
            });
        }
    };
    if items.is_empty() {
        return Err(BodyError::NoEvents {
            max: MAX_EVENTS_PER_REQUEST,
        });
    }
    if items.len() > MAX_EVENTS_PER_REQUEST {
        return Err(BodyError::TooManyEvents {
            count: items.len(),
            max: MAX_EVENTS_PER_REQUEST,
        });
    }
    let count = items.len();
    let mut events = Vec::with_capacity(count);
    let mut problems = Vec::new();
    let mut invalid = 0;
    for (index, item) in items.into_iter().enumerate() {
        match GameEvent::from_value(item) {
            Ok(event) => events.push(event),
            Err(found) => {
                invalid += 1;
                problems.extend(found.into_iter().map(|problem| EventProblem { index, problem }));
            }
        }
    }
    if problems.is_empty() {
        Ok(events)
    } else {
        Err(BodyError::Invalid(InvalidEvents {
            events: count,
            invalid,
            problems,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(body: &str) -> String {
        parse_events(body.as_bytes()).unwrap_err().to_string()
    }

    #[test]
    fn single_and_batch() {
        let one = parse_events(br#"{"eventName": "levelUp"}"#).unwrap();
        assert_eq!(one.len(), 1);
        let batch = parse_events(br#"{"events": [{"eventName": "a"}, {"eventName": "b"}]}"#).unwrap();
        let names: Vec<&str> = batch.iter().map(|e| e.event_name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        let max = format!(
            "{{\"events\": [{}]}}",
            vec![r#"{"eventName":"x"}"#; MAX_EVENTS_PER_REQUEST].join(",")
        );
        assert_eq!(parse_events(max.as_bytes()).unwrap().len(), MAX_EVENTS_PER_REQUEST);
    }

    #[test]
    fn bodies_of_the_wrong_shape() {
        assert_eq!(
            err(""),
            "the body is empty: send one event object or {\"events\": [...]}"
        );
        assert_eq!(err(" \n"), err(""));
        assert!(err("{\"eventName\": ").starts_with("the body is not valid JSON: EOF while parsing"));
        assert!(err("{\"eventName\": \"x\"} trailing").contains("trailing characters at line 1 column 20"));
        assert_eq!(
            err("[{\"eventName\": \"x\"}]"),
            "expected one event object or {\"events\": [...]}, found an array"
        );
        assert_eq!(
            err("{\"events\": {\"eventName\": \"x\"}}"),
            "\"events\" must be an array of event objects, found an object"
        );
        assert_eq!(
            err("{\"events\": [], \"sentAt\": 1}"),
            "a batch body has only \"events\", found also \"sentAt\""
        );
        assert_eq!(
            err("{\"events\": []}"),
            "\"events\" is empty: a request carries 1 to 500 events"
        );
        let over = format!("{{\"events\": [{}]}}", vec!["{}"; 501].join(","));
        assert_eq!(
            err(&over),
            "501 events in one request: at most 500 are accepted, send the rest in another request"
        );
    }

    #[test]
    fn every_invalid_event_is_listed() {
        let body = r#"{"events": [
            {"eventName": "ok"},
            {"eventParams": {"amount": "1"}},
            "levelUp",
            {"eventName": "purchaseEvent"}
        ]}"#;
        assert_eq!(
            err(body),
            "3 of 4 events are invalid: event 1: eventName: required; event 1: eventParams.amount: expected a number, \
             found a string (\"1\"); event 2: expected an event object, found a string (\"levelUp\"); \
             event 3: eventParams.amount: required for a purchaseEvent"
        );
    }
}
