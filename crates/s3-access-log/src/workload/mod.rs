//! A generated data-lake workload whose access patterns are known, as S3 server access logs: what
//! the tests feed the access report (and a realistic sample for trying it).
//!
//! Day `d` is `start + d`, for `d` in `0..days` (at least 51 days, for the lifecycle actions).
//! Requesters are role ARNs ([`requester`]). Every request succeeds unless said otherwise.
//!
//! Bucket [`LAKE_BUCKET`]:
//!
//! * **`events/clicks/`**, append-only Hive partitions
//!   `events/clicks/dt=YYYY-MM-DD/part-0000{0,1}.snappy.parquet` of [`CLICKS_PART_BYTES`] each.
//!   Day `d`: `etl-clicks` PUTs both parts of day `d` at 01:00:00 and 01:00:01; `dashboards`
//!   GETs part 0 of day `d` at 09:00, 10:00 and 11:00 and HEADs it at 09:30; `analyst` GETs part 1
//!   of day `d - 3` at 13:00 (from day 3); `ml-training` GETs part 0 of day `d - 40` at 14:00 on
//!   days 40, 50, 60... Failed requests that must not count: `analyst` GETs a missing
//!   `part-00009` of day `d` at 15:00 (404) and `intruder` PUTs `evil.parquet` into day `d`'s
//!   partition at 04:00 (403). Out of the range: `dashboards` GETs part 0 of day 0 at 23:59:59 the
//!   day before day 0, and part 0 of the last day at 00:00:00 the day after the last day.
//! * **`snapshots/customers/`**, daily snapshots `snapshots/customers/YYYY/MM/DD/customers.csv.gz`
//!   of [`SNAPSHOT_BYTES`]: `etl-snapshots` PUTs day `d`'s at 02:00; `crm` GETs it at 08:00 and
//!   16:00; on the last day `auditor` GETs the snapshot of day 0 at 17:00.
//! * **`models/recommender/`**, no partition: `weights.bin` ([`MODEL_BYTES`]) uploaded by
//!   `ml-training` in four parts (`REST.PUT.PART` at 00:10-00:13) completed at 00:15 on day 0
//!   (`REST.POST.UPLOAD`); `old.bin` ([`OLD_MODEL_BYTES`]) PUT by `ml-training` at 12:00 ten days
//!   before day 0. `serving` GETs `weights.bin` at 12:00 every day, and `old.bin` at 12:30 on
//!   day 0.
//! * **`exports/legacy/`**, written and never read: `legacy-export` PUTs
//!   `exports/legacy/YYYY-MM-DD.csv` ([`EXPORT_BYTES`]) at 03:00 every day; `backfill-job` PUTs
//!   `exports/legacy/backfill-1.csv` and `backfill-2.csv` (same size, no date) at 03:30 and 03:31
//!   on day 10. S3 Lifecycle transitions the exports of days 0-9 to Standard-IA on day 40
//!   (`S3.TRANSITION_SIA.OBJECT`, 00:00:00 + day seconds) and expires those of days 0-4 on day 50
//!   (`S3.EXPIRE.OBJECT`).
//! * **`raw/café données/`**, objects older than the logs (never written in them):
//!   `raw/café données/file+1.json` and `file+2.json` of 1 KiB, each GET by `spark` at 06:00 and
//!   06:01 every day. Their keys are percent-encoded in the log lines, as S3 writes them.
//! * Bucket-level requests with no key: `dashboards` lists the bucket (`REST.GET.BUCKET`) at 00:05.
//!
//! Bucket [`WEB_BUCKET`]: **`web/assets/`** `web/assets/logo.png` ([`LOGO_BYTES`], older than the
//! logs) GET five times a day by anonymous clients (requester `-`) at 10:00-10:04 and by `cdn` at
//! 18:00. Each of its log objects ends with one malformed line, which ingestion rejects.
//!
//! The logs come as one object per bucket and day, lines in time order, named like S3 names them
//! (`YYYY-MM-DD-HH-MM-SS-UNIQUE`) under a folder per bucket.
//!
//! [`lake`] generates a larger lake of the same buckets with the texture of a real one (what
//! `lakelog demo` shows): its truth is counted as it is generated rather than written out here.

pub mod inventory;
pub mod lake;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use crate::AccessLogRecord;
use crate::render::{encode_key, write_line};
use chrono::{Days, NaiveDate, NaiveDateTime, NaiveTime};

