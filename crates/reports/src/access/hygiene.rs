//! How the buckets are called, and how completely S3 delivered their logs: the access report's
//! hygiene and completeness sections.
//!
//! Both read every logged request of the range (failed ones too), not only the successful object
//! requests of the other sections.
//!
//! * **Hygiene** ([`Check`]): requests signed with Signature Version 2 (S3 refuses those in
//!   more and more places), over TLS below 1.2, anonymous (no requester), authorised by an ACL
//!   (`acl_required`: what stands between the bucket and disabling ACLs), and from another region
//!   than the one the endpoint names (`source_region` against the host header; a host naming no
//!   region is us-east-1's global endpoint); each with its count, its top requesters and the ids
//!   of its first requests, to look up. And the 403 hot spots ([`Forbidden`]): refusals by
//!   bucket, dataset and requester, most first.
//! * **Completeness** ([`Completeness`]), per bucket: the delay from a request to the log object
//!   holding it (the time in the object's name, `YYYY-MM-DD-HH-MM-SS-UNIQUE`, as S3 names them)
//!   and from there to `ingested_at`; the hours between the bucket's first and last logged
//!   request with no record at all (S3 delivers these logs best-effort: an empty hour of a busy
//!   bucket is likely a lost delivery); and request ids logged more than once.

use std::collections::BTreeMap;

use chrono::{DateTime, TimeDelta, Utc};
use serde::Serialize;

use super::udf::DATASET_FN;
use crate::error::ReportError;
use crate::session::{ReportSession, quote_ident};

/// The view of every logged request of the range.
const ALL: &str = "__lakelog_access_all";
/// The view of the requests each check found.
const FOUND: &str = "__lakelog_access_hygiene";

/// Requesters and sample ids given per finding.
pub(super) const SAMPLES: usize = 5;
/// 403 hot spots listed.
pub(super) const HOT_SPOTS: usize = 10;
/// Empty hours listed per bucket.
pub(super) const GAPS: usize = 10;

/// The hygiene checks: name, what it finds, and its SQL condition on the view of every logged
/// request that [`register`] makes.
pub(super) const CHECKS: [(&str, &str, &str); 5] = [
    (
        "sigv2",
        "signed with Signature Version 2",
        "signature_version = 'SigV2'",
    ),
    ("old_tls", "over TLS below 1.2", "tls_version IN ('TLSv1', 'TLSv1.1')"),
    (
        "anonymous",
        "anonymous (no requester)",
        "requester IS NULL AND NOT starts_with(operation, 'S3.')",
    ),
    (
        "acl_required",
        "authorised by an ACL (acl_required)",
        "acl_required = true",
    ),
    (
        "cross_region",
        "from another region than the endpoint's",
        "source_region IS NOT NULL AND source_region <> CASE \
           WHEN regexp_like(host_header, '\\.s3[.-](?:dualstack\\.)?[a-z]{2}(?:-[a-z]+)+-[0-9]+\\.') \
           THEN regexp_replace(host_header, '^.*\\.s3[.-](?:dualstack\\.)?([a-z]{2}(?:-[a-z]+)+-[0-9]+)\\..*$', '${1}') \
           ELSE 'us-east-1' END",
    ),
];

/// A requester and how many of a finding's requests it made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RequesterCount {
    /// The requester (`-` for anonymous requests).
    pub requester: String,
    /// Its requests.
    pub requests: u64,
}

/// What one hygiene check found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// The check's name (`sigv2`, `old_tls`, `anonymous`, `acl_required`, `cross_region`).
    pub check: String,
    /// What it finds.
    pub finds: String,
    /// Requests found.
    pub requests: u64,
    /// Who made them, most first (at most 5).
    pub requesters: Vec<RequesterCount>,
    /// The ids of the first of them (at most 5).
    pub sample_request_ids: Vec<String>,
}

/// Requests refused with 403 of one requester on one dataset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Forbidden {
    /// The bucket.
    pub bucket: String,
    /// The dataset (key prefix; empty for requests on the bucket itself).
    pub dataset: String,
    /// The requester (`-` for anonymous requests).
    pub requester: String,
    /// Refused requests.
    pub requests: u64,
    /// The ids of the first of them.
    pub sample_request_ids: Vec<String>,
}

