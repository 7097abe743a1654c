//! Builds a `game_events` table the way a busy stream leaves it: many small commits, with some
//! events sent again (retries), over a few closed days. For measuring queries before and after
//! `lakelog optimize` (see BENCHMARKS.md).
//!
//! ```sh
//! cargo run -p maintenance-lambda --example small_commits -- TABLE [COMMITS] [EVENTS_PER_COMMIT] [DAYS]
//! ```

use std::process::ExitCode;

use chrono::{Duration, TimeZone, Utc};
use fixtures::game::{Synth, SynthConfig};
use game_events::batch::{GameEventsBatchBuilder, Lineage, game_events_schema};
use lake::{StorageConfig, Table, TableSpec};

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(table) = args.first() else {
        eprintln!("usage: small_commits TABLE [COMMITS] [EVENTS_PER_COMMIT] [DAYS]");
        return ExitCode::FAILURE;
    };
    let number = |i: usize, default: u64| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    let (commits, per_commit, days) = (number(1, 2000), number(2, 50), number(3, 3).max(1));
    match build(table, commits, per_commit, days).await {
        Ok(rows) => {
            println!("{table}: {commits} commits, {rows} rows");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("small_commits: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn build(uri: &str, commits: u64, per_commit: u64, days: u64) -> Result<u64, Box<dyn std::error::Error>> {
    let spec = TableSpec::new("game_events", game_events_schema(), &["eventDate"]);
    let storage = StorageConfig::from_env();
    let mut table = Table::open_or_create(uri, &spec, &storage).await?;
    let mut synth = Synth::new(SynthConfig::default());
    let start = Utc.with_ymd_and_hms(2024, 6, 1, 0, 0, 0).single().ok_or("start time")?;
    let span = Duration::days(days as i64);
    let mut rows = 0;
    let mut previous = Vec::new();
    for commit in 0..commits {
        // Server time advances evenly over the days.
        let at = start + span * commit as i32 / commits as i32;
        let mut events: Vec<_> = synth
            .events(per_commit as usize, at)
            .into_iter()
            .map(|e| e.stamp(at))
            .collect();
        // Every tenth batch is partly sent again, as Kinesis retries do.
        if commit % 10 == 9 {
            events.extend(previous.iter().take(per_commit as usize / 5).cloned());
        }
        let mut builder = GameEventsBatchBuilder::with_capacity(events.len());
        let sequence = commit.to_string();
        for event in &events {
            let lineage = Lineage {
                shard_id: "shardId-000000000000",
                sequence_number: &sequence,
                arrival: Some(at),
            };
            builder.append(event, lineage, at.timestamp_micros());
        }
        let batch = builder.finish()?;
        rows += batch.num_rows() as u64;
        let mut writer = table.writer(&format!("batch-{commit}"))?;
        writer.write(batch).await?;
        table
            .commit_appends(vec![writer.finish().await?], &lake::Retry::default())
            .await?;
        previous = events;
    }
    Ok(rows)
}
