//! `lakelog optimize`, `checkpoint` and `vacuum` as a user runs them, on access-log tables built by
//! `lakelog ingest` one object per commit; `lakelog forget` on a game table the sink writes.

use crate::common::lakelog;
use std::process::Command;

use aws_lambda_events::apigw::ApiGatewayProxyRequest;
use lake::{StorageConfig, Table};

fn stats(uri: &str) -> lake::FileStats {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        Table::open(uri, &StorageConfig::default())
            .await
            .unwrap()
            .file_stats()
            .unwrap()
    })
}

#[test]
fn optimize_checkpoint_and_vacuum_a_table_of_small_commits() {
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("raw");
    let (ok, out, err) = lakelog(&[
        "generate-logs",
        "--out",
        raw.to_str().unwrap(),
        "--bytes",
        "2400000",
        "--object-bytes",
        "200000",
        "--malformed-rate",
        "0",
    ]);
    assert!(ok, "{out}{err}");
    let lake = dir.path().join("lake");
    let template = format!("{}/{{bucket}}", lake.display());
    let (ok, out, err) = lakelog(&[
        "ingest",
        "-q",
        "--objects-per-commit",
        "1",
        "--table",
        &template,
        raw.to_str().unwrap(),
    ]);
    assert!(ok, "{out}{err}");
    let tables: Vec<String> = std::fs::read_dir(&lake)
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .filter(|p| !p.ends_with("_rejects"))
        .collect();
    assert!(!tables.is_empty());
    let table = &tables[0];
    let before = stats(table);
    assert!(before.files >= 4, "{before:?}");

    // The plan, without changes.
    let (ok, plan, err) = lakelog(&["optimize", "--table", table, "--dry-run"]);
    assert!(ok, "{plan}{err}");
    assert!(plan.contains("request_date="), "{plan}");
    assert_eq!(stats(table), before);

    let (ok, out, err) = lakelog(&["optimize", "-q", "--table", table]);
    assert!(ok, "{out}{err}");
    assert!(out.starts_with("compacted "), "{out}");
    let after = stats(table);
    assert_eq!(after.rows, before.rows);
    assert!(after.files < before.files, "{before:?} -> {after:?}");
    assert!(
        out.contains(&format!("{} -> {} files", before.files, after.files)),
        "{out}"
    );

    let (ok, out, err) = lakelog(&["checkpoint", "-q", "--table", table]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("checkpoint written"), "{out}");
    let (ok, out, _) = lakelog(&["checkpoint", "-q", "--table", table]);
    assert!(ok && out.contains("already checkpointed"), "{out}");

    // Less than 7 days of retention needs --force; the default keeps the compacted files.
    let (ok, _, err) = lakelog(&["vacuum", "-q", "--table", table, "--retention-hours", "0"]);
    assert!(!ok);
    assert!(err.contains("below the minimum of 168 hours"), "{err}");
    let (ok, out, err) = lakelog(&["vacuum", "-q", "--table", table]);
    assert!(ok && out.contains("deleted 0 files"), "{out}{err}");
    let (ok, out, err) = lakelog(&[
        "vacuum",
        "-q",
        "--table",
        table,
        "--retention-hours",
        "0",
        "--force",
        "--dry-run",
    ]);
    assert!(ok, "{out}{err}");
    assert!(out.contains(&format!("would delete {} files", before.files)), "{out}");
    assert_eq!(stats(table), after);

    // Retention: a century keeps every day; a day drops the generated logs' past dates.
    let (ok, out, err) = lakelog(&["optimize", "-q", "--table", table, "--retain-days", "36500"]);
    assert!(ok && out.contains("retention: no partition before"), "{out}{err}");
    assert_eq!(stats(table).rows, after.rows);
    let (ok, out, err) = lakelog(&["optimize", "-q", "--table", table, "--retain-days", "1"]);
    assert!(ok && out.contains("retention: dropped"), "{out}{err}");
    assert_eq!(stats(table).rows, 0, "{out}");

    let (ok, _, err) = lakelog(&["optimize", "--table", &format!("{}/missing", dir.path().display())]);
    assert!(!ok);
    assert!(err.contains("missing"), "{err}");
}

