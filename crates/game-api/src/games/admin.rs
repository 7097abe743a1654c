//! Managing a stack's games (`lakelog games`): each game is a usage plan on the stack's API stage
//! (its throttle, quota and amount range) holding the game's API keys.
//!
//! - [`add_game`] creates a key and its plan; a step that fails undoes the earlier ones.
//! - [`rotate_game`] adds a second key to the plan; [`retire_key`] takes the old one out later.
//! - [`set_game`] changes the plan's settings in place.
//! - [`revoke_game`] disables the game's keys and deletes its plan.
//!
//! Every call works on one API stage ([`ApiStageRef`]): another stack's games, of the same names
//! or not, are never touched.

use std::collections::HashMap;

use aws_sdk_apigateway::types::{ApiStage, Op, PatchOperation, QuotaSettings, ThrottleSettings, UsagePlan};
use game_events::Limits;

use super::{
    API_TAG, ApiStageRef, GAME_TAG, Game, GameError, KEY_NAME_PREFIX, LANE_TAG, MAX_AMOUNT_TAG, MIN_AMOUNT_TAG,
    PSEUDONYMISE_TAG, STACK_OWNED_TAG, api_error, game_with_tags, pseudonym_key_name,
};
use crate::lane::Lane;

/// The lanes a stream is cut into when no game of the stage has a lane yet: the four shards an
/// on-demand stream starts with.
pub const DEFAULT_LANES: u32 = 4;

type Client = aws_sdk_apigateway::Client;

/// A game's key as `lakelog games` shows it, with its game's settings.
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
    /// Whether API Gateway accepts it: enabled, and in the game's usage plan.
    pub enabled: bool,
    /// The usage plan of the game, for a key in it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_plan_id: Option<String>,
    /// The least `amount` of a purchase (of the usage plan; the default once the key left it).
    pub min_amount: f64,
    /// The most `amount` of a purchase.
    pub max_amount: f64,
    /// The game's throttle, for a key in its usage plan.
    #[serde(skip_serializing_if = "Option::is_none", flatten)]
    pub throttle: Option<Throttle>,
    /// The game's quota, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quota: Option<Quota>,
    /// The game's lane of the stream (`K/N`); none: the whole stream.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
    /// The parameters the game has pseudonymised (`device_id,player_id`), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pseudonymise: Option<String>,
    /// The stack that made the game's usage plan ([`super::STACK_OWNED_TAG`]), if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owned_by_stack: Option<String>,
}

/// The throttle of a game's usage plan.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Throttle {
    /// Requests per second, on average.
    pub rate: f64,
    /// Requests at once.
    pub burst: i32,
}

/// The quota of a game's usage plan: at most `limit` requests per `period`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quota {
    /// Requests per period.
    pub limit: i32,
    /// The period.
    pub period: QuotaPeriod,
}

/// The period of a [`Quota`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum QuotaPeriod {
    /// A day (UTC).
    Day,
    /// A week.
    Week,
    /// A month.
    Month,
}

impl std::str::FromStr for QuotaPeriod {
    type Err = String;

    /// `day`, `week` or `month`, in any case.
    fn from_str(text: &str) -> Result<Self, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "day" => Ok(Self::Day),
            "week" => Ok(Self::Week),
            "month" => Ok(Self::Month),
            _ => Err(format!("{text:?} is not a quota period: expected day, week or month")),
        }
    }
}

impl QuotaPeriod {
    /// API Gateway's name of it: `DAY`, `WEEK` or `MONTH`.
    pub fn as_str(self) -> &'static str {
        match self {
            QuotaPeriod::Day => "DAY",
            QuotaPeriod::Week => "WEEK",
            QuotaPeriod::Month => "MONTH",
        }
    }
}

/// What [`set_game`] changes; `None` keeps a setting as it is.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Changes {
    /// Requests per second.
    pub rate: Option<f64>,
    /// Requests at once.
    pub burst: Option<i32>,
    /// A new quota (`Some(Some(_))`), or none any more (`Some(None)`).
    pub quota: Option<Option<Quota>>,
    /// The least `amount` of a purchase.
    pub min_amount: Option<f64>,
    /// The most `amount` of a purchase.
    pub max_amount: Option<f64>,
    /// A new lane of the stream.
    pub lane: Option<Lane>,
}

