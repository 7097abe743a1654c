//! The event model of the seed: `eventName`, `eventTime`, `eventId` and `eventParams`, with every
//! field a client adds kept as sent, and the limits of a request and of a record.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::error::FieldProblem;
pub use crate::names::{
    EVENT_ID, EVENT_NAME, EVENT_PARAMS, EVENT_TIME, GAME_ID, PROBE_EVENT, PROBE_GAME, PURCHASE_EVENT, RESERVED_FIELDS,
};
pub use crate::params::{EventParams, PARAM_FIELDS};
use crate::time::epoch_seconds;

/// The field of a batch body that holds its events.
pub const EVENTS: &str = "events";

/// The most events one request may carry (also the most records of one Kinesis `PutRecords`).
pub const MAX_EVENTS_PER_REQUEST: usize = 500;

/// The most bytes of one Kinesis record: its data and its partition key together.
pub const MAX_RECORD_BYTES: usize = 1 << 20;

/// One event as a game client sends it, before the server stamps it.
///
/// A client's own `eventTime` is not kept: the server's stamp replaces it (as in the seed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GameEvent {
    /// What happened: `scoreAdjustment`, `purchaseEvent`, `levelUp`...
    #[serde(rename = "eventName")]
    pub event_name: String,
    /// The client's id of the event, if it sent one.
    #[serde(rename = "eventId", default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<Uuid>,
    /// The event's parameters.
    #[serde(rename = "eventParams", default, skip_serializing_if = "Option::is_none")]
    pub event_params: Option<EventParams>,
    /// Every other top-level field, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An event as it travels in a Kinesis record: stamped with the server's `eventTime` and an
/// `eventId`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StampedEvent {
    /// What happened.
    #[serde(rename = "eventName")]
    pub event_name: String,
    /// When the server received the event (the API Gateway request time), to the second.
    #[serde(rename = "eventTime", with = "epoch_seconds")]
    pub event_time: DateTime<Utc>,
    /// The event's id: duplicates (client or Kinesis retries) have the same one.
    #[serde(rename = "eventId")]
    pub event_id: Uuid,
    /// The game that sent it, stamped by the API from the request's key; `None` in records of
    /// producers that stamp no game.
    #[serde(rename = "gameId", default, skip_serializing_if = "Option::is_none")]
    pub game_id: Option<String>,
    /// The event's parameters.
    #[serde(rename = "eventParams", default, skip_serializing_if = "Option::is_none")]
    pub event_params: Option<EventParams>,
    /// Every other top-level field, as the client sent it.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl GameEvent {
    /// Reads and validates one event from a JSON value, as the API does: every problem of the
    /// event is recorded (by field), not just the first.
    ///
    /// Rules: `eventName` is a non-empty string; `eventId`, if present, is a UUID string; a
    /// client's `eventTime` is dropped (the server stamps its own); `eventParams`, if present, is
    /// an object whose seed fields have their types (strings, `scoreAdjustment` a 32-bit whole
    /// number, `amount` a number, `client_event_time` a date and time); a `purchaseEvent` has an
    /// `amount`. `null` is the same as absent. Other fields are kept as sent.
    pub fn from_value(value: Value) -> Result<Self, Vec<FieldProblem>> {
        let mut map = match value {
            Value::Object(map) => map,
            other => return Err(vec![FieldProblem::whole_event(&other)]),
        };
        let mut problems = Vec::new();
        let event_name = match map.remove(EVENT_NAME) {
            None | Some(Value::Null) => {
                problems.push(FieldProblem::new(EVENT_NAME, "required"));
                None
            }
            Some(Value::String(s)) if s.trim().is_empty() => {
                problems.push(FieldProblem::new(EVENT_NAME, "must not be empty"));
                None
            }
            Some(Value::String(s)) => Some(s),
            Some(other) => {
                problems.push(FieldProblem::expected(EVENT_NAME, "a string", &other));
                None
            }
        };
        let event_id = match map.remove(EVENT_ID) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => match Uuid::try_parse(&s) {
                Ok(id) if id.is_nil() => {
                    problems.push(FieldProblem::new(
                        EVENT_ID,
                        "must not be the nil UUID (send a random one, or none: the server assigns one)",
                    ));
                    None
                }
                Ok(id) => Some(id),
                Err(_) => {
                    problems.push(FieldProblem::expected(
                        EVENT_ID,
                        "a UUID (or no eventId: the server assigns one)",
                        &Value::String(s),
                    ));
                    None
                }
            },
            Some(other) => {
                problems.push(FieldProblem::expected(EVENT_ID, "a UUID string", &other));
                None
            }
        };
        map.remove(EVENT_TIME);
        if map.remove(GAME_ID).is_some() {
            problems.push(FieldProblem::new(
                GAME_ID,
                "is set by the server from the game's API key: do not send it",
            ));
        }
        let event_params = map
            .remove(EVENT_PARAMS)
            .and_then(|v| EventParams::from_value(v, &mut problems));
        if event_name.as_deref() == Some(PURCHASE_EVENT) && event_params.as_ref().and_then(|p| p.amount).is_none() {
            let amount_problem = problems
                .iter()
                .any(|p| p.field.as_deref() == Some("eventParams.amount"));
            if !amount_problem {
                problems.push(FieldProblem::new("eventParams.amount", "required for a purchaseEvent"));
            }
        }
        match event_name {
            Some(event_name) if problems.is_empty() => Ok(Self {
                event_name,
                event_id,
                event_params,
                extra: map,
            }),
            _ => Err(problems),
        }
    }

    /// The event stamped by the server: `eventTime` is `time` to the whole second, `eventId` the
    /// client's or else a new random (v4) UUID.
    pub fn stamp(self, time: DateTime<Utc>) -> StampedEvent {
        let event_id = self.event_id.unwrap_or_else(Uuid::new_v4);
        self.stamp_with_id(time, event_id)
    }

    /// [`GameEvent::stamp`] with the id to use when the client sent none (for generators that must
    /// be deterministic).
    pub fn stamp_with_id(self, time: DateTime<Utc>, id_if_none: Uuid) -> StampedEvent {
        let mut extra = self.extra;
        for reserved in RESERVED_FIELDS {
            extra.remove(reserved);
        }
        StampedEvent {
            event_name: self.event_name,
            event_time: crate::time::whole_second(time),
            event_id: self.event_id.unwrap_or(id_if_none),
            game_id: None,
            event_params: self.event_params,
            extra,
        }
    }
}

