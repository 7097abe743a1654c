//! A demo lake of realistic scale and texture, as S3 server access logs: a few hundred TB in
//! objects of hundreds of MB to tens of GB (only their log lines are generated, so it takes
//! seconds), written and read on daily and weekly rhythms with noise, by readers that differ.
//!
//! Day `d` is `start + d`; the same seed gives the same logs. Bucket [`LAKE_BUCKET`]:
//!
//! * `events/clicks/dt=DATE/part-NNNNN.snappy.parquet`: 140-180 parts of about 1 GiB a day, PUT by
//!   `etl-clicks` at 01:00. `bi-dashboards` reads today's parts every working hour (08-18, fewer
//!   and shorter on weekends), in column ranges; three analysts read parts of the last two weeks
//!   on most working days (recent ones most); `ml-training` reads 150-250 parts 7-37 days old
//!   every Monday. Some of the analysts' reads miss (404).
//! * `logs/app/year=Y/month=M/day=D/hour=H/app-NNNN.json.gz`: 15-25 files of about 768 MiB an hour
//!   from `log-shipper`; `oncall-sre` reads some of the last two days' (more on working days);
//!   `security-audit` reads 40 files 20-30 days old on the 1st of the month.
//! * `raw/sensors/YYYY/MM/DD/batch-NNNN.avro`: 350-450 batches of about 6 GiB a day from
//!   `iot-ingest`, each read once in full by `spark-etl` the next night, and never again.
//! * `backups/warehouse/DATE/`: a full backup on Sundays (200 objects of about 16 GiB, multipart
//!   uploads) and an incremental one (30 of about 4 GiB) on the other days, by `db-backup`;
//!   `dr-drill` restores three objects of the first full backup in the middle of the range.
//! * `snapshots/customers/YYYY/MM/DD/`: 8 parts of about 2.5 GiB a day by `etl-snapshots`, read
//!   by `crm-sync` at 06:00 and 14:00; `auditor` reads an old snapshot on the 15th.
//! * `models/recommender/weights.bin` (about 6 GiB, there before the logs), uploaded again by
//!   `ml-training` on Mondays, read by `model-serving` about once an hour.
//! * `exports/legacy/DATE.csv` (about 2 GiB) PUT by `legacy-export` every day, and
//!   `tmp/notebooks/USER/RUN/part-N.parquet` written by notebooks now and then: never read.
//! * `warehouse/orders/`, a Delta Lake table: 20-30 data files of about 1 GiB a day in
//!   `order_date=DATE/` partitions and a commit in `_delta_log/` (a few KiB) per day, by
//!   `spark-orders`; `trino` reads the log and the last week's partitions every working hour.
//! * `features/store/dt=DATE/part-NNN.parquet`: 12 parts of about 1 GiB a day by
//!   `feature-pipeline` at 03:00, and those of the 400 days before the logs; `ml-backtest` reads
//!   40-60 parts of partitions 60-300 days old in full every night.
//! * `raw/café données/file+1.json` and `file+2.json` (1 KiB, older than the logs) read by
//!   `spark` every morning: keys with spaces, `+` and accents.
//!
//! Bucket [`WEB_BUCKET`]: `web/assets/` files read by anonymous clients on a daily rhythm
//! (peaking at 15:00 UTC, busier on weekends) and by `cdn` once a day; each of its log objects
//! ends with one malformed line.
//!
//! Stored and never requested in the range (dark data, which only an S3 Inventory shows):
//! `archive/clickstream-2021/` (120 objects of about 4 GiB in Glacier Deep Archive and Glacier
//! Flexible Retrieval), `backups/legacy-db/` (40 dumps of about 12 GiB in S3 Standard, with two
//! older versions in Standard-IA and three delete markers) and the web bucket's `web/old-site/` (25 small pages).
//! [`Lake::inventory`] lists every object stored at the end of the range, [`Lake::storage`]
//! counts it per dataset; [`super::inventory::write`] writes it as S3 Inventory does.
//!
//! And what a bucket owner should hear of ([`HygieneTruth`]): `legacy-export` signs with
//! Signature Version 2 and writes with an ACL, `crm-sync` calls over TLS 1.0, `ml-training` runs
//! in us-west-2, `scanner` probes the backups and is refused (403) 5-20 times a day. S3 delivers
//! logs best-effort: the records of the lake bucket's 13:00 hour on day `days / 3` are lost, and 20
//! records of each bucket are delivered twice.

use std::collections::BTreeMap;

use chrono::{Datelike, Days, NaiveDate, NaiveDateTime, NaiveTime, Weekday};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::inventory::InventoryObject;
use super::{Client, LAKE_BUCKET, Request, WEB_BUCKET, Workload, render};

const GIB: f64 = (1u64 << 30) as f64;
const MIB: f64 = (1u64 << 20) as f64;

/// What the generated lake holds, per dataset (bucket and key prefix, as the access report's
/// default rule cuts keys), counted as it was generated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DatasetTruth {
    /// Successful reads (GET and HEAD).
    pub reads: u64,
    /// Bytes those reads sent.
    pub read_bytes: u64,
    /// Successful writes (PUT and completed multipart uploads).
    pub writes: u64,
    /// Bytes written.
    pub written_bytes: u64,
    /// Requests that failed (4xx), which the report must not count.
    pub failed: u64,
}

