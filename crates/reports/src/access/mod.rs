//! `lakelog report access`: who reads which datasets, how old the data they read is, which
//! datasets nobody reads, and when each could move to a cheaper storage class.
//!
//! Everything is SQL through DataFusion over one or more `access_logs` tables, with two functions
//! of this module registered in the session ([`DatasetRule`] as `lakelog_dataset(key)`, the date a
//! key names as `lakelog_key_day(key)`). The rules:
//!
//! * **Requests.** Rows with a key and a bucket whose request did not fail (`http_status` below
//!   400, or none, as for lifecycle actions). Operations are classified
//!   (`operation.rs`): reads, writes, deletes, lifecycle, other.
//! * **Datasets** ([`DatasetUsage`]): per bucket and key prefix, in the range: reads, bytes sent
//!   by them, distinct requesters that read (anonymous requests count as one requester), writes,
//!   lifecycle actions; and reads per day ([`DayUsage`]).
//! * **Age of the data read**: whole UTC days from the data's date to the read's date. The data's
//!   date is the date in the key when it has one ([`dataset::key_date`]; a read of a
//!   future-dated partition counts as age 0), else the first write of that key in the logs up to
//!   the end of the range, if it came before the read; otherwise the age is unknown. Reads are
//!   counted in the buckets 0, 1-6, 7-29, 30-89, 90-364 and 365+ days ([`AgeHistogram`]); the
//!   reads of unknown age are `reads` less the histogram's sum.
//! * **Unused datasets** ([`UnusedDataset`]): written in the range, and not read for at least
//!   `unused_days` days before its end (days since the last read, or the whole range when never
//!   read in it), with the requesters that write them. A range shorter than `unused_days` could
//!   never show one: there the threshold is the range's length, so the datasets written and never
//!   read in it are listed, and the report says the rule as asked needs `unused_days` days.
//! * **Storage-class advice** ([`Advice`], see `advisor.rs`): the stored data is estimated from the
//!   logs alone: every key seen in them up to the end of the range, not deleted or expired since
//!   its last write, with the largest `object_size` logged for it. Objects no request touched in
//!   the logs are not counted, so it is a lower bound of what the prefix holds.
//!
//! [`access_report`] builds an [`AccessReport`]; [`AccessReport::render_text`],
//! [`AccessReport::to_json`] and [`AccessReport::write_html`] present it.

mod advisor;
mod dataset;
mod hygiene;
mod inventory;
mod objects;
mod operation;
mod prices;
mod queries;
mod render;
mod storage;
mod udf;

use std::collections::HashMap;

use chrono::{DateTime, Days, NaiveDate, TimeDelta, Utc};
use serde::{Serialize, Serializer};

pub use advisor::{Advice, Expiration, TieringEstimate, Transition};
use advisor::{DatasetFacts, ReadsAt, StoredAt};
pub use dataset::{DEFAULT_DEPTH, DatasetRule, key_date};
pub use hygiene::{Completeness, Hygiene};
pub use inventory::Inventory;
pub use objects::{DEFAULT_UNREAD_DAYS, ObjectAction, ObjectActions, write_manifests};
pub use prices::{DEFAULT_PRICES, PriceTable};
pub use storage::{DarkData, InventorySource, Storage, StoredDataset};

use crate::error::ReportError;
use crate::range::TimeRange;
use crate::session::{ReportSession, quote_ident};
use queries::{
    check_columns, dataset_usage, day_usage, oldest_reads, read_ages, stored_objects, table_formats, unused_datasets,
    writers,
};
use udf::{DATASET_FN, KEY_DAY_FN, epoch_day};

/// The name [`run`] registers the tables under.
pub const TABLE: &str = "access_logs";

/// The view of classified requests the queries read.
const OPS: &str = "__lakelog_access_ops";

/// Columns of `access_logs` the report reads.
const COLUMNS: [&str; 17] = [
    "bucket",
    "key",
    "requester",
    "operation",
    "http_status",
    "bytes_sent",
    "object_size",
    "request_time",
    "request_date",
    "request_id",
    "signature_version",
    "tls_version",
    "acl_required",
    "source_region",
    "host_header",
    "log_object",
    "ingested_at",
];