/// A usage plan on the API stage, with the keys in it.
#[derive(Debug)]
struct Plan {
    plan: UsagePlan,
    keys: Vec<String>,
}

impl Plan {
    fn id(&self) -> &str {
        self.plan.id().unwrap_or_default()
    }

    fn tags(&self) -> Option<&HashMap<String, String>> {
        self.plan.tags()
    }

    fn game(&self) -> Option<&str> {
        self.tags()?.get(GAME_TAG).map(String::as_str)
    }

    /// The game the plan's tags give; `None` when they give a bad setting (`lakelog games set`
    /// repairs it, and the function names the bad tag).
    fn settings(&self, game: &str) -> Option<Game> {
        self.tags().and_then(|tags| game_with_tags(game, tags).ok())
    }

    fn throttle(&self) -> Option<Throttle> {
        let t = self.plan.throttle()?;
        Some(Throttle {
            rate: t.rate_limit(),
            burst: t.burst_limit(),
        })
    }

    fn quota(&self) -> Option<Quota> {
        let q = self.plan.quota()?;
        let period = match q.period()?.as_str() {
            "DAY" => QuotaPeriod::Day,
            "WEEK" => QuotaPeriod::Week,
            "MONTH" => QuotaPeriod::Month,
            _ => return None,
        };
        Some(Quota {
            limit: q.limit(),
            period,
        })
    }
}

/// The usage plans serving `api`'s stage, with their keys.
async fn plans_of_stage(client: &Client, api: &ApiStageRef) -> Result<Vec<Plan>, GameError> {
    let plans = client
        .get_usage_plans()
        .into_paginator()
        .page_size(500)
        .items()
        .send()
        .try_collect()
        .await
        .map_err(api_error("GetUsagePlans"))?;
    let mut served = Vec::new();
    for plan in plans.into_iter().filter(|p| api.served_by(p)) {
        let keys = client
            .get_usage_plan_keys()
            .usage_plan_id(plan.id().unwrap_or_default())
            .into_paginator()
            .page_size(500)
            .items()
            .send()
            .try_collect()
            .await
            .map_err(api_error("GetUsagePlanKeys"))?
            .into_iter()
            .filter_map(|k| k.id)
            .collect();
        served.push(Plan { plan, keys });
    }
    Ok(served)
}

/// Every game key of `api`'s stage, by game: the keys in its games' usage plans, and the keys made
/// for it that left them (retired, revoked: shown disabled).
pub async fn list_games(client: &Client, api: &ApiStageRef) -> Result<Vec<GameKey>, GameError> {
    let plans = plans_of_stage(client, api).await?;
    let plan_of: HashMap<&str, &Plan> = plans
        .iter()
        .flat_map(|p| p.keys.iter().map(move |k| (k.as_str(), p)))
        .collect();
    let api_tag = api.tag();
    let all_keys = client
        .get_api_keys()
        .include_values(false)
        .into_paginator()
        .page_size(500)
        .items()
        .send()
        .try_collect()
        .await
        .map_err(api_error("GetApiKeys"))?;
    let mut keys = Vec::new();
    for item in &all_keys {
        let Some(key_id) = item.id() else { continue };
        let key_tag = |tag: &str| item.tags().and_then(|t| t.get(tag)).map(String::as_str);
        let plan = plan_of.get(key_id).filter(|p| p.game().is_some());
        let game = match plan {
            Some(plan) => plan.game(),
            None if key_tag(API_TAG) == Some(api_tag.as_str()) => key_tag(GAME_TAG),
            None => None,
        };
        let Some(game) = game else { continue };
        let settings = plan.and_then(|p| p.settings(game));
        let limits = settings.as_ref().map_or_else(Limits::default, |g| g.limits.clone());
        keys.push(GameKey {
            game: game.to_owned(),
            key_id: key_id.to_owned(),
            key: None,
            enabled: item.enabled() && plan.is_some(),
            usage_plan_id: plan.map(|p| p.id().to_owned()),
            min_amount: limits.min_amount,
            max_amount: limits.max_amount,
            throttle: plan.and_then(|p| p.throttle()),
            quota: plan.and_then(|p| p.quota()),
            lane: settings.and_then(|g| g.lane).map(|l| l.to_string()),
            pseudonymise: plan
                .and_then(|p| p.tags())
                .and_then(|t| t.get(PSEUDONYMISE_TAG))
                .cloned(),
            owned_by_stack: plan
                .and_then(|p| p.tags())
                .and_then(|t| t.get(STACK_OWNED_TAG))
                .cloned(),
        });
    }
    keys.sort_by(|a, b| (&a.game, !a.enabled, &a.key_id).cmp(&(&b.game, !b.enabled, &b.key_id)));
    Ok(keys)
}

