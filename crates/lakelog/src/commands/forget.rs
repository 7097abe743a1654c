//! `lakelog forget`: a player's right to be forgotten. Removes every row of the given players from
//! `game_events` and `game_events_rejects` and every parked record of theirs, while the pipeline
//! keeps writing, deletes the files that still held them from storage, and writes a receipt
//! ([`game_sink::erasure`]).

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use game_sink::erasure::{ErasureRequest, ErasureTargets, forget};
use lake::StorageConfig;

/// Arguments of `lakelog forget`.
#[derive(Debug, Args)]
pub struct ForgetArgs {
    /// The game_events table.
    #[arg(long, value_name = "URI")]
    pub table: String,
    /// The rejects table (default: beside --table, its name with _rejects).
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
    /// The games file of `lakelog serve` (with each game's pseudonymisation and key): a game that
    /// pseudonymises --id-param has its players' pseudonyms erased, and ids as given too.
    #[arg(long, value_name = "FILE")]
    pub games: Option<std::path::PathBuf>,
    /// The game events API of a deployed stack (its output GameEventsApiId): a game that
    /// pseudonymises has its key read from Parameter Store, and its players' pseudonyms in
    /// --id-param are erased, and the ids as given too.
    #[arg(long, value_name = "ID", conflicts_with_all = ["stack", "games"])]
    pub api_id: Option<String>,
    /// The API's stage, with --api-id.
    #[arg(long, default_value = "prod", value_name = "STAGE")]
    pub api_stage: String,
    /// The deployed stack whose API's games these are (its outputs GameEventsApiId and
    /// GameEventsApiStage), as --api-id.
    #[arg(long, value_name = "NAME", conflicts_with = "games")]
    pub stack: Option<String>,
    /// Player ids.
    #[arg(value_name = "PLAYER")]
    pub players: Vec<String>,
}

/// Runs `lakelog forget`.
pub fn run(args: &ForgetArgs) -> anyhow::Result<ExitCode> {
    let runtime = super::runtime()?;
    runtime.block_on(run_async(args))
}

async fn run_async(args: &ForgetArgs) -> anyhow::Result<ExitCode> {
    let mut players = args.players.clone();
    if let Some(path) = &args.players_file {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        players.extend(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.starts_with('#'))
                .map(str::to_owned),
        );
    }
    let mut request = ErasureRequest::new("the command line", args.game.clone(), players, args.id_param.clone())?;
    if let Some(path) = &args.games {
        let games = game_api::Games::from_keys_file(path)?;
        let game = games
            .game(&args.game)
            .with_context(|| format!("{}: no game {}", path.display(), args.game))?;
        if let Some(pseudonym) = &game.pseudonym {
            request = request.with_pseudonyms(pseudonym.params(), |id| pseudonym.of(id));
        }
    }
    if args.api_id.is_some() || args.stack.is_some() {
        let api = super::games::ApiArgs {
            api_id: args.api_id.clone(),
            stage: args.api_stage.clone(),
            stack: args.stack.clone(),
        };
        let sdk = aws_config::load_from_env().await;
        let stage = api.stage_ref(&sdk).await?;
        let ssm = aws_sdk_ssm::Client::new(&sdk);
        if let Some(key) = game_api::pseudonym_key(&ssm, &stage, &args.game).await? {
            let pseudonym = game_api::Pseudonym::new(&args.id_param, key)?;
            request = request.with_pseudonyms(pseudonym.params(), |id| pseudonym.of(id));
        }
    }
    let storage = StorageConfig::from_env();
    let tables = game_sink::Config::new(&args.table, args.rejects_table.as_deref())?;
    let targets = ErasureTargets::of(tables, args.parked.clone());
    let receipt = forget(&targets, &storage, &request, Duration::from_secs(args.reader_grace)).await?;
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
