//! Games as code: a stage's games as a file that `lakelog games export` writes from a live stage
//! and `lakelog games apply` brings a stage to, idempotently.
//!
//! ```json
//! {"games": [{"game": "space-miners", "rate": 100, "burst": 200,
//!             "quota": {"limit": 5000000, "period": "DAY"}, "minAmount": 0, "maxAmount": 500,
//!             "lane": "0/4", "pseudonymise": "device_id",
//!             "pseudonymKey": "ssm:/lakelog/carried/space-miners/pseudonym-key",
//!             "keys": ["ssm:/lakelog/carried/space-miners/k7q2w9e4r1"]}]}
//! ```
//!
//! No key is in the file: each is a reference, `ssm:NAME`, to a SecureString parameter of
//! Parameter Store that holds its value (export writes them). Applying the file to a stage that
//! lacks a key makes one of that value, or takes in the account's key of that value (API Gateway
//! keys one value once), so a stage re-created, or stood up in another region, serves the keys
//! shipped clients hold. The game's pseudonym key travels the same way, so its pseudonyms stay
//! the same. Apply changes nothing until every entry is checked and every reference read; it
//! adds and changes, and never revokes: keys and games on the stage that the file does not name
//! are reported, for `lakelog games retire` or `revoke`.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};

use super::admin::{
    Changes, GameKey, Quota, Throttle, add_to_plan, check_limits, create_key, create_plan, enable_key, free_lane,
    list_games, pseudonymise_game, put_pseudonym_key, set_game,
};
use super::{ApiStageRef, Game, GameError, api_error, key_ids_by_value, pseudonym_key, pseudonym_key_name};
use crate::lane::Lane;
use crate::pseudonym::Pseudonym;
use game_events::Limits;

/// The prefix of a reference to a SecureString parameter of Parameter Store.
pub const SSM_REFERENCE: &str = "ssm:";

/// A stage's games, as a file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GamesFile {
    /// Every game, each once.
    pub games: Vec<GameSpec>,
}

/// One game of a [`GamesFile`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GameSpec {
    /// The game's name.
    pub game: String,
    /// Requests per second its clients may send together (needed to add it; kept when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Requests at once (needed to add it; kept when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<i32>,
    /// Its quota; none: no quota.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<Quota>,
    /// The least `amount` of a purchase (default 0).
    #[serde(default = "default_min_amount")]
    pub min_amount: f64,
    /// The most `amount` of a purchase (default 10000).
    #[serde(default = "default_max_amount")]
    pub max_amount: f64,
    /// Its lane of the stream, `K/N` (a new game without one gets the least used).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
    /// The parameters its events have pseudonymised (`device_id,player_id`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pseudonymise: Option<String>,
    /// With `pseudonymise`: the reference of its pseudonym key (none: the stage's own, made when
    /// it has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pseudonym_key: Option<String>,
    /// References of its keys (`ssm:NAME`), at least one.
    pub keys: Vec<String>,
}

fn default_min_amount() -> f64 {
    Limits::default().min_amount
}

fn default_max_amount() -> f64 {
    Limits::default().max_amount
}

/// What [`apply_games`] did to one game.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Applied {
    /// The game.
    pub game: String,
    /// Whether its usage plan was made (it had none on the stage).
    pub added: bool,
    /// Keys made with the file's values.
    pub keys_made: usize,
    /// Keys of the file's values that the account had, enabled again or put in the game's plan.
    pub keys_taken_in: usize,
    /// Keys of the file's values that were the game's already.
    pub keys_kept: usize,
    /// The ids of the game's enabled keys that the file does not name (left as they are).
    pub keys_not_in_file: Vec<String>,
}

/// What [`apply_games`] did, game by game, and the stage's games that the file does not name.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Applying {
    /// The file's games, in its order.
    pub games: Vec<Applied>,
    /// Games with enabled keys on the stage that the file does not name (left as they are).
    pub games_not_in_file: Vec<String>,
}

/// The Parameter Store name `reference` (`ssm:NAME`) refers to.
fn parameter_name(reference: &str) -> Result<&str, String> {
    match reference.strip_prefix(SSM_REFERENCE) {
        Some(name) if name.starts_with('/') && name.len() > 1 => Ok(name),
        _ => Err(format!(
            "{reference:?} is not a reference: expected ssm:/PARAMETER/NAME"
        )),
    }
}

