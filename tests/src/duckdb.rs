//! DuckDB as an independent reader of the Delta tables the pipelines write.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The Python that has DuckDB and its delta extension (and boto3, with moto): the one of
/// `$LAKELOG_CACHE/venv`, which `scripts/test` installs, or else `python3` from `PATH`.
pub fn python() -> PathBuf {
    let cache = std::env::var_os("LAKELOG_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/lakelog")));
    cache
        .map(|c| c.join("venv/bin/python"))
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("python3"))
}

/// Runs `sql` with `scripts/duckdb-query` (DuckDB's `delta_scan` reads `s3://` tables through
/// `endpoint`) and returns the rows as JSON values.
pub fn duckdb(endpoint: &str, sql: &str) -> Result<Vec<Vec<serde_json::Value>>> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/duckdb-query");
    let out = Command::new(python())
        .arg(&script)
        .arg(sql)
        .env("AWS_ENDPOINT_URL", endpoint)
        .env("AWS_ACCESS_KEY_ID", crate::standin::ACCESS_KEY_ID)
        .env("AWS_SECRET_ACCESS_KEY", crate::standin::SECRET_ACCESS_KEY)
        .env("AWS_REGION", crate::standin::REGION)
        .output()
        .with_context(|| format!("cannot run {}", script.display()))?;
    if !out.status.success() {
        bail!("duckdb-query failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    serde_json::from_slice(&out.stdout).context("duckdb-query printed no JSON")
}

/// A day of the template's saved query `GameSessionsPerDayQuery`, as DuckDB answers it.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionDay {
    /// The UTC day the sessions started, `YYYY-MM-DD`.
    pub day: String,
    /// Sessions that started that day.
    pub sessions: i64,
    /// The devices that played them.
    pub devices: i64,
    /// Their median length, in seconds.
    pub median_seconds: Option<f64>,
    /// The sessions of each length, in the buckets of the game report's session lengths (under 1
    /// minute, 1-5, 5-15, 15-30, 30-60, 60 minutes or more).
    pub lengths: [i64; 6],
}

/// Runs the saved query `GameSessionsPerDayQuery` with DuckDB over `scan`, a table expression
/// such as `delta_scan('s3://bucket/game_events')` (read through `endpoint`).
pub fn duckdb_sessions_per_day(endpoint: &str, scan: &str) -> Result<Vec<SessionDay>> {
    let query = crate::athena::in_duckdb(&crate::athena::athena_query(
        "GameSessionsPerDayQuery",
        crate::athena::TEMPLATE_GAME_EVENTS,
        scan,
    )?);
    let rows = duckdb(
        endpoint,
        &format!(
            "SELECT CAST(day AS VARCHAR), sessions, devices, median_seconds, under_1_min, from_1_to_5_min, \
             from_5_to_15_min, from_15_to_30_min, from_30_to_60_min, from_60_min FROM ({query})"
        ),
    )?;
    rows.iter()
        .map(|r| {
            let count = |i: usize| {
                r.get(i)
                    .and_then(serde_json::Value::as_i64)
                    .with_context(|| format!("column {i} of {r:?}"))
            };
            Ok(SessionDay {
                day: r
                    .first()
                    .and_then(serde_json::Value::as_str)
                    .context("no day")?
                    .to_owned(),
                sessions: count(1)?,
                devices: count(2)?,
                median_seconds: r.get(3).and_then(serde_json::Value::as_f64),
                lengths: [count(4)?, count(5)?, count(6)?, count(7)?, count(8)?, count(9)?],
            })
        })
        .collect()
}

/// Checks that the saved query `GameSessionsPerDayQuery`, run by DuckDB over `scan` (see
/// `duckdb_sessions_per_day`), gives the sessions of `report`, a game report's JSON: each day's
/// sessions, devices and median length (within a microsecond), and the sessions of each length
/// over all days. Returns DuckDB's days.
pub fn duckdb_sessions_are_the_report(
    endpoint: &str,
    scan: &str,
    report: &serde_json::Value,
) -> Result<Vec<SessionDay>> {
    let days = duckdb_sessions_per_day(endpoint, scan)?;
    let reported = report["sessions"]["days"]
        .as_array()
        .context("the report has no session days")?;
    if days.len() != reported.len() {
        bail!(
            "{} days of sessions in DuckDB, {} in the report",
            days.len(),
            reported.len()
        );
    }
    for (got, want) in days.iter().zip(reported) {
        let (median, reported_median) = (got.median_seconds, want["median_seconds"].as_f64());
        let same = want["date"].as_str() == Some(got.day.as_str())
            && want["sessions"].as_i64() == Some(got.sessions)
            && want["devices"].as_i64() == Some(got.devices)
            && match (median, reported_median) {
                (Some(a), Some(b)) => (a - b).abs() < 1e-6,
                (a, b) => a == b,
            };
        if !same {
            bail!("sessions: DuckDB {got:?}, the report {want}");
        }
    }
    let lengths: Vec<i64> = report["sessions"]["lengths"]
        .as_array()
        .context("the report has no session lengths")?
        .iter()
        .map(|l| l[1].as_i64().unwrap_or(-1))
        .collect();
    let by_length: Vec<i64> = (0..lengths.len())
        .map(|k| days.iter().map(|d| d.lengths.get(k).copied().unwrap_or(-1)).sum())
        .collect();
    if lengths != by_length {
        bail!("sessions by length: the report {lengths:?}, DuckDB {by_length:?}");
    }
    Ok(days)
}

