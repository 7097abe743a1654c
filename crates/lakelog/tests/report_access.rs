//! `lakelog report access` on a workload whose figures are known by construction: the generated
//! data lake of `fixtures::workload` (see its documentation for every request),
//! ingested with `lakelog ingest`, reported with `lakelog report access`.

use crate::common::lakelog;
use std::path::Path;

use fixtures::workload::inventory::{self, InventoryFormat, InventoryObject};
use fixtures::workload::{
    self, CLICKS_PART_BYTES, EXPORT_BYTES, LAKE_BUCKET, LOGO_BYTES, MODEL_BYTES, OLD_MODEL_BYTES, RAW_BYTES,
    SNAPSHOT_BYTES, WEB_BUCKET, requester,
};
use serde_json::{Value, json};

const GB: f64 = (1u64 << 30) as f64;

/// The workload's 60 days from 2024-03-01, ingested into `dir/lake`; the two tables' URIs.
fn lake(dir: &Path) -> Vec<String> {
    let start = chrono::NaiveDate::from_ymd_opt(2024, 3, 1).unwrap();
    let generated = workload::generate(start, 60);
    let raw = dir.join("raw");
    generated.write_to(&raw).unwrap();
    let template = format!("{}/lake/access_logs/{{bucket}}", dir.display());
    let (ok, out, err) = lakelog(&["ingest", "-q", "--table", &template, raw.to_str().unwrap()]);
    assert!(ok, "{out}{err}");
    assert!(out.contains(&format!("{} rejects", generated.malformed)), "{out}");
    [LAKE_BUCKET, WEB_BUCKET]
        .iter()
        .map(|b| format!("{}/lake/access_logs/{b}", dir.display()))
        .collect()
}

