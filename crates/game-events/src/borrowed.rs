//! Events of a valid body as the one-pass parser reads them: borrowed from the body's text, so that
//! neither reading an event nor writing its stamped JSON into a record copies its strings into
//! allocations of their own.
//!
//! Strings without escapes are slices of the body; fields the model does not read are kept as
//! their JSON text ([`RawValue`]), checked to be exactly what a `serde_json::Value` would accept,
//! and copied as they are into the record. An event whose text says exactly what its record
//! would say (most do) is copied into the record whole, after the server's `eventTime` and
//! `eventId`. [`BorrowedEvent::into_owned`] makes the [`GameEvent`] of the same event, which is
//! what the tests and the `api_body` fuzz target compare with the reference path.

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::event::GameEvent;
use crate::json::{write_json, write_str};
use crate::keys::KeyIndex;
use crate::params::BorrowedParams;
use crate::time::whole_second;

/// A field the model does not read: its name and its JSON text as sent.
pub(crate) type RawField<'a> = (Cow<'a, str>, &'a RawValue);

/// The fields of an object that the model does not read, in the order first seen; a name seen
/// twice keeps only its last value, as in a `serde_json::Map`. The first is kept inline, without
/// an allocation: most events have none or one. Names are found in time proportional to their
/// number ([`KeyIndex`]), however many a body sends.
#[derive(Debug, Clone, Default)]
pub(crate) struct RawFields<'a> {
    first: Option<RawField<'a>>,
    more: Vec<RawField<'a>>,
    /// The names of `more`, by position; only built when there is a second field.
    names: KeyIndex<'a>,
}

impl<'a> RawFields<'a> {
    /// Sets `name` to `value`, replacing an earlier value of the same name; true when it did.
    pub(crate) fn set(&mut self, name: Cow<'a, str>, value: &'a RawValue) -> bool {
        let Some(first) = &mut self.first else {
            self.first = Some((name, value));
            return false;
        };
        if first.0 == name {
            first.1 = value;
            return true;
        }
        match self.names.find_or_insert(name.clone()) {
            Ok(position) => {
                self.more[position].1 = value;
                true
            }
            Err(_) => {
                self.more.push((name, value));
                false
            }
        }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &RawField<'a>> {
        self.first.iter().chain(&self.more)
    }

    /// The fields as a `serde_json::Map`; `None` if a text no longer reads as a `Value`.
    pub(crate) fn into_map(self) -> Option<Map<String, Value>> {
        self.first
            .into_iter()
            .chain(self.more)
            .map(|(name, value)| Some((name.into_owned(), serde_json::from_str(value.get()).ok()?)))
            .collect()
    }
}

/// One valid event of a request body, borrowed from the body (see [`crate::parse_body`]).
///
/// It holds what [`GameEvent`] holds, with the same validation behind it; only the representation
/// differs: strings borrowed from the body where they had no escapes, and fields the model does not
/// read as their JSON text.
#[derive(Debug, Clone)]
pub struct BorrowedEvent<'a> {
    pub(crate) name: Cow<'a, str>,
    pub(crate) id: Option<Uuid>,
    pub(crate) params: Option<BorrowedParams<'a>>,
    pub(crate) extra: RawFields<'a>,
    /// The event's text in the body when the record may hold it as it is: the same fields and
    /// values as the record writes field by field (see `fast::Span`).
    pub(crate) raw: Option<&'a str>,
}

