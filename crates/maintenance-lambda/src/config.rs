//! Configuration: the tables of the deployment and the maintenance settings, read and validated
//! once at cold start.

use std::time::Duration;

use chrono::TimeDelta;
pub use env_config::ConfigError;
use env_config::{TABLE_LOCATION_FORMS, Vars, is_table_location};
use lake::maintenance::MIN_VACUUM_RETENTION;

/// Where the tables of one `LAKE_TABLES` entry are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// One table.
    Table(String),
    /// Every Delta table directly under this prefix (the entry ended in `/*`), listed at each run:
    /// the access-log tables, one per observed bucket, appear as buckets start logging.
    Prefix(String),
}

/// One entry of `LAKE_TABLES`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableEntry {
    /// The table or tables.
    pub location: Location,
    /// The key whose duplicates compaction removes: a column, or columns joined by `+`
    /// (`gameId+eventId` for game events).
    pub dedup_key: Option<String>,
    /// Days of date partitions the tables keep (`None`: every day); older ones are dropped and
    /// their files deleted.
    pub retain_days: Option<u32>,
}

impl TableEntry {
    /// Parses `LOCATION[#dedup=COLUMN[+COLUMN...]][#retain-days=DAYS]`, where a location ending
    /// in `/*` stands for every table directly under it.
    pub fn parse(entry: &str) -> Result<Self, ConfigError> {
        let invalid = |reason: &str| ConfigError::invalid("LAKE_TABLES", entry, reason);
        let mut parts = entry.split('#');
        let location = parts.next().unwrap_or_default();
        let (mut dedup_key, mut retain_days) = (None, None);
        for option in parts {
            match option.split_once('=') {
                Some(("dedup", key)) if key.split('+').all(is_column_name) => dedup_key = Some(key.to_owned()),
                Some(("dedup", _)) => {
                    return Err(invalid(
                        "the dedup key must be a plain column name, or names joined by +",
                    ));
                }
                // 0 keeps every day: the template's default.
                Some(("retain-days", "0")) => retain_days = None,
                Some(("retain-days", days)) => match days.parse::<u32>() {
                    Ok(days) if days <= 36_500 => retain_days = Some(days),
                    _ => return Err(invalid("retain-days must be a number of days from 0 to 36500")),
                },
                _ => {
                    return Err(invalid(
                        "the options are #dedup=COLUMN[+COLUMN...] and #retain-days=DAYS",
                    ));
                }
            }
        }
        if !is_table_location(location) {
            return Err(invalid(TABLE_LOCATION_FORMS));
        }
        let location = match location.strip_suffix("/*") {
            Some(prefix) if !prefix.is_empty() && !prefix.ends_with("//") => Location::Prefix(prefix.to_owned()),
            Some(_) => return Err(invalid("a prefix needs a bucket or folder before /*")),
            None if location.contains('*') || location.contains('{') => {
                return Err(invalid("the only pattern is a final /* for every table under a prefix"));
            }
            None if location.is_empty() => return Err(invalid("empty location")),
            None => Location::Table(location.to_owned()),
        };
        Ok(Self {
            location,
            dedup_key,
            retain_days,
        })
    }
}

fn is_column_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The variable naming the folder of erasure requests.
pub const ERASURE_REQUESTS_VAR: &str = "ERASURE_REQUESTS_URI";

/// The game events API whose games' pseudonym keys erasures read.
pub const API_ID_VAR: &str = "GAME_EVENTS_API_ID";

/// That API's stage.
pub const API_STAGE_VAR: &str = "GAME_EVENTS_API_STAGE";