fn report(tables: &[String], extra: &[&str]) -> Value {
    let mut args = vec!["report", "access", "--table"];
    args.extend(tables.iter().map(String::as_str));
    args.extend(extra);
    args.extend(["--format", "json"]);
    let (ok, out, err) = lakelog(&args);
    assert!(ok, "{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn dataset(report: &Value, bucket: &str, name: &str) -> Value {
    report["datasets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["bucket"] == bucket && d["dataset"] == name)
        .unwrap_or_else(|| panic!("{bucket} {name} in {report:#}"))
        .clone()
}

fn advice(report: &Value, name: &str) -> Value {
    report["advice"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["dataset"] == name)
        .unwrap_or_else(|| panic!("{name} in {report:#}"))
        .clone()
}

fn ages(a: [u64; 6]) -> Value {
    json!({"0-0": a[0], "1-6": a[1], "7-29": a[2], "30-89": a[3], "90-364": a[4], "365+": a[5]})
}

fn close(actual: &Value, expected: f64) {
    let actual = actual.as_f64().unwrap_or_else(|| panic!("{actual} is not a number"));
    assert!((actual - expected).abs() < 1e-9, "{actual} != {expected}");
}

#[test]
fn the_report_prints_the_known_figures() {
    let dir = tempfile::tempdir().unwrap();
    let tables = lake(dir.path());
    let out = dir.path().join("report");
    let r = report(
        &tables,
        &[
            "--from",
            "2024-03-01",
            "--to",
            "2024-04-29",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let mut keys: Vec<&String> = r.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "advice",
            "completeness",
            "datasets",
            "headline",
            "hygiene",
            "storage",
            "unused"
        ]
    );
    // The headline sums the sections.
    let h = &r["headline"];
    let sum = |section: &str, field: &str| -> f64 {
        r[section]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x[field].as_f64().unwrap())
            .sum()
    };
    assert_eq!(
        (h["first_day"].clone(), h["last_day"].clone(), h["days"].clone()),
        (json!("2024-03-01"), json!("2024-04-29"), json!(60))
    );
    assert_eq!(h["datasets"], r["datasets"].as_array().unwrap().len());
    assert_eq!(h["reads"].as_f64().unwrap(), sum("datasets", "reads"));
    assert_eq!(h["unused_datasets"], r["unused"].as_array().unwrap().len());
    assert!((h["monthly_saving"].as_f64().unwrap() - sum("advice", "monthly_saving")).abs() < 1e-9);
    assert!(h["unused_bytes"].as_u64().unwrap() > 0 && h["current_day_read_share"].as_f64().unwrap() > 0.0);

    // Most used datasets, and the age of the data read.
    let (mib2, mib5) = (CLICKS_PART_BYTES as u64, SNAPSHOT_BYTES as u64);
    let expected = [
        // 5 anonymous reads and 1 by the CDN a day, of a logo older than the logs.
        json!({"bucket": WEB_BUCKET, "dataset": "web/assets/", "reads": 360, "read_bytes": 360 * LOGO_BYTES,
               "writes": 0, "requesters": 2, "age_days": ages([0; 6])}),
        // 3 GETs and a HEAD of today's partition, 57 reads 3 days back, 2 reads 40 days back; the
        // 404s and the refused PUT are not counted.
        json!({"bucket": LAKE_BUCKET, "dataset": "events/clicks/", "reads": 299, "read_bytes": 239 * mib2,
               "writes": 120, "requesters": 3, "age_days": ages([240, 57, 0, 2, 0, 0])}),
        json!({"bucket": LAKE_BUCKET, "dataset": "snapshots/customers/", "reads": 121, "read_bytes": 121 * mib5,
               "writes": 60, "requesters": 2, "age_days": ages([120, 0, 0, 1, 0, 0])}),
        json!({"bucket": LAKE_BUCKET, "dataset": "raw/café données/", "reads": 120, "read_bytes": 120 * RAW_BYTES,
               "writes": 0, "requesters": 1, "age_days": ages([0; 6])}),
        // The model read daily at ages 0 to 59 (from its upload on day 0), the old model once at
        // 10 days (from its PUT before the range); the upload's parts are not writes.
        json!({"bucket": LAKE_BUCKET, "dataset": "models/recommender/", "reads": 61,
               "read_bytes": 60 * MODEL_BYTES + OLD_MODEL_BYTES, "writes": 1, "requesters": 1,
               "age_days": ages([1, 6, 24, 30, 0, 0])}),
        json!({"bucket": LAKE_BUCKET, "dataset": "exports/legacy/", "reads": 0, "read_bytes": 0,
               "writes": 62, "requesters": 0, "age_days": ages([0; 6])}),
    ];
    assert_eq!(r["datasets"], Value::Array(expected.to_vec()), "{:#}", r["datasets"]);

    // Unused: the exports, and who writes them.
    assert_eq!(
        r["unused"],
        json!([{
            "bucket": LAKE_BUCKET, "dataset": "exports/legacy/", "writes": 62,
            "last_write": "2024-04-29T03:00:00Z", "last_read": null, "days_without_reads": 60,
            "writers": [
                {"requester": requester("legacy-export"), "writes": 60, "last_write": "2024-04-29T03:00:00Z"},
                {"requester": requester("backfill-job"), "writes": 2, "last_write": "2024-03-11T03:31:00Z"},
            ],
        }])
    );

    // Advice. Reads of 60 days scale to a month by 30/60.
    let p = |class: &str| match class {
        "STANDARD" => (0.023, 0.0004, 0.0, 0.0),
        "GLACIER_IR" => (0.004, 0.01, 0.03, 0.02),
        "GLACIER" => (0.0036, 0.0004, 0.01, 0.03),
        "DEEP_ARCHIVE" => (0.00099, 0.0004, 0.02, 0.05),
        other => panic!("{other}"),
    };
    let (std_price, std_get, _, _) = p("STANDARD");

    // Exports: never read, so archived from day 1; of the 62 objects, 5 expired and 5 were already
    // moved to Standard-IA; 51 of the other 52 are a day old or more. For objects of 10 MiB Deep
    // Archive saves more than Glacier Instant Retrieval (whose transitions cost less) and Glacier
    // Flexible Retrieval.
    let exports = advice(&r, "exports/legacy/");
    let (ir, ir_get, ir_retrieval, ir_transition) = p("GLACIER_IR");
    let (glacier, _, _, glacier_transition) = p("GLACIER");
    let (deep, _, _, deep_transition) = p("DEEP_ARCHIVE");
    assert_eq!(exports["stored_objects"], 57);
    assert_eq!(exports["stored_bytes"], 57 * EXPORT_BYTES);
    assert_eq!(exports["already_moved_bytes"], 5 * EXPORT_BYTES);
    assert_eq!(exports["rare_after_days"], Value::Null);
    let t = &exports["transitions"];
    assert_eq!(t.as_array().unwrap().len(), 1, "{exports:#}");
    assert_eq!(
        (t[0]["storage_class"].as_str(), t[0]["days"].as_u64()),
        (Some("DEEP_ARCHIVE"), Some(1))
    );
    assert_eq!(
        (t[0]["objects"].as_u64(), t[0]["bytes"].as_u64()),
        (Some(51), Some(51 * EXPORT_BYTES as u64))
    );
    let storage =
        51.0 * EXPORT_BYTES as f64 / GB * (std_price - deep) - 51.0 * (32768.0 / GB * deep + 8192.0 / GB * std_price);
    close(&t[0]["monthly_storage_saving"], storage);
    let transitions = 62.0 * 0.5 * deep_transition / 1000.0;
    close(&exports["monthly_transition_cost"], transitions);
    close(&exports["monthly_saving"], storage - transitions);
    close(&exports["one_time_transition_cost"], 51.0 * deep_transition / 1000.0);
    let archived = 51.0 * EXPORT_BYTES as f64 / GB * (std_price - glacier)
        - 51.0 * (32768.0 / GB * glacier + 8192.0 / GB * std_price)
        - 62.0 * 0.5 * glacier_transition / 1000.0;
    let instant = 51.0 * EXPORT_BYTES as f64 / GB * (std_price - ir) - 62.0 * 0.5 * ir_transition / 1000.0;
    assert!(archived < storage - transitions && instant < storage - transitions);
    assert_eq!(
        exports["lifecycle"],
        json!({"Rules": [{"ID": "lakelog-lake-analytics-exports-legacy", "Filter": {"Prefix": "exports/legacy/"},
                          "Status": "Enabled", "Transitions": [{"Days": 1, "StorageClass": "DEEP_ARCHIVE"}]}]})
    );

    // Clicks: read at 0, 3 and 40 days, so never archived; Glacier Instant Retrieval from 7 days
    // holds the 53 days x 2 parts aged 7 to 59 days, and pays retrieval for the 2 reads at 40.
    let clicks = advice(&r, "events/clicks/");
    assert_eq!(clicks["rare_after_days"], 4);
    assert_eq!(clicks["stored_objects"], 120);
    let t = &clicks["transitions"];
    assert_eq!(t.as_array().unwrap().len(), 1, "{clicks:#}");
    assert_eq!(
        (t[0]["storage_class"].as_str(), t[0]["days"].as_u64()),
        (Some("GLACIER_IR"), Some(7))
    );
    assert_eq!(t[0]["objects"], 106);
    let storage = 106.0 * mib2 as f64 / GB * (std_price - ir);
    let retrieval = 2.0 * mib2 as f64 / GB * ir_retrieval * 0.5;
    let requests = 2.0 / 1000.0 * (ir_get - std_get) * 0.5;
    close(&t[0]["monthly_storage_saving"], storage);
    close(&t[0]["monthly_retrieval_cost"], retrieval);
    close(&t[0]["monthly_request_cost"], requests);
    close(
        &clicks["monthly_saving"],
        storage - retrieval - requests - 120.0 * 0.5 * ir_transition / 1000.0,
    );

    // Snapshots: read on their day, and one 59 days old: Glacier Instant Retrieval from day 1.
    let snapshots = advice(&r, "snapshots/customers/");
    assert_eq!(snapshots["rare_after_days"], 1);
    assert_eq!(snapshots["transitions"][0]["storage_class"], "GLACIER_IR");
    assert_eq!(snapshots["transitions"][0]["days"], 1);
    assert_eq!(snapshots["transitions"][0]["objects"], 59);

    // The model is read every day at every age up to 59: only the old model (69 days old, last
    // read at 10) can be archived (in Deep Archive, the cheapest), from 60 days.
    let models = advice(&r, "models/recommender/");
    assert_eq!(models["rare_after_days"], 57);
    assert_eq!(models["stored_bytes"], MODEL_BYTES + OLD_MODEL_BYTES);
    assert_eq!(models["transitions"][0]["storage_class"], "DEEP_ARCHIVE");
    assert_eq!(models["transitions"][0]["days"], 60);
    assert_eq!(models["transitions"][0]["bytes"], OLD_MODEL_BYTES);

    // Objects older than the logs: their age is unknown, nothing is proposed.
    for name in ["raw/café données/", "web/assets/"] {
        let a = advice(&r, name);
        assert_eq!(a["transitions"], json!([]), "{a:#}");
        assert_eq!(a["lifecycle"], Value::Null);
        assert!(
            a["reason"].as_str().unwrap().contains("age of its objects is unknown"),
            "{a:#}"
        );
        assert_eq!(a["reads_of_unknown_age"], a["reads"]);
    }

    // The page, its charts, and a lifecycle configuration per bucket.
    let page = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(page.contains("<td>raw/café données/</td>"), "dataset names are shown");
    for chart in ["top-datasets.svg", "reads-per-day.svg", "ages.svg", "ages-1.svg"] {
        let svg = std::fs::read_to_string(out.join(chart)).unwrap();
        assert!(
            svg.starts_with("<svg") && page.contains(&svg),
            "{chart} is written and inlined"
        );
    }
    let json_file: Value = serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(json_file, r);
    let lifecycle: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("lifecycle-lake-analytics.json")).unwrap()).unwrap();
    let prefixes: Vec<&str> = lifecycle["Rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["Filter"]["Prefix"].as_str().unwrap())
        .collect();
    assert_eq!(
        prefixes,
        [
            "events/clicks/",
            "snapshots/customers/",
            "models/recommender/",
            "exports/legacy/"
        ]
    );
    assert!(!out.join("lifecycle-lake-web.json").exists());
}

