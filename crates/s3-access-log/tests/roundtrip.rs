//! Property tests: every record in the domain S3 writes survives `render::write_line` then
//! `AccessLogRecord::parse` unchanged, and no input makes the parser panic.

use std::borrow::Cow;

use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use s3_access_log::render::write_line;
use s3_access_log::{AccessLogRecord, parse_lines};

type Text = Option<Cow<'static, str>>;

/// 0000-01-01T00:00:00Z and 9999-12-31T23:59:59Z: the years the four-digit format can hold.
const FIRST_SECOND: i64 = -62_167_219_200;
const LAST_SECOND: i64 = 253_402_300_799;

/// The field counts S3 has written over the years.
const ERAS: [usize; 6] = [17, 18, 24, 25, 26, 27];

fn owned(s: String) -> Cow<'static, str> {
    Cow::Owned(s)
}

/// Text of up to `max` characters: printable ASCII without the space and a few multi-byte
/// characters, plus the characters of `often` (those that steer the tokenizer) a third of the time.
fn text(often: &'static str, max: usize) -> impl Strategy<Value = String> {
    let c = prop_oneof![
        3 => prop::sample::select(often.chars().collect::<Vec<_>>()),
        5 => prop::char::range('!', '~'),
        1 => prop::sample::select(vec!['é', '日', '🦀']),
    ];
    vec(c, 0..=max).prop_map(String::from_iter)
}

/// A plain field: no spaces, no quotes, never the null marker `-`.
fn token() -> impl Strategy<Value = String> {
    "[!#-~é日本🦀]{1,24}".prop_filter("- is null", |s| s != "-")
}

fn opt_token() -> impl Strategy<Value = Text> {
    option::of(token().prop_map(owned))
}

fn number() -> impl Strategy<Value = Option<i64>> {
    option::of(0..1_000_000_000_000_000i64)
}

/// Whether a `"` in `s` is followed by spaces and then a word that `looks` at.
fn quote_then_spaces_then(s: &str, looks: impl Fn(&str) -> bool) -> bool {
    s.match_indices('"').any(|(i, _)| {
        let after = &s[i + 1..];
        let rest = after.trim_start_matches(' ');
        rest.len() < after.len() && looks(rest)
    })
}

fn looks_like_status(rest: &str) -> bool {
    let word = rest.split(' ').next().unwrap_or("");
    word == "-" || (word.len() == 3 && word.bytes().all(|b| b.is_ascii_digit()))
}

/// `METHOD /path?query HTTP/1.x`; path and query may hold quotes (and the query spaces), but no
/// quote is followed by spaces and something that looks like an HTTP status.
fn request_uri() -> impl Strategy<Value = String> {
    let method = prop::sample::select(vec!["GET", "PUT", "HEAD", "POST", "DELETE"]);
    let version = prop::sample::select(vec!["HTTP/1.0", "HTTP/1.1"]);
    let path = text("\"-0123456789", 30);
    // Words that come close to what follows the URI (`" 200 - 1 2 3 4 "...`), and arbitrary ones.
    let word = prop_oneof![
        prop::sample::select(vec!["\"", "-", "200", "404", "7", "\"x", "x\"", "=\"a", "b"]).prop_map(String::from),
        text("\"-0123456789", 8),
    ];
    let query = vec(word, 0..12).prop_map(|words| words.join(" "));
    (method, path, option::of(query), version)
        .prop_map(|(method, path, query, version)| match query {
            Some(q) => format!("{method} /{path}?{q} {version}"),
            None => format!("{method} /{path} {version}"),
        })
        .prop_filter("a quote followed by a status would close the URI", |uri| {
            !quote_then_spaces_then(uri, looks_like_status)
        })
}

/// Printable text with quotes and spaces, never a quote followed by spaces and `"` or `-` (which
/// S3's unescaped format cannot tell from the end of the referer), the closing quote included.
fn referer() -> impl Strategy<Value = Text> {
    let text = text("\" -", 40).prop_filter("ambiguous referer", |r| {
        let closed = format!("{r}\"");
        r != "-" && !quote_then_spaces_then(&closed, |rest| rest.starts_with('"') || rest.starts_with('-'))
    });
    option::of(text.prop_map(owned))
}

/// Up to nine words of printable text, quotes included, separated by runs of spaces, possibly
/// beginning with a quote. (A quote followed by ten words free of quotes would end the field.)
fn user_agent() -> impl Strategy<Value = Text> {
    let word = prop_oneof![
        3 => "[a-zA-Z0-9/._();:,+-]{1,12}",
        1 => text("\"-", 16).prop_filter("empty word", |w| !w.is_empty()),
    ];
    let text = (any::<bool>(), vec((word, 1..3usize), 0..9), any::<bool>()).prop_map(|(quote, words, trailing)| {
        let mut ua = String::from(if quote { "\"" } else { "" });
        for (i, (word, spaces)) in words.iter().enumerate() {
            if i > 0 {
                ua.push_str(&" ".repeat(*spaces));
            }
            ua.push_str(word);
        }
        if trailing {
            ua.push(' ');
        }
        ua
    });
    option::of(text.prop_filter("- is null", |ua| ua != "-").prop_map(owned))
}