/// The value of the SecureString parameter `reference` refers to.
async fn read_secret(ssm: &aws_sdk_ssm::Client, reference: &str) -> Result<String, GameError> {
    let failed = |reason: String| GameError::Secret {
        reference: reference.to_owned(),
        reason,
    };
    let name = parameter_name(reference).map_err(&failed)?;
    let answer = ssm
        .get_parameter()
        .name(name)
        .with_decryption(true)
        .send()
        .await
        .map_err(|e| failed(aws_sdk_ssm::error::DisplayErrorContext(e).to_string()))?;
    answer
        .parameter()
        .and_then(|p| p.value())
        .map(str::to_owned)
        .ok_or_else(|| failed("the parameter has no value".into()))
}

/// Writes `value` as the SecureString parameter `name`, replacing one there; its reference.
async fn write_secret(ssm: &aws_sdk_ssm::Client, name: &str, value: &str, what: &str) -> Result<String, GameError> {
    let reference = format!("{SSM_REFERENCE}{name}");
    ssm.put_parameter()
        .name(name)
        .value(value)
        .r#type(aws_sdk_ssm::types::ParameterType::SecureString)
        .description(format!("lakelog: {what}, exported by lakelog games export"))
        .overwrite(true)
        .send()
        .await
        .map_err(|e| GameError::Secret {
            reference: reference.clone(),
            reason: aws_sdk_ssm::error::DisplayErrorContext(e).to_string(),
        })?;
    Ok(reference)
}

/// The games of `api`'s stage as a file: each game with an enabled key, its settings, and its
/// keys' values (and pseudonym key) written as SecureString parameters under `keys_to`
/// (`/PREFIX`: `/PREFIX/GAME/KEY_ID`, `/PREFIX/GAME/pseudonym-key`), which the file refers to.
pub async fn export_games(
    client: &aws_sdk_apigateway::Client,
    ssm: &aws_sdk_ssm::Client,
    api: &ApiStageRef,
    keys_to: &str,
) -> Result<GamesFile, GameError> {
    let prefix = keys_to.trim_end_matches('/');
    parameter_name(&format!("{SSM_REFERENCE}{prefix}/")).map_err(|reason| GameError::Secret {
        reference: keys_to.to_owned(),
        reason: format!("{reason} (the prefix of the keys' parameters, /PREFIX)"),
    })?;
    let mut by_game: BTreeMap<String, Vec<GameKey>> = BTreeMap::new();
    // The canary's probe game is the stack's own: a new stack makes its own.
    let exported = |k: &GameKey| k.enabled && k.game != game_events::PROBE_GAME;
    for key in list_games(client, api).await?.into_iter().filter(exported) {
        by_game.entry(key.game.clone()).or_default().push(key);
    }
    let mut games = Vec::new();
    for (game, keys) in by_game {
        let first = &keys[0];
        let mut references = Vec::new();
        for key in &keys {
            let read = client
                .get_api_key()
                .api_key(&key.key_id)
                .include_value(true)
                .send()
                .await
                .map_err(api_error("GetApiKey"))?;
            let value = read.value().ok_or_else(|| GameError::ApiGateway {
                operation: "GetApiKey",
                reason: format!("the key {} came without its value", key.key_id),
            })?;
            let name = format!("{prefix}/{game}/{}", key.key_id);
            references.push(write_secret(ssm, &name, value, &format!("a key of the game {game}")).await?);
        }
        let pseudonym_reference = match &first.pseudonymise {
            None => None,
            Some(_) => {
                let key = pseudonym_key(ssm, api, &game)
                    .await?
                    .ok_or_else(|| GameError::PseudonymKey {
                        game: game.clone(),
                        parameter: pseudonym_key_name(api, &game),
                        reason: "the game pseudonymises but its key is gone: its requests are refused".into(),
                    })?;
                let key = String::from_utf8(key).map_err(|_| GameError::PseudonymKey {
                    game: game.clone(),
                    parameter: pseudonym_key_name(api, &game),
                    reason: "the key is not text".into(),
                })?;
                let name = format!("{prefix}/{game}/pseudonym-key");
                Some(write_secret(ssm, &name, &key, &format!("the pseudonym key of the game {game}")).await?)
            }
        };
        games.push(GameSpec {
            game: game.clone(),
            rate: first.throttle.map(|t| t.rate),
            burst: first.throttle.map(|t| t.burst),
            quota: first.quota,
            min_amount: first.min_amount,
            max_amount: first.max_amount,
            lane: first.lane.clone(),
            pseudonymise: first.pseudonymise.clone(),
            pseudonym_key: pseudonym_reference,
            keys: references,
        });
    }
    Ok(GamesFile { games })
}

/// A checked entry of the file, its references read.
struct Wanted<'f> {
    spec: &'f GameSpec,
    game: Game,
    keys: Vec<String>,
    pseudonym_key: Option<String>,
}

