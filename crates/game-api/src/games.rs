//! Games: a studio's games are first-class names, each with its own API keys, throttle and bounds.
//! The API stamps the game of the request's key into every event (`gameId`), never a game a
//! client names.
//!
//! Behind API Gateway ([`Games::ApiGateway`]), each game is a usage plan of API Gateway's own on
//! the stack's API stage (its throttle and quota), tagged with [`GAME_TAG`] (the game) and
//! optionally [`MIN_AMOUNT_TAG`] and [`MAX_AMOUNT_TAG`] (the range of a purchase's `amount`), with
//! the game's API keys in it (one, or two while clients move to a rotated key). API Gateway checks
//! the key and refuses one that is disabled or in no plan of the stage before the function runs;
//! the function reads the game from the usage plan that holds the key on the request's own API
//! stage (`GET /usageplans?keyId=`, which carries no key values), remembered for
//! [`KEY_CACHE_TTL`]. [`admin`] (`lakelog games`) manages them.
//!
//! Locally (`lakelog serve --games FILE`), [`Games::Keys`] holds the keys of a JSON file:
//!
//! ```json
//! {"games": [{"game": "space-miners", "key": "a-long-random-secret", "maxAmount": 500,
//!             "pseudonymise": "device_id", "pseudonymKey": "another-long-random-secret"}]}
//! ```
//!
//! A game with `pseudonymise` has those parameters replaced by a keyed hash before its records
//! are written (see [`crate::pseudonym`]).

pub mod admin;
pub mod code;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use aws_lambda_events::apigw::ApiGatewayProxyRequest;
use game_events::Limits;

use crate::lane::Lane;
use crate::pseudonym::Pseudonym;
use serde::Deserialize;

/// The tag of a usage plan (and of its API keys) that names its game.
pub const GAME_TAG: &str = "lakelog:game";
/// The tag of a game's usage plan with the least `amount` its purchases may carry (default 0).
pub const MIN_AMOUNT_TAG: &str = "lakelog:min-amount";
/// The tag of a game's usage plan with the most `amount` its purchases may carry (default 10000).
pub const MAX_AMOUNT_TAG: &str = "lakelog:max-amount";
/// The tag of a game's usage plan with its lane of the stream (`K/N`, see [`Lane`]; none: the
/// whole stream).
pub const LANE_TAG: &str = "lakelog:lane";
/// The tag of an API key with the API stage it was made for (`API_ID/STAGE`): a key keeps it
/// after it left its usage plan (retired, revoked), so that `lakelog games list` still shows it.
pub const API_TAG: &str = "lakelog:api";
/// The tag of a game's usage plan with the parameters its events have pseudonymised
/// (`device_id,player_id`, see [`crate::pseudonym`]); the key is the SecureString parameter
/// [`pseudonym_key_name`] of Systems Manager's Parameter Store.
pub const PSEUDONYMISE_TAG: &str = "lakelog:pseudonymise";
/// The tag of a usage plan and API key that a stack made (its first game, `FirstGameId`), with the
/// stack's name: `lakelog games` changes such a game only once the stack no longer declares it.
pub const STACK_OWNED_TAG: &str = "lakelog:stack-owned";
/// The header a client sends its key in.
pub const API_KEY_HEADER: &str = "x-api-key";
/// The start of the name of every API key `lakelog games` (and the template's first game) makes:
/// the keys the function reads, values included, when it checks keys itself behind the HTTP API
/// front ([`ApiGatewayGames::with_front_stage`]).
pub const KEY_NAME_PREFIX: &str = "lakelog-";

/// How long the function trusts what it read of a key before reading it again: a change of a
/// game's settings (`lakelog games set`) reaches every instance of the function within it.
pub const KEY_CACHE_TTL: Duration = Duration::from_secs(300);
/// Behind the HTTP API front, how soon after reading the keys a key it did not know makes the
/// function read them again: a new key works within it, and a flood of made-up keys costs at most
/// one listing of the keys per instance in it.
pub const UNKNOWN_KEY_REREAD: Duration = Duration::from_secs(60);
/// The function's timeout (`GameEventsApiFunction`'s `Timeout` in template.yaml).
pub const API_FUNCTION_TIMEOUT: Duration = Duration::from_secs(15);
/// How long after a change of a game's settings every event the function accepts follows it:
/// [`KEY_CACHE_TTL`] for what an instance remembers, and one [`API_FUNCTION_TIMEOUT`] each for a
/// lookup that began before the change and for the last request served from what it read.
/// `lakelog games set --pseudonymise` waits this long, so that no raw id is accepted after it
/// returns.
pub const SETTING_SETTLES: Duration = Duration::from_secs(KEY_CACHE_TTL.as_secs() + 2 * API_FUNCTION_TIMEOUT.as_secs());

