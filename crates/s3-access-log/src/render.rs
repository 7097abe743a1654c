//! Writes records back in S3's access-log format: the inverse of the parser, for generated corpora
//! and round-trip tests.

use std::borrow::Cow;
use std::io::Write;

use chrono::DateTime;
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};

use crate::record::AccessLogRecord;
use crate::tokenizer::{MIN_FIELDS, NAMED_FIELDS};

/// Bytes of a key that S3 writes percent-encoded in its logs (and every non-ASCII byte).
const KEY_ESCAPES: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'%')
    .add(b'+')
    .add(b'#')
    .add(b'?')
    .add(b'[')
    .add(b']')
    .add(b'\\');

/// Percent-encodes a key the way S3 writes it into a log line.
pub fn encode_key(key: &str) -> Cow<'_, str> {
    utf8_percent_encode(key, KEY_ESCAPES).into()
}

/// Appends `record` as one line of `fields` named fields (17 to 27, clamped), then `\n`.
///
/// The request time is written in UTC with whole seconds, as S3 writes it. Fields the era has
/// but the record lacks are written as `-`; `extra_fields` is written only with 27 fields.
pub fn write_line(r: &AccessLogRecord<'_>, fields: usize, out: &mut Vec<u8>) {
    let fields = fields.clamp(MIN_FIELDS, NAMED_FIELDS);
    let word = |out: &mut Vec<u8>, v: &Option<Cow<'_, str>>| {
        out.extend_from_slice(v.as_deref().unwrap_or("-").as_bytes());
        out.push(b' ');
    };
    let quoted = |out: &mut Vec<u8>, v: &Option<Cow<'_, str>>| match v {
        Some(v) => {
            out.push(b'"');
            out.extend_from_slice(v.as_bytes());
            out.extend_from_slice(b"\" ");
        }
        None => out.extend_from_slice(b"\"-\" "),
    };
    let number = |out: &mut Vec<u8>, v: Option<i64>| {
        match v {
            Some(n) => write!(out, "{n}"),
            None => write!(out, "-"),
        }
        .ok();
        out.push(b' ');
    };
    word(out, &r.bucket_owner);
    word(out, &r.bucket);
    let secs = r.request_time.div_euclid(1_000_000);
    match DateTime::from_timestamp(secs, 0) {
        Some(t) => write!(out, "[{}] ", t.format("%d/%b/%Y:%H:%M:%S +0000")),
        None => write!(out, "- "),
    }
    .ok();
    word(out, &r.remote_ip);
    word(out, &r.requester);
    word(out, &r.request_id);
    word(out, &r.operation);
    word(out, &r.key.as_deref().map(encode_key));
    quoted(out, &r.request_uri);
    number(out, r.http_status.map(i64::from));
    word(out, &r.error_code);
    number(out, r.bytes_sent);
    number(out, r.object_size);
    number(out, r.total_time_ms);
    number(out, r.turn_around_time_ms);
    quoted(out, &r.referer);
    quoted(out, &r.user_agent);
    let tail = [
        &r.version_id,
        &r.host_id,
        &r.signature_version,
        &r.cipher_suite,
        &r.authentication_type,
        &r.host_header,
        &r.tls_version,
        &r.access_point_arn,
    ];
    for value in tail.into_iter().take(fields - MIN_FIELDS) {
        word(out, value);
    }
    if fields >= 26 {
        out.extend_from_slice(if r.acl_required == Some(true) { b"Yes " } else { b"- " });
    }
    if fields >= 27 {
        word(out, &r.source_region);
        if let Some(extra) = &r.extra_fields {
            out.extend_from_slice(extra.as_bytes());
            out.push(b' ');
        }
    }
    out.pop();
    out.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_documented_example() {
        let line = b"o b [06/Feb/2019:00:00:38 +0000] 192.0.2.3 r ID REST.GET.OBJECT dir/a%20b%2Bc \
            \"GET /b/dir/a%20b%2Bc HTTP/1.1\" 200 - 113 - 7 - \"-\" \"S3Console/0.4\" - h SigV4 c AuthHeader \
            b.s3.amazonaws.com TLSV1.2 - Yes us-east-1\n";
        let r = AccessLogRecord::parse(&line[..line.len() - 1]).unwrap();
        assert_eq!(r.key.as_deref(), Some("dir/a b+c"));
        let mut out = Vec::new();
        write_line(&r, 27, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            String::from_utf8(line.to_vec()).unwrap()
        );
    }
}
