//! The real `bootstrap` binary, run as Lambda runs it: a local Runtime API feeds it
//! `events/scheduled-canary.json`, its probe goes through the game events API's handler, the
//! stream and the sink on this machine (the code the stack runs) into `game_events`, and its
//! report says how long that took; the maintenance pass then takes its erasure request, and
//! DuckDB finds the probe once before and never after.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use game_api::{ApiConfig, Game, Games, LocalStream};
use lake::StorageConfig;
use lakelog_tests::duckdb;
use lakelog_tests::runtime_api::{Answer, Function};
use lakelog_tests::{StandIn, unique_name};
use serde_json::Value;

const BINARY: &str = env!("CARGO_BIN_EXE_canary-lambda");
/// The timeout template.yaml gives the canary function.
const TIMEOUT: Duration = Duration::from_secs(180);
const WAIT: Duration = Duration::from_secs(120);
const EVENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../events/scheduled-canary.json");

/// No live page: the test's server only takes events.
struct NoLive;

impl local_pipeline::Live for NoLive {
    fn page(&self) -> String {
        String::new()
    }

    async fn figures(&self) -> Result<String, String> {
        Err("no live view".into())
    }
}

/// The game events API on 127.0.0.1 in front of an embedded stream whose records the sink
/// commits to `table`, as `lakelog serve` runs them, with `games`; stopped by the sender.
async fn pipeline(
    games: Games,
    table: &str,
) -> (String, tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let stream = Arc::new(LocalStream::with_capacity("game-events", 10_000));
    let sink = game_sink::Sink::open(&game_sink::Config::new(table, None).unwrap(), &StorageConfig::default())
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let address = listener.local_addr().unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(async move {
        let stop = Arc::new(AtomicBool::new(false));
        let consumer = tokio::spawn(local_pipeline::consume(Arc::clone(&stream), sink, Arc::clone(&stop)));
        let shutdown = async {
            let _ = stop_rx.await;
        };
        local_pipeline::accept_until::<_, NoLive>(
            listener,
            address,
            Arc::new(games),
            stream,
            ApiConfig::default(),
            None,
            shutdown,
        )
        .await;
        stop.store(true, Ordering::Release);
        consumer.await.unwrap();
    });
    (format!("http://{address}/events"), stop_tx, running)
}

/// An API key made in the API Gateway stand-in, as the stack makes the probe game's: its id and
/// value.
async fn probe_key(standin: &StandIn) -> (String, String) {
    let value = format!("probe-{}", uuid::Uuid::new_v4().simple());
    let key = aws_sdk_apigateway::Client::new(&standin.sdk_config())
        .create_api_key()
        .name(unique_name("lakelog-lakelog-probe"))
        .value(&value)
        .enabled(true)
        .send()
        .await
        .unwrap();
    (key.id().unwrap().to_owned(), value)
}

fn probe_rows(endpoint: &str, table: &str) -> i64 {
    let sql = format!(
        "SELECT count(*) FROM delta_scan('{table}') WHERE \"gameId\" = '{}'",
        canary::PROBE_GAME
    );
    duckdb(endpoint, &sql).unwrap()[0][0].as_i64().unwrap()
}

/// The canary's binary, probing `url` with the key `key_id` into `table`, its erasure requests to
/// `requests`.
fn canary(standin: &StandIn, url: String, key_id: String, table: &str, requests: &str) -> Function {
    let mut vars = Function::standin_vars(standin.endpoint());
    vars.extend([
        ("GAME_EVENTS_URL", url),
        ("PROBE_API_KEY_ID", key_id),
        ("GAME_EVENTS_TABLE_URI", table.to_owned()),
        ("ERASURE_REQUESTS_URI", requests.to_owned()),
        ("PROBE_DEADLINE_SECONDS", "60".to_owned()),
        ("METRICS_NAMESPACE", "lakelog/canary-test".to_owned()),
    ]);
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Function::start_with_timeout(Path::new(BINARY), &vars, TIMEOUT).unwrap()
}

