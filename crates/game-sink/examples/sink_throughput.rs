//! Sink throughput: generated game events, as decoded Kinesis records, through
//! [`game_sink::Sink::process`] into a local `game_events` table, one commit per batch.
//!
//! ```text
//! cargo run --profile local -p game-sink-lambda --example sink_throughput -- DIR [EVENTS] [BATCH] [DAYS]
//! ```
//!
//! Writes EVENTS events (default 1,000,000) in batches of BATCH records (default 10,000, the most
//! a Kinesis event source hands one invocation) spread evenly over DAYS days (default 7) into
//! `DIR/game_events`, and prints records/s of `process` alone (generating the records is not
//! timed). The table it leaves is the one the KPI benchmark queries.

use std::time::{Duration, Instant};

use aws_lambda_events::encodings::SecondTimestamp;
use aws_lambda_events::event::kinesis::{KinesisEventRecord, KinesisRecord};
use chrono::{TimeZone, Utc};
use fixtures::game::{Synth, SynthConfig};
use game_events::Envelope;
use game_sink::{Config, Sink};
use lake::StorageConfig;

fn arg(n: usize, default: u64) -> Result<u64, String> {
    match std::env::args().nth(n) {
        None => Ok(default),
        Some(text) => text.parse().map_err(|e| format!("argument {n} ({text:?}): {e}")),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args()
        .nth(1)
        .ok_or("usage: sink_throughput DIR [EVENTS] [BATCH] [DAYS]")?;
    let events = arg(2, 1_000_000)?;
    let batch = arg(3, 10_000)?.max(1);
    let days = arg(4, 7)?.max(1);
    let table = format!("{}/game_events", dir.trim_end_matches('/'));
    let sink = Sink::open(&Config::new(&table, None)?, &StorageConfig::default()).await?;

    let mut synth = Synth::new(SynthConfig {
        devices: 50_000,
        ..SynthConfig::default()
    });
    let request = serde_json::json!({"httpMethod": "POST", "path": "/events", "resource": "/events"});
    let envelope = Envelope::new(request.as_object().cloned().unwrap_or_default());
    let start = Utc.with_ymd_and_hms(2024, 6, 1, 0, 0, 0).single().ok_or("start time")?;
    let step_ms = (days * 86_400_000) as f64 / events as f64;

    let mut written = 0u64;
    let mut processing = Duration::ZERO;
    let mut sequence = 0u64;
    while written < events {
        let n = batch.min(events - written);
        let mut records = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let time = start + chrono::Duration::milliseconds((sequence as f64 * step_ms) as i64);
            let stamped = synth.event(time).stamp(time);
            let mut kinesis = KinesisRecord::default();
            *kinesis.data = envelope.record(&stamped)?;
            kinesis.approximate_arrival_timestamp = SecondTimestamp(time);
            kinesis.partition_key = "pk".to_owned();
            kinesis.sequence_number = format!("{:056}", sequence);
            let mut record = KinesisEventRecord::default();
            record.event_id = Some(format!("shardId-000000000000:{}", kinesis.sequence_number));
            record.kinesis = kinesis;
            records.push(record);
            sequence += 1;
        }
        let started = Instant::now();
        let report = sink.process(&records, &lake::Retry::default()).await;
        processing += started.elapsed();
        if let Some(seq) = report.retry_from {
            return Err(format!("batch not committed from record {seq}").into());
        }
        written += n;
    }
    let seconds = processing.as_secs_f64();
    println!(
        "{written} records in {} commits: {seconds:.2} s in the sink, {:.0} records/s",
        written.div_ceil(batch),
        written as f64 / seconds
    );
    Ok(())
}