/// The data-lake bucket.
pub const LAKE_BUCKET: &str = "lake-analytics";
/// The website bucket.
pub const WEB_BUCKET: &str = "lake-web";
/// Size of each clicks part.
pub const CLICKS_PART_BYTES: i64 = 2 << 20;
/// Size of each customers snapshot.
pub const SNAPSHOT_BYTES: i64 = 5 << 20;
/// Size of the model.
pub const MODEL_BYTES: i64 = 100 << 20;
/// Size of the older model.
pub const OLD_MODEL_BYTES: i64 = 50 << 20;
/// Size of each export.
pub const EXPORT_BYTES: i64 = 10 << 20;
/// Size of each raw file.
pub const RAW_BYTES: i64 = 1024;
/// Size of the logo.
pub const LOGO_BYTES: i64 = 20 * 1024;
/// The fewest days a workload has.
pub const MIN_DAYS: u32 = 51;

/// One raw log object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogObject {
    /// The bucket whose requests it logs.
    pub bucket: String,
    /// Its name, `YYYY-MM-DD-HH-MM-SS-UNIQUE`.
    pub name: String,
    /// Its lines.
    pub data: Vec<u8>,
}

/// The generated logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workload {
    /// Day 0.
    pub start: NaiveDate,
    /// Days in the range.
    pub days: u32,
    /// The log objects, in time order per bucket.
    pub objects: Vec<LogObject>,
    /// Malformed lines among them.
    pub malformed: u64,
}

/// The requester of a named role: `arn:aws:sts::123456789012:assumed-role/NAME/session`.
pub fn requester(name: &str) -> String {
    format!("arn:aws:sts::123456789012:assumed-role/{name}/session")
}

/// A request of the workload, before it is rendered.
struct Request {
    at: NaiveDateTime,
    bucket: &'static str,
    requester: Option<String>,
    operation: &'static str,
    key: Option<String>,
    status: Option<i32>,
    error: Option<&'static str>,
    bytes_sent: Option<i64>,
    object_size: Option<i64>,
    /// How the client called, where it differs from a current SDK in the bucket's region.
    client: Client,
    /// The request id, where it must be a given one (a record S3 delivered twice); else one is
    /// numbered.
    request_id: Option<String>,
}

/// How a request was made: by default a current SDK (Signature Version 4 over TLS 1.2, in the
/// bucket's region, no ACL needed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Client {
    /// Signed with Signature Version 2.
    sigv2: bool,
    /// Over TLS 1.0 rather than 1.2.
    old_tls: bool,
    /// An ACL was needed to authorise it.
    acl_required: bool,
    /// The region it came from, when not the bucket's.
    source_region: Option<&'static str>,
}

/// Builds requests of one day.
struct Day<'a> {
    date: NaiveDate,
    out: &'a mut Vec<Request>,
}

impl Day<'_> {
    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        time: (u32, u32, u32),
        bucket: &'static str,
        who: Option<&str>,
        operation: &'static str,
        key: Option<String>,
        status: Option<i32>,
        bytes_sent: Option<i64>,
        object_size: Option<i64>,
    ) {
        let time = NaiveTime::from_hms_opt(time.0, time.1, time.2).unwrap_or(NaiveTime::MIN);
        let error = match status {
            Some(404) => Some("NoSuchKey"),
            Some(403) => Some("AccessDenied"),
            _ => None,
        };
        self.out.push(Request {
            at: self.date.and_time(time),
            bucket,
            requester: who.map(requester),
            operation,
            key,
            status,
            error,
            bytes_sent,
            object_size,
            client: Client::default(),
            request_id: None,
        });
    }

    fn get(&mut self, time: (u32, u32, u32), bucket: &'static str, who: Option<&str>, key: String, size: i64) {
        self.push(
            time,
            bucket,
            who,
            "REST.GET.OBJECT",
            Some(key),
            Some(200),
            Some(size),
            Some(size),
        );
    }

    fn put(&mut self, time: (u32, u32, u32), who: &str, key: String, size: i64) {
        self.push(
            time,
            LAKE_BUCKET,
            Some(who),
            "REST.PUT.OBJECT",
            Some(key),
            Some(200),
            None,
            Some(size),
        );
    }

    fn lifecycle(&mut self, time: (u32, u32, u32), operation: &'static str, key: String, size: i64) {
        self.push(time, LAKE_BUCKET, None, operation, Some(key), None, None, Some(size));
    }
}

