//! A typed access-log record that borrows its text from the line.

use std::borrow::Cow;

use crate::error::ParseError;
use crate::field::Field;
use crate::time::{date_of, parse_request_time};
use crate::tokenizer::{Fields, find_either};

/// One parsed access-log line. Text borrows from the line unless it had to be decoded (the key) or
/// was not valid UTF-8 (replaced lossily). `None` is `-` in the line or a field the line's era lacks.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AccessLogRecord<'a> {
    /// Field 1.
    pub bucket_owner: Option<Cow<'a, str>>,
    /// Field 2.
    pub bucket: Option<Cow<'a, str>>,
    /// Field 3, microseconds since the Unix epoch, UTC.
    pub request_time: i64,
    /// Field 4.
    pub remote_ip: Option<Cow<'a, str>>,
    /// Field 5.
    pub requester: Option<Cow<'a, str>>,
    /// Field 6.
    pub request_id: Option<Cow<'a, str>>,
    /// Field 7.
    pub operation: Option<Cow<'a, str>>,
    /// Field 8, decoded form-style (`+` is a space, then percent-decoding); the raw text where the
    /// decoded bytes are not UTF-8.
    pub key: Option<Cow<'a, str>>,
    /// Field 9, without the quotes.
    pub request_uri: Option<Cow<'a, str>>,
    /// Field 10.
    pub http_status: Option<i32>,
    /// Field 11.
    pub error_code: Option<Cow<'a, str>>,
    /// Field 12.
    pub bytes_sent: Option<i64>,
    /// Field 13.
    pub object_size: Option<i64>,
    /// Field 14.
    pub total_time_ms: Option<i64>,
    /// Field 15.
    pub turn_around_time_ms: Option<i64>,
    /// Field 16, without the quotes.
    pub referer: Option<Cow<'a, str>>,
    /// Field 17, without the quotes.
    pub user_agent: Option<Cow<'a, str>>,
    /// Field 18.
    pub version_id: Option<Cow<'a, str>>,
    /// Field 19.
    pub host_id: Option<Cow<'a, str>>,
    /// Field 20.
    pub signature_version: Option<Cow<'a, str>>,
    /// Field 21.
    pub cipher_suite: Option<Cow<'a, str>>,
    /// Field 22.
    pub authentication_type: Option<Cow<'a, str>>,
    /// Field 23.
    pub host_header: Option<Cow<'a, str>>,
    /// Field 24.
    pub tls_version: Option<Cow<'a, str>>,
    /// Field 25.
    pub access_point_arn: Option<Cow<'a, str>>,
    /// Field 26: `Yes` is true, `-` false, absent null.
    pub acl_required: Option<bool>,
    /// Field 27.
    pub source_region: Option<Cow<'a, str>>,
    /// Everything after field 27, verbatim.
    pub extra_fields: Option<Cow<'a, str>>,
}

impl<'a> AccessLogRecord<'a> {
    /// Days since the Unix epoch of the UTC date of the request: the `request_date` partition.
    pub fn request_date(&self) -> i32 {
        date_of(self.request_time)
    }

    /// The text of a field that is text (`None` for a null and for the fields that are not text:
    /// the time, the status, the numbers and `acl_required`).
    pub fn text(&self, field: Field) -> Option<&str> {
        let text = match field {
            Field::BucketOwner => &self.bucket_owner,
            Field::Bucket => &self.bucket,
            Field::RemoteIp => &self.remote_ip,
            Field::Requester => &self.requester,
            Field::RequestId => &self.request_id,
            Field::Operation => &self.operation,
            Field::Key => &self.key,
            Field::RequestUri => &self.request_uri,
            Field::ErrorCode => &self.error_code,
            Field::Referer => &self.referer,
            Field::UserAgent => &self.user_agent,
            Field::VersionId => &self.version_id,
            Field::HostId => &self.host_id,
            Field::SignatureVersion => &self.signature_version,
            Field::CipherSuite => &self.cipher_suite,
            Field::AuthenticationType => &self.authentication_type,
            Field::HostHeader => &self.host_header,
            Field::TlsVersion => &self.tls_version,
            Field::AccessPointArn => &self.access_point_arn,
            Field::SourceRegion => &self.source_region,
            Field::RequestTime
            | Field::HttpStatus
            | Field::BytesSent
            | Field::ObjectSize
            | Field::TotalTime
            | Field::TurnAroundTime
            | Field::AclRequired => return None,
        };
        text.as_deref()
    }
}

