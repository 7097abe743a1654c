//! `lakelog report access`: who reads which datasets, how old the data they read is, which
//! datasets nobody reads, and when each could move to a cheaper storage class.
//!
//! Everything is SQL through DataFusion over one or more `access_logs` tables, with two functions
//! of this module registered in the session ([`DatasetRule`] as `lakelog_dataset(key)`, the date a
//! key names as `lakelog_key_day(key)`). The rules:
//!
//! * **Requests.** Rows with a key and a bucket whose request did not fail (`http_status` below
//!   400, or none, as for lifecycle actions). Operations are classified by
//!   [`operation::classify`]: reads, writes, deletes, lifecycle, other.
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
//! * **Storage-class advice** ([`Advice`], see [`advisor`]): the stored data is estimated from the
//!   logs alone: every key seen in them up to the end of the range, not deleted or expired since
//!   its last write, with the largest `object_size` logged for it. Objects no request touched in
//!   the logs are not counted, so it is a lower bound of what the prefix holds.
//!
//! [`access_report`] builds an [`AccessReport`]; [`AccessReport::render_text`],
//! [`AccessReport::to_json`] and [`AccessReport::write_html`] present it.

pub mod advisor;
pub mod dataset;
pub mod hygiene;
pub mod inventory;
pub mod objects;
pub mod operation;
pub mod prices;
mod render;
mod udf;

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Days, NaiveDate, TimeDelta, Utc};
use serde::{Serialize, Serializer};

pub use advisor::{Advice, DatasetFacts, Expiration, ReaderAge, ReadsAt, StoredAt, TieringEstimate, Transition};
pub use dataset::{DEFAULT_DEPTH, DatasetRule, key_date};
pub use hygiene::{Completeness, Hygiene};
pub use inventory::Inventory;
pub use objects::ObjectActions;
pub use prices::PriceTable;

use super::{ReportError, ReportSession, TimeRange, quote_ident};
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
    /// ([`objects`]); `None` leaves the object-level section out.
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
        false => Some(storage(session, &window, &options.inventories, &options.prices).await?),
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

/// What the inventories hold, per dataset, with the requests of the range.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Storage {
    /// The lists read.
    pub inventories: Vec<InventorySource>,
    /// Every dataset they list, most bytes first.
    pub datasets: Vec<StoredDataset>,
    /// The datasets of `datasets` no request touched in the range, together.
    pub dark: DarkData,
}

/// One inventory list read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InventorySource {
    /// The bucket it lists.
    pub bucket: String,
    /// Its manifest.
    pub manifest: String,
    /// When S3 took it.
    #[serde(serialize_with = "rfc3339")]
    pub taken: DateTime<Utc>,
    /// `CSV` or `Parquet`.
    pub format: String,
    /// Object versions listed (delete markers are not objects).
    pub objects: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// The stored objects of one dataset, from an inventory.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredDataset {
    /// The bucket.
    pub bucket: String,
    /// The dataset's key prefix.
    pub dataset: String,
    /// Object versions.
    pub objects: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Objects and bytes by storage class.
    pub by_class: BTreeMap<String, inventory::Count>,
    /// The first day its data is of (the key's date, else its last change).
    pub first_day: Option<NaiveDate>,
    /// The last such day.
    pub last_day: Option<NaiveDate>,
    /// Successful requests of its keys in the range; 0 for dark data.
    pub requests: u64,
    /// What storing it costs a month, at the price table's storage prices.
    pub monthly_storage_cost: f64,
}

/// Data stored and never requested in the range.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DarkData {
    /// Datasets.
    pub datasets: u64,
    /// Their objects.
    pub objects: u64,
    /// Their bytes.
    pub bytes: u64,
    /// What storing them costs a month.
    pub monthly_storage_cost: f64,
    /// Storage classes they use that the price table has no price for (not in the cost).
    pub unpriced_classes: Vec<String>,
}

