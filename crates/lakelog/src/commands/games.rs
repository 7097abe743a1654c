//! `lakelog games add|list|revoke`: a studio's games, each with its own API key and throttle
//! (an API Gateway key in a usage plan of its own), against the stack's game events API.
//! Credentials, region and endpoint come from the AWS environment.

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use game_api::Game;
use game_api::games::{
    ApiStageRef, GameKey, Throttle, add_game, list_games, retire_key, revoke_game, rotate_game, set_throttle,
};

/// Arguments of `lakelog games`.
#[derive(Debug, Args)]
pub struct GamesArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: GamesCommand,
}

/// The `games` subcommands.
#[derive(Debug, Subcommand)]
pub enum GamesCommand {
    /// Create a game's API key and its usage plan; prints the key (shown once) as JSON.
    Add(AddArgs),
    /// List the games' keys (revoked ones too) as JSON lines.
    List(ListArgs),
    /// Disable every key of a game: its clients get 403 from then on, other games are untouched.
    Revoke(RevokeArgs),
    /// Give a game a second key beside its current one (same throttle and range); prints the new
    /// key (shown once). Both work until `retire` disables the old one: a rotation without an
    /// outage.
    Rotate(RotateArgs),
    /// Disable one key of a game once its clients moved to the key `rotate` gave.
    Retire(RetireArgs),
    /// Change a game's throttle in place: its keys and clients keep working.
    Throttle(ThrottleArgs),
}

/// The API whose games a command acts on: one stack's. Another stack's games, of the same names
/// or not, are never touched.
#[derive(Debug, Args)]
pub struct ApiArgs {
    /// The game events REST API (the stack's output GameEventsApiId).
    #[arg(long, value_name = "ID")]
    pub api_id: String,
    /// The API's stage.
    #[arg(long, default_value = "prod")]
    pub stage: String,
}

impl ApiArgs {
    fn stage_ref(&self) -> ApiStageRef {
        ApiStageRef {
            api_id: self.api_id.clone(),
            stage: self.stage.clone(),
        }
    }
}

/// Arguments of `lakelog games list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// The API.
    #[command(flatten)]
    pub api: ApiArgs,
}

/// Arguments of `lakelog games add`.
#[derive(Debug, Args)]
pub struct AddArgs {
    /// The game's name, stamped into its events as gameId: 1 to 64 of a-z, 0-9, - and _.
    pub game: String,
    /// The API.
    #[command(flatten)]
    pub api: ApiArgs,
    /// Requests per second the game's clients may send together, on average.
    #[arg(long, default_value_t = 100.0)]
    pub rate: f64,
    /// Requests the game's clients may send at once.
    #[arg(long, default_value_t = 200)]
    pub burst: i32,
    /// The least eventParams.amount of one purchase.
    #[arg(long, default_value_t = 0.0)]
    pub min_amount: f64,
    /// The most eventParams.amount of one purchase.
    #[arg(long, default_value_t = 10_000.0)]
    pub max_amount: f64,
}

/// Arguments of `lakelog games revoke`.
#[derive(Debug, Args)]
pub struct RevokeArgs {
    /// The game whose keys are disabled.
    pub game: String,
    /// The API.
    #[command(flatten)]
    pub api: ApiArgs,
}

/// Arguments of `lakelog games rotate`.
#[derive(Debug, Args)]
pub struct RotateArgs {
    /// The game that gets a new key.
    pub game: String,
    /// The API.
    #[command(flatten)]
    pub api: ApiArgs,
}

/// Arguments of `lakelog games retire`.
#[derive(Debug, Args)]
pub struct RetireArgs {
    /// The game.
    pub game: String,
    /// The key to disable (its id, as `list` shows it).
    pub key_id: String,
    /// The API.
    #[command(flatten)]
    pub api: ApiArgs,
}

/// Arguments of `lakelog games throttle`.
#[derive(Debug, Args)]
pub struct ThrottleArgs {
    /// The game.
    pub game: String,
    /// Requests per second the game's clients may send together, on average.
    #[arg(long)]
    pub rate: f64,
    /// Requests the game's clients may send at once.
    #[arg(long)]
    pub burst: i32,
    /// The API.
    #[command(flatten)]
    pub api: ApiArgs,
}

fn print(key: &GameKey) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string(key)?);
    Ok(())
}

/// Runs `lakelog games`.
pub fn run(args: &GamesArgs) -> anyhow::Result<ExitCode> {
    let runtime = super::runtime()?;
    runtime.block_on(async {
        let sdk = aws_config::load_from_env().await;
        let client = aws_sdk_apigateway::Client::new(&sdk);
        match &args.command {
            GamesCommand::Add(add) => {
                anyhow::ensure!(add.rate > 0.0 && add.burst > 0, "--rate and --burst must be positive");
                let game = Game::new(&add.game)?.with_amounts(add.min_amount, add.max_amount)?;
                let throttle = Throttle {
                    rate: add.rate,
                    burst: add.burst,
                };
                let key = add_game(&client, &add.api.stage_ref(), &game, throttle)
                    .await
                    .with_context(|| format!("cannot add the game {}", add.game))?;
                print(&key)?;
                eprintln!(
                    "lakelog games: {} added; give its clients the key above (x-api-key), it is not shown again",
                    key.game
                );
            }
            GamesCommand::List(list) => {
                for key in list_games(&client, &list.api.stage_ref()).await? {
                    print(&key)?;
                }
            }
            GamesCommand::Rotate(rotate) => {
                let key = rotate_game(&client, &rotate.api.stage_ref(), &rotate.game)
                    .await
                    .with_context(|| format!("cannot rotate the key of {}", rotate.game))?;
                print(&key)?;
                eprintln!(
                    "lakelog games: {} has a new key (above, not shown again) beside the old one; once its clients \
                     use it, `lakelog games retire {} OLD_KEY_ID`",
                    key.game, key.game
                );
            }
            GamesCommand::Retire(retire) => {
                let key = retire_key(&client, &retire.api.stage_ref(), &retire.game, &retire.key_id)
                    .await
                    .with_context(|| format!("cannot retire the key {} of {}", retire.key_id, retire.game))?;
                print(&key)?;
            }
            GamesCommand::Throttle(set) => {
                anyhow::ensure!(set.rate > 0.0 && set.burst > 0, "--rate and --burst must be positive");
                let throttle = Throttle {
                    rate: set.rate,
                    burst: set.burst,
                };
                for key in set_throttle(&client, &set.api.stage_ref(), &set.game, throttle)
                    .await
                    .with_context(|| format!("cannot change the throttle of {}", set.game))?
                {
                    print(&key)?;
                }
                eprintln!(
                    "lakelog games: {} may now send {} requests a second, {} at once",
                    set.game, set.rate, set.burst
                );
            }
            GamesCommand::Revoke(revoke) => {
                for key in revoke_game(&client, &revoke.api.stage_ref(), &revoke.game).await? {
                    print(&key)?;
                }
                eprintln!(
                    "lakelog games: {} revoked; API Gateway refuses its key within a minute or so",
                    revoke.game
                );
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}