/// One line split into its fields and checked: every field that is not text (the time, the
/// status, the numbers, `acl_required`) is parsed, the text is still the line's. What
/// [`AccessLogBatchBuilder::append`](crate::AccessLogBatchBuilder::append) takes: a row goes from
/// the line into the columns without a record in between.
#[derive(Debug, Clone)]
pub struct ParsedLine<'a> {
    fields: Fields<'a>,
    typed: Typed,
}

/// The fields of a line that are not text, parsed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Typed {
    pub(crate) request_time: i64,
    pub(crate) http_status: Option<i32>,
    pub(crate) bytes_sent: Option<i64>,
    pub(crate) object_size: Option<i64>,
    pub(crate) total_time_ms: Option<i64>,
    pub(crate) turn_around_time_ms: Option<i64>,
    pub(crate) acl_required: Option<bool>,
}

impl<'a> ParsedLine<'a> {
    /// Splits and checks one line (without its line terminator).
    #[inline(always)]
    pub fn parse(line: &'a [u8]) -> Result<Self, ParseError> {
        let mut fields = Fields::unsplit(line);
        fields.split_in_place()?;
        let typed = Typed::of(&fields)?;
        Ok(ParsedLine { fields, typed })
    }

    /// The fields of the line.
    pub fn fields(&self) -> &Fields<'a> {
        &self.fields
    }

    pub(crate) fn typed(&self) -> &Typed {
        &self.typed
    }

    /// The bucket (field 2); `None` when it is `-`.
    pub fn bucket(&self) -> Option<Cow<'a, str>> {
        self.fields.text(Field::Bucket)
    }

    /// Microseconds since the Unix epoch of the request, UTC.
    pub fn request_time(&self) -> i64 {
        self.typed.request_time
    }

    /// The decoded key (see [`AccessLogRecord::key`]).
    #[inline(always)]
    pub(crate) fn key(&self) -> Option<Cow<'a, str>> {
        let f = &self.fields;
        f.get(Field::Key)
            .and_then(nullable)
            .and_then(|raw| match find_either(raw, b'%', b'+') {
                // Nothing to decode: the text as it is in the line.
                None => f.text(Field::Key),
                Some(first) => Some(decode_escaped(raw, first)),
            })
    }

    /// The line as a typed record.
    pub fn record(&self) -> AccessLogRecord<'a> {
        let f = &self.fields;
        let t = self.typed;
        let text = |field| f.text(field);
        AccessLogRecord {
            bucket_owner: text(Field::BucketOwner),
            bucket: text(Field::Bucket),
            request_time: t.request_time,
            remote_ip: text(Field::RemoteIp),
            requester: text(Field::Requester),
            request_id: text(Field::RequestId),
            operation: text(Field::Operation),
            key: self.key(),
            request_uri: text(Field::RequestUri),
            http_status: t.http_status,
            error_code: text(Field::ErrorCode),
            bytes_sent: t.bytes_sent,
            object_size: t.object_size,
            total_time_ms: t.total_time_ms,
            turn_around_time_ms: t.turn_around_time_ms,
            referer: text(Field::Referer),
            user_agent: text(Field::UserAgent),
            version_id: text(Field::VersionId),
            host_id: text(Field::HostId),
            signature_version: text(Field::SignatureVersion),
            cipher_suite: text(Field::CipherSuite),
            authentication_type: text(Field::AuthenticationType),
            host_header: text(Field::HostHeader),
            tls_version: text(Field::TlsVersion),
            access_point_arn: text(Field::AccessPointArn),
            acl_required: t.acl_required,
            source_region: text(Field::SourceRegion),
            extra_fields: f.extra_text(),
        }
    }
}

impl Typed {
    #[inline(always)]
    fn of(f: &Fields<'_>) -> Result<Self, ParseError> {
        let time = f
            .get(Field::RequestTime)
            .and_then(nullable)
            .ok_or(ParseError::Missing {
                field: Field::RequestTime,
            })?;
        let request_time = parse_request_time(time)
            .ok_or_else(|| ParseError::invalid(Field::RequestTime, "expected dd/Mon/yyyy:HH:MM:SS +hhmm", time))?;
        Ok(Typed {
            request_time,
            http_status: http_status(f)?,
            bytes_sent: number(f, Field::BytesSent)?,
            object_size: number(f, Field::ObjectSize)?,
            total_time_ms: number(f, Field::TotalTime)?,
            turn_around_time_ms: number(f, Field::TurnAroundTime)?,
            acl_required: acl_required(f)?,
        })
    }
}

