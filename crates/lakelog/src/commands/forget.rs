//! `lakelog forget`: a player's right to be forgotten. Removes every row of the given players from
//! `game_events` and `game_events_rejects` and every parked record of theirs, while the pipeline
//! keeps writing, deletes the files that still held them from storage, and writes a receipt.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use game_sink::Parked;
use lake::{Erasure, ErasureReport, Folder, FolderScan, Purge, Retry, StorageConfig, Table};
use serde::Serialize;
use sha2::{Digest, Sha256};

/// Arguments of `lakelog forget`.
#[derive(Debug, Args)]
pub struct ForgetArgs {
    /// The game_events table.
    #[arg(long, value_name = "URI")]
    pub table: String,
    /// The rejects table (default: game_events_rejects beside --table, when it exists).
    #[arg(long, value_name = "URI")]
    pub rejects_table: Option<String>,
    /// The folder of parked records (the stack's output GameEventsParkedUri).
    #[arg(long, value_name = "URI")]
    pub parked: Option<String>,
    /// The game whose players these are (its gameId; rows written before games had ids count too).
    #[arg(long)]
    pub game: String,
    /// The event parameter that holds the player's id.
    #[arg(long, default_value = "device_id", value_name = "PARAMETER")]
    pub id_param: String,
    /// A file of player ids, one per line (blank lines and lines starting with # are skipped).
    #[arg(long, value_name = "FILE")]
    pub players_file: Option<std::path::PathBuf>,
    /// Seconds to leave readers of the older versions before their files are deleted.
    #[arg(long, default_value_t = 60, value_name = "SECONDS")]
    pub reader_grace: u64,
    /// Write the erasure receipt (JSON) here as well as to standard output.
    #[arg(long, value_name = "FILE")]
    pub receipt: Option<std::path::PathBuf>,
    /// Player ids.
    #[arg(value_name = "PLAYER")]
    pub players: Vec<String>,
}

/// What one table's erasure did, for the receipt.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct TableReceipt {
    /// Staged links committed first, so that their rows are erased too.
    staged_links_committed: usize,
    erasure: ErasureReport,
    purge: Purge,
}

/// What the parked records held.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct ParkedReceipt {
    folder: String,
    objects_read: usize,
    objects_rewritten: Vec<String>,
    objects_deleted: Vec<String>,
    records_removed: usize,
}

/// The erasure receipt: what was asked, what was done, and the proof.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Receipt {
    started_at: String,
    finished_at: String,
    game: String,
    id_param: String,
    /// SHA-256 of each id, not the ids: the receipt is kept, the ids are not.
    players_sha256: Vec<String>,
    tables: BTreeMap<String, TableReceipt>,
    parked: Option<ParkedReceipt>,
    /// No Parquet file under any table's folder holds a row of the players, and no parked record
    /// names them.
    verified: bool,
    /// What lakelog cannot erase itself (docs/privacy.md).
    not_covered: Vec<&'static str>,
}

/// Runs `lakelog forget`.
pub fn run(args: &ForgetArgs) -> anyhow::Result<ExitCode> {
    let runtime = super::runtime()?;
    runtime.block_on(forget(args))
}

fn players(args: &ForgetArgs) -> anyhow::Result<Vec<String>> {
    let mut players = args.players.clone();
    if let Some(path) = &args.players_file {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        players.extend(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(str::to_owned),
        );
    }
    players.retain(|p| !p.is_empty());
    players.sort();
    players.dedup();
    if players.is_empty() {
        bail!("no player ids: give them as arguments or with --players-file");
    }
    Ok(players)
}

/// Commits what the writers staged, then erases and purges `erasure`'s rows of `table`.
async fn forget_in(
    uri: &str,
    storage: &StorageConfig,
    erasure: &Erasure,
    grace: Duration,
) -> anyhow::Result<TableReceipt> {
    let mut table = Table::open(uri, storage)
        .await
        .with_context(|| format!("cannot open the table {uri}"))?;
    let retry = Retry::default();
    let mut staged_links_committed = 0;
    // The running committer may commit the same links first: its commit moves the streams, and
    // ours then stops at its guard and looks again.
    let mut conflicts = 0;
    loop {
        match table.commit_staged(lake::staging::MAX_LINKS_PER_COMMIT, &retry).await {
            Ok(committed) => {
                staged_links_committed += committed.links;
                if committed.left == 0 {
                    break;
                }
            }
            Err(lake::LakeError::Conflict { .. }) if conflicts < 10 => conflicts += 1,
            Err(e) => return Err(e).with_context(|| format!("{uri}: cannot commit the staged links")),
        }
    }
    let erasure_report = table.erase(erasure, &retry).await?;
    if !grace.is_zero() {
        eprintln!(
            "lakelog forget: {uri}: {} rows removed in version {:?}; purging in {} s",
            erasure_report.rows_removed,
            erasure_report.version,
            grace.as_secs()
        );
        tokio::time::sleep(grace).await;
    }
    let purge = table.purge(erasure).await?;
    Ok(TableReceipt {
        staged_links_committed,
        erasure: erasure_report,
        purge,
    })
}