/// A game as the API knows it: its name and the bounds of its events.
#[derive(Debug, Clone, PartialEq)]
pub struct Game {
    /// The game's name, stamped as `gameId`: 1 to 64 of `a-z`, `0-9`, `-` and `_`.
    pub id: String,
    /// What one of its events may carry.
    pub limits: Limits,
    /// Its share of the stream; `None`: the whole stream, shared with every game without a lane.
    pub lane: Option<Lane>,
    /// The parameters replaced by a keyed hash before its records are written, if any.
    pub pseudonym: Option<Arc<Pseudonym>>,
}

impl Game {
    /// The game `id` with the default limits; `Err` when the name is not one.
    pub fn new(id: &str) -> Result<Self, GameError> {
        check_name(id)?;
        Ok(Self {
            id: id.to_owned(),
            limits: Limits::default(),
            lane: None,
            pseudonym: None,
        })
    }

    /// The same game, with its events' parameters pseudonymised by `pseudonym`.
    pub fn with_pseudonym(mut self, pseudonym: Option<Pseudonym>) -> Self {
        self.pseudonym = pseudonym.map(Arc::new);
        self
    }

    /// The same game, writing its records in `lane` of the stream.
    pub fn with_lane(mut self, lane: Option<Lane>) -> Self {
        self.lane = lane;
        self
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
    /// A key that belongs to no game of the request's API stage: unknown, retired or revoked
    /// (API Gateway refuses those too, once its caches catch up), or another stack's.
    #[error("the API key belongs to no game of this API")]
    UnknownKey,
    /// A game name that is not one.
    #[error("{name:?} is not a game name: use 1 to 64 of a-z, 0-9, - and _, starting with a letter or digit")]
    InvalidName {
        /// The name given.
        name: String,
    },
    /// A setting of a game (a usage plan's tag, a keys file's entry) that is not valid.
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
    /// A game that pseudonymises its ids has no key the function can read: its requests are
    /// refused rather than written with the raw ids.
    #[error("game {game}: pseudonym key {parameter}: {reason}")]
    PseudonymKey {
        /// The game.
        game: String,
        /// The Parameter Store parameter.
        parameter: String,
        /// What went wrong.
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
    /// An entry of a games file (`lakelog games apply`) that cannot be applied; nothing was
    /// changed for any game.
    #[error("{entry}: {reason}")]
    GamesFile {
        /// The entry: `games[INDEX] (GAME)`.
        entry: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A key or pseudonym key a games file refers to (`ssm:NAME`) could not be read or written.
    #[error("{reference}: {reason}")]
    Secret {
        /// The reference.
        reference: String,
        /// What went wrong.
        reason: String,
    },
    /// `lakelog games revoke|rotate|set` of a game without an enabled key on the API stage.
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
            GameError::ApiGateway { .. } | GameError::PseudonymKey { .. } => 503,
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
    #[serde(default)]
    lane: Option<String>,
    /// Parameters to pseudonymise (`device_id,player_id`), with `pseudonym_key`.
    #[serde(default)]
    pseudonymise: Option<String>,
    /// The game's pseudonym key (at least 16 bytes of text).
    #[serde(default)]
    pseudonym_key: Option<String>,
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
    /// API Gateway's usage plans: the plan that holds the key API Gateway accepted
    /// (`requestContext.identity.apiKeyId`) on the request's API stage names its game.
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
            let lane = entry
                .lane
                .as_deref()
                .map(str::parse::<Lane>)
                .transpose()
                .map_err(|e| bad(format!("{}: {e}", game.id)))?;
            let pseudonym = match (&entry.pseudonymise, entry.pseudonym_key) {
                (None, None) => None,
                (Some(params), Some(key)) => {
                    Some(Pseudonym::new(params, key.into_bytes()).map_err(|e| bad(format!("{}: {e}", game.id)))?)
                }
                _ => return Err(bad(format!("{}: pseudonymise and pseudonymKey go together", game.id))),
            };
            let game = game.with_lane(lane).with_pseudonym(pseudonym);
            if entry.key.len() < 20 {
                return Err(bad(format!("the key of {} is shorter than 20 characters", game.id)));
            }
            if keys.insert(entry.key, Arc::new(game)).is_some() {
                return Err(bad("a key that an earlier game has".into()));
            }
        }
        Ok(Self::Keys(keys))
    }

    /// The game `id` of a keys file; `None` for games of API Gateway, or a game not in the file.
    pub fn game(&self, id: &str) -> Option<Arc<Game>> {
        match self {
            Games::Keys(keys) => keys.values().find(|g| g.id == id).cloned(),
            Games::ApiGateway(_) => None,
        }
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
                let key = sent_key(request)
                    .or(request
                        .request_context
                        .identity
                        .api_key
                        .as_deref()
                        .filter(|k| !k.is_empty()))
                    .ok_or(GameError::NoKey)?;
                keys.get(key).cloned().ok_or(GameError::UnknownKey)
            }
            Games::ApiGateway(games) => {
                let key_id = request
                    .request_context
                    .identity
                    .api_key_id
                    .as_deref()
                    .filter(|k| !k.is_empty());
                match (key_id, &games.front_stage) {
                    // API Gateway's REST API checked the key and names it by its id.
                    (Some(key_id), _) => {
                        let api = ApiStageRef {
                            api_id: request.request_context.apiid.clone().unwrap_or_default(),
                            stage: request.request_context.stage.clone().unwrap_or_default(),
                        };
                        games.game_of(&api, key_id).await
                    }
                    // The HTTP API front checks no key: the function finds the one sent among
                    // the REST stage's.
                    (None, Some(stage)) => {
                        let key = sent_key(request).ok_or(GameError::NoKey)?;
                        let key_id = games.key_id_of(key).await?;
                        games.game_of(stage, &key_id).await
                    }
                    (None, None) => Err(GameError::NoKey),
                }
            }
        }
    }
}