/// How the buckets are called.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Hygiene {
    /// One per check the report makes, in a fixed order.
    pub checks: Vec<Check>,
    /// The 403 hot spots, most refusals first (at most 10).
    pub forbidden: Vec<Forbidden>,
}

/// Delays, in minutes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Delay {
    /// The median.
    pub median_minutes: Option<f64>,
    /// The largest.
    pub max_minutes: Option<f64>,
}

/// How completely one bucket's logs arrived.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Completeness {
    /// The bucket.
    pub bucket: String,
    /// Log records in the range.
    pub records: u64,
    /// Log objects they came in.
    pub log_objects: u64,
    /// From a request to the log object holding it (records whose object name has a time).
    pub delivery: Delay,
    /// From the log object to its ingestion.
    pub ingestion: Delay,
    /// Hours from the first to the last logged request of the bucket.
    pub hours: u64,
    /// Of them, the hours with no record.
    pub hours_without_records: u64,
    /// The first of those hours (at most 10).
    #[serde(serialize_with = "super::rfc3339_list")]
    pub first_empty_hours: Vec<DateTime<Utc>>,
    /// Request ids logged more than once.
    pub duplicate_request_ids: u64,
    /// Some of them (at most 5).
    pub sample_duplicates: Vec<String>,
}

/// Registers the view `__lakelog_access_all`: every logged request of the range of `table`.
pub(super) async fn register(session: &ReportSession, table: &str, window: &str) -> Result<(), ReportError> {
    session
        .execute(
            "all requests",
            &format!(
                "CREATE OR REPLACE VIEW {ALL} AS SELECT bucket, {DATASET_FN}(COALESCE(key, '')) AS dataset, \
                 requester, request_id, operation, http_status, request_time, signature_version, tls_version, \
                 acl_required, source_region, host_header, log_object, ingested_at \
                 FROM {} WHERE bucket IS NOT NULL AND {window}",
                quote_ident(table)
            ),
        )
        .await
}

/// The hygiene section, from the view of every logged request (see [`register`]).
pub(super) async fn hygiene(session: &ReportSession) -> Result<Hygiene, ReportError> {
    let found = CHECKS
        .iter()
        .map(|(name, _, condition)| {
            format!(
                "SELECT '{name}' AS check_name, COALESCE(requester, '-') AS requester, request_id, request_time \
                 FROM {ALL} WHERE {condition}"
            )
        })
        .collect::<Vec<_>>()
        .join(" UNION ALL ");
    session
        .execute(
            "hygiene findings",
            &format!("CREATE OR REPLACE VIEW {FOUND} AS {found}"),
        )
        .await?;
    let by_requester = session
        .query(
            "hygiene requesters",
            &format!(
                "SELECT check_name, requester, COUNT(*) AS requests FROM {FOUND} GROUP BY 1, 2 \
                 ORDER BY 1, requests DESC, requester"
            ),
        )
        .await?;
    let samples = session
        .query(
            "hygiene samples",
            &format!(
                "SELECT check_name, request_id FROM (SELECT check_name, request_id, ROW_NUMBER() OVER \
                 (PARTITION BY check_name ORDER BY request_time, request_id) AS n FROM {FOUND}) \
                 WHERE n <= {SAMPLES} ORDER BY check_name, n"
            ),
        )
        .await?;
    let mut checks: Vec<Check> = CHECKS
        .iter()
        .map(|(name, finds, _)| Check {
            check: (*name).to_owned(),
            finds: (*finds).to_owned(),
            requests: 0,
            requesters: Vec::new(),
            sample_request_ids: Vec::new(),
        })
        .collect();
    let (names, requesters, counts) = (
        by_requester.strings("check_name")?,
        by_requester.strings("requester")?,
        by_requester.i64s("requests")?,
    );
    for i in 0..by_requester.len() {
        let Some(check) = checks.iter_mut().find(|c| Some(&c.check) == names[i].as_ref()) else {
            continue;
        };
        let requests = counts[i].unwrap_or(0).max(0) as u64;
        check.requests += requests;
        if check.requesters.len() < SAMPLES {
            check.requesters.push(RequesterCount {
                requester: requesters[i].clone().unwrap_or_default(),
                requests,
            });
        }
    }
    let (names, ids) = (samples.strings("check_name")?, samples.strings("request_id")?);
    for i in 0..samples.len() {
        if let (Some(check), Some(id)) = (checks.iter_mut().find(|c| Some(&c.check) == names[i].as_ref()), &ids[i]) {
            check.sample_request_ids.push(id.clone());
        }
    }

    let rows = session
        .query(
            "403 hot spots",
            &format!(
                "WITH refused AS (SELECT bucket, COALESCE(dataset, '') AS dataset, COALESCE(requester, '-') AS requester, \
                   request_id, request_time FROM {ALL} WHERE http_status = 403), \
                 spots AS (SELECT bucket, dataset, requester, COUNT(*) AS requests FROM refused GROUP BY 1, 2, 3 \
                   ORDER BY requests DESC, bucket, dataset, requester LIMIT {HOT_SPOTS}), \
                 firsts AS (SELECT bucket, dataset, requester, request_id, ROW_NUMBER() OVER \
                   (PARTITION BY bucket, dataset, requester ORDER BY request_time, request_id) AS n FROM refused) \
                 SELECT s.bucket, s.dataset, s.requester, s.requests, f.request_id FROM spots s \
                 JOIN firsts f ON f.bucket = s.bucket AND f.dataset = s.dataset AND f.requester = s.requester \
                 WHERE f.n <= {SAMPLES} ORDER BY s.requests DESC, s.bucket, s.dataset, s.requester, f.n"
            ),
        )
        .await?;
    let (buckets, datasets, who) = (
        rows.strings("bucket")?,
        rows.strings("dataset")?,
        rows.strings("requester")?,
    );
    let (counts, ids) = (rows.i64s("requests")?, rows.strings("request_id")?);
    let mut forbidden: Vec<Forbidden> = Vec::new();
    for i in 0..rows.len() {
        let (bucket, dataset, requester) = (
            buckets[i].clone().unwrap_or_default(),
            datasets[i].clone().unwrap_or_default(),
            who[i].clone().unwrap_or_default(),
        );
        let same = |f: &Forbidden| f.bucket == bucket && f.dataset == dataset && f.requester == requester;
        if !forbidden.last().is_some_and(same) {
            forbidden.push(Forbidden {
                bucket: bucket.clone(),
                dataset: dataset.clone(),
                requester: requester.clone(),
                requests: counts[i].unwrap_or(0).max(0) as u64,
                sample_request_ids: Vec::new(),
            });
        }
        if let (Some(spot), Some(id)) = (forbidden.last_mut(), &ids[i]) {
            spot.sample_request_ids.push(id.clone());
        }
    }
    Ok(Hygiene { checks, forbidden })
}

