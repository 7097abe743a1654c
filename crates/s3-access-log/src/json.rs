//! Access-log records in the JSON form S3 writes to CloudWatch Logs (and from there to S3 as
//! newline-delimited JSON, or through Firehose): one object per request with named fields, `null`
//! where the text format writes `-`, and the request time as ISO 8601 with milliseconds.
//!
//! The fields are those of the S3 user guide's "Log format in CloudWatch Logs" (schema
//! `V_1_0`). Each lands in the column its text-format counterpart does ([`JsonField::field`]);
//! `key_name` is the key as it is, not URL-encoded. `schema_version_id` `V_1_0` and a `bucket_arn`
//! that is the bucket's own ARN say nothing the row does not: otherwise they, and every field
//! that is not documented (a later schema version's), are kept in `extra_fields` as a JSON object
//! of their names and values as written.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::error::ParseError;
use crate::field::Field;
pub use crate::field::JsonField;
use crate::record::AccessLogRecord;

/// The schema version whose fields are all columns.
pub const JSON_SCHEMA_VERSION: &str = "V_1_0";

/// Whether `line` (without its terminator) is a record of the JSON form rather than of the text
/// form: it starts with `{` and then a quoted name (or is `{}`), leaving out white space. A text
/// line starts with the bucket owner's id or `-`, and its second field, the bucket, is never
/// quoted.
pub fn is_json_record(line: &[u8]) -> bool {
    let mut bytes = line.iter().filter(|b| !b.is_ascii_whitespace());
    match (bytes.next(), bytes.next()) {
        (Some(b'{'), Some(b'"')) => true,
        (Some(b'{'), Some(b'}')) => bytes.next().is_none(),
        _ => false,
    }
}

/// Parses one record of the JSON form (one line of newline-delimited JSON).
///
/// A record as S3 writes it (one flat object of texts without escapes, whole numbers, booleans and
/// nulls) is read in one pass over its bytes (`flat`); anything else (escapes, nested values, a
/// field of the wrong type, broken JSON) is read by serde_json, which says what is wrong.
pub fn parse_json_record(line: &[u8]) -> Result<AccessLogRecord<'_>, ParseError> {
    match flat(line) {
        Some(raw) => raw.into_record(),
        None => parse_with_serde(line),
    }
}

/// [`parse_json_record`] through serde_json.
fn parse_with_serde(line: &[u8]) -> Result<AccessLogRecord<'_>, ParseError> {
    let mut de = serde_json::Deserializer::from_slice(line);
    let raw = match de.deserialize_map(RecordVisitor) {
        Ok(raw) => raw,
        Err(e) => return Err(json_error(e)),
    };
    if let Err(e) = de.end() {
        return Err(json_error(e));
    }
    raw.into_record()
}