/// The age buckets of [`AgeHistogram`]: label, first day, last day.
pub const AGE_BUCKETS: [(&str, i64, Option<i64>); 6] = [
    ("0-0", 0, Some(0)),
    ("1-6", 1, Some(6)),
    ("7-29", 7, Some(29)),
    ("30-89", 30, Some(89)),
    ("90-364", 90, Some(364)),
    ("365+", 365, None),
];

/// What the report is asked for.
#[derive(Debug, Clone)]
pub struct AccessOptions {
    /// How keys are grouped into datasets.
    pub rule: DatasetRule,
    /// Days without reads after which a written dataset is unused.
    pub unused_days: u32,
    /// Prices for the advisor.
    pub prices: PriceTable,
    /// How many datasets the charts and the per-day table show.
    pub top: usize,
    /// Reads become rare at the age from which at most this share of reads happen.
    pub rare_share: f64,
    /// S3 Inventory lists, at most one per bucket: the stored objects of their buckets are taken
    /// from them, exactly, instead of from the logs.
    pub inventories: Vec<Inventory>,
    /// With inventories: days without a read after which an object is listed for action
    /// ([`ObjectActions`]); `None` leaves the object-level section out.
    pub unread_days: Option<u32>,
}

impl AccessOptions {
    /// The defaults (default dataset rule, 30 days, top 10, 5%) with `prices`.
    pub fn new(prices: PriceTable) -> Self {
        Self {
            rule: DatasetRule::default(),
            unused_days: 30,
            prices,
            top: 10,
            rare_share: 0.05,
            inventories: Vec::new(),
            unread_days: None,
        }
    }
}

/// Reads per age of the data read, in the buckets of [`AGE_BUCKETS`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct AgeHistogram {
    /// Data of the day of the read (or a later date).
    #[serde(rename = "0-0")]
    pub current_day: u64,
    /// 1 to 6 days old.
    #[serde(rename = "1-6")]
    pub days_1_6: u64,
    /// 7 to 29 days old.
    #[serde(rename = "7-29")]
    pub days_7_29: u64,
    /// 30 to 89 days old.
    #[serde(rename = "30-89")]
    pub days_30_89: u64,
    /// 90 to 364 days old.
    #[serde(rename = "90-364")]
    pub days_90_364: u64,
    /// A year or older.
    #[serde(rename = "365+")]
    pub days_365_plus: u64,
}

impl AgeHistogram {
    /// Counts `reads` of data `age` days old (negative ages count as 0).
    pub fn add(&mut self, age: i64, reads: u64) {
        let slot = match age {
            ..=0 => &mut self.current_day,
            1..=6 => &mut self.days_1_6,
            7..=29 => &mut self.days_7_29,
            30..=89 => &mut self.days_30_89,
            90..=364 => &mut self.days_90_364,
            _ => &mut self.days_365_plus,
        };
        *slot += reads;
    }

    /// The counts in the order of [`AGE_BUCKETS`].
    pub fn counts(&self) -> [u64; 6] {
        [
            self.current_day,
            self.days_1_6,
            self.days_7_29,
            self.days_30_89,
            self.days_90_364,
            self.days_365_plus,
        ]
    }

    /// Reads of known age.
    pub fn total(&self) -> u64 {
        self.counts().iter().sum()
    }
}

/// Use of one dataset in the range.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DatasetUsage {
    /// The bucket.
    pub bucket: String,
    /// The key prefix.
    pub dataset: String,
    /// Object reads.
    pub reads: u64,
    /// Bytes sent by them.
    pub read_bytes: u64,
    /// Object writes.
    pub writes: u64,
    /// Distinct requesters that read.
    pub requesters: u64,
    /// Reads by the age of the data read (reads of unknown age are not in it).
    pub age_days: AgeHistogram,
    /// Lifecycle actions of S3.
    #[serde(skip)]
    pub lifecycle: u64,
    /// Reads of data of unknown age.
    #[serde(skip)]
    pub reads_of_unknown_age: u64,
    /// First read.
    #[serde(skip)]
    pub first_read: Option<DateTime<Utc>>,
    /// Last read.
    #[serde(skip)]
    pub last_read: Option<DateTime<Utc>>,
    /// Last write.
    #[serde(skip)]
    pub last_write: Option<DateTime<Utc>>,
    /// Writes of objects of at least 128 KiB (or of unknown size): the objects lifecycle rules move.
    #[serde(skip)]
    pub movable_writes: u64,
}

