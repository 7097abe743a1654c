//! `lakelog demo` end to end: the reports it writes hold the figures its generated workload is
//! known to have (game KPIs recomputed here from the same planned traffic; access-log reads and
//! writes from the generated lake's truth), and compaction removes the one resent request's rows.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use lakelog::commands::demo::{game_traffic, resent};
use s3_access_log::workload;
use serde_json::Value;

const NOW: &str = "2024-06-05T12:30:00Z";
const EVENTS: u64 = 6000;
const DEVICES: usize = 300;
const SEED: u64 = 7;
const LOG_DAYS: i64 = 51;
/// Days of game traffic: enough for day-7 retention to be known for the first cohorts.
const GAME_DAYS: i64 = 9;

fn read_json(path: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

#[test]
fn the_demo_reports_what_its_workload_holds() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    let run = || {
        Command::new(env!("CARGO_BIN_EXE_lakelog"))
            .args([
                "demo",
                "--dir",
                dir.to_str().unwrap(),
                "--now",
                NOW,
                "--log-days",
                &LOG_DAYS.to_string(),
                "--game-days",
                &GAME_DAYS.to_string(),
            ])
            .args([
                "--events",
                &EVENTS.to_string(),
                "--devices",
                &DEVICES.to_string(),
                "--seed",
                &SEED.to_string(),
            ])
            .output()
            .unwrap()
    };
    let out = run();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));

    // What the demo sent, planned again from the same arguments.
    let now = DateTime::parse_from_rfc3339(NOW).unwrap().with_timezone(&Utc);
    let traffic = game_traffic(SEED, DEVICES, EVENTS, now, GAME_DAYS as u32 * 24);
    assert_eq!(traffic.iter().map(|r| r.events.len() as u64).sum::<u64>(), EVENTS);
    let mut hourly: BTreeMap<String, (i64, f64)> = BTreeMap::new();
    let mut users: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for request in &traffic {
        // eventTime is the request's time in whole seconds.
        let at = request.at.duration_trunc(TimeDelta::seconds(1)).unwrap();
        let hour = at.duration_trunc(TimeDelta::hours(1)).unwrap();
        let entry = hourly
            .entry(hour.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
            .or_default();
        for event in &request.events {
            entry.0 += 1;
            let params = event.event_params.as_ref().unwrap();
            if event.event_name == "purchaseEvent" {
                entry.1 += params.amount.unwrap();
            }
            users
                .entry(at.date_naive().to_string())
                .or_default()
                .insert(params.device_id.clone().unwrap());
        }
    }

    let game = read_json(&dir.join("reports/game/report.json"));
    let events: BTreeMap<String, i64> = game["events_per_hour"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["window_start"].as_str().unwrap().to_owned(),
                h["count"].as_i64().unwrap(),
            )
        })
        .collect();
    let expected: BTreeMap<String, i64> = hourly.iter().map(|(h, (n, _))| (h.clone(), *n)).collect();
    assert_eq!(events, expected);
    for h in game["bookings_per_hour"].as_array().unwrap() {
        let expected = hourly[h["window_start"].as_str().unwrap()].1;
        assert!(
            (h["amount"].as_f64().unwrap() - expected).abs() < 1e-6,
            "{h} vs {expected}"
        );
    }
    let dau: BTreeMap<String, usize> = game["dau"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["date"].as_str().unwrap().to_owned(),
                d["users"].as_u64().unwrap() as usize,
            )
        })
        .collect();
    let expected: BTreeMap<String, usize> = users.iter().map(|(d, u)| (d.clone(), u.len())).collect();
    assert_eq!(dau, expected);
    assert_eq!(game["late_events"], 0);

    // Retention: each device's first day, and whether it played the next day, as sent.
    let mut days_of: BTreeMap<String, BTreeSet<chrono::NaiveDate>> = BTreeMap::new();
    for request in &traffic {
        let at = request.at.duration_trunc(TimeDelta::seconds(1)).unwrap();
        for event in &request.events {
            let device = event.event_params.as_ref().unwrap().device_id.clone().unwrap();
            days_of.entry(device).or_default().insert(at.date_naive());
        }
    }
    let last_day = days_of.values().flat_map(|d| d.iter()).max().copied().unwrap();
    let mut cohorts: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for days in days_of.values() {
        let first = *days.first().unwrap();
        let cohort = cohorts.entry(first.to_string()).or_default();
        cohort.0 += 1;
        cohort.1 += i64::from(days.contains(&first.succ_opt().unwrap()));
    }
    let reported: Vec<&Value> = game["retention"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["platform"].is_null())
        .collect();
    assert_eq!(reported.len(), cohorts.len());
    for c in reported {
        let date = c["date"].as_str().unwrap();
        let (devices, next_day) = cohorts[date];
        assert_eq!(c["devices"].as_i64().unwrap(), devices, "{c}");
        let day = chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d").unwrap();
        let want = if day < last_day {
            serde_json::json!(next_day)
        } else {
            Value::Null
        };
        assert_eq!(c["returned"][0], want, "{c}");
        // Nine days of traffic: day 30 is after the range.
        assert_eq!(c["returned"][2], Value::Null, "{c}");
    }
    // DuckDB over the demo's table (each eventId once) finds the same cohorts, all and by platform,
    // and the same day-1 and day-7 returns where the range reaches them.
    let table = dir.join("lake/game_events");
    let duck = lakelog_tests::duckdb(
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
               count(DISTINCT a.device) FILTER (WHERE a.day = f.cohort + 7) \
             FROM f LEFT JOIN active a ON a.device = f.device \
             GROUP BY GROUPING SETS ((f.cohort), (f.cohort, f.platform))",
            table.display()
        ),
    )
    .unwrap();
    let by_duckdb: BTreeMap<(String, Option<String>), [i64; 3]> = duck
        .iter()
        .map(|r| {
            let n = |v: &Value| v.as_i64().unwrap();
            (
                (r[0].as_str().unwrap().to_owned(), r[1].as_str().map(str::to_owned)),
                [n(&r[2]), n(&r[3]), n(&r[4])],
            )
        })
        .collect();
    let mut day7_known = 0;
    for c in game["retention"].as_array().unwrap() {
        let key = (
            c["date"].as_str().unwrap().to_owned(),
            c["platform"].as_str().map(str::to_owned),
        );
        let want = by_duckdb[&key];
        assert_eq!(c["devices"].as_i64().unwrap(), want[0], "{c}");
        for (k, n) in [(0, want[1]), (1, want[2])] {
            if let Some(returned) = c["returned"][k].as_i64() {
                assert_eq!(returned, n, "{c}");
                day7_known += k;
            }
        }
    }
    assert_eq!(by_duckdb.len(), game["retention"].as_array().unwrap().len());
    assert!(day7_known > 0, "no cohort's day 7 is in the range");

    // The player base grows: later days bring new players, and some come back.
    assert!(cohorts.len() >= 4 && cohorts.values().all(|c| c.0 > 0));
    assert!(cohorts.values().map(|c| c.1).sum::<i64>() > 0);

    // Sessions, cut from the sent events by the report's rules (a device's events by eventTime,
    // then eventId; a new one at sessionStart, after sessionEnd, or after 30 minutes without an
    // event), per day they start on.
    let mut plays: BTreeMap<String, Vec<(DateTime<Utc>, String, String)>> = BTreeMap::new();
    for request in &traffic {
        let at = request.at.duration_trunc(TimeDelta::seconds(1)).unwrap();
        for event in &request.events {
            let device = event.event_params.as_ref().unwrap().device_id.clone().unwrap();
            let id = event.event_id.unwrap().hyphenated().to_string();
            plays
                .entry(device)
                .or_default()
                .push((at, id, event.event_name.clone()));
        }
    }
    let mut sessions_of: BTreeMap<String, (i64, BTreeSet<String>)> = BTreeMap::new();
    for (device, events) in &mut plays {
        events.sort();
        let mut previous: Option<&(DateTime<Utc>, String, String)> = None;
        for event in events.iter() {
            let starts = match previous {
                None => true,
                Some(p) => event.2 == "sessionStart" || p.2 == "sessionEnd" || event.0 - p.0 > TimeDelta::minutes(30),
            };
            if starts {
                let day = sessions_of.entry(event.0.date_naive().to_string()).or_default();
                day.0 += 1;
                day.1.insert(device.clone());
            }
            previous = Some(event);
        }
    }
    let reported: BTreeMap<String, (i64, usize)> = game["sessions"]["days"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let n = |field: &str| d[field].as_i64().unwrap();
            (
                d["date"].as_str().unwrap().to_owned(),
                (n("sessions"), n("devices") as usize),
            )
        })
        .collect();
    let want: BTreeMap<String, (i64, usize)> = sessions_of
        .into_iter()
        .map(|(day, (n, devices))| (day, (n, devices.len())))
        .collect();
    assert_eq!(reported, want);
    let counted: i64 = game["sessions"]["lengths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l[1].as_i64().unwrap())
        .sum();
    assert_eq!(counted, want.values().map(|w| w.0).sum::<i64>());

    // Revenue: per day the paying devices and their purchases, and by app version, as sent.
    let mut paying: BTreeMap<String, (BTreeSet<String>, f64)> = BTreeMap::new();
    let mut by_version: BTreeMap<String, (f64, i64)> = BTreeMap::new();
    for request in &traffic {
        let at = request.at.duration_trunc(TimeDelta::seconds(1)).unwrap();
        for event in request.events.iter().filter(|e| e.event_name == "purchaseEvent") {
            let params = event.event_params.as_ref().unwrap();
            let day = paying.entry(at.date_naive().to_string()).or_default();
            day.0.insert(params.device_id.clone().unwrap());
            day.1 += params.amount.unwrap();
            let version = by_version.entry(params.app_version.clone().unwrap()).or_default();
            version.0 += params.amount.unwrap();
            version.1 += 1;
        }
    }
    for d in game["revenue"]["days"].as_array().unwrap() {
        let date = d["date"].as_str().unwrap();
        let (devices, revenue) = &paying[date];
        assert_eq!(d["paying_users"].as_u64().unwrap() as usize, devices.len(), "{d}");
        assert_eq!(d["active_users"].as_u64().unwrap() as usize, expected[date], "{d}");
        assert!((d["revenue"].as_f64().unwrap() - revenue).abs() < 1e-6, "{d}");
        let arppu = d["arppu"].as_f64().unwrap();
        assert!((arppu - revenue / devices.len() as f64).abs() < 1e-9, "{d}");
    }
    assert_eq!(game["revenue"]["days"].as_array().unwrap().len(), paying.len());
    for v in game["revenue"]["by_app_version"].as_array().unwrap() {
        let (revenue, purchases) = by_version[v["name"].as_str().unwrap()];
        assert!((v["revenue"].as_f64().unwrap() - revenue).abs() < 1e-6, "{v}");
        assert_eq!(v["purchases"].as_i64().unwrap(), purchases, "{v}");
    }

    // The resent request's partition is closed by NOW: compaction dropped its second copy.
    let resent_events = traffic[resent(&traffic)].events.len();
    assert!(
        stdout.contains(&format!("{resent_events} duplicate rows removed")),
        "{stdout}"
    );
    assert!(stdout.contains("a malformed request got 400"), "{stdout}");

    // Access logs: every dataset's reads, bytes read and writes as the generated lake counted
    // them, the datasets nobody reads listed, and advice worth real money on a lake this size.
    let access = read_json(&dir.join("reports/access/report.json"));
    let start = (now - TimeDelta::days(LOG_DAYS)).date_naive();
    let lake = workload::lake::generate(start, LOG_DAYS as u32, SEED);
    let reported: BTreeMap<(String, String), [u64; 3]> = access["datasets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let n = |field: &str| d[field].as_u64().unwrap();
            (
                (
                    d["bucket"].as_str().unwrap().to_owned(),
                    d["dataset"].as_str().unwrap().to_owned(),
                ),
                [n("reads"), n("read_bytes"), n("writes")],
            )
        })
        .collect();
    let truth: BTreeMap<(String, String), [u64; 3]> = lake
        .truth
        .iter()
        .map(|(k, t)| (k.clone(), [t.reads, t.read_bytes, t.writes]))
        .collect();
    assert_eq!(reported, truth);
    let unused: BTreeSet<&str> = access["unused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["dataset"].as_str().unwrap())
        .collect();
    assert_eq!(unused, BTreeSet::from(["exports/legacy/", "tmp/notebooks/"]));
    let headline = &access["headline"];
    assert_eq!(headline["reads"], truth.values().map(|t| t[0]).sum::<u64>());
    let saving = headline["monthly_saving"].as_f64().unwrap();
    assert!(
        saving > 500.0,
        "{saving} USD a month on {} TB",
        lake.written_bytes() / 1_000_000_000_000
    );
    // The Delta table's files are never advised into a class that needs a restore.
    let orders = access["advice"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["dataset"] == "warehouse/orders/")
        .unwrap();
    let classes: Vec<&str> = orders["transitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["storage_class"].as_str().unwrap())
        .collect();
    assert!(!classes.is_empty() && !classes.contains(&"GLACIER"), "{orders:#}");
    assert!(
        orders["reason"].as_str().unwrap().contains("Delta Lake files"),
        "{orders:#}"
    );

    // Hygiene: each check counts what the lake made, and the scanner is the 403 hot spot.
    let checks: BTreeMap<&str, u64> = access["hygiene"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["check"].as_str().unwrap(), c["requests"].as_u64().unwrap()))
        .collect();
    let h = &lake.hygiene;
    assert_eq!(
        checks,
        BTreeMap::from([
            ("sigv2", h.sigv2),
            ("old_tls", h.old_tls),
            ("anonymous", h.anonymous),
            ("acl_required", h.acl_required),
            ("cross_region", h.cross_region),
        ])
    );
    for c in access["hygiene"]["checks"].as_array().unwrap() {
        assert_eq!(c["sample_request_ids"].as_array().unwrap().len(), 5, "{c}");
    }
    let spot = &access["hygiene"]["forbidden"][0];
    let ((bucket, dataset, requester), refused) = h.forbidden.iter().max_by_key(|(_, n)| **n).unwrap();
    assert_eq!(
        (
            spot["bucket"].as_str().unwrap(),
            spot["dataset"].as_str().unwrap(),
            spot["requester"].as_str().unwrap()
        ),
        (bucket.as_str(), dataset.as_str(), requester.as_str())
    );
    assert_eq!(spot["requests"].as_u64().unwrap(), *refused);
    // Completeness: the lost hour is an empty hour of its bucket, the records delivered twice are
    // found, and delivery takes minutes to hours.
    for c in access["completeness"].as_array().unwrap() {
        let bucket = c["bucket"].as_str().unwrap();
        assert_eq!(
            c["duplicate_request_ids"].as_u64().unwrap(),
            lake.duplicates[bucket],
            "{c}"
        );
        let max = c["delivery"]["max_minutes"].as_f64().unwrap();
        assert!(
            c["delivery"]["median_minutes"].as_f64().unwrap() > 0.0 && max <= 24.0 * 60.0,
            "{c}"
        );
        assert!(c["ingestion"]["median_minutes"].as_f64().is_some(), "{c}");
        if bucket == lake.lost_hour.0 {
            let lost = lake
                .lost_hour
                .1
                .and_utc()
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            assert_eq!(c["hours_without_records"], 1, "{c}");
            assert_eq!(c["first_empty_hours"], serde_json::json!([lost]), "{c}");
        }
    }

    // The charts say what the JSON says: each bar of the top datasets carries its reads.
    let top = std::fs::read_to_string(dir.join("reports/access/top-datasets.svg")).unwrap();
    for d in access["datasets"].as_array().unwrap().iter().take(10) {
        let reads = lakelog_reports::figures::count(d["reads"].as_u64().unwrap());
        assert!(top.contains(&format!(">\n {reads}\n</text>")), "{reads}: {top}");
    }
    for page in ["reports/access/index.html", "reports/game/index.html"] {
        assert!(stdout.contains(dir.join(page).to_str().unwrap()), "{stdout}");
        let html = std::fs::read_to_string(dir.join(page)).unwrap();
        assert!(html.contains("<svg"), "{page} has no chart");
    }

    // A second run replaces the first demo; a folder that is not a demo's is refused.
    assert!(run().status.success());
    let other = tmp.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("keep.txt"), "mine").unwrap();
    let refused = Command::new(env!("CARGO_BIN_EXE_lakelog"))
        .args(["demo", "--dir", other.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("not empty"));
    assert!(other.join("keep.txt").exists());
}
