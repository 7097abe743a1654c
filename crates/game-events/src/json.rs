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

/// Appends `value` as serde_json writes it.
pub(crate) fn write_json<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> serde_json::Result<()> {
    value.serialize(&mut serde_json::Serializer::new(out))
}

#[cfg(test)]
mod tests {
    use super::*;

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
