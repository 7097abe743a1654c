//! Object-level actions: which objects of the S3 Inventory lists went unread, what moving each
//! to a colder class (or expiring it) saves, and S3 Batch Operations manifests of them.
//!
//! The logs say what was read only within their window: from the first request the report read
//! to the end of its range. An object is *unread* when the logs show no read of it in the last
//! `unread_days` days of the window (or in the whole window when it is shorter: the report says
//! so), and it is at least that old. Those written before the window began are told apart from
//! those written inside it: of the first, the logs never saw a write either, and a read before
//! the window is unknown.
//!
//! Each unread object of at least 128 KiB gets the action that saves the most over
//! [`HORIZON_MONTHS`], if any saves:
//!
//! * **a transition** to Standard-IA (from 30 days of age), Glacier Instant Retrieval, Glacier
//!   Flexible Retrieval or Deep Archive (the archive classes only for an object the window shows
//!   no read of at all, and never for a table format's files, whose readers open any file), or
//!   S3 Intelligent-Tiering. Per month it saves the storage price difference, less the archive
//!   classes' per-object overhead, less what its reads in the window would cost there (retrieval
//!   per GB and the difference in GET prices, scaled from the window to 30 days), less, for
//!   Intelligent-Tiering, its monitoring fee and the months reads warm the object back. Once, it
//!   costs the transition request and, when the object leaves its class before that class's
//!   minimum storage duration, the days left of it.
//! * **an expiration**, for the objects of a dataset whose advice expires data older than some
//!   age ([`super::advisor::expiration`]): it saves the object's whole storage, less the early
//!   deletion charge of its class.
//!
//! The manifests are CSV files without a header, `bucket,key,version` (the key URL-encoded, as
//! S3 Batch Operations reads it), one per bucket, action and target class; a version the list
//! gives no id of is named by its key alone, once. Where a dataset's
//! objects from some age on are all in one transition list, a lifecycle rule on its prefix does
//! the same, and is given too.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use chrono::{DateTime, NaiveDate, TimeDelta, Utc};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::Serialize;
use serde_json::Value;

use super::advisor::{
    self, ARCHIVE_CLASSES, Advice, GB, MIN_TRANSITION_BYTES, MONTH_DAYS, STANDARD_IA_MIN_DAYS, Transition,
};
use super::dataset::DatasetRule;
use super::inventory::{Inventory, ListedObject};
use super::prices::{ClassPrices, PriceTable};
use super::{OPS, rfc3339_opt};
use crate::error::ReportError;
use crate::session::ReportSession;

/// Months an action's one-time costs are set against its monthly saving.
pub(super) const HORIZON_MONTHS: f64 = 12.0;

/// Days without a read after which an object is listed, unless asked otherwise.
pub const DEFAULT_UNREAD_DAYS: u32 = 90;

/// The classes an object may move to, coldest last, and Intelligent-Tiering.
const TARGETS: [&str; 5] = [
    "STANDARD_IA",
    "GLACIER_IR",
    "GLACIER",
    "DEEP_ARCHIVE",
    advisor::INTELLIGENT_TIERING,
];

/// The period of the logs the report read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LogWindow {
    /// The day of the first request read.
    pub first_day: NaiveDate,
    /// The last day of the report's range.
    pub last_day: NaiveDate,
    /// Days from the first to the last, both included.
    pub days: u32,
}

/// What the logs show of the reads of one object in the window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct ObjectReads {
    /// The last read, in microseconds since the epoch.
    pub last_read: Option<i64>,
    /// Reads in the last 30, 90 and 365 days of the window.
    pub reads_30: u64,
    /// See `reads_30`.
    pub reads_90: u64,
    /// See `reads_30`.
    pub reads_365: u64,
    /// Reads in the whole window.
    pub reads: u64,
    /// Distinct requesters that read it in the window.
    pub readers: u64,
}