fn clicks(date: NaiveDate, part: u32) -> String {
    format!("events/clicks/dt={date}/part-{part:05}.snappy.parquet")
}

fn snapshot(date: NaiveDate) -> String {
    format!("snapshots/customers/{}/customers.csv.gz", date.format("%Y/%m/%d"))
}

fn export(date: NaiveDate) -> String {
    format!("exports/legacy/{date}.csv")
}

/// The workload of `days` days (at least [`MIN_DAYS`]) from `start`.
pub fn generate(start: NaiveDate, days: u32) -> Workload {
    let days = days.max(MIN_DAYS);
    let date = |d: i64| {
        if d >= 0 {
            start.checked_add_days(Days::new(d as u64))
        } else {
            start.checked_sub_days(Days::new(d.unsigned_abs()))
        }
        .unwrap_or(start)
    };
    let mut requests = Vec::new();
    let last = i64::from(days) - 1;
    {
        let mut before = Day {
            date: date(-10),
            out: &mut requests,
        };
        before.put(
            (12, 0, 0),
            "ml-training",
            "models/recommender/old.bin".into(),
            OLD_MODEL_BYTES,
        );
        let mut eve = Day {
            date: date(-1),
            out: &mut requests,
        };
        eve.get(
            (23, 59, 59),
            LAKE_BUCKET,
            Some("dashboards"),
            clicks(start, 0),
            CLICKS_PART_BYTES,
        );
        let mut after = Day {
            date: date(last + 1),
            out: &mut requests,
        };
        after.get(
            (0, 0, 0),
            LAKE_BUCKET,
            Some("dashboards"),
            clicks(date(last), 0),
            CLICKS_PART_BYTES,
        );
    }
    for d in 0..=last {
        let today = date(d);
        let mut day = Day {
            date: today,
            out: &mut requests,
        };
        day.push(
            (0, 5, 0),
            LAKE_BUCKET,
            Some("dashboards"),
            "REST.GET.BUCKET",
            None,
            Some(200),
            Some(4096),
            None,
        );
        // Clicks.
        day.put((1, 0, 0), "etl-clicks", clicks(today, 0), CLICKS_PART_BYTES);
        day.put((1, 0, 1), "etl-clicks", clicks(today, 1), CLICKS_PART_BYTES);
        for hour in [9, 10, 11] {
            day.get(
                (hour, 0, 0),
                LAKE_BUCKET,
                Some("dashboards"),
                clicks(today, 0),
                CLICKS_PART_BYTES,
            );
        }
        day.push(
            (9, 30, 0),
            LAKE_BUCKET,
            Some("dashboards"),
            "REST.HEAD.OBJECT",
            Some(clicks(today, 0)),
            Some(200),
            None,
            Some(CLICKS_PART_BYTES),
        );
        if d >= 3 {
            day.get(
                (13, 0, 0),
                LAKE_BUCKET,
                Some("analyst"),
                clicks(date(d - 3), 1),
                CLICKS_PART_BYTES,
            );
        }
        if d >= 40 && d % 10 == 0 {
            day.get(
                (14, 0, 0),
                LAKE_BUCKET,
                Some("ml-training"),
                clicks(date(d - 40), 0),
                CLICKS_PART_BYTES,
            );
        }
        day.push(
            (15, 0, 0),
            LAKE_BUCKET,
            Some("analyst"),
            "REST.GET.OBJECT",
            Some(clicks(today, 9)),
            Some(404),
            Some(243),
            None,
        );
        day.push(
            (4, 0, 0),
            LAKE_BUCKET,
            Some("intruder"),
            "REST.PUT.OBJECT",
            Some(format!("events/clicks/dt={today}/evil.parquet")),
            Some(403),
            Some(243),
            Some(666),
        );
        // Snapshots.
        day.put((2, 0, 0), "etl-snapshots", snapshot(today), SNAPSHOT_BYTES);
        day.get((8, 0, 0), LAKE_BUCKET, Some("crm"), snapshot(today), SNAPSHOT_BYTES);
        day.get((16, 0, 0), LAKE_BUCKET, Some("crm"), snapshot(today), SNAPSHOT_BYTES);
        if d == last {
            day.get(
                (17, 0, 0),
                LAKE_BUCKET,
                Some("auditor"),
                snapshot(start),
                SNAPSHOT_BYTES,
            );
        }
        // Models.
        if d == 0 {
            for minute in 10..14 {
                day.push(
                    (0, minute, 0),
                    LAKE_BUCKET,
                    Some("ml-training"),
                    "REST.PUT.PART",
                    Some("models/recommender/weights.bin".into()),
                    Some(200),
                    None,
                    Some(MODEL_BYTES / 4),
                );
            }
            day.push(
                (0, 15, 0),
                LAKE_BUCKET,
                Some("ml-training"),
                "REST.POST.UPLOAD",
                Some("models/recommender/weights.bin".into()),
                Some(200),
                Some(380),
                Some(MODEL_BYTES),
            );
            day.get(
                (12, 30, 0),
                LAKE_BUCKET,
                Some("serving"),
                "models/recommender/old.bin".into(),
                OLD_MODEL_BYTES,
            );
        }
        day.get(
            (12, 0, 0),
            LAKE_BUCKET,
            Some("serving"),
            "models/recommender/weights.bin".into(),
            MODEL_BYTES,
        );
        // Exports.
        day.put((3, 0, 0), "legacy-export", export(today), EXPORT_BYTES);
        if d == 10 {
            day.put(
                (3, 30, 0),
                "backfill-job",
                "exports/legacy/backfill-1.csv".into(),
                EXPORT_BYTES,
            );
            day.put(
                (3, 31, 0),
                "backfill-job",
                "exports/legacy/backfill-2.csv".into(),
                EXPORT_BYTES,
            );
        }
        if d == 40 {
            for i in 0..10 {
                day.lifecycle(
                    (0, 0, i as u32),
                    "S3.TRANSITION_SIA.OBJECT",
                    export(date(i)),
                    EXPORT_BYTES,
                );
            }
        }
        if d == 50 {
            for i in 0..5 {
                day.lifecycle((0, 0, i as u32), "S3.EXPIRE.OBJECT", export(date(i)), EXPORT_BYTES);
            }
        }
        // Raw files older than the logs.
        for (minute, file) in [(0, "file+1.json"), (1, "file+2.json")] {
            day.get(
                (6, minute, 0),
                LAKE_BUCKET,
                Some("spark"),
                format!("raw/café données/{file}"),
                RAW_BYTES,
            );
        }
        // The website.
        for second in 0..5 {
            day.get(
                (10, second, 0),
                WEB_BUCKET,
                None,
                "web/assets/logo.png".into(),
                LOGO_BYTES,
            );
        }
        day.get(
            (18, 0, 0),
            WEB_BUCKET,
            Some("cdn"),
            "web/assets/logo.png".into(),
            LOGO_BYTES,
        );
    }
    render(start, days, requests)
}

