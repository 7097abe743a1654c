//! The real `bootstrap` binary, run as Lambda runs it: a local Runtime API feeds it the sample
//! requests of `events/`, its records go to a Kinesis stand-in, and a missing or bad setting ends
//! its init with a message a person reads.

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use lakelog_tests::runtime_api::{Answer, Function};
use lakelog_tests::{StandIn, read_stream, unique_name, unpacked};
use serde_json::Value;

const BINARY: &str = env!("CARGO_BIN_EXE_game-api-lambda");
/// The timeout template.yaml gives the API function.
const TIMEOUT: Duration = Duration::from_secs(15);
const WAIT: Duration = Duration::from_secs(60);

fn sample(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/../../events/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// The status and the JSON body of an API Gateway proxy response.
fn response(answer: Answer) -> (u64, Value) {
    let Answer::Response(response) = answer else {
        panic!("the function failed: {answer:?}");
    };
    let body = response["body"]
        .as_str()
        .unwrap_or_else(|| panic!("no body: {response}"));
    (
        response["statusCode"].as_u64().unwrap(),
        serde_json::from_str(body).unwrap(),
    )
}

/// A REST API with a stage, and the API Gateway keys of three games on it, as `lakelog games add`
/// makes them, the third one revoked: returns the API's id, the key ids and the keys.
async fn three_games(apigateway: &aws_sdk_apigateway::Client) -> (String, [String; 3], [String; 3]) {
    let api = apigateway
        .create_rest_api()
        .name(unique_name("games"))
        .send()
        .await
        .unwrap();
    let api_id = api.id().unwrap().to_owned();
    let root = apigateway
        .get_resources()
        .rest_api_id(&api_id)
        .send()
        .await
        .unwrap()
        .items()[0]
        .id()
        .unwrap()
        .to_owned();
    apigateway
        .put_method()
        .rest_api_id(&api_id)
        .resource_id(&root)
        .http_method("POST")
        .authorization_type("NONE")
        .api_key_required(true)
        .send()
        .await
        .unwrap();
    apigateway
        .put_integration()
        .rest_api_id(&api_id)
        .resource_id(&root)
        .http_method("POST")
        .r#type(aws_sdk_apigateway::types::IntegrationType::Mock)
        .send()
        .await
        .unwrap();
    apigateway
        .create_deployment()
        .rest_api_id(&api_id)
        .stage_name("prod")
        .send()
        .await
        .unwrap();
    let throttle = game_api::admin::Throttle { rate: 50.0, burst: 100 };
    let api = game_api::ApiStageRef {
        api_id: api_id.clone(),
        stage: "prod".into(),
    };
    let (mut ids, mut values) = (Vec::new(), Vec::new());
    let revoked = unique_name("revoked");
    for (name, max) in [
        (unique_name("miners"), 100.0),
        (unique_name("towns"), 1000.0),
        (revoked.clone(), 10.0),
    ] {
        let game = game_api::Game::new(&name).unwrap().with_amounts(0.0, max).unwrap();
        let key = game_api::admin::add_game(apigateway, &api, &game, throttle, None)
            .await
            .unwrap();
        assert!(key.key.as_deref().is_some_and(|k| k.len() >= 20), "{key:?}");
        ids.push(key.key_id);
        values.push(key.key.unwrap_or_default());
    }
    game_api::admin::revoke_game(apigateway, &api, &revoked).await.unwrap();
    let three = |v: &[String]| [v[0].clone(), v[1].clone(), v[2].clone()];
    (api_id, three(&ids), three(&values))
}

/// The sample request `name` as sent to the API `api_id` with the key `key_id`.
fn with_key(name: &str, api_id: &str, key_id: &str) -> Vec<u8> {
    let mut request: Value = serde_json::from_slice(&sample(name)).unwrap();
    request["requestContext"]["identity"]["apiKeyId"] = Value::from(key_id);
    request["requestContext"]["apiId"] = Value::from(api_id);
    request["requestContext"]["stage"] = Value::from("prod");
    request.to_string().into_bytes()
}

/// The API function started against the stand-in: the three games of [`three_games`] (their key
/// ids and keys), a stream of one shard, and the function's process with the stand-in's, the
/// stream's and `vars`, and behind the HTTP API front (`GAME_EVENTS_KEYS_STAGE`) when `front`.
struct Deployed {
    kinesis: aws_sdk_kinesis::Client,
    apigateway: aws_sdk_apigateway::Client,
    api_id: String,
    keys: [String; 3],
    values: [String; 3],
    stream: String,
    function: Function,
}

async fn deploy(standin: &StandIn, vars: &[(&str, &str)], front: bool) -> Deployed {
    let kinesis = aws_sdk_kinesis::Client::new(&standin.sdk_config());
    let apigateway = aws_sdk_apigateway::Client::new(&standin.sdk_config());
    let (api_id, keys, values) = three_games(&apigateway).await;
    let stream = unique_name("runtime-api");
    kinesis
        .create_stream()
        .stream_name(&stream)
        .shard_count(1)
        .send()
        .await
        .unwrap();
    let mut all: Vec<(&str, String)> = Function::standin_vars(standin.endpoint());
    all.push(("GAME_EVENTS_STREAM", stream.clone()));
    if front {
        all.push(("GAME_EVENTS_KEYS_STAGE", format!("{api_id}/prod")));
    }
    all.extend(vars.iter().map(|(name, value)| (*name, (*value).to_owned())));
    let all: Vec<(&str, &str)> = all.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let function = Function::start_with_timeout(Path::new(BINARY), &all, TIMEOUT).unwrap();
    Deployed {
        kinesis,
        apigateway,
        api_id,
        keys,
        values,
        stream,
        function,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_the_sample_requests_with_their_events_in_kinesis() {
    let standin = StandIn::connect().await.unwrap();
    let Deployed {
        kinesis,
        apigateway,
        api_id,
        keys: [miners, towns, revoked],
        stream,
        function,
        ..
    } = deploy(&standin, &[("METRICS_NAMESPACE", "lakelog/test")], false).await;

    let mut written = 0;
    for (name, events, key) in [
        ("apigw-single-event.json", 1, &miners),
        ("apigw-batch.json", 3, &towns),
        ("apigw-gzip-base64.json", 3, &miners),
    ] {
        let answer = tokio::task::block_in_place(|| function.invoke(&with_key(name, &api_id, key), WAIT)).unwrap();
        let (status, body) = response(answer);
        assert_eq!(status, 200, "{name}: {body}");
        assert_eq!(body["written"], events, "{name}: {body}");
        assert_eq!(body["results"].as_array().unwrap().len(), events, "{name}: {body}");
        written += events;
    }

    // A body that is not JSON is refused in words, and nothing is written.
    let mut bad: Value = serde_json::from_slice(&with_key("apigw-single-event.json", &api_id, &miners)).unwrap();
    bad["body"] = Value::from("{not json");
    let answer = tokio::task::block_in_place(|| function.invoke(bad.to_string().as_bytes(), WAIT)).unwrap();
    let (status, body) = response(answer);
    assert_eq!(status, 400, "{body}");
    assert!(body["message"].as_str().unwrap().contains("JSON"), "{body}");

    // A key of no game (one API Gateway accepted, but that names no game) writes nothing.
    let stranger = apigateway
        .create_api_key()
        .name(unique_name("not-a-game"))
        .enabled(true)
        .send()
        .await
        .unwrap();
    let answer = tokio::task::block_in_place(|| {
        function.invoke(
            &with_key("apigw-single-event.json", &api_id, stranger.id().unwrap()),
            WAIT,
        )
    })
    .unwrap();
    let no_game = (403, Some("the API key belongs to no game of this API"));
    let (status, body) = response(answer);
    assert_eq!((status, body["message"].as_str()), no_game);
    // A revoked game's key, should API Gateway still pass it on, writes nothing either.
    let answer =
        tokio::task::block_in_place(|| function.invoke(&with_key("apigw-single-event.json", &api_id, &revoked), WAIT))
            .unwrap();
    let (status, body) = response(answer);
    assert_eq!((status, body["message"].as_str()), no_game);
    // Nor does a game's key on another stack's API: a key counts on its own API only.
    let answer = tokio::task::block_in_place(|| {
        function.invoke(&with_key("apigw-single-event.json", "other-stack", &miners), WAIT)
    })
    .unwrap();
    let (status, body) = response(answer);
    assert_eq!((status, body["message"].as_str()), no_game);

    // Each record is stamped with the game of the key it came with, never the body's.
    let records = unpacked(read_stream(&kinesis, &stream).await.unwrap());
    assert_eq!(records.len(), written);
    let games: Vec<String> = records
        .iter()
        .map(|r| game_events::decode_record(&r.data).unwrap().game_id.unwrap())
        .collect();
    let miners_game = games[0].clone();
    assert!(miners_game.starts_with("miners"), "{games:?}");
    assert_eq!(games.iter().filter(|g| **g == miners_game).count(), 4, "{games:?}");
    let exited = function.stop();
    assert!(!exited.stderr.contains("panicked"), "{}", exited.stderr);

    // Its metrics, as CloudWatch would read them from the function's output.
    let sum =
        |name: &str, unit: &str, dimensions: &[(&str, &str)]| exited.metric_sum("lakelog/test", name, unit, dimensions);
    let api = [("Function", "game-api")];
    assert_eq!(sum("Requests", "Count", &api), 7.0);
    assert_eq!(sum("EventsAccepted", "Count", &api), written as f64);
    assert_eq!(sum("Answered2xx", "Count", &api), 3.0);
    assert_eq!(sum("Answered4xx", "Count", &api), 4.0);
    let per_game = [("Function", "game-api"), ("Game", miners_game.as_str())];
    assert_eq!(sum("EventsAccepted", "Count", &per_game), 4.0);
    assert_eq!(sum("Answered503", "Count", &api), 0.0);
    assert!(sum("Latency", "Milliseconds", &api) > 0.0);
    assert_eq!(
        sum(
            "RequestsRefused",
            "Count",
            &[("Function", "game-api"), ("Reason", "NotJson")]
        ),
        1.0
    );
}

/// Behind the HTTP API front (`GAME_EVENTS_KEYS_STAGE`, as the template sets it), a request
/// carries its key and no key id (`events/apigw-http-front.json`): the binary takes a game's key
/// and stamps that game, and refuses a revoked game's key and a made-up one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_the_http_front_it_checks_the_key_itself() {
    let standin = StandIn::connect().await.unwrap();
    let Deployed {
        kinesis,
        values: [miners, _, revoked],
        stream,
        function,
        ..
    } = deploy(&standin, &[], true).await;
    let sending = |key: &str| {
        let mut request: Value = serde_json::from_slice(&sample("apigw-http-front.json")).unwrap();
        request["headers"]["x-api-key"] = Value::from(key);
        request["multiValueHeaders"]["x-api-key"] = serde_json::json!([key]);
        request.to_string().into_bytes()
    };
    let answer = tokio::task::block_in_place(|| function.invoke(&sending(&miners), WAIT)).unwrap();
    let (status, body) = response(answer);
    assert_eq!((status, &body["written"]), (200, &Value::from(1)), "{body}");
    for refused in [revoked.as_str(), "a-made-up-key-of-some-length"] {
        let answer = tokio::task::block_in_place(|| function.invoke(&sending(refused), WAIT)).unwrap();
        let (status, body) = response(answer);
        assert_eq!(
            (status, body["message"].as_str()),
            (403, Some("the API key belongs to no game of this API")),
            "{refused}"
        );
    }
    let records = unpacked(read_stream(&kinesis, &stream).await.unwrap());
    assert_eq!(records.len(), 1);
    let game = game_events::decode_record(&records[0].data).unwrap().game_id.unwrap();
    assert!(game.starts_with("miners"), "{game}");
    let exited = function.stop();
    assert!(!exited.stderr.contains("panicked"), "{}", exited.stderr);
}

/// Starts the binary with `vars` and returns the message of the init error it must report.
fn init_error(vars: &[(&str, &str)]) -> String {
    Function::expect_init_error(Path::new(BINARY), vars, WAIT).unwrap()
}

#[test]
fn a_missing_or_bad_setting_ends_init_in_words() {
    assert_eq!(
        init_error(&[]),
        "the function cannot start: GAME_EVENTS_STREAM is not set"
    );
    let message = init_error(&[
        ("GAME_EVENTS_STREAM", "game-events"),
        ("GAME_EVENTS_PARTITION_KEY", "user"),
    ]);
    assert!(message.contains("GAME_EVENTS_PARTITION_KEY"), "{message}");
    assert!(message.contains("random"), "{message}");
    let message = init_error(&[
        ("GAME_EVENTS_STREAM", "game-events"),
        ("METRICS_NAMESPACE", "AWS/Lambda"),
    ]);
    assert!(message.contains("METRICS_NAMESPACE"), "{message}");
}

/// What a request of 100 events costs beyond its compute: the bytes the function writes to its
/// log (its metrics and its own lines, at the level and format the template deploys: `INFO`,
/// JSON) and the bytes of its answer (data transfer out). `scripts/cost` bills both; the figures
/// it uses are printed here (`cargo test -p game-api-lambda --test integration -- --nocapture
/// logs_and_answer`), and the bounds keep a change from logging per event unnoticed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_logs_and_answer_of_a_request_stay_small() {
    const REQUESTS: usize = 20;
    const EVENTS: usize = 100;
    let standin = StandIn::connect().await.unwrap();
    // What Lambda sets for `LoggingConfig: {LogFormat: JSON}` at the default level.
    let vars = [
        ("METRICS_NAMESPACE", "lakelog"),
        ("AWS_LAMBDA_LOG_FORMAT", "JSON"),
        ("AWS_LAMBDA_LOG_LEVEL", "INFO"),
        ("RUST_LOG", "info"),
    ];
    let Deployed {
        api_id,
        keys: [miners, _, _],
        function,
        ..
    } = deploy(&standin, &vars, false).await;

    let mut request: Value = serde_json::from_slice(&with_key("apigw-batch.json", &api_id, &miners)).unwrap();
    let body: Value = serde_json::from_str(request["body"].as_str().unwrap()).unwrap();
    let samples = body["events"].as_array().unwrap().clone();
    let (mut answered, mut answered_gzip) = (0, 0);
    for r in 0..REQUESTS {
        let events: Vec<Value> = (0..EVENTS)
            .map(|i| {
                let mut event = samples[i % samples.len()].clone();
                // Random ids, as clients make them (v4): what gzip cannot shrink.
                event["eventId"] = Value::from(random_uuid((r * EVENTS + i) as u64));
                event
            })
            .collect();
        request["body"] = Value::from(serde_json::json!({ "events": events }).to_string());
        // Every other request takes a gzip answer, as mobile HTTP stacks ask by default.
        let gzip = r % 2 == 1;
        request["headers"]["Accept-Encoding"] = Value::from(if gzip { "gzip, deflate, br" } else { "identity" });
        let answer = tokio::task::block_in_place(|| function.invoke(request.to_string().as_bytes(), WAIT)).unwrap();
        let Answer::Response(response) = answer else {
            panic!("the function failed: {answer:?}");
        };
        assert_eq!(response["statusCode"], 200, "{response}");
        let body = response["body"].as_str().unwrap();
        if gzip {
            // Base64 to API Gateway, which sends the client the bytes.
            assert_eq!(response["isBase64Encoded"], true, "{response}");
            assert_eq!(response["headers"]["content-encoding"], "gzip", "{response}");
            let bytes = STANDARD.decode(body).unwrap();
            let mut text = String::new();
            flate2::read::GzDecoder::new(&bytes[..])
                .read_to_string(&mut text)
                .unwrap();
            let plain: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(plain["written"], EVENTS, "{plain}");
            answered_gzip += bytes.len();
        } else {
            assert!(response["headers"].get("content-encoding").is_none(), "{response}");
            answered += body.len();
        }
    }
    let exited = function.stop();
    let logged = (exited.stdout.len() + exited.stderr.len()) / REQUESTS;
    let (answer, answer_gzip) = (answered / (REQUESTS / 2), answered_gzip / (REQUESTS / 2));
    println!(
        "a request of {EVENTS} events: {logged} bytes logged, an answer of {answer} bytes, {answer_gzip} with gzip"
    );
    assert!(answer_gzip * 3 < answer, "{answer_gzip} bytes gzip against {answer}");
    assert!(
        logged <= 2048,
        "{logged} bytes logged per request:\n{}{}",
        exited.stdout,
        exited.stderr
    );
    assert!(answer <= EVENTS * 160, "{answer} bytes answered per request");
}

/// A v4 UUID from `seed` (splitmix64): random-looking, and the same every run.
fn random_uuid(seed: u64) -> String {
    let mix = |mut z: u64| {
        z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let (a, b) = (mix(seed), mix(seed ^ 0x5555_5555_5555_5555));
    let hex = format!("{a:016x}{b:016x}");
    format!(
        "{}-{}-4{}-8{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &hex[20..32]
    )
}
