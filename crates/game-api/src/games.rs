//! Games: a studio's games are first-class names, each with its own API key, throttle and bounds.
//! The API stamps the game of the request's key into every event (`gameId`), never a game a
//! client names.
//!
//! Behind API Gateway ([`Games::ApiGateway`]), each game is an API key of API Gateway's own, in a
//! usage plan of its own (its throttle), tagged with [`GAME_TAG`] (the game) and optionally
//! [`MIN_AMOUNT_TAG`] and [`MAX_AMOUNT_TAG`] (the range of a purchase's `amount`). API Gateway
//! checks the key and refuses a revoked (disabled or deleted) one before the function runs; the
//! function reads the game from the key's tags (`apigateway:GET`), remembered for a few minutes.
//! [`add_game`], [`list_games`] and [`revoke_game`] (`lakelog games add|list|revoke`) manage them.
//!
//! Locally (`lakelog serve --games FILE`), [`Games::Keys`] holds the keys of a JSON file:
//!
//! ```json
//! {"games": [{"game": "space-miners", "key": "a-long-random-secret", "maxAmount": 500}]}
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use aws_lambda_events::apigw::ApiGatewayProxyRequest;
use aws_sdk_apigateway::types::{ApiStage, Op, PatchOperation, ThrottleSettings};
use game_events::Limits;
use serde::Deserialize;

/// The tag of an API key that names its game.
pub const GAME_TAG: &str = "lakelog:game";
/// The tag of an API key with the least `amount` its game's purchases may carry (default 0).
pub const MIN_AMOUNT_TAG: &str = "lakelog:min-amount";
/// The tag of an API key with the most `amount` its game's purchases may carry (default 10000).
pub const MAX_AMOUNT_TAG: &str = "lakelog:max-amount";
/// The header a client sends its key in.
pub const API_KEY_HEADER: &str = "x-api-key";

/// How long the function trusts what it read of a key before reading it again.
pub const KEY_CACHE_TTL: Duration = Duration::from_secs(300);

/// A game as the API knows it: its name and the bounds of its events.
#[derive(Debug, Clone, PartialEq)]
pub struct Game {
    /// The game's name, stamped as `gameId`: 1 to 64 of `a-z`, `0-9`, `-` and `_`.
    pub id: String,
    /// What one of its events may carry.
    pub limits: Limits,
}

impl Game {
    /// The game `id` with the default limits; `Err` when the name is not one.
    pub fn new(id: &str) -> Result<Self, GameError> {
        check_name(id)?;
        Ok(Self {
            id: id.to_owned(),
            limits: Limits::default(),
        })
    }

    /// The same game with purchases' `amount` between `min` and `max`; `Err` unless
    /// `0 <= min <= max` and both are finite.
    pub fn with_amounts(mut self, min: f64, max: f64) -> Result<Self, GameError> {
        if !(min.is_finite() && max.is_finite() && 0.0 <= min && min <= max) {
            return Err(GameError::InvalidSetting {
                game: self.id,
                setting: "amount range".into(),
                value: format!("{min} to {max}"),
                expected: "0 <= min <= max, both finite".into(),
            });
        }
        self.limits.min_amount = min;
        self.limits.max_amount = max;
        Ok(self)
    }
}

/// Checks a game's name: 1 to 64 of `a-z`, `0-9`, `-` and `_`, starting with a letter or digit.
pub fn check_name(id: &str) -> Result<(), GameError> {
    let ok = (1..=64).contains(&id.len())
        && id
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(GameError::InvalidName {
            name: id.chars().take(80).collect(),
        })
    }
}