/// Checks `spec` (the file's `index`th game; `existing`: the stage's keys) and reads what it
/// refers to.
async fn check<'f>(
    ssm: &aws_sdk_ssm::Client,
    index: usize,
    spec: &'f GameSpec,
    existing: &[GameKey],
) -> Result<Wanted<'f>, GameError> {
    let bad = |reason: String| GameError::GamesFile {
        entry: format!("games[{index}] ({})", spec.game),
        reason,
    };
    let lane = spec
        .lane
        .as_deref()
        .map(str::parse::<Lane>)
        .transpose()
        .map_err(|e| bad(format!("lane: {e}")))?;
    if spec.game == game_events::PROBE_GAME {
        return Err(bad(
            "the game is reserved for the stack's canary, which the stack makes".into(),
        ));
    }
    let game = Game::new(&spec.game)
        .and_then(|g| g.with_amounts(spec.min_amount, spec.max_amount))
        .map_err(|e| bad(e.to_string()))?
        .with_lane(lane);
    check_limits(&spec.game, spec.rate, spec.burst, spec.quota).map_err(|e| bad(e.to_string()))?;
    if spec.keys.is_empty() {
        return Err(bad("no keys: a game needs at least one".into()));
    }
    let on_stage = existing.iter().any(|k| k.game == spec.game && k.enabled);
    if !on_stage && (spec.rate.is_none() || spec.burst.is_none()) {
        return Err(bad("rate and burst are needed to add the game".into()));
    }
    let mut keys = Vec::new();
    for reference in &spec.keys {
        let value = read_secret(ssm, reference).await.map_err(|e| bad(e.to_string()))?;
        if value.len() < 20 {
            return Err(bad(format!(
                "the key of {reference} is shorter than API Gateway's 20 characters"
            )));
        }
        keys.push(value);
    }
    let pseudonym_key = match (&spec.pseudonymise, &spec.pseudonym_key) {
        (None, Some(_)) => return Err(bad("pseudonymKey without pseudonymise".into())),
        (Some(params), reference) => {
            let key = match reference {
                Some(reference) => Some(read_secret(ssm, reference).await.map_err(|e| bad(e.to_string()))?),
                None => None,
            };
            let checked = key.clone().unwrap_or_else(|| "a key of sixteen bytes at least".into());
            Pseudonym::new(params, checked.into_bytes()).map_err(|e| bad(format!("pseudonymise: {e}")))?;
            key
        }
        (None, None) => None,
    };
    Ok(Wanted {
        spec,
        game,
        keys,
        pseudonym_key,
    })
}

/// Makes `game`'s pseudonym key on `api`'s stage `key`, unless it has one: a different one is
/// refused, since it would change the game's pseudonyms.
async fn carry_pseudonym_key(
    ssm: &aws_sdk_ssm::Client,
    api: &ApiStageRef,
    game: &str,
    key: &str,
) -> Result<(), GameError> {
    match pseudonym_key(ssm, api, game).await? {
        Some(existing) if existing == key.as_bytes() => Ok(()),
        Some(_) => Err(GameError::PseudonymKey {
            game: game.to_owned(),
            parameter: pseudonym_key_name(api, game),
            reason: "the stage's pseudonym key differs from the file's: applying it would change the game's \
                     pseudonyms (delete the parameter first if that is meant)"
                .into(),
        }),
        None => put_pseudonym_key(ssm, api, game, key).await.map(drop),
    }
}