/// `-` means null in every field.
#[inline]
fn nullable(raw: &[u8]) -> Option<&[u8]> {
    (raw != b"-").then_some(raw)
}

/// Inlined: out of line, its result (a `ParseError` wide) went through memory four times a line.
/// The error is built out of line, where it costs nothing to lines that have none.
#[inline(always)]
fn number(f: &Fields<'_>, field: Field) -> Result<Option<i64>, ParseError> {
    f.number(field).map_err(|raw| not_a_number(field, raw))
}

#[cold]
#[inline(never)]
fn not_a_number(field: Field, raw: &[u8]) -> ParseError {
    ParseError::invalid(field, "expected a non-negative integer or -", raw)
}

fn http_status(f: &Fields<'_>) -> Result<Option<i32>, ParseError> {
    let raw = f.get(Field::HttpStatus).unwrap_or_default();
    match f.number(Field::HttpStatus) {
        Ok(None) => Ok(None),
        // A leading zero is not a status: `020` would read as 20, which has no three-digit form.
        Ok(Some(code)) if raw.len() == 3 && code >= 100 => Ok(Some(code as i32)),
        Ok(Some(_)) | Err(_) => Err(ParseError::invalid(
            Field::HttpStatus,
            "expected a three-digit status or -",
            raw,
        )),
    }
}

fn acl_required(f: &Fields<'_>) -> Result<Option<bool>, ParseError> {
    match f.get(Field::AclRequired) {
        None => Ok(None),
        Some(b"Yes") => Ok(Some(true)),
        Some(b"-") => Ok(Some(false)),
        Some(raw) => Err(ParseError::invalid(Field::AclRequired, "expected Yes or -", raw)),
    }
}

/// Decodes a key form-style: `+` is a space, then percent-decoding. Keys S3 logged with bytes that
/// do not decode to UTF-8 are kept as written.
pub fn decode_key(raw: &[u8]) -> Cow<'_, str> {
    match find_either(raw, b'%', b'+') {
        None => text_of(raw),
        Some(first) => decode_escaped(raw, first),
    }
}

/// Decodes `raw`, whose first `%` or `+` is at `first`.
fn decode_escaped(raw: &[u8], first: usize) -> Cow<'_, str> {
    // Decoded in place in a copy of `raw`: an escape is never shorter than what it decodes to, so
    // the bytes not yet read are never overwritten.
    let mut bytes = raw.to_vec();
    let (mut read, mut write) = (first, first);
    while let Some(&byte) = bytes.get(read) {
        // `+` is never a hex digit, so it cannot be part of an escape.
        let (byte, width) = match byte {
            b'+' => (b' ', 1),
            b'%' => match (bytes.get(read + 1).and_then(hex), bytes.get(read + 2).and_then(hex)) {
                (Some(h), Some(l)) => (h << 4 | l, 3),
                _ => (b'%', 1),
            },
            other => (other, 1),
        };
        bytes[write] = byte;
        write += 1;
        read += width;
    }
    bytes.truncate(write);
    match String::from_utf8(bytes) {
        Ok(text) => Cow::Owned(text),
        Err(_) => text_of(raw),
    }
}

