//! Metrics in CloudWatch's [embedded metric format] (EMF): a function prints one JSON document
//! per line to standard output, and CloudWatch Logs, which Lambda sends standard output to, turns
//! the values the document declares into metrics. No agent, no API call and no extra latency.
//!
//! ```
//! use emf::{Metrics, Unit};
//!
//! let mut metrics = Metrics::new("lakelog").dimension("Function", "game-sink");
//! metrics.put("Rows", 3.0, Unit::Count);
//! let document = metrics.document(1_717_243_200_000);
//! assert_eq!(document["Rows"], 3.0);
//! assert_eq!(document["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0][0], "Function");
//! ```
//!
//! Dimensions multiply metrics (and their cost): [`Bounded`] keeps a dimension whose values come
//! from clients (an event's name, a platform) to a fixed number of values per process.
//!
//! [embedded metric format]: https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use env_config::{ConfigError, Vars};
use serde_json::{Map, Value, json};

/// The variable that names the functions' metric namespace.
pub const NAMESPACE_VAR: &str = "METRICS_NAMESPACE";

/// The namespace when [`NAMESPACE_VAR`] is not set.
pub const DEFAULT_NAMESPACE: &str = "lakelog";

/// The namespace of [`NAMESPACE_VAR`], or [`DEFAULT_NAMESPACE`]: 1 to 255 characters of letters,
/// digits and `.-_/#:`, not starting with `AWS/` (CloudWatch's rules).
pub fn namespace<F: Fn(&str) -> Option<String>>(vars: &Vars<F>) -> Result<String, ConfigError> {
    let Some(value) = vars.optional(NAMESPACE_VAR) else {
        return Ok(DEFAULT_NAMESPACE.to_owned());
    };
    let valid = (1..=255).contains(&value.len())
        && value.chars().all(|c| c.is_ascii_alphanumeric() || ".-_/#:".contains(c))
        && !value.starts_with("AWS/");
    if valid {
        Ok(value)
    } else {
        Err(ConfigError::invalid(
            NAMESPACE_VAR,
            &value,
            "a CloudWatch namespace: 1 to 255 letters, digits and .-_/#:, not starting with AWS/",
        ))
    }
}

/// The unit of a metric, as CloudWatch names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A number of things.
    Count,
    /// A duration in milliseconds.
    Milliseconds,
    /// A duration in seconds.
    Seconds,
    /// A size in bytes.
    Bytes,
    /// No unit (an amount of money, a ratio).
    None,
}

impl Unit {
    /// The unit's name in an EMF document.
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Count => "Count",
            Unit::Milliseconds => "Milliseconds",
            Unit::Seconds => "Seconds",
            Unit::Bytes => "Bytes",
            Unit::None => "None",
        }
    }
}

/// One EMF document: a namespace, dimensions with their values, and metric values.
#[derive(Debug, Clone, PartialEq)]
pub struct Metrics {
    namespace: String,
    dimensions: Vec<(&'static str, String)>,
    /// Dimension sets other than the default (every dimension together).
    sets: Option<Vec<Vec<&'static str>>>,
    values: Vec<(&'static str, f64, Unit)>,
}

impl Metrics {
    /// A document in `namespace`, without dimensions or values yet.
    pub fn new(namespace: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            dimensions: Vec::new(),
            sets: None,
            values: Vec::new(),
        }
    }

    /// Adds a dimension and its value.
    pub fn dimension(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.dimensions.push((name, value.into()));
        self
    }

    /// The dimension sets CloudWatch aggregates the values by (each a list of dimension names; an
    /// empty list: the values without dimensions). By default one set of every dimension.
    pub fn dimension_sets(mut self, sets: Vec<Vec<&'static str>>) -> Self {
        self.sets = Some(sets);
        self
    }

    /// Sets metric `name` to `value`; a second value of the same name replaces the first.
    pub fn put(&mut self, name: &'static str, value: f64, unit: Unit) -> &mut Self {
        match self.values.iter_mut().find(|(n, ..)| *n == name) {
            Some(slot) => *slot = (name, value, unit),
            None => self.values.push((name, value, unit)),
        }
        self
    }

    /// Sets count `name` to `value` when it is above zero, and leaves it out otherwise. CloudWatch
    /// bills a metric for each hour it has data, so a count of what seldom happens (a failure, a
    /// duplicate, a refusal) costs only in the hours it happens. For counts read by their `Sum` or
    /// `Maximum`, where no value reads as none; never for one an alarm reads by its `Minimum`.
    pub fn put_when_any(&mut self, name: &'static str, value: f64, unit: Unit) -> &mut Self {
        if value > 0.0 {
            self.put(name, value, unit);
        }
        self
    }

    /// Whether the document has no values (and so is not worth printing).
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The document, stamped `timestamp_ms` (milliseconds since the epoch).
    pub fn document(&self, timestamp_ms: i64) -> Value {
        let sets = self
            .sets
            .clone()
            .unwrap_or_else(|| vec![self.dimensions.iter().map(|(name, _)| *name).collect()]);
        let metrics: Vec<Value> = self
            .values
            .iter()
            .map(|(name, _, unit)| json!({"Name": name, "Unit": unit.as_str()}))
            .collect();
        let mut root = Map::new();
        root.insert(
            "_aws".to_owned(),
            json!({
                "Timestamp": timestamp_ms,
                "CloudWatchMetrics": [{"Namespace": self.namespace, "Dimensions": sets, "Metrics": metrics}],
            }),
        );
        for (name, value) in &self.dimensions {
            root.insert((*name).to_owned(), Value::from(value.as_str()));
        }
        for (name, value, _) in &self.values {
            // JSON has no NaN or infinity; CloudWatch would refuse the document.
            let value = if value.is_finite() { *value } else { 0.0 };
            root.insert((*name).to_owned(), Value::from(value));
        }
        Value::Object(root)
    }

    /// Prints the document, stamped now, as one line of standard output (nothing when it has no
    /// values).
    pub fn emit(&self) {
        if self.is_empty() {
            return;
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        println!("{}", self.document(now));
    }
}

/// The value a dimension takes for anything [`Bounded`] does not keep.
pub const OTHER: &str = "other";

/// Keeps a dimension whose values come from outside to at most `limit` distinct values per
/// process: values of 1 to 64 letters, digits and `.-_` are kept until `limit` of them were seen;
/// the rest (and a missing value) become [`OTHER`].
#[derive(Debug)]
pub struct Bounded {
    limit: usize,
    seen: Mutex<HashSet<String>>,
}

impl Bounded {
    /// At most `limit` distinct values.
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            seen: Mutex::new(HashSet::new()),
        }
    }