/// The enabled keys of `game` on `api`'s stage; [`GameError::NoSuchGame`] when it has none.
async fn enabled_keys(client: &Client, api: &ApiStageRef, game: &str) -> Result<Vec<GameKey>, GameError> {
    let keys: Vec<GameKey> = list_games(client, api)
        .await?
        .into_iter()
        .filter(|k| k.game == game && k.enabled)
        .collect();
    if keys.is_empty() {
        return Err(GameError::NoSuchGame { game: game.to_owned() });
    }
    Ok(keys)
}

/// The usage plans `keys` are in, each once.
fn plans_of(keys: &[GameKey]) -> Vec<String> {
    let mut plans: Vec<String> = keys.iter().filter_map(|k| k.usage_plan_id.clone()).collect();
    plans.sort();
    plans.dedup();
    plans
}

/// The ARN of the API Gateway resource at `path` (`/usageplans/ID`, `/apikeys/ID`), for tagging.
fn arn(client: &Client, path: &str) -> Result<String, GameError> {
    let region = client
        .config()
        .region()
        .map(|r| r.as_ref().to_owned())
        .ok_or_else(|| GameError::ApiGateway {
            operation: "TagResource",
            reason: "no AWS region is set (AWS_REGION)".into(),
        })?;
    let partition = if region.starts_with("cn-") {
        "aws-cn"
    } else if region.starts_with("us-gov-") {
        "aws-us-gov"
    } else {
        "aws"
    };
    Ok(format!("arn:{partition}:apigateway:{region}::{path}"))
}

/// Adds `tags` to the API Gateway resource at `path`.
async fn tag(client: &Client, path: &str, tags: &[(&str, String)]) -> Result<(), GameError> {
    client
        .tag_resource()
        .resource_arn(arn(client, path)?)
        .set_tags(Some(tags.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect()))
        .send()
        .await
        .map_err(api_error("TagResource"))?;
    Ok(())
}

/// Creates an enabled API key of `game` for `api`'s stage, tagged with both: of `value`, or of a
/// random one API Gateway makes.
pub(crate) async fn create_key(
    client: &Client,
    api: &ApiStageRef,
    game: &str,
    description: String,
    value: Option<&str>,
) -> Result<aws_sdk_apigateway::operation::create_api_key::CreateApiKeyOutput, GameError> {
    client
        .create_api_key()
        .name(format!("{KEY_NAME_PREFIX}{game}"))
        .description(description)
        .set_value(value.map(str::to_owned))
        .enabled(true)
        .tags(GAME_TAG, game)
        .tags(API_TAG, api.tag())
        .send()
        .await
        .map_err(api_error("CreateApiKey"))
}