/// The key `request` carries in its [`API_KEY_HEADER`], if any.
fn sent_key(request: &ApiGatewayProxyRequest) -> Option<&str> {
    request
        .headers
        .get(API_KEY_HEADER)
        .or_else(|| request.multi_value_headers.get(API_KEY_HEADER))
        .and_then(|v| v.to_str().ok())
        .filter(|k| !k.is_empty())
}

/// The REST API and stage of one stack's game events API. Games belong to it through their usage
/// plans, so two stacks of one account (staging, production) may have games of the same names,
/// each acting on its own.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ApiStageRef {
    /// The REST API's id (a stack's output `GameEventsApiId`).
    pub api_id: String,
    /// Its stage.
    pub stage: String,
}

/// The name of the Parameter Store parameter holding `game`'s pseudonym key on `api`'s stage:
/// `/lakelog/API_ID/STAGE/GAME/pseudonym-key`. Deleting it makes the game's pseudonyms
/// unlinkable for good (and the game's requests refused until it is pseudonymised no more).
pub fn pseudonym_key_name(api: &ApiStageRef, game: &str) -> String {
    format!("/lakelog/{}/{}/{game}/pseudonym-key", api.api_id, api.stage)
}

/// `game`'s pseudonym key on `api`'s stage, read from Parameter Store; `None` when it has none
/// (it never pseudonymised, or its key was deleted).
pub async fn pseudonym_key(
    ssm: &aws_sdk_ssm::Client,
    api: &ApiStageRef,
    game: &str,
) -> Result<Option<Vec<u8>>, GameError> {
    let name = pseudonym_key_name(api, game);
    let answer = ssm.get_parameter().name(&name).with_decryption(true).send().await;
    let answer = match answer {
        Ok(answer) => answer,
        Err(e) if e.as_service_error().is_some_and(|e| e.is_parameter_not_found()) => return Ok(None),
        Err(e) => {
            return Err(GameError::PseudonymKey {
                game: game.to_owned(),
                parameter: name,
                reason: aws_sdk_ssm::error::DisplayErrorContext(e).to_string(),
            });
        }
    };
    let key = answer
        .parameter()
        .and_then(|p| p.value())
        .ok_or_else(|| GameError::PseudonymKey {
            game: game.to_owned(),
            parameter: name.clone(),
            reason: "the parameter has no value".to_owned(),
        })?;
    Ok(Some(key.as_bytes().to_vec()))
}

impl std::str::FromStr for ApiStageRef {
    type Err = String;

    /// `API_ID/STAGE`, as its [`ApiStageRef::tag`] writes it.
    fn from_str(text: &str) -> Result<Self, String> {
        match text.split_once('/') {
            Some((api_id, stage)) if !api_id.is_empty() && !stage.is_empty() && !stage.contains('/') => Ok(Self {
                api_id: api_id.to_owned(),
                stage: stage.to_owned(),
            }),
            _ => Err("expected API_ID/STAGE".to_owned()),
        }
    }
}

impl ApiStageRef {
    /// The value of its `lakelog:api` tag: `API_ID/STAGE`.
    pub fn tag(&self) -> String {
        format!("{}/{}", self.api_id, self.stage)
    }

