//! Per-request latency of the handler on 100-event requests with the in-memory `LocalStream` as
//! sink: every request timed on its own, percentiles from the sorted times. Also writes the
//! requests as JSON lines for `benches/seed_handler.py`, which runs the seed's Python handler
//! logic on the very same requests.
//!
//! ```sh
//! cargo run --profile bench -p game-api-lambda --example latency -- 20000 /tmp/api-requests.jsonl
//! python3 crates/game-api-lambda/benches/seed_handler.py /tmp/api-requests.jsonl
//! ```

use std::io::Write;
use std::time::Instant;

use game_api::{ApiConfig, LocalStream, respond};

#[path = "../benches/common/mod.rs"]
mod common;

/// Distinct requests; the run cycles through them.
const DISTINCT: usize = 256;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let count: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(20_000);
    let dump = args.next();
    let requests = common::requests(DISTINCT);
    if let Some(path) = &dump {
        let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
        for request in &requests {
            serde_json::to_writer(&mut out, request)?;
            out.write_all(b"\n")?;
        }
        out.flush()?;
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
    let stream = LocalStream::with_capacity("latency", usize::MAX);
    let config = ApiConfig::default();
    // Warm-up: caches, allocator, branch predictors.
    for request in &requests {
        runtime.block_on(respond(request, &stream, &config));
        stream.drain();
    }
    let mut micros = Vec::with_capacity(count);
    for i in 0..count {
        let request = &requests[i % requests.len()];
        let t = Instant::now();
        let response = runtime.block_on(respond(request, &stream, &config));
        micros.push(t.elapsed().as_secs_f64() * 1e6);
        if response.status_code != 200 {
            return Err(format!("request {i} answered {}", response.status_code).into());
        }
        stream.drain();
    }
    // Handler time only: taking the records out of the stream happens between requests.
    let seconds = micros.iter().sum::<f64>() / 1e6;
    micros.sort_by(f64::total_cmp);
    let events = count * common::EVENTS_PER_REQUEST;
    println!(
        "rust handler: {count} requests of {} events in {seconds:.2} s: {:.0} events/s",
        common::EVENTS_PER_REQUEST,
        events as f64 / seconds
    );
    println!(
        "  per request (µs): p50 {:.1}, p90 {:.1}, p99 {:.1}, p99.9 {:.1}, max {:.1}",
        percentile(&micros, 50.0),
        percentile(&micros, 90.0),
        percentile(&micros, 99.0),
        percentile(&micros, 99.9),
        percentile(&micros, 100.0)
    );
    if let Some(path) = dump {
        println!("  requests written to {path}");
    }
    Ok(())
}
