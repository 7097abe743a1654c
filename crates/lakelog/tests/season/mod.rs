//! Checks of a game report against the planned season its table holds, shared by the tests that
//! write a season (the demo, the report's own tests).

use std::collections::BTreeMap;
use std::path::Path;

use chrono::{Days, NaiveDate};
use fixtures::game::season::{
    EXPERIMENT, LIFECYCLE_STATES, LTV_DAYS, RETURN_DAYS, Season, SeasonTruth, TUTORIAL_STEPS,
};
use lakelog_reports::game::SESSION_LENGTHS;
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

    // The lifecycle of every ended day, and the devices at risk, from the days each device plays.
    let lifecycle = truth.lifecycle(chrono::Utc::now().date_naive());
    assert_eq!(report["lifecycle"]["states"], json!(LIFECYCLE_STATES));
    let states: BTreeMap<(Option<String>, NaiveDate), Vec<u64>> = report["lifecycle"]["days"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let devices = d["devices"].as_array().unwrap().iter().map(|n| n.as_u64().unwrap());
            let platform = d["platform"].as_str().map(str::to_owned);
            ((platform, date(&d["date"])), devices.collect())
        })
        .collect();
    let want: BTreeMap<(Option<String>, NaiveDate), Vec<u64>> = lifecycle
        .days
        .iter()
        .map(|((platform, d), n)| ((platform.map(str::to_owned), *d), n.to_vec()))
        .collect();
    assert_eq!(states, want, "lifecycle");
    let at_risk: std::collections::BTreeSet<String> = report["lifecycle"]["at_risk"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["device"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(at_risk, lifecycle.at_risk, "devices at risk");

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
    let mut buckets = vec![0u64; SESSION_LENGTHS.len()];
    for seconds in &truth.lengths {
        let k = SESSION_LENGTHS
            .iter()
            .position(|(_, bound)| bound.is_none_or(|b| *seconds < b))
            .unwrap();
        buckets[k] += 1;
    }
    assert_eq!(reported_lengths(report), buckets, "session lengths by bucket");
    day30_known
}

/// The `columns` of the rows of the template's saved game query `id`, run by DuckDB over the local
/// table `table`.
fn saved_query_rows(id: &str, table: &Path, columns: &str) -> Vec<Vec<Value>> {
    let query = lakelog_tests::athena_query(
        id,
        lakelog_tests::TEMPLATE_GAME_EVENTS,
        &format!("delta_scan('{}')", table.display()),
    )
    .unwrap();
    let query = lakelog_tests::in_duckdb(&query);
    lakelog_tests::duckdb("http://127.0.0.1:9", &format!("SELECT {columns} FROM ({query})")).unwrap()
}

/// A cohort's first-seen day and platform (`None`: all platforms).
pub type CohortKey = (NaiveDate, Option<String>);

/// The cohorts of the template's saved Athena query `GameRetentionQuery`, run by DuckDB over
/// `table`: devices and day-1, day-7 and day-30 returns (`None` where that day has not ended or
/// has no events), by first-seen day and platform (`None`: all platforms).
pub fn duckdb_cohorts(table: &Path) -> BTreeMap<CohortKey, (i64, [Option<i64>; 3])> {
    let rows = saved_query_rows(
        "GameRetentionQuery",
        table,
        "CAST(cohort AS VARCHAR), platform, devices, day_1, day_7, day_30",
    );
    rows.iter()
        .map(|r| {
            (
                (date(&r[0]), r[1].as_str().map(str::to_owned)),
                (r[2].as_i64().unwrap(), [r[3].as_i64(), r[4].as_i64(), r[5].as_i64()]),
            )
        })
        .collect()
}

/// Asserts that the saved retention query, run by DuckDB over `table`, gives the report's cohorts
/// exactly; returns how many day-1, day-7 and day-30 returns the report knows.
pub fn assert_duckdb_cohorts_are_the_report(report: &Value, table: &Path) -> [usize; 3] {
    let by_duckdb = duckdb_cohorts(table);
    let cohorts = report["retention"].as_array().unwrap();
    assert_eq!(by_duckdb.len(), cohorts.len());
    let mut compared = [0; 3];
    for c in cohorts {
        let key = (date(&c["date"]), c["platform"].as_str().map(str::to_owned));
        let (devices, returned) = by_duckdb[&key];
        assert_eq!(c["devices"].as_i64(), Some(devices), "{c}");
        for k in 0..3 {
            assert_eq!(c["returned"][k].as_i64(), returned[k], "day {} of {c}", RETURN_DAYS[k]);
            compared[k] += usize::from(returned[k].is_some());
        }
    }
    compared
}

/// Asserts that the saved lifecycle query, run by DuckDB over `table`, gives the report's devices
/// in each state on each ended day; returns how many days it compared.
pub fn assert_duckdb_lifecycle_is_the_report(report: &Value, table: &Path) -> usize {
    let rows = saved_query_rows(
        "GameLifecycleQuery",
        table,
        "CAST(day AS VARCHAR), platform, state, devices",
    );
    type Days = BTreeMap<(Option<String>, NaiveDate), Vec<i64>>;
    let mut by_duckdb: Days = BTreeMap::new();
    for r in &rows {
        let k = LIFECYCLE_STATES
            .iter()
            .position(|s| Some(*s) == r[2].as_str())
            .unwrap_or_else(|| panic!("a state the report does not have: {r:?}"));
        let key = (r[1].as_str().map(str::to_owned), date(&r[0]));
        by_duckdb.entry(key).or_insert_with(|| vec![0; 6])[k] = r[3].as_i64().unwrap();
    }
    let reported: Days = report["lifecycle"]["days"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let devices = d["devices"].as_array().unwrap().iter().map(|n| n.as_i64().unwrap());
            (
                (d["platform"].as_str().map(str::to_owned), date(&d["date"])),
                devices.collect(),
            )
        })
        .collect();
    assert_eq!(
        by_duckdb, reported,
        "lifecycle: DuckDB over the saved query, then the report"
    );
    reported.len()
}