/// Size of each partition of [`backtest`]'s `history/ticks/`.
pub const TICKS_PART_BYTES: i64 = 1 << 30;

/// The days before a [`backtest`] workload's first day that `history/ticks/` has partitions of.
pub const TICKS_DAYS_BEFORE: u32 = 500;

/// The ages, in days, of the partitions the backtest reads each day.
pub const BACKTEST_AGES: [u32; 5] = [100, 150, 200, 250, 300];

/// A workload of `days` days from `start` whose one dataset is old data read regularly: where S3
/// Intelligent-Tiering beats lifecycle rules, since a GB read from Glacier Instant Retrieval costs
/// more than warming it back for a month.
///
/// Bucket [`LAKE_BUCKET`], **`history/ticks/`**, daily partitions
/// `history/ticks/dt=YYYY-MM-DD/part-00000.parquet` of [`TICKS_PART_BYTES`], from
/// [`TICKS_DAYS_BEFORE`] days before day 0: `backfill-ticks` PUTs every older one again on day 0
/// from 00:00, one a second, oldest first (a backfill); `ingest-ticks` PUTs day `d`'s at 01:00;
/// `backtest` GETs the partitions [`BACKTEST_AGES`] days older than day `d` at 20:00 to 20:04 on
/// every day `d`. Nothing reads data older than 300 days: an archive tier fits from 365 days.
pub fn backtest(start: NaiveDate, days: u32) -> Workload {
    let date = |d: i64| start.checked_add_signed(chrono::TimeDelta::days(d)).unwrap_or(start);
    let part = |date: NaiveDate| format!("history/ticks/dt={date}/part-00000.parquet");
    let mut requests = Vec::new();
    for d in 0..i64::from(days) {
        let mut day = Day {
            date: date(d),
            out: &mut requests,
        };
        day.put((1, 0, 0), "ingest-ticks", part(date(d)), TICKS_PART_BYTES);
        if d == 0 {
            for (n, before) in (1..=i64::from(TICKS_DAYS_BEFORE)).rev().enumerate() {
                let n = n as u32;
                day.put(
                    (0, n / 60, n % 60),
                    "backfill-ticks",
                    part(date(-before)),
                    TICKS_PART_BYTES,
                );
            }
        }
        for (minute, age) in BACKTEST_AGES.into_iter().enumerate() {
            day.get(
                (20, minute as u32, 0),
                LAKE_BUCKET,
                Some("backtest"),
                part(date(d - i64::from(age))),
                TICKS_PART_BYTES,
            );
        }
    }
    render(start, days, requests)
}