    /// The dimension value for `value`.
    pub fn value(&self, value: Option<&str>) -> String {
        let Some(value) = value.filter(|v| {
            (1..=64).contains(&v.len()) && v.chars().all(|c| c.is_ascii_alphanumeric() || ".-_".contains(c))
        }) else {
            return OTHER.to_owned();
        };
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.contains(value) || (seen.len() < self.limit && seen.insert(value.to_owned())) {
            value.to_owned()
        } else {
            OTHER.to_owned()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_declares_its_values_and_dimensions() {
        let mut metrics = Metrics::new("lakelog").dimension("Function", "access-log");
        metrics
            .put("Rows", 10.0, Unit::Count)
            .put("LagSeconds", 2.5, Unit::Seconds)
            .put("Rows", 12.0, Unit::Count);
        let document = metrics.document(42);
        assert_eq!(
            document,
            json!({
                "_aws": {
                    "Timestamp": 42,
                    "CloudWatchMetrics": [{
                        "Namespace": "lakelog",
                        "Dimensions": [["Function"]],
                        "Metrics": [{"Name": "Rows", "Unit": "Count"}, {"Name": "LagSeconds", "Unit": "Seconds"}],
                    }],
                },
                "Function": "access-log",
                "Rows": 12.0,
                "LagSeconds": 2.5,
            })
        );
    }

    #[test]
    fn dimension_sets_and_values_json_cannot_hold() {
        let mut metrics = Metrics::new("n")
            .dimension("EventName", "levelUp")
            .dimension("Platform", "ios")
            .dimension_sets(vec![vec!["EventName"], vec!["Platform"], vec![]]);
        metrics.put("Bookings", f64::NAN, Unit::None);
        let document = metrics.document(0);
        assert_eq!(
            document["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            json!([["EventName"], ["Platform"], []])
        );
        assert_eq!(document["Bookings"], 0.0);
        assert!(Metrics::new("n").is_empty());
    }

    #[test]
    fn client_values_are_bounded() {
        let bounded = Bounded::new(2);
        assert_eq!(bounded.value(Some("ios")), "ios");
        assert_eq!(bounded.value(Some("android")), "android");
        assert_eq!(bounded.value(Some("web")), OTHER, "over the limit");
        assert_eq!(bounded.value(Some("ios")), "ios", "already kept");
        assert_eq!(bounded.value(Some("a b")), OTHER);
        assert_eq!(bounded.value(Some(&"x".repeat(65))), OTHER);
        assert_eq!(bounded.value(None), OTHER);
    }

    #[test]
    fn the_namespace_is_checked() {
        let vars = |value: Option<&str>| {
            let value = value.map(str::to_owned);
            Vars::new(move |_| value.clone())
        };
        assert_eq!(namespace(&vars(None)).unwrap(), DEFAULT_NAMESPACE);
        assert_eq!(namespace(&vars(Some("lakelog/prod"))).unwrap(), "lakelog/prod");
        for bad in ["AWS/Lambda", "has space", &"x".repeat(256)] {
            let err = namespace(&vars(Some(bad))).unwrap_err().to_string();
            assert!(err.contains(NAMESPACE_VAR), "{err}");
        }
    }
}