/// A request of `events` for the sample game that API Gateway received at `time`.
fn game_request(events: &[game_events::GameEvent], time: chrono::DateTime<chrono::Utc>) -> ApiGatewayProxyRequest {
    let body = serde_json::json!({ "events": events }).to_string();
    serde_json::from_value(serde_json::json!({
        "resource": "/events", "path": "/events", "httpMethod": "POST",
        "headers": {"content-type": "application/json", "x-api-key": game_api::testing::SAMPLE_KEY},
        "requestContext": {"httpMethod": "POST", "requestTimeEpoch": time.timestamp_millis(), "requestId": lakelog_tests::unique_name("req")},
        "body": body, "isBase64Encoded": false
    }))
    .unwrap()
}

/// Sends `events` at `time` through the API handler into `stream`; every event must be written.
async fn send(stream: &game_api::LocalStream, events: &[game_events::GameEvent], time: chrono::DateTime<chrono::Utc>) {
    let games = game_api::testing::sample_games();
    let response = game_api::respond(
        &game_request(events, time),
        &games,
        stream,
        // One event a record: the test breaks one event's record and splits the stream between
        // staged and parked records event by event.
        &game_api::ApiConfig {
            record_format: game_api::RecordFormat::Seed,
            ..game_api::ApiConfig::default()
        },
    )
    .await;
    assert_eq!(response.status_code, 200, "{:?}", response.body);
}

