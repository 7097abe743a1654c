//! A driver for instruction-count profiles of the parser: generates the benchmark's corpus (of a
//! size given in MiB) and runs one stage of the parser over it `passes` times: `split` (the
//! tokenizer only), `parse` (typed records) or `arrow` (records appended to Arrow batches, as the
//! `arrow` benchmark does).
//!
//! ```sh
//! cargo build --profile bench -p s3-access-log --example profile_parse
//! valgrind --tool=callgrind --toggle-collect='profile_parse::run' \
//!     target/release/examples/profile_parse arrow 5 1
//! ```
//!
//! Only `run` is counted, so the corpus generation does not blur the figures.

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use fixtures::log_lines::{SynthConfig, corpus};
use s3_access_log::{
    AccessLogBatchBuilder, AccessLogRecord, BATCH_ROWS, Fields, Lines, ParsedLine, RejectsBatchBuilder, is_blank,
};

const LOG_OBJECT: &str = "s3://raw-logs/2024-06-01-00-00-00-0123456789ABCDEF";

/// The stages of the parser this driver can run.
#[derive(Clone, Copy)]
enum Stage {
    Split,
    Parse,
    Arrow,
}

/// Runs `stage` over every line; returns (accepted, rejected) lines.
#[inline(never)]
fn run(stage: Stage, corpus: &[u8]) -> Result<(usize, usize), arrow::error::ArrowError> {
    let lines = || Lines::new(corpus).filter(|(_, line)| !is_blank(line));
    let count = |ok: usize, all: usize| (ok, all - ok);
    Ok(match stage {
        Stage::Split => {
            let (mut ok, mut all) = (0, 0);
            for (_, line) in lines() {
                all += 1;
                ok += usize::from(black_box(Fields::split(line)).is_ok());
            }
            count(ok, all)
        }
        Stage::Parse => {
            let (mut ok, mut all) = (0, 0);
            for (_, line) in lines() {
                all += 1;
                ok += usize::from(black_box(AccessLogRecord::parse(line)).is_ok());
            }
            count(ok, all)
        }
        Stage::Arrow => into_arrow(corpus)?,
    })
}

/// Parses every line into Arrow batches of `BATCH_ROWS` rows; returns (rows, rejects).
fn into_arrow(corpus: &[u8]) -> Result<(usize, usize), arrow::error::ArrowError> {
    let mut batch = AccessLogBatchBuilder::with_capacity(0, BATCH_ROWS);
    let mut rejects = RejectsBatchBuilder::new(0);
    let mut rows = 0;
    for (number, line) in Lines::new(corpus).filter(|(_, line)| !is_blank(line)) {
        match ParsedLine::parse(line) {
            Ok(parsed) => {
                batch.append(&parsed, LOG_OBJECT, number as i64);
                if batch.len() == BATCH_ROWS {
                    rows += black_box(batch.finish()?).num_rows();
                }
            }
            Err(err) => rejects.append(LOG_OBJECT, number as i64, line, &err.to_string()),
        }
    }
    rows += black_box(batch.finish()?).num_rows();
    let rejected = black_box(rejects.finish()?).num_rows();
    Ok((rows, rejected))
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let stage = match args.next().as_deref() {
        Some("split") => Some(Stage::Split),
        Some("parse") => Some(Stage::Parse),
        Some("arrow") => Some(Stage::Arrow),
        _ => None,
    };
    let mut next = |default: usize| args.next().map_or(Ok(default), |a| a.parse::<usize>());
    let (stage, mib, passes) = match (stage, next(5), next(1)) {
        (Some(stage), Ok(mib), Ok(passes)) => (stage, mib, passes),
        _ => {
            eprintln!("usage: profile_parse split|parse|arrow [MiB of corpus, default 5] [passes, default 1]");
            return ExitCode::FAILURE;
        }
    };
    let config = SynthConfig {
        quirk_rate: 0.05,
        malformed_rate: 0.001,
        ..Default::default()
    };
    let corpus = corpus(config, mib << 20);
    for _ in 0..passes {
        let started = Instant::now();
        match run(stage, black_box(&corpus)) {
            Ok((rows, rejected)) => {
                let seconds = started.elapsed().as_secs_f64();
                println!(
                    "{} bytes: {rows} rows, {rejected} rejects in {:.1} ms, {:.1} MB/s",
                    corpus.len(),
                    seconds * 1e3,
                    corpus.len() as f64 / seconds / 1e6
                );
            }
            Err(err) => {
                eprintln!("arrow: {err}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