/// Renders the requests as log objects, one per bucket and day, named by when S3 delivered it:
/// five minutes after its last request (at the latest 23:59:59).
fn render(start: NaiveDate, days: u32, mut requests: Vec<Request>) -> Workload {
    requests.sort_by(|a, b| (a.bucket, a.at).cmp(&(b.bucket, b.at)));
    let mut files: BTreeMap<(&str, NaiveDate), Vec<u8>> = BTreeMap::new();
    let mut last: BTreeMap<(&str, NaiveDate), NaiveDateTime> = BTreeMap::new();
    for (n, r) in requests.iter().enumerate() {
        last.insert((r.bucket, r.at.date()), r.at);
        let out = files.entry((r.bucket, r.at.date())).or_default();
        write_line(&record(r, n), 27, out);
    }
    let mut malformed = 0;
    let objects = files
        .into_iter()
        .map(|((bucket, day), mut data)| {
            if bucket == WEB_BUCKET {
                data.extend_from_slice(b"<html><body>503 Service Unavailable</body></html>\n");
                malformed += 1;
            }
            // Delivered a few minutes after its last request, within its day.
            let delivered = (last[&(bucket, day)] + chrono::TimeDelta::minutes(5))
                .min(day.and_hms_opt(23, 59, 59).unwrap_or(day.and_time(NaiveTime::MIN)));
            LogObject {
                bucket: bucket.to_owned(),
                name: format!("{}-{:016X}", delivered.format("%Y-%m-%d-%H-%M-%S"), unique(bucket, day)),
                data,
            }
        })
        .collect();
    Workload {
        start,
        days,
        objects,
        malformed,
    }
}

/// A stable unique suffix for a log object's name.
fn unique(bucket: &str, day: NaiveDate) -> u64 {
    bucket
        .bytes()
        .chain(day.to_string().into_bytes())
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        })
}

