//! Configuration: the stream, the partition key and the time budget, read and validated once.

use std::time::Duration;

pub use env_config::ConfigError;
use env_config::Vars;

use crate::deliver::DeliveryConfig;
use crate::games::ApiStageRef;
use crate::request::MAX_BODY_BYTES;
use crate::sink::StreamRef;

/// How records are spread over shards.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PartitionKey {
    /// A random key per event (its `eventId`, a random UUID unless the client sent one): even
    /// spread over shards, as in the seed.
    #[default]
    Random,
    /// `eventParams.device_id`, so that each device's events keep their order in one shard; events
    /// without a device id (or with one longer than Kinesis' 256 characters) fall back to their
    /// `eventId`.
    DeviceId,
}

impl PartitionKey {
    /// `random` or `device_id` (also `device-id`).
    pub fn parse(name: &'static str, value: &str) -> Result<Self, ConfigError> {
        match value.trim().to_ascii_lowercase().as_str() {
            "" | "random" => Ok(Self::Random),
            "device_id" | "device-id" => Ok(Self::DeviceId),
            _ => Err(ConfigError::invalid(name, value, "expected random or device_id")),
        }
    }
}

/// How a request's events travel in the stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RecordFormat {
    /// The events of a request that share a partition key in one compressed record
    /// (`lakelog-packed/1`, [`game_events::packed`]): Kinesis bills and limits records, and a
    /// request's events then cost one or a few instead of one each.
    #[default]
    Packed,
    /// One event a record, in the seed's shape: for readers of the stream that expect it (the
    /// seed's Spark reader).
    Seed,
}

impl RecordFormat {
    /// `packed` or `seed`.
    pub fn parse(name: &'static str, value: &str) -> Result<Self, ConfigError> {
        match value.trim().to_ascii_lowercase().as_str() {
            "" | "packed" => Ok(Self::Packed),
            "seed" => Ok(Self::Seed),
            _ => Err(ConfigError::invalid(name, value, "expected packed or seed")),
        }
    }
}

/// What the handler needs besides the sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiConfig {
    /// How records are spread over shards.
    pub partition_key: PartitionKey,
    /// How a request's events travel in the stream.
    pub record_format: RecordFormat,
    /// Retries and their time budget.
    pub delivery: DeliveryConfig,
    /// The largest body, decoded and decompressed.
    pub max_body_bytes: usize,
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            partition_key: PartitionKey::Random,
            record_format: RecordFormat::Packed,
            delivery: DeliveryConfig::default(),
            max_body_bytes: MAX_BODY_BYTES,
        }
    }
}

impl ApiConfig {
    /// Seconds a client should wait before resending what was not written: the longest backoff,
    /// rounded up, at least 1.
    pub fn retry_after_seconds(&self) -> u64 {
        self.delivery.max_backoff.as_secs_f64().ceil().max(1.0) as u64
    }
}

/// The settings of the `game-api-lambda` function, from its environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `GAME_EVENTS_STREAM`: the Kinesis stream's name or ARN.
    pub stream: StreamRef,
    /// The handler's settings: `GAME_EVENTS_PARTITION_KEY` (`random` or `device_id`, default
    /// `random`), `GAME_EVENTS_RECORD_FORMAT` (`packed` or `seed`, default `packed`) and
    /// `GAME_EVENTS_WRITE_BUDGET_MS` (time for writing and retrying, 100 to 12000 ms, default
    /// 10000).
    pub api: ApiConfig,
    /// `GAME_EVENTS_KEYS_STAGE` (`API_ID/STAGE`), set when the HTTP API front is on: the REST API
    /// stage whose keys the function checks itself for the requests that front hands it
    /// ([`crate::ApiGatewayGames::with_front_stage`]).
    pub keys_stage: Option<ApiStageRef>,
}

/// The least and the most time a request may spend writing: the function's timeout is 15 s
/// (template.yaml), and a budget beyond 12 s would leave it no time to answer the 503 for what
/// is left, so Lambda would cut the request off and the client would get a 502 instead.
pub const BUDGET_RANGE_MS: std::ops::RangeInclusive<u64> = 100..=12_000;

