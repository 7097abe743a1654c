//! Parses arbitrary bytes as access-log lines. No input may panic; an accepted line must land in an
//! Arrow batch, and the record rendered back into a line must be accepted again (and render to the
//! same line: rendering normalises once, then is a fixed point).

#![no_main]

use libfuzzer_sys::fuzz_target;
use s3_access_log::render::write_line;
use s3_access_log::{AccessLogBatchBuilder, AccessLogRecord, Fields, ParsedLine, parse_lines};

/// 0000-01-01T00:00:00Z and 9999-12-31T23:59:59Z, in microseconds since the epoch.
const FIRST_MICROS: i64 = -62_167_219_200_000_000;
const LAST_MICROS: i64 = 253_402_300_799_000_000;

fuzz_target!(|data: &[u8]| {
    if let Ok(parsed) = ParsedLine::parse(data) {
        let record = parsed.record();
        // Room for the one row: the 1024 rows of `new` made every run allocate (twice, with the
        // builder `finish` leaves behind) about a megabyte, which slowed the fuzzer severalfold.
        let mut batch = AccessLogBatchBuilder::with_capacity(0, 1);
        batch.append(&parsed, "s3://fuzz/log", 1);
        let batch = batch.finish().expect("an accepted record makes a valid batch");
        assert_eq!(batch.num_rows(), 1);
        if renderable(&record) {
            round_trip(data, &record);
        }
    }
    for (_, line, parsed) in parse_lines(data) {
        assert_eq!(parsed.is_ok(), ParsedLine::parse(line).is_ok());
    }
});

/// Whether the record has a rendering at all.
fn renderable(record: &AccessLogRecord<'_>) -> bool {
    // The renderer quotes the user agent, as S3 does, and a quoted user agent closes only before
    // fields free of quotes: a quote in fields 18 to 27 (which only a line with an unquoted user
    // agent can carry) has no rendering the parser reads back.
    let after_user_agent = [
        &record.version_id,
        &record.host_id,
        &record.signature_version,
        &record.cipher_suite,
        &record.authentication_type,
        &record.host_header,
        &record.tls_version,
        &record.access_point_arn,
        &record.source_region,
    ];
    let quote_after_user_agent = after_user_agent
        .iter()
        .any(|v| v.as_deref().is_some_and(|v| v.contains('"')));
    // The renderer writes the time in UTC, as S3 does, with a four-digit year: a local time near the
    // ends of years 0000 and 9999 whose offset moves it out of them has no such rendering.
    let four_digit_year = (FIRST_MICROS..=LAST_MICROS).contains(&record.request_time);
    !quote_after_user_agent && four_digit_year
}

fn round_trip(data: &[u8], record: &AccessLogRecord<'_>) {
    let fields = Fields::split(data).expect("the line was accepted").count();
    let mut line = Vec::new();
    write_line(record, fields, &mut line);
    let rendered = &line[..line.len() - 1];
    let show = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    let again = match AccessLogRecord::parse(rendered) {
        Ok(again) => again,
        Err(err) => panic!(
            "rendered record rejected: {err}\n  input:    {:?}\n  rendered: {:?}",
            show(data),
            show(rendered)
        ),
    };
    let mut line_again = Vec::new();
    write_line(&again, fields, &mut line_again);
    assert!(
        line_again == line,
        "rendering is not a fixed point\n  input:    {:?}\n  rendered: {:?}\n  again:    {:?}",
        show(data),
        show(&line),
        show(&line_again)
    );
}