fn record(r: &Request, n: usize) -> AccessLogRecord<'static> {
    let is_lifecycle = r.operation.starts_with("S3.");
    let method = match r.operation {
        op if op.starts_with("REST.GET") => "GET",
        op if op.starts_with("REST.HEAD") => "HEAD",
        op if op.starts_with("REST.POST") => "POST",
        _ => "PUT",
    };
    let uri = match &r.key {
        Some(key) => format!("{method} /{}/{} HTTP/1.1", r.bucket, encode_key(key)),
        None => format!("{method} /{}/ HTTP/1.1", r.bucket),
    };
    AccessLogRecord {
        bucket_owner: Some(Cow::Borrowed(
            "79a59df900b949e55d96a1e698fbacedfd6e09d98eacf8f8d5218e7cd47ef2be",
        )),
        bucket: Some(Cow::Borrowed(r.bucket)),
        request_time: r.at.and_utc().timestamp_micros(),
        remote_ip: (!is_lifecycle).then(|| Cow::Owned(format!("10.0.{}.{}", n % 250, n % 199 + 1))),
        requester: if is_lifecycle {
            Some(Cow::Borrowed("AmazonS3"))
        } else {
            r.requester.clone().map(Cow::Owned)
        },
        request_id: Some(Cow::Owned(r.request_id.clone().unwrap_or_else(|| format!("{n:016X}")))),
        operation: Some(Cow::Borrowed(r.operation)),
        key: r.key.clone().map(Cow::Owned),
        request_uri: (!is_lifecycle).then_some(Cow::Owned(uri)),
        http_status: r.status,
        error_code: r.error.map(Cow::Borrowed),
        bytes_sent: r.bytes_sent,
        object_size: r.object_size,
        total_time_ms: (!is_lifecycle).then_some(40),
        turn_around_time_ms: (!is_lifecycle).then_some(12),
        referer: None,
        user_agent: (!is_lifecycle).then_some(Cow::Borrowed("aws-sdk-java/2.20.0 Linux/5.10")),
        version_id: None,
        host_id: Some(Cow::Borrowed(
            "s9lzHYrFp76ZVxRcpX9+5cjAnEH2ROuNkd2BHfIa6UkFVdtjf5mKR3/eTPFvsiP/XV/VLi31234=",
        )),
        signature_version: (!is_lifecycle).then_some(Cow::Borrowed(if r.client.sigv2 { "SigV2" } else { "SigV4" })),
        cipher_suite: (!is_lifecycle).then_some(Cow::Borrowed("ECDHE-RSA-AES128-GCM-SHA256")),
        authentication_type: (!is_lifecycle).then_some(Cow::Borrowed("AuthHeader")),
        host_header: Some(Cow::Owned(format!("{}.s3.us-east-1.amazonaws.com", r.bucket))),
        tls_version: (!is_lifecycle).then_some(Cow::Borrowed(if r.client.old_tls { "TLSv1" } else { "TLSv1.2" })),
        access_point_arn: None,
        acl_required: Some(r.client.acl_required),
        source_region: r.client.source_region.map(Cow::Borrowed),
        extra_fields: None,
    }
}

impl Workload {
    /// Writes the log objects under `dir`, in a folder per bucket; returns their paths.
    pub fn write_to(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let mut paths = Vec::with_capacity(self.objects.len());
        for object in &self.objects {
            let folder = dir.join(&object.bucket);
            std::fs::create_dir_all(&folder)?;
            let path = folder.join(&object.name);
            std::fs::write(&path, &object.data)?;
            paths.push(path);
        }
        Ok(paths)
    }

    /// The last day of the range.
    pub fn last_day(&self) -> NaiveDate {
        self.start
            .checked_add_days(Days::new(u64::from(self.days) - 1))
            .unwrap_or(self.start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_parses_but_the_malformed_ones() {
        let start = NaiveDate::from_ymd_opt(2024, 3, 1).unwrap();
        let workload = generate(start, 60);
        assert_eq!(workload.days, 60);
        assert_eq!(workload.last_day(), NaiveDate::from_ymd_opt(2024, 4, 29).unwrap());
        let (mut ok, mut bad) = (0u64, 0u64);
        let mut keys = std::collections::BTreeSet::new();
        for object in &workload.objects {
            for (_, _, parsed) in crate::parse_lines(&object.data) {
                match parsed {
                    Ok(record) => {
                        ok += 1;
                        assert_eq!(record.bucket.as_deref(), Some(object.bucket.as_str()));
                        if let Some(key) = record.key {
                            keys.insert(key.into_owned());
                        }
                    }
                    Err(_) => bad += 1,
                }
            }
        }
        assert_eq!(bad, workload.malformed);
        assert_eq!(bad, 60);
        // Per day 16 requests to the lake bucket and 6 to the website, plus the analyst's 57 reads,
        // ml-training's 2, the auditor's 1, day 0's upload and old model (6), the backfill (2),
        // the lifecycle actions (15) and the 3 requests around the range.
        assert_eq!(ok, 16 * 60 + 57 + 2 + 1 + 6 + 2 + 15 + 3 + 6 * 60);
        // Keys come back decoded, spaces, '+' and accents included.
        assert!(keys.contains("raw/café données/file+1.json"));
        assert!(keys.contains("snapshots/customers/2024/03/01/customers.csv.gz"));
        // One object per bucket and day, and the days around the range for the lake bucket.
        assert_eq!(workload.objects.len(), 60 + 60 + 3);
        assert_eq!(generate(start, 60), workload, "deterministic");
        assert_eq!(generate(start, 10).days, MIN_DAYS);
    }
}