impl Config {
    /// Reads the settings through `var` (the process environment in the Lambda).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let vars = Vars::new(var);
        let stream = vars.required("GAME_EVENTS_STREAM")?;
        let partition_key = match vars.optional("GAME_EVENTS_PARTITION_KEY") {
            Some(value) => PartitionKey::parse("GAME_EVENTS_PARTITION_KEY", &value)?,
            None => PartitionKey::Random,
        };
        let record_format = match vars.optional("GAME_EVENTS_RECORD_FORMAT") {
            Some(value) => RecordFormat::parse("GAME_EVENTS_RECORD_FORMAT", &value)?,
            None => RecordFormat::Packed,
        };
        let mut delivery = DeliveryConfig::default();
        let default_budget = u64::try_from(delivery.budget.as_millis()).unwrap_or(u64::MAX);
        let budget = vars.number("GAME_EVENTS_WRITE_BUDGET_MS", default_budget, BUDGET_RANGE_MS)?;
        delivery.budget = Duration::from_millis(budget);
        let keys_stage = vars
            .optional("GAME_EVENTS_KEYS_STAGE")
            .map(|value| {
                value
                    .trim()
                    .parse::<ApiStageRef>()
                    .map_err(|expected| ConfigError::invalid("GAME_EVENTS_KEYS_STAGE", value.as_str(), expected))
            })
            .transpose()?;
        Ok(Self {
            stream: StreamRef::parse(&stream),
            api: ApiConfig {
                partition_key,
                record_format,
                delivery,
                max_body_bytes: MAX_BODY_BYTES,
            },
            keys_stage,
        })
    }

    /// Reads the settings from the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_vars(env_config::env_var)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        Config::from_vars(env_config::from_pairs(vars))
    }

    #[test]
    fn defaults() {
        let c = config(&[("GAME_EVENTS_STREAM", "game-events")]).unwrap();
        assert_eq!(c.stream, StreamRef::Name("game-events".into()));
        assert_eq!(c.api, ApiConfig::default());
        assert_eq!(c.api.delivery.budget, Duration::from_secs(10));
        assert_eq!(c.api.retry_after_seconds(), 2);
        let c = config(&[
            ("GAME_EVENTS_STREAM", "arn:aws:kinesis:us-east-1:1:stream/s"),
            ("GAME_EVENTS_PARTITION_KEY", "device_id"),
            ("GAME_EVENTS_RECORD_FORMAT", "seed"),
            ("GAME_EVENTS_WRITE_BUDGET_MS", "2500"),
        ])
        .unwrap();
        assert_eq!(c.api.record_format, RecordFormat::Seed);
        assert!(matches!(c.stream, StreamRef::Arn(_)));
        assert_eq!(c.api.partition_key, PartitionKey::DeviceId);
        assert_eq!(c.api.delivery.budget, Duration::from_millis(2500));
        assert_eq!(c.keys_stage, None);
        let c = config(&[("GAME_EVENTS_STREAM", "s"), ("GAME_EVENTS_KEYS_STAGE", "a1b2c3/prod")]).unwrap();
        assert_eq!(
            c.keys_stage,
            Some(ApiStageRef {
                api_id: "a1b2c3".into(),
                stage: "prod".into()
            })
        );
    }

    #[test]
    fn bad_settings_name_the_variable() {
        assert_eq!(config(&[]).unwrap_err().to_string(), "GAME_EVENTS_STREAM is not set");
        assert_eq!(
            config(&[("GAME_EVENTS_STREAM", " ")]).unwrap_err().to_string(),
            "GAME_EVENTS_STREAM is not set"
        );
        let err = config(&[("GAME_EVENTS_STREAM", "s"), ("GAME_EVENTS_PARTITION_KEY", "user")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "GAME_EVENTS_PARTITION_KEY=\"user\": expected random or device_id"
        );
        let err = config(&[("GAME_EVENTS_STREAM", "s"), ("GAME_EVENTS_RECORD_FORMAT", "json")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "GAME_EVENTS_RECORD_FORMAT=\"json\": expected packed or seed"
        );
        for bad in ["prod", "/prod", "a1b2c3/", "a/b/c"] {
            let err = config(&[("GAME_EVENTS_STREAM", "s"), ("GAME_EVENTS_KEYS_STAGE", bad)]).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("GAME_EVENTS_KEYS_STAGE={bad:?}: expected API_ID/STAGE")
            );
        }
        for bad in ["0", "12001", "30000", "ten"] {
            let err = config(&[("GAME_EVENTS_STREAM", "s"), ("GAME_EVENTS_WRITE_BUDGET_MS", bad)]).unwrap_err();
            assert!(err.to_string().starts_with("GAME_EVENTS_WRITE_BUDGET_MS="), "{err}");
        }
    }
}