    /// Whether `plan` serves this API stage.
    pub fn served_by(&self, plan: &aws_sdk_apigateway::types::UsagePlan) -> bool {
        plan.api_stages()
            .iter()
            .any(|s| s.api_id() == Some(self.api_id.as_str()) && s.stage() == Some(self.stage.as_str()))
    }
}

/// The games of API Gateway's usage plans, looked up by key and remembered for a while
/// ([`KEY_CACHE_TTL`] unless [`ApiGatewayGames::with_ttl`] says otherwise).
#[derive(Debug)]
pub struct ApiGatewayGames {
    client: aws_sdk_apigateway::Client,
    /// Reads the pseudonym keys of games that have one.
    ssm: Option<aws_sdk_ssm::Client>,
    ttl: Duration,
    known: Mutex<HashMap<KeyOnStage, (Instant, Arc<Game>)>>,
    /// Behind the HTTP API front: the REST stage whose keys and usage plans name the games.
    front_stage: Option<ApiStageRef>,
    /// Behind the HTTP API front: the keys' ids by their values, as last read.
    key_ids: Mutex<KeyIds>,
}

/// The ids of the keys named [`KEY_NAME_PREFIX`]`*` by their values, and when they were read.
#[derive(Debug, Default)]
struct KeyIds {
    read: Option<Instant>,
    /// A key's id and whether it is enabled, by its value.
    by_value: HashMap<String, (String, bool)>,
}

/// A key id on an API stage: what [`ApiGatewayGames`] remembers a game by.
type KeyOnStage = (ApiStageRef, String);

impl ApiGatewayGames {
    /// Games looked up with `client`, each remembered for [`KEY_CACHE_TTL`].
    pub fn new(client: aws_sdk_apigateway::Client) -> Self {
        Self::with_ttl(client, KEY_CACHE_TTL)
    }

    /// Games looked up with `client`, each remembered for `ttl`.
    pub fn with_ttl(client: aws_sdk_apigateway::Client, ttl: Duration) -> Self {
        Self {
            client,
            ssm: None,
            ttl,
            known: Mutex::new(HashMap::new()),
            front_stage: None,
            key_ids: Mutex::new(KeyIds::default()),
        }
    }

    /// The same, also taking requests from the HTTP API front, which checks no key: a request
    /// without an API key id has the key in its [`API_KEY_HEADER`] found among the enabled keys of
    /// `stage`'s usage plans (the function reads the values of the keys named
    /// [`KEY_NAME_PREFIX`]`*`, again after [`KEY_CACHE_TTL`], or after [`UNKNOWN_KEY_REREAD`] when
    /// a key is not among them).
    pub fn with_front_stage(mut self, stage: ApiStageRef) -> Self {
        self.front_stage = Some(stage);
        self
    }

    /// The id of the enabled key whose value is `value`; [`GameError::UnknownKey`] for a key that
    /// is disabled or not one of [`KEY_NAME_PREFIX`]`*`.
    async fn key_id_of(&self, value: &str) -> Result<String, GameError> {
        {
            let ids = self.key_ids.lock().unwrap_or_else(PoisonError::into_inner);
            let age = ids.read.map(|read| read.elapsed());
            match ids.by_value.get(value) {
                Some((id, enabled)) if age.is_some_and(|age| age < self.ttl) => {
                    return if *enabled {
                        Ok(id.clone())
                    } else {
                        Err(GameError::UnknownKey)
                    };
                }
                None if age.is_some_and(|age| age < self.ttl.min(UNKNOWN_KEY_REREAD)) => {
                    return Err(GameError::UnknownKey);
                }
                _ => {}
            }
        }
        let by_value = key_ids_by_value(&self.client).await?;
        let found = by_value.get(value).cloned();
        *self.key_ids.lock().unwrap_or_else(PoisonError::into_inner) = KeyIds {
            read: Some(Instant::now()),
            by_value,
        };
        match found {
            Some((id, true)) => Ok(id),
            _ => Err(GameError::UnknownKey),
        }
    }

    /// The same, reading the pseudonym keys of games that have one with `ssm`. Without it, a
    /// game tagged `lakelog:pseudonymise` is refused (503): its ids are never written raw.
    pub fn with_ssm(mut self, ssm: aws_sdk_ssm::Client) -> Self {
        self.ssm = Some(ssm);
        self
    }

