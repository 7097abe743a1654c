//! JSON written straight into a buffer, field by field, where the API writes records and answers
//! without building a value first.

use serde::Serialize;

/// Appends `text` as a JSON string: as it is when no character of it needs escaping (the usual
/// case: text the parser borrowed from a body, shard ids, sequence numbers), else escaped as
/// serde_json escapes it.
pub fn write_str(out: &mut Vec<u8>, text: &str) {
    // Every byte is looked at (no early exit), which lets the compiler check many at once. These
    // are the characters serde_json escapes.
    let needs_escape = text
        .bytes()
        .fold(false, |found, b| found | (b < 0x20) | (b == b'"') | (b == b'\\'));
    if needs_escape {
        // Writing a string into a vector cannot fail.
        let _ = write_json(out, text);
    } else {
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
    }
}

/// The deepest nesting of arrays and objects a JSON document may have for serde_json to read it:
/// serde_json refuses a document whose 128th container opens. Both the body and the record the
/// sink decodes are held to it.
pub(crate) const MAX_DEPTH: usize = 127;

/// White space between tokens that an event's text may have and still be copied into its record
/// as written; an event written with more is written anew, compactly, so that a record stays in
/// proportion to what its event says (pretty-printed events fit).
pub(crate) const MAX_COPIED_WHITESPACE: usize = 1024;

/// What [`measure`] finds in a JSON text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Measure {
    /// White space between tokens (outside strings), in bytes.
    pub(crate) spare_whitespace: usize,
    /// The deepest nesting of arrays and objects: 0 for a scalar.
    pub(crate) depth: usize,
}

/// Measures a JSON text that a parser has accepted, in one pass over its bytes.
pub(crate) fn measure(text: &str) -> Measure {
    let mut measure = Measure::default();
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for b in text.bytes() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                measure.depth = measure.depth.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b' ' | b'\n' | b'\r' | b'\t' => measure.spare_whitespace += 1,
            _ => {}
        }
    }
    measure
}

/// Appends `value` as serde_json writes it.
pub(crate) fn write_json<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> serde_json::Result<()> {
    value.serialize(&mut serde_json::Serializer::new(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_depth_and_spare_whitespace_outside_strings() {
        let m = |text: &str| {
            let found = measure(text);
            (found.depth, found.spare_whitespace)
        };
        assert_eq!(m("1"), (0, 0));
        assert_eq!(m("\"a [ {\\\" } \""), (0, 0));
        assert_eq!(m("[[1], {\"a\": [2]}]"), (3, 2));
        assert_eq!(m("{ \"a\" :\n\t[ ] }"), (2, 6));
        assert_eq!(m("[\"\\\\\", []]"), (2, 1));
        let deep = format!("{}{}", "[".repeat(127), "]".repeat(127));
        assert_eq!(m(&deep), (127, 0));
        assert!(serde_json::from_str::<serde_json::Value>(&deep).is_ok());
        let deeper = format!("[{deep}]");
        assert_eq!(m(&deeper).0, MAX_DEPTH + 1);
        assert!(serde_json::from_str::<serde_json::Value>(&deeper).is_err());
    }

    #[test]
    fn strings_are_written_as_serde_json_writes_them() {
        for text in [
            "",
            "plain",
            "quote \" and \\ back",
            "tab\tnew\nline",
            "\u{1}",
            "é ☃ \u{2028}",
            "\u{7f}",
        ] {
            let mut out = Vec::new();
            write_str(&mut out, text);
            assert_eq!(out, serde_json::to_vec(text).unwrap(), "{text:?}");
        }
    }
}