/// Why a request's game could not be told, or a game could not be managed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GameError {
    /// The request carries no API key.
    #[error("no API key: send your game's key in the x-api-key header")]
    NoKey,
    /// A key that belongs to no game.
    #[error("the API key belongs to no game")]
    UnknownKey,
    /// A game's key that was revoked (API Gateway refuses it too, once its caches catch up).
    #[error("the API key of {game} was revoked")]
    Revoked {
        /// The game.
        game: String,
    },
    /// A game name that is not one.
    #[error("{name:?} is not a game name: use 1 to 64 of a-z, 0-9, - and _, starting with a letter or digit")]
    InvalidName {
        /// The name given.
        name: String,
    },
    /// A setting of a game (a key's tag, a keys file's entry) that is not valid.
    #[error("game {game}: {setting} {value:?}: expected {expected}")]
    InvalidSetting {
        /// The game.
        game: String,
        /// The setting.
        setting: String,
        /// Its value.
        value: String,
        /// What it should be.
        expected: String,
    },
    /// The keys file could not be read.
    #[error("keys file {path}: {reason}")]
    KeysFile {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// API Gateway could not be asked (the request may succeed when resent).
    #[error("API Gateway: {operation}: {reason}")]
    ApiGateway {
        /// What was asked.
        operation: &'static str,
        /// What went wrong.
        reason: String,
    },
    /// `lakelog games add` of a game that has a key already on the same API stage.
    #[error("game {game} already has a key ({key_id}) on this API and stage: revoke it first, or keep it")]
    Exists {
        /// The game.
        game: String,
        /// Its key's id.
        key_id: String,
    },
    /// `lakelog games retire` of a key that is not an enabled key of the game on the API stage.
    #[error("game {game} has no enabled key {key_id} on this API and stage")]
    NoSuchKey {
        /// The game.
        game: String,
        /// The key's id.
        key_id: String,
    },
    /// `lakelog games retire` of a game's last enabled key.
    #[error("key {key_id} is the last enabled key of {game}: rotate first, or revoke the game")]
    LastKey {
        /// The game.
        game: String,
        /// The key's id.
        key_id: String,
    },
    /// `lakelog games revoke` of a game without an enabled key on the API stage.
    #[error("game {game} has no enabled key on this API and stage")]
    NoSuchGame {
        /// The game.
        game: String,
    },
}

impl GameError {
    /// The HTTP status of a request refused for this: 503 when API Gateway could not be asked
    /// (try again), 403 otherwise.
    pub fn status(&self) -> u16 {
        match self {
            GameError::ApiGateway { .. } => 503,
            _ => 403,
        }
    }
}

/// One entry of a keys file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct KeyEntry {
    game: String,
    key: String,
    #[serde(default)]
    min_amount: Option<f64>,
    #[serde(default)]
    max_amount: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeysFile {
    games: Vec<KeyEntry>,
}

/// Where the API finds the game of a request's key.
#[derive(Debug)]
pub enum Games {
    /// Keys given up front (a keys file of `lakelog serve`, tests): the `x-api-key` header's
    /// value names the game. A key not in the map is refused.
    Keys(HashMap<String, Arc<Game>>),
    /// API Gateway's API keys: the key API Gateway accepted (`requestContext.identity.apiKeyId`)
    /// names its game in its tags.
    ApiGateway(ApiGatewayGames),
}

impl Games {
    /// Games of the given keys.
    pub fn keys(keys: impl IntoIterator<Item = (String, Game)>) -> Self {
        Self::Keys(keys.into_iter().map(|(k, g)| (k, Arc::new(g))).collect())
    }

