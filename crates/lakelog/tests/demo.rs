//! `lakelog demo` end to end: the reports it writes hold the figures its generated workload is
//! known to have (game KPIs from the planned season's truth; access-log reads and writes from the
//! generated lake's truth), and compaction removes the one resent request's rows.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use fixtures::game::demo::{DEMO_GAMES, demo_game_of, game_season, requests, resent_event};
use fixtures::workload;
use fixtures::workload::lake::StorageTruth;
use serde_json::Value;

use crate::season;

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
    let season = game_season(SEED, DEVICES, EVENTS, now, GAME_DAYS as u32 * 24);
    let traffic: Vec<_> = requests(&season).collect();
    assert_eq!(traffic.iter().map(|r| r.events.len() as u64).sum::<u64>(), EVENTS);
    let mut hourly: BTreeMap<String, (i64, f64)> = BTreeMap::new();
    for request in &traffic {
        let hour = request.at.duration_trunc(TimeDelta::hours(1)).unwrap();
        let entry = hourly
            .entry(hour.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
            .or_default();
        for event in &request.events {
            entry.0 += 1;
            if event.event_name == "purchaseEvent" {
                entry.1 += event.event_params.as_ref().unwrap().amount.unwrap();
            }
        }
    }

    let game = read_json(&dir.join("reports/game/report.json"));
    // Each of the demo's two games sent with its own key: the report of one game (--game) counts
    // exactly its players' events, and the revenue by game of the whole report agrees.
    for (index, (name, _)) in DEMO_GAMES.iter().enumerate() {
        let sent = traffic
            .iter()
            .flat_map(|r| &r.events)
            .filter(|e| demo_game_of(e) == index)
            .count() as i64;
        let out = Command::new(env!("CARGO_BIN_EXE_lakelog"))
            .args(["report", "game", "--format", "json", "--game", name, "--table"])
            .arg(dir.join("lake/game_events"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let one: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let counted: i64 = one["events_per_hour"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["count"].as_i64().unwrap())
            .sum::<i64>()
            + one["late_events"].as_i64().unwrap();
        assert!(
            sent > 0 && counted == sent,
            "{name}: {counted} events counted, {sent} sent"
        );
        let revenue: f64 = one["revenue"]["days"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["revenue"].as_f64().unwrap())
            .sum();
        let by_game = game["revenue"]["by_game"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["name"] == *name)
            .unwrap_or_else(|| panic!("{name} not in {}", game["revenue"]["by_game"]));
        assert!((by_game["revenue"].as_f64().unwrap() - revenue).abs() < 1e-6, "{name}");
    }
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
    assert_eq!(game["late_events"], 0);

    // DAU, retention, revenue and sessions are the planned season's, exactly; DuckDB over the
    // demo's table (each eventId once) finds the same cohorts, all and by platform, and the same
    // sessions.
    let truth = season.truth();
    season::assert_report_is_the_season(&game, &truth);
    let compared = season::assert_duckdb_cohorts_are_the_report(&game, &dir.join("lake/game_events"));
    assert!(compared[1] > 0, "no cohort's day 7 is in the range: {compared:?}");
    season::assert_duckdb_sessions_are_the_report(&game, &dir.join("lake/game_events"));
    season::assert_duckdb_lifecycle_is_the_report(&game, &dir.join("lake/game_events"));
    // The onboarding funnel of the demo's funnels file: the plan's tutorial, and the saved query's
    // answer in DuckDB.
    let funnel = &game["funnels"][0];
    assert_eq!(funnel["name"], "onboarding");
    assert!(season::assert_funnel_is_the_season(funnel, &truth) > 0);
    let saved =
        lakelog_tests::athena_query("GameFunnelQuery", lakelog_tests::TEMPLATE_GAME_EVENTS, "game_events").unwrap();
    season::assert_duckdb_funnel_is_the_report(funnel, &saved, &dir.join("lake/game_events"));
    season::assert_acquisition_is_the_season(&game, &truth);
    season::assert_duckdb_acquisition_is_the_report(&game, &dir.join("lake/game_events"));
    season::assert_experiment_is_the_season(&game, &season);
    season::assert_duckdb_experiment_is_the_report(&game, &dir.join("lake/game_events"));
    let saved =
        lakelog_tests::athena_query("GamePathsQuery", lakelog_tests::TEMPLATE_GAME_EVENTS, "game_events").unwrap();
    assert!(season::assert_duckdb_paths_are_the_report(&game["paths"], &saved, &dir.join("lake/game_events")) > 0);
    // The player base grows: later days bring new players, and some come back.
    let all: Vec<_> = truth.cohorts.iter().filter(|c| c.platform.is_none()).collect();
    assert!(all.len() >= 4 && all.iter().all(|c| c.devices > 0));
    assert!(all.iter().map(|c| c.returned[0]).sum::<u64>() > 0);

    // The resent request's partition is closed by NOW: compaction dropped its second copy.
    let mut before = 0;
    let resent_events = traffic
        .iter()
        .map(|r| r.events.len() as u64)
        .find(|n| {
            before += n;
            before > resent_event(&season)
        })
        .unwrap();
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
    let advice_of = |dataset: &str| {
        access["advice"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["dataset"] == dataset)
            .unwrap()
            .clone()
    };
    // The Delta table's files are never advised into a class that needs a restore.
    let orders = advice_of("warehouse/orders/");
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

    // S3 Inventory: every dataset's objects, bytes and classes as the lake stored them, exactly;
    // the three datasets no request touched are the dark data, and their storage cost is the
    // price table's to the cent; every piece of advice says it used the inventory's figures.
    let storage = &access["storage"];
    let n = |v: &Value| v.as_u64().unwrap();
    let stored: BTreeMap<(String, String), StorageTruth> = storage["datasets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let by_class = d["by_class"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(c, v)| (c.clone(), (n(&v["objects"]), n(&v["bytes"]))))
                .collect();
            let key = (
                d["bucket"].as_str().unwrap().to_owned(),
                d["dataset"].as_str().unwrap().to_owned(),
            );
            let truth = StorageTruth {
                objects: n(&d["objects"]),
                bytes: n(&d["bytes"]),
                by_class,
            };
            (key, truth)
        })
        .collect();
    let want = lake.storage.clone();
    assert_eq!(stored, want);
    let dark: Vec<(String, String)> = storage["datasets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["requests"] == 0)
        .map(|d| {
            (
                d["bucket"].as_str().unwrap().to_owned(),
                d["dataset"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected_dark = [
        ("lake-analytics", "backups/legacy-db/"),
        ("lake-analytics", "archive/clickstream-2021/"),
        ("lake-web", "web/old-site/"),
    ]
    .map(|(b, d)| (b.to_owned(), d.to_owned()));
    assert_eq!(dark, expected_dark, "dark datasets, most bytes first");
    let prices = lakelog_reports::access::PriceTable::default_table().unwrap();
    let (mut dark_bytes, mut dark_cost) = (0, 0.0);
    for key in &expected_dark {
        let t = &lake.storage[key];
        dark_bytes += t.bytes;
        for (class, (_, bytes)) in &t.by_class {
            dark_cost += *bytes as f64 / (1u64 << 30) as f64 * prices.classes[class].storage_gb_month;
        }
    }
    assert_eq!(storage["dark"]["bytes"], dark_bytes);
    assert_eq!(headline["dark_bytes"], dark_bytes);
    assert_eq!(
        headline["stored_bytes"],
        lake.storage.values().map(|t| t.bytes).sum::<u64>()
    );
    let cost = storage["dark"]["monthly_storage_cost"].as_f64().unwrap();
    assert!((cost - dark_cost).abs() < 0.005, "{cost} vs {dark_cost}");
    assert_eq!(storage["dark"]["unpriced_classes"], serde_json::json!([]));
    for a in access["advice"].as_array().unwrap() {
        assert!(
            a["stored_from"].as_str().unwrap().starts_with("S3 Inventory of "),
            "{a}"
        );
    }
    let advised: BTreeSet<&str> = access["advice"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["dataset"].as_str().unwrap())
        .collect();
    assert!(advised.contains("backups/legacy-db/"), "dark data gets advice too");

    // Expiration: the sensor batches are read once, the next night, by spark-etl: older than a
    // day plus the 7-day margin nobody reads them. The never-requested dumps could all go; the
    // Delta table's files never.
    let sensors = advice_of("raw/sensors/");
    let e = &sensors["expiration"];
    assert_eq!(
        (e["days"].as_i64(), e["oldest_read_days"].as_i64()),
        (Some(8), Some(1)),
        "{e}"
    );
    assert_eq!(
        e["readers"][0]["requester"],
        "arn:aws:sts::123456789012:assumed-role/spark-etl/session"
    );
    // Intelligent-Tiering instead: estimated, monitoring fee included, and below the rules for
    // data read once the next night (it would wait 30 days to move what the rules move at 7).
    let it = &sensors["intelligent_tiering"];
    let fee = it["monthly_monitoring_fee"].as_f64().unwrap();
    assert!(fee > 0.0, "{it}");
    assert!(it["monthly_saving"].as_f64().unwrap() < sensors["monthly_saving"].as_f64().unwrap());
    // The feature store's old partitions are read every night: Intelligent-Tiering beats the
    // rules there, with Deep Archive Access for what the backtest never reaches (older than 300
    // days), and its configuration is written beside the lifecycle rules.
    let features = advice_of("features/store/");
    assert_eq!(
        features["transitions"][0]["storage_class"], "INTELLIGENT_TIERING",
        "{features}"
    );
    assert_eq!(features["transitions"][0]["days"], 0);
    let it = &features["intelligent_tiering"];
    assert_eq!(it["archive_tier"]["access_tier"], "DEEP_ARCHIVE_ACCESS", "{it}");
    assert_eq!(it["archive_tier"]["days"], 365);
    assert_eq!(it["monthly_saving"], features["monthly_saving"]);
    let file = dir.join("reports/access/intelligent-tiering-lake-analytics-lakelog-features-store.json");
    assert_eq!(read_json(&file), it["configuration"]);
    let dumps = advice_of("backups/legacy-db/");
    assert_eq!(dumps["expiration"]["days"], LOG_DAYS);
    assert_eq!(dumps["expiration"]["objects"], 42);
    assert_eq!(dumps["expiration"]["oldest_read_days"], Value::Null);
    // The archived clickstream (Deep Archive, Flexible Retrieval) could all go too: what that
    // saves is its storage at its classes' prices, which the inventory names.
    let archive = &advice_of("archive/clickstream-2021/")["expiration"];
    let archived = &lake.storage[&("lake-analytics".to_owned(), "archive/clickstream-2021/".to_owned())];
    let archived_cost: f64 = archived
        .by_class
        .iter()
        .map(|(class, (_, bytes))| *bytes as f64 / (1u64 << 30) as f64 * prices.classes[class].storage_gb_month)
        .sum();
    assert_eq!(archive["objects"], 120);
    let saved = archive["monthly_saving"].as_f64().unwrap();
    assert!(
        archived_cost > 0.0 && (saved - archived_cost).abs() < 0.005,
        "{saved} vs {archived_cost}"
    );
    assert_eq!(advice_of("warehouse/orders/")["expiration"], Value::Null);

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
    // The stored-bytes chart sits in its section, with the dark datasets marked.
    let page = std::fs::read_to_string(dir.join("reports/access/index.html")).unwrap();
    let (section, chart) = (
        page.find("<h2>Stored per dataset</h2>").unwrap(),
        page.find("Bytes stored per dataset (S3 Inventory)").unwrap(),
    );
    assert!(section < chart && chart < page.find("<h2>Dark data").unwrap());
    // Each chart is drawn once, in one figure.
    for title in [
        "Most read datasets",
        "Requests a bucket owner should look at",
        "Bytes stored per dataset (S3 Inventory)",
        "Delay from request to log object",
    ] {
        let figure = format!("<figure aria-label=\"{title}\">");
        assert_eq!(page.matches(&figure).count(), 1, "{title} is drawn once");
    }
    let hygiene_chart = std::fs::read_to_string(dir.join("reports/access/hygiene.svg")).unwrap();
    for label in ["Signature Version 2", "TLS below 1.2", "cross-region", "refused (403)"] {
        assert!(hygiene_chart.contains(label), "{label} in {hygiene_chart}");
    }
    let delays = std::fs::read_to_string(dir.join("reports/access/delivery-delay.svg")).unwrap();
    assert!(
        delays.contains("lake-web median") && delays.contains("lake-analytics max"),
        "{delays}"
    );
    let stored_chart = std::fs::read_to_string(dir.join("reports/access/stored-datasets.svg")).unwrap();
    assert!(stored_chart.contains("backups/legacy-db/ (dark)"), "{stored_chart}");
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

    // Every table of the demo reads the same through its Iceberg view, with DuckDB and PyIceberg.
    let tables = delta_tables(&dir.join("lake"));
    assert!(
        tables.len() >= 4,
        "game_events, its rejects and the access-log tables: {tables:?}"
    );
    lakelog_tests::assert_views_mirror(None, &tables, None);

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

/// The Delta tables under `root`: every folder with a `_delta_log`.
fn delta_tables(root: &std::path::Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        if dir.join("_delta_log").is_dir() {
            found.push(dir.to_str().unwrap().to_owned());
            continue;
        }
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            if entry.path().is_dir() {
                pending.push(entry.path());
            }
        }
    }
    found.sort();
    found
}