/// Requests of the lake that a bucket owner would want to know of, counted as generated (each
/// logged copy of a request counts).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HygieneTruth {
    /// Signed with Signature Version 2 (`legacy-export`).
    pub sigv2: u64,
    /// Over TLS below 1.2 (`crm-sync`'s old client).
    pub old_tls: u64,
    /// Without credentials (the website's visitors).
    pub anonymous: u64,
    /// Authorised by an ACL (`legacy-export` writes with a canned ACL).
    pub acl_required: u64,
    /// From another region than the bucket's (`ml-training` runs in us-west-2).
    pub cross_region: u64,
    /// Refused with 403 (`scanner` probing the backups), by `(bucket, dataset, requester)`.
    pub forbidden: BTreeMap<(String, String, String), u64>,
}

/// The generated lake: its logs and its truth.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lake {
    /// The logs.
    pub workload: Workload,
    /// By `(bucket, dataset)`.
    pub truth: BTreeMap<(String, String), DatasetTruth>,
    /// The requests of note.
    pub hygiene: HygieneTruth,
    /// The hour whose records S3 never delivered (bucket and the hour's start): none of its
    /// requests is in the logs, and none is counted.
    pub lost_hour: (String, NaiveDateTime),
    /// Records S3 delivered twice (the same request id in two lines), by bucket.
    pub duplicates: BTreeMap<String, u64>,
    /// What an S3 Inventory lists at [`Lake::inventory_taken`]: every object version stored then
    /// (those the logs saw written, those older than the logs, and datasets nobody requested),
    /// and some delete markers.
    pub inventory: Vec<InventoryObject>,
    /// When the inventory was taken: the end of the range.
    pub inventory_taken: NaiveDateTime,
    /// What the inventory holds per dataset, counted as it was generated.
    pub storage: BTreeMap<(String, String), StorageTruth>,
}

/// The objects of one dataset in the inventory (delete markers are not objects).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StorageTruth {
    /// Object versions.
    pub objects: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Objects and bytes by storage class.
    pub by_class: BTreeMap<String, (u64, u64)>,
}

impl Lake {
    /// Bytes written in the range, all datasets.
    pub fn written_bytes(&self) -> u64 {
        self.truth.values().map(|t| t.written_bytes).sum()
    }
}

/// Builds the requests and counts the truth.
struct Builder {
    rng: StdRng,
    requests: Vec<Request>,
    /// The dataset of each request, for counting its copies.
    datasets: Vec<&'static str>,
    truth: BTreeMap<(String, String), DatasetTruth>,
    hygiene: HygieneTruth,
    /// How the next requests are made.
    client: Client,
    /// Requests in this hour of the lake bucket are not logged.
    lost_hour: NaiveDateTime,
    /// The objects stored, with their datasets, as an inventory lists them.
    stored: BTreeMap<(&'static str, String), (&'static str, InventoryObject)>,
}

impl Builder {
    /// A random time in `hour` of `date`.
    fn at(&mut self, date: NaiveDate, hour: u32) -> NaiveDateTime {
        let seconds = self.rng.random_range(0..3600);
        date.and_time(NaiveTime::from_hms_opt(hour.min(23), seconds / 60, seconds % 60).unwrap_or(NaiveTime::MIN))
    }

    /// The parts of the feature partition of `day`: keys and sizes.
    fn feature_partition(&mut self, day: NaiveDate) -> Vec<(String, i64)> {
        (0..FEATURE_PARTS)
            .map(|i| (format!("{FEATURES}dt={day}/part-{i:03}.parquet"), self.size(GIB)))
            .collect()
    }