    /// Games of the keys in the JSON text of a keys file (see the module's documentation);
    /// `path` names the file in errors.
    pub fn from_keys_json(path: &str, json: &str) -> Result<Self, GameError> {
        let file: KeysFile = serde_json::from_str(json).map_err(|e| GameError::KeysFile {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
        let mut keys = HashMap::new();
        for (index, entry) in file.games.into_iter().enumerate() {
            let bad = |reason: String| GameError::KeysFile {
                path: path.to_owned(),
                reason: format!("games[{index}]: {reason}"),
            };
            let defaults = Limits::default();
            let game = Game::new(&entry.game)
                .and_then(|g| {
                    g.with_amounts(
                        entry.min_amount.unwrap_or(defaults.min_amount),
                        entry.max_amount.unwrap_or(defaults.max_amount),
                    )
                })
                .map_err(|e| bad(e.to_string()))?;
            if entry.key.len() < 20 {
                return Err(bad(format!("the key of {} is shorter than 20 characters", game.id)));
            }
            if keys.insert(entry.key, Arc::new(game)).is_some() {
                return Err(bad("a key that an earlier game has".into()));
            }
        }
        Ok(Self::Keys(keys))
    }

    /// Games of the keys file at `path`.
    pub fn from_keys_file(path: &std::path::Path) -> Result<Self, GameError> {
        let name = path.display().to_string();
        let json = std::fs::read_to_string(path).map_err(|e| GameError::KeysFile {
            path: name.clone(),
            reason: e.to_string(),
        })?;
        Self::from_keys_json(&name, &json)
    }

    /// The game of `request`'s key.
    pub async fn resolve(&self, request: &ApiGatewayProxyRequest) -> Result<Arc<Game>, GameError> {
        match self {
            Games::Keys(keys) => {
                let key = request
                    .headers
                    .get(API_KEY_HEADER)
                    .or_else(|| request.multi_value_headers.get(API_KEY_HEADER))
                    .and_then(|v| v.to_str().ok())
                    .or(request.request_context.identity.api_key.as_deref())
                    .filter(|k| !k.is_empty())
                    .ok_or(GameError::NoKey)?;
                keys.get(key).cloned().ok_or(GameError::UnknownKey)
            }
            Games::ApiGateway(games) => {
                let key_id = request
                    .request_context
                    .identity
                    .api_key_id
                    .as_deref()
                    .filter(|k| !k.is_empty())
                    .ok_or(GameError::NoKey)?;
                games.game_of(key_id).await
            }
        }
    }
}

/// The games of API Gateway's keys, read from their tags and remembered for [`KEY_CACHE_TTL`].
#[derive(Debug)]
pub struct ApiGatewayGames {
    client: aws_sdk_apigateway::Client,
    known: Mutex<HashMap<String, (Instant, Arc<Game>)>>,
}

impl ApiGatewayGames {
    /// Games looked up with `client`.
    pub fn new(client: aws_sdk_apigateway::Client) -> Self {
        Self {
            client,
            known: Mutex::new(HashMap::new()),
        }
    }

    /// The game of the key `key_id`.
    pub async fn game_of(&self, key_id: &str) -> Result<Arc<Game>, GameError> {
        if let Some((read, game)) = self.known.lock().unwrap_or_else(PoisonError::into_inner).get(key_id)
            && read.elapsed() < KEY_CACHE_TTL
        {
            return Ok(game.clone());
        }
        let key = self
            .client
            .get_api_key()
            .api_key(key_id)
            .include_value(false)
            .send()
            .await
            .map_err(|e| {
                if e.as_service_error().is_some_and(|s| s.is_not_found_exception()) {
                    // Deleted since API Gateway checked it: as good as revoked.
                    GameError::UnknownKey
                } else {
                    GameError::ApiGateway {
                        operation: "GetApiKey",
                        reason: aws_sdk_apigateway::error::DisplayErrorContext(e).to_string(),
                    }
                }
            })?;
        let game = game_of_tags(key.tags()).ok_or(GameError::UnknownKey)??;
        if !key.enabled() {
            return Err(GameError::Revoked { game: game.id });
        }
        let game = Arc::new(game);
        let mut known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        // A bounded map: keys are few (one per game), so a full one is only ever stale entries.
        if known.len() >= 1024 {
            known.clear();
        }
        known.insert(key_id.to_owned(), (Instant::now(), game.clone()));
        Ok(game)
    }
}

/// The game a key's tags name, `None` when they name none.
fn game_of_tags(tags: Option<&HashMap<String, String>>) -> Option<Result<Game, GameError>> {
    let tags = tags?;
    let id = tags.get(GAME_TAG)?;
    Some(game_with_tags(id, tags))
}

/// The game `id` with the amount range its key's tags give (the defaults where they give none).
fn game_with_tags(id: &str, tags: &HashMap<String, String>) -> Result<Game, GameError> {
    let defaults = Limits::default();
    let amount = |tag: &str, default: f64| match tags.get(tag) {
        None => Ok(default),
        Some(text) => text.trim().parse::<f64>().map_err(|_| GameError::InvalidSetting {
            game: id.to_owned(),
            setting: format!("tag {tag}"),
            value: text.clone(),
            expected: "a number".into(),
        }),
    };
    Game::new(id)?.with_amounts(
        amount(MIN_AMOUNT_TAG, defaults.min_amount)?,
        amount(MAX_AMOUNT_TAG, defaults.max_amount)?,
    )
}

/// A game's key as `lakelog games` shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GameKey {
    /// The game.
    pub game: String,
    /// The API key's id.
    pub key_id: String,
    /// The key itself: only when it was just created (hand it to the game's developers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Whether API Gateway accepts it.
    pub enabled: bool,
    /// The range of a purchase's `amount`.
    pub min_amount: f64,
    /// The range of a purchase's `amount`.
    pub max_amount: f64,
    /// The usage plan (throttle) of the game.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_plan_id: Option<String>,
}

/// The throttle of a game's usage plan.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Throttle {
    /// Requests per second, on average.
    pub rate: f64,
    /// Requests at once.
    pub burst: i32,
}

