//! `lakelog check`: probes through `lakelog serve` become rows once each, are left out of the game
//! report and erased; against a stack (its outputs and maintenance state in the stand-in, its
//! alarms in a CloudWatch of the test's), a firing alarm or a probe the API refuses makes it fail,
//! saying which.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};

use lakelog_tests::{StandIn, duckdb, unique_name};
use serde_json::Value;

use crate::common;

fn probe_rows(table: &str) -> i64 {
    let sql = format!("SELECT count(*) FROM delta_scan('{table}') WHERE \"gameId\" = 'lakelog-probe'");
    duckdb("http://127.0.0.1:1", &sql).unwrap()[0][0].as_i64().unwrap()
}

fn all_rows(table: &str) -> i64 {
    duckdb(
        "http://127.0.0.1:1",
        &format!("SELECT count(*) FROM delta_scan('{table}')"),
    )
    .unwrap()[0][0]
        .as_i64()
        .unwrap()
}

/// `lakelog check ARGS`: whether it succeeded, its JSON, and what it said.
fn check(args: &[&str]) -> (bool, Value, String) {
    let mut all = vec!["check"];
    all.extend_from_slice(args);
    let (ok, stdout, stderr) = common::lakelog(&all);
    let json = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    (ok, json, stderr)
}

#[test]
fn probes_through_serve_land_once_stay_out_of_the_report_and_are_erased() {
    let dir = tempfile::tempdir().unwrap();
    let lake_dir = dir.path().join("lake");
    let (server, url) = common::serve(&lake_dir);
    let table = lake_dir.join("game_events").display().to_string();
    let sent = common::lakelog(&[
        "send-events",
        "--url",
        &url,
        "--api-key",
        common::KEY,
        "--rate",
        "200",
        "--duration",
        "1",
    ]);
    assert!(sent.0, "{}", sent.2);

    let local = ["--endpoint", &url, "--key", common::PROBE_KEY, "--table", &table];
    let mut kept = local.to_vec();
    kept.extend(["--probes", "3", "--deadline", "60", "--keep"]);
    let (ok, found, said) = check(&kept);
    assert!(ok, "{said}");
    let probe = &found["probe"];
    assert_eq!(
        (&probe["landed"], &probe["once"], &probe["rows"]),
        (&Value::Bool(true), &Value::Bool(true), &Value::from(3)),
        "{found}"
    );
    assert!(probe["acceptToRowSeconds"].as_f64().unwrap() < 60.0, "{found}");
    assert!(said.contains("each a row exactly once"), "{said}");
    assert_eq!(probe_rows(&table), 3, "kept");

    // The report counts the game's events, not the probes.
    let events = all_rows(&table) - 3;
    let (ok, report, stderr) = common::lakelog(&["report", "game", "--table", &table, "--format", "json"]);
    assert!(ok, "{stderr}");
    let report: Value = serde_json::from_str(&report).unwrap();
    assert_eq!(report["headline"]["events"], Value::from(events), "{report}");

    // So do the stack's saved Athena queries, run by DuckDB over the same table.
    let scan = format!("delta_scan('{table}')");
    let per_hour =
        lakelog_tests::athena_query("GameEventsPerHourQuery", lakelog_tests::TEMPLATE_GAME_EVENTS, &scan).unwrap();
    let hours = duckdb("http://127.0.0.1:1", &format!("SELECT events FROM ({per_hour})")).unwrap();
    let counted: i64 = hours.iter().map(|row| row[0].as_i64().unwrap()).sum();
    assert_eq!(counted, events, "{hours:?}");

    // Without --keep, every probe is erased, the ones kept before too.
    let (ok, found, said) = check(&local);
    assert!(ok, "{said}");
    assert_eq!(found["probe"]["rows"], Value::from(3), "{found}");
    assert_eq!(found["probesErased"], Value::from(6), "{found}");
    assert_eq!(probe_rows(&table), 0);
    assert_eq!(all_rows(&table), events, "nothing but the probes erased");

    // The probe game is the stack's: `lakelog games` makes none.
    let (ok, _, said) = common::lakelog(&["games", "add", "lakelog-probe", "--api-id", "abc123"]);
    assert!(!ok && said.contains("reserved for the stack's canary"), "{said}");

    // A key of no game: refused, said, and the exit status says so.
    let mut wrong = local.to_vec();
    wrong[3] = "no-such-key-of-twenty-characters";
    let (ok, found, said) = check(&wrong);
    assert!(!ok);
    assert_eq!(found["probe"]["accepted"], Value::Bool(false), "{found}");
    assert!(said.contains("HTTP 403"), "{said}");
    drop(server);
}