#[test]
fn ranges_rules_prices_text_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let tables = lake(dir.path());

    // Without a range: every request, including the reads the day before and after.
    let all = report(&tables, &[]);
    assert_eq!(dataset(&all, LAKE_BUCKET, "events/clicks/")["reads"], 299 + 2);
    // A range of the last 20 days, shorter than --unused-days: the never-read exports are listed
    // as not read in its 20 days, as with --unused-days 20.
    let recent = report(&tables, &["--from", "2024-04-10", "--to", "2024-04-29"]);
    assert_eq!(recent["unused"][0]["dataset"], "exports/legacy/");
    assert_eq!(recent["unused"][0]["days_without_reads"], 20);
    assert_eq!(recent["headline"]["unused_days"], 20);
    assert_eq!(dataset(&recent, LAKE_BUCKET, "events/clicks/")["writes"], 40);
    assert_eq!(
        report(
            &tables,
            &["--from", "2024-04-10", "--to", "2024-04-29", "--unused-days", "20"]
        )["unused"],
        recent["unused"]
    );

    // Other dataset rules.
    let shallow = report(&tables, &["--dataset-depth", "1"]);
    for (bucket, name) in [
        (LAKE_BUCKET, "events/clicks/"),
        (LAKE_BUCKET, "snapshots/customers/"),
        (LAKE_BUCKET, "models/"),
        (LAKE_BUCKET, "exports/"),
        (LAKE_BUCKET, "raw/"),
        (WEB_BUCKET, "web/"),
    ] {
        dataset(&shallow, bucket, name);
    }
    let regex = report(&tables, &["--dataset-regex", "^(events/|snapshots/)"]);
    assert_eq!(dataset(&regex, LAKE_BUCKET, "events/")["reads"], 301);
    dataset(&regex, LAKE_BUCKET, "snapshots/");
    dataset(&regex, LAKE_BUCKET, "models/recommender/");

    // The text report.
    let mut args = vec![
        "report",
        "access",
        "--from",
        "2024-03-01",
        "--to",
        "2024-04-29",
        "--table",
    ];
    args.extend(tables.iter().map(String::as_str));
    let (ok, text, err) = lakelog(&args);
    assert!(ok, "{err}");
    assert!(text.contains("From 2024-03-01 to 2024-04-29 (60 days)"), "{text}");
    let clicks_line = text
        .lines()
        .find(|l| l.starts_with("lake-analytics  events/clicks/"))
        .unwrap();
    assert!(
        clicks_line.contains("299") && clicks_line.contains("478.0 MiB"),
        "{clicks_line}"
    );
    assert!(text.contains("GLACIER_IR at 7 d"), "{text}");
    assert!(text.contains("\"Prefix\": \"exports/legacy/\""), "{text}");

    // Mistakes are named.
    for (extra, expected) in [
        (vec!["--from", "yesterday"], "--from \"yesterday\""),
        (vec!["--dataset-regex", "("], "--dataset-regex \"(\""),
        (vec!["--rare-share", "2"], "--rare-share"),
        (vec!["--prices", "/nonexistent/prices.json"], "/nonexistent/prices.json"),
        (
            vec!["--inventory", "/nonexistent/manifest.json"],
            "S3 Inventory /nonexistent/manifest.json: no such file",
        ),
    ] {
        let mut args = vec!["report", "access", "--table", &tables[0]];
        args.extend(extra);
        let (ok, _, err) = lakelog(&args);
        assert!(!ok && err.contains(expected), "{err}");
    }
    let rejects = format!("{}/lake/access_logs/_rejects", dir.path().display());
    let (ok, _, err) = lakelog(&["report", "access", "--table", &rejects]);
    assert!(!ok && err.contains("no column bucket"), "{err}");
    let (ok, _, err) = lakelog(&["report", "access", "--table", &tables[0], &rejects]);
    assert!(!ok && err.contains("cannot be read together"), "{err}");

    // An S3 Inventory of the web bucket (Parquet): its objects replace what the logs saw of that
    // bucket, the page nobody requested is dark data, and the advice says where its figures come
    // from; the lake bucket, without one, keeps the logs' figures.
    let taken = chrono::NaiveDate::from_ymd_opt(2024, 4, 30)
        .unwrap()
        .and_hms_opt(0, 0, 0)
        .unwrap();
    let object = |key: &str, size: i64, class: &'static str| InventoryObject {
        bucket: WEB_BUCKET,
        key: key.to_owned(),
        size: Some(size),
        last_modified: taken - chrono::TimeDelta::days(400),
        storage_class: class,
        is_latest: true,
        is_delete_marker: false,
    };
    let listed = [
        object("web/assets/logo.png", LOGO_BYTES, "STANDARD"),
        object("web/assets/hero.jpg", 3 << 20, "STANDARD_IA"),
        object("web/legacy/index.html", 2 << 20, "STANDARD"),
    ];
    let refs: Vec<&InventoryObject> = listed.iter().collect();
    let manifest = inventory::write(
        &dir.path().join("inventory"),
        WEB_BUCKET,
        &refs,
        InventoryFormat::Parquet,
        taken,
        1,
    )
    .unwrap();
    let with = report(&tables, &["--inventory", manifest.to_str().unwrap()]);
    let storage = &with["storage"];
    assert_eq!(storage["inventories"][0]["objects"], 3);
    assert_eq!(storage["inventories"][0]["bytes"], LOGO_BYTES + (5 << 20));
    let assets = storage["datasets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["dataset"] == "web/assets/")
        .unwrap();
    assert_eq!(
        assets["by_class"]["STANDARD_IA"],
        json!({"objects": 1, "bytes": 3 << 20})
    );
    assert_eq!(storage["dark"]["datasets"], 1);
    assert_eq!(storage["dark"]["bytes"], 2 << 20);
    assert_eq!(with["headline"]["dark_bytes"], 2 << 20);
    assert!(
        advice(&with, "web/legacy/")["stored_from"]
            .as_str()
            .unwrap()
            .starts_with("S3 Inventory of lake-web")
    );
    assert_eq!(advice(&with, "web/assets/")["stored_bytes"], LOGO_BYTES + (3 << 20));
    assert_eq!(
        advice(&with, "events/clicks/")["stored_from"],
        advice(&all, "events/clicks/")["stored_from"]
    );
    assert_eq!(
        advice(&with, "events/clicks/")["stored_bytes"],
        advice(&all, "events/clicks/")["stored_bytes"]
    );
    let (ok, _, err) = lakelog(&[
        "report",
        "access",
        "--table",
        &tables[1],
        "--inventory",
        manifest.to_str().unwrap(),
        "--inventory",
        manifest.to_str().unwrap(),
    ]);
    assert!(!ok && err.contains("a second inventory of bucket lake-web"), "{err}");

    // Object by object: the logo is read every day. Of the two objects nobody read, written before
    // the logs begin, the one whose dataset's advice expires old data saves most by expiring (its
    // Standard storage for 12 months, $0.00054, against $0.00047 in Deep Archive after the
    // transition); the other, never read, goes to Deep Archive. One manifest each.
    let manifests = dir.path().join("manifests");
    let objects = report(
        &tables,
        &[
            "--inventory",
            manifest.to_str().unwrap(),
            "--unread-days",
            "90",
            "--manifests",
            manifests.to_str().unwrap(),
            "--out",
            dir.path().join("page").to_str().unwrap(),
        ],
    )["objects"]
        .clone();
    let window = objects["window"]["days"].as_u64().unwrap();
    assert!(window < 90, "{objects:#}");
    assert_eq!(
        objects["unread_days_applied"], window,
        "the logs are shorter: {objects:#}"
    );
    let web = &objects["buckets"][0];
    assert_eq!(web["bucket"], WEB_BUCKET);
    assert_eq!(web["objects"], 3);
    assert_eq!(web["unread_before_window"], json!([2, 5 << 20]));
    assert_eq!(web["unread_inside_window"], json!([0, 0]));
    let acted: Vec<(String, String)> = web["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["key"].as_str().unwrap().to_owned(), a["to_class"].to_string()))
        .collect();
    assert_eq!(
        acted,
        [
            ("web/legacy/index.html".to_owned(), "null".to_owned()),
            ("web/assets/hero.jpg".to_owned(), "\"DEEP_ARCHIVE\"".to_owned())
        ]
    );
    assert_eq!(
        std::fs::read_to_string(manifests.join("lake-web.transition.DEEP_ARCHIVE.csv")).unwrap(),
        "lake-web,web/assets/hero.jpg,\n"
    );
    assert_eq!(
        std::fs::read_to_string(manifests.join("lake-web.expire.csv")).unwrap(),
        "lake-web,web/legacy/index.html,\n"
    );
    // The page's folder has them too, and the page names them.
    let page = dir.path().join("page");
    assert!(page.join("manifests/lake-web.expire.csv").is_file());
    let html = std::fs::read_to_string(page.join("index.html")).unwrap();
    assert!(html.contains("S3 Batch Operations manifests") && html.contains("web/legacy/index.html"));
    let (ok, _, err) = lakelog(&["report", "access", "--table", &tables[1], "--unread-days", "90"]);
    assert!(
        !ok && err.contains("--unread-days") && err.contains("needs --inventory"),
        "{err}"
    );

    // Another price table: with free Standard storage nothing is worth moving.
    let mut prices: Value = serde_json::from_str(lakelog_reports::access::DEFAULT_PRICES).unwrap();
    prices["classes"]["STANDARD"]["storage_gb_month"] = json!(0.0);
    let file = dir.path().join("prices.json");
    std::fs::write(&file, prices.to_string()).unwrap();
    let r = report(&tables, &["--prices", file.to_str().unwrap()]);
    for a in r["advice"].as_array().unwrap() {
        assert_eq!(a["transitions"], json!([]), "{a:#}");
    }
    // A range shorter than --unused-days: the datasets written and never read in it are listed,
    // with the threshold it applied.
    let short = report(&tables, &["--from", "2024-04-26", "--to", "2024-04-29"]);
    assert_eq!(short["headline"]["unused_days"], 4);
    let unused: Vec<&str> = short["unused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["dataset"].as_str().unwrap())
        .collect();
    assert_eq!(unused, ["exports/legacy/"], "{short:#}");
    // A range without requests.
    let empty = report(&tables, &["--from", "2030-01-01"]);
    assert_eq!(empty["datasets"], json!([]));
    assert_eq!(
        (empty["unused"].clone(), empty["advice"].clone()),
        (json!([]), json!([]))
    );
    assert_eq!(
        (
            empty["headline"]["reads"].clone(),
            empty["headline"]["monthly_saving"].clone()
        ),
        (json!(0), json!(0.0))
    );
}

/// `workload::backtest` (old data read regularly) with an S3 Inventory listing its 530
/// partitions: the advisor moves the dataset into Intelligent-Tiering with the Deep Archive
/// Access tier after 365 days without access (the backtest reads data up to 300 days old),
/// figures to the cent, and writes the Intelligent-Tiering configuration beside the lifecycle
/// rule.
#[test]
fn old_data_read_regularly_goes_to_intelligent_tiering_with_its_archive_tier() {
    use fixtures::workload::TICKS_PART_BYTES;
    let dir = tempfile::tempdir().unwrap();
    let start = chrono::NaiveDate::from_ymd_opt(2024, 6, 1).unwrap();
    let generated = workload::backtest(start, 30);
    let raw = dir.path().join("raw");
    generated.write_to(&raw).unwrap();
    let template = format!("{}/lake/access_logs/{{bucket}}", dir.path().display());
    let (ok, out, err) = lakelog(&["ingest", "-q", "--table", &template, raw.to_str().unwrap()]);
    assert!(ok, "{out}{err}");
    let table = format!("{}/lake/access_logs/{LAKE_BUCKET}", dir.path().display());
    let end = generated.last_day();
    let listed: Vec<InventoryObject> = (0..530)
        .map(|age| {
            let day = end - chrono::TimeDelta::days(age);
            InventoryObject {
                bucket: LAKE_BUCKET,
                key: format!("history/ticks/dt={day}/part-00000.parquet"),
                size: Some(TICKS_PART_BYTES),
                last_modified: day.and_hms_opt(1, 0, 0).unwrap(),
                storage_class: "STANDARD",
                is_latest: true,
                is_delete_marker: false,
            }
        })
        .collect();
    let refs: Vec<&InventoryObject> = listed.iter().collect();
    let taken = (end + chrono::TimeDelta::days(1)).and_hms_opt(0, 0, 0).unwrap();
    let manifest = inventory::write(
        &dir.path().join("inventory"),
        LAKE_BUCKET,
        &refs,
        InventoryFormat::Csv,
        taken,
        2,
    )
    .unwrap();
    let out = dir.path().join("report");
    let r = report(
        &[table],
        &[
            "--inventory",
            manifest.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let a = advice(&r, "history/ticks/");
    assert_eq!(
        a["transitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| (t["storage_class"].as_str().unwrap(), t["days"].as_u64().unwrap()))
            .collect::<Vec<_>>(),
        [("INTELLIGENT_TIERING", 0)],
        "{a:#}"
    );
    let it = &a["intelligent_tiering"];
    assert_eq!(
        it["archive_tier"],
        json!({"access_tier": "DEEP_ARCHIVE_ACCESS", "days": 365, "access_time": "up to 12 hours",
               "storage_gb_month": 0.00099})
    );
    // Ages 0-29 frequent, 30-89 infrequent, 90-364 archive instant, 365-529 Deep Archive Access.
    let gib = TICKS_PART_BYTES;
    assert_eq!(it["tier_bytes"], json!([30 * gib, 60 * gib, 275 * gib, 165 * gib]));
    // The backtest reads 5 GiB of data 100 to 300 days old a day: 150 GiB a month warmed back
    // from archive instant; 530 objects monitored, all written in the 30 days (the backfill).
    let storage = 60.0 * (0.023 - 0.0125) + 275.0 * (0.023 - 0.004) + 165.0 * (0.023 - 0.00099);
    let rewarming = 150.0 * (0.023 - 0.004);
    let (monitoring, transitions) = (530.0 * 0.0025 / 1000.0, 530.0 * 0.01 / 1000.0);
    close(&a["monthly_saving"], storage - rewarming - monitoring - transitions);
    close(&it["monthly_monitoring_fee"], monitoring);
    close(&a["one_time_transition_cost"], 530.0 * 0.01 / 1000.0);
    assert_eq!(a["stored_objects"], 530);
    let reason = a["reason"].as_str().unwrap();
    assert!(
        reason.contains("DEEP_ARCHIVE_ACCESS tier after 365 days without access"),
        "{reason}"
    );

    let expected = json!({
        "Id": "lakelog-history-ticks",
        "Filter": {"Prefix": "history/ticks/"},
        "Status": "Enabled",
        "Tierings": [{"Days": 365, "AccessTier": "DEEP_ARCHIVE_ACCESS"}],
    });
    assert_eq!(it["configuration"], expected);
    let file = out.join("intelligent-tiering-lake-analytics-lakelog-history-ticks.json");
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(written, expected);
    let lifecycle: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("lifecycle-lake-analytics.json")).unwrap()).unwrap();
    assert_eq!(
        lifecycle["Rules"][0]["Transitions"],
        json!([{"Days": 0, "StorageClass": "INTELLIGENT_TIERING"}])
    );
    let page = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(
        page.contains(
            "put-bucket-intelligent-tiering-configuration --bucket lake-analytics --id lakelog-history-ticks"
        ),
        "the page says how to apply it"
    );
    assert!(page.contains("INTELLIGENT_TIERING at 0 d (DEEP_ARCHIVE_ACCESS after 365 d without access)"));
}
