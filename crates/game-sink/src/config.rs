//! Configuration: where the tables are, read and validated once.

use std::time::Duration;

pub use env_config::ConfigError;
use env_config::{Vars, table_location};
pub use lake::maintenance::Settle;

/// The `game_events` table: `s3://bucket/prefix`, `file:///path` or a local path.
pub const EVENTS_TABLE_VAR: &str = "GAME_EVENTS_TABLE_URI";
/// The rejects table; default: the events table's location with `_rejects` appended.
pub const REJECTS_TABLE_VAR: &str = "GAME_EVENTS_REJECTS_TABLE_URI";

/// Where records that could not be committed before the stream would drop them are parked
/// (`s3://bucket/prefix` or a local directory); unset, nothing is parked.
pub const PARKING_VAR: &str = "GAME_EVENTS_PARKING_URI";
/// Hours the stream keeps records (default 24, Kinesis' own default).
pub const RETENTION_VAR: &str = "GAME_EVENTS_STREAM_RETENTION_HOURS";
/// Small files in a table's open partitions after which the sink packs them, between its commits
/// (default [`Settle::DEFAULT_FILES`]; 0: never, leaving them to the maintenance pass).
pub const SETTLE_FILES_VAR: &str = "GAME_EVENTS_SETTLE_FILES";

/// Seconds between the committer's passes (default 5).
pub const COMMIT_INTERVAL_VAR: &str = "GAME_EVENTS_COMMIT_INTERVAL_SECONDS";

/// How long before the stream drops a record a batch that still cannot be committed is parked.
pub const PARK_MARGIN: Duration = Duration::from_secs(6 * 3600);

/// Where the sink writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The `game_events` table.
    pub events_table: String,
    /// The `game_events_rejects` table.
    pub rejects_table: String,
    /// Where to park records that could not be committed in time, and after how long.
    pub parking: Option<Parking>,
    /// When the sink packs the small files of the open partitions; `None`: never.
    pub settle: Option<Settle>,
    /// Time between the committer's passes: the tables see a commit each at most this often.
    pub commit_interval: Duration,
    /// Whether the sink adds the columns of this release that a table lacks (the function, whose
    /// release owns the tables' schema, does); a command run by hand does only when asked.
    pub evolve_schema: bool,
}

/// Parking of records the tables could not take in time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parking {
    /// The folder of parked records.
    pub folder: String,
    /// A batch whose oldest record arrived this long ago is parked rather than retried: the
    /// stream's retention less [`PARK_MARGIN`] (at least an hour).
    pub after: Duration,
}

impl Parking {
    /// Parking in `folder`, for a stream that keeps records `retention_hours`.
    pub fn new(folder: &str, retention_hours: u64) -> Result<Self, ConfigError> {
        Ok(Self {
            folder: table_location(PARKING_VAR, folder)?,
            after: Duration::from_secs(retention_hours * 3600)
                .saturating_sub(PARK_MARGIN)
                .max(Duration::from_secs(3600)),
        })
    }
}

impl Config {
    /// The tables at `events_table`, with the rejects table beside it unless given.
    pub fn new(events_table: &str, rejects_table: Option<&str>) -> Result<Self, ConfigError> {
        let events_table = table_location(EVENTS_TABLE_VAR, events_table)?;
        let rejects_table = match rejects_table.map(str::trim).filter(|r| !r.is_empty()) {
            Some(rejects) => table_location(REJECTS_TABLE_VAR, rejects)?,
            None => format!("{}_rejects", events_table.trim_end_matches('/')),
        };
        if rejects_table.trim_end_matches('/') == events_table.trim_end_matches('/') {
            return Err(ConfigError::invalid(
                REJECTS_TABLE_VAR,
                rejects_table,
                "must not be the events table",
            ));
        }
        Ok(Self {
            events_table,
            rejects_table,
            parking: None,
            settle: Some(Settle::default()),
            commit_interval: Duration::from_secs(5),
            evolve_schema: true,
        })
    }

