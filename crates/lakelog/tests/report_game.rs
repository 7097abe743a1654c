//! `lakelog report game` over a table whose KPIs are known by construction: events in known
//! windows, a repeated eventId, a late event beyond the watermark and one just within it.

use crate::common::lakelog;

use aws_lambda_events::encodings::SecondTimestamp;
use aws_lambda_events::event::kinesis::{KinesisEventRecord, KinesisRecord};
use chrono::{DateTime, TimeZone, Utc};
use fixtures::game::season::{Season, SeasonConfig, TUTORIAL_FUNNEL};
use game_events::{Envelope, GameEvent, StampedEvent};
use game_sink::{Config, Sink};
use lake::StorageConfig;
use lakelog_reports::game::{Direction, Funnel, Order, PathSpec};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::season;

fn at(h: u32, m: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2024, 6, 1, h, m, 0).unwrap()
}

/// One Kinesis record of an event stamped at `time`, arriving at `arrival`.
fn record(
    seq: u32,
    id: u128,
    name: &str,
    time: DateTime<Utc>,
    params: Value,
    arrival: DateTime<Utc>,
) -> KinesisEventRecord {
    let event = GameEvent::from_value(json!({"eventName": name, "eventParams": params})).unwrap();
    kinesis_record(seq, event.stamp_with_id(time, Uuid::from_u128(id)), arrival)
}

/// The Kinesis record of `event`, arriving at `arrival`.
fn kinesis_record(seq: u32, event: StampedEvent, arrival: DateTime<Utc>) -> KinesisEventRecord {
    let request = json!({"httpMethod": "POST", "path": "/events"});
    let data = Envelope::new(request.as_object().unwrap().clone())
        .record(&event)
        .unwrap();
    let sequence_number = format!("4959033827149025660855969253836157109592157598913{seq:07}");
    let mut kinesis = KinesisRecord::default();
    kinesis.approximate_arrival_timestamp = SecondTimestamp(arrival);
    *kinesis.data = data;
    kinesis.partition_key = "pk".to_owned();
    kinesis.sequence_number = sequence_number.clone();
    let mut record = KinesisEventRecord::default();
    record.event_id = Some(format!("shardId-000000000000:{sequence_number}"));
    record.kinesis = kinesis;
    record
}

/// The sink of the `game_events` table `table` (a local path).
async fn sink_of(table: &str) -> Sink {
    Sink::open(&Config::new(table, None).unwrap(), &StorageConfig::default())
        .await
        .unwrap()
}

/// A folder with the sink of a new `game_events` table in it, and the table's path.
async fn new_table() -> (tempfile::TempDir, String, Sink) {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("game_events").to_str().unwrap().to_owned();
    let sink = sink_of(&table).await;
    (dir, table, sink)
}

fn purchase(device: &str, platform: &str, amount: f64) -> Value {
    json!({"device_id": device, "platform": platform, "amount": amount})
}

fn play(device: &str, platform: &str) -> Value {
    json!({"device_id": device, "platform": platform, "scoreAdjustment": 10})
}

/// `lakelog report game --table TABLE --format json` with `extra` arguments, as JSON.
fn json_report(table: &str, extra: &[&str]) -> Value {
    let mut args = vec!["report", "game", "--table", table, "--format", "json"];
    args.extend(extra);
    let (ok, stdout, stderr) = lakelog(&args);
    assert!(ok, "{stderr}");
    serde_json::from_str(&stdout).unwrap()
}