/// One object to act on, with why and what it saves.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObjectAction {
    /// Its bucket.
    pub bucket: String,
    /// Its key.
    pub key: String,
    /// Its version id (empty when unversioned).
    pub version_id: String,
    /// Its dataset.
    pub dataset: String,
    /// Its size.
    pub bytes: u64,
    /// Its class now.
    pub class: String,
    /// When it was last written.
    #[serde(serialize_with = "rfc3339_opt")]
    pub last_modified: Option<DateTime<Utc>>,
    /// Whether it was written before the logs' window began (its reads before it are unknown).
    pub written_before_window: bool,
    /// Its last read in the window.
    #[serde(serialize_with = "rfc3339_opt")]
    pub last_read: Option<DateTime<Utc>>,
    /// Reads in the last 30 days of the window.
    pub reads_30: u64,
    /// Reads in the last 90 days of the window.
    pub reads_90: u64,
    /// Reads in the last 365 days of the window.
    pub reads_365: u64,
    /// Distinct readers in the window.
    pub readers: u64,
    /// What to do with it, and what that saves.
    #[serde(flatten)]
    pub costs: Costed,
}

/// The actions of one bucket.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BucketActions {
    /// The bucket.
    pub bucket: String,
    /// Object versions its inventory lists.
    pub objects: u64,
    /// Unread objects written before the window: count and bytes.
    pub unread_before_window: (u64, u64),
    /// Unread objects written inside the window: count and bytes.
    pub unread_inside_window: (u64, u64),
    /// The objects to act on, most net saving first.
    pub actions: Vec<ObjectAction>,
    /// Lifecycle rules that do what a transition list does for a whole dataset from some age.
    pub lifecycle_rules: Vec<Value>,
    /// Net saving of all its actions over the horizon.
    pub net_saving: f64,
}

/// The object-level section of the access report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObjectActions {
    /// How far back the logs go.
    pub window: LogWindow,
    /// Days without a read asked for.
    pub unread_days: u32,
    /// The days applied: `unread_days`, or the window's length when it is shorter.
    pub unread_days_applied: u32,
    /// Months of the net savings.
    pub horizon_months: f64,
    /// The currency.
    pub currency: String,
    /// Per bucket with an inventory.
    pub buckets: Vec<BucketActions>,
}

/// Reads in the window per bucket, then per key: an inventory's objects are looked up by the
/// names they are listed with, without building a key for each.
pub(super) type ReadsByObject = HashMap<String, HashMap<String, ObjectReads>>;

/// Reads per key in the window, from the report's classified requests.
pub(super) async fn reads_per_object(
    session: &ReportSession,
    window: &str,
    end: DateTime<Utc>,
) -> Result<ReadsByObject, ReportError> {
    let since = |days: i64| (end - TimeDelta::days(days)).timestamp_micros();
    let rows = session
        .query(
            "reads per object",
            &format!(
                "SELECT bucket, key, MAX(request_time) AS last_read, COUNT(*) AS reads, \
                 SUM(CASE WHEN request_time >= to_timestamp_micros({d30}) THEN 1 ELSE 0 END) AS reads_30, \
                 SUM(CASE WHEN request_time >= to_timestamp_micros({d90}) THEN 1 ELSE 0 END) AS reads_90, \
                 SUM(CASE WHEN request_time >= to_timestamp_micros({d365}) THEN 1 ELSE 0 END) AS reads_365, \
                 COUNT(DISTINCT requester) AS readers \
                 FROM {OPS} WHERE {window} AND class = 'read' GROUP BY bucket, key",
                d30 = since(30),
                d90 = since(90),
                d365 = since(365),
            ),
        )
        .await?;
    let (buckets, keys) = (rows.strings("bucket")?, rows.strings("key")?);
    let last = rows.timestamps("last_read")?;
    let (reads, r30, r90, r365, readers) = (
        rows.i64s("reads")?,
        rows.i64s("reads_30")?,
        rows.i64s("reads_90")?,
        rows.i64s("reads_365")?,
        rows.i64s("readers")?,
    );
    let n = |v: Option<i64>| v.unwrap_or(0).max(0) as u64;
    let mut out = ReadsByObject::new();
    for i in 0..rows.len() {
        let (Some(bucket), Some(key)) = (buckets[i].clone(), keys[i].clone()) else {
            continue;
        };
        out.entry(bucket).or_default().insert(
            key,
            ObjectReads {
                last_read: last[i].map(|t| t.timestamp_micros()),
                reads_30: n(r30[i]),
                reads_90: n(r90[i]),
                reads_365: n(r365[i]),
                reads: n(reads[i]),
                readers: n(readers[i]),
            },
        );
    }
    Ok(out)
}