impl DatasetUsage {
    /// The share of the reads of known age that read data of the current day.
    pub fn current_day_share(&self) -> Option<f64> {
        let known = self.age_days.total();
        (known > 0).then(|| self.age_days.current_day as f64 / known as f64)
    }
}

/// Reads of one dataset on one day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DayUsage {
    /// The bucket.
    pub bucket: String,
    /// The key prefix.
    pub dataset: String,
    /// The UTC day.
    pub day: NaiveDate,
    /// Object reads.
    pub reads: u64,
    /// Bytes sent by them.
    pub read_bytes: u64,
    /// Distinct requesters that read.
    pub requesters: u64,
}

/// A dataset that is written but not read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UnusedDataset {
    /// The bucket.
    pub bucket: String,
    /// The key prefix.
    pub dataset: String,
    /// Writes in the range.
    pub writes: u64,
    /// Last write.
    #[serde(serialize_with = "rfc3339")]
    pub last_write: DateTime<Utc>,
    /// Last read in the range, if any.
    #[serde(serialize_with = "rfc3339_opt")]
    pub last_read: Option<DateTime<Utc>>,
    /// Days from the last read (or the first day of the logs read) to the end of the range.
    pub days_without_reads: i64,
    /// Who writes it, most writes first.
    pub writers: Vec<Writer>,
}

/// A requester writing a dataset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Writer {
    /// The requester (`-` for anonymous requests).
    pub requester: String,
    /// Writes in the range.
    pub writes: u64,
    /// Last write.
    #[serde(serialize_with = "rfc3339")]
    pub last_write: DateTime<Utc>,
}

/// What the report covered.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The range asked for.
    pub range: TimeRange,
    /// First and last request in it.
    pub first_request: Option<DateTime<Utc>>,
    /// Last request in it.
    pub last_request: Option<DateTime<Utc>>,
    /// The first day of the range (asked for, or of the first request).
    pub start_day: Option<NaiveDate>,
    /// The last day of the range (asked for, or of the last request): the report's "today".
    pub end_day: Option<NaiveDate>,
    /// Days from the first to the last day, both included (at least 1).
    pub range_days: u32,
    /// The day of the first request read: how far back the logs go within the range. Nothing
    /// before it is known, so "unread" means unread since then.
    pub logs_first_day: Option<NaiveDate>,
    /// Days from `logs_first_day` to the last day, both included (at least 1): the window in
    /// which reads were seen.
    pub window_days: u32,
    /// Successful object requests in the range.
    pub requests: u64,
    /// The unused-days threshold.
    pub unused_days: u32,
    /// The threshold applied: `unused_days`, or the logs' window when it is shorter.
    pub unused_days_applied: u32,
    /// The reads' rare share.
    pub rare_share: f64,
    /// The dataset rule.
    pub rule: DatasetRule,
    /// The price table's region, currency and source.
    pub prices: (String, String, String),
    /// The number of datasets shown in charts.
    pub top: usize,
}

/// The figures an access report opens with.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Headline {
    /// The first day of the range (`YYYY-MM-DD`), if it has a request.
    pub first_day: Option<String>,
    /// The day of the first request read: the logs go back no further (nothing before it is
    /// known).
    pub logs_first_day: Option<String>,
    /// The last day of the range.
    pub last_day: Option<String>,
    /// Days from the first to the last, both included.
    pub days: u32,
    /// Datasets read, written or acted on by S3 Lifecycle in the range.
    pub datasets: u64,
    /// Reads of them.
    pub reads: u64,
    /// The share of the reads of known age that read data of the day they were read on (new
    /// data; the rest read older data).
    pub current_day_read_share: Option<f64>,
    /// Datasets written and not read for the unused-days threshold.
    pub unused_datasets: u64,
    /// That threshold, in days: `--unused-days`, or the range's length when it is shorter.
    pub unused_days: u32,
    /// The bytes stored in them, as far as the logs show (objects written or read in them).
    pub unused_bytes: u64,
    /// What the advisor's transitions save per month, all datasets together.
    pub monthly_saving: f64,
    /// The currency of `monthly_saving`.
    pub currency: String,
    /// Bytes the S3 Inventory lists hold, when the report has some.
    pub stored_bytes: Option<u64>,
    /// Of them, the bytes of datasets no request touched in the range (dark data).
    pub dark_bytes: Option<u64>,
}

