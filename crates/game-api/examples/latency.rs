//! Per-request latency of the handler on 100-event requests with the in-memory `LocalStream` as
//! sink: every request timed on its own, percentiles from the sorted times. Also writes the
//! requests as JSON lines for `benches/seed_handler.py`, which runs the seed's Python handler
//! logic on the very same requests.
//!
//! Each request is timed twice: on the wall clock, which is what a client waits for, and on the
//! thread's CPU clock, which leaves out the time the thread waited while other processes had the
//! core. On a shared machine the two differ in the tail; the Python script reports both too.
//!
//! The default of 200,000 requests makes the run about as long as the Python script's 10,000,
//! so that both see the same spells of a shared host's slower speed rather
//! than one side catching a short one.
//!
//! ```sh
//! cargo run --profile bench -p game-api --example latency -- 200000 /tmp/api-requests.jsonl
//! python3 crates/game-api/benches/seed_handler.py /tmp/api-requests.jsonl 10000
//! ACCEPT_ENCODING=gzip cargo run --profile bench -p game-api --example latency -- 200000
//! ```
//!
//! With `ACCEPT_ENCODING` set, every request carries it as its `Accept-Encoding` header: `gzip`
//! times the handler with its answers compressed, as mobile clients ask for them.

use std::io::Write;
use std::time::{Duration, Instant};

use game_api::{ApiConfig, LocalStream, respond};

#[path = "../benches/common/mod.rs"]
mod common;

// The allocator of the Lambda (`src/main.rs`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Distinct requests; the run cycles through them.
const DISTINCT: usize = 256;

/// The CPU time the calling thread has used (`CLOCK_THREAD_CPUTIME_ID`, as Python's
/// `time.thread_time`).
#[cfg(target_os = "linux")]
fn thread_cpu_time() -> Duration {
    #[repr(C)]
    struct Timespec {
        tv_sec: i64,
        tv_nsec: i64,
    }
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    unsafe extern "C" {
        fn clock_gettime(clock: i32, time: *mut Timespec) -> i32;
    }
    let mut time = Timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `time` is a valid, writable timespec (two longs on 64-bit Linux) for the call.
    let rc = unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut time) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(time.tv_sec as u64, time.tv_nsec as u32)
}

/// Without a thread CPU clock, the wall clock.
#[cfg(not(target_os = "linux"))]
fn thread_cpu_time() -> Duration {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Prints events/s from the summed request times, and their percentiles, in µs.
fn report(clock: &str, mut micros: Vec<f64>) {
    let seconds = micros.iter().sum::<f64>() / 1e6;
    micros.sort_by(f64::total_cmp);
    let events = micros.len() * common::EVENTS_PER_REQUEST;
    println!(
        "  {clock}: {seconds:.2} s, {:.0} events/s; per request (µs): p50 {:.1}, p90 {:.1}, p99 {:.1}, \
         p99.9 {:.1}, max {:.1}",
        events as f64 / seconds,
        percentile(&micros, 50.0),
        percentile(&micros, 90.0),
        percentile(&micros, 99.0),
        percentile(&micros, 99.9),
        percentile(&micros, 100.0)
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let count: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(200_000);
    let dump = args.next();
    let mut requests = common::requests(DISTINCT);
    if let Ok(accept) = std::env::var("ACCEPT_ENCODING") {
        let value = aws_lambda_events::http::HeaderValue::from_str(&accept)?;
        for request in &mut requests {
            request.headers.insert("accept-encoding", value.clone());
        }
    }
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
    let games = common::games();
    // Warm-up: caches, allocator, branch predictors.
    for request in &requests {
        runtime.block_on(respond(request, &games, &stream, &config));
        stream.drain();
    }
    let mut wall = Vec::with_capacity(count);
    let mut cpu = Vec::with_capacity(count);
    for i in 0..count {
        let request = &requests[i % requests.len()];
        let (cpu_start, wall_start) = (thread_cpu_time(), Instant::now());
        let response = runtime.block_on(respond(request, &games, &stream, &config));
        wall.push(wall_start.elapsed().as_secs_f64() * 1e6);
        cpu.push((thread_cpu_time() - cpu_start).as_secs_f64() * 1e6);
        if response.status_code != 200 {
            return Err(format!("request {i} answered {}", response.status_code).into());
        }
        // Handler time only: taking the records out of the stream happens between requests.
        stream.drain();
    }
    println!(
        "rust handler: {count} requests of {} events",
        common::EVENTS_PER_REQUEST
    );
    report("wall clock", wall);
    report("thread CPU", cpu);
    if let Some(path) = dump {
        println!("  requests written to {path}");
    }
    Ok(())
}