/// Removes the records of `erasure`'s players from every object of parked records.
async fn forget_parked(folder: &Folder, erasure: &Erasure) -> anyhow::Result<ParkedReceipt> {
    let mut receipt = ParkedReceipt {
        folder: folder.uri().to_owned(),
        ..ParkedReceipt::default()
    };
    for name in folder.list().await? {
        let bytes = folder.get(&name).await?;
        receipt.objects_read += 1;
        let mut parked: Parked = serde_json::from_slice(&bytes)
            .with_context(|| format!("{}: not an object of parked records", folder.object_uri(&name)))?;
        let before = parked.records.len();
        parked.records.retain(|r| !names(erasure, &r.kinesis));
        let removed = before - parked.records.len();
        if removed == 0 {
            continue;
        }
        receipt.records_removed += removed;
        if parked.records.is_empty() {
            folder.delete(&name).await?;
            receipt.objects_deleted.push(folder.object_uri(&name));
        } else {
            folder.put(&name, serde_json::to_vec(&parked)?).await?;
            receipt.objects_rewritten.push(folder.object_uri(&name));
        }
    }
    Ok(receipt)
}

/// Whether a Kinesis record is of `erasure`'s players: its data names one, or its partition key
/// is one.
fn names(erasure: &Erasure, record: &aws_lambda_events::event::kinesis::KinesisRecord) -> bool {
    erasure.mentioned_in(&record.data) || erasure.ids().contains(record.partition_key.as_str())
}

fn clean(scan: &FolderScan) -> bool {
    scan.holding.is_empty()
}

async fn forget(args: &ForgetArgs) -> anyhow::Result<ExitCode> {
    let started_at = chrono::Utc::now();
    let players = players(args)?;
    if args.id_param.is_empty() || args.id_param.contains('.') {
        bail!(
            "--id-param {:?}: expected the name of one event parameter",
            args.id_param
        );
    }
    let storage = StorageConfig::from_env();
    let grace = Duration::from_secs(args.reader_grace);
    let events = Erasure::new(players.iter().cloned())
        .equals(format!("{}.{}", game_events::EVENT_PARAMS, args.id_param))
        .mentions(game_events::batch::EXTRA_PARAMS)
        .within(game_events::GAME_ID, args.game.clone());
    let rejects = Erasure::new(players.iter().cloned())
        .equals("partitionKey")
        .mentions("data");
    let mut tables = BTreeMap::new();
    tables.insert(
        args.table.clone(),
        forget_in(&args.table, &storage, &events, grace).await?,
    );
    let rejects_uri = match &args.rejects_table {
        Some(uri) => Some(uri.clone()),
        None => {
            let beside = game_sink::Config::new(&args.table, None)?.rejects_table;
            Table::open(&beside, &storage).await.is_ok().then_some(beside)
        }
    };
    if let Some(uri) = rejects_uri {
        tables.insert(uri.clone(), forget_in(&uri, &storage, &rejects, Duration::ZERO).await?);
    }
    let parked = match &args.parked {
        Some(uri) => Some(forget_parked(&Folder::open(uri, &storage)?, &rejects).await?),
        None => None,
    };
    let mut verified = tables.values().all(|t| clean(&t.purge.after));
    if let Some(uri) = &args.parked {
        let folder = Folder::open(uri, &storage)?;
        for name in folder.list().await? {
            let parked: Parked = serde_json::from_slice(&folder.get(&name).await?)
                .with_context(|| format!("{}: not an object of parked records", folder.object_uri(&name)))?;
            if parked.records.iter().any(|r| names(&rejects, &r.kinesis)) {
                verified = false;
            }
        }
    }
    let receipt = Receipt {
        started_at: started_at.to_rfc3339(),
        finished_at: chrono::Utc::now().to_rfc3339(),
        game: args.game.clone(),
        id_param: args.id_param.clone(),
        players_sha256: players
            .iter()
            .map(|p| {
                Sha256::digest(p.as_bytes())
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect()
            })
            .collect(),
        tables,
        parked,
        verified,
        not_covered: vec![
            "records still in the Kinesis stream, until its retention (GameEventsRetentionHours) ends",
            "the functions' CloudWatch logs, until their retention ends",
            "copies outside the tables' folders (exports, Athena query results)",
        ],
    };
    let json = serde_json::to_string_pretty(&receipt)?;
    if let Some(path) = &args.receipt {
        std::fs::write(path, &json).with_context(|| format!("cannot write the receipt to {}", path.display()))?;
    }
    println!("{json}");
    for (uri, table) in &receipt.tables {
        eprintln!(
            "lakelog forget: {uri}: {} rows removed from {} of {} files; {} files purged; {} files still hold them",
            table.erasure.rows_removed,
            table.erasure.files.len(),
            table.erasure.files_scanned,
            table.purge.deleted.len(),
            table.purge.after.holding.len()
        );
        for (file, why) in &table.purge.kept {
            eprintln!("lakelog forget: {uri}: kept {file}: {why}");
        }
    }
    Ok(if receipt.verified {
        ExitCode::SUCCESS
    } else {
        eprintln!("lakelog forget: not verified: files above still hold the players; run it again");
        ExitCode::FAILURE
    })
}
