//! `lakelog replay`: brings the records the game sink parked (when its tables could not take them
//! before the stream would drop them) into the tables, each object exactly once.

use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use game_sink::{Replayed, Sink};
use lake::{Folder, Retry, StorageConfig};

/// Arguments of `lakelog replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The folder of parked records (the stack's output GameEventsParkedUri).
    #[arg(long, value_name = "URI")]
    pub parked: String,
    /// The game_events table (its rejects table is beside it unless --rejects-table says).
    #[arg(long, value_name = "URI")]
    pub table: String,
    /// The rejects table.
    #[arg(long, value_name = "URI")]
    pub rejects_table: Option<String>,
    /// Add the columns of this release that the tables lack. Without it, tables of an older
    /// release are refused: their schema is the deployed functions' to change.
    #[arg(long)]
    pub evolve_schema: bool,
}

/// Runs `lakelog replay`.
pub fn run(args: &ReplayArgs) -> anyhow::Result<ExitCode> {
    let runtime = super::runtime()?;
    runtime.block_on(async {
        let storage = StorageConfig::from_env();
        let config =
            game_sink::Config::new(&args.table, args.rejects_table.as_deref())?.with_schema_changes(args.evolve_schema);
        let sink = Sink::open(&config, &storage)
            .await
            .with_context(|| format!("cannot open the table {}", args.table))?;
        let folder = Folder::open(&args.parked, &storage)?;
        let names = folder.list().await?;
        let (mut rows, mut replayed, mut already, mut failed) = (0u64, 0, 0, 0);
        for name in &names {
            match sink.replay(&folder, name, &Retry::default()).await {
                Ok(Replayed::Committed(n)) => {
                    rows += n;
                    replayed += 1;
                    eprintln!("lakelog replay: {}: {n} rows", folder.object_uri(name));
                }
                Ok(Replayed::AlreadyIn) => already += 1,
                Err(e) => {
                    failed += 1;
                    eprintln!("lakelog replay: {e}");
                }
            }
        }
        println!(
            "{} objects of parked records: {replayed} replayed ({rows} rows), {already} already in, {failed} failed",
            names.len()
        );
        Ok(if failed == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        })
    })
}