/// A JSON value of a flat record, as [`flat`] met it.
#[derive(Clone, Copy)]
enum Flat<'a> {
    Text(&'a str),
    Number(&'a str),
    Bool(bool),
    Null,
}

/// Reads a flat record in one pass: `None` when it holds anything but texts without escapes or
/// control characters, numbers, booleans and nulls, when a documented field has a value of the
/// wrong type, or when it is not well-formed: serde_json then reads it again and says why.
fn flat(line: &[u8]) -> Option<RawRecord<'_>> {
    // Checked once for the line: no control character (JSON allows none in texts; the white
    // space it allows between values, S3 does not write), and UTF-8, so that the texts below are
    // slices of it cut at quotes and other ASCII bytes.
    if line.iter().any(|b| *b < 0x20) {
        return None;
    }
    let utf8 = std::str::from_utf8(line).ok()?;
    let mut at = 0;
    // JSON's white space (not ASCII's, which has a form feed too).
    let skip = |at: &mut usize| {
        while line.get(*at).is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r')) {
            *at += 1;
        }
    };
    // A text starting after its opening quote, up to its closing one.
    let text = |at: &mut usize| -> Option<&str> {
        let start = *at;
        let end = start + memchr::memchr2(b'"', b'\\', &line[start..])?;
        if line[end] != b'"' {
            return None;
        }
        *at = end + 1;
        utf8.get(start..end)
    };
    skip(&mut at);
    if line.get(at) != Some(&b'{') {
        return None;
    }
    at += 1;
    let mut raw = RawRecord::default();
    skip(&mut at);
    if line.get(at) == Some(&b'}') {
        at += 1;
    } else {
        loop {
            skip(&mut at);
            if line.get(at) != Some(&b'"') {
                return None;
            }
            at += 1;
            let name = text(&mut at)?;
            skip(&mut at);
            if line.get(at) != Some(&b':') {
                return None;
            }
            at += 1;
            skip(&mut at);
            let start = at;
            let value = match *line.get(at)? {
                b'"' => {
                    at += 1;
                    Flat::Text(text(&mut at)?)
                }
                b'n' if line[at..].starts_with(b"null") => {
                    at += 4;
                    Flat::Null
                }
                b't' if line[at..].starts_with(b"true") => {
                    at += 4;
                    Flat::Bool(true)
                }
                b'f' if line[at..].starts_with(b"false") => {
                    at += 5;
                    Flat::Bool(false)
                }
                b'-' | b'0'..=b'9' => {
                    while line
                        .get(at)
                        .is_some_and(|b| matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
                    {
                        at += 1;
                    }
                    let written = utf8.get(start..at)?;
                    if !is_json_number(written) {
                        return None;
                    }
                    Flat::Number(written)
                }
                _ => return None,
            };
            raw.set(name, value, utf8.get(start..at)?)?;
            skip(&mut at);
            match line.get(at) {
                Some(b',') => at += 1,
                Some(b'}') => {
                    at += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    skip(&mut at);
    (at == line.len()).then_some(raw)
}

impl<'a> RawRecord<'a> {
    /// Sets field `name` to `value` (`written` as in the line); `None` when the value's type is
    /// not the field's (serde_json then names it) or a number is not a whole one.
    fn set(&mut self, name: &'a str, value: Flat<'a>, written: &'a str) -> Option<()> {
        let Some(field) = JsonField::of_name(name) else {
            self.unknown.push((Cow::Borrowed(name), written));
            return Some(());
        };
        let text = || match value {
            Flat::Text(t) => Some(Some(Cow::Borrowed(t))),
            Flat::Null => Some(None),
            _ => None,
        };
        let number = || match value {
            // Digits only, without a leading zero: anything else (a sign, a fraction, an exponent)
            // is left to serde_json, which says what is wrong with it.
            Flat::Number(n) if n.bytes().all(|b| b.is_ascii_digit()) && !(n.len() > 1 && n.starts_with('0')) => {
                n.parse::<u64>().ok().and_then(|n| i64::try_from(n).ok()).map(Some)
            }
            Flat::Null => Some(None),
            _ => None,
        };
        let r = &mut self.record;
        match field {
            JsonField::SchemaVersionId => self.schema_version = text()?,
            JsonField::BucketArn => self.bucket_arn = text()?,
            JsonField::Text(f) => match f {
                Field::BucketOwner => r.bucket_owner = text()?,
                Field::Bucket => r.bucket = text()?,
                Field::RequestTime => self.request_time = text()?,
                Field::RemoteIp => r.remote_ip = text()?,
                Field::Requester => r.requester = text()?,
                Field::RequestId => r.request_id = text()?,
                Field::Operation => r.operation = text()?,
                Field::Key => r.key = text()?,
                Field::RequestUri => r.request_uri = text()?,
                Field::HttpStatus => r.http_status = number()?.map(|n| i32::try_from(n).unwrap_or(i32::MAX)),
                Field::ErrorCode => r.error_code = text()?,
                Field::BytesSent => r.bytes_sent = number()?,
                Field::ObjectSize => r.object_size = number()?,
                Field::TotalTime => r.total_time_ms = number()?,
                Field::TurnAroundTime => r.turn_around_time_ms = number()?,
                Field::Referer => r.referer = text()?,
                Field::UserAgent => r.user_agent = text()?,
                Field::VersionId => r.version_id = text()?,
                Field::HostId => r.host_id = text()?,
                Field::SignatureVersion => r.signature_version = text()?,
                Field::CipherSuite => r.cipher_suite = text()?,
                Field::AuthenticationType => r.authentication_type = text()?,
                Field::HostHeader => r.host_header = text()?,
                Field::TlsVersion => r.tls_version = text()?,
                Field::AccessPointArn => r.access_point_arn = text()?,
                Field::AclRequired => {
                    r.acl_required = match value {
                        Flat::Bool(b) => Some(b),
                        Flat::Null => None,
                        _ => return None,
                    }
                }
                Field::SourceRegion => r.source_region = text()?,
            },
        }
        Some(())
    }
}

#[cold]
fn json_error(e: serde_json::Error) -> ParseError {
    match e.classify() {
        serde_json::error::Category::Data => {
            // Not an object, or a field of the wrong type (or cut short): the message names it.
            ParseError::Json { problem: e.to_string() }
        }
        _ => ParseError::Json {
            problem: format!("not valid JSON: {e}"),
        },
    }
}

/// The record's fields as read, before they are checked.
#[derive(Default)]
struct RawRecord<'a> {
    record: AccessLogRecord<'a>,
    request_time: Option<Cow<'a, str>>,
    schema_version: Option<Cow<'a, str>>,
    bucket_arn: Option<Cow<'a, str>>,
    /// Fields that are not documented, with their values as written.
    unknown: Vec<(Cow<'a, str>, &'a str)>,
}

impl<'a> RawRecord<'a> {
    fn into_record(mut self) -> Result<AccessLogRecord<'a>, ParseError> {
        let time = self.request_time.take().ok_or(ParseError::JsonMissing {
            field: JsonField::Text(Field::RequestTime),
        })?;
        self.record.request_time = parse_iso_time(&time).ok_or_else(|| {
            ParseError::json_invalid(
                JsonField::Text(Field::RequestTime),
                "expected yyyy-MM-ddTHH:mm:ss.SSSZ",
                &time,
            )
        })?;
        if let Some(status) = self.record.http_status
            && !(100..=999).contains(&status)
        {
            return Err(ParseError::json_invalid(
                JsonField::Text(Field::HttpStatus),
                "expected a three-digit status or null",
                &status.to_string(),
            ));
        }
        let own_arn = |arn: &str| {
            let bucket = self.record.bucket.as_deref();
            arn.strip_prefix("arn:aws:s3:::")
                .is_some_and(|name| Some(name) == bucket)
        };
        let mut extra = Vec::new();
        if let Some(version) = self.schema_version.take().filter(|v| v != JSON_SCHEMA_VERSION) {
            extra.push((JsonField::SchemaVersionId.name().into(), quoted(&version)));
        }
        if let Some(arn) = self.bucket_arn.take().filter(|arn| !own_arn(arn)) {
            extra.push((JsonField::BucketArn.name().into(), quoted(&arn)));
        }
        // The first of each name is kept, as a set keeps it: linear in the number of fields.
        let mut seen = HashSet::with_capacity(self.unknown.len());
        for (name, value) in self.unknown.drain(..) {
            if seen.insert(name.clone()) {
                extra.push((name, value.to_owned()));
            }
        }
        if !extra.is_empty() {
            let mut text = String::from("{");
            for (i, (name, value)) in extra.iter().enumerate() {
                if i > 0 {
                    text.push(',');
                }
                text.push_str(&quoted(name));
                text.push(':');
                text.push_str(value);
            }
            text.push('}');
            self.record.extra_fields = Some(Cow::Owned(text));
        }
        Ok(self.record)
    }
}

/// Whether `written` is a number as JSON writes one: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
fn is_json_number(written: &str) -> bool {
    let b = written.as_bytes();
    let mut at = usize::from(b.first() == Some(&b'-'));
    let digits = |at: &mut usize| {
        let start = *at;
        while b.get(*at).is_some_and(u8::is_ascii_digit) {
            *at += 1;
        }
        *at - start
    };
    let whole = digits(&mut at);
    if whole == 0 || (whole > 1 && b[at - whole] == b'0') {
        return false;
    }
    if b.get(at) == Some(&b'.') {
        at += 1;
        if digits(&mut at) == 0 {
            return false;
        }
    }
    if matches!(b.get(at), Some(b'e' | b'E')) {
        at += 1;
        if matches!(b.get(at), Some(b'+' | b'-')) {
            at += 1;
        }
        if digits(&mut at) == 0 {
            return false;
        }
    }
    at == b.len()
}

/// `text` as a JSON string.
fn quoted(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

/// Microseconds since the epoch of `yyyy-MM-ddTHH:mm:ss[.fraction]Z` (or another RFC 3339 offset).
fn parse_iso_time(text: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.timestamp_micros())
}

/// A JSON text or null, borrowed from the input where it has no escapes.
struct Text<'a>(Option<Cow<'a, str>>);

impl<'de> de::Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or null")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Some(Cow::Borrowed(v))))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Text(Some(Cow::Owned(v.to_owned()))))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Text(Some(Cow::Owned(v))))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Text(None))
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Text(None))
            }
        }
        deserializer.deserialize_any(TextVisitor)
    }
}

