//! `lakelog games`: a studio's games, each with its own API keys and settings (an API Gateway
//! usage plan of its own), on one stack's game events API. Credentials, region and endpoint come
//! from the AWS environment.

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use game_api::ApiStageRef;
use game_api::admin::{
    Changes, GameKey, Quota, QuotaPeriod, Throttle, add_game, list_games, pseudonymise_game, retire_key, revoke_game,
    rotate_game, set_game, take_over,
};
use game_api::code::{GamesFile, apply_games, export_games};
use game_api::{Game, Lane};

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
    /// Disable every key of a game and delete its usage plan: its clients get 403 from then on,
    /// other games are untouched.
    Revoke(RevokeArgs),
    /// Give a game a second key beside its current one (same throttle and range); prints the new
    /// key (shown once). Both work until `retire` disables the old one: a rotation without an
    /// outage.
    Rotate(RotateArgs),
    /// Disable one key of a game once its clients moved to the key `rotate` gave.
    Retire(RetireArgs),
    /// Change a game's throttle, quota or amount range in place: its keys and clients keep working.
    Set(SetArgs),
    /// Write the stage's games as a file (JSON) that `apply` brings a stage to; each key's value
    /// (and pseudonym key) goes to a SecureString parameter under --keys-to, which the file names.
    Export(ExportArgs),
    /// Bring a stage to a games file, idempotently: games, settings and keys of the values the
    /// file's parameters hold (shipped clients keep working on a new stack); revokes nothing.
    Apply(ApplyArgs),
}

/// Arguments of `lakelog games export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The Parameter Store path under which each key's value is written (/PREFIX/GAME/KEY_ID).
    #[arg(long, value_name = "/PREFIX")]
    pub keys_to: String,
    /// Write the file here instead of to standard output.
    #[arg(long, value_name = "FILE")]
    pub out: Option<std::path::PathBuf>,
    /// The API.
    #[command(flatten)]
    pub api: ApiArgs,
}

/// Arguments of `lakelog games apply`.
#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// The games file (as `export` writes it).
    pub file: std::path::PathBuf,
    /// The API.
    #[command(flatten)]
    pub api: ApiArgs,
}

/// The API whose games a command acts on: one stack's. Another stack's games, of the same names
/// or not, are never touched.
#[derive(Debug, Args)]
pub struct ApiArgs {
    /// The game events REST API (the stack's output GameEventsApiId).
    #[arg(long, value_name = "ID", required_unless_present = "stack", conflicts_with = "stack")]
    pub api_id: Option<String>,
    /// The API's stage.
    #[arg(long, default_value = "prod", conflicts_with = "stack")]
    pub stage: String,
    /// The stack whose API it is: its outputs GameEventsApiId and GameEventsApiStage.
    #[arg(long, value_name = "NAME")]
    pub stack: Option<String>,
}

impl ApiArgs {
    /// The API stage, read from the stack's outputs when `--stack` names one.
    pub(crate) async fn stage_ref(&self, sdk: &aws_config::SdkConfig) -> anyhow::Result<ApiStageRef> {
        let Some(stack) = &self.stack else {
            return Ok(ApiStageRef {
                api_id: self.api_id.clone().unwrap_or_default(),
                stage: self.stage.clone(),
            });
        };
        let outputs = super::stack_outputs(sdk, stack).await?;
        let output = |key: &str| outputs.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
        let api_id = output("GameEventsApiId").with_context(|| {
            format!("the stack {stack} has no output GameEventsApiId: is it a lakelog stack with the game pipeline?")
        })?;
        Ok(ApiStageRef {
            api_id,
            stage: output("GameEventsApiStage").unwrap_or_else(|| self.stage.clone()),
        })
    }
}

/// A game's quota, as `add` and `set` take it.
#[derive(Debug, Args)]
pub struct QuotaArgs {
    /// Requests the game's clients may send per --quota-period, all together (none by default).
    #[arg(long, value_name = "REQUESTS")]
    pub quota: Option<i32>,
    /// The period of --quota: day, week or month.
    #[arg(long, default_value = "day", value_name = "PERIOD")]
    pub quota_period: QuotaPeriod,
}