impl Headline {
    fn of(
        datasets: &[DatasetUsage],
        unused: &[UnusedDataset],
        advice: &[Advice],
        storage: Option<&Storage>,
        summary: &Summary,
    ) -> Self {
        let (mut current, mut known) = (0u64, 0u64);
        for d in datasets {
            current += d.age_days.current_day;
            known += d.age_days.total();
        }
        let unused_bytes = unused
            .iter()
            .filter_map(|u| advice.iter().find(|a| a.bucket == u.bucket && a.dataset == u.dataset))
            .map(|a| a.stored_bytes)
            .sum();
        Self {
            first_day: summary.start_day.map(|d| d.to_string()),
            logs_first_day: summary.logs_first_day.map(|d| d.to_string()),
            last_day: summary.end_day.map(|d| d.to_string()),
            days: summary.range_days,
            datasets: datasets.len() as u64,
            reads: datasets.iter().map(|d| d.reads).sum(),
            current_day_read_share: (known > 0).then(|| current as f64 / known as f64),
            unused_datasets: unused.len() as u64,
            unused_days: summary.unused_days_applied,
            unused_bytes,
            // A fold from 0, since an empty sum of floats is -0.
            monthly_saving: advice.iter().fold(0.0, |sum, a| sum + a.monthly_saving),
            currency: summary.prices.1.clone(),
            stored_bytes: storage.map(|s| s.inventories.iter().map(|i| i.bytes).sum()),
            dark_bytes: storage.map(|s| s.dark.bytes),
        }
    }
}

/// The access-pattern report. Its JSON ([`AccessReport::to_json`]) is
/// `{"headline": {...}, "datasets": [...], "unused": [...], "advice": [...]}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AccessReport {
    /// The figures that matter most.
    pub headline: Headline,
    /// Datasets, most read first.
    pub datasets: Vec<DatasetUsage>,
    /// Datasets written but not read for the unused-days threshold.
    pub unused: Vec<UnusedDataset>,
    /// Storage-class advice per dataset, in the order of `datasets`, then for the datasets only
    /// an inventory lists.
    pub advice: Vec<Advice>,
    /// What the S3 Inventory lists hold, when the report has some.
    pub storage: Option<Storage>,
    /// How the buckets are called.
    pub hygiene: Hygiene,
    /// How completely each bucket's logs arrived.
    pub completeness: Vec<Completeness>,
    /// Object-level actions, when asked for with inventories.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub objects: Option<ObjectActions>,
    /// Reads per dataset and day.
    #[serde(skip)]
    pub days: Vec<DayUsage>,
    /// What the report covered.
    #[serde(skip)]
    pub summary: Summary,
}

fn rfc3339<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
}

fn rfc3339_list<S: Serializer>(ts: &[DateTime<Utc>], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(ts.iter().map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)))
}

fn rfc3339_opt<S: Serializer>(t: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => rfc3339(t, s),
        None => s.serialize_none(),
    }
}

/// Opens the access-log tables at `uris`, registers them as [`TABLE`] in a new session and
/// builds the report.
pub async fn run(
    uris: &[String],
    storage: &lake::StorageConfig,
    range: &TimeRange,
    options: &AccessOptions,
) -> Result<AccessReport, ReportError> {
    let session = ReportSession::new();
    session.register_tables(TABLE, uris, storage).await?;
    access_report(&session, TABLE, range, options).await
}