fn hex(digit: &u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

/// `raw` as text, borrowed if it is UTF-8, with replacement characters if not.
fn text_of(raw: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(raw) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(raw),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWNER: &str = "79a59df900b949e55d96a1e698fbacedfd6e09d98eacf8f8d5218e7cd47ef2be";

    fn line(tail: &str) -> String {
        format!(
            "{OWNER} awsexamplebucket1 [06/Feb/2019:00:00:38 +0000] 192.0.2.3 {OWNER} 3E57427F3EXAMPLE \
             REST.GET.VERSIONING - \"GET /awsexamplebucket1?versioning HTTP/1.1\" 200 - 113 - 7 - \"-\" \
             \"S3Console/0.4\"{tail}"
        )
    }

    const TAIL_27: &str = " - s9lzHYrFp76ZVxRcpX9+5cjAnEH2ROuNkd2BHfIa6UkFVdtjf5mKR3/eTPFvsiP/XV/VLi31234= SigV4 \
        ECDHE-RSA-AES128-GCM-SHA256 AuthHeader awsexamplebucket1.s3.us-west-1.amazonaws.com TLSV1.2 \
        arn:aws:s3:us-west-1:123456789012:accesspoint/example-AP Yes us-east-1";

    #[test]
    fn aws_documentation_example_all_fields() {
        let l = line(TAIL_27);
        let r = AccessLogRecord::parse(l.as_bytes()).unwrap();
        assert_eq!(r.bucket_owner.as_deref(), Some(OWNER));
        assert_eq!(r.bucket.as_deref(), Some("awsexamplebucket1"));
        assert_eq!(r.request_time, 1_549_411_238_000_000);
        assert_eq!(r.request_date(), 17_933);
        assert_eq!(r.remote_ip.as_deref(), Some("192.0.2.3"));
        assert_eq!(r.request_id.as_deref(), Some("3E57427F3EXAMPLE"));
        assert_eq!(r.operation.as_deref(), Some("REST.GET.VERSIONING"));
        assert_eq!(r.key, None);
        assert_eq!(
            r.request_uri.as_deref(),
            Some("GET /awsexamplebucket1?versioning HTTP/1.1")
        );
        assert_eq!(r.http_status, Some(200));
        assert_eq!(r.error_code, None);
        assert_eq!(r.bytes_sent, Some(113));
        assert_eq!(r.object_size, None);
        assert_eq!(r.total_time_ms, Some(7));
        assert_eq!(r.turn_around_time_ms, None);
        assert_eq!(r.referer, None);
        assert_eq!(r.user_agent.as_deref(), Some("S3Console/0.4"));
        assert_eq!(r.version_id, None);
        assert_eq!(r.signature_version.as_deref(), Some("SigV4"));
        assert_eq!(r.cipher_suite.as_deref(), Some("ECDHE-RSA-AES128-GCM-SHA256"));
        assert_eq!(r.authentication_type.as_deref(), Some("AuthHeader"));
        assert_eq!(r.tls_version.as_deref(), Some("TLSV1.2"));
        assert_eq!(
            r.access_point_arn.as_deref(),
            Some("arn:aws:s3:us-west-1:123456789012:accesspoint/example-AP")
        );
        assert_eq!(r.acl_required, Some(true));
        assert_eq!(r.source_region.as_deref(), Some("us-east-1"));
        assert_eq!(r.extra_fields, None);
    }

    #[test]
    fn every_era() {
        let tail: Vec<&str> = TAIL_27.split(' ').skip(1).collect();
        for count in [17usize, 18, 24, 25, 26, 27] {
            let l = line(&tail[..count - 17].iter().map(|f| format!(" {f}")).collect::<String>());
            let r = AccessLogRecord::parse(l.as_bytes()).unwrap_or_else(|e| panic!("{count}: {e}"));
            assert_eq!(r.user_agent.as_deref(), Some("S3Console/0.4"));
            assert_eq!(r.host_id.is_some(), count >= 19, "{count}");
            assert_eq!(r.tls_version.is_some(), count >= 24, "{count}");
            assert_eq!(r.access_point_arn.is_some(), count >= 25, "{count}");
            assert_eq!(r.acl_required, [None, Some(true)][usize::from(count >= 26)], "{count}");
            assert_eq!(r.source_region.is_some(), count >= 27, "{count}");
        }
    }

    #[test]
    fn acl_required_dash_is_false() {
        let l = line(&TAIL_27.replace(" Yes ", " - "));
        assert_eq!(AccessLogRecord::parse(l.as_bytes()).unwrap().acl_required, Some(false));
    }

    #[test]
    fn fields_past_27_are_extra() {
        let l = line(&format!("{TAIL_27} new-field \"quoted thing\""));
        let r = AccessLogRecord::parse(l.as_bytes()).unwrap();
        assert_eq!(r.source_region.as_deref(), Some("us-east-1"));
        assert_eq!(r.extra_fields.as_deref(), Some("new-field \"quoted thing\""));
    }

    #[test]
    fn keys_decode_form_style() {
        assert_eq!(decode_key(b"plain/key.csv"), "plain/key.csv");
        assert!(matches!(decode_key(b"plain/key.csv"), Cow::Borrowed(_)));
        assert_eq!(decode_key(b"a+b%2Bc%20d"), "a b+c d");
        assert_eq!(decode_key(b"caf%C3%A9/%E6%97%A5%E6%9C%AC"), "café/日本");
        assert_eq!(decode_key(b"bad%FF%FEkey+x"), "bad%FF%FEkey+x");
        assert_eq!(decode_key(b"trailing%"), "trailing%");
        assert_eq!(decode_key(b"%2"), "%2");
    }

    #[test]
    fn keys_decode_like_plus_then_percent_decoding() {
        // Every key of up to five bytes from an alphabet of escapes, digits and odd bytes.
        let alphabet = [b'a', b'%', b'+', b'2', b'B', b'f', b'F', b'g', 0xC3, 0xA9, 0xFF];
        let reference = |raw: &[u8]| -> String {
            let spaced: Vec<u8> = raw.iter().map(|&b| if b == b'+' { b' ' } else { b }).collect();
            let decoded: Vec<u8> = percent_encoding::percent_decode(&spaced).collect();
            match String::from_utf8(decoded) {
                Ok(text) => text,
                Err(_) => String::from_utf8_lossy(raw).into_owned(),
            }
        };
        let mut raw = Vec::new();
        for len in 0..=5u32 {
            for n in 0..alphabet.len().pow(len) {
                raw.clear();
                let mut n = n;
                for _ in 0..len {
                    raw.push(alphabet[n % alphabet.len()]);
                    n /= alphabet.len();
                }
                assert_eq!(decode_key(&raw), reference(&raw), "{raw:?}");
            }
        }
    }

    #[test]
    fn dash_status_and_unquoted_uri() {
        let l = format!(
            "{OWNER} b [06/Feb/2019:00:00:38 -0700] 192.0.2.3 - ID REST.PUT.OBJECT a%2Fb+c - - AccessDenied - - - - - -"
        );
        let r = AccessLogRecord::parse(l.as_bytes()).unwrap();
        assert_eq!(r.request_time, 1_549_411_238_000_000 + 7 * 3_600_000_000);
        assert_eq!(r.key.as_deref(), Some("a/b c"));
        assert_eq!(r.request_uri, None);
        assert_eq!(r.http_status, None);
        assert_eq!(r.error_code.as_deref(), Some("AccessDenied"));
        assert_eq!(r.referer, None);
        assert_eq!(r.user_agent, None);
    }

    #[test]
    fn status_with_a_leading_zero_is_invalid() {
        // Found by fuzzing: `020` parsed as 20, which renders as `20` and is then not a status.
        let l = line("").replace(" 200 ", " 020 ");
        let err = AccessLogRecord::parse(l.as_bytes()).unwrap_err().to_string();
        assert_eq!(err, "http_status: expected a three-digit status or -: \"020\"");
        let l = line("").replace(" 200 ", " 100 ");
        assert_eq!(AccessLogRecord::parse(l.as_bytes()).unwrap().http_status, Some(100));
    }

    #[test]
    fn invalid_bytes_are_replaced_not_rejected() {
        let mut l = line("").into_bytes();
        let ua = l.len() - 2;
        l[ua] = 0xFF;
        let r = AccessLogRecord::parse(&l).unwrap();
        assert_eq!(r.user_agent.as_deref(), Some("S3Console/0.\u{FFFD}"));
    }

    #[test]
    fn errors_name_field_and_value() {
        let cases = [
            (line("").replace(" 200 ", " 2000 "), "request_uri: no closing quote"),
            (line("").replace(" 113 ", " 11x "), "request_uri: no closing quote"),
            (
                line(TAIL_27).replace(" Yes ", " No "),
                "acl_required: expected Yes or -: \"No\"",
            ),
            (
                line("").replace("06/Feb/2019", "06/Feb/20x9"),
                "request_time: expected dd/Mon/yyyy",
            ),
            (
                line("").replace("[06/Feb/2019:00:00:38 +0000]", "-"),
                "request_time: required, found -",
            ),
            (
                line("").replace("\"GET /awsexamplebucket1?versioning HTTP/1.1\" 200", "- 2x0"),
                "http_status: expected a three-digit status or -: \"2x0\"",
            ),
            (
                line("").replace(
                    "\"GET /awsexamplebucket1?versioning HTTP/1.1\" 200 - 113",
                    "- 200 - 1e3",
                ),
                "bytes_sent: expected a non-negative integer or -: \"1e3\"",
            ),
        ];
        for (l, expected) in cases {
            let err = AccessLogRecord::parse(l.as_bytes()).unwrap_err().to_string();
            assert!(err.starts_with(expected), "{err} <> {expected}");
        }
    }
}
