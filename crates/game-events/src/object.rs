//! Writing JSON objects into a record's buffer ([`Object`]), with the fields the model does not
//! read kept as their text ([`RawFields`]).

use std::borrow::Cow;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::json::write_str;
use crate::keys::KeyIndex;

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

    /// An object whose `{` and first fields `out` already holds.
    pub(crate) fn started(out: &'o mut Vec<u8>) -> Self {
        Self { out, empty: false }
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
