//! The one-pass parser's primitives: a string borrowed from the body when it has no escapes
//! ([`Text`], [`text`]), where an object's text lies in the body and whether it can be copied as
//! it is ([`Span`]), and whether serde_json writes a number as the body does ([`written_as`]).

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

/// A string (an object key or a string value), borrowed from the input when it has no escapes.
pub(crate) struct Text<'de>(pub(crate) Cow<'de, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(TextVisitor)
    }
}

/// A string field: `null` is absent.
pub(crate) fn text<'de, A: MapAccess<'de>>(map: &mut A) -> Result<Option<Cow<'de, str>>, A::Error> {
    Ok(map.next_value::<Option<Text<'de>>>()?.map(|t| t.0))
}

/// Follows where an object's text lies in the body while its fields are read, and whether the
/// text can be copied into a record as it is: only when the object has no field the record
/// writes otherwise (a `null` that the record leaves out, a field given twice, the client's
/// eventId or eventTime, a number the record writes in another form) and every value's end was
/// seen (strings with escapes are read into new strings, which say nothing of where they were).
pub(crate) struct Span<'de> {
    pub(crate) body: &'de str,
    pub(crate) copyable: bool,
    /// Whether a key was read.
    started: bool,
    /// Where the first key starts, after its quote.
    first_key: Option<usize>,
    /// Where the last value read ends.
    last_end: Option<usize>,
    /// The model's keys seen so far, one bit each.
    known: u64,
}

impl<'de> Span<'de> {
    pub(crate) fn new(body: &'de str) -> Self {
        Self {
            body,
            copyable: true,
            started: false,
            first_key: None,
            last_end: None,
            known: 0,
        }
    }

    /// Where `part`, a slice of the body, starts in it.
    fn offset(&self, part: &str) -> Option<usize> {
        let at = (part.as_ptr() as usize).checked_sub(self.body.as_ptr() as usize)?;
        (at + part.len() <= self.body.len()).then_some(at)
    }

    #[allow(
        clippy::ptr_arg,
        reason = "whether the key is borrowed says whether its position is known"
    )]
    pub(crate) fn key(&mut self, key: &Cow<'de, str>) {
        match key {
            Cow::Borrowed(key) if !std::mem::replace(&mut self.started, true) => {
                self.first_key = self.offset(key);
                self.copyable &= self.first_key.is_some();
            }
            Cow::Borrowed(_) => {}
            // Keys with escapes: the record writes them unescaped (their position is not known
            // either when first).
            Cow::Owned(_) => self.copyable = false,
        }
    }

    /// The model's key number `bit`: a second one is a field given twice.
    pub(crate) fn known(&mut self, bit: u32) {
        if self.known & (1 << bit) != 0 {
            self.copyable = false;
        }
        self.known |= 1 << bit;
    }

    /// The value just read ends at `end`, if known; only the last value's end is needed.
    pub(crate) fn end_at(&mut self, end: Option<usize>) {
        self.last_end = end;
    }

    /// A string value read: it ends with the quote after its text, if it was borrowed.
    pub(crate) fn text(&mut self, value: &Option<Cow<'de, str>>) {
        let end = match value {
            Some(Cow::Borrowed(text)) => self
                .offset(text)
                .map(|at| at + text.len())
                .filter(|&end| self.body.as_bytes().get(end) == Some(&b'"'))
                .map(|end| end + 1),
            // A string with escapes: copied as written, but where it ends is not known.
            Some(Cow::Owned(_)) => None,
            // `null`, which the record leaves out.
            None => {
                self.copyable = false;
                None
            }
        };
        self.end_at(end);
    }

    pub(crate) fn raw(&mut self, value: &'de RawValue) {
        let end = self.offset(value.get()).map(|at| at + value.get().len());
        self.end_at(end);
    }

    /// The object's text, from its `{` to its `}`, if it can be copied as it is.
    pub(crate) fn finish(&self) -> Option<(usize, usize)> {
        if !self.copyable {
            return None;
        }
        let bytes = self.body.as_bytes();
        let is_space = |b: &u8| matches!(b, b' ' | b'\n' | b'\r' | b'\t');
        // `{`, white space and the first key's quote before the key.
        let quote = self.first_key?.checked_sub(1)?;
        let open = bytes.get(..quote)?.iter().rposition(|b| !is_space(b))?;
        let end = self.last_end?;
        let close = end + bytes.get(end..)?.iter().position(|b| !is_space(b))?;
        (bytes.get(quote) == Some(&b'"') && bytes[open] == b'{' && bytes[close] == b'}').then_some((open, close + 1))
    }
}

/// Whether serde_json writes `n` as `text`.
pub(crate) fn written_as(n: f64, text: &str) -> bool {
    let mut buffer = std::io::Cursor::new([0u8; 40]);
    if serde_json::to_writer(&mut buffer, &n).is_err() {
        return false;
    }
    let written = usize::try_from(buffer.position()).unwrap_or(usize::MAX);
    buffer.get_ref().get(..written) == Some(text.as_bytes())
}