/// The settings of the maintenance function, as it reads them from its environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `LAKE_TABLES`: the tables to maintain, separated by commas or white space.
    pub tables: Vec<TableEntry>,
    /// `COMPACT_TARGET_FILE_MB`: target size of compacted files, in MiB (default 128).
    pub target_file_size: u64,
    /// `COMPACT_GRACE_HOURS`: a partition is compacted once its date ended this long ago
    /// (default 48).
    pub grace: TimeDelta,
    /// `VACUUM_RETENTION_HOURS`: VACUUM deletes files removed longer ago (default and minimum
    /// 168, 7 days; the function never forces a shorter one).
    pub vacuum_retention: TimeDelta,
    /// `COMPACT_DEDUP_MEMORY_MB`: MiB the keys of new rows may take while compaction looks for
    /// duplicates (more are taken in passes). Default: half the function's memory
    /// (`AWS_LAMBDA_FUNCTION_MEMORY_SIZE`, which Lambda sets from the template's `MemorySize`),
    /// or 512 outside Lambda.
    pub dedup_memory: u64,
    /// `MAINTENANCE_RESERVE_SECONDS`: no new work starts when less than this is left of the
    /// invocation (default 180).
    pub reserve: Duration,
    /// `MAINTENANCE_STATE_URI`: the folder of the rotation's state (`s3://bucket/prefix` or a local
    /// directory); unset, tables are taken in a rotation by the hour of the event.
    pub state: Option<String>,
    /// `ERASURE_REQUESTS_URI`: a folder of erasure requests, taken at the start of each pass,
    /// with the game tables they erase from; unset, none.
    pub erasure: Option<ErasureConfig>,
}

/// Where erasure requests come from, and the tables they erase from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErasureConfig {
    /// `ERASURE_REQUESTS_URI`: the folder of requests (`{"game", "players", "idParam"}` JSON
    /// objects at its top); each receipt is written under `receipts/`.
    pub requests: String,
    /// `GAME_EVENTS_TABLE_URI` (required with requests), `GAME_EVENTS_REJECTS_TABLE_URI` (the
    /// table with `_rejects` by default) and `GAME_EVENTS_PARKING_URI`.
    pub targets: game_sink::erasure::ErasureTargets,
    /// `GAME_EVENTS_API_ID` and `GAME_EVENTS_API_STAGE` (default `prod`): the API whose games'
    /// pseudonym keys are read from Parameter Store, so that a request naming a pseudonymising
    /// game's players by their ids erases the rows of their pseudonyms; unset, keys are not read
    /// (such a request matches nothing and is moved to `unmatched/`).
    pub api: Option<game_api::ApiStageRef>,
}