    /// A size of about `mean` bytes (within 20%).
    fn size(&mut self, mean: f64) -> i64 {
        (mean * self.rng.random_range(0.8..1.2)) as i64
    }

    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        at: NaiveDateTime,
        bucket: &'static str,
        dataset: &'static str,
        who: Option<&str>,
        operation: &'static str,
        key: String,
        status: i32,
        bytes_sent: Option<i64>,
        object_size: Option<i64>,
    ) {
        if status == 200 && matches!(operation, "REST.PUT.OBJECT" | "REST.POST.UPLOAD") {
            // Stored whether or not its log record reaches the logs.
            self.store(bucket, dataset, &key, object_size.unwrap_or(0), at, "STANDARD");
        }
        if bucket == LAKE_BUCKET && at >= self.lost_hour && at < self.lost_hour + chrono::TimeDelta::hours(1) {
            return;
        }
        let request = Request {
            at,
            bucket,
            requester: who.map(super::requester),
            operation,
            key: Some(key),
            status: Some(status),
            error: match status {
                404 => Some("NoSuchKey"),
                403 => Some("AccessDenied"),
                _ => None,
            },
            bytes_sent,
            object_size,
            client: self.client,
            request_id: None,
        };
        self.count(&request, dataset);
        self.requests.push(request);
        self.datasets.push(dataset);
    }

    /// Stores (or replaces) the current version of `key`.
    fn store(
        &mut self,
        bucket: &'static str,
        dataset: &'static str,
        key: &str,
        size: i64,
        at: NaiveDateTime,
        storage_class: &'static str,
    ) {
        let object = InventoryObject {
            bucket,
            key: key.to_owned(),
            size: Some(size),
            last_modified: at,
            storage_class,
            is_latest: true,
            is_delete_marker: false,
        };
        self.stored.insert((bucket, key.to_owned()), (dataset, object));
    }

    /// Counts one logged copy of `r` in the truth.
    fn count(&mut self, r: &Request, dataset: &str) {
        let truth = self.truth.entry((r.bucket.to_owned(), dataset.to_owned())).or_default();
        let status = r.status.unwrap_or(200);
        if status >= 400 {
            truth.failed += 1;
        } else if r.operation.starts_with("REST.GET") || r.operation.starts_with("REST.HEAD") {
            truth.reads += 1;
            truth.read_bytes += r.bytes_sent.unwrap_or(0).max(0) as u64;
        } else if r.operation == "REST.PUT.OBJECT" || r.operation == "REST.POST.UPLOAD" {
            truth.writes += 1;
            truth.written_bytes += r.object_size.unwrap_or(0).max(0) as u64;
        }
        let h = &mut self.hygiene;
        h.sigv2 += u64::from(r.client.sigv2);
        h.old_tls += u64::from(r.client.old_tls);
        h.acl_required += u64::from(r.client.acl_required);
        h.cross_region += u64::from(r.client.source_region.is_some());
        h.anonymous += u64::from(r.requester.is_none());
        if status == 403 {
            let who = r.requester.clone().unwrap_or_else(|| "-".to_owned());
            *h.forbidden
                .entry((r.bucket.to_owned(), dataset.to_owned(), who))
                .or_default() += 1;
        }
    }

    /// Makes the requests of `body` as `client`.
    fn as_client(&mut self, client: Client, body: impl FnOnce(&mut Self)) {
        self.client = client;
        body(self);
        self.client = Client::default();
    }

    /// S3 delivers `n` records of each bucket a second time (the same line, the same request id).
    fn duplicate(&mut self, n: usize) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for bucket in [LAKE_BUCKET, WEB_BUCKET] {
            let of_bucket: Vec<usize> = (0..self.requests.len())
                .filter(|&i| self.requests[i].bucket == bucket)
                .collect();
            for _ in 0..n {
                let i = of_bucket[self.rng.random_range(0..of_bucket.len())];
                let id = format!("DUP{i:013X}");
                if self.requests[i].request_id.is_some() {
                    continue;
                }
                self.requests[i].request_id = Some(id.clone());
                let copy = Request {
                    requester: self.requests[i].requester.clone(),
                    key: self.requests[i].key.clone(),
                    request_id: Some(id),
                    ..self.requests[i]
                };
                let dataset = self.datasets[i];
                self.count(&copy, dataset);
                self.requests.push(copy);
                self.datasets.push(dataset);
                *out.entry(bucket.to_owned()).or_default() += 1;
            }
        }
        out
    }

    fn put(&mut self, at: NaiveDateTime, dataset: &'static str, who: &str, key: String, size: i64) {
        self.push(
            at,
            LAKE_BUCKET,
            dataset,
            Some(who),
            "REST.PUT.OBJECT",
            key,
            200,
            None,
            Some(size),
        );
    }

    /// A multipart upload's completion (its parts are not logged here).
    fn upload(&mut self, at: NaiveDateTime, dataset: &'static str, who: &str, key: String, size: i64) {
        self.push(
            at,
            LAKE_BUCKET,
            dataset,
            Some(who),
            "REST.POST.UPLOAD",
            key,
            200,
            Some(380),
            Some(size),
        );
    }

    /// A GET of `share` (0 to 1] of an object of `size`: a ranged read (206) below the whole.
    #[allow(clippy::too_many_arguments)]
    fn get(
        &mut self,
        at: NaiveDateTime,
        bucket: &'static str,
        dataset: &'static str,
        who: Option<&str>,
        key: String,
        size: i64,
        share: f64,
    ) {
        let (status, sent) = if share >= 1.0 {
            (200, size)
        } else {
            (206, ((size as f64) * share).max(1.0) as i64)
        };
        self.push(
            at,
            bucket,
            dataset,
            who,
            "REST.GET.OBJECT",
            key,
            status,
            Some(sent),
            Some(size),
        );
    }
}

/// Whether `date` is a Saturday or a Sunday.
fn weekend(date: NaiveDate) -> bool {
    matches!(date.weekday(), Weekday::Sat | Weekday::Sun)
}

/// A daily rhythm: 1 at the hour `peak`, a quarter of that twelve hours away.
fn rhythm(hour: u32, peak: u32) -> f64 {
    let phase = (f64::from(hour) - f64::from(peak) + 12.0) / 24.0 * std::f64::consts::TAU;
    0.25 + 0.75 * (0.5 - 0.5 * phase.cos())
}

const CLICKS: &str = "events/clicks/";
const APP_LOGS: &str = "logs/app/";
const SENSORS: &str = "raw/sensors/";
const BACKUPS: &str = "backups/warehouse/";
const SNAPSHOTS: &str = "snapshots/customers/";
const MODELS: &str = "models/recommender/";
const EXPORTS: &str = "exports/legacy/";
const NOTEBOOKS: &str = "tmp/notebooks/";
const WAREHOUSE: &str = "warehouse/orders/";
const CAFE: &str = "raw/café données/";
const ASSETS: &str = "web/assets/";
const ARCHIVE: &str = "archive/clickstream-2021/";
const LEGACY_DB: &str = "backups/legacy-db/";
const OLD_SITE: &str = "web/old-site/";
const FEATURES: &str = "features/store/";

/// The days of feature partitions there before the logs.
const FEATURE_DAYS_BEFORE: u32 = 400;
/// Feature partitions' parts.
const FEATURE_PARTS: u32 = 12;