/// A stack in the stand-in whose outputs name `serve`'s endpoint and table, the probe game's key,
/// a maintenance state and erasure requests under `dir`; its name.
async fn stack(standin: &StandIn, url: &str, table: &str, dir: &Path) -> String {
    let sdk = standin.sdk_config();
    let apigateway = aws_sdk_apigateway::Client::new(&sdk);
    // API Gateway holds one key of a value: a stand-in that served an earlier run has it.
    let made = apigateway
        .create_api_key()
        .name("lakelog-lakelog-probe")
        .value(common::PROBE_KEY)
        .enabled(true)
        .send()
        .await;
    let key_id = match made {
        Ok(key) => key.id().unwrap().to_owned(),
        Err(_) => {
            let keys = apigateway.get_api_keys().include_values(true).send().await.unwrap();
            let key = keys.items().iter().find(|k| k.value() == Some(common::PROBE_KEY));
            key.and_then(|k| k.id()).unwrap().to_owned()
        }
    };
    let state = dir.join("state");
    std::fs::create_dir_all(&state).unwrap();
    let now = chrono::Utc::now().timestamp();
    let mut tables = serde_json::Map::new();
    tables.insert(
        table.to_owned(),
        serde_json::json!({"started": now - 7200, "completed": now - 7000}),
    );
    tables.insert(
        format!("{table}_rejects"),
        serde_json::json!({"started": now - 3 * 3600, "completed": now - 3 * 3600 + 60}),
    );
    let tables = serde_json::json!({ "tables": tables });
    std::fs::write(state.join("maintenance-state.json"), tables.to_string()).unwrap();
    let name = unique_name("lakelog-check");
    let template = serde_json::json!({
        "Resources": {"Queue": {"Type": "AWS::SQS::Queue"}},
        "Outputs": {
            "GameEventsEndpoint": {"Value": url},
            "CanaryApiKeyId": {"Value": key_id},
            "GameEventsTableUri": {"Value": table},
            "ErasureRequestsUri": {"Value": dir.join("erasure-requests").display().to_string()},
            "GameEventsStreamName": {"Value": "game-events"},
            "MaintenanceStateUri": {"Value": state.display().to_string()}
        }
    });
    aws_sdk_cloudformation::Client::new(&sdk)
        .create_stack()
        .stack_name(&name)
        .template_body(template.to_string())
        .send()
        .await
        .unwrap();
    name
}

