//! The fast path of [`crate::parse_body`]: the body read straight into
//! [`BorrowedEvent`]s in one pass, without building a `serde_json::Value` of every event first and
//! without copying strings that need no unescaping.
//!
//! It only ever answers for bodies that are entirely valid: at the first problem of any kind it
//! gives up (`None`), and the reference path, which lists every problem of every event, reads the
//! body again. Both paths accept exactly the same bodies and make the same events of them (the
//! tests below and the `api_body` fuzz target compare them).

use std::borrow::Cow;
use std::fmt;

use crate::borrowed::BorrowedEvent;
use crate::event::{
    EVENT_ID, EVENT_NAME, EVENT_PARAMS, EVENT_TIME, EVENTS, GAME_ID, MAX_EVENTS_PER_REQUEST, PURCHASE_EVENT,
};
use crate::keys::KeyIndex;
use crate::params::BorrowedParams;
use crate::span::{Span, Text, text};
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use crate::json::{MAX_COPIED_WHITESPACE, MAX_DEPTH, measure};

/// The events of a valid body, or `None` if anything at all is wrong with it.
pub(crate) fn parse(body: &[u8]) -> Option<Vec<BorrowedEvent<'_>>> {
    // A body that is not UTF-8 is never valid JSON for a `Value` (outside strings any byte over
    // 0x7F is a syntax error, inside one it is refused). Checked once for the whole body, so that
    // serde_json does not check every string on its own.
    let text = std::str::from_utf8(body).ok()?;
    let mut reader = serde_json::Deserializer::from_str(text);
    let events = Events {
        capacity: text.len() / TYPICAL_EVENT_BYTES + 1,
        body: text,
    };
    let Body(events) = BodySeed(events).deserialize(&mut reader).ok()?;
    reader.end().ok()?;
    (1..=MAX_EVENTS_PER_REQUEST).contains(&events.len()).then_some(events)
}

/// About the size of a game event in a body (the seed's are 200 to 300 bytes): the array of a
/// batch starts with room for as many events as the body holds of these, so that it rarely grows.
const TYPICAL_EVENT_BYTES: usize = 200;

/// The events of a body: one event, or a batch.
struct Body<'de>(Vec<BorrowedEvent<'de>>);

/// Reads a [`Body`], a batch with the given [`Events`].
struct BodySeed<'de>(Events<'de>);

impl<'de> DeserializeSeed<'de> for BodySeed<'de> {
    type Value = Body<'de>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for BodySeed<'de> {
    type Value = Body<'de>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an event object or {\"events\": [...]}")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Body<'de>, A::Error> {
        // The body object is the event's own object when it is one event.
        let mut single = BorrowedEvent::empty();
        let mut event = EventFields::new(1, self.0.body, &mut single);
        let mut batch: Option<Vec<BorrowedEvent<'de>>> = None;
        let mut other_fields = false;
        while let Some(Text(key)) = map.next_key::<Text<'de>>()? {
            if key == EVENTS {
                batch = Some(map.next_value_seed(self.0)?);
            } else {
                other_fields = true;
                event.field(key, &mut map)?;
            }
        }
        match (batch, other_fields) {
            (Some(events), false) => Ok(Body(events)),
            (None, _) => {
                event.finish()?;
                Ok(Body(vec![single]))
            }
            (Some(_), true) => Err(de::Error::custom("a batch with other fields")),
        }
    }
}

/// The array of a batch, read into a vector with room for `capacity` events at first; `body` is
/// the text being read.
#[derive(Clone, Copy)]
struct Events<'de> {
    capacity: usize,
    body: &'de str,
}

impl<'de> DeserializeSeed<'de> for Events<'de> {
    type Value = Vec<BorrowedEvent<'de>>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Events<'de> {
    type Value = Vec<BorrowedEvent<'de>>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of event objects")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut events = Vec::with_capacity(self.capacity.min(MAX_EVENTS_PER_REQUEST));
        // Each event is read straight into its place at the end of the vector (an event is a few
        // hundred bytes, which moving from one function's result to the next would copy).
        loop {
            events.push(BorrowedEvent::empty());
            let Some(slot) = events.last_mut() else {
                return Err(de::Error::custom("no room for the event"));
            };
            if seq.next_element_seed(EventSeed(slot, self.body))?.is_none() {
                events.pop();
                return Ok(events);
            }
            if events.len() > MAX_EVENTS_PER_REQUEST {
                return Err(de::Error::custom("too many events"));
            }
        }
    }
}