/// Asserts that the saved sessions query, run by DuckDB over `table`, gives the report's
/// sessions per day (count, devices, median length) and its sessions of each length.
pub fn assert_duckdb_sessions_are_the_report(report: &Value, table: &Path) {
    let scan = format!("delta_scan('{}')", table.display());
    if let Err(e) = lakelog_tests::duckdb_sessions_are_the_report("http://127.0.0.1:9", &scan, report) {
        panic!("{e:#}");
    }
}

/// The report's sessions of each length, in the buckets of [`SESSION_LENGTHS`].
fn reported_lengths(report: &Value) -> Vec<u64> {
    report["sessions"]["lengths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l[1].as_u64().unwrap())
        .collect()
}

/// A funnel's devices at each step, by platform (`None`: all) and first-seen day.
type FunnelSteps = BTreeMap<(Option<String>, NaiveDate), Vec<u64>>;

/// The devices at each step of the report's funnel `funnel` (its JSON), by first-seen day (all
/// platforms), and by platform (all days).
fn reported_funnel(funnel: &Value) -> (FunnelSteps, BTreeMap<String, Vec<u64>>) {
    let reached = |figures: &Value| -> Vec<u64> {
        figures["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["reached"].as_u64().unwrap())
            .collect()
    };
    let days = funnel["by_first_seen"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| ((None, date(&d["date"])), reached(d)))
        .collect();
    let platforms = funnel["by_platform"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_str().unwrap().to_owned(), reached(&p[1])))
        .collect();
    (days, platforms)
}

/// Asserts that the report's funnel `funnel` (its JSON, of the season's tutorial) finds the
/// devices that did each tutorial step, by the day each was first seen and by platform, a minute
/// between steps; returns how many devices entered.
pub fn assert_funnel_is_the_season(funnel: &Value, truth: &SeasonTruth) -> u64 {
    let (days, platforms) = reported_funnel(funnel);
    let want: FunnelSteps = truth
        .tutorial
        .iter()
        .filter(|((platform, _), _)| platform.is_none())
        .map(|((_, day), reached)| ((None, *day), reached.to_vec()))
        .collect();
    assert_eq!(days, want, "the tutorial funnel by first-seen day");
    let mut want: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for ((platform, _), reached) in &truth.tutorial {
        if let Some(platform) = platform {
            let sum = want
                .entry((*platform).to_owned())
                .or_insert_with(|| vec![0; TUTORIAL_STEPS]);
            for (total, n) in sum.iter_mut().zip(reached) {
                *total += n;
            }
        }
    }
    assert_eq!(platforms, want, "the tutorial funnel by platform");
    for step in &funnel["all"]["steps"].as_array().unwrap()[1..] {
        assert_eq!(step["median_seconds"], json!(60.0), "{step}");
    }
    funnel["all"]["steps"][0]["reached"].as_u64().unwrap()
}

/// Asserts that `sql` (a funnel's Athena SQL, from the template or from the report's
/// `athena_sql`, over `TEMPLATE_GAME_EVENTS` or `game_events`), run by DuckDB over `table`, gives
/// the report's funnel `funnel` (its JSON): the devices at each step and the median times, by
/// first-seen day, and by platform over all days.
pub fn assert_duckdb_funnel_is_the_report(funnel: &Value, sql: &str, table: &Path) {
    let steps = funnel["steps"].as_array().unwrap().len();
    let columns: Vec<String> = ["CAST(first_seen AS VARCHAR)".to_owned(), "platform".to_owned()]
        .into_iter()
        .chain((1..=steps).map(|k| format!("step{k}")))
        .chain((2..=steps).map(|k| format!("median_seconds{k}")))
        .collect();
    let query = duckdb_sql(sql, table);
    let rows = lakelog_tests::duckdb(
        "http://127.0.0.1:9",
        &format!("SELECT {} FROM ({query})", columns.join(", ")),
    )
    .unwrap();
    let mut days: FunnelSteps = BTreeMap::new();
    let mut platforms: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for r in &rows {
        let reached: Vec<u64> = r[2..2 + steps].iter().map(|n| n.as_u64().unwrap()).collect();
        match r[1].as_str() {
            None => {
                days.insert((None, date(&r[0])), reached);
                // The medians of the day, as the report gives them.
                let reported = funnel["by_first_seen"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|d| d["date"] == r[0])
                    .unwrap_or_else(|| panic!("DuckDB's day {} is not in the report", r[0]));
                for k in 1..steps {
                    let (ours, theirs) = (&reported["steps"][k]["median_seconds"], &r[1 + steps + k]);
                    assert!(
                        ours.as_f64()
                            .zip(theirs.as_f64())
                            .map_or(ours.is_null() && theirs.is_null(), |(a, b)| (a - b).abs() < 1e-6),
                        "median to step {}: report {ours}, DuckDB {theirs}",
                        k + 1
                    );
                }
            }
            Some(platform) => {
                let sum = platforms.entry(platform.to_owned()).or_insert_with(|| vec![0; steps]);
                for (total, n) in sum.iter_mut().zip(reached) {
                    *total += n;
                }
            }
        }
    }
    assert_eq!(
        (days, platforms),
        reported_funnel(funnel),
        "the funnel: DuckDB, then the report"
    );
}

/// An acquisition group's figures: devices, payers, revenue, and per LTV day the devices counted
/// and the lifetime value.
type Worth = (i64, i64, f64, Vec<(i64, Option<f64>)>);

/// The report's acquisition groups (its JSON), by `(by, name)`.
fn reported_acquisition(report: &Value) -> BTreeMap<(String, String), Worth> {
    report["acquisition"]["cohorts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let ltv = (0..LTV_DAYS.len())
                .map(|k| (c["ltv_devices"][k].as_i64().unwrap(), c["ltv"][k].as_f64()))
                .collect();
            (
                (
                    c["by"].as_str().unwrap().to_owned(),
                    c["name"].as_str().unwrap().to_owned(),
                ),
                (
                    c["devices"].as_i64().unwrap(),
                    c["payers"].as_i64().unwrap(),
                    c["revenue"].as_f64().unwrap(),
                    ltv,
                ),
            )
        })
        .collect()
}

