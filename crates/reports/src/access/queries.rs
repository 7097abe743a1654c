//! The access report's SQL over the classified requests: the datasets' usage, the age of the
//! data read, the stored objects the logs show, writers, reads per day and unused datasets.

use std::collections::{BTreeMap, HashMap};

use chrono::NaiveDate;

use super::advisor::{self, ReaderAge, ReadsAt, StoredAt};
use super::{AgeHistogram, COLUMNS, DatasetUsage, DayUsage, OPS, UnusedDataset, Writer, operation};
use crate::error::ReportError;
use crate::session::{ReportSession, quote_ident, quote_literal};

/// The table must have the access-log columns the report reads.
pub(super) async fn check_columns(session: &ReportSession, table: &str) -> Result<(), ReportError> {
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
pub(super) async fn dataset_usage(session: &ReportSession, window: &str) -> Result<Vec<DatasetUsage>, ReportError> {
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
pub(super) fn aged_reads(window: &str, until: &str) -> String {
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
pub(super) async fn oldest_reads(
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
pub(super) async fn read_ages(
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
pub(super) async fn stored_objects(
    session: &ReportSession,
    until: &str,
    end_day: i32,
) -> Result<Vec<((String, String), StoredAt)>, ReportError> {
    let removals = operation::LIFECYCLE_REMOVALS
        .iter()
        .map(|op| quote_literal(op))
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
pub(super) async fn table_formats(
    session: &ReportSession,
    until: &str,
) -> Result<HashMap<(String, String), &'static str>, ReportError> {
    let cases = advisor::TABLE_FORMATS
        .iter()
        .enumerate()
        .map(|(i, (_, dir))| {
            let (first, inner) = (quote_literal(&format!("{dir}/")), quote_literal(&format!("/{dir}/")));
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
pub(super) async fn writers(
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
pub(super) async fn day_usage(session: &ReportSession, window: &str) -> Result<Vec<DayUsage>, ReportError> {
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
pub(super) fn unused_datasets(
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