/// The storage section from `inventories`, with the requests in `window` per dataset.
async fn storage(
    session: &ReportSession,
    window: &str,
    inventories: &[Inventory],
    prices: &PriceTable,
) -> Result<Storage, ReportError> {
    let rows = session
        .query(
            "requests per dataset",
            &format!("SELECT bucket, dataset, COUNT(*) AS requests FROM {OPS} WHERE {window} GROUP BY bucket, dataset"),
        )
        .await?;
    let (buckets, names, counts) = (
        rows.strings("bucket")?,
        rows.strings("dataset")?,
        rows.i64s("requests")?,
    );
    let requests: HashMap<(String, String), u64> = (0..rows.len())
        .filter_map(|i| {
            Some((
                (buckets[i].clone()?, names[i].clone()?),
                counts[i].unwrap_or(0).max(0) as u64,
            ))
        })
        .collect();
    let cost = |by_class: &BTreeMap<String, inventory::Count>| -> f64 {
        by_class
            .iter()
            .map(|(class, n)| n.bytes as f64 / advisor::GB * prices.class(class).storage_gb_month)
            .sum()
    };
    let mut datasets = Vec::new();
    let mut dark = DarkData::default();
    let mut unpriced = std::collections::BTreeSet::new();
    for inventory in inventories {
        for (dataset, stored) in inventory.datasets() {
            let requests = requests
                .get(&(inventory.bucket.clone(), dataset.clone()))
                .copied()
                .unwrap_or(0);
            let monthly_storage_cost = cost(&stored.by_class);
            if requests == 0 {
                dark.datasets += 1;
                dark.objects += stored.total.objects;
                dark.bytes += stored.total.bytes;
                dark.monthly_storage_cost += monthly_storage_cost;
                unpriced.extend(
                    stored
                        .by_class
                        .keys()
                        .filter(|c| !prices.classes.contains_key(*c))
                        .cloned(),
                );
            }
            datasets.push(StoredDataset {
                bucket: inventory.bucket.clone(),
                dataset,
                objects: stored.total.objects,
                bytes: stored.total.bytes,
                by_class: stored.by_class,
                first_day: stored.days.map(|d| d.0),
                last_day: stored.days.map(|d| d.1),
                requests,
                monthly_storage_cost,
            });
        }
    }
    dark.unpriced_classes = unpriced.into_iter().collect();
    datasets.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then_with(|| (&a.bucket, &a.dataset).cmp(&(&b.bucket, &b.dataset)))
    });
    Ok(Storage {
        inventories: inventories
            .iter()
            .map(|i| InventorySource {
                bucket: i.bucket.clone(),
                manifest: i.location.clone(),
                taken: i.taken,
                format: i.format.clone(),
                objects: i.total.objects,
                bytes: i.total.bytes,
            })
            .collect(),
        datasets,
        dark,
    })
}

/// The table must have the access-log columns the report reads.
async fn check_columns(session: &ReportSession, table: &str) -> Result<(), ReportError> {
    let frame = session
        .context()
        .table(quote_ident(table).as_str())
        .await
        .map_err(|source| ReportError::Query {
            query: format!("open {table}"),
            source,
        })?;
    for column in COLUMNS {
        if frame.schema().field_with_unqualified_name(column).is_err() {
            return Err(ReportError::MissingColumn {
                name: table.to_owned(),
                column: column.to_owned(),
                expected: "access_logs".to_owned(),
            });
        }
    }
    Ok(())
}