/// CloudWatch's side of `lakelog check --stack`, on 127.0.0.1: the SDK speaks CloudWatch's CBOR
/// protocol, which the moto stand-in does not, so this answers `DescribeAlarms` (filtered by the
/// request's `AlarmNamePrefix`, as CloudWatch filters) from `alarms`, and `GetMetricStatistics`
/// with one point of 1.5 s. Its URL, for `AWS_ENDPOINT_URL_CLOUDWATCH`.
fn cloudwatch(alarms: Arc<Mutex<Vec<(String, &'static str)>>>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let (mut request_line, mut length) = (String::new(), 0usize);
            reader.read_line(&mut request_line).unwrap();
            loop {
                let mut header = String::new();
                reader.read_line(&mut header).unwrap();
                if header.trim().is_empty() {
                    break;
                }
                if let Some((name, value)) = header.split_once(':')
                    && name.eq_ignore_ascii_case("content-length")
                {
                    length = value.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let mut encoder = aws_smithy_cbor::Encoder::new(Vec::new());
            if request_line.contains("/operation/DescribeAlarms ") {
                let prefix = cbor_text_after(&body, "AlarmNamePrefix").unwrap_or_default();
                let alarms = alarms.lock().unwrap();
                let matching: Vec<_> = alarms.iter().filter(|(name, _)| name.starts_with(&prefix)).collect();
                encoder.map(1).str("MetricAlarms").array(matching.len());
                for (name, state) in matching {
                    encoder.map(3).str("AlarmName").str(name).str("StateValue").str(state);
                    encoder.str("StateReason").str("set by the test");
                }
            } else if request_line.contains("/operation/GetMetricStatistics ") {
                let now = aws_smithy_types::DateTime::from_secs(chrono::Utc::now().timestamp() - 60);
                encoder.map(1).str("Datapoints").array(1);
                encoder
                    .map(2)
                    .str("Timestamp")
                    .timestamp(&now)
                    .str("Maximum")
                    .double(1500.0);
            } else {
                encoder.map(0);
            }
            let body = encoder.into_writer();
            let head = format!(
                "HTTP/1.1 200 OK\r\nsmithy-protocol: rpc-v2-cbor\r\ncontent-type: application/cbor\r\n\
                 content-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(&body));
        }
    });
    url
}

/// The text that follows the CBOR text `key` in `body` (a short definite-length string).
fn cbor_text_after(body: &[u8], key: &str) -> Option<String> {
    let at = body.windows(key.len()).position(|w| w == key.as_bytes())? + key.len();
    let (start, len) = match *body.get(at)? {
        head @ 0x60..=0x77 => (at + 1, usize::from(head - 0x60)),
        0x78 => (at + 2, usize::from(*body.get(at + 1)?)),
        _ => return None,
    };
    String::from_utf8(body.get(start..start + len)?.to_vec()).ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_check_reads_its_outputs_alarms_and_maintenance() {
    let standin = StandIn::connect().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let lake_dir = dir.path().join("lake");
    let (server, url) = common::serve(&lake_dir);
    let table = lake_dir.join("game_events").display().to_string();
    let name = stack(&standin, &url, &table, dir.path()).await;
    let alarms = Arc::new(Mutex::new(vec![
        (format!("{name}-ProbeNotLandedAlarm-1A2B"), "OK"),
        (format!("{name}-GameEventsSinkLagAlarm-3C4D"), "OK"),
        (format!("{name}x-OtherStacksAlarm-5E6F"), "ALARM"),
    ]));
    let cloudwatch = cloudwatch(Arc::clone(&alarms));
    let check = |args: &[&str]| {
        let mut all = vec!["check"];
        all.extend_from_slice(args);
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_lakelog"))
            .args(&all)
            .envs(lakelog_tests::runtime_api::Function::standin_vars(standin.endpoint()))
            .env("AWS_REGION", lakelog_tests::REGION)
            .env("AWS_ENDPOINT_URL_CLOUDWATCH", &cloudwatch)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&output.stderr).into_owned();
        let found: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}: {said}"));
        (output.status.success(), found, said)
    };

    let args = ["--stack", name.as_str(), "--probes", "2", "--deadline", "60"];
    let (ok, found, said) = tokio::task::block_in_place(|| check(&args));
    assert!(ok, "{said}");
    assert_eq!(
        (&found["probe"]["landed"], &found["probe"]["rows"]),
        (&Value::Bool(true), &Value::from(2)),
        "{found}"
    );
    let names: Vec<&str> = found["alarms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "another stack's alarms are not this one's: {found}");
    assert!(said.contains("2 alarms, 0 firing"), "{said}");
    assert_eq!(found["streamAgeSeconds"], Value::from(1.5), "{found}");
    let hours = found["maintenance"]["hoursSinceOldest"].as_f64().unwrap();
    assert!((2.9..3.1).contains(&hours), "{found}");
    assert_eq!(found["maintenance"]["tables"], Value::from(2), "{found}");
    // The probes are left to the maintenance pass: their request is where it looks.
    let request = found["erasureRequest"].as_str().unwrap();
    assert!(request.ends_with("erasure-requests/lakelog-probes.json"), "{found}");
    let body: Value = serde_json::from_slice(&std::fs::read(request).unwrap()).unwrap();
    assert_eq!(body["players"], serde_json::json!(["lakelog-probe"]));
    assert_eq!(probe_rows(&table), 2);

    // A firing alarm fails the check and is named.
    alarms.lock().unwrap()[1].1 = "ALARM";
    let (ok, _, said) = tokio::task::block_in_place(|| check(&args));
    assert!(!ok);
    assert!(
        said.contains(&format!("1 firing: {name}-GameEventsSinkLagAlarm-3C4D")),
        "{said}"
    );
    drop(server);
}