/// Builds the report from the access-log table(s) registered as `table` in `session`.
pub async fn access_report(
    session: &ReportSession,
    table: &str,
    range: &TimeRange,
    options: &AccessOptions,
) -> Result<AccessReport, ReportError> {
    check_columns(session, table).await?;
    for (i, inventory) in options.inventories.iter().enumerate() {
        if let Some(first) = options.inventories[..i].iter().find(|o| o.bucket == inventory.bucket) {
            return Err(ReportError::InvalidArgument {
                argument: "--inventory".to_owned(),
                value: inventory.location.clone(),
                reason: format!(
                    "a second inventory of bucket {} (the first is {}); give one per bucket",
                    inventory.bucket, first.location
                ),
            });
        }
    }
    udf::register(session.context(), &options.rule);
    let class = operation::class_sql("operation");
    session
        .execute(
            "classify requests",
            &format!(
                "CREATE OR REPLACE VIEW {OPS} AS SELECT bucket, key, {DATASET_FN}(key) AS dataset, \
                 COALESCE(requester, '-') AS requester, operation, {class} AS class, bytes_sent, object_size, \
                 request_time, request_date, {KEY_DAY_FN}(key) AS key_day \
                 FROM {} WHERE key IS NOT NULL AND bucket IS NOT NULL AND COALESCE(http_status, 0) < 400",
                quote_ident(table)
            ),
        )
        .await?;
    let window = range.filter("request_date", "request_time");
    hygiene::register(session, table, &window).await?;
    let bounds = session
        .query(
            "range",
            &format!(
                "SELECT MIN(request_time) AS first, MAX(request_time) AS last, COUNT(*) AS requests \
                 FROM {OPS} WHERE {window}"
            ),
        )
        .await?;
    let first_request = bounds.timestamps("first")?.first().copied().flatten();
    let last_request = bounds.timestamps("last")?.first().copied().flatten();
    let requests = bounds.i64s("requests")?.first().copied().flatten().unwrap_or(0) as u64;
    let start_day = range.from.or(first_request).map(|t| t.date_naive());
    let end = range.to.or(last_request.map(|t| t + TimeDelta::microseconds(1)));
    let end_day = end.map(|t| (t - TimeDelta::microseconds(1)).date_naive());
    let days_from = |first: Option<NaiveDate>| match (first, end_day) {
        (Some(s), Some(e)) => ((e - s).num_days() + 1).max(1) as u32,
        _ => 1,
    };
    let range_days = days_from(start_day);
    let logs_first_day = first_request.map(|t| t.date_naive());
    let window_days = days_from(logs_first_day);
    let summary = Summary {
        range: *range,
        first_request,
        last_request,
        start_day,
        end_day,
        range_days,
        logs_first_day,
        window_days,
        requests,
        unused_days: options.unused_days,
        unused_days_applied: options.unused_days.min(window_days),
        rare_share: options.rare_share,
        rule: options.rule.clone(),
        prices: (
            options.prices.region.clone(),
            options.prices.currency.clone(),
            options.prices.source.clone(),
        ),
        top: options.top,
    };
    let (Some(end), Some(end_day)) = (end, end_day) else {
        return Ok(AccessReport {
            headline: Headline::of(&[], &[], &[], None, &summary),
            datasets: Vec::new(),
            unused: Vec::new(),
            advice: Vec::new(),
            storage: None,
            hygiene: Hygiene::default(),
            completeness: Vec::new(),
            objects: None,
            days: Vec::new(),
            summary,
        });
    };
    let until = TimeRange {
        from: None,
        to: Some(end),
    }
    .filter("request_date", "request_time");

    let mut datasets = dataset_usage(session, &window).await?;
    let ages = read_ages(session, &window, &until).await?;
    let stored = stored_objects(session, &until, epoch_day(end_day)).await?;
    let writers = writers(session, &window).await?;
    let days = day_usage(session, &window).await?;
    let formats = table_formats(session, &until).await?;
    let mut oldest = oldest_reads(session, &window, &until).await?;

    let mut reads_by_dataset: HashMap<(String, String), Vec<ReadsAt>> = HashMap::new();
    for (key, reads) in ages {
        reads_by_dataset.entry(key).or_default().push(reads);
    }
    let mut stored_by_dataset: HashMap<(String, String), Vec<StoredAt>> = HashMap::new();
    for (key, objects) in stored {
        if !options.inventories.iter().any(|i| i.bucket == key.0) {
            stored_by_dataset.entry(key).or_default().push(objects);
        }
    }
    // The buckets with an inventory: every object stored, from it.
    for inventory in &options.inventories {
        for (dataset, objects) in inventory.stored(end_day) {
            stored_by_dataset
                .entry((inventory.bucket.clone(), dataset))
                .or_default()
                .extend(objects);
        }
    }
    for usage in &mut datasets {
        for r in reads_by_dataset
            .get(&(usage.bucket.clone(), usage.dataset.clone()))
            .into_iter()
            .flatten()
        {
            match r.age {
                Some(age) => usage.age_days.add(age, r.reads),
                None => usage.reads_of_unknown_age += r.reads,
            }
        }
    }
    datasets.sort_by(|a, b| {
        b.reads
            .cmp(&a.reads)
            .then(b.read_bytes.cmp(&a.read_bytes))
            .then_with(|| (&a.bucket, &a.dataset).cmp(&(&b.bucket, &b.dataset)))
    });

    let unused = unused_datasets(&datasets, writers, end_day, window_days, summary.unused_days_applied);
    let storage = match options.inventories.is_empty() {
        true => None,
        false => Some(storage::stored_datasets(session, &window, &options.inventories, &options.prices).await?),
    };
    // The datasets of the logs, then those only an inventory lists (never requested in the range).
    let mut advised: Vec<(String, String, u64)> = datasets
        .iter()
        .map(|d| (d.bucket.clone(), d.dataset.clone(), d.movable_writes))
        .collect();
    for d in storage.iter().flat_map(|s| &s.datasets) {
        if !datasets.iter().any(|u| u.bucket == d.bucket && u.dataset == d.dataset) {
            advised.push((d.bucket.clone(), d.dataset.clone(), 0));
        }
    }
    let advice: Vec<Advice> = advised
        .into_iter()
        .map(|(bucket, dataset, movable_writes)| {
            let inventory = options.inventories.iter().find(|i| i.bucket == bucket);
            let key = (bucket, dataset);
            let facts = DatasetFacts {
                reads: reads_by_dataset.remove(&key).unwrap_or_default(),
                stored: stored_by_dataset.remove(&key).unwrap_or_default(),
                movable_writes,
                range_days,
                table_format: formats
                    .get(&key)
                    .copied()
                    .or_else(|| inventory.and_then(|i| i.table_format(&key.1))),
                oldest_reads: oldest.remove(&key).unwrap_or_default(),
            };
            let mut advice = advisor::advise(&key.0, &key.1, &facts, &options.prices, options.rare_share);
            if let Some(i) = inventory {
                advice.stored_from = format!(
                    "S3 Inventory of {} taken {} (every object stored)",
                    i.bucket,
                    i.taken.format("%Y-%m-%d %H:%M UTC")
                );
            }
            advice
        })
        .collect();
    let objects = match (options.unread_days, options.inventories.is_empty(), logs_first_day) {
        (Some(unread_days), false, Some(first_day)) => {
            let inputs = objects::Inputs {
                inventories: &options.inventories,
                rule: &options.rule,
                prices: &options.prices,
                advice: &advice,
                reads: objects::reads_per_object(session, &window, end).await?,
                window: objects::LogWindow {
                    first_day,
                    last_day: end_day,
                    days: window_days,
                },
                unread_days,
            };
            Some(objects::object_actions(inputs).await?)
        }
        _ => None,
    };
    let hygiene = hygiene::hygiene(session).await?;
    let completeness = hygiene::completeness(session).await?;
    Ok(AccessReport {
        headline: Headline::of(&datasets, &unused, &advice, storage.as_ref(), &summary),
        datasets,
        unused,
        advice,
        storage,
        hygiene,
        completeness,
        objects,
        days,
        summary,
    })
}

/// The first day of the range and the day after its end, for charts over days.
fn day_span(summary: &Summary) -> Option<(NaiveDate, NaiveDate)> {
    Some((summary.start_day?, summary.end_day?.checked_add_days(Days::new(1))?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_fall_in_their_buckets() {
        let mut h = AgeHistogram::default();
        for (age, reads) in [
            (-2, 1),
            (0, 2),
            (1, 3),
            (6, 4),
            (7, 5),
            (29, 6),
            (30, 7),
            (89, 8),
            (90, 9),
            (364, 10),
        ] {
            h.add(age, reads);
        }
        h.add(365, 11);
        h.add(4000, 12);
        assert_eq!(h.counts(), [3, 7, 11, 15, 19, 23]);
        assert_eq!(h.total(), 78);
        let json = serde_json::to_value(h).unwrap();
        let keys: Vec<&str> = json.as_object().unwrap().keys().map(String::as_str).collect();
        let mut expected: Vec<&str> = AGE_BUCKETS.iter().map(|(l, _, _)| *l).collect();
        expected.sort_unstable();
        assert_eq!(keys, expected);
        assert_eq!(json["365+"], 23);
    }
}