    /// The same tables, opened only if they have every column of this release
    /// ([`lake::TableSpec::with_schema_changes`]) unless `evolve`.
    pub fn with_schema_changes(mut self, evolve: bool) -> Self {
        self.evolve_schema = evolve;
        self
    }

    /// The same tables, parking what cannot be committed in time as `parking` says.
    pub fn with_parking(mut self, parking: Parking) -> Self {
        self.parking = Some(parking);
        self
    }

    /// The same tables, packing small files as `settle` says (`None`: never).
    pub fn with_settle(mut self, settle: Option<Settle>) -> Self {
        self.settle = settle;
        self
    }

    /// Reads [`EVENTS_TABLE_VAR`], [`REJECTS_TABLE_VAR`], [`PARKING_VAR`], [`RETENTION_VAR`],
    /// [`SETTLE_FILES_VAR`] and [`COMMIT_INTERVAL_VAR`].
    pub fn from_env() -> Result<Self, ConfigError> {
        let vars = Vars::env();
        let events = vars.required(EVENTS_TABLE_VAR)?;
        let settle_files = vars.number(SETTLE_FILES_VAR, Settle::DEFAULT_FILES as u64, 0..=1_000_000)?;
        let config = Self::new(&events, vars.optional(REJECTS_TABLE_VAR).as_deref())?
            .with_settle((settle_files > 0).then(|| Settle::after(settle_files as usize)));
        let retention = vars.number(RETENTION_VAR, 24, 24..=8760)?;
        let config = Self {
            commit_interval: Duration::from_secs(vars.number(COMMIT_INTERVAL_VAR, 5, 1..=60)?),
            ..config
        };
        Ok(match vars.optional(PARKING_VAR) {
            Some(folder) => config.with_parking(Parking::new(&folder, retention)?),
            None => config,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rejects_table_defaults_to_a_sibling() {
        let config = Config::new("s3://lake/game_events/", None).unwrap();
        assert_eq!(config.events_table, "s3://lake/game_events/");
        assert_eq!(config.rejects_table, "s3://lake/game_events_rejects");
        let config = Config::new("./lake/events", Some("  ")).unwrap();
        assert_eq!(config.rejects_table, "./lake/events_rejects");
        let config = Config::new("./lake/events", Some("s3://other/rejects")).unwrap();
        assert_eq!(config.rejects_table, "s3://other/rejects");
    }

    #[test]
    fn the_sink_packs_small_files_unless_told_not_to() {
        let config = Config::new("s3://lake/game_events", None).unwrap();
        assert_eq!(config.settle, Some(Settle::default()));
        assert_eq!(config.settle.map(|s| s.files), Some(Settle::DEFAULT_FILES));
        assert_eq!(config.with_settle(None).settle, None);
    }

    #[test]
    fn parking_comes_before_the_stream_drops_the_records() {
        let parking = Parking::new("s3://lake/game_events_parked", 168).unwrap();
        assert_eq!(parking.after, Duration::from_secs(162 * 3600));
        assert_eq!(Parking::new("./parked", 1).unwrap().after, Duration::from_secs(3600));
        let err = Parking::new("http://x", 24).unwrap_err().to_string();
        assert!(err.starts_with("GAME_EVENTS_PARKING_URI="), "{err}");
    }

    #[test]
    fn bad_settings_are_named() {
        assert_eq!(
            Config::new(" ", None),
            Err(ConfigError::Missing { name: EVENTS_TABLE_VAR })
        );
        let err = Config::new("http://lake/events", None).unwrap_err().to_string();
        assert!(err.starts_with("GAME_EVENTS_TABLE_URI=\"http://lake/events\""), "{err}");
        let err = Config::new("s3://lake/events", Some("s3://lake/events/")).unwrap_err();
        assert!(err.to_string().contains("must not be the events table"), "{err}");
    }
}
