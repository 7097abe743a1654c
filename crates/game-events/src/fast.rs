//! The fast path of [`crate::parse_events`]: the body deserialised straight into [`GameEvent`]s in
//! one pass, without building a `serde_json::Value` of every event first.
//!
//! It only ever answers for bodies that are entirely valid: at the first problem of any kind it
//! gives up (`None`), and the reference path, which lists every problem of every event, reads the
//! body again. Both paths accept exactly the same bodies and make the same events of them (the
//! tests below and the `api_body` fuzz target compare them).

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::body::{EVENTS, MAX_EVENTS_PER_REQUEST};
use crate::event::{EVENT_ID, EVENT_NAME, EVENT_PARAMS, EVENT_TIME, EventParams, GameEvent, PURCHASE_EVENT};
use crate::time::parse_client_time;

/// The events of a valid body, or `None` if anything at all is wrong with it.
pub(crate) fn parse(body: &[u8]) -> Option<Vec<GameEvent>> {
    // A body that is not UTF-8 is never valid JSON for a `Value` (outside strings any byte over
    // 0x7F is a syntax error, inside one it is refused). Checked once for the whole body, so that
    // serde_json does not check every string on its own.
    let text = std::str::from_utf8(body).ok()?;
    let Body(events) = serde_json::from_str(text).ok()?;
    (1..=MAX_EVENTS_PER_REQUEST).contains(&events.len()).then_some(events)
}

/// An object key, borrowed from the input when it has no escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// The events of a body: one event, or a batch.
struct Body(Vec<GameEvent>);

impl<'de> Deserialize<'de> for Body {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct BodyVisitor;
        impl<'de> Visitor<'de> for BodyVisitor {
            type Value = Body;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an event object or {\"events\": [...]}")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Body, A::Error> {
                let mut event = EventBuilder::default();
                let mut batch: Option<Vec<GameEvent>> = None;
                let mut other_fields = false;
                while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
                    if key == EVENTS {
                        batch = Some(map.next_value_seed(Events)?);
                    } else {
                        other_fields = true;
                        event.field(key, &mut map)?;
                    }
                }
                match (batch, other_fields) {
                    (Some(events), false) => Ok(Body(events)),
                    (None, _) => event.finish().map(|event| Body(vec![event])),
                    (Some(_), true) => Err(de::Error::custom("a batch with other fields")),
                }
            }
        }
        deserializer.deserialize_map(BodyVisitor)
    }
}

/// The array of a batch.
struct Events;

impl<'de> DeserializeSeed<'de> for Events {
    type Value = Vec<GameEvent>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Events {
    type Value = Vec<GameEvent>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of event objects")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut events = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(MAX_EVENTS_PER_REQUEST));
        while let Some(Event(event)) = seq.next_element::<Event>()? {
            if events.len() == MAX_EVENTS_PER_REQUEST {
                return Err(de::Error::custom("too many events"));
            }
            events.push(event);
        }
        Ok(events)
    }
}

/// One event of a batch.
struct Event(GameEvent);

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EventVisitor;
        impl<'de> Visitor<'de> for EventVisitor {
            type Value = Event;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an event object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Event, A::Error> {
                let mut event = EventBuilder::default();
                while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
                    event.field(key, &mut map)?;
                }
                event.finish().map(Event)
            }
        }
        deserializer.deserialize_map(EventVisitor)
    }
}

/// The fields of an event as they are read; a field seen twice keeps its last value, as in a
/// `serde_json::Value`.
#[derive(Default)]
struct EventBuilder {
    name: Option<String>,
    id: Option<Uuid>,
    params: Option<EventParams>,
    extra: Map<String, Value>,
}

