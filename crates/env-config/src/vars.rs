//! Reading settings: [`Vars`] over a function from a name to a value, the [`ConfigError`] that
//! names what is wrong, and the table locations settings hold.

use std::ops::RangeInclusive;

/// A setting that is missing or has a value that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A required setting is not set, or is blank.
    #[error("{name} is not set")]
    Missing {
        /// The setting.
        name: &'static str,
    },
    /// A setting has a value that cannot be used.
    #[error("{name}={value:?}: {reason}")]
    Invalid {
        /// The setting.
        name: &'static str,
        /// Its value (or the entry of a list that is wrong).
        value: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl ConfigError {
    /// `value` of the setting `name` cannot be used because of `reason`.
    pub fn invalid(name: &'static str, value: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Invalid {
            name,
            value: value.into(),
            reason: reason.into(),
        }
    }
}

/// What a table location may look like, for messages.
pub const TABLE_LOCATION_FORMS: &str = "use s3://bucket/prefix, file:///path or a local path";

/// Whether `location` is a table location the lake can open: `s3://`, `s3a://`, `file://` or a
/// path without a scheme.
pub fn is_table_location(location: &str) -> bool {
    match location.split_once("://") {
        Some((scheme, _)) => matches!(scheme, "s3" | "s3a" | "file"),
        None => true,
    }
}

/// The setting `name`: a table location, trimmed; blank is missing, and only the forms of
/// [`TABLE_LOCATION_FORMS`] are accepted.
pub fn table_location(name: &'static str, value: &str) -> Result<String, ConfigError> {
    let value = value.trim();
    if value.is_empty() {
        return Err(ConfigError::Missing { name });
    }
    if !is_table_location(value) {
        return Err(ConfigError::invalid(name, value, TABLE_LOCATION_FORMS));
    }
    Ok(value.to_owned())
}

/// Settings read through a function from a name to its value. A blank value counts as unset
/// everywhere: a template can pass an empty parameter for "the default".
#[derive(Debug, Clone, Copy)]
pub struct Vars<F>(F);

impl<F: Fn(&str) -> Option<String>> Vars<F> {
    /// Settings read through `var`.
    pub fn new(var: F) -> Self {
        Self(var)
    }

    /// The value of `name` as set, blank or not.
    pub fn raw(&self, name: &str) -> Option<String> {
        (self.0)(name)
    }

    /// The value of `name`, trimmed; `None` when unset or blank.
    pub fn optional(&self, name: &str) -> Option<String> {
        let value = self.raw(name)?;
        let trimmed = value.trim();
        (!trimmed.is_empty()).then(|| trimmed.to_owned())
    }

    /// The value of `name`, trimmed; [`ConfigError::Missing`] when unset or blank.
    pub fn required(&self, name: &'static str) -> Result<String, ConfigError> {
        self.optional(name).ok_or(ConfigError::Missing { name })
    }

    /// A whole number from `range`; `default` when unset or blank.
    pub fn number(&self, name: &'static str, default: u64, range: RangeInclusive<u64>) -> Result<u64, ConfigError> {
        let Some(value) = self.raw(name).filter(|v| !v.trim().is_empty()) else {
            return Ok(default);
        };
        match value.trim().parse::<u64>() {
            Ok(n) if range.contains(&n) => Ok(n),
            _ => Err(ConfigError::invalid(
                name,
                value,
                format!("expected a whole number from {} to {}", range.start(), range.end()),
            )),
        }
    }
}

impl Vars<fn(&str) -> Option<String>> {
    /// Settings read from the process environment ([`env_var`]).
    pub fn env() -> Self {
        Self(env_var)
    }
}

/// Variables from `pairs` (name, value), answered as the process environment answers them: the
/// settings of a test, or of a caller that holds them as pairs. Give it to a `from_vars`.
pub fn from_pairs(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let map: std::collections::HashMap<String, String> =
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    move |name: &str| map.get(name).cloned()
}

/// The value of the environment variable `name`; a value that is not Unicode counts as unset. What
/// each Lambda's `Config::from_env` hands to its `from_vars`.
pub fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vars<impl Fn(&str) -> Option<String>> {
        Vars::new(from_pairs(pairs))
    }

    #[test]
    fn blank_counts_as_unset() {
        let v = vars(&[("A", "  x "), ("B", " \t"), ("N", "")]);
        assert_eq!(v.optional("A").as_deref(), Some("x"));
        assert_eq!(v.optional("B"), None);
        assert_eq!(v.optional("C"), None);
        assert_eq!(v.raw("B").as_deref(), Some(" \t"));
        assert_eq!(v.required("A"), Ok("x".to_owned()));
        assert_eq!(v.required("B"), Err(ConfigError::Missing { name: "B" }));
        assert_eq!(v.required("C").unwrap_err().to_string(), "C is not set");
        assert_eq!(v.number("N", 7, 1..=9), Ok(7));
        assert_eq!(v.number("M", 7, 1..=9), Ok(7));
    }

    #[test]
    fn numbers_must_be_whole_and_in_range() {
        let v = vars(&[
            ("OK", " 64 "),
            ("LOW", "0"),
            ("HIGH", "65"),
            ("WORD", "ten"),
            ("NEG", "-1"),
            ("FRAC", "1.5"),
        ]);
        assert_eq!(v.number("OK", 4, 1..=64), Ok(64));
        for name in ["LOW", "HIGH", "WORD", "NEG", "FRAC"] {
            let err = v.number(name, 4, 1..=64).unwrap_err();
            assert!(
                err.to_string().starts_with(&format!("{name}=")) && err.to_string().ends_with("from 1 to 64"),
                "{err}"
            );
        }
    }

    #[test]
    fn table_locations() {
        for ok in [
            "s3://lake/t",
            "s3a://lake/t",
            "file:///tmp/t",
            "./lake/t",
            "/abs/t",
            "t",
        ] {
            assert!(is_table_location(ok), "{ok}");
            assert_eq!(table_location("T", &format!(" {ok} ")), Ok(ok.to_owned()));
        }
        for bad in ["gs://lake/t", "http://lake/t", "://t"] {
            assert!(!is_table_location(bad), "{bad}");
            let err = table_location("T", bad).unwrap_err().to_string();
            assert_eq!(err, format!("T={bad:?}: {TABLE_LOCATION_FORMS}"));
        }
        assert_eq!(table_location("T", "  "), Err(ConfigError::Missing { name: "T" }));
    }

    #[test]
    fn the_environment() {
        // PATH is set wherever tests run; a name nobody sets is not.
        assert!(Vars::env().optional("PATH").is_some());
        assert_eq!(Vars::env().optional("ENV_CONFIG_TEST_UNSET_VARIABLE"), None);
    }
}