/// One event of a batch, read into the event it refers to, from the body's text.
struct EventSeed<'a, 'de>(&'a mut BorrowedEvent<'de>, &'de str);

impl<'de> DeserializeSeed<'de> for EventSeed<'_, 'de> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EventSeed<'_, 'de> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an event object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        // The body, the array and the event's own object.
        let mut event = EventFields::new(3, self.1, self.0);
        while let Some(Text(key)) = map.next_key::<Text<'de>>()? {
            event.field(key, &mut map)?;
        }
        event.finish()
    }
}

/// Reads the fields of an event into `event`; a field seen twice keeps its last value, as in a
/// `serde_json::Value`.
struct EventFields<'a, 'de> {
    /// Arrays and objects around the event's fields, the event's own object included.
    depth: usize,
    name: Option<Cow<'de, str>>,
    event: &'a mut BorrowedEvent<'de>,
    /// Where the event's text is, and whether it can be copied as it is.
    span: Span<'de>,
}

impl<'a, 'de> EventFields<'a, 'de> {
    fn new(depth: usize, body: &'de str, event: &'a mut BorrowedEvent<'de>) -> Self {
        Self {
            depth,
            name: None,
            event,
            span: Span::new(body),
        }
    }

    fn field<A: MapAccess<'de>>(&mut self, key: Cow<'de, str>, map: &mut A) -> Result<(), A::Error> {
        self.span.key(&key);
        match &*key {
            EVENT_NAME => {
                self.span.known(0);
                self.name = text(map)?;
                self.span.text(&self.name);
            }
            // The server's eventId and eventTime are written in the client's place: not a copy.
            EVENT_ID => {
                self.span.copyable = false;
                self.event.id = map.next_value()?;
                if self.event.id.is_some_and(|id| id.is_nil()) {
                    return Err(de::Error::custom("eventId"));
                }
            }
            // Stamped by the server only: the reference path says why.
            GAME_ID => return Err(de::Error::custom("gameId")),
            // Dropped, as the reference path drops it, but checked all the same as a `Value` would
            // be read: serde's `IgnoredAny` would let through what a `Value` refuses.
            EVENT_TIME => {
                self.span.copyable = false;
                map.next_value_seed(Unread { depth: self.depth })?;
            }
            EVENT_PARAMS => {
                self.span.known(1);
                let params_end = map.next_value_seed(ParamsSeed {
                    depth: self.depth + 1,
                    into: &mut self.event.params,
                    body: self.span.body,
                })?;
                // Parameters that are not copied as written (or `null`) are not in the event's
                // text as the record writes them.
                self.span.copyable &= params_end.is_some();
                self.span.end_at(params_end);
            }
            _ => {
                let value = map.next_value_seed(Unread { depth: self.depth })?;
                self.span.raw(value);
                if self.event.extra.set(key, value) {
                    self.span.copyable = false;
                }
            }
        }
        Ok(())
    }

    /// Checks the event as a whole: a name that is not blank, and an amount for a purchase.
    fn finish<E: de::Error>(self) -> Result<(), E> {
        let name = self
            .name
            .filter(|n| !n.trim().is_empty())
            .ok_or_else(|| E::custom("eventName"))?;
        let amount = self.event.params.as_ref().and_then(|p| p.amount);
        if name == PURCHASE_EVENT && amount.is_none() {
            return Err(E::custom("amount"));
        }
        self.event.name = name;
        self.event.raw = self
            .span
            .finish()
            .map(|(start, end)| &self.span.body[start..end])
            .filter(|raw| measure(raw).spare_whitespace <= MAX_COPIED_WHITESPACE);
        Ok(())
    }
}

/// `eventParams` (`null` is absent), read into `into`; `depth` counts its own object. Its value
/// is where its text ends in `body` when the event's text can still be copied as it is.
struct ParamsSeed<'a, 'de> {
    depth: usize,
    into: &'a mut Option<BorrowedParams<'de>>,
    body: &'de str,
}

impl<'de> DeserializeSeed<'de> for ParamsSeed<'_, 'de> {
    type Value = Option<usize>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Option<usize>, D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for ParamsSeed<'_, 'de> {
    type Value = Option<usize>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object or null")
    }
    fn visit_none<E: de::Error>(self) -> Result<Option<usize>, E> {
        *self.into = None;
        Ok(None)
    }
    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Option<usize>, D::Error> {
        deserializer.deserialize_map(self)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<usize>, A::Error> {
        // A second `eventParams` replaces the first as a whole.
        let p = self.into.insert(BorrowedParams::default());
        let mut span = Span::new(self.body);
        while let Some(Text(key)) = map.next_key::<Text<'de>>()? {
            span.key(&key);
            if !p.read_typed(&key, &mut map, &mut span)? {
                let value = map.next_value_seed(Unread { depth: self.depth })?;
                span.raw(value);
                if p.extra.set(key, value) {
                    span.copyable = false;
                }
            }
        }
        Ok(span.finish().map(|(_, end)| end))
    }
}

