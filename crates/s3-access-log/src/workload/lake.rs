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
//! * `raw/café données/file+1.json` and `file+2.json` (1 KiB, older than the logs) read by
//!   `spark` every morning: keys with spaces, `+` and accents.
//!
//! Bucket [`WEB_BUCKET`]: `web/assets/` files read by anonymous clients on a daily rhythm
//! (peaking at 15:00 UTC, busier on weekends) and by `cdn` once a day; each of its log objects
//! ends with one malformed line.

use std::collections::BTreeMap;

use chrono::{Datelike, Days, NaiveDate, NaiveDateTime, NaiveTime, Weekday};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{LAKE_BUCKET, Request, WEB_BUCKET, Workload, render};

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

/// The generated lake: its logs and its truth.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lake {
    /// The logs.
    pub workload: Workload,
    /// By `(bucket, dataset)`.
    pub truth: BTreeMap<(String, String), DatasetTruth>,
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
    truth: BTreeMap<(String, String), DatasetTruth>,
}

impl Builder {
    /// A random time in `hour` of `date`.
    fn at(&mut self, date: NaiveDate, hour: u32) -> NaiveDateTime {
        let seconds = self.rng.random_range(0..3600);
        date.and_time(NaiveTime::from_hms_opt(hour.min(23), seconds / 60, seconds % 60).unwrap_or(NaiveTime::MIN))
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
        dataset: &str,
        who: Option<&str>,
        operation: &'static str,
        key: String,
        status: i32,
        bytes_sent: Option<i64>,
        object_size: Option<i64>,
    ) {
        let truth = self.truth.entry((bucket.to_owned(), dataset.to_owned())).or_default();
        if status >= 400 {
            truth.failed += 1;
        } else if operation.starts_with("REST.GET") || operation.starts_with("REST.HEAD") {
            truth.reads += 1;
            truth.read_bytes += bytes_sent.unwrap_or(0).max(0) as u64;
        } else if operation == "REST.PUT.OBJECT" || operation == "REST.POST.UPLOAD" {
            truth.writes += 1;
            truth.written_bytes += object_size.unwrap_or(0).max(0) as u64;
        }
        self.requests.push(Request {
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
        });
    }

    fn put(&mut self, at: NaiveDateTime, dataset: &str, who: &str, key: String, size: i64) {
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
    fn upload(&mut self, at: NaiveDateTime, dataset: &str, who: &str, key: String, size: i64) {
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
        dataset: &str,
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
const CAFE: &str = "raw/café données/";
const ASSETS: &str = "web/assets/";

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
    let mut b = Builder {
        rng: StdRng::seed_from_u64(seed),
        requests: Vec::new(),
        truth: BTreeMap::new(),
    };
    let date = |d: u32| start.checked_add_days(Days::new(u64::from(d))).unwrap_or(start);
    // What each day wrote, for the readers of older data: (key, size) per day.
    let mut clicks: Vec<Vec<(String, i64)>> = Vec::new();
    let mut app_logs: Vec<Vec<(String, i64)>> = Vec::new();
    let mut snapshots: Vec<Vec<(String, i64)>> = Vec::new();
    let mut first_full: Vec<(String, i64)> = Vec::new();
    let mut model = b.size(6.0 * GIB);
    let cafe = ["file+1.json", "file+2.json"];
    let web: Vec<(String, i64)> = WEB_FILES
        .iter()
        .map(|(name, size)| (format!("{ASSETS}{name}"), *size as i64))
        .collect();
    for d in 0..days {
        let today = date(d);
        let off = weekend(today);

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
                b.get(at, LAKE_BUCKET, CLICKS, Some("ml-training"), key, size, 1.0);
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
                b.get(at, LAKE_BUCKET, SNAPSHOTS, Some("crm-sync"), key, size, 1.0);
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
            b.upload(at, MODELS, "ml-training", model_key.clone(), model);
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
        b.put(at, EXPORTS, "legacy-export", format!("{EXPORTS}{today}.csv"), size);
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
    Lake {
        workload: render(start, days, b.requests),
        truth: b.truth,
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
        for object in &lake.workload.objects {
            for (_, _, parsed) in crate::parse_lines(&object.data) {
                let Ok(record) = parsed else {
                    bad += 1;
                    continue;
                };
                let key = record.key.as_deref().unwrap_or_default().to_owned();
                let dataset = [
                    CLICKS, APP_LOGS, SENSORS, BACKUPS, SNAPSHOTS, MODELS, EXPORTS, NOTEBOOKS, CAFE, ASSETS,
                ]
                .into_iter()
                .find(|d| key.starts_with(d))
                .unwrap_or_else(|| panic!("{key} is in no dataset"));
                let t = counted.entry((object.bucket.clone(), dataset.to_owned())).or_default();
                let status = record.http_status.unwrap_or(0);
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
                }
            }
        }
        assert_eq!(bad, lake.workload.malformed);
        assert_eq!(counted, lake.truth);
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
        // Small enough to generate and ingest in seconds.
        let bytes: usize = lake.workload.objects.iter().map(|o| o.data.len()).sum();
        assert!(bytes < 80 << 20, "{bytes} bytes of logs");
    }
}
