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
use uuid::Uuid;

use crate::event::GameEvent;
use crate::json::{write_json, write_str};
use crate::object::{Object, RawFields};
use crate::params::BorrowedParams;
use crate::time::whole_second;

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
    /// values as the record writes field by field (see `span::Span`).
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
        let mut object = Object::started(out);
        if let Some(params) = &self.params {
            object.key("\"eventParams\":");
            params.write(object.out)?;
        }
        object.raw_fields(&self.extra)?;
        object.end();
        Ok(())
    }
}
