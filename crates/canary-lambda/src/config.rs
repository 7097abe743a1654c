//! The canary's settings, read once at cold start from the environment.

use std::time::Duration;

use env_config::{ConfigError, Vars, table_location};

/// `GAME_EVENTS_URL`: the API's `/events` URL, as game clients use it.
pub const URL_VAR: &str = "GAME_EVENTS_URL";

/// `PROBE_API_KEY_ID`: the id of the probe game's API key; its value is read at start.
pub const KEY_ID_VAR: &str = "PROBE_API_KEY_ID";

/// `PROBE_DEADLINE_SECONDS`: how long after the API's answer a probe may take to become a row
/// before it counts as not landed (default 120).
pub const DEADLINE_VAR: &str = "PROBE_DEADLINE_SECONDS";

/// The canary's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `GAME_EVENTS_URL`.
    pub url: String,
    /// `PROBE_API_KEY_ID`.
    pub key_id: String,
    /// `GAME_EVENTS_TABLE_URI`: the table the probes land in.
    pub table: String,
    /// `ERASURE_REQUESTS_URI`: where the probes' erasure is asked for; unset, probes stay rows
    /// (left out of every KPI all the same).
    pub requests: Option<String>,
    /// `PROBE_DEADLINE_SECONDS`.
    pub deadline: Duration,
}

impl Config {
    /// The settings from the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_vars(&Vars::env())
    }

    /// The settings from `vars`.
    pub fn from_vars<F: Fn(&str) -> Option<String>>(vars: &Vars<F>) -> Result<Self, ConfigError> {
        let url = vars.required(URL_VAR)?;
        if !(url.starts_with("https://") || url.starts_with("http://")) {
            return Err(ConfigError::invalid(URL_VAR, url, "expected an http(s) URL"));
        }
        let table_var = game_sink::config::EVENTS_TABLE_VAR;
        let requests_var = maintenance_lambda::config::ERASURE_REQUESTS_VAR;
        Ok(Self {
            url,
            key_id: vars.required(KEY_ID_VAR)?,
            table: table_location(table_var, &vars.required(table_var)?)?,
            requests: vars
                .optional(requests_var)
                .map(|uri| table_location(requests_var, &uri))
                .transpose()?,
            deadline: Duration::from_secs(vars.number(DEADLINE_VAR, 120, 10..=840)?),
        })
    }
}

#[cfg(test)]
mod tests {
    use env_config::from_pairs;

    use super::*;

    fn read(pairs: &[(&str, &str)]) -> Result<Config, String> {
        Config::from_vars(&Vars::new(from_pairs(pairs))).map_err(|e| e.to_string())
    }

    const BASE: [(&str, &str); 3] = [
        (URL_VAR, "https://events.example.com/events"),
        (KEY_ID_VAR, "k1"),
        ("GAME_EVENTS_TABLE_URI", "s3://lake/game_events"),
    ];

    #[test]
    fn the_settings_are_read_with_their_defaults() {
        let config = read(&BASE).unwrap();
        assert_eq!(config.deadline, Duration::from_secs(120));
        assert_eq!(config.requests, None);
        assert_eq!(config.table, "s3://lake/game_events");
        let mut pairs = BASE.to_vec();
        pairs.push(("ERASURE_REQUESTS_URI", "s3://lake/erasure-requests"));
        pairs.push((DEADLINE_VAR, "60"));
        let config = read(&pairs).unwrap();
        assert_eq!(config.requests.as_deref(), Some("s3://lake/erasure-requests"));
        assert_eq!(config.deadline, Duration::from_secs(60));
    }

    #[test]
    fn a_bad_setting_is_named() {
        let err = read(&BASE[1..]).unwrap_err();
        assert!(err.contains(URL_VAR), "{err}");
        let mut pairs = BASE.to_vec();
        pairs[0].1 = "events.example.com";
        assert!(read(&pairs).unwrap_err().contains("http(s) URL"));
        let mut pairs = BASE.to_vec();
        pairs.push((DEADLINE_VAR, "5"));
        assert!(read(&pairs).unwrap_err().contains(DEADLINE_VAR));
    }
}