/// Asserts that two sets of acquisition groups agree, money to the cent's hundredth.
fn assert_worth_eq(a: &BTreeMap<(String, String), Worth>, b: &BTreeMap<(String, String), Worth>, what: &str) {
    assert_eq!(
        a.keys().collect::<Vec<_>>(),
        b.keys().collect::<Vec<_>>(),
        "{what}: the groups"
    );
    let close = |x: f64, y: f64| (x - y).abs() < 1e-6;
    for (key, (devices, payers, revenue, ltv)) in a {
        let (d, p, r, l) = &b[key];
        assert_eq!((devices, payers), (d, p), "{what}: {key:?}");
        assert!(close(*revenue, *r), "{what}: revenue of {key:?}: {revenue} and {r}");
        for ((n, v), (m, w)) in ltv.iter().zip(l) {
            assert_eq!(n, m, "{what}: LTV devices of {key:?}");
            assert!(
                v.zip(*w).map_or(v.is_none() && w.is_none(), |(v, w)| close(v, w)),
                "{what}: LTV of {key:?}: {ltv:?} and {l:?}"
            );
        }
    }
}

/// Asserts that the report's acquisition groups are the season's: each source, campaign, country
/// and platform with its devices, payers, revenue and lifetime values at day 1, 7, 30 and 90 over
/// the devices whose day has ended. Returns the lifetime values by source at the longest day known
/// for every source.
pub fn assert_acquisition_is_the_season(report: &Value, truth: &SeasonTruth) -> BTreeMap<String, f64> {
    let want: BTreeMap<(String, String), Worth> = truth
        .acquisition(chrono::Utc::now().date_naive())
        .into_iter()
        .map(|(key, t)| {
            let ltv = t
                .ltv
                .iter()
                .map(|(n, cents)| (*n as i64, (*n > 0).then(|| dollars(*cents) / *n as f64)))
                .collect();
            (key, (t.devices as i64, t.payers as i64, dollars(t.revenue_cents), ltv))
        })
        .collect();
    let reported = reported_acquisition(report);
    assert_worth_eq(&reported, &want, "acquisition: the report, then the season");
    let k = (0..LTV_DAYS.len())
        .rev()
        .find(|&k| {
            reported
                .iter()
                .filter(|((by, _), _)| by == "source")
                .all(|(_, w)| w.3[k].1.is_some())
        })
        .unwrap_or(0);
    reported
        .iter()
        .filter(|((by, _), _)| by == "source")
        .map(|((_, name), w)| (name.clone(), w.3[k].1.unwrap_or(0.0)))
        .collect()
}