impl QuotaArgs {
    /// The quota asked for (its bounds are checked where it is set, by `add_game` and `set_game`).
    fn quota(&self) -> Option<Quota> {
        self.quota.map(|limit| Quota {
            limit,
            period: self.quota_period,
        })
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
    /// The quota.
    #[command(flatten)]
    pub quota: QuotaArgs,
    /// The game's lane of the stream, K/N: the Kth of N equal parts of its shards' hash keys
    /// (docs/games.md). Default: the lane fewest of the stage's games have (of 4 when none has one).
    #[arg(long, value_name = "K/N")]
    pub lane: Option<Lane>,
    /// Replace these event parameters (device_id,player_id) by a keyed hash before the records
    /// are written (as `set --pseudonymise`); needed, or --no-pseudonymise, to add again a game
    /// that pseudonymised before (its key is kept in Parameter Store).
    #[arg(long, value_name = "PARAM[,PARAM...]")]
    pub pseudonymise: Option<String>,
    /// Add again a game that pseudonymised before, writing its ids as sent.
    #[arg(long, conflicts_with = "pseudonymise")]
    pub no_pseudonymise: bool,
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

/// Arguments of `lakelog games set`.
#[derive(Debug, Args)]
pub struct SetArgs {
    /// The game.
    pub game: String,
    /// Requests per second the game's clients may send together, on average.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Requests the game's clients may send at once.
    #[arg(long)]
    pub burst: Option<i32>,
    /// The quota.
    #[command(flatten)]
    pub quota: QuotaArgs,
    /// Take the game's quota away.
    #[arg(long, conflicts_with = "quota")]
    pub no_quota: bool,
    /// The least eventParams.amount of one purchase.
    #[arg(long)]
    pub min_amount: Option<f64>,
    /// The most eventParams.amount of one purchase.
    #[arg(long)]
    pub max_amount: Option<f64>,
    /// The game's lane of the stream, K/N (0/1: the whole stream).
    #[arg(long, value_name = "K/N")]
    pub lane: Option<Lane>,
    /// Replace these event parameters (device_id,player_id) by a keyed hash before the records
    /// are written; the game's key is made in Parameter Store when it has none.
    #[arg(long, value_name = "PARAM[,PARAM...]")]
    pub pseudonymise: Option<String>,
    /// Write the parameters as sent again (the key stays: delete it to make the pseudonyms
    /// unlinkable).
    #[arg(long, conflicts_with = "pseudonymise")]
    pub no_pseudonymise: bool,
    /// With --pseudonymise: return at once instead of waiting (five and a half minutes) until
    /// every instance of the API function pseudonymises; events it accepts until then may keep
    /// their raw ids.
    #[arg(long, requires = "pseudonymise")]
    pub no_wait: bool,
    /// The API.
    #[command(flatten)]
    pub api: ApiArgs,
}

/// Refuses to change `game` on `stage` while the stack that made it (its `FirstGameId`) still
/// declares it, since the stack's next update would undo the change; takes it over once the stack
/// does not (the parameter emptied or changed, or the stack deleted: its key and plan stay).
async fn ensure_not_stack_owned(
    sdk: &aws_config::SdkConfig,
    client: &aws_sdk_apigateway::Client,
    stage: &ApiStageRef,
    game: &str,
) -> anyhow::Result<()> {
    ensure_not_probe(game)?;
    let keys = list_games(client, stage).await?;
    let Some(stack) = keys
        .iter()
        .find(|k| k.game == game && k.enabled)
        .and_then(|k| k.owned_by_stack.clone())
    else {
        return Ok(());
    };
    let described = aws_sdk_cloudformation::Client::new(sdk)
        .describe_stacks()
        .stack_name(&stack)
        .send()
        .await;
    let declares = match described {
        Ok(described) => described.stacks().iter().any(|s| {
            s.parameters()
                .iter()
                .any(|p| p.parameter_key() == Some("FirstGameId") && p.parameter_value() == Some(game))
        }),
        Err(e)
            if e.as_service_error()
                .and_then(|e| e.meta().message())
                .is_some_and(|m| m.contains("does not exist")) =>
        {
            false
        }
        Err(e) => anyhow::bail!(
            "cannot tell whether the stack {stack} still declares {game}: {}",
            aws_sdk_cloudformation::error::DisplayErrorContext(e)
        ),
    };
    anyhow::ensure!(
        !declares,
        "{game} is the first game of the stack {stack} (FirstGameId), whose next update would undo a change made here: \
         change it with the stack's parameters (FirstGameMaxAmount, GameEventsApiRateLimit, GameEventsApiBurstLimit), \
         or deploy the stack with FirstGameId='' to hand it to lakelog games (its key and plan stay)"
    );
    take_over(client, stage, game).await?;
    eprintln!(
        "lakelog games: {game} was the first game of the stack {stack}, which no longer declares it: lakelog games manages it from now on"
    );
    Ok(())
}

/// Refuses the reserved game of the stack's canary, which the stack alone makes and changes.
fn ensure_not_probe(game: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        game != game_events::PROBE_GAME,
        "{game} is reserved for the stack's canary and lakelog check: the stack makes and changes it (CanarySchedule)"
    );
    Ok(())
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
                ensure_not_probe(&add.game)?;
                let game = Game::new(&add.game)?
                    .with_amounts(add.min_amount, add.max_amount)?
                    .with_lane(add.lane);
                let throttle = Throttle {
                    rate: add.rate,
                    burst: add.burst,
                };
                let stage = add.api.stage_ref(&sdk).await?;
                let ssm = aws_sdk_ssm::Client::new(&sdk);
                // A game added again after it was revoked: its pseudonym key outlived its plan.
                if game_api::pseudonym_key(&ssm, &stage, &add.game).await?.is_some()
                    && add.pseudonymise.is_none()
                    && !add.no_pseudonymise
                {
                    anyhow::bail!(
                        "{} pseudonymised its ids before (its key is the parameter {}): add it with --pseudonymise \
                         PARAM[,PARAM...] to go on, or --no-pseudonymise to write them as sent",
                        add.game,
                        game_api::pseudonym_key_name(&stage, &add.game)
                    );
                }
                let key = add_game(&client, &stage, &game, throttle, add.quota.quota())
                    .await
                    .with_context(|| format!("cannot add the game {}", add.game))?;
                if let Some(params) = &add.pseudonymise {
                    pseudonymise_game(&client, &ssm, &stage, &add.game, Some(params))
                        .await
                        .with_context(|| format!("{} added, but its pseudonymisation failed: run lakelog games set", add.game))?;
                }
                print(&key)?;
                eprintln!(
                    "lakelog games: {} added in lane {} of the stream; give its clients the key above (x-api-key), it \
                     is not shown again",
                    key.game,
                    key.lane.as_deref().unwrap_or("(all)")
                );
                for other in list_games(&client, &stage).await? {
                    if other.enabled && other.lane.is_none() && other.game != key.game {
                        eprintln!(
                            "lakelog games: {} has no lane: it shares every shard, {}'s too; give it one: lakelog games \
                             set {} --lane K/N",
                            other.game, key.game, other.game
                        );
                    }
                }
            }
            GamesCommand::List(list) => {
                for key in list_games(&client, &list.api.stage_ref(&sdk).await?).await? {
                    print(&key)?;
                }
            }
            GamesCommand::Rotate(rotate) => {
                let stage = rotate.api.stage_ref(&sdk).await?;
                ensure_not_stack_owned(&sdk, &client, &stage, &rotate.game).await?;
                let key = rotate_game(&client, &stage, &rotate.game)
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
                let stage = retire.api.stage_ref(&sdk).await?;
                ensure_not_stack_owned(&sdk, &client, &stage, &retire.game).await?;
                let key = retire_key(&client, &stage, &retire.game, &retire.key_id)
                    .await
                    .with_context(|| format!("cannot retire the key {} of {}", retire.key_id, retire.game))?;
                print(&key)?;
            }
            GamesCommand::Export(export) => {
                let stage = export.api.stage_ref(&sdk).await?;
                let ssm = aws_sdk_ssm::Client::new(&sdk);
                let file = export_games(&client, &ssm, &stage, &export.keys_to)
                    .await
                    .context("cannot export the games")?;
                let text = serde_json::to_string_pretty(&file)? + "\n";
                match &export.out {
                    Some(path) => std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?,
                    None => print!("{text}"),
                }
                eprintln!(
                    "lakelog games: {} games exported; their keys are SecureString parameters under {} (keep them,                      with the file, where a new stack's account can read them)",
                    file.games.len(),
                    export.keys_to
                );
            }
            GamesCommand::Apply(apply) => {
                let path = apply.file.display();
                let text = std::fs::read_to_string(&apply.file).with_context(|| format!("cannot read {path}"))?;
                let file: GamesFile =
                    serde_json::from_str(&text).with_context(|| format!("{path} is not a games file"))?;
                let stage = apply.api.stage_ref(&sdk).await?;
                for game in &file.games {
                    ensure_not_stack_owned(&sdk, &client, &stage, &game.game).await?;
                }
                let ssm = aws_sdk_ssm::Client::new(&sdk);
                let applying = apply_games(&client, &ssm, &stage, &file)
                    .await
                    .with_context(|| format!("cannot apply {path}"))?;
                for applied in &applying.games {
                    println!("{}", serde_json::to_string(applied)?);
                    if !applied.keys_not_in_file.is_empty() {
                        eprintln!(
                            "lakelog games: {} has keys the file does not name, left enabled: {} (lakelog games retire)",
                            applied.game,
                            applied.keys_not_in_file.join(", ")
                        );
                    }
                }
                for game in &applying.games_not_in_file {
                    eprintln!("lakelog games: {game} is on the stage and not in the file, left as it is (lakelog games revoke)");
                }
            }
            GamesCommand::Set(set) => {
                let changes = Changes {
                    rate: set.rate,
                    burst: set.burst,
                    quota: if set.no_quota {
                        Some(None)
                    } else {
                        set.quota.quota().map(Some)
                    },
                    min_amount: set.min_amount,
                    max_amount: set.max_amount,
                    lane: set.lane,
                };
                let pseudonymise = set.pseudonymise.is_some() || set.no_pseudonymise;
                anyhow::ensure!(
                    changes != Changes::default() || pseudonymise,
                    "nothing to change: give --rate, --burst, --quota, --no-quota, --min-amount, --max-amount, --lane, \
                     --pseudonymise or --no-pseudonymise"
                );
                let stage = set.api.stage_ref(&sdk).await?;
                ensure_not_stack_owned(&sdk, &client, &stage, &set.game).await?;
                if pseudonymise {
                    let ssm = aws_sdk_ssm::Client::new(&sdk);
                    pseudonymise_game(&client, &ssm, &stage, &set.game, set.pseudonymise.as_deref())
                        .await
                        .with_context(|| format!("cannot change the pseudonymisation of {}", set.game))?;
                    if set.pseudonymise.is_some() {
                        eprintln!(
                            "lakelog games: {}'s key is the SecureString parameter {}; deleting it makes the game's \
                             pseudonyms unlinkable (and its requests refused while pseudonymisation is on)",
                            set.game,
                            game_api::pseudonym_key_name(&stage, &set.game)
                        );
                    }
                }
                if changes != Changes::default() {
                    for key in set_game(&client, &stage, &set.game, changes)
                        .await
                        .with_context(|| format!("cannot change the settings of {}", set.game))?
                    {
                        print(&key)?;
                    }
                }
                eprintln!(
                    "lakelog games: {} changed; API Gateway applies a throttle or quota at once, the function reads a lane or \
                     an amount range within {} minutes",
                    set.game,
                    game_api::KEY_CACHE_TTL.as_secs() / 60
                );
                if let Some(params) = set.pseudonymise.as_ref().filter(|_| !set.no_wait) {
                    // The function's instances read the change within SETTING_SETTLES: until
                    // then an instance may still write the ids as sent.
                    eprintln!(
                        "lakelog games: waiting {} s until every instance of the API function pseudonymises {params} \
                         of {} (events accepted until then may keep their raw ids: `lakelog forget` erases those by \
                         id too)",
                        game_api::SETTING_SETTLES.as_secs(),
                        set.game
                    );
                    tokio::time::sleep(game_api::SETTING_SETTLES).await;
                    eprintln!(
                        "lakelog games: every event of {} accepted from now on has {params} pseudonymised",
                        set.game
                    );
                }
            }
            GamesCommand::Revoke(revoke) => {
                let stage = revoke.api.stage_ref(&sdk).await?;
                ensure_not_stack_owned(&sdk, &client, &stage, &revoke.game).await?;
                for key in revoke_game(&client, &stage, &revoke.game).await? {
                    print(&key)?;
                }
                eprintln!(
                    "lakelog games: {} revoked and its usage plan deleted; API Gateway refuses its keys within a minute or so",
                    revoke.game
                );
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}