/// Brings `api`'s stage to `file`: every game in it with its settings and its keys, each key of
/// the value its reference holds. Checks every entry and reads every reference first; then, game
/// by game, makes or updates the usage plan, makes or takes in the keys, and carries the
/// pseudonym key. Applying the same file again changes nothing.
pub async fn apply_games(
    client: &aws_sdk_apigateway::Client,
    ssm: &aws_sdk_ssm::Client,
    api: &ApiStageRef,
    file: &GamesFile,
) -> Result<Applying, GameError> {
    let mut existing = list_games(client, api).await?;
    let mut wanted = Vec::new();
    let mut names = HashSet::new();
    for (index, spec) in file.games.iter().enumerate() {
        if !names.insert(spec.game.as_str()) {
            return Err(GameError::GamesFile {
                entry: format!("games[{index}] ({})", spec.game),
                reason: "the game is in the file twice".into(),
            });
        }
        wanted.push(check(ssm, index, spec, &existing).await?);
    }
    let mut by_value = key_ids_by_value(client).await?;
    let mut games = Vec::new();
    for want in &wanted {
        let name = want.game.id.as_str();
        let current: Vec<GameKey> = existing
            .iter()
            .filter(|k| k.game == name && k.enabled)
            .cloned()
            .collect();
        let (plan_id, added) = match current.first().and_then(|k| k.usage_plan_id.clone()) {
            Some(plan_id) => {
                let changes = Changes {
                    rate: want.spec.rate,
                    burst: want.spec.burst,
                    quota: Some(want.spec.quota),
                    min_amount: Some(want.spec.min_amount),
                    max_amount: Some(want.spec.max_amount),
                    lane: want.game.lane,
                };
                set_game(client, api, name, changes).await?;
                (plan_id, false)
            }
            None => {
                // Checked: a game the stage lacks has both.
                let throttle = Throttle {
                    rate: want.spec.rate.unwrap_or_default(),
                    burst: want.spec.burst.unwrap_or_default(),
                };
                let lane = want.game.lane.unwrap_or_else(|| free_lane(&existing));
                let plan_id = create_plan(client, api, &want.game, throttle, want.spec.quota, lane).await?;
                (plan_id, true)
            }
        };
        let in_plan: HashSet<&str> = current.iter().map(|k| k.key_id.as_str()).collect();
        let mut applied = Applied {
            game: name.to_owned(),
            added,
            keys_made: 0,
            keys_taken_in: 0,
            keys_kept: 0,
            keys_not_in_file: Vec::new(),
        };
        let mut named = HashSet::new();
        for value in &want.keys {
            match by_value.get(value).cloned() {
                Some((key_id, true)) if in_plan.contains(key_id.as_str()) => {
                    applied.keys_kept += 1;
                    named.insert(key_id);
                }
                Some((key_id, enabled)) => {
                    if !enabled {
                        enable_key(client, api, name, &key_id).await?;
                    }
                    if !in_plan.contains(key_id.as_str()) {
                        add_to_plan(client, &plan_id, &key_id).await?;
                    }
                    by_value.insert(value.clone(), (key_id.clone(), true));
                    applied.keys_taken_in += 1;
                    named.insert(key_id);
                }
                None => {
                    let description = format!("Game clients of {name} (lakelog games apply)");
                    let key = create_key(client, api, name, description, Some(value)).await?;
                    let key_id = key.id().unwrap_or_default().to_owned();
                    add_to_plan(client, &plan_id, &key_id).await?;
                    by_value.insert(value.clone(), (key_id.clone(), true));
                    applied.keys_made += 1;
                    named.insert(key_id);
                }
            }
        }
        applied.keys_not_in_file = current
            .iter()
            .filter(|k| !named.contains(&k.key_id))
            .map(|k| k.key_id.clone())
            .collect();
        let pseudonymised = current.first().and_then(|k| k.pseudonymise.clone());
        match (&want.spec.pseudonymise, &want.pseudonym_key) {
            (Some(params), key) => {
                if let Some(key) = key {
                    carry_pseudonym_key(ssm, api, name, key).await?;
                }
                if pseudonymised.as_deref() != Some(params.as_str()) {
                    pseudonymise_game(client, ssm, api, name, Some(params)).await?;
                }
            }
            (None, _) if pseudonymised.is_some() => pseudonymise_game(client, ssm, api, name, None).await?,
            (None, _) => {}
        }
        existing = list_games(client, api).await?;
        games.push(applied);
    }
    let mut games_not_in_file: Vec<String> = existing
        .iter()
        .filter(|k| k.enabled && !names.contains(k.game.as_str()))
        .map(|k| k.game.clone())
        .collect();
    games_not_in_file.dedup();
    Ok(Applying {
        games,
        games_not_in_file,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_name_a_parameter() {
        assert_eq!(parameter_name("ssm:/lakelog/k"), Ok("/lakelog/k"));
        for bad in ["/lakelog/k", "ssm:lakelog/k", "ssm:/", "env:KEY"] {
            assert!(parameter_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_file_reads_with_its_defaults_and_refuses_unknown_fields() {
        let file: GamesFile =
            serde_json::from_str(r#"{"games": [{"game": "g", "rate": 5, "burst": 10, "keys": ["ssm:/k"]}]}"#).unwrap();
        let spec = &file.games[0];
        assert_eq!((spec.min_amount, spec.max_amount, spec.quota), (0.0, 10000.0, None));
        let err = serde_json::from_str::<GamesFile>(r#"{"games": [{"game": "g", "key": "secret", "keys": []}]}"#)
            .unwrap_err();
        assert!(err.to_string().contains("unknown field `key`"), "{err}");
        let quota: Quota = serde_json::from_str(r#"{"limit": 5, "period": "DAY"}"#).unwrap();
        assert_eq!(quota.period, crate::games::admin::QuotaPeriod::Day);
    }
}