impl EventBuilder {
    fn field<'de, A: MapAccess<'de>>(&mut self, key: Cow<'de, str>, map: &mut A) -> Result<(), A::Error> {
        match &*key {
            EVENT_NAME => self.name = map.next_value()?,
            EVENT_ID => self.id = map.next_value()?,
            // Dropped, as the reference path drops it, but read as a `Value` all the same: serde's
            // `IgnoredAny` would let through what a `Value` refuses (invalid UTF-8 or a lone
            // surrogate in a string, a number out of range, nesting past the recursion limit).
            EVENT_TIME => drop(map.next_value::<Value>()?),
            EVENT_PARAMS => self.params = map.next_value::<Option<Params>>()?.map(|p| p.0),
            _ => {
                let value = map.next_value()?;
                self.extra.insert(key.into_owned(), value);
            }
        }
        Ok(())
    }

    fn finish<E: de::Error>(self) -> Result<GameEvent, E> {
        let name = self
            .name
            .filter(|n| !n.trim().is_empty())
            .ok_or_else(|| E::custom("eventName"))?;
        let amount = self.params.as_ref().and_then(|p| p.amount);
        if name == PURCHASE_EVENT && amount.is_none() {
            return Err(E::custom("amount"));
        }
        Ok(GameEvent {
            event_name: name,
            event_id: self.id,
            event_params: self.params,
            extra: self.extra,
        })
    }
}

/// `eventParams`.
struct Params(EventParams);

