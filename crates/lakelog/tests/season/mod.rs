//! Checks of a game report against the planned season its table holds, shared by the tests that
//! write a season (the demo, the report's own tests).

use std::collections::BTreeMap;
use std::path::Path;

use chrono::{Days, NaiveDate};
use fixtures::game::season::{RETURN_DAYS, SeasonTruth};
use lakelog_reports::game::sessions::LENGTHS;
use serde_json::{Value, json};

fn date(text: &Value) -> NaiveDate {
    NaiveDate::parse_from_str(text.as_str().unwrap(), "%Y-%m-%d").unwrap()
}

fn dollars(cents: u64) -> f64 {
    cents as f64 / 100.0
}

/// Asserts that the game report `report` (its JSON) gives exactly the season's KPIs: DAU, the
/// retention cohorts (all and by platform, each return known where the range reaches it), revenue
/// per day, platform and app version, and sessions per day with their lengths. Returns how many
/// cohorts had their day-30 return in the range.
pub fn assert_report_is_the_season(report: &Value, truth: &SeasonTruth) -> usize {
    let dau: BTreeMap<NaiveDate, u64> = report["dau"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (date(&d["date"]), d["users"].as_u64().unwrap()))
        .collect();
    let want: BTreeMap<NaiveDate, u64> = truth.days.iter().map(|(d, t)| (*d, t.active)).collect();
    assert_eq!(dau, want, "DAU");

    let last_day = *truth.days.keys().last().unwrap();
    let cohorts = report["retention"].as_array().unwrap();
    assert_eq!(cohorts.len(), truth.cohorts.len(), "cohorts");
    let mut day30_known = 0;
    for c in cohorts {
        let (day, platform) = (date(&c["date"]), c["platform"].as_str());
        let want = truth
            .cohorts
            .iter()
            .find(|t| t.date == day && t.platform == platform)
            .unwrap_or_else(|| panic!("no such cohort in the season: {c}"));
        assert_eq!(c["devices"].as_u64(), Some(want.devices), "{c}");
        for (k, n) in RETURN_DAYS.iter().enumerate() {
            let known = day + Days::new(*n) <= last_day;
            let expected = if known { json!(want.returned[k]) } else { Value::Null };
            assert_eq!(c["returned"][k], expected, "day {n} of {c}");
            day30_known += usize::from(known && k == 2);
        }
    }

    let days = report["revenue"]["days"].as_array().unwrap();
    assert_eq!(days.len(), truth.days.len(), "revenue days");
    for d in days {
        let want = &truth.days[&date(&d["date"])];
        assert_eq!(d["active_users"].as_u64(), Some(want.active), "{d}");
        assert_eq!(d["paying_users"].as_u64(), Some(want.paying), "{d}");
        let revenue = d["revenue"].as_f64().unwrap();
        assert!((revenue - dollars(want.revenue_cents)).abs() < 1e-6, "{d}: {want:?}");
        if want.paying > 0 {
            let arppu = d["arppu"].as_f64().unwrap();
            assert!(
                (arppu - dollars(want.revenue_cents) / want.paying as f64).abs() < 1e-9,
                "{d}"
            );
        }
    }
    for (field, want) in [
        ("by_platform", &truth.by_platform),
        ("by_app_version", &truth.by_app_version),
    ] {
        let of = report["revenue"][field].as_array().unwrap();
        assert_eq!(of.len(), want.len(), "{field}: {of:?}");
        for r in of {
            let spend = &want[r["name"].as_str().unwrap()];
            assert_eq!(r["purchases"].as_u64(), Some(spend.purchases), "{r}");
            assert_eq!(r["paying_users"].as_u64(), Some(spend.payers), "{r}");
            assert!(
                (r["revenue"].as_f64().unwrap() - dollars(spend.revenue_cents)).abs() < 1e-6,
                "{r}"
            );
        }
    }

    let sessions: BTreeMap<NaiveDate, (u64, u64, f64)> = report["sessions"]["days"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let n = |field: &str| d[field].as_u64().unwrap();
            (
                date(&d["date"]),
                (n("sessions"), n("devices"), d["median_seconds"].as_f64().unwrap()),
            )
        })
        .collect();
    let want: BTreeMap<NaiveDate, (u64, u64, f64)> = truth
        .days
        .iter()
        .map(|(d, t)| (*d, (t.sessions, t.active, t.median_seconds)))
        .collect();
    assert_eq!(sessions, want, "sessions per day (sessions, devices, median seconds)");
    let mut buckets = vec![0u64; LENGTHS.len()];
    for seconds in &truth.lengths {
        let k = LENGTHS
            .iter()
            .position(|(_, bound)| bound.is_none_or(|b| *seconds < b))
            .unwrap();
        buckets[k] += 1;
    }
    let lengths: Vec<u64> = report["sessions"]["lengths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l[1].as_u64().unwrap())
        .collect();
    assert_eq!(lengths, buckets, "session lengths by bucket");
    day30_known
}