/// Asserts that the saved acquisition query, run by DuckDB over `table`, gives the report's groups.
pub fn assert_duckdb_acquisition_is_the_report(report: &Value, table: &Path) {
    let days: Vec<String> = LTV_DAYS.iter().map(|n| format!("devices{n}, revenue{n}")).collect();
    let rows = saved_query_rows(
        "GameAcquisitionQuery",
        table,
        &format!(
            "grouped_by, source, campaign, country, platform, devices, payers, revenue, {}",
            days.join(", ")
        ),
    );
    let by_duckdb: BTreeMap<(String, String), Worth> = rows
        .iter()
        .map(|r| {
            let by = r[0].as_str().unwrap().to_owned();
            let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            let name = match by.as_str() {
                "source" => text(&r[1]),
                "campaign" => format!("{} / {}", text(&r[1]), text(&r[2])),
                "country" => text(&r[3]),
                "platform" => text(&r[4]),
                _ => String::new(),
            };
            let ltv = (0..LTV_DAYS.len())
                .map(|k| {
                    let n = r[8 + 2 * k].as_i64().unwrap();
                    (n, (n > 0).then(|| r[9 + 2 * k].as_f64().unwrap_or(0.0) / n as f64))
                })
                .collect();
            (
                (by, name),
                (
                    r[5].as_i64().unwrap(),
                    r[6].as_i64().unwrap(),
                    r[7].as_f64().unwrap(),
                    ltv,
                ),
            )
        })
        .collect();
    assert_worth_eq(
        &reported_acquisition(report),
        &by_duckdb,
        "acquisition: the report, then DuckDB",
    );
}

/// A variant's figures: devices, conversion, revenue per device, and per return day the devices
/// counted and the share back.
type VariantFigures = (i64, f64, f64, Vec<(i64, Option<f64>)>);

/// A variant's key: the platform (`None`: all) and its name.
type VariantKey = (Option<String>, String);

/// The figures of a variant of the report (its JSON).
fn variant_figures(v: &Value) -> VariantFigures {
    let returned = v["retention"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["devices"].as_i64().unwrap(), r["value"].as_f64()))
        .collect();
    (
        v["devices"].as_i64().unwrap(),
        v["conversion"]["value"].as_f64().unwrap(),
        v["revenue_per_device"]["value"].as_f64().unwrap(),
        returned,
    )
}