/// Forty days of a planned season, written as the sink writes them: the report gives the plan's
/// DAU, revenue, sessions and cohorts exactly, day-30 returns included, and DuckDB over the same
/// table finds the same cohorts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planned_season_is_reported_as_planned() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("game_events");
    let start = Utc.with_ymd_and_hms(2024, 4, 1, 0, 0, 0).unwrap();
    let season = Season::plan(&SeasonConfig {
        seed: 11,
        players: 240,
        start,
        end: start + chrono::TimeDelta::days(40),
        events: 14_000,
    });
    let events: Vec<_> = season.events().collect();
    assert_eq!(events.len(), 14_000);
    let sink = sink_of(table.to_str().unwrap()).await;
    let records: Vec<KinesisEventRecord> = (1..)
        .zip(&events)
        .map(|(seq, e)| kinesis_record(seq, e.event.clone().stamp(e.at), e.at))
        .collect();
    for batch in records.chunks(2000) {
        let report = sink.process(batch, &lake::Retry::default()).await;
        assert_eq!(report.retry_from, None);
        assert_eq!(report.rows, batch.len() as u64);
    }

    let report = json_report(table.to_str().unwrap(), &["--funnel", TUTORIAL_FUNNEL]);
    let truth = season.truth();
    let day30 = season::assert_report_is_the_season(&report, &truth);
    // The tutorial funnel: the plan's conversions, and DuckDB running the template's saved query
    // (the library's SQL of the same funnel) finds the same devices and times.
    let funnel = &report["funnels"][0];
    assert!(season::assert_funnel_is_the_season(funnel, &truth) > 30);
    assert_eq!(funnel["all"]["provisional"], false, "a season of 2024 is final");
    let onboarding = Funnel::parse("onboarding", TUTORIAL_FUNNEL, 24, Order::Loose, "test").unwrap();
    let saved = season::assert_saved_query_is("GameFunnelQuery", &onboarding.athena_sql("game_events"));
    season::assert_duckdb_funnel_is_the_report(funnel, &saved, &table);
    // In strict order, any other event between two steps ends a device's funnel: fewer finish,
    // and DuckDB over the strict SQL agrees.
    let strict = json_report(
        table.to_str().unwrap(),
        &["--funnel", TUTORIAL_FUNNEL, "--funnel-order", "strict"],
    );
    let strict = &strict["funnels"][0];
    let finished = |f: &serde_json::Value| f["all"]["steps"][3]["reached"].as_u64().unwrap();
    assert!(finished(strict) < finished(funnel), "{strict}");
    let sql = Funnel::parse("strict", TUTORIAL_FUNNEL, 24, Order::Strict, "test")
        .unwrap()
        .athena_sql("game_events");
    season::assert_duckdb_funnel_is_the_report(strict, &sql, &table);
    // Acquisition: the plan's sources, campaigns and countries, their payers and lifetime values;
    // the source whose players were made likelier to pay is worth the most, the least likely the
    // least; DuckDB over the saved query agrees.
    let ltv = season::assert_acquisition_is_the_season(&report, &truth);
    assert!(
        ltv["ads_network"] > ltv["organic"] && ltv["organic"] > ltv["influencer"],
        "{ltv:?}"
    );
    season::assert_duckdb_acquisition_is_the_report(&report, &table);
    // The experiment: each variant's devices, conversion, revenue and returns are the plan's, and
    // DuckDB over the saved query agrees.
    season::assert_experiment_is_the_season(&report, &season);
    season::assert_duckdb_experiment_is_the_report(&report, &table);
    // Paths before a purchase (the template's saved query, which is the library's SQL) and after
    // a session's start: DuckDB cuts the sessions and counts the same paths.
    let before = json_report(table.to_str().unwrap(), &["--path-before", "purchaseEvent"]);
    let ours = PathSpec::new("purchaseEvent", Direction::Before, 3, "test").unwrap();
    let saved = season::assert_saved_query_is("GamePathsQuery", &ours.athena_sql("game_events", 30));
    assert!(season::assert_duckdb_paths_are_the_report(&before["paths"], &saved, &table) > 100);
    season::assert_paths_are_the_season(&before["paths"], &season, "purchaseEvent", 3, false);
    let after = json_report(
        table.to_str().unwrap(),
        &["--path-after", "sessionStart", "--path-steps", "4"],
    );
    let sql = PathSpec::new("sessionStart", Direction::After, 4, "test")
        .unwrap()
        .athena_sql("game_events", 30);
    season::assert_paths_are_the_season(&after["paths"], &season, "sessionStart", 4, true);
    assert!(season::assert_duckdb_paths_are_the_report(&after["paths"], &sql, &table) > 100);
    // The season moves devices through every lifecycle state and leaves some at risk, so that the
    // comparison above tells each state apart.
    let lifecycle = truth.lifecycle(Utc::now().date_naive());
    for (k, state) in fixtures::game::season::LIFECYCLE_STATES.iter().enumerate() {
        assert!(lifecycle.days.values().any(|d| d[k] > 0), "no device is ever {state}");
    }
    assert!(!lifecycle.at_risk.is_empty(), "no device at risk");
    assert!(season::assert_duckdb_lifecycle_is_the_report(&report, &table) > 30);
    // Read a few days at a time, and an hour at a time: the same season, sessions that span
    // chunks included.
    for rows in ["1000", "200"] {
        let chunked = json_report(table.to_str().unwrap(), &["--chunk-rows", rows]);
        assert_eq!(season::assert_report_is_the_season(&chunked, &truth), day30, "{rows}");
    }
    assert!(day30 > 0, "no cohort reaches day 30");
    let returned30: u64 = truth
        .cohorts
        .iter()
        .filter(|c| c.platform.is_none())
        .map(|c| c.returned[2])
        .sum();
    assert!(returned30 > 0, "nobody plays again a month later");
    assert_eq!(season::assert_duckdb_cohorts_are_the_report(&report, &table)[2], day30);
    season::assert_duckdb_sessions_are_the_report(&report, &table);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kpis_count_each_event_once_and_leave_late_events_out() {
    let (dir, table, sink) = new_table().await;
    // Batch 1, in arrival order.
    let first = vec![
        record(1, 1, "purchaseEvent", at(10, 5), purchase("D1", "ios", 2.5), at(10, 5)),
        record(2, 2, "scoreAdjustment", at(10, 20), play("D2", "android"), at(10, 20)),
        record(3, 3, "scoreAdjustment", at(10, 59), play("D3", "ios"), at(10, 59)),
        record(
            4,
            4,
            "purchaseEvent",
            at(11, 10),
            purchase("D2", "android", 1.25),
            at(11, 10),
        ),
    ];
    // Batch 2: the first purchase again (a client resent it; the server stamped it anew), then
    // the watermark moves to 14:30, then one event 190 minutes behind it (late) and one 165
    // minutes behind it (counted).
    let second = vec![
        record(
            5,
            1,
            "purchaseEvent",
            at(11, 30),
            purchase("D1", "ios", 2.5),
            at(11, 30),
        ),
        record(6, 6, "levelUp", at(14, 30), play("D5", "android"), at(14, 30)),
        record(
            7,
            7,
            "purchaseEvent",
            at(11, 20),
            purchase("D4", "ios", 100.0),
            at(14, 31),
        ),
        record(8, 8, "scoreAdjustment", at(11, 45), play("D1", "ios"), at(14, 32)),
    ];
    for batch in [&first, &second, &second] {
        // The second batch twice: a retried batch changes no figure.
        let report = sink.process(batch, &lake::Retry::default()).await;
        assert_eq!(report.retry_from, None);
    }

    let report = json_report(&table, &[]);
    // Read an hour at a time: the resent purchase is met in another chunk than its first copy.
    for rows in ["1", "3"] {
        assert_eq!(json_report(&table, &["--chunk-rows", rows]), report, "{rows}");
    }
    assert_eq!(
        report["events_per_hour"],
        json!([
            {"window_start": "2024-06-01T10:00:00Z", "count": 3, "provisional": false},
            {"window_start": "2024-06-01T11:00:00Z", "count": 2, "provisional": false},
            {"window_start": "2024-06-01T14:00:00Z", "count": 1, "provisional": false},
        ])
    );
    assert_eq!(
        report["bookings_per_hour"],
        json!([
            {"window_start": "2024-06-01T10:00:00Z", "amount": 2.5, "provisional": false},
            {"window_start": "2024-06-01T11:00:00Z", "amount": 1.25, "provisional": false},
        ])
    );
    // Every event counts for DAU, the late one's device included.
    assert_eq!(
        report["dau"],
        json!([{"date": "2024-06-01", "users": 5, "provisional": false}])
    );
    assert_eq!(report["late_events"], json!(1));
    let ios = &report["by_platform"]["ios"];
    assert_eq!(
        ios["events_per_hour"],
        json!([
            {"window_start": "2024-06-01T10:00:00Z", "count": 2, "provisional": false},
            {"window_start": "2024-06-01T11:00:00Z", "count": 1, "provisional": false},
        ])
    );
    assert_eq!(ios["late_events"], json!(1));
    assert_eq!(
        ios["dau"],
        json!([{"date": "2024-06-01", "users": 3, "provisional": false}])
    );
    assert_eq!(
        report["by_platform"]["android"]["bookings_per_hour"][0]["amount"],
        json!(1.25)
    );

    // Revenue: D1's 2.50 (once) and D2's 1.25 count; D4's 100.00 came late. No app version sent.
    assert_eq!(
        report["revenue"]["days"],
        json!([{
            "date": "2024-06-01", "active_users": 5, "paying_users": 2, "revenue": 3.75,
            "conversion": 0.4, "arpdau": 0.75, "arppu": 1.875, "provisional": false
        }])
    );
    assert_eq!(
        report["revenue"]["by_platform"],
        json!([
            {"name": "ios", "revenue": 2.5, "purchases": 1, "paying_users": 1},
            {"name": "android", "revenue": 1.25, "purchases": 1, "paying_users": 1},
        ])
    );
    assert_eq!(
        report["revenue"]["by_app_version"],
        json!([{"name": "unknown", "revenue": 3.75, "purchases": 2, "paying_users": 2}])
    );

    // Retention: every device is first seen on the one day of the table, so no later day is known.
    let unknown = json!([null, null, null]);
    assert_eq!(
        report["retention"],
        json!([
            {"date": "2024-06-01", "platform": null, "devices": 5, "returned": unknown, "provisional": false},
            {"date": "2024-06-01", "platform": "android", "devices": 2, "returned": unknown, "provisional": false},
            {"date": "2024-06-01", "platform": "ios", "devices": 3, "returned": unknown, "provisional": false},
        ])
    );

    // Sessions, cut after 30 minutes without an event: D1 at 10:05 and 11:45, D2 at 10:20 and
    // 11:10 (two each), D3, D4 (its late purchase is still play) and D5 one each.
    let sessions = &report["sessions"];
    assert_eq!(sessions["gap_minutes"], 30);
    assert_eq!(
        sessions["days"],
        json!([{"date": "2024-06-01", "sessions": 7, "devices": 5, "sessions_per_user": 1.4, "median_seconds": 0.0, "provisional": false}])
    );
    assert_eq!(sessions["lengths"][0], json!(["under 1 min", 7]));
    // With an hour's gap, D2's two events are one session of 50 minutes.
    let hourly = json_report(&table, &["--session-gap", "60"]);
    assert_eq!(hourly["sessions"]["days"][0]["sessions"], 6);
    assert_eq!(hourly["sessions"]["lengths"][0], json!(["under 1 min", 5]));
    assert_eq!(hourly["sessions"]["lengths"][4], json!(["30-60 min", 1]));

    // A range selects windows; lateness is still judged against everything before.
    let report = json_report(
        &table,
        &["--from", "2024-06-01T11:00:00Z", "--to", "2024-06-01T12:00:00Z"],
    );
    assert_eq!(
        report["events_per_hour"],
        json!([{"window_start": "2024-06-01T11:00:00Z", "count": 2, "provisional": false}])
    );
    assert_eq!(report["late_events"], json!(1));

    // The text report and the HTML report with its charts.
    let out = dir.path().join("report");
    let (ok, stdout, stderr) = lakelog(&["report", "game", "--table", &table, "--out", out.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("2024-06-01T10:00:00Z"), "{stdout}");
    assert!(stdout.contains("not counted): 1"), "{stdout}");
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(html.contains("<svg"));
    // Without --from and --to, the range covered is that of the events' hours.
    let covered = "2024-06-01 10:00 to 2024-06-01 15:00 UTC";
    assert!(stdout.contains(covered), "{stdout}");
    assert!(
        html.contains(&format!("<dd>{covered}</dd>")) && !html.contains('…'),
        "{html}"
    );
    let written: Value = serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(written["late_events"], json!(1));
    assert_eq!(written["headline"]["events"], json!(6));
    assert!(written["by_platform"].is_object());
    for chart in [
        "events_per_hour.svg",
        "bookings_per_hour.svg",
        "dau.svg",
        "bookings_per_hour_by_platform.svg",
        "revenue_by_app_version.svg",
        "retention.svg",
        "session_lengths.svg",
    ] {
        let svg = std::fs::read_to_string(out.join(chart)).unwrap();
        assert!(svg.starts_with("<svg"), "{chart}");
    }
}

#[test]
fn a_missing_table_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nothing");
    let (ok, _, stderr) = lakelog(&["report", "game", "--table", missing.to_str().unwrap()]);
    assert!(!ok);
    assert!(stderr.contains(missing.to_str().unwrap()), "{stderr}");
}