/// The website's files and their sizes.
const WEB_FILES: [(&str, f64); 6] = [
    ("index.html", 24.0 * 1024.0),
    ("app.js", 310.0 * 1024.0),
    ("app.css", 48.0 * 1024.0),
    ("logo.png", 20.0 * 1024.0),
    ("hero.jpg", 1.2 * MIB),
    ("demo.mp4", 48.0 * MIB),
];

/// The lake of `days` days from `start`, from `seed`.
pub fn generate(start: NaiveDate, days: u32, seed: u64) -> Lake {
    let days = days.max(1);
    let date = |d: u32| start.checked_add_days(Days::new(u64::from(d))).unwrap_or(start);
    let lost_hour = date(days / 3).and_time(NaiveTime::from_hms_opt(13, 0, 0).unwrap_or(NaiveTime::MIN));
    let mut b = Builder {
        rng: StdRng::seed_from_u64(seed),
        requests: Vec::new(),
        datasets: Vec::new(),
        truth: BTreeMap::new(),
        hygiene: HygieneTruth::default(),
        client: Client::default(),
        lost_hour,
        stored: BTreeMap::new(),
    };
    let in_us_west_2 = Client {
        source_region: Some("us-west-2"),
        ..Client::default()
    };
    // What each day wrote, for the readers of older data: (key, size) per day.
    let mut clicks: Vec<Vec<(String, i64)>> = Vec::new();
    let mut app_logs: Vec<Vec<(String, i64)>> = Vec::new();
    let mut snapshots: Vec<Vec<(String, i64)>> = Vec::new();
    let mut first_full: Vec<(String, i64)> = Vec::new();
    let mut warehouse: Vec<(u32, String, i64)> = Vec::new();
    let mut model = b.size(6.0 * GIB);
    let first_model = model;
    let cafe = ["file+1.json", "file+2.json"];
    let web: Vec<(String, i64)> = WEB_FILES
        .iter()
        .map(|(name, size)| (format!("{ASSETS}{name}"), *size as i64))
        .collect();
    // Feature partitions by date, those before the logs stored now: (key, size) per part.
    let mut features: BTreeMap<NaiveDate, Vec<(String, i64)>> = BTreeMap::new();
    for before in 1..=FEATURE_DAYS_BEFORE {
        let Some(day) = start.checked_sub_days(Days::new(u64::from(before))) else {
            continue;
        };
        let at = day.and_time(NaiveTime::from_hms_opt(3, 0, 0).unwrap_or(NaiveTime::MIN));
        let parts = b.feature_partition(day);
        for (key, size) in &parts {
            b.store(LAKE_BUCKET, FEATURES, key, *size, at, "STANDARD");
        }
        features.insert(day, parts);
    }
    for d in 0..days {
        let today = date(d);
        let off = weekend(today);

        // Features: a partition a day, and a backtest reading partitions 60 to 300 days old in
        // full every night.
        let parts = b.feature_partition(today);
        for (key, size) in &parts {
            let at = b.at(today, 3);
            b.put(at, FEATURES, "feature-pipeline", key.clone(), *size);
        }
        features.insert(today, parts);
        for _ in 0..b.rng.random_range(40..=60) {
            let age = b.rng.random_range(60..=300);
            let Some(day) = today.checked_sub_days(Days::new(age)) else {
                continue;
            };
            let Some(list) = features.get(&day) else { continue };
            let (key, size) = list[b.rng.random_range(0..list.len())].clone();
            let hour = b.rng.random_range(20..=23);
            let at = b.at(today, hour);
            b.get(at, LAKE_BUCKET, FEATURES, Some("ml-backtest"), key, size, 1.0);
        }

        // Clicks, written at 01:00 and read through the day.
        let parts = b.rng.random_range(140..=180);
        let mut written = Vec::with_capacity(parts);
        for i in 0..parts {
            let key = format!("{CLICKS}dt={today}/part-{i:05}.snappy.parquet");
            let size = b.size(GIB);
            let at = b.at(today, 1);
            b.put(at, CLICKS, "etl-clicks", key.clone(), size);
            written.push((key, size));
        }
        clicks.push(written);
        let hours: Vec<u32> = if off { vec![10, 11, 12] } else { (8..=18).collect() };
        for hour in hours {
            let reads = if off {
                b.rng.random_range(3..=8)
            } else {
                b.rng.random_range(10..=25)
            };
            for _ in 0..reads {
                let (key, size) = clicks[d as usize][b.rng.random_range(0..parts)].clone();
                let at = b.at(today, hour);
                let share = b.rng.random_range(0.1..0.4);
                b.get(at, LAKE_BUCKET, CLICKS, Some("bi-dashboards"), key, size, share);
            }
        }
        if !off {
            for analyst in ["analyst-ana", "analyst-ben", "analyst-chen"] {
                if b.rng.random_bool(0.3) {
                    continue;
                }
                let hour = b.rng.random_range(9..=17);
                for _ in 0..b.rng.random_range(5..=30) {
                    let u: f64 = b.rng.random();
                    let age = 1 + (u * u * 13.0) as u32;
                    let Some(day) = d.checked_sub(age) else { continue };
                    let list = &clicks[day as usize];
                    let (key, size) = list[b.rng.random_range(0..list.len())].clone();
                    let at = b.at(today, hour);
                    let share = b.rng.random_range(0.05..0.6);
                    b.get(at, LAKE_BUCKET, CLICKS, Some(analyst), key, size, share);
                }
                if b.rng.random_bool(0.4) {
                    let at = b.at(today, hour);
                    let key = format!("{CLICKS}dt={today}/part-99999.snappy.parquet");
                    b.push(
                        at,
                        LAKE_BUCKET,
                        CLICKS,
                        Some(analyst),
                        "REST.GET.OBJECT",
                        key,
                        404,
                        Some(243),
                        None,
                    );
                }
            }
        }
        if today.weekday() == Weekday::Mon && d >= 37 {
            for _ in 0..b.rng.random_range(150..=250) {
                let age = b.rng.random_range(7..=37);
                let list = &clicks[(d - age) as usize];
                let (key, size) = list[b.rng.random_range(0..list.len())].clone();
                let at = b.at(today, 3);
                b.as_client(in_us_west_2, |b| {
                    b.get(at, LAKE_BUCKET, CLICKS, Some("ml-training"), key, size, 1.0)
                });
            }
        }

        // Application logs, every hour.
        let mut written = Vec::new();
        for hour in 0..24 {
            for i in 0..b.rng.random_range(15..=25) {
                let key = format!(
                    "{APP_LOGS}year={}/month={:02}/day={:02}/hour={hour:02}/app-{i:04}.json.gz",
                    today.year(),
                    today.month(),
                    today.day()
                );
                let size = b.size(768.0 * MIB);
                let at = b.at(today, hour);
                b.put(at, APP_LOGS, "log-shipper", key.clone(), size);
                written.push((key, size));
            }
        }
        app_logs.push(written);
        let reads = if off {
            b.rng.random_range(5..=20)
        } else {
            b.rng.random_range(20..=60)
        };
        for _ in 0..reads {
            let age = b.rng.random_range(0..=1).min(d);
            let list = &app_logs[(d - age) as usize];
            let (key, size) = list[b.rng.random_range(0..list.len())].clone();
            let hour = b.rng.random_range(0..24);
            let at = b.at(today, hour);
            let share = b.rng.random_range(0.2..1.0);
            b.get(at, LAKE_BUCKET, APP_LOGS, Some("oncall-sre"), key, size, share);
        }
        if today.day() == 1 && d >= 30 {
            for _ in 0..40 {
                let age = b.rng.random_range(20..=30);
                let list = &app_logs[(d - age) as usize];
                let (key, size) = list[b.rng.random_range(0..list.len())].clone();
                let at = b.at(today, 10);
                b.get(at, LAKE_BUCKET, APP_LOGS, Some("security-audit"), key, size, 1.0);
            }
        }

        // Sensor batches: each read once, the next night.
        let batches = b.rng.random_range(350..=450);
        let mut yesterday = Vec::new();
        for i in 0..batches {
            let key = format!("{SENSORS}{}/batch-{i:04}.avro", today.format("%Y/%m/%d"));
            let size = b.size(6.0 * GIB);
            let at = b.at(today, (i % 24) as u32);
            b.put(at, SENSORS, "iot-ingest", key.clone(), size);
            yesterday.push((key, size));
        }
        if let Some(next) = (d + 1 < days).then(|| date(d + 1)) {
            for (key, size) in yesterday {
                let hour = b.rng.random_range(2..=5);
                let at = b.at(next, hour);
                b.get(at, LAKE_BUCKET, SENSORS, Some("spark-etl"), key, size, 1.0);
            }
        }

        // Backups: full on Sundays, incremental otherwise; a restore drill halfway.
        let (count, mean, kind) = if today.weekday() == Weekday::Sun {
            (200, 16.0 * GIB, "full")
        } else {
            (30, 4.0 * GIB, "incr")
        };
        for i in 0..count {
            let key = format!("{BACKUPS}{today}/{kind}-{i:03}.tar.zst");
            let size = b.size(mean);
            let at = b.at(today, (i % 4) as u32);
            b.upload(at, BACKUPS, "db-backup", key.clone(), size);
            if kind == "full" && first_full.len() < 200 {
                first_full.push((key, size));
            }
        }
        if d == days / 2 {
            for (key, size) in first_full.iter().take(3).cloned().collect::<Vec<_>>() {
                let at = b.at(today, 14);
                b.get(at, LAKE_BUCKET, BACKUPS, Some("dr-drill"), key, size, 1.0);
            }
        }

        // A scanner probing the backups, refused.
        for _ in 0..b.rng.random_range(5..=20) {
            let hour = b.rng.random_range(0..24);
            let at = b.at(today, hour);
            let key = format!("{BACKUPS}{today}/full-{:03}.tar.zst", b.rng.random_range(0..200));
            b.push(
                at,
                LAKE_BUCKET,
                BACKUPS,
                Some("scanner"),
                "REST.GET.OBJECT",
                key,
                403,
                Some(243),
                None,
            );
        }

        // Customer snapshots.
        let mut written = Vec::new();
        for i in 0..8 {
            let key = format!("{SNAPSHOTS}{}/customers-{i}.parquet", today.format("%Y/%m/%d"));
            let size = b.size(2.5 * GIB);
            let at = b.at(today, 2);
            b.put(at, SNAPSHOTS, "etl-snapshots", key.clone(), size);
            written.push((key, size));
        }
        for hour in [6, 14] {
            for (key, size) in written.clone() {
                let at = b.at(today, hour);
                let old_tls = Client {
                    old_tls: true,
                    ..Client::default()
                };
                b.as_client(old_tls, |b| {
                    b.get(at, LAKE_BUCKET, SNAPSHOTS, Some("crm-sync"), key, size, 1.0)
                });
            }
        }
        snapshots.push(written);
        if today.day() == 15 && d >= 20 {
            let age = b.rng.random_range(20..=d.min(50));
            for (key, size) in snapshots[(d - age) as usize].clone() {
                let at = b.at(today, 11);
                b.get(at, LAKE_BUCKET, SNAPSHOTS, Some("auditor"), key, size, 1.0);
            }
        }

        // The model (older than the logs at first): a new one on Mondays, served all day.
        let model_key = format!("{MODELS}weights.bin");
        if today.weekday() == Weekday::Mon {
            model = b.size(6.0 * GIB);
            let at = b.at(today, 0);
            b.as_client(in_us_west_2, |b| {
                b.upload(at, MODELS, "ml-training", model_key.clone(), model)
            });
        }
        for hour in 1..24 {
            if b.rng.random_bool(0.9) {
                let at = b.at(today, hour);
                b.get(
                    at,
                    LAKE_BUCKET,
                    MODELS,
                    Some("model-serving"),
                    model_key.clone(),
                    model,
                    1.0,
                );
            }
        }

        // Written, never read: the legacy export and notebook scratch.
        let at = b.at(today, 3);
        let size = b.size(2.0 * GIB);
        let legacy = Client {
            sigv2: true,
            acl_required: true,
            ..Client::default()
        };
        b.as_client(legacy, |b| {
            b.put(at, EXPORTS, "legacy-export", format!("{EXPORTS}{today}.csv"), size)
        });
        if !off && b.rng.random_bool(0.5) {
            let user = ["ana", "ben", "chen"][b.rng.random_range(0..3)];
            let hour = b.rng.random_range(9..=17);
            for i in 0..b.rng.random_range(4..=16) {
                let at = b.at(today, hour);
                let size = b.size(300.0 * MIB);
                b.put(
                    at,
                    NOTEBOOKS,
                    &format!("notebook-{user}"),
                    format!("{NOTEBOOKS}{user}/run-{today}-{hour:02}/part-{i}.parquet"),
                    size,
                );
            }
        }

        // A Delta table: a day's data files and its commit, then queries over the last week.
        let files = b.rng.random_range(20..=30);
        let mut commit_size = 0;
        for i in 0..files {
            let key = format!("{WAREHOUSE}order_date={today}/part-{i:05}-{d:04}.snappy.parquet");
            let size = b.size(GIB);
            let at = b.at(today, 4);
            b.put(at, WAREHOUSE, "spark-orders", key.clone(), size);
            warehouse.push((d, key, size));
            commit_size += 300;
        }
        let at = b.at(today, 5);
        b.put(
            at,
            WAREHOUSE,
            "spark-orders",
            format!("{WAREHOUSE}_delta_log/{d:020}.json"),
            commit_size,
        );
        if !off {
            for hour in 9..=17 {
                let at = b.at(today, hour);
                b.get(
                    at,
                    LAKE_BUCKET,
                    WAREHOUSE,
                    Some("trino"),
                    format!("{WAREHOUSE}_delta_log/{d:020}.json"),
                    commit_size,
                    1.0,
                );
                let recent: Vec<(String, i64)> = warehouse
                    .iter()
                    .filter(|(day, _, _)| d - day < 7)
                    .map(|(_, key, size)| (key.clone(), *size))
                    .collect();
                for _ in 0..b.rng.random_range(2..=6) {
                    let (key, size) = recent[b.rng.random_range(0..recent.len())].clone();
                    let at = b.at(today, hour);
                    let share = b.rng.random_range(0.05..0.5);
                    b.get(at, LAKE_BUCKET, WAREHOUSE, Some("trino"), key, size, share);
                }
            }
        }

        // Files older than the logs, with keys S3 percent-encodes.
        for (minute, file) in cafe.iter().enumerate() {
            let at = today.and_time(NaiveTime::from_hms_opt(6, minute as u32, 0).unwrap_or(NaiveTime::MIN));
            b.get(at, LAKE_BUCKET, CAFE, Some("spark"), format!("{CAFE}{file}"), 1024, 1.0);
        }

        // The website: anonymous visitors on a daily rhythm, the CDN once a day.
        let busy = if off { 1.4 } else { 1.0 };
        for hour in 0..24 {
            let visits = (rhythm(hour, 15) * busy * b.rng.random_range(6.0..14.0)) as usize;
            for _ in 0..visits {
                let (key, size) = web[b.rng.random_range(0..web.len())].clone();
                let at = b.at(today, hour);
                b.get(at, WEB_BUCKET, ASSETS, None, key, size, 1.0);
            }
        }
        for (key, size) in web.clone() {
            let at = b.at(today, 18);
            b.get(at, WEB_BUCKET, ASSETS, Some("cdn"), key, size, 1.0);
        }
    }
    let duplicates = b.duplicate(20);
    let inventory_taken = date(days).and_time(NaiveTime::MIN);
    let before = |days_before: u64, hour: u32| {
        start
            .checked_sub_days(Days::new(days_before))
            .unwrap_or(start)
            .and_time(NaiveTime::from_hms_opt(hour, 0, 0).unwrap_or(NaiveTime::MIN))
    };
    // There before the logs: the first model, the café files, the website's assets.
    let model_key = format!("{MODELS}weights.bin");
    if !b.stored.contains_key(&(LAKE_BUCKET, model_key.clone())) {
        b.store(LAKE_BUCKET, MODELS, &model_key, first_model, before(20, 9), "STANDARD");
    }
    for file in cafe {
        b.store(
            LAKE_BUCKET,
            CAFE,
            &format!("{CAFE}{file}"),
            1024,
            before(200, 12),
            "STANDARD",
        );
    }
    for (key, size) in &web {
        b.store(WEB_BUCKET, ASSETS, key, *size, before(90, 10), "STANDARD");
    }
    // Dark data: stored, never requested in the range.
    for i in 0..120 {
        let size = b.size(4.0 * GIB);
        let class = if i < 80 { "DEEP_ARCHIVE" } else { "GLACIER" };
        let key = format!("{ARCHIVE}part-{i:05}.avro");
        b.store(LAKE_BUCKET, ARCHIVE, &key, size, before(1800 + i, 2), class);
    }
    for i in 0..40 {
        let size = b.size(12.0 * GIB);
        let key = format!("{LEGACY_DB}dump-{i:03}.sql.gz");
        b.store(LAKE_BUCKET, LEGACY_DB, &key, size, before(400 + i, 4), "STANDARD");
    }
    for i in 0..25 {
        let size = b.rng.random_range(20_000..100_000);
        let key = format!("{OLD_SITE}page-{i:02}.html");
        b.store(WEB_BUCKET, OLD_SITE, &key, size, before(700, 8), "STANDARD");
    }
    let mut inventory: Vec<(&'static str, InventoryObject)> = b.stored.into_values().collect();
    // A versioned history in the legacy dumps: two older versions (stored and billed) and three
    // delete markers (not objects).
    for i in 0..5u64 {
        let key = format!("{LEGACY_DB}dump-{i:03}.sql.gz");
        let delete_marker = i >= 2;
        inventory.push((
            LEGACY_DB,
            InventoryObject {
                bucket: LAKE_BUCKET,
                key,
                size: (!delete_marker).then_some(3 << 30),
                last_modified: before(900 + i, 4),
                storage_class: "STANDARD_IA",
                is_latest: false,
                is_delete_marker: delete_marker,
            },
        ));
    }
    let mut storage: BTreeMap<(String, String), StorageTruth> = BTreeMap::new();
    for (dataset, object) in &inventory {
        if object.is_delete_marker {
            continue;
        }
        let size = object.size.unwrap_or(0).max(0) as u64;
        let t = storage
            .entry((object.bucket.to_owned(), (*dataset).to_owned()))
            .or_default();
        t.objects += 1;
        t.bytes += size;
        let class = t.by_class.entry(object.storage_class.to_owned()).or_default();
        class.0 += 1;
        class.1 += size;
    }
    Lake {
        workload: render(start, days, b.requests),
        truth: b.truth,
        hygiene: b.hygiene,
        lost_hour: (LAKE_BUCKET.to_owned(), lost_hour),
        duplicates,
        inventory: inventory.into_iter().map(|(_, o)| o).collect(),
        inventory_taken,
        storage,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn the_lake_is_large_textured_and_what_its_truth_says() {
        let start = NaiveDate::from_ymd_opt(2024, 3, 1).unwrap();
        let lake = generate(start, 60, 7);
        assert_eq!(lake, generate(start, 60, 7), "deterministic");
        assert_ne!(lake.workload, generate(start, 60, 8).workload);
        // A few hundred TB written in the range.
        let tb = lake.written_bytes() as f64 / 1e12;
        assert!((150.0..400.0).contains(&tb), "{tb} TB");

        // Every line parses (but the web bucket's malformed one per object), and the logs hold
        // what the truth counts.
        let mut counted: BTreeMap<(String, String), DatasetTruth> = BTreeMap::new();
        let mut days_read: BTreeMap<String, BTreeSet<NaiveDate>> = BTreeMap::new();
        let mut bad = 0;
        let mut hygiene = HygieneTruth::default();
        let mut ids: BTreeMap<(String, String), u64> = BTreeMap::new();
        let mut in_lost_hour = 0;
        let mut written_keys: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for object in &lake.workload.objects {
            for (_, _, parsed) in crate::parse_lines(&object.data) {
                let Ok(record) = parsed else {
                    bad += 1;
                    continue;
                };
                let key = record.key.as_deref().unwrap_or_default().to_owned();
                let dataset = [
                    CLICKS, APP_LOGS, SENSORS, BACKUPS, SNAPSHOTS, MODELS, EXPORTS, NOTEBOOKS, WAREHOUSE, CAFE, ASSETS,
                    FEATURES,
                ]
                .into_iter()
                .find(|d| key.starts_with(d))
                .unwrap_or_else(|| panic!("{key} is in no dataset"));
                let t = counted.entry((object.bucket.clone(), dataset.to_owned())).or_default();
                let status = record.http_status.unwrap_or(0);
                hygiene.sigv2 += u64::from(record.signature_version.as_deref() == Some("SigV2"));
                hygiene.old_tls += u64::from(record.tls_version.as_deref() == Some("TLSv1"));
                hygiene.acl_required += u64::from(record.acl_required == Some(true));
                hygiene.cross_region += u64::from(record.source_region.is_some());
                hygiene.anonymous += u64::from(record.requester.is_none());
                if status == 403 {
                    let who = record.requester.as_deref().unwrap_or("-").to_owned();
                    *hygiene
                        .forbidden
                        .entry((object.bucket.clone(), dataset.to_owned(), who))
                        .or_default() += 1;
                }
                *ids.entry((
                    object.bucket.clone(),
                    record.request_id.as_deref().unwrap_or_default().to_owned(),
                ))
                .or_default() += 1;
                let at = chrono::DateTime::from_timestamp_micros(record.request_time)
                    .unwrap()
                    .naive_utc();
                if object.bucket == lake.lost_hour.0
                    && at >= lake.lost_hour.1
                    && at < lake.lost_hour.1 + chrono::TimeDelta::hours(1)
                {
                    in_lost_hour += 1;
                }
                let op = record.operation.as_deref().unwrap_or_default();
                if status >= 400 {
                    t.failed += 1;
                } else if op.starts_with("REST.GET") {
                    t.reads += 1;
                    t.read_bytes += record.bytes_sent.unwrap_or(0) as u64;
                    let day = chrono::DateTime::from_timestamp_micros(record.request_time)
                        .unwrap()
                        .date_naive();
                    days_read.entry(dataset.to_owned()).or_default().insert(day);
                } else {
                    t.writes += 1;
                    t.written_bytes += record.object_size.unwrap_or(0) as u64;
                    written_keys.entry(dataset.to_owned()).or_default().insert(key.clone());
                }
            }
        }
        assert_eq!(bad, lake.workload.malformed);
        assert_eq!(counted, lake.truth);
        assert_eq!(hygiene, lake.hygiene);
        assert!(hygiene.sigv2 == 60 && hygiene.old_tls > 0 && hygiene.cross_region > 0 && hygiene.anonymous > 0);
        let mut twice: BTreeMap<String, u64> = BTreeMap::new();
        for ((bucket, _), n) in ids {
            assert!(n <= 2);
            if n == 2 {
                *twice.entry(bucket).or_default() += 1;
            }
        }
        assert_eq!(twice, lake.duplicates);
        assert_eq!(in_lost_hour, 0);
        // Read on most days, but not evenly: weekends are quieter for the lake, busier for the web.
        let clicks = &lake.truth[&(LAKE_BUCKET.to_owned(), CLICKS.to_owned())];
        assert!(clicks.reads > 60 * 50 && clicks.failed > 0, "{clicks:?}");
        assert_eq!(lake.truth[&(LAKE_BUCKET.to_owned(), EXPORTS.to_owned())].reads, 0);
        assert_eq!(lake.truth[&(LAKE_BUCKET.to_owned(), NOTEBOOKS.to_owned())].reads, 0);
        assert!(days_read[SENSORS].len() >= 59);
        let per_day = |bucket: &str, day: NaiveDate| -> usize {
            lake.workload
                .objects
                .iter()
                .filter(|o| o.bucket == bucket && o.name.starts_with(&day.to_string()))
                .map(|o| {
                    o.data
                        .split(|b| *b == b'\n')
                        .filter(|l| l.windows(15).any(|w| w == b"REST.GET.OBJECT"))
                        .count()
                })
                .sum()
        };
        let saturday = NaiveDate::from_ymd_opt(2024, 3, 2).unwrap();
        let tuesday = NaiveDate::from_ymd_opt(2024, 3, 5).unwrap();
        assert!(per_day(LAKE_BUCKET, saturday) < per_day(LAKE_BUCKET, tuesday));
        // The inventory: every object the logs saw written, once (S3 logs some writes twice), at
        // its last size; the ones older than the logs; the dark datasets, which no request touched.
        let stored = |bucket: &str, dataset: &str| &lake.storage[&(bucket.to_owned(), dataset.to_owned())];
        assert_eq!(stored(LAKE_BUCKET, CLICKS).objects, written_keys[CLICKS].len() as u64);
        assert_eq!(stored(LAKE_BUCKET, MODELS).objects, 1, "one key, overwritten");
        assert_eq!(
            stored(LAKE_BUCKET, FEATURES).objects,
            u64::from(FEATURE_PARTS * (FEATURE_DAYS_BEFORE + 60))
        );
        assert_eq!(stored(LAKE_BUCKET, CAFE).objects, 2);
        assert_eq!(stored(WEB_BUCKET, ASSETS).objects, WEB_FILES.len() as u64);
        assert_eq!(stored(LAKE_BUCKET, ARCHIVE).by_class["DEEP_ARCHIVE"].0, 80);
        assert_eq!(stored(LAKE_BUCKET, ARCHIVE).by_class["GLACIER"].0, 40);
        assert_eq!(
            stored(LAKE_BUCKET, LEGACY_DB).objects,
            42,
            "40 dumps and two older versions"
        );
        assert_eq!(lake.inventory.iter().filter(|o| o.is_delete_marker).count(), 3);
        for dark in [(LAKE_BUCKET, ARCHIVE), (LAKE_BUCKET, LEGACY_DB), (WEB_BUCKET, OLD_SITE)] {
            assert!(
                !lake.truth.contains_key(&(dark.0.to_owned(), dark.1.to_owned())),
                "{dark:?}"
            );
        }
        let keys: BTreeSet<(&str, &str)> = lake
            .inventory
            .iter()
            .filter(|o| o.is_latest)
            .map(|o| (o.bucket, o.key.as_str()))
            .collect();
        assert_eq!(
            keys.len(),
            lake.inventory.iter().filter(|o| o.is_latest).count(),
            "a key is listed once"
        );

        // Small enough to generate and ingest in seconds.
        let bytes: usize = lake.workload.objects.iter().map(|o| o.data.len()).sum();
        assert!(bytes < 80 << 20, "{bytes} bytes of logs");
    }
}