/// The report's experiment of the season (its JSON).
fn reported_experiment(report: &Value) -> &Value {
    report["experiments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == EXPERIMENT.0)
        .unwrap_or_else(|| panic!("no experiment {} in {}", EXPERIMENT.0, report["experiments"]))
}

/// The report's variants of the season's experiment (its JSON), all platforms and by platform:
/// each with its platform, and the variant's JSON.
fn reported_variant_values(report: &Value) -> Vec<(Option<String>, &Value)> {
    let experiment = reported_experiment(report);
    let all = experiment["variants"].as_array().unwrap().iter().map(|v| (None, v));
    let by_platform = experiment["by_platform"].as_array().unwrap().iter().flat_map(|p| {
        let platform = p["platform"].as_str().unwrap().to_owned();
        p["variants"]
            .as_array()
            .unwrap()
            .iter()
            .map(move |v| (Some(platform.clone()), v))
    });
    all.chain(by_platform).collect()
}

/// The report's variants' figures, by platform and name.
fn reported_variants(report: &Value) -> BTreeMap<VariantKey, VariantFigures> {
    reported_variant_values(report)
        .into_iter()
        .map(|(platform, v)| ((platform, v["name"].as_str().unwrap().to_owned()), variant_figures(v)))
        .collect()
}

fn assert_variants_eq(a: &BTreeMap<VariantKey, VariantFigures>, b: &BTreeMap<VariantKey, VariantFigures>, what: &str) {
    assert_eq!(
        a.keys().collect::<Vec<_>>(),
        b.keys().collect::<Vec<_>>(),
        "{what}: the variants"
    );
    let close = |x: f64, y: f64| (x - y).abs() < 1e-9;
    for (key, (devices, conversion, revenue, returned)) in a {
        let (d, c, r, back) = &b[key];
        assert_eq!(devices, d, "{what}: devices of {key:?}");
        assert!(
            close(*conversion, *c) && close(*revenue, *r),
            "{what}: {key:?}: {a:?} and {b:?}"
        );
        for ((n, v), (m, w)) in returned.iter().zip(back) {
            assert_eq!(n, m, "{what}: return devices of {key:?}");
            assert!(
                v.zip(*w).map_or(v.is_none() && w.is_none(), |(v, w)| close(v, w)),
                "{what}: {key:?}: {returned:?} and {back:?}"
            );
        }
    }
}

/// Asserts that the report's experiment is the season's, all platforms and by platform: per
/// variant the devices shown it, the share that bought from then on, the revenue per device from
/// then on, and the returns 1 and 7 days after the day it was shown.
pub fn assert_experiment_is_the_season(report: &Value, season: &Season) {
    let want: BTreeMap<VariantKey, VariantFigures> = season
        .experiment(chrono::Utc::now().date_naive())
        .into_iter()
        .map(|((platform, name), v)| {
            let returned = v
                .returned
                .iter()
                .map(|(n, back)| (*n as i64, (*n > 0).then(|| *back as f64 / *n as f64)))
                .collect();
            let devices = v.devices as f64;
            (
                (platform.map(str::to_owned), name.to_owned()),
                (
                    v.devices as i64,
                    v.converted as f64 / devices,
                    dollars(v.after_cents) / devices,
                    returned,
                ),
            )
        })
        .collect();
    assert_variants_eq(
        &reported_variants(report),
        &want,
        "the experiment: the report, then the season",
    );
}

/// Asserts that the saved experiment query, run by DuckDB over `table`, gives the report's
/// variants, all platforms and by platform, and their CUPED-adjusted revenue per device.
pub fn assert_duckdb_experiment_is_the_report(report: &Value, table: &Path) {
    let rows = saved_query_rows(
        "GameExperimentQuery",
        table,
        "experiment, variant, platform, devices, converted, revenue_per_device, cuped_revenue_per_device, known1, \
         back1, known7, back7",
    );
    let mut cuped = BTreeMap::new();
    let by_duckdb: BTreeMap<VariantKey, VariantFigures> = rows
        .iter()
        .filter(|r| r[0] == EXPERIMENT.0)
        .map(|r| {
            let devices = r[3].as_i64().unwrap();
            let share = |known: &Value, back: &Value| {
                let n = known.as_i64().unwrap();
                (n, (n > 0).then(|| back.as_f64().unwrap_or(0.0) / n as f64))
            };
            let key: VariantKey = (r[2].as_str().map(str::to_owned), r[1].as_str().unwrap().to_owned());
            cuped.insert(key.clone(), r[6].as_f64().unwrap());
            (
                key,
                (
                    devices,
                    r[4].as_f64().unwrap() / devices as f64,
                    r[5].as_f64().unwrap(),
                    vec![share(&r[7], &r[8]), share(&r[9], &r[10])],
                ),
            )
        })
        .collect();
    assert_variants_eq(
        &reported_variants(report),
        &by_duckdb,
        "the experiment: the report, then DuckDB",
    );
    for (platform, v) in reported_variant_values(report) {
        let ours = v["revenue_per_device_cuped"]["value"].as_f64().unwrap();
        let theirs = cuped[&(platform.clone(), v["name"].as_str().unwrap().to_owned())];
        assert!(
            (ours - theirs).abs() < 1e-6,
            "CUPED revenue of {platform:?} {}: {ours} and {theirs}",
            v["name"]
        );
    }
}

/// Asserts that `sql` (paths' Athena SQL over `game_events`), run by DuckDB over `table`, gives the
/// report's paths `paths` (its JSON): as many times and distinct paths, and the same most frequent
/// paths in the same order. Returns how many times the event was done.
pub fn assert_duckdb_paths_are_the_report(paths: &Value, sql: &str, table: &Path) -> i64 {
    let query = duckdb_sql(sql, table);
    let rows = lakelog_tests::duckdb("http://127.0.0.1:9", &format!("SELECT path, times FROM ({query})")).unwrap();
    let times: i64 = rows.iter().map(|r| r[1].as_i64().unwrap()).sum();
    assert_eq!(paths["occurrences"].as_i64(), Some(times), "{paths}");
    assert_eq!(paths["distinct"].as_u64(), Some(rows.len() as u64), "{paths}");
    let top = reported_paths(paths);
    let theirs: Vec<(String, i64)> = rows
        .iter()
        .take(top.len())
        .map(|r| (r[0].as_str().unwrap().to_owned(), r[1].as_i64().unwrap()))
        .collect();
    assert_eq!(top, theirs, "the paths: the report, then DuckDB");
    times
}

/// The report's most frequent paths (its JSON's `top`), each as its events joined by ` > `, with
/// its times.
fn reported_paths(paths: &Value) -> Vec<(String, i64)> {
    paths["top"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let events: Vec<&str> = p["events"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e.as_str().unwrap())
                .collect();
            (events.join(" > "), p["times"].as_i64().unwrap())
        })
        .collect()
}