    /// `game`'s pseudonym of `params` on `api`'s stage, its key read from Parameter Store.
    async fn pseudonym(&self, api: &ApiStageRef, game: &str, params: &str) -> Result<Pseudonym, GameError> {
        let failed = |reason: String| GameError::PseudonymKey {
            game: game.to_owned(),
            parameter: pseudonym_key_name(api, game),
            reason,
        };
        let ssm = self
            .ssm
            .as_ref()
            .ok_or_else(|| failed("the function has no Parameter Store client".to_owned()))?;
        let key = pseudonym_key(ssm, api, game)
            .await?
            .ok_or_else(|| failed("no such parameter".to_owned()))?;
        Pseudonym::new(params, key).map_err(|e| failed(e.to_string()))
    }

    /// The game of the key `key_id` on `api`'s stage: the one its usage plan there names. A key
    /// in no such plan (another stack's, a retired or revoked one) is [`GameError::UnknownKey`].
    pub async fn game_of(&self, api: &ApiStageRef, key_id: &str) -> Result<Arc<Game>, GameError> {
        let cached = (api.clone(), key_id.to_owned());
        if let Some((read, game)) = self.known.lock().unwrap_or_else(PoisonError::into_inner).get(&cached)
            && read.elapsed() < self.ttl
        {
            return Ok(game.clone());
        }
        let mut plans = self
            .client
            .get_usage_plans()
            .key_id(key_id)
            .into_paginator()
            .page_size(500)
            .items()
            .send();
        let game = loop {
            match plans.next().await {
                Some(plan) => {
                    let plan = plan.map_err(api_error("GetUsagePlans"))?;
                    if api.served_by(&plan)
                        && let Some(game) = game_of_tags(plan.tags())
                    {
                        let game = game?;
                        let params = plan.tags().and_then(|t| t.get(PSEUDONYMISE_TAG));
                        break match params {
                            Some(params) => {
                                let pseudonym = self.pseudonym(api, &game.id, params).await?;
                                game.with_pseudonym(Some(pseudonym))
                            }
                            None => game,
                        };
                    }
                }
                None => return Err(GameError::UnknownKey),
            }
        };
        let game = Arc::new(game);
        let mut known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        // A bounded map: keys are few (one or two per game), so a full one is only ever stale entries.
        if known.len() >= 1024 {
            known.clear();
        }
        known.insert(cached, (Instant::now(), game.clone()));
        Ok(game)
    }
}

/// The id of every API key named [`KEY_NAME_PREFIX`]`*` (those `lakelog games` makes) and whether
/// it is enabled, by its value: an account's keys of every stage, since a value names one key.
pub(crate) async fn key_ids_by_value(
    client: &aws_sdk_apigateway::Client,
) -> Result<HashMap<String, (String, bool)>, GameError> {
    let mut keys = client
        .get_api_keys()
        .name_query(KEY_NAME_PREFIX)
        .include_values(true)
        .into_paginator()
        .page_size(500)
        .items()
        .send();
    let mut by_value = HashMap::new();
    while let Some(key) = keys.next().await {
        let key = key.map_err(api_error("GetApiKeys"))?;
        if let (Some(id), Some(value)) = (key.id(), key.value()) {
            by_value.insert(value.to_owned(), (id.to_owned(), key.enabled()));
        }
    }
    Ok(by_value)
}

/// An API Gateway error of `operation`, in words.
pub(crate) fn api_error<E: std::error::Error + Send + Sync + 'static>(
    operation: &'static str,
) -> impl Fn(E) -> GameError {
    move |e| GameError::ApiGateway {
        operation,
        reason: aws_sdk_apigateway::error::DisplayErrorContext(e).to_string(),
    }
}

/// The game a usage plan's tags name, `None` when they name none.
pub(crate) fn game_of_tags(tags: Option<&HashMap<String, String>>) -> Option<Result<Game, GameError>> {
    let tags = tags?;
    let id = tags.get(GAME_TAG)?;
    Some(game_with_tags(id, tags))
}

/// The game `id` with the amount range its usage plan's tags give (the defaults where they give
/// none).
pub(crate) fn game_with_tags(id: &str, tags: &HashMap<String, String>) -> Result<Game, GameError> {
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
    let lane = match tags.get(LANE_TAG) {
        None => None,
        Some(text) => Some(text.parse::<Lane>().map_err(|_| GameError::InvalidSetting {
            game: id.to_owned(),
            setting: format!("tag {LANE_TAG}"),
            value: text.clone(),
            expected: "a lane K/N, 0 <= K < N <= 1024".into(),
        })?),
    };
    Ok(Game::new(id)?
        .with_amounts(
            amount(MIN_AMOUNT_TAG, defaults.min_amount)?,
            amount(MAX_AMOUNT_TAG, defaults.max_amount)?,
        )?
        .with_lane(lane))
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