/// The retention cohorts DuckDB finds in the game_events table at `table` (each eventId once):
/// `(first day, platform or None for all) -> [devices, returned on day 1, 7, 30]`.
pub fn duckdb_cohorts(table: &Path) -> BTreeMap<(NaiveDate, Option<String>), [i64; 4]> {
    let rows = lakelog_tests::duckdb(
        "http://127.0.0.1:9",
        &format!(
            "WITH ev AS (SELECT * FROM delta_scan('{}') \
               QUALIFY row_number() OVER (PARTITION BY \"eventId\" ORDER BY \"approximateArrivalTime\") = 1), \
             active AS (SELECT DISTINCT \"eventParams\".device_id AS device, \
               coalesce(\"eventParams\".platform, 'unknown') AS platform, CAST(\"eventTime\" AS DATE) AS day \
               FROM ev WHERE \"eventParams\".device_id IS NOT NULL), \
             firsts AS (SELECT device, min(day) AS cohort FROM active GROUP BY device), \
             f AS (SELECT f.device, f.cohort, min(a.platform) AS platform FROM firsts f \
               JOIN active a ON a.device = f.device AND a.day = f.cohort GROUP BY 1, 2) \
             SELECT CAST(f.cohort AS VARCHAR), f.platform, count(DISTINCT f.device), \
               count(DISTINCT a.device) FILTER (WHERE a.day = f.cohort + 1), \
               count(DISTINCT a.device) FILTER (WHERE a.day = f.cohort + 7), \
               count(DISTINCT a.device) FILTER (WHERE a.day = f.cohort + 30) \
             FROM f LEFT JOIN active a ON a.device = f.device \
             GROUP BY GROUPING SETS ((f.cohort), (f.cohort, f.platform))",
            table.display()
        ),
    )
    .unwrap();
    rows.iter()
        .map(|r| {
            let n = |v: &Value| v.as_i64().unwrap();
            (
                (date(&r[0]), r[1].as_str().map(str::to_owned)),
                [n(&r[2]), n(&r[3]), n(&r[4]), n(&r[5])],
            )
        })
        .collect()
}

/// Asserts that DuckDB's cohorts over `table` are the report's, each return where the report
/// knows it; returns how many day-1, day-7 and day-30 returns were compared.
pub fn assert_duckdb_cohorts_are_the_report(report: &Value, table: &Path) -> [usize; 3] {
    let by_duckdb = duckdb_cohorts(table);
    let cohorts = report["retention"].as_array().unwrap();
    assert_eq!(by_duckdb.len(), cohorts.len());
    let mut compared = [0; 3];
    for c in cohorts {
        let key = (date(&c["date"]), c["platform"].as_str().map(str::to_owned));
        let want = by_duckdb[&key];
        assert_eq!(c["devices"].as_i64(), Some(want[0]), "{c}");
        for k in 0..3 {
            if let Some(returned) = c["returned"][k].as_i64() {
                assert_eq!(returned, want[k + 1], "day {} of {c}", RETURN_DAYS[k]);
                compared[k] += 1;
            }
        }
    }
    compared
}