/// Puts the key `key_id` in the usage plan `plan_id`.
pub(crate) async fn add_to_plan(client: &Client, plan_id: &str, key_id: &str) -> Result<(), GameError> {
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
async fn undo(client: &Client, error: GameError, plan_id: Option<&str>, key_id: &str) -> GameError {
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

fn throttle_settings(throttle: Throttle) -> ThrottleSettings {
    ThrottleSettings::builder()
        .rate_limit(throttle.rate)
        .burst_limit(throttle.burst)
        .build()
}

/// Checks a game's throttle and quota, those given: a positive, finite rate, a positive burst
/// and a positive quota.
pub(crate) fn check_limits(
    game: &str,
    rate: Option<f64>,
    burst: Option<i32>,
    quota: Option<Quota>,
) -> Result<(), GameError> {
    let invalid = |setting: &str, value: String, expected: &str| GameError::InvalidSetting {
        game: game.to_owned(),
        setting: setting.into(),
        value,
        expected: expected.into(),
    };
    if let Some(rate) = rate.filter(|r| !(r.is_finite() && *r > 0.0)) {
        return Err(invalid(
            "rate",
            rate.to_string(),
            "a positive number of requests a second",
        ));
    }
    if let Some(burst) = burst.filter(|b| *b <= 0) {
        return Err(invalid("burst", burst.to_string(), "a positive number of requests"));
    }
    if let Some(quota) = quota.filter(|q| q.limit <= 0) {
        return Err(invalid(
            "quota",
            quota.limit.to_string(),
            "a positive number of requests",
        ));
    }
    Ok(())
}

/// The lane a new game gets when none is asked for: of the lane count most of the stage's games
/// use (else [`DEFAULT_LANES`]), the one fewest of them have, the lowest of those.
pub fn free_lane(keys: &[GameKey]) -> Lane {
    let mut games: Vec<(&str, Lane)> = keys
        .iter()
        .filter(|k| k.enabled)
        .filter_map(|k| Some((k.game.as_str(), k.lane.as_deref()?.parse::<Lane>().ok()?)))
        .collect();
    games.sort_unstable_by_key(|(game, lane)| (*game, lane.index(), lane.count()));
    games.dedup_by_key(|(game, _)| *game);
    let mut counts: HashMap<u32, usize> = HashMap::new();
    for (_, lane) in &games {
        *counts.entry(lane.count()).or_default() += 1;
    }
    let count = counts
        .into_iter()
        .max_by_key(|&(count, games)| (games, std::cmp::Reverse(count)))
        .map_or(DEFAULT_LANES, |(count, _)| count);
    (0..count)
        .filter_map(|index| Lane::new(index, count))
        .min_by_key(|lane| (games.iter().filter(|(_, l)| l == lane).count(), lane.index()))
        .unwrap_or(Lane::WHOLE)
}

/// Creates `game`'s API key and its usage plan on `api`'s stage (`throttle`, `quota`, the game's
/// amount range and its lane: the one it has, else [`free_lane`]); the key's value is in the
/// answer, once. A game that has an enabled key
/// on that stage already is refused ([`GameError::Exists`]); another stack's game of the same
/// name is not this one. When a step fails, what the earlier steps created is deleted again, so
/// that no enabled key is left behind.
pub async fn add_game(
    client: &Client,
    api: &ApiStageRef,
    game: &Game,
    throttle: Throttle,
    quota: Option<Quota>,
) -> Result<GameKey, GameError> {
    check_limits(&game.id, Some(throttle.rate), Some(throttle.burst), quota)?;
    let keys = list_games(client, api).await?;
    if let Some(existing) = keys.iter().find(|k| k.game == game.id && k.enabled) {
        return Err(GameError::Exists {
            game: game.id.clone(),
            key_id: existing.key_id.clone(),
        });
    }
    let lane = game.lane.unwrap_or_else(|| free_lane(&keys));
    let key = create_key(client, api, &game.id, format!("Game clients of {}", game.id), None).await?;
    let key_id = key.id().unwrap_or_default().to_owned();
    let plan = create_plan(client, api, game, throttle, quota, lane).await;
    let plan_id = match plan {
        Ok(plan_id) => plan_id,
        Err(error) => return Err(undo(client, error, None, &key_id).await),
    };
    if let Err(error) = add_to_plan(client, &plan_id, &key_id).await {
        return Err(undo(client, error, Some(&plan_id), &key_id).await);
    }
    Ok(GameKey {
        game: game.id.clone(),
        pseudonymise: None,
        owned_by_stack: None,
        key_id,
        key: key.value().map(str::to_owned),
        enabled: true,
        usage_plan_id: Some(plan_id),
        min_amount: game.limits.min_amount,
        max_amount: game.limits.max_amount,
        throttle: Some(throttle),
        quota,
        lane: Some(lane.to_string()),
    })
}

/// Creates `game`'s usage plan on `api`'s stage, with `throttle`, `quota`, its amount range and
/// `lane`, holding no key yet; the plan's id.
pub(crate) async fn create_plan(
    client: &Client,
    api: &ApiStageRef,
    game: &Game,
    throttle: Throttle,
    quota: Option<Quota>,
    lane: Lane,
) -> Result<String, GameError> {
    let plan = client
        .create_usage_plan()
        .name(format!("lakelog-{}", game.id))
        .description(format!("The throttle of {}", game.id))
        .throttle(throttle_settings(throttle))
        .set_quota(quota.map(|q| {
            QuotaSettings::builder()
                .limit(q.limit)
                .period(q.period.as_str().into())
                .build()
        }))
        .api_stages(ApiStage::builder().api_id(&api.api_id).stage(&api.stage).build())
        .tags(GAME_TAG, &game.id)
        .tags(MIN_AMOUNT_TAG, game.limits.min_amount.to_string())
        .tags(MAX_AMOUNT_TAG, game.limits.max_amount.to_string())
        .tags(LANE_TAG, lane.to_string())
        .send()
        .await
        .map_err(api_error("CreateUsagePlan"))?;
    Ok(plan.id.unwrap_or_default())
}

/// Deletes the usage plan `plan` of `api`'s stage: a plan is deleted once no stage uses it, so
/// this stage is taken out first.
async fn delete_plan(client: &Client, api: &ApiStageRef, plan: &str) -> Result<(), GameError> {
    client
        .update_usage_plan()
        .usage_plan_id(plan)
        .patch_operations(
            PatchOperation::builder()
                .op(Op::Remove)
                .path("/apiStages")
                .value(format!("{}:{}", api.api_id, api.stage))
                .build(),
        )
        .send()
        .await
        .map_err(api_error("UpdateUsagePlan"))?;
    client
        .delete_usage_plan()
        .usage_plan_id(plan)
        .send()
        .await
        .map_err(api_error("DeleteUsagePlan"))?;
    Ok(())
}

/// What [`remove_stage_games`] removed (or, on a dry run, would remove) from a stage.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RemovedGames {
    /// The games' usage plans.
    pub usage_plans: Vec<String>,
    /// The games' API keys, enabled or not.
    pub keys: Vec<String>,
    /// The stage's Parameter Store parameters (the games' pseudonym keys).
    pub parameters: Vec<String>,
}

/// Removes every game of `api`'s stage for good, before or after its stack is deleted: the games'
/// usage plans (the stack's first game's too, which outlives the stack), every key made for the
/// stage (revoked ones too) and the stage's parameters under `/lakelog/API_ID/STAGE/` (pseudonym
/// keys: the games' pseudonyms become unlinkable). Another stage's games are untouched. With
/// `dry_run`, only says what it would remove.
pub async fn remove_stage_games(
    client: &Client,
    ssm: &aws_sdk_ssm::Client,
    api: &ApiStageRef,
    dry_run: bool,
) -> Result<RemovedGames, GameError> {
    let plans: Vec<String> = plans_of_stage(client, api)
        .await?
        .iter()
        .filter(|p| p.game().is_some())
        .map(|p| p.id().to_owned())
        .collect();
    let mut keys: Vec<String> = list_games(client, api).await?.into_iter().map(|k| k.key_id).collect();
    keys.sort();
    keys.dedup();
    let path = format!("/lakelog/{}/{}/", api.api_id, api.stage);
    let ssm_failed = |e: String| GameError::Secret {
        reference: format!("ssm:{path}"),
        reason: e,
    };
    let mut pages = ssm
        .get_parameters_by_path()
        .path(&path)
        .recursive(true)
        .into_paginator()
        .send();
    let mut parameters = Vec::new();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| ssm_failed(aws_sdk_ssm::error::DisplayErrorContext(e).to_string()))?;
        parameters.extend(page.parameters().iter().filter_map(|p| p.name().map(str::to_owned)));
    }
    let removed = RemovedGames {
        usage_plans: plans,
        keys,
        parameters,
    };
    if dry_run {
        return Ok(removed);
    }
    for plan in &removed.usage_plans {
        delete_plan(client, api, plan).await?;
    }
    for key in &removed.keys {
        match client.delete_api_key().api_key(key).send().await {
            Ok(_) => {}
            Err(e) if e.as_service_error().is_some_and(|s| s.is_not_found_exception()) => {}
            Err(e) => return Err(api_error("DeleteApiKey")(e)),
        }
    }
    for names in removed.parameters.chunks(10) {
        ssm.delete_parameters()
            .set_names(Some(names.to_vec()))
            .send()
            .await
            .map_err(|e| ssm_failed(aws_sdk_ssm::error::DisplayErrorContext(e).to_string()))?;
    }
    Ok(removed)
}