fn api_error<E: std::error::Error + Send + Sync + 'static>(operation: &'static str) -> impl Fn(E) -> GameError {
    move |e| GameError::ApiGateway {
        operation,
        reason: aws_sdk_apigateway::error::DisplayErrorContext(e).to_string(),
    }
}

/// The REST API and stage whose games a command works on: one stack's game events API. Keys
/// belong to it through their usage plans, so two stacks of one account (staging, production)
/// may have games of the same names, each acting on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiStageRef {
    /// The REST API's id (a stack's output `GameEventsApiId`).
    pub api_id: String,
    /// Its stage.
    pub stage: String,
}

/// The API keys in usage plans of `api`'s stage: key id -> usage plan id.
async fn keys_of_stage(
    client: &aws_sdk_apigateway::Client,
    api: &ApiStageRef,
) -> Result<HashMap<String, String>, GameError> {
    let mut plans = Vec::new();
    let mut position: Option<String> = None;
    loop {
        let page = client
            .get_usage_plans()
            .limit(500)
            .set_position(position.take())
            .send()
            .await
            .map_err(api_error("GetUsagePlans"))?;
        for plan in page.items() {
            let serves = plan
                .api_stages()
                .iter()
                .any(|s| s.api_id() == Some(api.api_id.as_str()) && s.stage() == Some(api.stage.as_str()));
            if let (true, Some(id)) = (serves, plan.id()) {
                plans.push(id.to_owned());
            }
        }
        match page.position() {
            Some(next) if !page.items().is_empty() => position = Some(next.to_owned()),
            _ => break,
        }
    }
    let mut keys = HashMap::new();
    for plan in plans {
        let mut position: Option<String> = None;
        loop {
            let page = client
                .get_usage_plan_keys()
                .usage_plan_id(&plan)
                .limit(500)
                .set_position(position.take())
                .send()
                .await
                .map_err(api_error("GetUsagePlanKeys"))?;
            keys.extend(
                page.items()
                    .iter()
                    .filter_map(|k| k.id())
                    .map(|id| (id.to_owned(), plan.clone())),
            );
            match page.position() {
                Some(next) if !page.items().is_empty() => position = Some(next.to_owned()),
                _ => break,
            }
        }
    }
    Ok(keys)
}

/// Every game key of `api`'s stage (keys tagged [`GAME_TAG`] in its usage plans), revoked ones
/// included, by game.
pub async fn list_games(client: &aws_sdk_apigateway::Client, api: &ApiStageRef) -> Result<Vec<GameKey>, GameError> {
    let of_stage = keys_of_stage(client, api).await?;
    let mut keys = Vec::new();
    let mut position: Option<String> = None;
    loop {
        let page = client
            .get_api_keys()
            .include_values(false)
            .limit(500)
            .set_position(position.take())
            .send()
            .await
            .map_err(api_error("GetApiKeys"))?;
        for item in page.items() {
            let Some(plan) = item.id().and_then(|id| of_stage.get(id)) else {
                continue;
            };
            let Some(Ok(game)) = game_of_tags(item.tags()) else {
                continue;
            };
            keys.push(GameKey {
                game: game.id,
                key_id: item.id().unwrap_or_default().to_owned(),
                key: None,
                enabled: item.enabled(),
                min_amount: game.limits.min_amount,
                max_amount: game.limits.max_amount,
                usage_plan_id: Some(plan.clone()),
            });
        }
        match page.position() {
            Some(next) if !page.items().is_empty() => position = Some(next.to_owned()),
            _ => break,
        }
    }
    keys.sort_by(|a, b| (&a.game, !a.enabled, &a.key_id).cmp(&(&b.game, !b.enabled, &b.key_id)));
    Ok(keys)
}