/// Totals per dataset in the range (ages are filled in later).
async fn dataset_usage(session: &ReportSession, window: &str) -> Result<Vec<DatasetUsage>, ReportError> {
    let rows = session
        .query(
            "datasets",
            &format!(
                "SELECT bucket, dataset, \
                 SUM(CASE WHEN class = 'read' THEN 1 ELSE 0 END) AS reads, \
                 SUM(CASE WHEN class = 'read' THEN COALESCE(bytes_sent, 0) ELSE 0 END) AS read_bytes, \
                 SUM(CASE WHEN class = 'write' THEN 1 ELSE 0 END) AS writes, \
                 SUM(CASE WHEN class = 'write' AND COALESCE(object_size, {min}) >= {min} THEN 1 ELSE 0 END) \
                   AS movable_writes, \
                 SUM(CASE WHEN class = 'lifecycle' THEN 1 ELSE 0 END) AS lifecycle, \
                 COUNT(DISTINCT CASE WHEN class = 'read' THEN requester END) AS requesters, \
                 MIN(CASE WHEN class = 'read' THEN request_time END) AS first_read, \
                 MAX(CASE WHEN class = 'read' THEN request_time END) AS last_read, \
                 MAX(CASE WHEN class = 'write' THEN request_time END) AS last_write \
                 FROM {OPS} WHERE {window} AND class IN ('read', 'write', 'lifecycle') \
                 GROUP BY bucket, dataset",
                min = advisor::MIN_TRANSITION_BYTES,
            ),
        )
        .await?;
    let (buckets, names) = (rows.strings("bucket")?, rows.strings("dataset")?);
    let (reads, read_bytes, writes) = (rows.i64s("reads")?, rows.i64s("read_bytes")?, rows.i64s("writes")?);
    let (movable, lifecycle, requesters) = (
        rows.i64s("movable_writes")?,
        rows.i64s("lifecycle")?,
        rows.i64s("requesters")?,
    );
    let (first_read, last_read, last_write) = (
        rows.timestamps("first_read")?,
        rows.timestamps("last_read")?,
        rows.timestamps("last_write")?,
    );
    let n = |v: Option<i64>| v.unwrap_or(0).max(0) as u64;
    Ok((0..rows.len())
        .map(|i| DatasetUsage {
            bucket: buckets[i].clone().unwrap_or_default(),
            dataset: names[i].clone().unwrap_or_default(),
            reads: n(reads[i]),
            read_bytes: n(read_bytes[i]),
            writes: n(writes[i]),
            requesters: n(requesters[i]),
            age_days: AgeHistogram::default(),
            lifecycle: n(lifecycle[i]),
            reads_of_unknown_age: 0,
            first_read: first_read[i],
            last_read: last_read[i],
            last_write: last_write[i],
            movable_writes: n(movable[i]),
        })
        .collect())
}

/// The reads in `window` as the CTE `aged`, each with the age of the data it read (`age`, in
/// days: from the key's date, else from the key's first write seen up to `until`; null when
/// unknown).
fn aged_reads(window: &str, until: &str) -> String {
    format!(
        "WITH first_write AS (\
           SELECT bucket, key, MIN(request_time) AS written FROM {OPS} \
           WHERE {until} AND class = 'write' GROUP BY bucket, key), \
         reads AS (\
           SELECT bucket, key, dataset, requester, request_time, request_date, key_day, operation, bytes_sent, \
           object_size FROM {OPS} WHERE {window} AND class = 'read'), \
         aged AS (SELECT r.*, \
           CASE WHEN r.key_day IS NOT NULL \
                  THEN GREATEST(CAST(r.request_date AS INT) - r.key_day, 0) \
                WHEN w.written <= r.request_time \
                  THEN CAST(r.request_date AS INT) - CAST(CAST(w.written AS DATE) AS INT) \
           END AS age \
           FROM reads r LEFT JOIN first_write w ON r.bucket = w.bucket AND r.key = w.key)"
    )
}

/// Each requester's oldest read of each dataset, by the age of the data read.
async fn oldest_reads(
    session: &ReportSession,
    window: &str,
    until: &str,
) -> Result<HashMap<(String, String), Vec<ReaderAge>>, ReportError> {
    let rows = session
        .query(
            "oldest data read per requester",
            &format!(
                "{} SELECT bucket, dataset, requester, MAX(age) AS oldest FROM aged WHERE age IS NOT NULL \
                 GROUP BY 1, 2, 3",
                aged_reads(window, until)
            ),
        )
        .await?;
    let (buckets, names) = (rows.strings("bucket")?, rows.strings("dataset")?);
    let (requesters, oldest) = (rows.strings("requester")?, rows.i64s("oldest")?);
    let mut out: HashMap<(String, String), Vec<ReaderAge>> = HashMap::new();
    for i in 0..rows.len() {
        let (Some(bucket), Some(dataset), Some(oldest_days)) = (buckets[i].clone(), names[i].clone(), oldest[i]) else {
            continue;
        };
        out.entry((bucket, dataset)).or_default().push(ReaderAge {
            requester: requesters[i].clone().unwrap_or_else(|| "-".to_owned()),
            oldest_days,
        });
    }
    Ok(out)
}