impl BorrowedEvent<'_> {
    /// An event with nothing in it yet, for the parser to fill in.
    pub(crate) fn empty() -> Self {
        Self {
            name: Cow::Borrowed(""),
            id: None,
            params: None,
            extra: RawFields::default(),
            raw: None,
        }
    }

    /// `eventName`.
    pub fn event_name(&self) -> &str {
        &self.name
    }

    /// The client's `eventId`, if it sent one.
    pub fn event_id(&self) -> Option<Uuid> {
        self.id
    }

    /// `eventParams.device_id`, if any.
    pub fn device_id(&self) -> Option<&str> {
        self.params.as_ref()?.device_id.as_deref()
    }

    /// The same event as a [`GameEvent`]; `None` only if a field's JSON text no longer reads as a
    /// `serde_json::Value`, which the parser has already checked it does.
    pub fn into_owned(self) -> Option<GameEvent> {
        Some(GameEvent {
            event_name: self.name.into_owned(),
            event_id: self.id,
            event_params: match self.params {
                Some(params) => Some(params.into_owned()?),
                None => None,
            },
            extra: self.extra.into_map()?,
        })
    }

    /// Appends the JSON of the event stamped with `time` (to the whole second) and `event_id`: the
    /// same fields and values as [`crate::StampedEvent`]'s JSON, with each field the model does not
    /// read copied as the client wrote it.
    pub fn write_stamped(
        &self,
        time: DateTime<Utc>,
        event_id: Uuid,
        game: Option<&str>,
        out: &mut Vec<u8>,
    ) -> serde_json::Result<()> {
        if let Some(raw) = self.raw {
            // The client's text after the server's eventTime, eventId and gameId.
            out.extend_from_slice(b"{\"eventTime\":");
            write_json(out, &whole_second(time).timestamp())?;
            out.extend_from_slice(b",\"eventId\":\"");
            out.extend_from_slice(
                event_id
                    .hyphenated()
                    .encode_lower(&mut Uuid::encode_buffer())
                    .as_bytes(),
            );
            out.extend_from_slice(b"\",");
            if let Some(game) = game {
                out.extend_from_slice(b"\"gameId\":");
                write_json(out, game)?;
                out.push(b',');
            }
            out.extend_from_slice(raw.get(1..).unwrap_or_default().as_bytes());
            return Ok(());
        }
        // The keys of `StampedEvent`, quoted, as constant pieces of text.
        out.extend_from_slice(b"{\"eventName\":");
        write_str(out, &self.name);
        out.extend_from_slice(b",\"eventTime\":");
        write_json(out, &whole_second(time).timestamp())?;
        out.extend_from_slice(b",\"eventId\":\"");
        let id = event_id.hyphenated();
        out.extend_from_slice(id.encode_lower(&mut Uuid::encode_buffer()).as_bytes());
        out.push(b'"');
        if let Some(game) = game {
            out.extend_from_slice(b",\"gameId\":");
            write_json(out, game)?;
        }
        let mut object = Object { out, empty: false };
        if let Some(params) = &self.params {
            object.key("\"eventParams\":");
            params.write(object.out)?;
        }
        object.raw_fields(&self.extra)?;
        object.end();
        Ok(())
    }
}

/// A JSON object being appended to a buffer.
pub(crate) struct Object<'o> {
    pub(crate) out: &'o mut Vec<u8>,
    empty: bool,
}

impl<'o> Object<'o> {
    pub(crate) fn start(out: &'o mut Vec<u8>) -> Self {
        out.push(b'{');
        Self { out, empty: true }
    }

    fn separate(&mut self) {
        if !std::mem::take(&mut self.empty) {
            self.out.push(b',');
        }
    }

    /// One of the model's keys, given quoted and with its colon (`"amount":`): they need no
    /// escaping.
    pub(crate) fn key(&mut self, quoted_key: &str) {
        self.separate();
        self.out.extend_from_slice(quoted_key.as_bytes());
    }

    /// Fields the model does not read, as sent.
    pub(crate) fn raw_fields(&mut self, fields: &RawFields<'_>) -> serde_json::Result<()> {
        for (name, value) in fields.iter() {
            self.separate();
            write_str(self.out, name);
            self.out.push(b':');
            self.out.extend_from_slice(value.get().as_bytes());
        }
        Ok(())
    }

    pub(crate) fn end(self) {
        self.out.push(b'}');
    }
}