/// The enabled keys of `game` on `api`'s stage.
async fn enabled_keys(
    client: &aws_sdk_apigateway::Client,
    api: &ApiStageRef,
    game: &str,
) -> Result<Vec<GameKey>, GameError> {
    Ok(list_games(client, api)
        .await?
        .into_iter()
        .filter(|k| k.game == game && k.enabled)
        .collect())
}

/// Creates an enabled API key of `game`, tagged with it and its amount range.
async fn create_key(
    client: &aws_sdk_apigateway::Client,
    game: &Game,
    description: String,
) -> Result<aws_sdk_apigateway::operation::create_api_key::CreateApiKeyOutput, GameError> {
    client
        .create_api_key()
        .name(format!("lakelog-{}", game.id))
        .description(description)
        .enabled(true)
        .tags(GAME_TAG, &game.id)
        .tags(MIN_AMOUNT_TAG, game.limits.min_amount.to_string())
        .tags(MAX_AMOUNT_TAG, game.limits.max_amount.to_string())
        .send()
        .await
        .map_err(api_error("CreateApiKey"))
}

/// Puts the key `key_id` in the usage plan `plan_id`.
async fn add_to_plan(client: &aws_sdk_apigateway::Client, plan_id: &str, key_id: &str) -> Result<(), GameError> {
    client
        .create_usage_plan_key()
        .usage_plan_id(plan_id)
        .key_id(key_id)
        .key_type("API_KEY")
        .send()
        .await
        .map_err(api_error("CreateUsagePlanKey"))?;
    Ok(())
}

/// Deletes what a failed `add` or `rotate` created, the usage plan (if any) and then the key, and
/// returns `error`, naming beside it anything that could not be deleted.
async fn undo(client: &aws_sdk_apigateway::Client, error: GameError, plan_id: Option<&str>, key_id: &str) -> GameError {
    let mut undone = Vec::new();
    if let Some(plan_id) = plan_id
        && let Err(e) = client.delete_usage_plan().usage_plan_id(plan_id).send().await
    {
        undone.push(format!("usage plan {plan_id}: {}", api_error("DeleteUsagePlan")(e)));
    }
    if let Err(e) = client.delete_api_key().api_key(key_id).send().await {
        undone.push(format!("key {key_id}: {}", api_error("DeleteApiKey")(e)));
    }
    match error {
        GameError::ApiGateway { operation, reason } if !undone.is_empty() => GameError::ApiGateway {
            operation,
            reason: format!("{reason}; and could not delete what was created: {}", undone.join("; ")),
        },
        error => error,
    }
}

/// Creates `game`'s API key and its usage plan (`throttle`) on `api`'s stage; the key's value is
/// in the answer, once. A game that has an enabled key on that stage already is refused
/// ([`GameError::Exists`]); another stack's game of the same name is not this one. When a step
/// fails, what the earlier steps created is deleted again, so that no enabled key is left behind.
pub async fn add_game(
    client: &aws_sdk_apigateway::Client,
    api: &ApiStageRef,
    game: &Game,
    throttle: Throttle,
) -> Result<GameKey, GameError> {
    if let Some(existing) = enabled_keys(client, api, &game.id).await?.into_iter().next() {
        return Err(GameError::Exists {
            game: game.id.clone(),
            key_id: existing.key_id,
        });
    }
    let key = create_key(client, game, format!("Game clients of {}", game.id)).await?;
    let key_id = key.id().unwrap_or_default().to_owned();
    let plan = client
        .create_usage_plan()
        .name(format!("lakelog-{}", game.id))
        .description(format!("The throttle of {}", game.id))
        .throttle(
            ThrottleSettings::builder()
                .rate_limit(throttle.rate)
                .burst_limit(throttle.burst)
                .build(),
        )
        .api_stages(ApiStage::builder().api_id(&api.api_id).stage(&api.stage).build())
        .tags(GAME_TAG, &game.id)
        .send()
        .await;
    let plan_id = match plan {
        Ok(plan) => plan.id().unwrap_or_default().to_owned(),
        Err(e) => return Err(undo(client, api_error("CreateUsagePlan")(e), None, &key_id).await),
    };
    if let Err(error) = add_to_plan(client, &plan_id, &key_id).await {
        return Err(undo(client, error, Some(&plan_id), &key_id).await);
    }
    Ok(GameKey {
        game: game.id.clone(),
        key_id,
        key: key.value().map(str::to_owned),
        enabled: true,
        min_amount: game.limits.min_amount,
        max_amount: game.limits.max_amount,
        usage_plan_id: Some(plan_id),
    })
}