impl Config {
    /// Reads the settings through `var` (the process environment in the Lambda).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let vars = Vars::new(var);
        let tables = vars.optional("LAKE_TABLES").unwrap_or_default();
        let tables = tables
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|e| !e.is_empty())
            .map(TableEntry::parse)
            .collect::<Result<Vec<_>, _>>()?;
        if tables.is_empty() {
            return Err(ConfigError::Missing { name: "LAKE_TABLES" });
        }
        let min_retention = MIN_VACUUM_RETENTION.num_hours() as u64;
        let target_mb = vars.number("COMPACT_TARGET_FILE_MB", 128, 1..=4096)?;
        let grace_hours = vars.number("COMPACT_GRACE_HOURS", 48, 0..=24 * 366)?;
        let retention_hours = vars.number("VACUUM_RETENTION_HOURS", min_retention, min_retention..=24 * 3660)?;
        let reserve = vars.number("MAINTENANCE_RESERVE_SECONDS", 180, 0..=900)?;
        let function_memory = vars.number("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", 1024, 128..=10_240)?;
        let dedup_memory = vars.number("COMPACT_DEDUP_MEMORY_MB", function_memory / 2, 16..=10_240)?;
        let state = vars
            .optional("MAINTENANCE_STATE_URI")
            .map(|uri| env_config::table_location("MAINTENANCE_STATE_URI", &uri))
            .transpose()?;
        let erasure = match vars.optional(ERASURE_REQUESTS_VAR) {
            None => None,
            Some(uri) => {
                let requests = env_config::table_location(ERASURE_REQUESTS_VAR, &uri)?;
                // The game tables as the sink finds them (the rejects beside the events by default).
                let tables = game_sink::Config::new(
                    &vars.required(game_sink::config::EVENTS_TABLE_VAR)?,
                    vars.optional(game_sink::config::REJECTS_TABLE_VAR).as_deref(),
                )?;
                let parked = vars
                    .optional(game_sink::config::PARKING_VAR)
                    .map(|p| env_config::table_location(game_sink::config::PARKING_VAR, &p))
                    .transpose()?;
                let api = vars.optional(API_ID_VAR).map(|api_id| game_api::ApiStageRef {
                    api_id,
                    stage: vars.optional(API_STAGE_VAR).unwrap_or_else(|| "prod".to_owned()),
                });
                Some(ErasureConfig {
                    api,
                    requests,
                    targets: game_sink::erasure::ErasureTargets::of(tables, parked),
                })
            }
        };
        Ok(Self {
            state,
            erasure,
            tables,
            target_file_size: target_mb << 20,
            dedup_memory: dedup_memory << 20,
            grace: TimeDelta::hours(grace_hours as i64),
            vacuum_retention: TimeDelta::hours(retention_hours as i64),
            reserve: Duration::from_secs(reserve),
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
    fn tables_and_defaults() {
        let c = config(&[(
            "LAKE_TABLES",
            "s3://lake/access_logs/*, s3://lake/game_events#dedup=gameId+eventId#retain-days=400\n./local/t#retain-days=0",
        )])
        .unwrap();
        assert_eq!(
            c.tables,
            vec![
                TableEntry {
                    location: Location::Prefix("s3://lake/access_logs".into()),
                    dedup_key: None,
                    retain_days: None
                },
                TableEntry {
                    location: Location::Table("s3://lake/game_events".into()),
                    dedup_key: Some("gameId+eventId".into()),
                    retain_days: Some(400)
                },
                TableEntry {
                    location: Location::Table("./local/t".into()),
                    dedup_key: None,
                    retain_days: None
                },
            ]
        );
        assert_eq!(c.target_file_size, 128 << 20);
        assert_eq!(c.dedup_memory, 512 << 20);
        assert_eq!(c.grace, TimeDelta::hours(48));
        assert_eq!(c.vacuum_retention, TimeDelta::days(7));
        assert_eq!(c.reserve, Duration::from_secs(180));
        let c = config(&[
            ("LAKE_TABLES", "s3://lake/t"),
            ("COMPACT_TARGET_FILE_MB", "64"),
            ("COMPACT_GRACE_HOURS", "0"),
            ("VACUUM_RETENTION_HOURS", "720"),
            ("MAINTENANCE_RESERVE_SECONDS", "60"),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "3008"),
        ])
        .unwrap();
        assert_eq!(c.target_file_size, 64 << 20);
        assert_eq!(c.dedup_memory, 1504 << 20, "half the function's memory");
        assert_eq!(c.grace, TimeDelta::zero());
        assert_eq!(c.vacuum_retention, TimeDelta::days(30));
        assert_eq!(c.reserve, Duration::from_secs(60));
        let c = config(&[("LAKE_TABLES", "s3://lake/t"), ("COMPACT_DEDUP_MEMORY_MB", "900")]).unwrap();
        assert_eq!(c.dedup_memory, 900 << 20);
    }

    #[test]
    fn bad_settings_name_the_variable_and_entry() {
        assert_eq!(config(&[]).unwrap_err().to_string(), "LAKE_TABLES is not set");
        assert_eq!(
            config(&[("LAKE_TABLES", " , ")]).unwrap_err().to_string(),
            "LAKE_TABLES is not set"
        );
        for (entry, reason) in [
            ("s3://lake/t#dedup=event-id", "plain column name"),
            ("s3://lake/t#dedup=", "plain column name"),
            ("s3://lake/t#retain-days=-1", "from 0 to 36500"),
            ("s3://lake/t#keep=1", "#retain-days=DAYS"),
            ("s3://lake/t#key=eventId", "the options are"),
            ("gs://lake/t", "use s3://"),
            ("s3://lake/*/t", "the only pattern"),
            ("s3:///*", "needs a bucket"),
            ("s3://lake/{bucket}", "the only pattern"),
        ] {
            let err = config(&[("LAKE_TABLES", &format!("s3://ok/t,{entry}"))]).unwrap_err();
            let text = err.to_string();
            assert!(text.starts_with(&format!("LAKE_TABLES={entry:?}")), "{text}");
            assert!(text.contains(reason), "{entry}: {text}");
        }
        let err = config(&[("LAKE_TABLES", "s3://l/t"), ("VACUUM_RETENTION_HOURS", "24")]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("VACUUM_RETENTION_HOURS=\"24\": expected a whole number from 168"),
            "{err}"
        );
        let err = config(&[("LAKE_TABLES", "s3://l/t"), ("COMPACT_TARGET_FILE_MB", "big")]).unwrap_err();
        assert!(err.to_string().starts_with("COMPACT_TARGET_FILE_MB"), "{err}");
        let err = config(&[("LAKE_TABLES", "s3://l/t"), ("MAINTENANCE_RESERVE_SECONDS", "901")]).unwrap_err();
        assert!(err.to_string().starts_with("MAINTENANCE_RESERVE_SECONDS"), "{err}");
    }
}