/// What [`evaluate`] knows of one object beyond its reads.
#[derive(Debug, Clone, Copy)]
pub(super) struct ObjectFacts<'a> {
    /// Its size.
    pub bytes: u64,
    /// Its class now.
    pub class: &'a str,
    /// Its age in days at the end of the window, if known.
    pub age_days: Option<i64>,
    /// The window's length in days.
    pub window_days: u32,
    /// Whether it is a file of a table format (never archived).
    pub table_format: bool,
    /// Whether its dataset's advice expires objects of its age.
    pub expires: bool,
}

/// The best action for one unread object and what it saves, if any saves over the horizon.
pub(super) fn evaluate(facts: &ObjectFacts<'_>, reads: &ObjectReads, prices: &PriceTable) -> Option<Costed> {
    let size_gb = facts.bytes as f64 / GB;
    let now = prices.class(facts.class);
    let age = facts.age_days.unwrap_or(0);
    let early = |leaving: &ClassPrices| {
        let left = i64::from(leaving.minimum_days) - age;
        if left > 0 {
            left as f64 / MONTH_DAYS * size_gb * leaving.storage_gb_month
        } else {
            0.0
        }
    };
    // Reads per month, from the last year of the window at most.
    let period = f64::from(facts.window_days.clamp(1, 365));
    let reads_month = reads.reads_365 as f64 / period * MONTH_DAYS;
    let mut best: Option<Costed> = None;
    let mut consider = |c: Costed| {
        if c.net_saving > 0.0 && best.as_ref().is_none_or(|b| c.net_saving > b.net_saving) {
            best = Some(c);
        }
    };
    if facts.expires {
        let storage = size_gb * now.storage_gb_month;
        let early_deletion = early(now);
        consider(Costed {
            action: "expire",
            to_class: None,
            monthly_storage_saving: storage,
            monthly_read_cost: 0.0,
            transition_cost: 0.0,
            early_deletion_cost: early_deletion,
            net_saving: storage * HORIZON_MONTHS - early_deletion,
        });
    }
    if (facts.bytes as i64) < MIN_TRANSITION_BYTES {
        return best;
    }
    let position = |class: &str| TARGETS.iter().position(|t| *t == class);
    for target in TARGETS {
        // Only colder than where it is.
        if target == facts.class || position(facts.class).is_some_and(|p| Some(p) >= position(target)) {
            continue;
        }
        if target == "STANDARD_IA" && age < i64::from(STANDARD_IA_MIN_DAYS) {
            continue;
        }
        let archive = ARCHIVE_CLASSES.contains(&target);
        if archive && (reads.reads > 0 || facts.table_format) {
            continue;
        }
        let to = prices.class(target);
        if to.storage_gb_month <= 0.0 && to.tiers.is_empty() {
            // Not in the price table.
            continue;
        }
        let (storage, read_cost) = if target == advisor::INTELLIGENT_TIERING {
            // Unread 90 days: its archive instant tier; each month with a read it is warmed back
            // to its frequent tier.
            let tier = to.tiers.last().map_or(to.storage_gb_month, |t| t.storage_gb_month);
            let saving = size_gb * (now.storage_gb_month - tier) - to.monitoring_per_1000 / 1000.0;
            let warm = reads_month.min(1.0) * size_gb * (to.storage_gb_month - tier);
            (saving, warm)
        } else {
            let overhead = to.overhead_bytes_in_class as f64 / GB * to.storage_gb_month
                + to.overhead_bytes_in_standard as f64 / GB * prices.class("STANDARD").storage_gb_month;
            let saving = size_gb * (now.storage_gb_month - to.storage_gb_month) - overhead;
            let read_cost = reads_month * (size_gb * to.retrieval_gb + (to.get_per_1000 - now.get_per_1000) / 1000.0);
            (saving, read_cost)
        };
        let transition = to.transition_per_1000 / 1000.0;
        let early_deletion = early(now);
        consider(Costed {
            action: "transition",
            to_class: Some(target),
            monthly_storage_saving: storage,
            monthly_read_cost: read_cost,
            transition_cost: transition,
            early_deletion_cost: early_deletion,
            net_saving: (storage - read_cost) * HORIZON_MONTHS - transition - early_deletion,
        });
    }
    best
}