/// Gives `game` a second enabled key on `api`'s stage, beside the one its clients use, in the same
/// usage plan (the same throttle) and with the same tags: clients move to it while the old key
/// still works, and [`retire_key`] disables the old one once they have. The new key's value is in
/// the answer, once; if putting it in the plan fails, it is deleted again.
pub async fn rotate_game(
    client: &aws_sdk_apigateway::Client,
    api: &ApiStageRef,
    game: &str,
) -> Result<GameKey, GameError> {
    let current = enabled_keys(client, api, game)
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| GameError::NoSuchGame { game: game.to_owned() })?;
    let plan_id = current.usage_plan_id.clone().unwrap_or_default();
    let tagged = Game::new(game)?.with_amounts(current.min_amount, current.max_amount)?;
    let description = format!("Game clients of {game} (rotated from {})", current.key_id);
    let key = create_key(client, &tagged, description).await?;
    let key_id = key.id().unwrap_or_default().to_owned();
    if let Err(error) = add_to_plan(client, &plan_id, &key_id).await {
        return Err(undo(client, error, None, &key_id).await);
    }
    Ok(GameKey {
        key_id,
        key: key.value().map(str::to_owned),
        ..current
    })
}

/// Sets the throttle of `game`'s usage plan on `api`'s stage in place: its keys, and the clients
/// that hold them, keep working. Returns the game's enabled keys.
pub async fn set_throttle(
    client: &aws_sdk_apigateway::Client,
    api: &ApiStageRef,
    game: &str,
    throttle: Throttle,
) -> Result<Vec<GameKey>, GameError> {
    let keys = enabled_keys(client, api, game).await?;
    let mut plans: Vec<&str> = keys.iter().filter_map(|k| k.usage_plan_id.as_deref()).collect();
    plans.dedup();
    if plans.is_empty() {
        return Err(GameError::NoSuchGame { game: game.to_owned() });
    }
    let replace = |path: &str, value: String| {
        PatchOperation::builder()
            .op(Op::Replace)
            .path(path)
            .value(value)
            .build()
    };
    for plan in plans {
        client
            .update_usage_plan()
            .usage_plan_id(plan)
            .patch_operations(replace("/throttle/rateLimit", throttle.rate.to_string()))
            .patch_operations(replace("/throttle/burstLimit", throttle.burst.to_string()))
            .send()
            .await
            .map_err(api_error("UpdateUsagePlan"))?;
    }
    Ok(keys)
}

/// Disables one key of `game` on `api`'s stage, `key_id`, once its clients moved to the key
/// [`rotate_game`] gave: the game's other keys go on working. The game's last enabled key is not
/// retired ([`GameError::LastKey`]): [`revoke_game`] does that, on purpose.
pub async fn retire_key(
    client: &aws_sdk_apigateway::Client,
    api: &ApiStageRef,
    game: &str,
    key_id: &str,
) -> Result<GameKey, GameError> {
    let keys = enabled_keys(client, api, game).await?;
    let mut key = keys
        .iter()
        .find(|k| k.key_id == key_id)
        .cloned()
        .ok_or_else(|| GameError::NoSuchKey {
            game: game.to_owned(),
            key_id: key_id.to_owned(),
        })?;
    if keys.len() < 2 {
        return Err(GameError::LastKey {
            game: game.to_owned(),
            key_id: key_id.to_owned(),
        });
    }
    disable_key(client, key_id).await?;
    key.enabled = false;
    Ok(key)
}

/// Disables the API key `key_id`.
async fn disable_key(client: &aws_sdk_apigateway::Client, key_id: &str) -> Result<(), GameError> {
    client
        .update_api_key()
        .api_key(key_id)
        .patch_operations(
            PatchOperation::builder()
                .op(Op::Replace)
                .path("/enabled")
                .value("false")
                .build(),
        )
        .send()
        .await
        .map_err(api_error("UpdateApiKey"))?;
    Ok(())
}