/// `lakelog forget` of three players of a table on S3 (the stand-in) while the sink keeps writing
/// other players' events: their rows go from game_events (committed and staged), the rejects
/// table and the parked records; DuckDB over every Parquet file under the tables' folders (every
/// version's, not only the current one) finds none of them; the current version holds every other
/// row exactly once, and the daily active devices and revenue drop by exactly theirs, in DuckDB and
/// in the game report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forget_erases_three_players_while_the_sink_writes() {
    use chrono::{Duration, TimeZone, Utc};
    use fixtures::game::{Synth, SynthConfig};
    use std::collections::{BTreeMap, BTreeSet};

    let standin = lakelog_tests::StandIn::connect().await.unwrap();
    let bucket = standin.create_bucket("forget").await.unwrap();
    let events_uri = lakelog_tests::StandIn::s3_uri(&bucket, "game_events");
    let rejects_uri = lakelog_tests::StandIn::s3_uri(&bucket, "game_events_rejects");
    let parked_uri = lakelog_tests::StandIn::s3_uri(&bucket, "parked");
    let storage = StorageConfig {
        endpoint: Some(standin.endpoint().to_owned()),
        extra: standin.storage_options(),
    };
    let sink = std::sync::Arc::new(
        game_sink::Sink::open(&game_sink::Config::new(&events_uri, None).unwrap(), &storage)
            .await
            .unwrap(),
    );
    let stream = std::sync::Arc::new(game_api::LocalStream::new("forget"));

    // Three days of 20 devices, committed; the last requests staged only, one record of theirs
    // broken into a reject.
    let mut synth = Synth::new(SynthConfig {
        seed: 11,
        devices: 20,
        ..SynthConfig::default()
    });
    let start = Utc.with_ymd_and_hms(2024, 6, 1, 1, 0, 0).unwrap();
    let mut sent: Vec<(String, String, Option<f64>, chrono::NaiveDate)> = Vec::new();
    for i in 0..12 {
        let time = start + Duration::hours(6 * i);
        let events = synth.events(40, time);
        for e in &events {
            let params = e.event_params.as_ref().unwrap();
            sent.push((
                params.device_id.clone().unwrap(),
                e.event_name.clone(),
                params.amount,
                time.date_naive(),
            ));
        }
        send(&stream, &events, time).await;
    }
    let devices: BTreeSet<String> = sent.iter().map(|s| s.0.clone()).collect();
    let forgotten: Vec<String> = devices.iter().take(3).cloned().collect();
    let mut records = stream.drain();
    let staged_from = records.len() * 4 / 5;
    let broken = (staged_from..records.len())
        .find(|&i| String::from_utf8_lossy(&records[i].kinesis.data).contains(&format!("\"{}\"", forgotten[0])))
        .unwrap();
    *records[broken].kinesis.data = format!(r#"{{"eventParams":{{"device_id":"{}"}}"#, forgotten[0]).into_bytes();
    let report = sink.process(&records[..staged_from], &lake::Retry::default()).await;
    assert_eq!(report.rows, staged_from as u64);
    let report = sink.stage(&records[staged_from..]).await;
    assert_eq!(report.rejected, 1);
    let broken_event_device = forgotten[0].clone();
    // Parked records of the second player.
    let parked: Vec<_> = records
        .iter()
        .filter(|r| String::from_utf8_lossy(&r.kinesis.data).contains(&format!("\"{}\"", forgotten[1])))
        .take(3)
        .cloned()
        .collect();
    let folder = lake::Folder::open(&parked_uri, &storage).unwrap();
    let object = game_sink::Parked {
        table: game_sink::ParkedFor::Events,
        location: events_uri.clone(),
        records: parked,
    };
    folder
        .put(
            "events/shardId-000000000000/1-3.json",
            serde_json::to_vec(&object).unwrap(),
        )
        .await
        .unwrap();

    // Other players keep playing today while the erasure runs.
    let writer = {
        let (sink, stream) = (sink.clone(), stream.clone());
        tokio::spawn(async move {
            let mut others = Synth::new(SynthConfig {
                seed: 99,
                devices: 5,
                ..SynthConfig::default()
            });
            let mut rows = 0;
            for _ in 0..8 {
                let now = Utc::now();
                send(&stream, &others.events(20, now), now).await;
                rows += sink.process(&stream.drain(), &lake::Retry::default()).await.rows;
                tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            }
            rows
        })
    };
    let mut args = vec![
        "forget".to_owned(),
        "--table".to_owned(),
        events_uri.clone(),
        "--parked".to_owned(),
        parked_uri.clone(),
        "--game".to_owned(),
        game_api::testing::SAMPLE_GAME.to_owned(),
        "--reader-grace".to_owned(),
        "0".to_owned(),
    ];
    args.extend(forgotten.iter().cloned());
    // The erasure talks to S3 through a proxy that fails or drops some of its requests (the
    // suite's low rate; LAKELOG_FAULT_RATE=0.05 for more). A run that fails loses and doubles
    // nothing, and is run again, as its user would.
    let proxy = lakelog_tests::faults::FaultProxy::start(
        standin.endpoint(),
        53,
        lakelog_tests::faults::FaultRates::from_env_or(0.02).stressing_the_log(),
    )
    .await
    .unwrap();
    let endpoint = proxy.endpoint().to_owned();
    let forget = move || {
        Command::new(env!("CARGO_BIN_EXE_lakelog"))
            .args(&args)
            .envs(lakelog_tests::runtime_api::Function::standin_vars(&endpoint))
            .env("AWS_REGION", lakelog_tests::REGION)
            .output()
            .unwrap()
    };
    let mut runs = Vec::new();
    let output = loop {
        let forget = forget.clone();
        let output = tokio::task::spawn_blocking(forget).await.unwrap();
        runs.push(String::from_utf8_lossy(&output.stderr).into_owned());
        if output.status.success() || runs.len() == 4 {
            break output;
        }
    };
    let written_by_others = writer.await.unwrap();
    assert!(output.status.success(), "{runs:#?}");
    eprintln!("forget: {} runs; faults: {:?}", runs.len(), proxy.counts());
    let receipt: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(receipt["verified"], true, "{receipt:#}");
    if runs.len() == 1 {
        // (A run after a failed one finds some of them gone already.)
        assert_eq!(receipt["tables"][&rejects_uri]["erasure"]["rowsRemoved"], 1);
        assert_eq!(receipt["parked"]["recordsRemoved"], 3);
    }
    assert!(
        !receipt.to_string().contains(&broken_event_device),
        "the receipt names no player"
    );
    assert!(
        folder.list().await.unwrap().is_empty(),
        "the parked object held only their records"
    );

    // Every Parquet file under the folders, whatever version: none of theirs.
    let ids = forgotten
        .iter()
        .map(|d| format!("'{d}'"))
        .collect::<Vec<_>>()
        .join(", ");
    let count = |sql: String| -> i64 {
        lakelog_tests::duckdb(standin.endpoint(), &sql).unwrap()[0][0]
            .as_i64()
            .unwrap()
    };
    let all_files = |table: &str| format!("read_parquet('s3://{bucket}/{table}/*/*.parquet', union_by_name = true)");
    assert!(count(format!("SELECT count(*) FROM {}", all_files("game_events"))) > 0);
    assert_eq!(
        count(format!(
            "SELECT count(*) FROM {} WHERE eventParams.device_id IN ({ids})",
            all_files("game_events")
        )),
        0
    );
    // The rejects table held their one reject alone: its only data file is gone.
    let listed = standin
        .s3()
        .list_objects_v2()
        .bucket(&bucket)
        .prefix("game_events_rejects/")
        .send()
        .await
        .unwrap();
    let rejects_data: Vec<&str> = listed
        .contents()
        .iter()
        .filter_map(|o| o.key())
        .filter(|k| k.ends_with(".parquet") && !k.contains("/_delta_log/"))
        .collect();
    assert!(rejects_data.is_empty(), "{rejects_data:?}");
    // Every other reject would still be read by DuckDB: the rejects of the writer's records (none
    // here) are checked through the table's current version.
    let rejects_files = format!("delta_scan('s3://{bucket}/game_events_rejects')");
    assert_eq!(
        count(format!(
            "SELECT count(*) FROM {rejects_files} WHERE {}",
            forgotten
                .iter()
                .map(|d| format!("contains(CAST(data AS VARCHAR), '{d}')"))
                .collect::<Vec<_>>()
                .join(" OR ")
        )),
        0
    );

    // The current version: every other event once.
    let kept: Vec<_> = sent.iter().filter(|s| !forgotten.contains(&s.0)).collect();
    let scan = format!("delta_scan('s3://{bucket}/game_events')");
    let expected_rows = kept.len() as i64 + written_by_others as i64;
    assert_eq!(count(format!("SELECT count(*) FROM {scan}")), expected_rows);
    assert_eq!(
        count(format!("SELECT count(DISTINCT eventId) FROM {scan}")),
        expected_rows
    );
    // Daily active devices and revenue of the three days: those of the events sent, without theirs.
    let mut dau: BTreeMap<chrono::NaiveDate, BTreeSet<&str>> = BTreeMap::new();
    let mut revenue_cents: BTreeMap<chrono::NaiveDate, i64> = BTreeMap::new();
    for (device, name, amount, day) in &kept {
        dau.entry(*day).or_default().insert(device);
        if name == game_events::PURCHASE_EVENT {
            *revenue_cents.entry(*day).or_default() += (amount.unwrap_or(0.0) * 100.0).round() as i64;
        }
    }
    for (day, devices) in &dau {
        let got = lakelog_tests::duckdb(
            standin.endpoint(),
            &format!(
                "SELECT count(DISTINCT eventParams.device_id), \
                 CAST(round(coalesce(sum(CASE WHEN eventName = 'purchaseEvent' THEN eventParams.amount END), 0) * 100) AS BIGINT) \
                 FROM {scan} WHERE eventDate = DATE '{day}'"
            ),
        )
        .unwrap();
        assert_eq!(got[0][0].as_i64().unwrap(), devices.len() as i64, "DAU of {day}");
        assert_eq!(
            got[0][1].as_i64().unwrap(),
            revenue_cents.get(day).copied().unwrap_or(0),
            "revenue of {day}"
        );
    }
    // The game report reads the same: its DAU and revenue of each day lost exactly theirs.
    let session = lakelog_reports::ReportSession::new();
    session
        .register_tables("game_events", std::slice::from_ref(&events_uri), &storage)
        .await
        .unwrap();
    let range = lakelog_reports::TimeRange::parse(None, None).unwrap();
    let report = lakelog_reports::game::game_report(&session, "game_events", &range)
        .await
        .unwrap();
    for (day, devices) in &dau {
        let reported = report.revenue.days.iter().find(|d| d.date == *day).unwrap();
        assert_eq!(reported.active_users, devices.len() as i64, "reported DAU of {day}");
        assert_eq!(
            (reported.revenue * 100.0).round() as i64,
            revenue_cents.get(day).copied().unwrap_or(0),
            "reported revenue of {day}"
        );
    }
}
