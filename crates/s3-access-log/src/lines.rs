//! Lines of a log object, numbered, with their terminators removed.

use std::borrow::Cow;

use memchr::memchr;

use crate::error::ParseError;
use crate::json::{is_json_record, parse_json_record};
use crate::record::{AccessLogRecord, ParsedLine};

/// The lines of a buffer with their 1-based numbers; `\n` and `\r\n` both end a line, and a last
/// line without terminator is still a line.
#[derive(Debug, Clone)]
pub struct Lines<'a> {
    rest: &'a [u8],
    number: u64,
}

impl<'a> Lines<'a> {
    /// Lines of `buf`, numbered from 1.
    pub fn new(buf: &'a [u8]) -> Self {
        Self::starting_at(buf, 1)
    }

    /// Lines of `buf`, the first of which is line `first` of its object: for reading an object
    /// in pieces.
    pub fn starting_at(buf: &'a [u8], first: u64) -> Self {
        Self {
            rest: buf,
            number: first,
        }
    }
}

impl<'a> Iterator for Lines<'a> {
    type Item = (u64, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let (line, rest) = match memchr(b'\n', self.rest) {
            Some(i) => (&self.rest[..i], &self.rest[i + 1..]),
            None => (self.rest, &[][..]),
        };
        self.rest = rest;
        let number = self.number;
        self.number += 1;
        Some((number, line.strip_suffix(b"\r").unwrap_or(line)))
    }
}

/// Whether a line holds nothing but white space; such lines are not records and are skipped.
pub fn is_blank(line: &[u8]) -> bool {
    line.iter().all(u8::is_ascii_whitespace)
}

/// Parses every non-blank line of `buf`: its 1-based number, its text and what it became.
pub fn parse_lines(buf: &[u8]) -> impl Iterator<Item = (u64, &[u8], Result<AccessLogRecord<'_>, ParseError>)> {
    Lines::new(buf)
        .filter(|(_, line)| !is_blank(line))
        .map(|(n, line)| (n, line, AccessLogRecord::parse(line)))
}

impl<'a> AccessLogRecord<'a> {
    /// Parses one line (without its line terminator), of either form ([`LogLine::parse`]).
    pub fn parse(line: &'a [u8]) -> Result<Self, ParseError> {
        LogLine::parse(line).map(|parsed| parsed.record())
    }
}

/// One line of an access-log object, parsed in the form it is written in: the space-delimited text
/// S3 writes to a bucket, or a JSON record as S3 writes to CloudWatch Logs ([`crate::json`]). What
/// [`AccessLogBatchBuilder::append_line`](crate::AccessLogBatchBuilder::append_line) takes.
#[derive(Debug, Clone)]
pub enum LogLine<'a> {
    /// A line of the text form, checked; its text still the line's.
    Text(ParsedLine<'a>),
    /// A JSON record, typed.
    Json(AccessLogRecord<'a>),
}

impl<'a> LogLine<'a> {
    /// Parses one line (without its line terminator): a JSON record when it starts with `{`
    /// ([`is_json_record`]), else a line of the text form.
    #[inline(always)]
    pub fn parse(line: &'a [u8]) -> Result<Self, ParseError> {
        if is_json_record(line) {
            parse_json_record(line).map(LogLine::Json)
        } else {
            ParsedLine::parse(line).map(LogLine::Text)
        }
    }

    /// The bucket; `None` when it is `-` or null.
    pub fn bucket(&self) -> Option<Cow<'_, str>> {
        match self {
            LogLine::Text(line) => line.bucket(),
            LogLine::Json(record) => record.bucket.as_deref().map(Cow::Borrowed),
        }
    }

    /// Microseconds since the Unix epoch of the request, UTC.
    pub fn request_time(&self) -> i64 {
        match self {
            LogLine::Text(line) => line.request_time(),
            LogLine::Json(record) => record.request_time,
        }
    }

    /// The line as a typed record.
    pub fn record(self) -> AccessLogRecord<'a> {
        match self {
            LogLine::Text(line) => line.record(),
            LogLine::Json(record) => record,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminators_and_numbers() {
        let lines: Vec<_> = Lines::new(b"a\r\nb\n\nc").collect();
        assert_eq!(lines, vec![(1, &b"a"[..]), (2, b"b"), (3, b""), (4, b"c")]);
        assert_eq!(Lines::new(b"").count(), 0);
        assert_eq!(Lines::new(b"\n").collect::<Vec<_>>(), vec![(1, &b""[..])]);
        assert_eq!(Lines::starting_at(b"x", 10).next(), Some((10, &b"x"[..])));
    }

    #[test]
    fn blank_lines_are_skipped_but_counted() {
        let parsed: Vec<_> = parse_lines(b"\n  \nnot a log line\n").collect();
        assert_eq!(parsed.len(), 1);
        let (n, line, Err(err)) = &parsed[0] else {
            panic!("expected a reject: {parsed:?}");
        };
        assert_eq!((*n, *line), (3, &b"not a log line"[..]));
        assert!(err.to_string().contains("at least 17"));
    }
}