/// Events of two days ago and of the last hour: the recent hour, today and the figures over the
/// whole range are provisional (an event may still arrive on time for them); the hours and the
/// day of two days ago are final; a range that ends before the watermark makes its figures final.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn figures_are_provisional_until_no_event_can_arrive_on_time() {
    let (_dir, table, sink) = new_table().await;
    let now = Utc::now();
    let (old, recent) = (now - chrono::TimeDelta::days(2), now - chrono::TimeDelta::minutes(10));
    let batch = [
        record(1, 1, "sessionStart", old, play("D1", "ios"), old),
        record(2, 2, "sessionStart", recent, play("D2", "ios"), recent),
    ];
    assert_eq!(sink.process(&batch, &lake::Retry::default()).await.retry_from, None);

    let report = json_report(&table, &[]);
    let flags = |rows: &Value| -> Vec<bool> {
        rows.as_array()
            .unwrap()
            .iter()
            .map(|r| r["provisional"].as_bool().unwrap())
            .collect()
    };
    assert_eq!(flags(&report["events_per_hour"]), [false, true], "{report:#}");
    assert_eq!(flags(&report["dau"]), [false, true]);
    assert_eq!(flags(&report["sessions"]["days"]), [false, true]);
    assert_eq!(report["headline"]["provisional"], true);
    assert_eq!(report["revenue"]["provisional"], true);
    assert_eq!(report["lifecycle"]["provisional"], true);
    let (ok, text, stderr) = lakelog(&["report", "game", "--table", &table]);
    assert!(ok, "{stderr}");
    assert!(text.contains("Rows marked * are provisional"), "{text}");
    assert!(text.contains(&format!("{} *", recent.date_naive())), "{text}");

    // Up to the hour after the old event: everything in the range is final.
    let to = (old + chrono::TimeDelta::hours(1)).to_rfc3339();
    let closed = json_report(&table, &["--to", &to]);
    assert_eq!(flags(&closed["events_per_hour"]), [false]);
    assert_eq!(closed["headline"]["provisional"], false);
}