/// Arbitrary Unicode, percent-encoded by the renderer; never empty nor `-`.
fn key() -> impl Strategy<Value = Text> {
    option::of(
        any::<String>()
            .prop_filter("no key", |k| !k.is_empty() && k != "-")
            .prop_map(owned),
    )
}

/// Words (quotes allowed) separated by single spaces.
fn extra_fields() -> impl Strategy<Value = Text> {
    let word = text("\"-", 10).prop_filter("empty word", |w| !w.is_empty());
    option::of(vec(word, 1..5).prop_map(|words| owned(words.join(" "))))
}

/// A record and the number of fields of its era, in the domain S3 writes.
fn record() -> impl Strategy<Value = (AccessLogRecord<'static>, usize)> {
    let head = (
        opt_token(),
        opt_token(),
        (FIRST_SECOND..=LAST_SECOND).prop_map(|s| s * 1_000_000),
        opt_token(),
        opt_token(),
        opt_token(),
        opt_token(),
        key(),
        option::of(request_uri().prop_map(owned)),
        option::of(100..=599i32),
        opt_token(),
    );
    let middle = (number(), number(), number(), number(), referer(), user_agent());
    let tail = (
        [opt_token(), opt_token(), opt_token(), opt_token(), opt_token()],
        [opt_token(), opt_token(), opt_token(), opt_token()],
        any::<bool>(),
        extra_fields(),
    );
    let era = prop::sample::select(ERAS.to_vec());
    (head, middle, tail, era).prop_map(|(head, middle, tail, fields)| {
        let (bucket_owner, bucket, request_time, remote_ip, requester, request_id, operation, key, uri, status, error) =
            head;
        let (bytes_sent, object_size, total_time_ms, turn_around_time_ms, referer, user_agent) = middle;
        let (
            [
                version_id,
                host_id,
                signature_version,
                cipher_suite,
                authentication_type,
            ],
            more,
            acl,
            extra,
        ) = tail;
        let [host_header, tls_version, access_point_arn, source_region] = more;
        // Fields the era predates are absent; `acl_required` is a boolean once the era has it.
        let upto = |n: usize, v: Text| if fields >= n { v } else { None };
        let record = AccessLogRecord {
            bucket_owner,
            bucket,
            request_time,
            remote_ip,
            requester,
            request_id,
            operation,
            key,
            request_uri: uri,
            http_status: status,
            error_code: error,
            bytes_sent,
            object_size,
            total_time_ms,
            turn_around_time_ms,
            referer,
            user_agent,
            version_id: upto(18, version_id),
            host_id: upto(19, host_id),
            signature_version: upto(20, signature_version),
            cipher_suite: upto(21, cipher_suite),
            authentication_type: upto(22, authentication_type),
            host_header: upto(23, host_header),
            tls_version: upto(24, tls_version),
            access_point_arn: upto(25, access_point_arn),
            acl_required: (fields >= 26).then_some(acl),
            source_region: upto(27, source_region),
            extra_fields: upto(27, extra),
        };
        (record, fields)
    })
}

fn render(record: &AccessLogRecord<'_>, fields: usize) -> Vec<u8> {
    let mut buf = Vec::new();
    write_line(record, fields, &mut buf);
    buf
}

/// A rendered line with a few bytes replaced, inserted or removed, favouring the bytes that steer
/// the tokenizer.
fn mutated_line() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![prop::sample::select(b" \"-[]0123456789+%\\\n\r".to_vec()), any::<u8>(),];
    let edit = (0..3u8, any::<prop::sample::Index>(), byte);
    (record(), vec(edit, 1..8)).prop_map(|((record, fields), edits)| {
        let mut line = render(&record, fields);
        line.pop();
        for (kind, at, byte) in edits {
            let i = at.index(line.len() + 1);
            match kind {
                0 if i < line.len() => line[i] = byte,
                1 => line.insert(i, byte),
                _ if i < line.len() => {
                    line.remove(i);
                }
                _ => line.push(byte),
            }
        }
        line
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn rendered_records_parse_back_unchanged((record, fields) in record()) {
        let line = render(&record, fields);
        prop_assert_eq!(line.last(), Some(&b'\n'));
        let text = &line[..line.len() - 1];
        let parsed = AccessLogRecord::parse(text);
        prop_assert!(parsed.is_ok(), "{:?} on {}", parsed, String::from_utf8_lossy(text));
        prop_assert_eq!(parsed.ok(), Some(record), "line {}", String::from_utf8_lossy(text));
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in vec(any::<u8>(), 0..400)) {
        let _ = AccessLogRecord::parse(&bytes);
        prop_assert!(parse_lines(&bytes).count() <= bytes.len());
    }

    #[test]
    fn mutated_lines_never_panic(line in mutated_line()) {
        let _ = AccessLogRecord::parse(&line);
        prop_assert!(parse_lines(&line).count() <= line.len());
    }
}