/// `sql`, Athena SQL over `game_events` with its date range still `?`, as DuckDB runs it over the
/// local table `table`: the range bound to every date, the functions renamed.
fn duckdb_sql(sql: &str, table: &Path) -> String {
    lakelog_tests::in_duckdb(
        &bound(sql).replace("FROM game_events", &format!("FROM delta_scan('{}')", table.display())),
    )
}

/// `sql` with its date range (`CAST(? AS DATE)`, twice) bound to every date.
fn bound(sql: &str) -> String {
    let mut sql = sql.to_owned();
    for bound in lakelog_tests::WHOLE_RANGE {
        sql = sql.replacen("CAST(? AS DATE)", bound, 1);
    }
    sql
}

/// Asserts that the template's saved game query `id`, after its comment lines, is `ours` (the
/// report's SQL of the same question over `game_events`); returns it, over `game_events`.
pub fn assert_saved_query_is(id: &str, ours: &str) -> String {
    let saved = lakelog_tests::athena_query(id, lakelog_tests::TEMPLATE_GAME_EVENTS, "game_events").unwrap();
    let ours = bound(ours);
    let comments = saved.lines().take_while(|l| l.starts_with("--")).count();
    assert_eq!(
        saved.lines().skip(comments).collect::<Vec<_>>(),
        ours.lines().collect::<Vec<_>>(),
        "the template's {id} is the report's SQL"
    );
    ours
}

/// Asserts that the report's paths `paths` (its JSON) are the season's: the paths of `steps`
/// events after (or before) `event` within each planned session, counted from the plan's events
/// (not cut by inactivity as the report cuts them): as many times and distinct paths, and the same
/// most frequent ones in the same order.
pub fn assert_paths_are_the_season(paths: &Value, season: &Season, event: &str, steps: usize, after: bool) {
    let truth = season.paths(event, steps, after);
    assert_eq!(
        paths["occurrences"].as_u64(),
        Some(truth.values().sum::<u64>()),
        "{paths}"
    );
    assert_eq!(paths["distinct"].as_u64(), Some(truth.len() as u64), "{paths}");
    let mut want: Vec<(String, u64)> = truth.into_iter().map(|(p, n)| (p.join(" > "), n)).collect();
    want.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let top: Vec<(String, u64)> = reported_paths(paths).into_iter().map(|(p, n)| (p, n as u64)).collect();
    want.truncate(top.len());
    assert_eq!(top, want, "the paths: the report, then the season");
}