/// Reads per dataset by the age of the data read, whether the object is movable, with the bytes
/// they retrieved.
async fn read_ages(
    session: &ReportSession,
    window: &str,
    until: &str,
) -> Result<Vec<((String, String), ReadsAt)>, ReportError> {
    let rows = session
        .query(
            "ages of the data read",
            &format!(
                "{} SELECT bucket, dataset, age, COALESCE(object_size, {min}) >= {min} AS movable, \
                   COUNT(*) AS reads, \
                   SUM(CASE WHEN starts_with(operation, 'REST.COPY.') THEN COALESCE(object_size, 0) \
                            ELSE COALESCE(bytes_sent, 0) END) AS bytes \
                 FROM aged GROUP BY 1, 2, 3, 4",
                aged_reads(window, until),
                min = advisor::MIN_TRANSITION_BYTES,
            ),
        )
        .await?;
    let (buckets, names, ages) = (rows.strings("bucket")?, rows.strings("dataset")?, rows.i64s("age")?);
    let (movable, reads, bytes) = (rows.bools("movable")?, rows.i64s("reads")?, rows.i64s("bytes")?);
    Ok((0..rows.len())
        .map(|i| {
            let key = (
                buckets[i].clone().unwrap_or_default(),
                names[i].clone().unwrap_or_default(),
            );
            let at = ReadsAt {
                age: ages[i],
                movable: movable[i] != Some(false),
                reads: reads[i].unwrap_or(0).max(0) as u64,
                bytes: bytes[i].unwrap_or(0).max(0) as u64,
            };
            (key, at)
        })
        .collect())
}

/// Objects per dataset at the end of the range, by age (as of `end_day`, days since the epoch),
/// whether a lifecycle transition moved them, and whether they are large enough to move.
async fn stored_objects(
    session: &ReportSession,
    until: &str,
    end_day: i32,
) -> Result<Vec<((String, String), StoredAt)>, ReportError> {
    let removals = operation::LIFECYCLE_REMOVALS
        .iter()
        .map(|op| super::quote_literal(op))
        .collect::<Vec<_>>()
        .join(", ");
    let rows = session
        .query(
            "stored objects",
            &format!(
                "WITH objects AS (\
                   SELECT bucket, key, dataset, MAX(key_day) AS key_day, \
                   MIN(CASE WHEN class = 'write' THEN request_time END) AS first_write, \
                   MAX(CASE WHEN class = 'write' THEN request_time END) AS last_write, \
                   MAX(CASE WHEN class = 'delete' OR operation IN ({removals}) THEN request_time END) AS removed, \
                   MAX(CASE WHEN starts_with(operation, 'S3.TRANSITION') THEN request_time END) AS moved, \
                   MAX(object_size) AS size \
                   FROM {OPS} WHERE {until} AND class <> 'other' GROUP BY bucket, key, dataset) \
                 SELECT bucket, dataset, \
                   CASE WHEN key_day IS NOT NULL THEN GREATEST({end_day} - key_day, 0) \
                        WHEN first_write IS NOT NULL THEN {end_day} - CAST(CAST(first_write AS DATE) AS INT) \
                   END AS age, \
                   COALESCE(moved > last_write OR (moved IS NOT NULL AND last_write IS NULL), false) AS moved, \
                   COALESCE(size, 0) >= {min} AS movable, \
                   COUNT(*) AS objects, SUM(COALESCE(size, 0)) AS bytes \
                 FROM objects \
                 WHERE removed IS NULL OR (last_write IS NOT NULL AND last_write > removed) \
                 GROUP BY 1, 2, 3, 4, 5",
                min = advisor::MIN_TRANSITION_BYTES,
            ),
        )
        .await?;
    let (buckets, names, ages) = (rows.strings("bucket")?, rows.strings("dataset")?, rows.i64s("age")?);
    let (moved, movable) = (rows.bools("moved")?, rows.bools("movable")?);
    let (objects, bytes) = (rows.i64s("objects")?, rows.i64s("bytes")?);
    Ok((0..rows.len())
        .map(|i| {
            let key = (
                buckets[i].clone().unwrap_or_default(),
                names[i].clone().unwrap_or_default(),
            );
            let at = StoredAt {
                age: ages[i],
                moved: moved[i] == Some(true),
                class: None,
                movable: movable[i] == Some(true),
                objects: objects[i].unwrap_or(0).max(0) as u64,
                bytes: bytes[i].unwrap_or(0).max(0) as u64,
            };
            (key, at)
        })
        .collect())
}

