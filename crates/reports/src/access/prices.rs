//! The S3 price table the storage-class advisor uses: defaults for one region, replaceable by a
//! file of the same shape (`--prices FILE`).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::ReportError;

/// The default price table (US East, N. Virginia), embedded in the binary.
pub const DEFAULT_PRICES: &str = include_str!("../../prices/us-east-1.json");

/// The storage classes the advisor needs prices for.
pub(super) const REQUIRED_CLASSES: [&str; 4] = ["STANDARD", "STANDARD_IA", "GLACIER_IR", "GLACIER"];

/// Prices of one storage class. Amounts are in the table's currency; "GB" is what S3 bills,
/// 2^30 bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassPrices {
    /// Storage, per GB-month.
    pub storage_gb_month: f64,
    /// GET (and HEAD, COPY source) requests, per 1,000.
    pub get_per_1000: f64,
    /// Data retrieval, per GB read.
    pub retrieval_gb: f64,
    /// Lifecycle transitions into the class, per 1,000 objects.
    pub transition_per_1000: f64,
    /// Minimum storage duration, in days: leaving the class sooner is billed as if it had stayed.
    pub minimum_days: u32,
    /// Restore requests, per 1,000 (archive classes: objects must be restored before a GET).
    #[serde(default)]
    pub restore_per_1000: f64,
    /// Metadata S3 stores per object in this class, billed at this class's price (archive
    /// classes).
    #[serde(default)]
    pub overhead_bytes_in_class: u64,
    /// Metadata S3 stores per object at S3 Standard's price (archive classes).
    #[serde(default)]
    pub overhead_bytes_in_standard: u64,
    /// Monitoring and automation, per 1,000 objects a month (S3 Intelligent-Tiering, for objects
    /// of at least 128 KiB).
    #[serde(default)]
    pub monitoring_per_1000: f64,
    /// Cheaper tiers an object moves to after days without access (S3 Intelligent-Tiering's
    /// automatic tiers), youngest first; `storage_gb_month` is the price before the first.
    #[serde(default)]
    pub tiers: Vec<Tier>,
    /// Tiers a bucket's Intelligent-Tiering configuration can turn on for a prefix: objects move
    /// there after days without access, and must be restored before a GET.
    #[serde(default)]
    pub archive_tiers: Vec<ArchiveTier>,
}

/// An opt-in archive tier of S3 Intelligent-Tiering (`ARCHIVE_ACCESS`, `DEEP_ARCHIVE_ACCESS`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchiveTier {
    /// Its name in an Intelligent-Tiering configuration (`AccessTier`).
    pub access_tier: String,
    /// The fewest days without access S3 accepts for it.
    pub min_days: u32,
    /// The most days without access S3 accepts for it.
    pub max_days: u32,
    /// Storage, per GB-month.
    pub storage_gb_month: f64,
    /// How long a restore takes before the object can be read, as AWS states it.
    pub access_time: String,
}

/// An access tier of a class whose objects move between tiers by themselves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tier {
    /// Days without access after which an object is in this tier.
    pub after_days: u32,
    /// Storage, per GB-month.
    pub storage_gb_month: f64,
}

/// A price table: where the prices apply and the prices of each storage class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceTable {
    /// The region the prices are for.
    pub region: String,
    /// The currency of every amount.
    pub currency: String,
    /// Where the prices come from.
    #[serde(default)]
    pub source: String,
    /// Prices by storage class name (as in lifecycle rules: `STANDARD_IA`, `GLACIER_IR`, ...).
    pub classes: BTreeMap<String, ClassPrices>,
}

impl PriceTable {
    /// The embedded default table.
    pub fn default_table() -> Result<Self, ReportError> {
        Self::parse("the default price table", DEFAULT_PRICES)
    }

    /// Reads a price table file.
    pub fn load(path: &Path) -> Result<Self, ReportError> {
        let text = std::fs::read_to_string(path).map_err(|e| ReportError::InvalidFile {
            path: path.display().to_string(),
            detail: format!("cannot read it: {e}"),
        })?;
        Self::parse(&path.display().to_string(), &text)
    }