/// The completeness section, per bucket, from the view of every logged request (see
/// [`register`]).
pub(super) async fn completeness(session: &ReportSession) -> Result<Vec<Completeness>, ReportError> {
    let delays = session
        .query(
            "delivery delays",
            &format!(
                "WITH r AS (SELECT bucket, log_object, request_time, ingested_at, \
                   to_timestamp(regexp_replace(log_object, '^.*/([0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}-[0-9]{{2}}-[0-9]{{2}}-[0-9]{{2}})-[^/]*$', '${{1}}'), \
                     '%Y-%m-%d-%H-%M-%S') AS delivered \
                   FROM {ALL} WHERE regexp_like(log_object, '/[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}-[0-9]{{2}}-[0-9]{{2}}-[0-9]{{2}}-[^/]*$')) \
                 SELECT bucket, \
                   median(CAST(date_part('epoch', delivered) - date_part('epoch', request_time) AS DOUBLE)) / 60 AS delivery_median, \
                   max(CAST(date_part('epoch', delivered) - date_part('epoch', request_time) AS DOUBLE)) / 60 AS delivery_max, \
                   median(CAST(date_part('epoch', ingested_at) - date_part('epoch', delivered) AS DOUBLE)) / 60 AS ingest_median, \
                   max(CAST(date_part('epoch', ingested_at) - date_part('epoch', delivered) AS DOUBLE)) / 60 AS ingest_max \
                 FROM r GROUP BY bucket"
            ),
        )
        .await?;
    let mut delay_of: BTreeMap<String, (Delay, Delay)> = BTreeMap::new();
    let (buckets, dm, dx, im, ix) = (
        delays.strings("bucket")?,
        delays.f64s("delivery_median")?,
        delays.f64s("delivery_max")?,
        delays.f64s("ingest_median")?,
        delays.f64s("ingest_max")?,
    );
    for i in 0..delays.len() {
        let delivery = Delay {
            median_minutes: dm[i],
            max_minutes: dx[i],
        };
        let ingestion = Delay {
            median_minutes: im[i],
            max_minutes: ix[i],
        };
        delay_of.insert(buckets[i].clone().unwrap_or_default(), (delivery, ingestion));
    }

    let totals = session
        .query(
            "records per bucket",
            &format!(
                "SELECT bucket, COUNT(*) AS records, COUNT(DISTINCT log_object) AS objects FROM {ALL} GROUP BY bucket \
                 ORDER BY bucket"
            ),
        )
        .await?;
    let hours = session
        .query(
            "hours with records",
            &format!(
                "SELECT DISTINCT bucket, date_trunc('hour', request_time) AS hour FROM {ALL} ORDER BY bucket, hour"
            ),
        )
        .await?;
    let mut hours_of: BTreeMap<String, Vec<DateTime<Utc>>> = BTreeMap::new();
    for (bucket, hour) in hours.strings("bucket")?.into_iter().zip(hours.timestamps("hour")?) {
        if let (Some(bucket), Some(hour)) = (bucket, hour) {
            hours_of.entry(bucket).or_default().push(hour);
        }
    }
    let duplicates = session
        .query(
            "duplicate request ids",
            &format!(
                "SELECT bucket, request_id FROM {ALL} WHERE request_id IS NOT NULL GROUP BY bucket, request_id \
                 HAVING COUNT(*) > 1 ORDER BY bucket, request_id"
            ),
        )
        .await?;
    let mut duplicates_of: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (bucket, id) in duplicates
        .strings("bucket")?
        .into_iter()
        .zip(duplicates.strings("request_id")?)
    {
        if let (Some(bucket), Some(id)) = (bucket, id) {
            duplicates_of.entry(bucket).or_default().push(id);
        }
    }

    let (buckets, records, objects) = (
        totals.strings("bucket")?,
        totals.i64s("records")?,
        totals.i64s("objects")?,
    );
    Ok((0..totals.len())
        .map(|i| {
            let bucket = buckets[i].clone().unwrap_or_default();
            let seen = hours_of.remove(&bucket).unwrap_or_default();
            let (span, empty, listed) = empty_hours(&seen);
            let duplicates = duplicates_of.remove(&bucket).unwrap_or_default();
            let (delivery, ingestion) = delay_of.get(&bucket).copied().unwrap_or_default();
            Completeness {
                records: records[i].unwrap_or(0).max(0) as u64,
                log_objects: objects[i].unwrap_or(0).max(0) as u64,
                delivery,
                ingestion,
                hours: span,
                hours_without_records: empty,
                first_empty_hours: listed,
                duplicate_request_ids: duplicates.len() as u64,
                sample_duplicates: duplicates.into_iter().take(SAMPLES).collect(),
                bucket,
            }
        })
        .collect())
}

