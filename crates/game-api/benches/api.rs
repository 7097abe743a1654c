//! Throughput of the handler on 100-event requests, with Kinesis replaced by the in-memory
//! `LocalStream`: parse, validate, stamp, build the seed's envelope per event, and the sink's
//! `PutRecords`. See BENCHMARKS.md; per-request latency percentiles come from
//! `examples/latency.rs`.
//!
//! Run with `cargo bench -p game-api --bench api`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use chrono::Utc;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use game_api::{ApiConfig, LocalStream, prepare, respond};

mod common;

// The allocator of the Lambda (`src/main.rs`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn handler(c: &mut Criterion) {
    let requests = common::requests(64);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime");
    let stream = LocalStream::with_capacity("bench", usize::MAX);
    let config = ApiConfig::default();
    let games = common::games();
    let mut group = c.benchmark_group("api_100_events");
    group.throughput(Throughput::Elements(common::EVENTS_PER_REQUEST as u64));
    group.measurement_time(Duration::from_secs(10));
    let mut i = 0;
    group.bench_function("respond_local_stream", |b| {
        // Only the handler is timed: taking the records out of the stream (what a consumer does)
        // happens between requests.
        b.iter_custom(|iters| {
            let mut handler = Duration::ZERO;
            for _ in 0..iters {
                let request = &requests[i % requests.len()];
                i += 1;
                let started = Instant::now();
                let response = runtime.block_on(respond(request, &games, &stream, &config));
                handler += started.elapsed();
                assert_eq!(response.status_code, 200);
                black_box(stream.drain());
            }
            handler
        })
    });
    let game = game_api::Game::new("lakelog-legends").expect("a game name");
    group.bench_function("prepare_only", |b| {
        b.iter(|| {
            let request = &requests[i % requests.len()];
            i += 1;
            black_box(prepare(request, &game, &config, Utc::now()).expect("valid"))
        })
    });
    group.finish();
}

criterion_group!(benches, handler);
criterion_main!(benches);