impl<'de> Deserialize<'de> for Params {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ParamsVisitor;
        impl<'de> Visitor<'de> for ParamsVisitor {
            type Value = Params;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Params, A::Error> {
                let mut p = EventParams::default();
                while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
                    match &*key {
                        "game_keyword" => p.game_keyword = map.next_value()?,
                        "app_name" => p.app_name = map.next_value()?,
                        "scoreAdjustment" => p.score_adjustment = map.next_value()?,
                        "platform" => p.platform = map.next_value()?,
                        "app_version" => p.app_version = map.next_value()?,
                        "device_id" => p.device_id = map.next_value()?,
                        "client_event_time" => p.client_event_time = map.next_value()?,
                        "amount" => p.amount = map.next_value()?,
                        _ => {
                            let value = map.next_value()?;
                            p.extra.insert(key.into_owned(), value);
                        }
                    }
                }
                if let Some(text) = &p.client_event_time
                    && parse_client_time(text).is_err()
                {
                    return Err(de::Error::custom("client_event_time"));
                }
                Ok(Params(p))
            }
        }
        deserializer.deserialize_map(ParamsVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::parse_events_reference;

    /// Checks that whenever the fast path answers, the reference path accepts the body and makes
    /// the same events of it, and that `parse_events` answers as the reference path; true when the
    /// fast path answered.
    fn agree(body: &[u8]) -> bool {
        let shown = String::from_utf8_lossy(body);
        let fast = parse(body);
        let reference = parse_events_reference(body);
        if let Some(fast) = &fast {
            assert_eq!(Ok(fast), reference.as_ref(), "{shown}");
        }
        assert_eq!(crate::parse_events(body), reference, "{shown}");
        fast.is_some()
    }

    #[test]
    fn valid_bodies_take_the_fast_path_to_the_same_events() {
        let bodies = [
            r#"{"eventName": "levelUp"}"#,
            r#"{"eventName": "levelUp", "eventName": "x"}"#,
            r#"{"eventName": "x", "eventTime": "any", "eventId": null, "eventParams": null}"#,
            r#"{"eventName": "x", "eventId": "0B5E8A52-7D4D-4F4B-9C39-6D9A8A0C1E11"}"#,
            r#"{"eventName": "x", "eventId": "urn:uuid:0b5e8a52-7d4d-4f4b-9c39-6d9a8a0c1e11"}"#,
            r#"{"eventName": "x", "eventId": "0b5e8a527d4d4f4b9c396d9a8a0c1e11"}"#,
            r#"{"eventName": "x", "eventId": "{0b5e8a52-7d4d-4f4b-9c39-6d9a8a0c1e11}"}"#,
            r#"{"eventName": "x", "eventId": "0b5e8a52-7d4d-4f4b-9c39-6d9a8a0c1e11", "eventId": null}"#,
            r#"{"eventName": "purchaseEvent", "eventParams": {"amount": 0}}"#,
            r#"{"eventName": "purchaseEvent", "eventParams": {"amount": 1e308}}"#,
            r#"{"eventName": "purchaseEvent", "eventParams": {"amount": 1}, "eventParams": {"amount": 2}}"#,
            r#"{"eventName": "x", "eventParams": {"scoreAdjustment": 2147483647, "amount": -3}}"#,
            r#"{"eventName": "x", "eventParams": {"scoreAdjustment": -2147483648, "amount": -0}}"#,
            r#"{"eventName": "x", "eventParams": {"amount": 18446744073709551616}}"#,
            r#"{"eventName": "x", "eventParams": {"client_event_time": "2024-06-01 12:00:00"}}"#,
            r#"{"eventName": "x", "eventParams": {"client_event_time": "2024-06-01 12:00:00+0200"}}"#,
            r#"{"eventName": "x", "eventParams": {"device_id": "d", "device_id": null}}"#,
            r#"{"eventName": "x", "eventParams": {"x": {"y": [1, 2.5, "z", null, true]}}}"#,
            r#"{"eventName": "x", "eventParams": {"dev\u0069ce_id": "d", "k\u00e9y": "\ud83d\ude00"}}"#,
            r#"{"eventName": "x", "k\u00e9y": "v\n", "eventN\u0061me": "escaped"}"#,
            r#"{"eventName": "x", "eventTime": "\uD83D\uDE00"}"#,
            r#"{"eventName": "x", "eventTime": {"a": [1e308, -1e308, 18446744073709551616]}}"#,
            r#"{"eventName": "x", "extra": 1, "extra": [2], "eventTime": 3, "eventTime": 4}"#,
            r#"{"events": [{"eventName": "a"}, {"eventName": "b", "q": 1}]}"#,
            r#"{"events": [{"eventName": "a"}], "events": [{"eventName": "b"}]}"#,
            " \n{\"events\": [{\"eventName\": \"a\"}]}\t",
        ];
        for body in bodies {
            assert!(agree(body.as_bytes()), "the fast path refused {body}");
        }
        let many = |n: usize| format!("{{\"events\": [{}]}}", vec![r#"{"eventName":"x"}"#; n].join(","));
        assert!(agree(many(MAX_EVENTS_PER_REQUEST).as_bytes()));
        assert!(!agree(many(MAX_EVENTS_PER_REQUEST + 1).as_bytes()));
    }

    #[test]
    fn other_bodies_go_to_the_reference_path() {
        let bodies = [
            // Valid, but the fast path gives up on a bad value even when a later one replaces it.
            r#"{"eventName": 5, "eventName": "x"}"#,
            r#"{"eventName": "x", "eventName": 5}"#,
            r#"{"eventName": "x", "eventId": "nope"}"#,
            r#"{"eventName": "x", "eventId": 7}"#,
            r#"{"eventName": " "}"#,
            r#"{"eventName": null}"#,
            r#"{}"#,
            r#"{"eventName": "purchaseEvent"}"#,
            r#"{"eventName": "purchaseEvent", "eventParams": {"amount": null}}"#,
            r#"{"eventName": "purchaseEvent", "eventParams": {"amount": 1}, "eventParams": null}"#,
            r#"{"eventName": "x", "eventParams": {"scoreAdjustment": 2147483648}}"#,
            r#"{"eventName": "x", "eventParams": {"scoreAdjustment": -2147483649}}"#,
            r#"{"eventName": "x", "eventParams": {"scoreAdjustment": 1.0}}"#,
            r#"{"eventName": "x", "eventParams": {"scoreAdjustment": -0}}"#,
            r#"{"eventName": "x", "eventParams": {"scoreAdjustment": 1e2}}"#,
            r#"{"eventName": "x", "eventParams": {"client_event_time": "noon"}}"#,
            r#"{"eventName": "x", "eventParams": {"client_event_time": "2024-06-01t12:00:00"}}"#,
            r#"{"eventName": "x", "eventParams": {"client_event_time": "2024-06-01T12:00:00+0200"}}"#,
            r#"{"eventName": "x", "eventParams": {"client_event_time": 5}}"#,
            r#"{"eventName": "x", "eventParams": {"client_event_time": "noon", "client_event_time": null}}"#,
            r#"{"eventName": "x", "eventParams": []}"#,
            r#"{"eventName": "x", "eventParams": "p"}"#,
            // What serde's `IgnoredAny` would skip but a `Value` refuses.
            r#"{"eventName": "x", "eventTime": 1e999}"#,
            r#"{"eventName": "x", "eventTime": "\uD800"}"#,
            r#"{"eventName": "x", "eventTime": "\u00"}"#,
            r#"{"eventName": "x", "extra": 1e999}"#,
            r#"{"eventName": "x", "extra": "\uDE00"}"#,
            r#"{"eventName": "x", "eventParams": {"other": "\uD800"}}"#,
            r#"{"eventName": "x", "eventParams": {"amount": 1e999}}"#,
            r#"{"events": [{"eventName": "a"}, 5]}"#,
            r#"{"events": [{"eventName": "a"}], "x": 1}"#,
            r#"{"x": 1, "events": [{"eventName": "a"}]}"#,
            r#"{"eventName": "a", "events": [{"eventName": "a"}]}"#,
            r#"{"events": [{"eventName": "a"}], "eventTime": 1}"#,
            r#"{"events": []}"#,
            r#"{"events": {}}"#,
            r#"{"events": null}"#,
            r#"{"events": [[]]}"#,
            r#"[{"eventName": "a"}]"#,
            r#""levelUp""#,
            r#"{"eventName": "x"} trailing"#,
            r#"{"eventName": "x""#,
            r#"{"eventName": "x",}"#,
            "",
            "  ",
        ];
        for body in bodies {
            agree(body.as_bytes());
        }
        // Bytes that are not UTF-8, in a string the fast path drops and in one it keeps.
        agree(b"{\"eventName\": \"x\", \"eventTime\": \"\xff\"}");
        agree(b"{\"eventName\": \"x\", \"other\": \"\xc3\"}");
        agree(b"{\"eventName\": \"\xe2\x82\"}");
        assert!(agree("{\"eventName\": \"\u{e9}\"}".as_bytes()));
    }

    #[test]
    fn both_paths_stop_at_the_same_nesting_depth() {
        let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let places: [fn(&str) -> String; 5] = [
            |v| format!(r#"{{"eventName": "x", "deep": {v}}}"#),
            |v| format!(r#"{{"eventName": "x", "eventTime": {v}}}"#),
            |v| format!(r#"{{"eventName": "x", "eventParams": {{"deep": {v}}}}}"#),
            |v| format!(r#"{{"events": [{{"eventName": "x", "deep": {v}}}]}}"#),
            |v| format!(r#"{{"events": [{{"eventName": "x", "eventTime": {v}}}]}}"#),
        ];
        for place in places {
            let (mut accepted, mut refused) = (false, false);
            for depth in 118..=130 {
                let fast = agree(place(&nested(depth)).as_bytes());
                accepted |= fast;
                refused |= !fast;
            }
            assert!(accepted && refused, "the depths tried do not reach the limit");
        }
    }

    #[cfg(feature = "synth")]
    #[test]
    fn both_paths_agree_on_generated_events() {
        use crate::synth::{Synth, SynthConfig};
        let time = chrono::DateTime::from_timestamp(1_717_243_200, 0).unwrap();
        for (seed, event_ids) in [(1, true), (2, false)] {
            let mut synth = Synth::new(SynthConfig {
                seed,
                event_ids,
                ..SynthConfig::default()
            });
            let body = serde_json::json!({"events": synth.events(MAX_EVENTS_PER_REQUEST, time)}).to_string();
            assert!(agree(body.as_bytes()));
        }
    }
}