/// An action on one object with its costs and savings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Costed {
    /// `transition` or `expire`.
    pub action: &'static str,
    /// The class a transition moves it to.
    pub to_class: Option<&'static str>,
    /// Storage saved per month (less per-object overhead and monitoring fees).
    pub monthly_storage_saving: f64,
    /// What its reads would cost per month in the new class (retrieval, GETs, warming back).
    pub monthly_read_cost: f64,
    /// The transition request (none for an expiration).
    pub transition_cost: f64,
    /// The early-deletion charge of leaving its class before its minimum storage duration.
    pub early_deletion_cost: f64,
    /// Over [`HORIZON_MONTHS`]: monthly saving less read costs, times the months, less the
    /// one-time costs.
    pub net_saving: f64,
}

/// Everything [`object_actions`] needs from the rest of the report.
pub(super) struct Inputs<'a> {
    pub(super) inventories: &'a [Inventory],
    pub(super) rule: &'a DatasetRule,
    pub(super) prices: &'a PriceTable,
    pub(super) advice: &'a [Advice],
    pub(super) reads: ReadsByObject,
    pub(super) window: LogWindow,
    pub(super) unread_days: u32,
}

/// What the objects of one age (in whole days) of a dataset were listed for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listed {
    /// All `count` alike: for a transition to `class`, or (`None`) not for one.
    Alike { class: Option<&'static str>, count: u64 },
    /// Not all alike; `any` if one was listed for a transition.
    Mixed { any: bool },
}

/// Per dataset, per age: what its objects were listed for. It grows with the datasets and the
/// ages their objects have, not with the objects.
type Ages = BTreeMap<String, BTreeMap<i64, Listed>>;

/// Counts an object of `dataset` of `age` days, listed for a transition to `class` or not.
fn add_age(ages: &mut Ages, dataset: &str, age: i64, class: Option<&'static str>) {
    let add = |by_age: &mut BTreeMap<i64, Listed>| {
        let listed = by_age.entry(age).or_insert(Listed::Alike { class, count: 0 });
        *listed = match *listed {
            Listed::Alike { class: c, count } if c == class => Listed::Alike {
                class,
                count: count + 1,
            },
            Listed::Alike { class: c, .. } => Listed::Mixed {
                any: c.is_some() || class.is_some(),
            },
            Listed::Mixed { any } => Listed::Mixed {
                any: any || class.is_some(),
            },
        };
    };
    match ages.get_mut(dataset) {
        Some(by_age) => add(by_age),
        None => {
            let mut by_age = BTreeMap::new();
            add(&mut by_age);
            ages.insert(dataset.to_owned(), by_age);
        }
    }
}