/// The datasets holding the files of a table format (see [`advisor::TABLE_FORMATS`]) in the logs
/// up to the end of the range, with the format (the first in that list when several).
async fn table_formats(
    session: &ReportSession,
    until: &str,
) -> Result<HashMap<(String, String), &'static str>, ReportError> {
    let cases = advisor::TABLE_FORMATS
        .iter()
        .enumerate()
        .map(|(i, (_, dir))| {
            let (first, inner) = (
                super::quote_literal(&format!("{dir}/")),
                super::quote_literal(&format!("/{dir}/")),
            );
            format!("WHEN starts_with(key, {first}) OR strpos(key, {inner}) > 0 THEN {i}")
        })
        .collect::<Vec<_>>()
        .join(" ");
    let rows = session
        .query(
            "table formats",
            &format!(
                "SELECT bucket, dataset, MIN(CASE {cases} END) AS format FROM {OPS} WHERE {until} \
                 GROUP BY bucket, dataset HAVING MIN(CASE {cases} END) IS NOT NULL"
            ),
        )
        .await?;
    let (buckets, names, formats) = (rows.strings("bucket")?, rows.strings("dataset")?, rows.i64s("format")?);
    Ok((0..rows.len())
        .filter_map(|i| {
            let format = advisor::TABLE_FORMATS.get(usize::try_from(formats[i]?).ok()?)?.0;
            Some(((buckets[i].clone()?, names[i].clone()?), format))
        })
        .collect())
}

/// Writers per dataset in the range.
async fn writers(
    session: &ReportSession,
    window: &str,
) -> Result<BTreeMap<(String, String), Vec<Writer>>, ReportError> {
    let rows = session
        .query(
            "writers",
            &format!(
                "SELECT bucket, dataset, requester, COUNT(*) AS writes, MAX(request_time) AS last_write \
                 FROM {OPS} WHERE {window} AND class = 'write' GROUP BY bucket, dataset, requester"
            ),
        )
        .await?;
    let (buckets, names, requesters) = (
        rows.strings("bucket")?,
        rows.strings("dataset")?,
        rows.strings("requester")?,
    );
    let (writes, last) = (rows.i64s("writes")?, rows.timestamps("last_write")?);
    let mut out: BTreeMap<(String, String), Vec<Writer>> = BTreeMap::new();
    for i in 0..rows.len() {
        let (Some(last_write), key) = (
            last[i],
            (
                buckets[i].clone().unwrap_or_default(),
                names[i].clone().unwrap_or_default(),
            ),
        ) else {
            continue;
        };
        out.entry(key).or_default().push(Writer {
            requester: requesters[i].clone().unwrap_or_else(|| "-".to_owned()),
            writes: writes[i].unwrap_or(0).max(0) as u64,
            last_write,
        });
    }
    for list in out.values_mut() {
        list.sort_by(|a, b| b.writes.cmp(&a.writes).then_with(|| a.requester.cmp(&b.requester)));
    }
    Ok(out)
}