/// Of the hours from the first to the last of `seen` (whole hours, ascending): how many, how many
/// are not in `seen`, and the first [`GAPS`] of those.
fn empty_hours(seen: &[DateTime<Utc>]) -> (u64, u64, Vec<DateTime<Utc>>) {
    let (Some(first), Some(last)) = (seen.first(), seen.last()) else {
        return (0, 0, Vec::new());
    };
    let span = (*last - *first).num_hours().max(0) as u64 + 1;
    let mut listed = Vec::new();
    for pair in seen.windows(2) {
        let mut hour = pair[0] + TimeDelta::hours(1);
        while hour < pair[1] && listed.len() < GAPS {
            listed.push(hour);
            hour += TimeDelta::hours(1);
        }
    }
    (span, span.saturating_sub(seen.len() as u64), listed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_hours_are_the_gaps_between_the_first_and_last() {
        let h = |n: i64| DateTime::from_timestamp(1_700_000_000 / 3600 * 3600 + n * 3600, 0).unwrap();
        assert_eq!(empty_hours(&[]), (0, 0, vec![]));
        assert_eq!(empty_hours(&[h(0)]), (1, 0, vec![]));
        assert_eq!(empty_hours(&[h(0), h(1), h(4), h(5)]), (6, 2, vec![h(2), h(3)]));
        let sparse = [h(0), h(1000)];
        let (span, empty, listed) = empty_hours(&sparse);
        assert_eq!((span, empty, listed.len()), (1001, 999, GAPS));
    }
}