/// The object-level section: each inventory read again, object by object.
pub(super) async fn object_actions(inputs: Inputs<'_>) -> Result<ObjectActions, ReportError> {
    let window = inputs.window;
    let applied = inputs.unread_days.min(window.days);
    let end = window
        .last_day
        .succ_opt()
        .unwrap_or(window.last_day)
        .and_hms_opt(0, 0, 0)
        .map(|t| t.and_utc())
        .unwrap_or_default();
    let window_start = window
        .first_day
        .and_hms_opt(0, 0, 0)
        .map(|t| t.and_utc())
        .unwrap_or_default();
    let unread_since = (end - TimeDelta::days(i64::from(applied))).timestamp_micros();
    let mut buckets = Vec::new();
    for inventory in inputs.inventories {
        let mut bucket = BucketActions {
            bucket: inventory.bucket.clone(),
            objects: 0,
            unread_before_window: (0, 0),
            unread_inside_window: (0, 0),
            actions: Vec::new(),
            lifecycle_rules: Vec::new(),
            net_saving: 0.0,
        };
        let mut ages = Ages::new();
        let none = ObjectReads::default();
        let reads_of = inputs.reads.get(&inventory.bucket);
        let advice_of: HashMap<&str, &Advice> = inputs
            .advice
            .iter()
            .filter(|a| a.bucket == inventory.bucket)
            .map(|a| (a.dataset.as_str(), a))
            .collect();
        inventory
            .objects(|object: ListedObject<'_>| {
                bucket.objects += 1;
                let dataset = inputs.rule.dataset(object.key);
                let age = object.modified.map(|t| (end - t).num_days());
                let reads = reads_of.and_then(|r| r.get(object.key)).unwrap_or(&none);
                let unread =
                    reads.last_read.is_none_or(|t| t < unread_since) && age.is_some_and(|a| a >= i64::from(applied));
                let mut listed = None;
                if unread {
                    let before = object.modified.is_some_and(|t| t < window_start);
                    let count = match before {
                        true => &mut bucket.unread_before_window,
                        false => &mut bucket.unread_inside_window,
                    };
                    count.0 += 1;
                    count.1 += object.size;
                    let advice = advice_of.get(dataset);
                    let facts = ObjectFacts {
                        bytes: object.size,
                        class: object.class,
                        age_days: age,
                        window_days: window.days,
                        table_format: inventory.table_format(dataset).is_some(),
                        expires: advice
                            .and_then(|a| a.expiration.as_ref())
                            .is_some_and(|e| age.is_some_and(|a| a > e.days)),
                    };
                    if let Some(c) = evaluate(&facts, reads, inputs.prices) {
                        listed = c.to_class.filter(|_| c.action == "transition");
                        bucket.net_saving += c.net_saving;
                        bucket.actions.push(ObjectAction {
                            bucket: inventory.bucket.clone(),
                            key: object.key.to_owned(),
                            version_id: object.version_id.to_owned(),
                            dataset: dataset.to_owned(),
                            bytes: object.size,
                            class: object.class.to_owned(),
                            last_modified: object.modified,
                            written_before_window: before,
                            last_read: reads.last_read.and_then(DateTime::from_timestamp_micros),
                            reads_30: reads.reads_30,
                            reads_90: reads.reads_90,
                            reads_365: reads.reads_365,
                            readers: reads.readers,
                            costs: c,
                        });
                    }
                }
                if let Some(age) = age {
                    add_age(&mut ages, dataset, age, listed);
                }
            })
            .await?;
        bucket.lifecycle_rules = prefix_rules(&inventory.bucket, &ages);
        bucket.actions.sort_by(|a, b| {
            b.costs
                .net_saving
                .total_cmp(&a.costs.net_saving)
                .then_with(|| a.key.cmp(&b.key))
        });
        buckets.push(bucket);
    }
    Ok(ObjectActions {
        window,
        unread_days: inputs.unread_days,
        unread_days_applied: applied,
        horizon_months: HORIZON_MONTHS,
        currency: inputs.prices.currency.clone(),
        buckets,
    })
}

/// A lifecycle rule per dataset whose objects from the youngest listed one's age on are all
/// listed for one class: the rule moves the same objects now, and later ones as they age.
fn prefix_rules(bucket: &str, ages: &Ages) -> Vec<Value> {
    let mut rules = Vec::new();
    for (dataset, by_age) in ages {
        let youngest = by_age.iter().find(|(_, listed)| {
            matches!(
                listed,
                Listed::Alike { class: Some(_), .. } | Listed::Mixed { any: true }
            )
        });
        let Some((&youngest, _)) = youngest else { continue };
        // Every object from that age on listed for one class.
        let mut from = by_age.range(youngest..).map(|(_, listed)| match *listed {
            Listed::Alike {
                class: Some(class),
                count,
            } => Some((class, count)),
            _ => None,
        });
        let Some(Some((class, mut objects))) = from.next() else {
            continue;
        };
        let mut alike = true;
        for next in from {
            match next {
                Some((c, count)) if c == class => objects += count,
                _ => {
                    alike = false;
                    break;
                }
            }
        }
        if dataset.is_empty() || !alike || objects < 2 {
            continue;
        }
        let transition = Transition {
            storage_class: class.to_owned(),
            days: u32::try_from(youngest.max(0)).unwrap_or(u32::MAX),
            objects,
            bytes: 0,
            monthly_storage_saving: 0.0,
            monthly_retrieval_cost: 0.0,
            monthly_request_cost: 0.0,
        };
        rules.push(advisor::lifecycle_rule(bucket, dataset, &[transition]));
    }
    rules
}

/// What S3 Batch Operations expects percent-encoded in a manifest's keys.
const MANIFEST_KEY: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'/');