/// Takes `game` over from the stack that made it, once the stack no longer declares it: removes
/// [`STACK_OWNED_TAG`] from its usage plans, so that `lakelog games` changes it like any other.
pub async fn take_over(client: &Client, api: &ApiStageRef, game: &str) -> Result<(), GameError> {
    for plan in plans_of(&enabled_keys(client, api, game).await?) {
        client
            .untag_resource()
            .resource_arn(arn(client, &format!("/usageplans/{plan}"))?)
            .tag_keys(STACK_OWNED_TAG)
            .send()
            .await
            .map_err(api_error("UntagResource"))?;
    }
    Ok(())
}

/// Enables the API key `key_id` again (a key `revoke` or `retire` disabled) and tags it with
/// `game` and `api`'s stage.
pub(crate) async fn enable_key(client: &Client, api: &ApiStageRef, game: &str, key_id: &str) -> Result<(), GameError> {
    client
        .update_api_key()
        .api_key(key_id)
        .patch_operations(
            PatchOperation::builder()
                .op(Op::Replace)
                .path("/enabled")
                .value("true")
                .build(),
        )
        .send()
        .await
        .map_err(api_error("UpdateApiKey"))?;
    tag(
        client,
        &format!("/apikeys/{key_id}"),
        &[(GAME_TAG, game.to_owned()), (API_TAG, api.tag())],
    )
    .await
}

