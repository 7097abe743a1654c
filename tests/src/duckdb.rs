//! DuckDB as an independent reader of the Delta tables the pipelines write.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The Python that has DuckDB and its delta extension: the one of `$LAKELOG_CACHE/venv`, which
/// `scripts/test` installs, or else `python3` from `PATH`.
fn python() -> PathBuf {
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
        .env("AWS_ACCESS_KEY_ID", crate::ACCESS_KEY_ID)
        .env("AWS_SECRET_ACCESS_KEY", crate::SECRET_ACCESS_KEY)
        .env("AWS_REGION", crate::REGION)
        .output()
        .with_context(|| format!("cannot run {}", script.display()))?;
    if !out.status.success() {
        bail!("duckdb-query failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    serde_json::from_slice(&out.stdout).context("duckdb-query printed no JSON")
}