/// The function's report of one scheduled invocation.
fn probe(function: &Function) -> Value {
    let event = std::fs::read(EVENT).unwrap();
    let answer = tokio::task::block_in_place(|| function.invoke(&event, WAIT)).unwrap();
    let Answer::Response(report) = answer else {
        panic!("the function failed: {answer:?}");
    };
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_becomes_a_row_once_and_is_erased() {
    let standin = StandIn::connect().await.unwrap();
    let (key_id, key) = probe_key(&standin).await;
    let dir = tempfile::tempdir().unwrap();
    let table = format!("{}/game_events", dir.path().display());
    let requests = format!("{}/erasure-requests", dir.path().display());
    let games = Games::keys(vec![
        (key.clone(), Game::new(canary::PROBE_GAME).unwrap()),
        (
            "a-players-key-of-twenty-chars".into(),
            Game::new("space-miners").unwrap(),
        ),
    ]);
    let (url, stop, running) = pipeline(games, &table).await;

    let function = canary(&standin, url, key_id, &table, &requests);
    let report = probe(&function);
    assert_eq!(
        (&report["accepted"], &report["landed"], &report["once"], &report["rows"]),
        (
            &Value::Bool(true),
            &Value::Bool(true),
            &Value::Bool(true),
            &Value::from(1)
        ),
        "{report}"
    );
    let seconds = report["acceptToRowSeconds"].as_f64().unwrap();
    assert!((0.0..60.0).contains(&seconds), "{report}");
    assert!(
        report["erasureRequest"]
            .as_str()
            .is_some_and(|r| r.ends_with(canary::ERASURE_REQUEST)),
        "{report}"
    );
    // A second probe while the first is still a row: found on its own, once.
    let second = probe(&function);
    assert_eq!(
        (&second["landed"], &second["rows"]),
        (&Value::Bool(true), &Value::from(1)),
        "{second}"
    );
    let exited = function.stop();
    let sum = |name: &str, unit: &str| exited.metric_sum("lakelog/canary-test", name, unit, &[("Function", "canary")]);
    assert_eq!(sum("ProbesNotLanded", "Count"), 0.0);
    assert!(sum("ProbeAcceptToRowSeconds", "Seconds") > 0.0);

    stop.send(()).unwrap();
    running.await.unwrap();
    assert_eq!(
        probe_rows(standin.endpoint(), &table),
        2,
        "both probes are rows until erased"
    );

    // The maintenance pass takes the request, as the stack's does.
    let config = maintenance_lambda::Config::from_vars(env_config::from_pairs(&[
        ("LAKE_TABLES", &table),
        ("ERASURE_REQUESTS_URI", &requests),
        ("GAME_EVENTS_TABLE_URI", &table),
    ]))
    .unwrap();
    let maintainer =
        maintenance_lambda::Maintainer::new(config, StorageConfig::default()).with_reader_grace(Duration::ZERO);
    let pass = maintenance_lambda::handle(
        lambda_runtime::LambdaEvent::new(
            lakelog_tests::maintenance::scheduled_event(),
            lakelog_tests::maintenance::context(),
        ),
        &maintainer,
    )
    .await
    .unwrap();
    assert_eq!(pass.erasures.len(), 1, "{pass:?}");
    assert_eq!(pass.erasures[0].rows_removed, 2, "{pass:?}");
    assert_eq!(probe_rows(standin.endpoint(), &table), 0, "the probes are erased");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_probe_is_counted_and_not_erased() {
    let standin = StandIn::connect().await.unwrap();
    let (key_id, _) = probe_key(&standin).await;
    let dir = tempfile::tempdir().unwrap();
    let table = format!("{}/game_events", dir.path().display());
    let requests = format!("{}/erasure-requests", dir.path().display());
    // The API does not know the probe game's key.
    let games = Games::keys(vec![(
        "a-players-key-of-twenty-chars".into(),
        Game::new("space-miners").unwrap(),
    )]);
    let (url, stop, running) = pipeline(games, &table).await;

    let function = canary(&standin, url, key_id, &table, &requests);
    let report = probe(&function);
    assert_eq!(
        (&report["accepted"], &report["landed"]),
        (&Value::Bool(false), &Value::Bool(false)),
        "{report}"
    );
    assert!(report["error"].as_str().unwrap().contains("HTTP 403"), "{report}");
    assert_eq!(report["erasureRequest"], Value::Null, "{report}");
    let exited = function.stop();
    assert_eq!(
        exited.metric_sum(
            "lakelog/canary-test",
            "ProbesNotLanded",
            "Count",
            &[("Function", "canary")]
        ),
        1.0
    );
    stop.send(()).unwrap();
    running.await.unwrap();
    assert!(!Path::new(&requests).join(canary::ERASURE_REQUEST).exists());
}

#[test]
fn an_unreadable_probe_key_ends_init_in_words() {
    let standin = StandIn::connect_blocking().unwrap();
    let mut vars = Function::standin_vars(standin.endpoint());
    vars.extend([
        ("GAME_EVENTS_URL", "http://127.0.0.1:9/events".to_owned()),
        ("PROBE_API_KEY_ID", "no-such-key".to_owned()),
        ("GAME_EVENTS_TABLE_URI", "s3://lake/game_events".to_owned()),
    ]);
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let message = Function::expect_init_error(Path::new(BINARY), &vars, WAIT).unwrap();
    assert!(
        message.starts_with("the function cannot start: cannot read the probe game's API key no-such-key"),
        "{message}"
    );
}