/// Seasons of three seeds, each with the experiment: the variant given a lift shows it (its
/// conversion's always-valid p-value under 0.05), the variant without one does not, in any seed,
/// and the split passes the sample-ratio check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_experiment_finds_the_lift_where_it_was_put_and_none_elsewhere() {
    for seed in [1, 2, 3] {
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("game_events");
        let start = Utc.with_ymd_and_hms(2024, 3, 1, 0, 0, 0).unwrap();
        let season = Season::plan(&SeasonConfig {
            seed,
            players: 1200,
            start,
            end: start + chrono::TimeDelta::days(21),
            events: 1,
        });
        let sink = sink_of(table.to_str().unwrap()).await;
        let records: Vec<KinesisEventRecord> = (1..)
            .zip(season.events())
            .map(|(seq, e)| kinesis_record(seq, e.event.stamp(e.at), e.at))
            .collect();
        for batch in records.chunks(20_000) {
            assert_eq!(sink.process(batch, &lake::Retry::default()).await.retry_from, None);
        }
        let report = json_report(table.to_str().unwrap(), &[]);
        season::assert_experiment_is_the_season(&report, &season);
        let experiment = &report["experiments"][0];
        assert_eq!(experiment["control"], "control");
        assert_eq!(experiment["sample_ratio_mismatch"], false, "{seed}: {experiment:#}");
        let p = |variant: &str, measure: &str| {
            experiment["variants"]
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v["name"] == variant)
                .unwrap()[measure]["always_valid_p_value"]
                .as_f64()
                .unwrap()
        };
        assert!(p("discount", "conversion") < 0.05, "{seed}: {experiment:#}");
        for measure in ["conversion", "revenue_per_device", "revenue_per_device_cuped"] {
            assert!(p("new_icon", measure) >= 0.05, "{seed} {measure}: {experiment:#}");
        }
    }
}
