//! template.yaml's saved Athena queries, run by DuckDB in the tests.

use std::fs;

use anyhow::{Result, bail};

/// How template.yaml's saved game queries name the `game_events` table: the `from` of
/// [`athena_query`] for them.
pub const TEMPLATE_GAME_EVENTS: &str = "\"${GlueDatabase}\".\"${GameEventsTablePrefix}\"";

/// What a saved query's date range (`CAST(? AS DATE)`, asked for when the query runs in Athena)
/// is given in the tests: the first and the last day of every date there is.
pub const WHOLE_RANGE: [&str; 2] = ["DATE '1970-01-01'", "DATE '9999-12-31'"];

/// The SQL of template.yaml's saved Athena query `id` (a `!Sub` string) with its table, `from`
/// as the template writes it, replaced by `with` (DuckDB's `delta_scan('URI')`, or rows of a
/// subquery), and its date range's parameters by [`WHOLE_RANGE`]: the only changes.
pub fn athena_query(id: &str, from: &str, with: &str) -> Result<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml");
    let template: serde_norway::Value = serde_norway::from_str(&fs::read_to_string(path)?)?;
    let query = &template["Resources"][id]["Properties"]["QueryString"];
    let serde_norway::Value::Tagged(sub) = query else {
        bail!("{id}: no !Sub QueryString");
    };
    let sql = sub.value.as_str().unwrap_or_default();
    if !sql.contains(from) {
        bail!("{id} does not read {from}");
    }
    let mut sql = sql.replace(from, with);
    let mut bound = 0;
    while let Some(at) = sql.find("CAST(? AS DATE)") {
        sql.replace_range(at..at + "CAST(? AS DATE)".len(), WHOLE_RANGE[bound % 2]);
        bound += 1;
    }
    Ok(sql)
}

/// Athena SQL made DuckDB's: the functions the two name differently renamed (`to_unixtime` is
/// `epoch`, `regexp_like` is `regexp_matches`, `json_extract_scalar` is `json_extract_string`, and
/// `approx_percentile` becomes the exact `quantile_cont`, which the reports compute, and
/// `array_join` is `array_to_string`).
pub fn in_duckdb(sql: &str) -> String {
    sql.replace("to_unixtime(", "epoch(")
        .replace("regexp_like(", "regexp_matches(")
        .replace("json_extract_scalar(", "json_extract_string(")
        .replace("approx_percentile(", "quantile_cont(")
        .replace("array_join(", "array_to_string(")
}