/// A value the model does not read, kept as its JSON text once checked to be one that a
/// `serde_json::Value` of the body accepts, and that it keeps as written: the same numbers and
/// strings (a `Value` refuses a number out of range or a lone surrogate in a string, which
/// skipping the text lets through), no deeper than [`MAX_DEPTH`] counted from the body, and no
/// object with a key twice (a `Value` keeps the last, the text both). `depth` counts the
/// containers around the value.
struct Unread {
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for Unread {
    type Value = &'de RawValue;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        let raw = <&RawValue>::deserialize(deserializer)?;
        let mut reader = serde_json::Deserializer::from_str(raw.get());
        match (Check { depth: self.depth }).deserialize(&mut reader) {
            Ok(()) => Ok(raw),
            Err(e) => Err(de::Error::custom(e)),
        }
    }
}

/// Walks a value as a `serde_json::Value` would be read, keeping nothing; `depth` counts the
/// containers around it.
#[derive(Clone, Copy)]
struct Check {
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for Check {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl Check {
    /// The check of a container's items, or an error if the container is one too deep.
    fn inside<E: de::Error>(self) -> Result<Self, E> {
        let depth = self.depth + 1;
        if depth > MAX_DEPTH {
            return Err(E::custom("recursion limit exceeded"));
        }
        Ok(Self { depth })
    }
}

impl<'de> Visitor<'de> for Check {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let item = self.inside()?;
        while seq.next_element_seed(item)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let item = self.inside()?;
        let mut keys = KeyIndex::default();
        while let Some(Text(key)) = map.next_key::<Text<'de>>()? {
            if !keys.insert(key) {
                return Err(de::Error::custom("a key twice"));
            }
            map.next_value_seed(item)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;
    use uuid::Uuid;

    use super::*;
    use crate::body::parse_events_reference;
    use crate::event::GameEvent;

    /// Checks that whenever the fast path answers, the reference path accepts the body and makes
    /// the same events of it, that each borrowed event writes the same stamped JSON (as a `Value`)
    /// as its `GameEvent`, and that `parse_events` and `parse_body` answer as the reference path;
    /// true when the fast path answered.
    fn agree(body: &[u8]) -> bool {
        let shown: String = String::from_utf8_lossy(body).chars().take(500).collect();
        let fast = parse(body);
        let reference = parse_events_reference(body);
        if let Some(fast) = &fast {
            let owned: Vec<GameEvent> = fast.iter().map(|e| e.clone().into_owned().unwrap()).collect();
            assert_eq!(Ok(&owned), reference.as_ref(), "{shown}");
            let time = chrono::DateTime::from_timestamp(1_717_243_200, 999).unwrap();
            for (borrowed, event) in fast.iter().zip(owned) {
                let id = borrowed.event_id().unwrap_or(Uuid::from_u128(7));
                let mut written = Vec::new();
                borrowed.write_stamped(time, id, None, &mut written).unwrap();
                let written: Value = serde_json::from_slice(&written).unwrap();
                let want = serde_json::to_vec(&event.stamp_with_id(time, id)).unwrap();
                let want: Value = serde_json::from_slice(&want).unwrap();
                assert_eq!(written, want, "{shown}");
            }
        }
        assert_eq!(crate::body::parse_events(body), reference, "{shown}");
        let read = crate::parse_body(body).map(|events| {
            let owned: Option<Vec<GameEvent>> = events.into_iter().map(crate::BodyEvent::into_owned).collect();
            owned.unwrap()
        });
        assert_eq!(read, reference, "{shown}");
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
            // Fields the model does not read are copied as written: spacing, escapes, numbers.
            r#"{"eventName": "x", "deep": { "a" : [1, {"b": "\u00e9\/"}], "c": {} }, "n": 1.50, "m": -1E2}"#,
            r#"{"eventName": "x", "eventParams": {"deep": {"a": [], "b": {"a": 1}}, "k\"ey": "v"}}"#,
        ];
        for body in bodies {
            assert!(agree(body.as_bytes()), "the fast path refused {body}");
        }
        let many = |n: usize| format!("{{\"events\": [{}]}}", vec![r#"{"eventName":"x"}"#; n].join(","));
        assert!(agree(many(MAX_EVENTS_PER_REQUEST).as_bytes()));
        assert!(!agree(many(MAX_EVENTS_PER_REQUEST + 1).as_bytes()));
    }

    /// A body of 10^5 distinct keys (top level, parameters, a nested object) is read in time
    /// proportional to its size, and agrees with the reference path; a key repeated at the very
    /// end is still found. (Timing is in the `api` benchmark; a quadratic cost shows here as a
    /// test that does not end.)
    #[test]
    fn bodies_of_many_keys_are_read_in_linear_time() {
        let keys = |prefix: &str, n: usize| -> String {
            (0..n)
                .map(|i| format!("\"{prefix}{i}\": {i}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let body = format!(
            r#"{{"eventName": "x", {}, "eventParams": {{"device_id": "d", {}}}, "nested": {{{}}}}}"#,
            keys("top", 40_000),
            keys("param", 40_000),
            keys("inner", 20_000)
        );
        assert!(agree(body.as_bytes()), "many keys");
        let events = parse(body.as_bytes()).expect("the fast path reads it");
        assert_eq!(events.len(), 1);
        // The same name twice replaces its value; in a value the fast path does not read, it is
        // refused like the reference path refuses it.
        let repeated = format!(r#"{{"eventName": "x", {}, "top0": "last"}}"#, keys("top", 50_000));
        assert!(agree(repeated.as_bytes()));
        let nested = format!(
            r#"{{"eventName": "x", "nested": {{{}, "inner7": 1}}}}"#,
            keys("inner", 50_000)
        );
        agree(nested.as_bytes());
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
            // Valid, but the fast path would copy a key twice where a `Value` keeps one.
            r#"{"eventName": "x", "deep": {"a": 1, "a": 2}}"#,
            r#"{"eventName": "x", "eventParams": {"deep": [{"a": 1, "\u0061": 2}]}}"#,
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

    /// Whether the single event of `body` is copied into its record as written.
    fn copied(body: &str) -> bool {
        assert!(agree(body.as_bytes()), "the fast path refused {body}");
        match parse(body.as_bytes()).unwrap().as_slice() {
            [event] => event.raw.is_some(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn events_are_copied_as_written_only_when_the_record_says_the_same() {
        let copied_bodies = [
            r#"{"eventName": "x"}"#,
            r#"{"events": [{"eventName":"x","eventParams":{"amount":4.99,"device_id":"d"},"k":[1, {"a": null}]}]}"#,
            "{ \"eventName\" : \"x\" ,\n \"eventParams\" : { \"scoreAdjustment\" : -3 , \"level\" : 7 } }",
            r#"{"eventName": "\u00e9x", "k": "\n"}"#,
            r#"{"eventParams": {"platform": "ios", "amount": 0.1}, "eventName": "purchaseEvent"}"#,
        ];
        for body in copied_bodies {
            assert!(copied(body), "not copied: {body}");
        }
        let written_bodies = [
            r#"{"eventName": "x", "eventTime": 5}"#,
            r#"{"eventName": "x", "eventId": "0b5e8a52-7d4d-4f4b-9c39-6d9a8a0c1e11"}"#,
            r#"{"eventName": "x", "eventName": "y"}"#,
            r#"{"eventName": "x", "k": 1, "k": 2}"#,
            r#"{"eventName": "x", "eventParams": null}"#,
            r#"{"eventName": "x", "eventParams": {"device_id": null}}"#,
            r#"{"eventName": "x", "eventParams": {"device_id": "a", "device_id": "b"}}"#,
            r#"{"eventName": "x", "eventParams": {"amount": 5}}"#,
            r#"{"eventName": "x", "eventParams": {"amount": 1e2}}"#,
            r#"{"eventName": "x", "eventParams": {"scoreAdjustment": null}}"#,
            r#"{"eventName": "x", "eventParams": {}}"#,
            r#"{"eventName": "x", "k\u0065y": 1}"#,
            r#"{"k": 1, "eventName": "\u00e9"}"#,
        ];
        for body in written_bodies {
            assert!(!copied(body), "copied: {body}");
        }
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

    #[test]
    fn both_paths_agree_on_generated_events() {
        use fixtures::game::{Synth, SynthConfig};
        let time = chrono::DateTime::from_timestamp(1_717_243_200, 0).unwrap();
        for (seed, event_ids) in [(1, true), (2, false)] {
            let mut synth = Synth::new(SynthConfig {
                seed,
                event_ids,
                ..SynthConfig::default()
            });
            let body = serde_json::json!({"events": synth.events(MAX_EVENTS_PER_REQUEST, time)}).to_string();
            assert!(agree(body.as_bytes()));
            // Generated events are copied as written, unless they carry the client's eventId.
            let copied = parse(body.as_bytes()).unwrap().iter().all(|e| e.raw.is_some());
            assert_eq!(copied, !event_ids);
        }
    }
}