/// Disables every enabled key of `game` on `api`'s stage: API Gateway refuses them from then on
/// (within the minute its caches take); the other games' keys, and another stack's game of the
/// same name, are untouched. Returns the keys revoked.
pub async fn revoke_game(
    client: &aws_sdk_apigateway::Client,
    api: &ApiStageRef,
    game: &str,
) -> Result<Vec<GameKey>, GameError> {
    let mut revoked = Vec::new();
    for mut key in enabled_keys(client, api, game).await? {
        disable_key(client, &key.key_id).await?;
        key.enabled = false;
        revoked.push(key);
    }
    if revoked.is_empty() {
        return Err(GameError::NoSuchGame { game: game.to_owned() });
    }
    Ok(revoked)
}

#[cfg(test)]
mod tests {
    use aws_lambda_events::http::HeaderValue;

    use super::*;

    const KEYS: &str = r#"{"games": [
        {"game": "space-miners", "key": "space-miners-key-0123456789", "maxAmount": 500},
        {"game": "tiny-towns", "key": "tiny-towns-key-0123456789"}
    ]}"#;

    fn with_key(key: &str) -> ApiGatewayProxyRequest {
        let mut request = ApiGatewayProxyRequest::default();
        request
            .headers
            .insert(API_KEY_HEADER, HeaderValue::from_str(key).unwrap());
        request
    }

    #[tokio::test]
    async fn each_key_names_its_own_game() {
        let games = Games::from_keys_json("games.json", KEYS).unwrap();
        let miners = games.resolve(&with_key("space-miners-key-0123456789")).await.unwrap();
        assert_eq!(miners.id, "space-miners");
        assert_eq!(miners.limits.max_amount, 500.0);
        let towns = games.resolve(&with_key("tiny-towns-key-0123456789")).await.unwrap();
        assert_eq!((towns.id.as_str(), towns.limits.max_amount), ("tiny-towns", 10_000.0));
        assert_eq!(games.resolve(&with_key("guess")).await, Err(GameError::UnknownKey));
        assert_eq!(
            games.resolve(&ApiGatewayProxyRequest::default()).await,
            Err(GameError::NoKey)
        );
    }

    #[test]
    fn bad_keys_files_say_where() {
        let err = |json: &str| Games::from_keys_json("g.json", json).unwrap_err().to_string();
        assert!(err("{").starts_with("keys file g.json: "), "{}", err("{"));
        assert_eq!(
            err(r#"{"games": [{"game": "Bad Name", "key": "0123456789012345678901"}]}"#),
            "keys file g.json: games[0]: \"Bad Name\" is not a game name: use 1 to 64 of a-z, 0-9, - and _, starting with a letter or digit"
        );
        assert_eq!(
            err(r#"{"games": [{"game": "a", "key": "short"}]}"#),
            "keys file g.json: games[0]: the key of a is shorter than 20 characters"
        );
        assert!(
            err(r#"{"games": [{"game": "a", "key": "0123456789012345678901", "minAmount": -1}]}"#)
                .contains("amount range")
        );
        assert!(
            err(r#"{"games": [{"game": "a", "key": "0123456789012345678901"}, {"game": "b", "key": "0123456789012345678901"}]}"#)
                .contains("games[1]: a key that an earlier game has")
        );
    }

    #[test]
    fn tags_name_the_game_and_its_range() {
        let tags = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        assert!(game_of_tags(None).is_none());
        assert!(game_of_tags(Some(&tags(&[("team", "x")]))).is_none());
        let game = game_of_tags(Some(&tags(&[(GAME_TAG, "g1"), (MAX_AMOUNT_TAG, "99.5")])))
            .unwrap()
            .unwrap();
        assert_eq!(
            (game.id.as_str(), game.limits.min_amount, game.limits.max_amount),
            ("g1", 0.0, 99.5)
        );
        let bad = game_of_tags(Some(&tags(&[(GAME_TAG, "g1"), (MIN_AMOUNT_TAG, "cheap")])))
            .unwrap()
            .unwrap_err();
        assert_eq!(
            bad.to_string(),
            "game g1: tag lakelog:min-amount \"cheap\": expected a number"
        );
    }
}