/// Writes one S3 Batch Operations manifest per bucket, action and class into `dir`
/// (`BUCKET.transition.CLASS.csv`, `BUCKET.expire.csv`); returns their paths.
pub fn write_manifests(actions: &ObjectActions, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    // Per file, its lines in order, each once: a version a list gives no id of is named by its
    // key alone (its current version), which two listed versions would otherwise both be.
    let mut files: BTreeMap<String, (String, std::collections::HashSet<String>)> = BTreeMap::new();
    for bucket in &actions.buckets {
        for a in &bucket.actions {
            // The bucket comes from the list: only the characters of a bucket name reach the path.
            let safe: String = bucket
                .bucket
                .chars()
                .map(|c| match c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                    true => c,
                    false => '_',
                })
                .collect();
            let name = match a.costs.to_class {
                Some(class) => format!("{safe}.{}.{class}.csv", a.costs.action),
                None => format!("{safe}.{}.csv", a.costs.action),
            };
            let (text, seen) = files.entry(name).or_default();
            let line = format!(
                "{},{},{}\n",
                a.bucket,
                utf8_percent_encode(&a.key, MANIFEST_KEY),
                a.version_id
            );
            if seen.insert(line.clone()) {
                text.push_str(&line);
            }
        }
    }
    let mut paths = Vec::with_capacity(files.len());
    for (name, (text, _)) in files {
        let path = dir.join(name);
        std::fs::write(&path, text)?;
        paths.push(path);
    }
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn prices() -> PriceTable {
        PriceTable::default_table().unwrap()
    }

    fn facts(bytes: u64, class: &str, age: i64) -> ObjectFacts<'_> {
        ObjectFacts {
            bytes,
            class,
            age_days: Some(age),
            window_days: 365,
            table_format: false,
            expires: false,
        }
    }

    fn reads(in_year: u64) -> ObjectReads {
        ObjectReads {
            reads_365: in_year,
            reads: in_year,
            ..ObjectReads::default()
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn three_objects_of_three_classes_save_what_a_hand_computation_says() {
        let p = prices();
        // 10 GiB in Standard, 200 days old, never read: Deep Archive at $0.00099 saves
        // 10 x (0.023 - 0.00099) = 0.2201 a month, less its 32 KiB at the class's price and 8 KiB
        // at Standard's per object; 12 months less the $0.05/1000 transition.
        let overhead = 32768.0 / GB * 0.00099 + 8192.0 / GB * 0.023;
        let a = evaluate(&facts(10 * GIB, "STANDARD", 200), &reads(0), &p).unwrap();
        assert_eq!((a.action, a.to_class), ("transition", Some("DEEP_ARCHIVE")));
        assert!(close(a.net_saving, 12.0 * (0.2201 - overhead) - 0.00005), "{a:?}");

        // 1 GiB in Standard-IA, 40 days old, read once in the year (30/365 reads a month): no
        // archive class, since it is read. Glacier IR: 0.0085 a month less 30/365 x (1 GiB x
        // $0.03 + ($0.01 - $0.001)/1000); Intelligent-Tiering: its archive instant tier ($0.004),
        // less $0.0025/1000 monitoring, less the months a read warms it back to $0.023. The
        // second saves more.
        let per_month = 30.0 / 365.0;
        let b = evaluate(&facts(GIB, "STANDARD_IA", 40), &reads(1), &p).unwrap();
        assert_eq!((b.action, b.to_class), ("transition", Some("INTELLIGENT_TIERING")));
        let tiering = 12.0 * ((0.0125 - 0.004) - 0.0000025 - per_month * (0.023 - 0.004)) - 0.00001;
        let glacier_ir = 12.0 * (0.0085 - per_month * (0.03 + 0.009 / 1000.0)) - 0.00002;
        assert!(tiering > glacier_ir);
        assert!(close(b.net_saving, tiering), "{b:?}");

        // 2 GiB in Glacier IR, 60 days old, in a dataset whose advice expires it: expiring saves
        // 2 x $0.004 a month, less the 30 days left of Glacier IR's 90-day minimum (one month of
        // it), which Deep Archive would also owe.
        let c = evaluate(
            &ObjectFacts {
                expires: true,
                ..facts(2 * GIB, "GLACIER_IR", 60)
            },
            &reads(0),
            &p,
        )
        .unwrap();
        assert_eq!((c.action, c.to_class), ("expire", None));
        assert!(close(c.early_deletion_cost, 30.0 / 30.0 * 2.0 * 0.004), "{c:?}");
        assert!(close(c.net_saving, 12.0 * 0.008 - 0.008), "{c:?}");
    }

    #[test]
    fn read_objects_table_files_and_small_objects_are_never_archived() {
        let p = prices();
        let read = evaluate(&facts(10 * GIB, "STANDARD", 200), &reads(1), &p).unwrap();
        assert!(!ARCHIVE_CLASSES.contains(&read.to_class.unwrap()), "{read:?}");
        let table = ObjectFacts {
            table_format: true,
            ..facts(10 * GIB, "STANDARD", 200)
        };
        let table = evaluate(&table, &reads(0), &p).unwrap();
        assert!(!ARCHIVE_CLASSES.contains(&table.to_class.unwrap()), "{table:?}");
        assert_eq!(evaluate(&facts(64 * 1024, "STANDARD", 200), &reads(0), &p), None);
        // Young objects skip Standard-IA, and nothing colder than Deep Archive exists.
        assert_eq!(evaluate(&facts(10 * GIB, "DEEP_ARCHIVE", 400), &reads(0), &p), None);
        // Hot data stays.
        assert_eq!(evaluate(&facts(GIB, "STANDARD", 200), &reads(5000), &p), None);
    }

    #[test]
    fn a_prefix_rule_only_where_every_object_from_an_age_is_listed_alike() {
        let mut ages = Ages::new();
        for (dataset, objects) in [
            (
                "logs/",
                &[(10, None), (100, Some("GLACIER_IR")), (200, Some("GLACIER_IR"))][..],
            ),
            ("mixed/", &[(100, Some("GLACIER_IR")), (300, None)]),
            ("one/", &[(100, Some("GLACIER_IR"))]),
            // Of one age, one listed and one not: no rule from that age.
            (
                "same-age/",
                &[(100, Some("GLACIER_IR")), (100, None), (200, Some("GLACIER_IR"))],
            ),
        ] {
            for &(age, class) in objects {
                add_age(&mut ages, dataset, age, class);
            }
        }
        let rules = prefix_rules("b", &ages);
        assert_eq!(rules.len(), 1, "{rules:?}");
        assert_eq!(rules[0]["Filter"]["Prefix"], "logs/");
        assert_eq!(
            rules[0]["Transitions"][0],
            serde_json::json!({"Days": 100, "StorageClass": "GLACIER_IR"})
        );
    }

    #[test]
    fn manifests_name_bucket_key_and_version_with_keys_url_encoded() {
        let action = |key: &str, version: &str, to: Option<&'static str>| ObjectAction {
            bucket: "b".into(),
            key: key.into(),
            version_id: version.into(),
            dataset: String::new(),
            bytes: 0,
            class: "STANDARD".into(),
            last_modified: None,
            written_before_window: false,
            last_read: None,
            reads_30: 0,
            reads_90: 0,
            reads_365: 0,
            readers: 0,
            costs: Costed {
                action: if to.is_some() { "transition" } else { "expire" },
                to_class: to,
                monthly_storage_saving: 0.0,
                monthly_read_cost: 0.0,
                transition_cost: 0.0,
                early_deletion_cost: 0.0,
                net_saving: 0.0,
            },
        };
        let actions = ObjectActions {
            window: LogWindow {
                first_day: NaiveDate::MIN,
                last_day: NaiveDate::MIN,
                days: 1,
            },
            unread_days: 90,
            unread_days_applied: 90,
            horizon_months: HORIZON_MONTHS,
            currency: "USD".into(),
            buckets: vec![BucketActions {
                bucket: "b".into(),
                objects: 3,
                unread_before_window: (0, 0),
                unread_inside_window: (0, 0),
                actions: vec![
                    action("raw/café données/a b+c.json", "v1", Some("GLACIER_IR")),
                    action("x/y.csv", "", Some("GLACIER_IR")),
                    action("x/y.csv", "", Some("GLACIER_IR")),
                    action("old/z", "", None),
                ],
                lifecycle_rules: Vec::new(),
                net_saving: 0.0,
            }],
        };
        let dir = tempfile::tempdir().unwrap();
        let written = write_manifests(&actions, dir.path()).unwrap();
        let names: Vec<_> = written
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["b.expire.csv", "b.transition.GLACIER_IR.csv"]);
        assert_eq!(
            std::fs::read_to_string(&written[1]).unwrap(),
            "b,raw/caf%C3%A9%20donn%C3%A9es/a%20b%2Bc.json,v1\nb,x/y.csv,\n"
        );
        assert_eq!(std::fs::read_to_string(&written[0]).unwrap(), "b,old/z,\n");
    }
}