struct RecordVisitor;

impl<'de> Visitor<'de> for RecordVisitor {
    type Value = RawRecord<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an access-log record (a JSON object)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut raw = RawRecord::default();
        while let Some(Text(name)) = map.next_key::<Text<'de>>()? {
            let name = name.unwrap_or_default();
            let Some(field) = JsonField::of_name(&name) else {
                let value: &'de RawValue = map.next_value()?;
                raw.unknown.push((name, value.get()));
                continue;
            };
            let named = |e: A::Error| de::Error::custom(format_args!("{field}: {e}"));
            let text = |map: &mut A| map.next_value::<Text<'de>>().map(|t| t.0).map_err(named);
            let number = |map: &mut A| -> Result<Option<i64>, A::Error> {
                let n = map.next_value::<Option<i64>>().map_err(named)?;
                match n {
                    Some(n) if n < 0 => Err(de::Error::custom(format_args!(
                        "{field}: expected a non-negative integer or null, found {n}"
                    ))),
                    n => Ok(n),
                }
            };
            let r = &mut raw.record;
            match field {
                JsonField::SchemaVersionId => raw.schema_version = text(&mut map)?,
                JsonField::BucketArn => raw.bucket_arn = text(&mut map)?,
                JsonField::Text(f) => match f {
                    Field::BucketOwner => r.bucket_owner = text(&mut map)?,
                    Field::Bucket => r.bucket = text(&mut map)?,
                    Field::RequestTime => raw.request_time = text(&mut map)?,
                    Field::RemoteIp => r.remote_ip = text(&mut map)?,
                    Field::Requester => r.requester = text(&mut map)?,
                    Field::RequestId => r.request_id = text(&mut map)?,
                    Field::Operation => r.operation = text(&mut map)?,
                    Field::Key => r.key = text(&mut map)?,
                    Field::RequestUri => r.request_uri = text(&mut map)?,
                    Field::HttpStatus => {
                        r.http_status = number(&mut map)?.map(|n| i32::try_from(n).unwrap_or(i32::MAX))
                    }
                    Field::ErrorCode => r.error_code = text(&mut map)?,
                    Field::BytesSent => r.bytes_sent = number(&mut map)?,
                    Field::ObjectSize => r.object_size = number(&mut map)?,
                    Field::TotalTime => r.total_time_ms = number(&mut map)?,
                    Field::TurnAroundTime => r.turn_around_time_ms = number(&mut map)?,
                    Field::Referer => r.referer = text(&mut map)?,
                    Field::UserAgent => r.user_agent = text(&mut map)?,
                    Field::VersionId => r.version_id = text(&mut map)?,
                    Field::HostId => r.host_id = text(&mut map)?,
                    Field::SignatureVersion => r.signature_version = text(&mut map)?,
                    Field::CipherSuite => r.cipher_suite = text(&mut map)?,
                    Field::AuthenticationType => r.authentication_type = text(&mut map)?,
                    Field::HostHeader => r.host_header = text(&mut map)?,
                    Field::TlsVersion => r.tls_version = text(&mut map)?,
                    Field::AccessPointArn => r.access_point_arn = text(&mut map)?,
                    Field::AclRequired => r.acl_required = map.next_value::<Option<bool>>().map_err(named)?,
                    Field::SourceRegion => r.source_region = text(&mut map)?,
                },
            }
        }
        Ok(raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The guide's sample record, on one line.
    const SAMPLE: &str = r#"{"schema_version_id": "V_1_0", "bucket_arn": "arn:aws:s3:::my-data-bucket", "bucket_name": "my-data-bucket", "request_time": "2026-04-29T14:32:16.000Z", "bucket_owner_id": "79a59df900b949e55d96a1e698fbacedfd6e09d98eacf8f8d5218e7cd47ef2be", "remote_ip": "203.0.113.45", "requester": "arn:aws:iam::123456789012:role/DataAnalystRole", "request_id": "3E57427F33A59F07", "operation": "REST.GET.OBJECT", "key_name": "reports/2026/quarterly-summary.parquet", "request_uri": "GET /my-data-bucket/reports/2026/quarterly-summary.parquet HTTP/1.1", "http_status": 200, "error_code": null, "bytes_sent_size": 1048576, "object_size": 1048576, "total_duration": 45, "turn_around_duration": 12, "referer": null, "user_agent": "aws-sdk-java/2.20.0", "version_id": null, "host_id": "s9lzHYrFp76ZVxRcpX9+5cjAnEH2ROuNkd2BHfIa6UkFVdtjf5mKR3/eTPFvsiP/XV/VLi31234=", "signature_version": "SigV4", "cipher_suite": "TLS_AES_128_GCM_SHA256", "authentication_type": "AuthHeader", "host_header": "my-data-bucket.s3.us-east-1.amazonaws.com", "tls_version": "TLSv1.3", "access_point_arn": null, "acl_required": false, "source_region": "us-east-1"}"#;

    #[test]
    fn the_guides_sample_maps_field_by_field() {
        assert!(is_json_record(SAMPLE.as_bytes()));
        let r = parse_json_record(SAMPLE.as_bytes()).unwrap();
        assert_eq!(r.bucket.as_deref(), Some("my-data-bucket"));
        assert_eq!(
            r.bucket_owner.as_deref(),
            Some("79a59df900b949e55d96a1e698fbacedfd6e09d98eacf8f8d5218e7cd47ef2be")
        );
        // 2026-04-29T14:32:16Z.
        assert_eq!(r.request_time, 1_777_473_136_000_000);
        assert_eq!(r.key.as_deref(), Some("reports/2026/quarterly-summary.parquet"));
        assert_eq!(r.http_status, Some(200));
        assert_eq!((r.bytes_sent, r.object_size), (Some(1_048_576), Some(1_048_576)));
        assert_eq!((r.total_time_ms, r.turn_around_time_ms), (Some(45), Some(12)));
        assert_eq!((r.error_code, r.referer, r.version_id), (None, None, None));
        assert_eq!(r.acl_required, Some(false));
        assert_eq!(r.source_region.as_deref(), Some("us-east-1"));
        assert_eq!(r.tls_version.as_deref(), Some("TLSv1.3"));
        // The version and the bucket's own ARN say nothing more.
        assert_eq!(r.extra_fields, None);
    }

    #[test]
    fn the_one_pass_reader_reads_what_serde_json_reads() {
        let text = fixtures::log_lines::corpus(
            fixtures::log_lines::SynthConfig {
                quirk_rate: 0.2,
                malformed_rate: 0.0,
                ..Default::default()
            },
            2 << 20,
        );
        let json = fixtures::cloudwatch_json::from_text(&text);
        let (mut lines, mut one_pass) = (0, 0);
        for line in json.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            lines += 1;
            one_pass += usize::from(flat(line).is_some());
            assert_eq!(
                parse_json_record(line),
                parse_with_serde(line),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
        // The quirks (a fifth of the lines here) put escaped quotes in user agents and the like,
        // which go the long way; the rest the short one.
        assert!(one_pass * 4 > lines * 3, "{one_pass} of {lines}");
        let odd = [
            &br#" { "request_time" : "2026-04-29T14:32:16Z" , "x" : 1.5e3 , "y" : [1] } "#[..],
            br#"{"request_time":"2026-04-29T14:32:16Z","key_name":"a\"b","object_size":0}"#,
            br#"{"request_time":"2026-04-29T14:32:16Z","object_size":012}"#,
            br#"{"request_time":"2026-04-29T14:32:16Z","object_size":+12}"#,
            br#"{"request_time":"2026-04-29T14:32:16Z","object_size":1.0}"#,
            br#"{"request_time":"2026-04-29T14:32:16Z","object_size":-3}"#,
            br#"{"request_time":"2026-04-29T14:32:16Z","http_status":99999999999}"#,
            br#"{"request_time":"2026-04-29T14:32:16Z","acl_required":null,"a":1,"a":2}"#,
            br#"{"request_time":"2026-04-29T14:32:16Z","bucket_name":"b","bucket_name":"c"}"#,
            br#"{"request_time":"2026-04-29T14:32:16Z",}"#,
            br#"{"request_time":"2026-04-29T14:32:16Z"}}"#,
            br#"{"request_time":nul}"#,
            b"{\"request_time\":\"2026-04-29T14:32:16Z\",\"key_name\":\"tab\there\"}",
            br#"{}"#,
        ];
        for line in odd {
            assert_eq!(
                parse_json_record(line),
                parse_with_serde(line),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
    }

    proptest::proptest! {
        /// Records made of JSON's pieces, well-formed or not: both readers agree on each.
        #[test]
        fn both_readers_agree_on_any_record(pieces in proptest::collection::vec(
            proptest::sample::select(vec![
                "\"request_time\"", "\"2026-04-29T14:32:16.5Z\"", "\"object_size\"", "\"http_status\"",
                "\"acl_required\"", "\"key_name\"", "\"a\\\"b\"", "\"x\"", "\"é\"", ":", ",", "{", "}", "[",
                "]", "null", "true", "false", "0", "12", "-1", "1.5", "007", " ", "\t", "\u{c}", "\"\u{1}\"",
            ]),
            0..24,
        )) {
            let line = format!("{{{}", pieces.concat());
            proptest::prop_assert_eq!(parse_json_record(line.as_bytes()), parse_with_serde(line.as_bytes()));
        }
    }

    #[test]
    fn every_documented_field_has_a_distinct_name_and_column() {
        let mut names: Vec<_> = JsonField::ALL.iter().map(|f| f.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 29);
        let mut fields: Vec<_> = JsonField::ALL.iter().filter_map(|f| f.field()).collect();
        assert_eq!(fields.len(), Field::ALL.len());
        fields.sort_by_key(|f| *f as u8);
        assert_eq!(fields, Field::ALL);
    }

    #[test]
    fn a_text_line_whose_owner_starts_with_a_brace_is_text() {
        assert!(!is_json_record(
            br#"{ bkt [06/Feb/2019:00:00:38 +0000] - - - - - "-" - - - - - - "-" "-""#
        ));
        assert!(!is_json_record(br#"{} bkt [06/Feb/2019:00:00:38 +0000]"#));
        assert!(is_json_record(b" { \"a\": 1}"));
        assert!(is_json_record(b"{ }"));
    }

    #[test]
    fn milliseconds_escapes_and_missing_fields() {
        let line = br#"{"bucket_name":"b","request_time":"2026-04-29T14:32:16.123Z","key_name":"a \"quoted\"\tkey"}"#;
        let r = parse_json_record(line).unwrap();
        assert_eq!(r.request_time % 1_000_000, 123_000);
        assert_eq!(r.key.as_deref(), Some("a \"quoted\"\tkey"));
        assert_eq!((r.operation, r.acl_required), (None, None));
    }

    #[test]
    fn unknown_numbers_are_kept_as_valid_json_or_refused() {
        let with = |number: &str| {
            let line = format!(r#"{{"bucket_name":"b","request_time":"2026-04-29T14:32:16Z","n":{number}}}"#);
            parse_json_record(line.as_bytes()).map(|r| r.extra_fields.map(|e| e.into_owned()))
        };
        for good in ["0", "-0", "12", "-1.5", "1e5", "2.5E-3", "1e+2"] {
            let extra = with(good).unwrap().unwrap();
            let value: serde_json::Value = serde_json::from_str(&extra).unwrap();
            assert_eq!(
                value["n"],
                serde_json::from_str::<serde_json::Value>(good).unwrap(),
                "{good}"
            );
        }
        for bad in ["1-2", "01", "1.", ".5", "1e", "1e+", "--1", "-", "1.2.3", "+1"] {
            let e = with(bad).unwrap_err();
            assert!(e.to_string().contains("JSON"), "{bad}: {e}");
        }
    }

    #[test]
    fn many_unknown_fields_keep_the_first_of_each_name() {
        let mut line = String::from(r#"{"bucket_name":"b","request_time":"2026-04-29T14:32:16Z""#);
        for i in 0..20_000 {
            line.push_str(&format!(r#","f{}":{i}"#, i % 10_000));
        }
        line.push('}');
        for reader in [parse_json_record, parse_with_serde] {
            let r = reader(line.as_bytes()).unwrap();
            let extra: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(r.extra_fields.as_deref().unwrap()).unwrap();
            assert_eq!(extra.len(), 10_000);
            assert_eq!(extra["f7"], 7);
        }
    }

    #[test]
    fn later_fields_another_version_and_another_arn_are_kept() {
        let line = br#"{"schema_version_id":"V_1_1","bucket_arn":"arn:aws:s3:::other","bucket_name":"b","request_time":"2026-04-29T14:32:16Z","new_field":{"a":[1,2]},"new_flag":true}"#;
        let r = parse_json_record(line).unwrap();
        let extra: serde_json::Value = serde_json::from_str(r.extra_fields.as_deref().unwrap()).unwrap();
        assert_eq!(
            extra,
            serde_json::json!({"schema_version_id": "V_1_1", "bucket_arn": "arn:aws:s3:::other",
                               "new_field": {"a": [1, 2]}, "new_flag": true})
        );
    }

    #[test]
    fn bad_records_name_the_field_and_what_was_wrong() {
        let reason = |line: &str| parse_json_record(line.as_bytes()).unwrap_err().to_string();
        assert_eq!(
            reason(r#"{"bucket_name":"b"}"#),
            "request_time: required, found null or nothing"
        );
        assert_eq!(
            reason(r#"{"request_time":"29/Apr/2026:14:32:16 +0000"}"#),
            "request_time: expected yyyy-MM-ddTHH:mm:ss.SSSZ: \"29/Apr/2026:14:32:16 +0000\""
        );
        assert!(
            reason(r#"{"request_time":"2026-04-29T14:32:16Z","http_status":"200"}"#).starts_with("http_status: "),
            "{}",
            reason(r#"{"request_time":"2026-04-29T14:32:16Z","http_status":"200"}"#)
        );
        assert!(reason(r#"{"request_time":"2026-04-29T14:32:16Z","object_size":-1}"#).starts_with("object_size: "));
        assert!(reason(r#"{"request_time":"2026-04-29T14:32:16Z","http_status":42}"#).starts_with("http_status: "));
        assert!(
            reason(r#"{"request_time":"2026-04-29T14:32:16Z","acl_required":"Yes"}"#).starts_with("acl_required: ")
        );
        assert!(reason(r#"{"request_time":"#).contains("EOF while parsing"));
        assert_eq!(
            reason(r#"{"request_time""#),
            "request_time: EOF while parsing an object at line 1 column 15"
        );
        assert_eq!(reason("{} x"), "not valid JSON: trailing characters at line 1 column 4");
        assert_eq!(
            reason("[1,2]"),
            "invalid type: sequence, expected an access-log record (a JSON object) at line 1 column 0"
        );
    }
}
