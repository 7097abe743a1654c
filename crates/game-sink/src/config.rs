//! Configuration: where the tables are, read and validated once.

pub use env_config::ConfigError;
use env_config::{Vars, table_location};

/// The `game_events` table: `s3://bucket/prefix`, `file:///path` or a local path.
pub const EVENTS_TABLE_VAR: &str = "GAME_EVENTS_TABLE_URI";
/// The rejects table; default: the events table's location with `_rejects` appended.
pub const REJECTS_TABLE_VAR: &str = "GAME_EVENTS_REJECTS_TABLE_URI";

/// Where the sink writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The `game_events` table.
    pub events_table: String,
    /// The `game_events_rejects` table.
    pub rejects_table: String,
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
        })
    }

    /// Reads [`EVENTS_TABLE_VAR`] and [`REJECTS_TABLE_VAR`].
    pub fn from_env() -> Result<Self, ConfigError> {
        let vars = Vars::env();
        let events = vars.required(EVENTS_TABLE_VAR)?;
        Self::new(&events, vars.optional(REJECTS_TABLE_VAR).as_deref())
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