    /// Parses and checks a price table; `origin` names it in errors.
    pub fn parse(origin: &str, text: &str) -> Result<Self, ReportError> {
        let invalid = |detail: String| ReportError::InvalidFile {
            path: origin.to_owned(),
            detail,
        };
        let table: PriceTable = serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
        for class in REQUIRED_CLASSES {
            if !table.classes.contains_key(class) {
                return Err(invalid(format!("classes.{class} is missing")));
            }
        }
        for (name, prices) in &table.classes {
            for (field, value) in [
                ("storage_gb_month", prices.storage_gb_month),
                ("get_per_1000", prices.get_per_1000),
                ("retrieval_gb", prices.retrieval_gb),
                ("transition_per_1000", prices.transition_per_1000),
                ("restore_per_1000", prices.restore_per_1000),
                ("monitoring_per_1000", prices.monitoring_per_1000),
            ]
            .into_iter()
            .chain(
                prices
                    .tiers
                    .iter()
                    .map(|t| ("tiers.storage_gb_month", t.storage_gb_month)),
            )
            .chain(
                prices
                    .archive_tiers
                    .iter()
                    .map(|t| ("archive_tiers.storage_gb_month", t.storage_gb_month)),
            ) {
                if !value.is_finite() || value < 0.0 {
                    return Err(invalid(format!(
                        "classes.{name}.{field} is {value}: a price must be a number >= 0"
                    )));
                }
            }
            for tier in &prices.archive_tiers {
                if tier.min_days > tier.max_days {
                    return Err(invalid(format!(
                        "classes.{name}.archive_tiers {}: min_days {} is above max_days {}",
                        tier.access_tier, tier.min_days, tier.max_days
                    )));
                }
            }
        }
        Ok(table)
    }

    /// The prices of `class`. Every class the advisor asks for is checked to be there by
    /// [`PriceTable::parse`].
    pub fn class(&self, class: &str) -> &ClassPrices {
        match self.classes.get(class) {
            Some(prices) => prices,
            None => &FREE,
        }
    }
}

/// Prices of a class that is not in the table (never asked for: see [`PriceTable::class`]).
static FREE: ClassPrices = ClassPrices {
    storage_gb_month: 0.0,
    get_per_1000: 0.0,
    retrieval_gb: 0.0,
    transition_per_1000: 0.0,
    minimum_days: 0,
    restore_per_1000: 0.0,
    overhead_bytes_in_class: 0,
    overhead_bytes_in_standard: 0,
    monitoring_per_1000: 0.0,
    tiers: Vec::new(),
    archive_tiers: Vec::new(),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_table_has_every_class() {
        let table = PriceTable::default_table().unwrap();
        assert_eq!(table.region, "us-east-1");
        let standard = table.class("STANDARD").storage_gb_month;
        for class in ["STANDARD_IA", "GLACIER_IR", "GLACIER"] {
            assert!(table.class(class).storage_gb_month < standard, "{class}");
            assert!(table.class(class).retrieval_gb > 0.0, "{class}");
        }
        assert_eq!(table.class("GLACIER").overhead_bytes_in_class, 32 * 1024);
        let tiering = table.class("INTELLIGENT_TIERING");
        assert_eq!(tiering.storage_gb_month, standard);
        assert_eq!(
            tiering
                .tiers
                .iter()
                .map(|t| (t.after_days, t.storage_gb_month))
                .collect::<Vec<_>>(),
            [(30, 0.0125), (90, 0.004)]
        );
        assert_eq!(tiering.monitoring_per_1000, 0.0025);
        assert_eq!(
            tiering
                .archive_tiers
                .iter()
                .map(|t| (t.access_tier.as_str(), t.min_days, t.max_days, t.storage_gb_month))
                .collect::<Vec<_>>(),
            [
                ("ARCHIVE_ACCESS", 90, 730, 0.0036),
                ("DEEP_ARCHIVE_ACCESS", 180, 730, 0.00099)
            ]
        );
    }

    #[test]
    fn bad_tables_say_what_is_wrong() {
        let err = PriceTable::parse("p.json", "{").unwrap_err().to_string();
        assert!(err.starts_with("p.json: ") && err.contains("line 1"), "{err}");
        let mut value: serde_json::Value = serde_json::from_str(DEFAULT_PRICES).unwrap();
        value["classes"]["GLACIER_IR"]["retrieval_gb"] = serde_json::json!(-1);
        let err = PriceTable::parse("p.json", &value.to_string()).unwrap_err().to_string();
        assert!(err.contains("classes.GLACIER_IR.retrieval_gb is -1"), "{err}");
        value["classes"].as_object_mut().unwrap().remove("GLACIER");
        let err = PriceTable::parse("p.json", &value.to_string()).unwrap_err().to_string();
        assert!(err.contains("classes.GLACIER is missing"), "{err}");
        let mut tiers: serde_json::Value = serde_json::from_str(DEFAULT_PRICES).unwrap();
        tiers["classes"]["INTELLIGENT_TIERING"]["archive_tiers"][1]["min_days"] = serde_json::json!(800);
        let err = PriceTable::parse("p.json", &tiers.to_string()).unwrap_err().to_string();
        assert!(
            err.contains("DEEP_ARCHIVE_ACCESS: min_days 800 is above max_days 730"),
            "{err}"
        );
        let err = PriceTable::parse("p.json", r#"{"region":"x","currency":"USD","classes":{},"typo":1}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("typo"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let err = PriceTable::load(&dir.path().join("none.json")).unwrap_err().to_string();
        assert!(err.contains("none.json: cannot read it"), "{err}");
    }
}
