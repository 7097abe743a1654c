//! Throughput of the access-log parser into Arrow batches, against the regex of Athena's documented
//! `CREATE TABLE` for S3 server access logs; and of the same records in S3's JSON form (as
//! delivered through CloudWatch Logs) into the same batches.
//!
//! Run with `cargo bench -p s3-access-log --bench parse`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use fixtures::log_lines::{SynthConfig, corpus};
use regex::bytes::Regex;
use s3_access_log::{
    AccessLogBatchBuilder, BATCH_ROWS, Lines, LogLine, ParseError, ParsedLine, RejectsBatchBuilder, is_blank,
};

/// The corpus size: every era and quirk mixed, a few malformed lines.
const CORPUS_BYTES: usize = 50 << 20;

const LOG_OBJECT: &str = "s3://raw-logs/2024-06-01-00-00-00-0123456789ABCDEF";

/// The `input.regex` of the table Athena's documentation creates over S3 server access logs.
const ATHENA_REGEX: &str = r#"([^ ]*) ([^ ]*) \[(.*?)\] ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ("[^"]*"|-) (-|[0-9]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ("[^"]*"|-) ([^ ]*)(?: ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*))?.*$"#;

/// Parses every line with `append` (which parses a line and appends it to the batch) into Arrow
/// batches of `BATCH_ROWS` rows; returns (rows, rejects).
fn parse_into_arrow(
    corpus: &[u8],
    append: impl Fn(&mut AccessLogBatchBuilder, &[u8], i64) -> Result<(), ParseError>,
) -> (usize, usize) {
    let mut batch = AccessLogBatchBuilder::with_capacity(0, BATCH_ROWS);
    let mut rejects = RejectsBatchBuilder::new(0);
    let mut rows = 0;
    for (number, line) in Lines::new(corpus).filter(|(_, line)| !is_blank(line)) {
        match append(&mut batch, line, number as i64) {
            Ok(()) => {
                if batch.len() == BATCH_ROWS {
                    rows += black_box(batch.finish().expect("batch")).num_rows();
                }
            }
            Err(err) => rejects.append(LOG_OBJECT, number as i64, line, &err.to_string()),
        }
    }
    rows += black_box(batch.finish().expect("batch")).num_rows();
    let rejected = black_box(rejects.finish().expect("rejects")).num_rows();
    (rows, rejected)
}

/// Text lines ([`ParsedLine::parse`]) into Arrow batches; returns (rows, rejects).
fn into_arrow(corpus: &[u8]) -> (usize, usize) {
    parse_into_arrow(corpus, |batch, line, number| {
        ParsedLine::parse(line).map(|parsed| batch.append(&parsed, LOG_OBJECT, number))
    })
}

/// Lines of either form ([`LogLine::parse`]) into Arrow batches; returns (rows, rejects).
fn either_form_into_arrow(corpus: &[u8]) -> (usize, usize) {
    parse_into_arrow(corpus, |batch, line, number| {
        LogLine::parse(line).map(|parsed| batch.append_line(&parsed, LOG_OBJECT, number))
    })
}

/// Matches every line with the Athena regex and touches every capture group; returns (matched
/// lines, bytes captured).
fn with_regex(re: &Regex, corpus: &[u8]) -> (usize, usize) {
    let (mut matched, mut captured) = (0, 0);
    for line in corpus.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        if let Some(caps) = re.captures(line) {
            matched += 1;
            for group in caps.iter().skip(1).flatten() {
                captured += black_box(group.as_bytes()).len();
            }
        }
    }
    (matched, captured)
}

fn parse(c: &mut Criterion) {
    let config = SynthConfig {
        quirk_rate: 0.05,
        malformed_rate: 0.001,
        ..Default::default()
    };
    let corpus = corpus(config, CORPUS_BYTES);
    let lines = corpus.iter().filter(|&&b| b == b'\n').count();
    let re = Regex::new(ATHENA_REGEX).expect("Athena's regex compiles");
    let (rows, rejected) = into_arrow(&corpus);
    let (matched, _) = with_regex(&re, &corpus);
    eprintln!(
        "corpus: {} bytes, {lines} lines; parser: {rows} rows, {rejected} rejects; Athena regex: {matched} matches",
        corpus.len()
    );

    let mut group = c.benchmark_group("access_log_parse");
    group.throughput(Throughput::Bytes(corpus.len() as u64));
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("arrow", |b| b.iter(|| into_arrow(black_box(&corpus))));
    group.bench_function("regex_athena", |b| b.iter(|| with_regex(&re, black_box(&corpus))));
    group.finish();

    // The same records in the JSON form: about twice the bytes, so MB/s are per JSON byte.
    let json = fixtures::cloudwatch_json::from_text(&corpus);
    let (json_rows, json_rejected) = either_form_into_arrow(&json);
    eprintln!(
        "JSON form: {} bytes; parser: {json_rows} rows, {json_rejected} rejects",
        json.len()
    );
    let mut group = c.benchmark_group("access_log_parse_json");
    group.throughput(Throughput::Bytes(json.len() as u64));
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("arrow", |b| b.iter(|| either_form_into_arrow(black_box(&json))));
    group.finish();
}

criterion_group!(benches, parse);
criterion_main!(benches);