/// Gives `game` a second enabled key on `api`'s stage, beside the one its clients use, in the same
/// usage plan (the same settings): clients move to it while the old key still works, and
/// [`retire_key`] takes the old one out once they have. The new key's value is in the answer,
/// once; if putting it in the plan fails, it is deleted again.
pub async fn rotate_game(client: &Client, api: &ApiStageRef, game: &str) -> Result<GameKey, GameError> {
    let current = enabled_keys(client, api, game).await?.remove(0);
    let plan_id = current.usage_plan_id.clone().unwrap_or_default();
    let description = format!("Game clients of {game} (rotated from {})", current.key_id);
    let key = create_key(client, api, game, description, None).await?;
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

/// Changes the settings of `game`'s usage plan on `api`'s stage in place: its keys, and the
/// clients that hold them, keep working. API Gateway applies a throttle or quota at once; the
/// function reads a new amount range within [`super::KEY_CACHE_TTL`]. Returns the game's enabled
/// keys with their new settings.
pub async fn set_game(
    client: &Client,
    api: &ApiStageRef,
    game: &str,
    changes: Changes,
) -> Result<Vec<GameKey>, GameError> {
    let keys = enabled_keys(client, api, game).await?;
    let current = &keys[0];
    check_limits(game, changes.rate, changes.burst, changes.quota.flatten())?;
    let amounts = (changes.min_amount.is_some() || changes.max_amount.is_some())
        .then(|| {
            Game::new(game)?.with_amounts(
                changes.min_amount.unwrap_or(current.min_amount),
                changes.max_amount.unwrap_or(current.max_amount),
            )
        })
        .transpose()?;
    let replace = |path: &str, value: String| {
        PatchOperation::builder()
            .op(Op::Replace)
            .path(path)
            .value(value)
            .build()
    };
    let mut patch = Vec::new();
    if let Some(rate) = changes.rate {
        patch.push(replace("/throttle/rateLimit", rate.to_string()));
    }
    if let Some(burst) = changes.burst {
        patch.push(replace("/throttle/burstLimit", burst.to_string()));
    }
    match changes.quota {
        Some(Some(quota)) => {
            patch.push(replace("/quota/limit", quota.limit.to_string()));
            patch.push(replace("/quota/period", quota.period.as_str().to_owned()));
        }
        Some(None) if current.quota.is_some() => {
            patch.push(PatchOperation::builder().op(Op::Remove).path("/quota").build());
        }
        _ => {}
    }
    for plan in plans_of(&keys) {
        if !patch.is_empty() {
            client
                .update_usage_plan()
                .usage_plan_id(&plan)
                .set_patch_operations(Some(patch.clone()))
                .send()
                .await
                .map_err(api_error("UpdateUsagePlan"))?;
        }
        let mut tags = Vec::new();
        if let Some(game) = &amounts {
            tags.push((MIN_AMOUNT_TAG, game.limits.min_amount.to_string()));
            tags.push((MAX_AMOUNT_TAG, game.limits.max_amount.to_string()));
        }
        if let Some(lane) = changes.lane {
            tags.push((LANE_TAG, lane.to_string()));
        }
        if !tags.is_empty() {
            tag(client, &format!("/usageplans/{plan}"), &tags).await?;
        }
    }
    Ok(list_games(client, api)
        .await?
        .into_iter()
        .filter(|k| k.game == game && k.enabled)
        .collect())
}

/// Pseudonymises `params` of `game`'s events on `api`'s stage from now on (`Some`), or stops
/// (`None`). The game's key is created first when it has none (32 random bytes, as a SecureString
/// parameter named by [`pseudonym_key_name`]; an existing one is kept, so the game's pseudonyms
/// stay the same), then its usage plans are tagged with the tag `lakelog:pseudonymise`: the function never
/// sees the tag without a key to read. The function follows within [`crate::games::KEY_CACHE_TTL`].
pub async fn pseudonymise_game(
    client: &Client,
    ssm: &aws_sdk_ssm::Client,
    api: &ApiStageRef,
    game: &str,
    params: Option<&str>,
) -> Result<(), GameError> {
    let keys = enabled_keys(client, api, game).await?;
    let plans = plans_of(&keys);
    let Some(params) = params else {
        for plan in plans {
            client
                .untag_resource()
                .resource_arn(arn(client, &format!("/usageplans/{plan}"))?)
                .tag_keys(PSEUDONYMISE_TAG)
                .send()
                .await
                .map_err(api_error("UntagResource"))?;
        }
        return Ok(());
    };
    let key: String = (0..32).map(|_| format!("{:02x}", rand::random::<u8>())).collect();
    // The names are checked before anything is written.
    crate::pseudonym::Pseudonym::new(params, key.clone().into_bytes()).map_err(|e| GameError::InvalidSetting {
        game: game.to_owned(),
        setting: "pseudonymise".into(),
        value: params.to_owned(),
        expected: e.to_string(),
    })?;
    put_pseudonym_key(ssm, api, game, &key).await?;
    for plan in plans {
        tag(
            client,
            &format!("/usageplans/{plan}"),
            &[(PSEUDONYMISE_TAG, params.to_owned())],
        )
        .await?;
    }
    Ok(())
}

/// Makes `key` `game`'s pseudonym key on `api`'s stage unless it has one already (which is kept,
/// so that the game's pseudonyms stay the same); whether it was made.
pub(crate) async fn put_pseudonym_key(
    ssm: &aws_sdk_ssm::Client,
    api: &ApiStageRef,
    game: &str,
    key: &str,
) -> Result<bool, GameError> {
    let name = pseudonym_key_name(api, game);
    let put = ssm
        .put_parameter()
        .name(&name)
        .value(key)
        .r#type(aws_sdk_ssm::types::ParameterType::SecureString)
        .description(format!(
            "lakelog: the pseudonym key of the game {game}; deleting it makes its pseudonyms unlinkable"
        ))
        .overwrite(false)
        .send()
        .await;
    match put {
        Ok(_) => Ok(true),
        Err(e) if e.as_service_error().is_some_and(|e| e.is_parameter_already_exists()) => Ok(false),
        Err(e) => Err(GameError::PseudonymKey {
            game: game.to_owned(),
            parameter: name,
            reason: aws_sdk_ssm::error::DisplayErrorContext(e).to_string(),
        }),
    }
}

/// Takes `key` out of its game: tags it with `api`'s stage (so that `list` still shows it),
/// disables it and removes it from its usage plan.
async fn take_out(client: &Client, api: &ApiStageRef, key: &mut GameKey) -> Result<(), GameError> {
    tag(
        client,
        &format!("/apikeys/{}", key.key_id),
        &[(GAME_TAG, key.game.clone()), (API_TAG, api.tag())],
    )
    .await?;
    client
        .update_api_key()
        .api_key(&key.key_id)
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
    if let Some(plan) = key.usage_plan_id.take() {
        match client
            .delete_usage_plan_key()
            .usage_plan_id(&plan)
            .key_id(&key.key_id)
            .send()
            .await
        {
            Ok(_) => {}
            Err(e) if e.as_service_error().is_some_and(|s| s.is_not_found_exception()) => {}
            Err(e) => return Err(api_error("DeleteUsagePlanKey")(e)),
        }
    }
    key.enabled = false;
    key.throttle = None;
    key.quota = None;
    key.lane = None;
    Ok(())
}

/// Takes one key of `game` on `api`'s stage, `key_id`, out of use once its clients moved to the
/// key [`rotate_game`] gave: it is disabled and leaves the game's usage plan, and the game's other
/// keys go on working. The game's last enabled key is not retired ([`GameError::LastKey`]):
/// [`revoke_game`] does that, on purpose.
pub async fn retire_key(client: &Client, api: &ApiStageRef, game: &str, key_id: &str) -> Result<GameKey, GameError> {
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
    take_out(client, api, &mut key).await?;
    Ok(key)
}

/// Revokes `game` on `api`'s stage: disables its keys (API Gateway refuses them from then on,
/// within the minute its caches take) and deletes its usage plan. The other games' keys, and
/// another stack's game of the same name, are untouched. Returns the keys revoked.
pub async fn revoke_game(client: &Client, api: &ApiStageRef, game: &str) -> Result<Vec<GameKey>, GameError> {
    let mut keys = enabled_keys(client, api, game).await?;
    let plans = plans_of(&keys);
    for key in &mut keys {
        take_out(client, api, key).await?;
    }
    for plan in plans {
        delete_plan(client, api, &plan).await?;
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(game: &str, lane: Option<&str>, enabled: bool) -> GameKey {
        GameKey {
            game: game.into(),
            key_id: format!("{game}-key"),
            key: None,
            enabled,
            usage_plan_id: None,
            min_amount: 0.0,
            max_amount: 1.0,
            throttle: None,
            quota: None,
            lane: lane.map(str::to_owned),
            pseudonymise: None,
            owned_by_stack: None,
        }
    }

    #[test]
    fn throttles_and_quotas_are_positive() {
        let quota = |limit| Quota {
            limit,
            period: QuotaPeriod::Day,
        };
        assert!(check_limits("g", Some(10.5), Some(20), Some(quota(1))).is_ok());
        assert!(check_limits("g", None, None, None).is_ok());
        let err = |rate, burst, q| check_limits("g", rate, burst, q).unwrap_err().to_string();
        assert_eq!(
            err(Some(0.0), None, None),
            "game g: rate \"0\": expected a positive number of requests a second"
        );
        assert!(err(Some(f64::INFINITY), None, None).contains("rate"));
        assert!(err(None, Some(0), None).contains("burst \"0\""));
        assert!(err(None, None, Some(quota(-5))).contains("quota \"-5\""));
    }

    #[test]
    fn a_new_game_gets_the_least_used_lane() {
        assert_eq!(free_lane(&[]), Lane::new(0, DEFAULT_LANES).unwrap());
        let keys = [
            key("a", Some("0/4"), true),
            key("a", Some("0/4"), true), // a rotated key: one game still
            key("b", Some("1/4"), true),
            key("c", Some("0/4"), true),
            key("gone", Some("2/4"), false),
            key("old", None, true),
        ];
        assert_eq!(free_lane(&keys), Lane::new(2, 4).unwrap());
        // The lane count most games use wins.
        let keys = [
            key("a", Some("0/2"), true),
            key("b", Some("1/2"), true),
            key("c", Some("3/8"), true),
        ];
        assert_eq!(free_lane(&keys), Lane::new(0, 2).unwrap());
    }
}