/// Reads per dataset and day.
async fn day_usage(session: &ReportSession, window: &str) -> Result<Vec<DayUsage>, ReportError> {
    let rows = session
        .query(
            "reads per day",
            &format!(
                "SELECT bucket, dataset, request_date AS day, COUNT(*) AS reads, \
                 SUM(COALESCE(bytes_sent, 0)) AS read_bytes, COUNT(DISTINCT requester) AS requesters \
                 FROM {OPS} WHERE {window} AND class = 'read' GROUP BY bucket, dataset, request_date \
                 ORDER BY day, bucket, dataset"
            ),
        )
        .await?;
    let (buckets, names, days) = (rows.strings("bucket")?, rows.strings("dataset")?, rows.dates("day")?);
    let (reads, bytes, requesters) = (rows.i64s("reads")?, rows.i64s("read_bytes")?, rows.i64s("requesters")?);
    Ok((0..rows.len())
        .filter_map(|i| {
            Some(DayUsage {
                bucket: buckets[i].clone().unwrap_or_default(),
                dataset: names[i].clone().unwrap_or_default(),
                day: days[i]?,
                reads: reads[i].unwrap_or(0).max(0) as u64,
                read_bytes: bytes[i].unwrap_or(0).max(0) as u64,
                requesters: requesters[i].unwrap_or(0).max(0) as u64,
            })
        })
        .collect())
}

/// Datasets written in the range and not read for `unused_days` days before `end_day`.
fn unused_datasets(
    datasets: &[DatasetUsage],
    mut writers: BTreeMap<(String, String), Vec<Writer>>,
    end_day: NaiveDate,
    window_days: u32,
    unused_days: u32,
) -> Vec<UnusedDataset> {
    let mut unused: Vec<UnusedDataset> = datasets
        .iter()
        .filter(|d| d.writes > 0)
        .filter_map(|d| {
            let last_write = d.last_write?;
            let days_without_reads = match d.last_read {
                Some(read) => (end_day - read.date_naive()).num_days(),
                None => i64::from(window_days),
            };
            (days_without_reads >= i64::from(unused_days)).then(|| UnusedDataset {
                bucket: d.bucket.clone(),
                dataset: d.dataset.clone(),
                writes: d.writes,
                last_write,
                last_read: d.last_read,
                days_without_reads,
                writers: writers
                    .remove(&(d.bucket.clone(), d.dataset.clone()))
                    .unwrap_or_default(),
            })
        })
        .collect();
    unused.sort_by(|a, b| {
        b.writes
            .cmp(&a.writes)
            .then_with(|| (&a.bucket, &a.dataset).cmp(&(&b.bucket, &b.dataset)))
    });
    unused
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

    #[tokio::test]
    async fn the_sql_classes_are_the_rust_classes() {
        let session = ReportSession::new();
        let ops = [
            "REST.GET.OBJECT",
            "REST.HEAD.OBJECT",
            "REST.COPY.OBJECT_GET",
            "REST.PUT.OBJECT",
            "REST.POST.UPLOAD",
            "REST.PUT.PART",
            "REST.DELETE.OBJECT",
            "BATCH.DELETE.OBJECT",
            "S3.EXPIRE.OBJECT",
            "S3.TRANSITION_GIR.OBJECT",
            "REST.GET.BUCKET",
            "S3",
        ];
        let values = ops
            .iter()
            .map(|op| format!("({})", super::super::quote_literal(op)))
            .collect::<Vec<_>>()
            .join(", ");
        let rows = session
            .query(
                "classes",
                &format!(
                    "SELECT op, {} AS class FROM (VALUES {values}) AS t(op)",
                    operation::class_sql("op")
                ),
            )
            .await
            .unwrap();
        let got: Vec<(String, String)> = rows
            .strings("op")
            .unwrap()
            .into_iter()
            .zip(rows.strings("class").unwrap())
            .map(|(o, c)| (o.unwrap(), c.unwrap()))
            .collect();
        assert_eq!(got.len(), ops.len());
        for (op, class) in got {
            assert_eq!(class, operation::classify(&op).as_str(), "{op}");
        }
    }
}