/// Compares each of `tables` with its Iceberg view through `scripts/iceberg-compare` (DuckDB's
/// Delta reader against DuckDB's Iceberg reader and PyIceberg, `EXCEPT ALL` both ways), reading
/// `s3://` tables through `endpoint`; one JSON object per table. With `glue`, PyIceberg finds each
/// view through that Glue database instead, as engines that read Glue do.
pub fn iceberg_compare(
    endpoint: Option<&str>,
    glue: Option<&str>,
    tables: &[String],
) -> Result<Vec<serde_json::Value>> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/iceberg-compare");
    let mut command = Command::new(python());
    command.arg(&script);
    if let Some(database) = glue {
        command.args(["--glue", database]);
    }
    command.args(tables);
    if let Some(endpoint) = endpoint {
        command
            .env("AWS_ENDPOINT_URL", endpoint)
            .env("AWS_ACCESS_KEY_ID", crate::standin::ACCESS_KEY_ID)
            .env("AWS_SECRET_ACCESS_KEY", crate::standin::SECRET_ACCESS_KEY)
            .env("AWS_REGION", crate::standin::REGION);
    }
    let out = command
        .output()
        .with_context(|| format!("cannot run {}", script.display()))?;
    if !out.status.success() {
        bail!("iceberg-compare failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).context("iceberg-compare printed a line that is not JSON"))
        .collect()
}

/// What keeps the Iceberg view of `table` from reading as its Delta table does, with either
/// Iceberg reader (see [`iceberg_compare`]); `None` when nothing does.
pub fn view_difference(endpoint: Option<&str>, table: &str) -> Result<Option<String>> {
    let found = iceberg_compare(endpoint, None, &[table.to_owned()])?;
    let compared = found.first().context("iceberg-compare printed nothing")?;
    let count = |key: &str| compared[key].as_i64().unwrap_or(-1);
    let same = count("icebergRows") == count("deltaRows")
        && count("pyicebergRows") == count("deltaRows")
        && [
            "missingFromIceberg",
            "extraInIceberg",
            "missingFromPyiceberg",
            "extraInPyiceberg",
        ]
        .iter()
        .all(|key| count(key) == 0);
    Ok((!same).then(|| compared.to_string()))
}

/// Checks that every one of `tables` reads the same through its Iceberg view as through Delta,
/// with both Iceberg readers, and has `rows` rows when given; panics naming the table otherwise.
pub fn assert_views_mirror(endpoint: Option<&str>, tables: &[String], rows: Option<i64>) {
    assert_compared_mirror(&iceberg_compare(endpoint, None, tables).unwrap(), tables, rows);
}

/// Checks, as [`assert_views_mirror`] does, the views of `tables` as the Glue database `database`
/// has them: PyIceberg reads each through its Glue entry, and the entry names the view's newest
/// metadata file.
pub fn assert_glue_views_mirror(endpoint: Option<&str>, database: &str, tables: &[String], rows: Option<i64>) {
    let found = iceberg_compare(endpoint, Some(database), tables).unwrap();
    assert_compared_mirror(&found, tables, rows);
    for table in found {
        assert_eq!(
            table["glueMetadata"], table["metadata"],
            "the Glue entry is behind: {table}"
        );
    }
}

fn assert_compared_mirror(found: &[serde_json::Value], tables: &[String], rows: Option<i64>) {
    assert_eq!(found.len(), tables.len(), "{found:?}");
    for table in found {
        let count = |key: &str| table[key].as_i64().unwrap_or(-1);
        assert_eq!(count("icebergRows"), count("deltaRows"), "{table}");
        assert_eq!(count("pyicebergRows"), count("deltaRows"), "{table}");
        for key in [
            "missingFromIceberg",
            "extraInIceberg",
            "missingFromPyiceberg",
            "extraInPyiceberg",
        ] {
            assert_eq!(count(key), 0, "{key}: {table}");
        }
        if let Some(rows) = rows {
            assert_eq!(count("deltaRows"), rows, "{table}");
        }
    }
}