impl StampedEvent {
    /// The event stamped as sent by `game`.
    pub fn with_game(mut self, game: impl Into<String>) -> Self {
        self.game_id = Some(game.into());
        self
    }

    /// `eventParams.device_id`, if any.
    pub fn device_id(&self) -> Option<&str> {
        self.event_params.as_ref()?.device_id.as_deref()
    }

    /// `eventParams.amount` of a `purchaseEvent`: what the event adds to bookings.
    pub fn booking(&self) -> Option<f64> {
        if self.event_name == PURCHASE_EVENT {
            self.event_params.as_ref()?.amount
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn problems(value: Value) -> Vec<String> {
        GameEvent::from_value(value)
            .unwrap_err()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn a_full_event_keeps_unknown_fields() {
        let event = GameEvent::from_value(json!({
            "eventName": "purchaseEvent",
            "eventId": "0B5E8A52-7D4D-4F4B-9C39-6D9A8A0C1E11",
            "eventTime": "client clocks are not trusted",
            "eventParams": {
                "game_keyword": "league", "app_name": "Lakelog Legends", "scoreAdjustment": -5,
                "platform": "ios", "app_version": "1.4.2", "device_id": "D1",
                "client_event_time": "2024-06-01 11:59:58.123", "amount": 4.99,
                "item_sku": "gems_500", "nested": {"a": [1, 2]}
            },
            "sessionId": "s-1",
            "tags": ["a", null]
        }))
        .unwrap();
        assert_eq!(event.event_name, "purchaseEvent");
        assert_eq!(
            event.event_id.unwrap().to_string(),
            "0b5e8a52-7d4d-4f4b-9c39-6d9a8a0c1e11"
        );
        let params = event.event_params.as_ref().unwrap();
        assert_eq!(params.score_adjustment, Some(-5));
        assert_eq!(params.amount, Some(4.99));
        assert_eq!(params.extra["item_sku"], json!("gems_500"));
        assert_eq!(params.extra["nested"], json!({"a": [1, 2]}));
        assert_eq!(
            params.client_time().unwrap().unwrap().to_rfc3339(),
            "2024-06-01T11:59:58.123+00:00"
        );
        assert_eq!(event.extra.len(), 2, "eventTime of the client is dropped");
        assert_eq!(event.extra["tags"], json!(["a", null]));
    }

    #[test]
    fn minimal_event_and_nulls() {
        let event =
            GameEvent::from_value(json!({"eventName": "levelUp", "eventParams": null, "eventId": null})).unwrap();
        assert_eq!(event.event_params, None);
        assert_eq!(event.event_id, None);
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json, json!({"eventName": "levelUp"}));
    }

    #[test]
    fn every_problem_of_an_event_is_named() {
        let found = problems(json!({
            "eventName": 7,
            "eventId": "not-a-uuid",
            "eventParams": {
                "scoreAdjustment": 1.5, "amount": "4.99", "platform": ["ios"],
                "client_event_time": "yesterday", "device_id": 12
            }
        }));
        assert_eq!(
            found,
            vec![
                "eventName: expected a string, found a number (7)",
                "eventId: expected a UUID (or no eventId: the server assigns one), found a string (\"not-a-uuid\")",
                "eventParams.scoreAdjustment: expected a whole number from -2147483648 to 2147483647, found a number (1.5)",
                "eventParams.platform: expected a string, found an array",
                "eventParams.device_id: expected a string, found a number (12)",
                "eventParams.client_event_time: expected a date and time like 2024-06-01T12:00:00Z or 2024-06-01 12:00:00.123, found \"yesterday\"",
                "eventParams.amount: expected a number, found a string (\"4.99\")",
            ]
        );
    }

    #[test]
    fn missing_and_empty_names_and_wrong_shapes() {
        assert_eq!(problems(json!({})), vec!["eventName: required"]);
        assert_eq!(problems(json!({"eventName": null})), vec!["eventName: required"]);
        assert_eq!(
            problems(json!({"eventName": "  "})),
            vec!["eventName: must not be empty"]
        );
        assert_eq!(
            problems(json!("levelUp")),
            vec!["expected an event object, found a string (\"levelUp\")"]
        );
        assert_eq!(
            problems(json!({"eventName": "x", "eventParams": [1]})),
            vec!["eventParams: expected an object, found an array"]
        );
        assert_eq!(
            problems(json!({"eventName": "x", "eventParams": {"scoreAdjustment": 3_000_000_000_i64}})),
            vec![
                "eventParams.scoreAdjustment: expected a whole number from -2147483648 to 2147483647, found a number (3000000000)"
            ]
        );
        assert_eq!(
            problems(json!({"eventName": "x", "eventId": 5})),
            vec!["eventId: expected a UUID string, found a number (5)"]
        );
    }

    #[test]
    fn a_purchase_needs_an_amount() {
        assert_eq!(
            problems(json!({"eventName": "purchaseEvent", "eventParams": {"device_id": "d"}})),
            vec!["eventParams.amount: required for a purchaseEvent"]
        );
        assert_eq!(
            problems(json!({"eventName": "purchaseEvent"})),
            vec!["eventParams.amount: required for a purchaseEvent"]
        );
        // A wrongly typed amount is reported once.
        assert_eq!(
            problems(json!({"eventName": "purchaseEvent", "eventParams": {"amount": true}})),
            vec!["eventParams.amount: expected a number, found true"]
        );
        assert!(GameEvent::from_value(json!({"eventName": "purchaseEvent", "eventParams": {"amount": 0}})).is_ok());
    }

    #[test]
    fn stamping_sets_time_and_id() {
        let time = DateTime::parse_from_rfc3339("2024-06-01T12:00:00.750Z")
            .unwrap()
            .to_utc();
        let mut event = GameEvent::from_value(json!({"eventName": "levelUp", "level": 3})).unwrap();
        // Reserved names that reach `extra` by other means (the derived Deserialize) never
        // duplicate the stamped fields.
        event.extra.insert("eventTime".into(), json!(1));
        let a = event.clone().stamp(time);
        let b = event.clone().stamp(time);
        assert_ne!(a.event_id, b.event_id);
        assert_eq!(a.event_id.get_version_num(), 4);
        assert_eq!(a.event_time.timestamp(), 1_717_243_200);
        assert_eq!(a.event_time.timestamp_subsec_nanos(), 0);
        let json = serde_json::to_value(&a).unwrap();
        assert_eq!(json["eventTime"], json!(1_717_243_200));
        assert_eq!(json["level"], json!(3));
        assert_eq!(json.as_object().unwrap().len(), 4);
        let client = Uuid::new_v4();
        event.event_id = Some(client);
        assert_eq!(event.stamp(time).event_id, client);
    }

    #[test]
    fn serde_derive_agrees_with_from_value_on_valid_events() {
        let value = json!({
            "eventName": "scoreAdjustment",
            "eventId": "6a2f41a3-c54c-4b2a-8a0e-3b1e1f0c9d11",
            "eventParams": {"scoreAdjustment": 12, "device_id": "d", "amount": 1.0, "x": 1},
            "y": {"z": true}
        });
        let derived: GameEvent = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(derived, GameEvent::from_value(value.clone()).unwrap());
        assert_eq!(serde_json::to_value(&derived).unwrap(), value);
    }

    #[test]
    fn bookings_come_from_purchases_only() {
        let time = Utc::now();
        let purchase = GameEvent::from_value(
            json!({"eventName": "purchaseEvent", "eventParams": {"amount": 9.99, "device_id": "d"}}),
        )
        .unwrap()
        .stamp(time);
        assert_eq!(purchase.booking(), Some(9.99));
        assert_eq!(purchase.device_id(), Some("d"));
        let other = GameEvent::from_value(json!({"eventName": "levelUp", "eventParams": {"amount": 9.99}}))
            .unwrap()
            .stamp(time);
        assert_eq!(other.booking(), None);
        assert_eq!(other.device_id(), None);
    }
}
