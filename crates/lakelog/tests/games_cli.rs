//! `lakelog games` against API Gateway (moto's): each game gets a key and a usage plan of its own,
//! tagged with the game; its settings change in place; revoking one game leaves the others' keys
//! enabled, and each command acts on one API's games only, whatever another stack's games are
//! called.

use lakelog_tests::{StandIn, unique_name};
use serde_json::Value;

/// Runs `lakelog games ARGS` against AWS at `endpoint` (the stand-in, or a proxy in front of it).
fn run_games(endpoint: &str, args: &[&str]) -> std::process::Output {
    let args: Vec<&str> = ["games"].iter().chain(args).copied().collect();
    crate::common::lakelog_against(endpoint, &args)
}

/// A new REST API of the stand-in's API Gateway, as a stack creates one; its id.
async fn rest_api(apigateway: &aws_sdk_apigateway::Client, name: &str) -> String {
    let api = apigateway
        .create_rest_api()
        .name(unique_name(name))
        .send()
        .await
        .unwrap();
    api.id().unwrap().to_owned()
}

/// Runs `lakelog games ARGS` against the stand-in; its JSON lines.
fn games(standin: &StandIn, args: &[&str]) -> Vec<Value> {
    let args: Vec<&str> = ["games"].iter().chain(args).copied().collect();
    crate::common::lakelog_json(standin.endpoint(), &args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn games_are_added_listed_and_revoked_one_by_one() {
    let standin = StandIn::connect().await.unwrap();
    let apigateway = aws_sdk_apigateway::Client::new(&standin.sdk_config());
    let api_id = rest_api(&apigateway, "games-cli").await;
    let (miners, towns) = (unique_name("miners"), unique_name("towns"));
    let added = games(
        &standin,
        &[
            "add",
            &miners,
            "--api-id",
            &api_id,
            "--rate",
            "20",
            "--burst",
            "40",
            "--max-amount",
            "99.99",
        ],
    );
    assert_eq!(added.len(), 1);
    assert_eq!(added[0]["game"], miners.as_str());
    assert_eq!(added[0]["maxAmount"], 99.99);
    assert!(added[0]["key"].as_str().is_some_and(|k| k.len() >= 20), "{}", added[0]);
    let towns_added = games(&standin, &["add", &towns, "--api-id", &api_id]);
    // Each game gets a lane of the stream of its own: the least used one.
    assert_eq!(
        (&added[0]["lane"], &towns_added[0]["lane"]),
        (&Value::from("0/4"), &Value::from("1/4"))
    );
    // A game without a lane (the stack's first game) shares every shard: adding another says so.
    let lanes_api = rest_api(&apigateway, "games-cli-lanes").await;
    let first = unique_name("first");
    let first_added = games(&standin, &["add", &first, "--api-id", &lanes_api]);
    let first_plan = first_added[0]["usagePlanId"].as_str().unwrap();
    apigateway
        .untag_resource()
        .resource_arn(format!(
            "arn:aws:apigateway:{}::/usageplans/{first_plan}",
            lakelog_tests::REGION
        ))
        .tag_keys("lakelog:lane")
        .send()
        .await
        .unwrap();
    let another = run_games(
        standin.endpoint(),
        &["add", &unique_name("another"), "--api-id", &lanes_api],
    );
    let said = String::from_utf8_lossy(&another.stderr);
    assert!(another.status.success(), "{said}");
    assert!(
        said.contains(&format!("{first} has no lane: it shares every shard")),
        "{said}"
    );

    // Each key is in a usage plan of its own, with the game's throttle.
    let plan_id = added[0]["usagePlanId"].as_str().unwrap();
    let throttle_of = |plan_id: &str| {
        let apigateway = apigateway.clone();
        let plan_id = plan_id.to_owned();
        async move {
            let plan = apigateway.get_usage_plan().usage_plan_id(plan_id).send().await.unwrap();
            let throttle = plan.throttle().unwrap();
            (throttle.rate_limit(), throttle.burst_limit())
        }
    };
    assert_eq!(throttle_of(plan_id).await, (20.0, 40));
    // ... which changes in place, with the quota and the amount range, the key untouched.
    let set = games(
        &standin,
        &[
            "set",
            &miners,
            "--rate",
            "35",
            "--burst",
            "70",
            "--quota",
            "100000",
            "--quota-period",
            "week",
            "--min-amount",
            "0.5",
            "--lane",
            "2/4",
            "--api-id",
            &api_id,
        ],
    );
    assert_eq!(set[0]["lane"], "2/4");
    assert_eq!((set.len(), &set[0]["keyId"]), (1, &added[0]["keyId"]));
    assert_eq!(
        (&set[0]["rate"], &set[0]["burst"], &set[0]["quota"]),
        (
            &Value::from(35.0),
            &Value::from(70),
            &serde_json::json!({"limit": 100000, "period": "WEEK"})
        )
    );
    assert_eq!(
        (&set[0]["minAmount"], &set[0]["maxAmount"]),
        (&Value::from(0.5), &Value::from(99.99))
    );
    assert_eq!(throttle_of(plan_id).await, (35.0, 70));
    let plan = apigateway.get_usage_plan().usage_plan_id(plan_id).send().await.unwrap();
    let tags = plan.tags().unwrap();
    assert_eq!(
        (
            tags["lakelog:min-amount"].as_str(),
            tags["lakelog:max-amount"].as_str(),
            tags["lakelog:lane"].as_str()
        ),
        ("0.5", "99.99", "2/4")
    );
    assert_eq!(plan.quota().map(|q| q.limit()), Some(100_000));
    let refused = run_games(
        standin.endpoint(),
        &["set", &miners, "--min-amount", "500", "--api-id", &api_id],
    );
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("amount range \"500 to 99.99\""),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let keys = apigateway
        .get_usage_plan_keys()
        .usage_plan_id(plan_id)
        .send()
        .await
        .unwrap();
    let in_plan: Vec<&str> = keys.items().iter().filter_map(|k| k.id()).collect();
    assert_eq!(in_plan, [added[0]["keyId"].as_str().unwrap()]);

    // A game has one enabled key: adding it again is refused, in words.
    let again = run_games(standin.endpoint(), &["add", &miners, "--api-id", &api_id]);
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("already has a key"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );

    // A second stack's API in the same account: the same game names, each acting on its own.
    let staging_id = rest_api(&apigateway, "games-cli-staging").await;
    let staging_miners = games(&standin, &["add", &miners, "--api-id", &staging_id]);
    assert_ne!(staging_miners[0]["keyId"], added[0]["keyId"]);
    let revoked = games(&standin, &["revoke", &miners, "--api-id", &staging_id]);
    assert_eq!(revoked.len(), 1);
    assert_eq!(revoked[0]["keyId"], staging_miners[0]["keyId"], "only the staging key");
    let staging_listed = games(&standin, &["list", "--api-id", &staging_id]);
    assert_eq!(staging_listed.len(), 1, "{staging_listed:?}");
    assert_eq!(staging_listed[0]["enabled"], false);

    let revoked = games(&standin, &["revoke", &miners, "--api-id", &api_id]);
    assert_eq!((revoked.len(), &revoked[0]["enabled"]), (1, &Value::Bool(false)));
    let listed = games(&standin, &["list", "--api-id", &api_id]);
    assert_eq!(listed.len(), 2, "this API's keys only: {listed:?}");
    let state = |game: &str| -> Vec<bool> {
        listed
            .iter()
            .filter(|k| k["game"] == game)
            .map(|k| k["enabled"].as_bool().unwrap())
            .collect()
    };
    assert_eq!(state(&miners), [false], "the revoked key is disabled");
    assert_eq!(state(&towns), [true], "the other game's key is untouched");
    // Its usage plan is gone.
    let gone = apigateway.get_usage_plan().usage_plan_id(plan_id).send().await;
    assert!(
        gone.as_ref()
            .is_err_and(|e| e.as_service_error().is_some_and(|s| s.is_not_found_exception())),
        "{gone:?}"
    );
    // The revoked key itself, as API Gateway holds it.
    let key = apigateway
        .get_api_key()
        .api_key(added[0]["keyId"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert!(!key.enabled());
}

/// A failed `add` leaves nothing behind: API Gateway refuses the usage plan, and the key created
/// before it is deleted again, so that no enabled key of the game blocks a later `add`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_add_leaves_no_key_behind() {
    use lakelog_tests::faults::{FaultProxy, FaultRates};

    let standin = StandIn::connect().await.unwrap();
    let apigateway = aws_sdk_apigateway::Client::new(&standin.sdk_config());
    let api_id = rest_api(&apigateway, "games-cli-failing").await;
    let proxy = FaultProxy::start(standin.endpoint(), 31, FaultRates::none())
        .await
        .unwrap();
    proxy.set_rates(FaultRates {
        slow_down: 1.0,
        only_paths: Some("/usageplans".into()),
        only_writes: true,
        ..FaultRates::none()
    });
    let game = unique_name("flaky");
    let output = run_games(proxy.endpoint(), &["add", &game, "--api-id", &api_id]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("CreateUsagePlan"), "{stderr}");

    let keys = apigateway.get_api_keys().limit(500).send().await.unwrap();
    let left: Vec<_> = keys
        .items()
        .iter()
        .filter(|k| k.name() == Some(format!("lakelog-{game}").as_str()))
        .collect();
    assert!(left.is_empty(), "a key was left behind: {left:?}");
    // The store answers again: the game is added.
    proxy.set_rates(FaultRates::none());
    games(&standin, &["add", &game, "--api-id", &api_id]);
}

/// A key rotates without an outage: `rotate` gives the game a second enabled key in its usage
/// plan, both work while clients move, `retire` disables the old one, and the last key is never
/// retired by mistake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_rotates_with_both_keys_working_in_between() {
    let standin = StandIn::connect().await.unwrap();
    let apigateway = aws_sdk_apigateway::Client::new(&standin.sdk_config());
    let api_id = rest_api(&apigateway, "games-cli-rotate").await;
    let game = unique_name("rotating");
    let old = games(&standin, &["add", &game, "--api-id", &api_id, "--max-amount", "50"]).remove(0);
    let new = games(&standin, &["rotate", &game, "--api-id", &api_id]).remove(0);
    assert_ne!(new["keyId"], old["keyId"]);
    assert!(new["key"].as_str().is_some_and(|k| k.len() >= 20), "{new}");
    assert_eq!(
        (&new["usagePlanId"], &new["maxAmount"]),
        (&old["usagePlanId"], &old["maxAmount"])
    );
    // Both enabled, in the game's one usage plan (its throttle).
    let enabled = |listed: &[Value]| -> Vec<String> {
        let mut ids: Vec<String> = listed
            .iter()
            .filter(|k| k["game"] == game.as_str() && k["enabled"] == true)
            .map(|k| k["keyId"].as_str().unwrap().to_owned())
            .collect();
        ids.sort();
        ids
    };
    let mut both = vec![
        old["keyId"].as_str().unwrap().to_owned(),
        new["keyId"].as_str().unwrap().to_owned(),
    ];
    both.sort();
    assert_eq!(enabled(&games(&standin, &["list", "--api-id", &api_id])), both);
    let in_plan = apigateway
        .get_usage_plan_keys()
        .usage_plan_id(old["usagePlanId"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    let mut plan_keys: Vec<String> = in_plan
        .items()
        .iter()
        .filter_map(|k| k.id())
        .map(str::to_owned)
        .collect();
    plan_keys.sort();
    assert_eq!(plan_keys, both);

    // The API function takes either key for the game, as API Gateway hands it the key's id.
    let lookup = game_api::Games::ApiGateway(game_api::ApiGatewayGames::with_ttl(
        apigateway.clone(),
        std::time::Duration::ZERO,
    ));
    let request = |key: &Value| {
        let mut request = aws_lambda_events::apigw::ApiGatewayProxyRequest::default();
        request.request_context.identity.api_key_id = key["keyId"].as_str().map(str::to_owned);
        request.request_context.apiid = Some(api_id.clone());
        request.request_context.stage = Some("prod".into());
        request
    };
    for key in [&old, &new] {
        let resolved = lookup.resolve(&request(key)).await.unwrap();
        assert_eq!(
            (resolved.id.as_str(), resolved.limits.max_amount),
            (game.as_str(), 50.0)
        );
    }
    // A new amount range reaches the function once its cache expires (at once here).
    games(&standin, &["set", &game, "--max-amount", "75", "--api-id", &api_id]);
    for key in [&old, &new] {
        assert_eq!(lookup.resolve(&request(key)).await.unwrap().limits.max_amount, 75.0);
    }

    // The clients moved: the old key is retired, the new one goes on.
    let old_id = old["keyId"].as_str().unwrap();
    let retired = games(&standin, &["retire", &game, old_id, "--api-id", &api_id]);
    assert_eq!(retired[0]["enabled"], false);
    assert_eq!(
        enabled(&games(&standin, &["list", "--api-id", &api_id])),
        [new["keyId"].as_str().unwrap().to_owned()]
    );
    // ... and names no game for the function any more; the new key still does.
    assert_eq!(
        lookup.resolve(&request(&old)).await,
        Err(game_api::GameError::UnknownKey)
    );
    assert!(lookup.resolve(&request(&new)).await.is_ok());
    // The last key is not retired: that is what revoke is for.
    let last = run_games(
        standin.endpoint(),
        &["retire", &game, new["keyId"].as_str().unwrap(), "--api-id", &api_id],
    );
    assert!(!last.status.success());
    assert!(
        String::from_utf8_lossy(&last.stderr).contains("last enabled key"),
        "{}",
        String::from_utf8_lossy(&last.stderr)
    );
}

/// `--stack NAME` reads the API from the stack's outputs: the same games as `--api-id`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_name_finds_its_api() {
    let standin = StandIn::connect().await.unwrap();
    let apigateway = aws_sdk_apigateway::Client::new(&standin.sdk_config());
    let api_id = rest_api(&apigateway, "games-cli-stack").await;
    let stack = unique_name("lakelog-stack");
    let template = serde_json::json!({
        "Resources": {"Queue": {"Type": "AWS::SQS::Queue"}},
        "Outputs": {
            "GameEventsApiId": {"Value": api_id},
            "GameEventsApiStage": {"Value": "prod"}
        }
    });
    aws_sdk_cloudformation::Client::new(&standin.sdk_config())
        .create_stack()
        .stack_name(&stack)
        .template_body(template.to_string())
        .send()
        .await
        .unwrap();
    let game = unique_name("stacked");
    games(&standin, &["add", &game, "--stack", &stack]);
    let by_stack = games(&standin, &["list", "--stack", &stack]);
    assert_eq!(by_stack, games(&standin, &["list", "--api-id", &api_id]));
    assert_eq!((by_stack.len(), &by_stack[0]["game"]), (1, &Value::from(game.as_str())));

    let missing = run_games(standin.endpoint(), &["list", "--stack", "no-such-stack"]);
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("cannot read the outputs of the stack no-such-stack"),
        "{}",
        String::from_utf8_lossy(&missing.stderr)
    );
}

/// `games set --pseudonymise device_id` makes the game's key in Parameter Store and tags its
/// plan: the function's lookup then replaces every device id by its keyed hash before a record
/// is written, and refuses the game (503) rather than write raw ids when the key is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pseudonymised_game_writes_no_raw_device_id() {
    use fixtures::game::{Synth, SynthConfig};

    let standin = StandIn::connect().await.unwrap();
    let sdk = standin.sdk_config();
    let apigateway = aws_sdk_apigateway::Client::new(&sdk);
    let ssm = aws_sdk_ssm::Client::new(&sdk);
    let api_id = rest_api(&apigateway, "games-cli-pseudonyms").await;
    let game = unique_name("private");
    let key = games(&standin, &["add", &game, "--api-id", &api_id]).remove(0);
    games(
        &standin,
        &[
            "set",
            &game,
            "--pseudonymise",
            "device_id",
            "--no-wait",
            "--api-id",
            &api_id,
        ],
    );
    let stage = game_api::ApiStageRef {
        api_id: api_id.clone(),
        stage: "prod".into(),
    };
    let parameter = game_api::pseudonym_key_name(&stage, &game);
    let stored = ssm
        .get_parameter()
        .name(&parameter)
        .with_decryption(true)
        .send()
        .await
        .unwrap();
    assert_eq!(
        stored.parameter().unwrap().r#type(),
        Some(&aws_sdk_ssm::types::ParameterType::SecureString)
    );
    // Setting it again keeps the key: the game's pseudonyms do not change.
    games(
        &standin,
        &[
            "set",
            &game,
            "--pseudonymise",
            "device_id",
            "--no-wait",
            "--api-id",
            &api_id,
        ],
    );
    let again = ssm
        .get_parameter()
        .name(&parameter)
        .with_decryption(true)
        .send()
        .await
        .unwrap();
    assert_eq!(again.parameter().unwrap().value(), stored.parameter().unwrap().value());

    let lookup = game_api::Games::ApiGateway(
        game_api::ApiGatewayGames::with_ttl(apigateway.clone(), std::time::Duration::ZERO).with_ssm(ssm.clone()),
    );
    let events = Synth::new(SynthConfig {
        seed: 3,
        devices: 5,
        ..SynthConfig::default()
    })
    .events(20, chrono::Utc::now());
    let devices: std::collections::BTreeSet<String> = events
        .iter()
        .filter_map(|e| e.event_params.as_ref()?.device_id.clone())
        .collect();
    let mut request = aws_lambda_events::apigw::ApiGatewayProxyRequest::default();
    request.request_context.identity.api_key_id = key["keyId"].as_str().map(str::to_owned);
    request.request_context.apiid = Some(api_id.clone());
    request.request_context.stage = Some("prod".into());
    request.http_method = aws_lambda_events::http::Method::POST;
    request
        .headers
        .insert("content-type", "application/json".parse().unwrap());
    request.body = Some(serde_json::json!({ "events": events }).to_string());
    let resolved = lookup.resolve(&request).await.unwrap();
    let pseudonym = resolved.pseudonym.clone().expect("the game pseudonymises");
    let config = game_api::ApiConfig {
        partition_key: game_api::PartitionKey::DeviceId,
        ..game_api::ApiConfig::default()
    };
    let prepared = game_api::prepare(&request, &resolved, &config, chrono::Utc::now()).unwrap();
    assert_eq!(prepared.entries.len(), 20);
    for entry in &prepared.entries {
        let data = String::from_utf8_lossy(&entry.data);
        for device in &devices {
            assert!(!data.contains(device.as_str()), "a raw device id in {data}");
            assert_ne!(&entry.partition_key, device, "a raw device id as partition key");
        }
        let decoded = game_events::decode_record(&entry.data).unwrap();
        let hashed = decoded.event_params.unwrap().device_id.unwrap();
        assert!(
            devices.iter().any(|d| pseudonym.of(d) == hashed),
            "{hashed} is no device's pseudonym"
        );
    }

    // Without its key the game is refused, never written raw.
    ssm.delete_parameter().name(&parameter).send().await.unwrap();
    let refused = lookup.resolve(&request).await.unwrap_err();
    assert_eq!(refused.status(), 503, "{refused}");
    // Pseudonymisation off: the ids are written as sent.
    games(&standin, &["set", &game, "--no-pseudonymise", "--api-id", &api_id]);
    assert!(lookup.resolve(&request).await.unwrap().pseudonym.is_none());
}

/// A deployed game that pseudonymises: `lakelog forget --api-id` reads its key from Parameter
/// Store and erases the rows of the player's pseudonym, verified. Revoked and added again, the game
/// is refused unless told whether it goes on pseudonymising (its key outlived its plan and tag).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pseudonymising_games_player_is_erased_by_id_and_it_is_not_added_again_raw() {
    let standin = StandIn::connect().await.unwrap();
    let sdk = standin.sdk_config();
    let apigateway = aws_sdk_apigateway::Client::new(&sdk);
    let ssm = aws_sdk_ssm::Client::new(&sdk);
    let api_id = rest_api(&apigateway, "games-cli-forget").await;
    let game = unique_name("hashed");
    games(&standin, &["add", &game, "--api-id", &api_id]);
    games(
        &standin,
        &[
            "set",
            &game,
            "--pseudonymise",
            "device_id",
            "--no-wait",
            "--api-id",
            &api_id,
        ],
    );
    let stage = game_api::ApiStageRef {
        api_id: api_id.clone(),
        stage: "prod".into(),
    };
    let key = game_api::pseudonym_key(&ssm, &stage, &game).await.unwrap().unwrap();
    let pseudonym = game_api::Pseudonym::new("device_id", key).unwrap();

    // The game's rows, as the API wrote them: pseudonyms of two devices.
    let lake = tempfile::tempdir().unwrap();
    let table = lake.path().join("game_events").to_str().unwrap().to_owned();
    let sink = game_sink::Sink::open(
        &game_sink::Config::new(&table, None).unwrap(),
        &lake::StorageConfig::default(),
    )
    .await
    .unwrap();
    let devices: Vec<String> = (0..10)
        .map(|i| pseudonym.of(if i % 2 == 0 { "forgotten" } else { "kept" }))
        .collect();
    let records = lakelog_tests::level_ups(&game, &devices, 100, chrono::Utc::now());
    assert_eq!(sink.process(&records, &lake::Retry::default()).await.rows, 10);

    let forget = std::process::Command::new(env!("CARGO_BIN_EXE_lakelog"))
        .args(["forget", "--table", &table, "--game", &game, "--api-id", &api_id])
        .args(["--reader-grace", "0", "forgotten"])
        .envs(lakelog_tests::runtime_api::Function::standin_vars(standin.endpoint()))
        .env("AWS_REGION", lakelog_tests::REGION)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&forget.stderr);
    assert!(forget.status.success(), "{stderr}");
    let receipt: Value = serde_json::from_slice(&forget.stdout).unwrap();
    assert_eq!(
        (receipt["verified"].as_bool(), receipt["found"].as_u64()),
        (Some(true), Some(5)),
        "{receipt}"
    );
    let left = lake::Table::open(&table, &lake::StorageConfig::default())
        .await
        .unwrap()
        .file_stats()
        .unwrap()
        .rows;
    assert_eq!(left, 5, "the other device's rows stay");

    // Revoked, then added again: refused until told, then pseudonymising with the same key.
    games(&standin, &["revoke", &game, "--api-id", &api_id]);
    let again = run_games(standin.endpoint(), &["add", &game, "--api-id", &api_id]);
    let said = String::from_utf8_lossy(&again.stderr);
    assert!(
        !again.status.success() && said.contains("pseudonymised its ids before"),
        "{said}"
    );
    let added = games(
        &standin,
        &["add", &game, "--pseudonymise", "device_id", "--api-id", &api_id],
    );
    let lookup = game_api::Games::ApiGateway(
        game_api::ApiGatewayGames::with_ttl(apigateway.clone(), std::time::Duration::ZERO).with_ssm(ssm.clone()),
    );
    let mut request = aws_lambda_events::apigw::ApiGatewayProxyRequest::default();
    request.request_context.identity.api_key_id = added[0]["keyId"].as_str().map(str::to_owned);
    request.request_context.apiid = Some(api_id.clone());
    request.request_context.stage = Some("prod".into());
    let resolved = lookup.resolve(&request).await.unwrap();
    assert_eq!(
        resolved.pseudonym.as_ref().map(|p| p.of("forgotten")),
        Some(pseudonym.of("forgotten")),
        "the same key, pseudonymising again"
    );
}

/// Behind the HTTP API front, which checks no key, the function finds the key a request sends
/// (`events/apigw-http-front.json`) among the REST stage's: the game's key is taken, a made-up
/// key, another stack's key and a revoked key are not, and a key it did not know makes it read
/// the keys again only after [`game_api::UNKNOWN_KEY_REREAD`], so a flood of made-up keys costs
/// one listing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_front_takes_the_stages_keys_and_no_other() {
    let standin = StandIn::connect().await.unwrap();
    let apigateway = aws_sdk_apigateway::Client::new(&standin.sdk_config());
    let api_id = rest_api(&apigateway, "games-cli-http").await;
    let other_api = rest_api(&apigateway, "games-cli-http-other").await;
    let game = unique_name("fronted");
    let key = games(&standin, &["add", &game, "--api-id", &api_id, "--max-amount", "40"]).remove(0);
    let elsewhere = games(&standin, &["add", &unique_name("elsewhere"), "--api-id", &other_api]).remove(0);
    let stage = game_api::ApiStageRef {
        api_id: api_id.clone(),
        stage: "prod".into(),
    };
    let sample = format!("{}/../../events/apigw-http-front.json", env!("CARGO_MANIFEST_DIR"));
    let sample: aws_lambda_events::apigw::ApiGatewayProxyRequest =
        serde_json::from_str(&std::fs::read_to_string(sample).unwrap()).unwrap();
    let sending = |key: Option<&str>| {
        let mut request = sample.clone();
        request.headers.remove("x-api-key");
        request.multi_value_headers.remove("x-api-key");
        if let Some(key) = key {
            request.headers.insert("x-api-key", key.parse().unwrap());
        }
        request
    };
    let lookup = |ttl| {
        game_api::Games::ApiGateway(
            game_api::ApiGatewayGames::with_ttl(apigateway.clone(), ttl).with_front_stage(stage.clone()),
        )
    };

    let fresh = lookup(std::time::Duration::ZERO);
    let resolved = fresh.resolve(&sending(key["key"].as_str())).await.unwrap();
    assert_eq!(
        (resolved.id.as_str(), resolved.limits.max_amount),
        (game.as_str(), 40.0)
    );
    for refused in [Some("a-made-up-key-of-some-length"), elsewhere["key"].as_str()] {
        assert_eq!(
            fresh.resolve(&sending(refused)).await,
            Err(game_api::GameError::UnknownKey),
            "{refused:?}"
        );
    }
    assert_eq!(fresh.resolve(&sending(None)).await, Err(game_api::GameError::NoKey));
    // Without the front's stage, a request without a key id names no game.
    let rest_only = game_api::Games::ApiGateway(game_api::ApiGatewayGames::with_ttl(
        apigateway.clone(),
        std::time::Duration::ZERO,
    ));
    assert_eq!(
        rest_only.resolve(&sending(key["key"].as_str())).await,
        Err(game_api::GameError::NoKey)
    );

    // A key made after the keys were read is not looked for again at once.
    let remembering = lookup(game_api::KEY_CACHE_TTL);
    assert!(remembering.resolve(&sending(key["key"].as_str())).await.is_ok());
    let late = games(&standin, &["add", &unique_name("late"), "--api-id", &api_id]).remove(0);
    assert_eq!(
        remembering.resolve(&sending(late["key"].as_str())).await,
        Err(game_api::GameError::UnknownKey)
    );
    assert!(fresh.resolve(&sending(late["key"].as_str())).await.is_ok());

    // A revoked game's key is refused once the keys are read again.
    games(&standin, &["revoke", &game, "--api-id", &api_id]);
    assert_eq!(
        fresh.resolve(&sending(key["key"].as_str())).await,
        Err(game_api::GameError::UnknownKey)
    );
}

/// Games as code: a stage's games exported (their keys to Parameter Store, never into the file),
/// the old stack's games revoked and one game's keys deleted outright, the file applied to a new
/// stack's stage: every old key is taken there (200 from the API's own handling, through the
/// HTTP API front's lookup) with its game's settings and pseudonym key, and applying again
/// changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn games_carry_to_a_new_stack_with_their_keys() {
    let standin = StandIn::connect().await.unwrap();
    let sdk = standin.sdk_config();
    let apigateway = aws_sdk_apigateway::Client::new(&sdk);
    let ssm = aws_sdk_ssm::Client::new(&sdk);
    let old_api = rest_api(&apigateway, "games-code-old").await;
    let (miners, towns) = (unique_name("carried-miners"), unique_name("carried-towns"));
    let first = games(
        &standin,
        &[
            "add",
            &miners,
            "--api-id",
            &old_api,
            "--rate",
            "20",
            "--burst",
            "40",
            "--max-amount",
            "99",
            "--quota",
            "1000",
            "--quota-period",
            "day",
        ],
    )
    .remove(0);
    let second = games(&standin, &["rotate", &miners, "--api-id", &old_api]).remove(0);
    let town = games(
        &standin,
        &["add", &towns, "--api-id", &old_api, "--pseudonymise", "device_id"],
    )
    .remove(0);
    let values: Vec<String> = [&first, &second, &town]
        .iter()
        .map(|k| k["key"].as_str().unwrap().to_owned())
        .collect();

    let file = std::env::temp_dir().join(format!("{}.json", unique_name("games")));
    let prefix = format!("/lakelog-test/{}", unique_name("carried"));
    let out = file.to_str().unwrap();
    let exported = run_games(
        standin.endpoint(),
        &["export", "--api-id", &old_api, "--keys-to", &prefix, "--out", out],
    );
    assert!(
        exported.status.success(),
        "{}",
        String::from_utf8_lossy(&exported.stderr)
    );
    let text = std::fs::read_to_string(&file).unwrap();
    for value in &values {
        assert!(!text.contains(value.as_str()), "a key is in the file: {text}");
    }
    let parsed: Value = serde_json::from_str(&text).unwrap();
    let spec = |game: &str| {
        parsed["games"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["game"] == game)
            .cloned()
            .unwrap()
    };
    assert_eq!(spec(&miners)["keys"].as_array().unwrap().len(), 2, "{text}");
    assert_eq!(
        (&spec(&miners)["rate"], &spec(&miners)["quota"]["period"]),
        (&Value::from(20.0), &Value::from("DAY"))
    );
    assert_eq!(spec(&towns)["pseudonymise"], "device_id");
    let old_stage = game_api::ApiStageRef {
        api_id: old_api.clone(),
        stage: "prod".into(),
    };
    let pseudonym_key = game_api::pseudonym_key(&ssm, &old_stage, &towns)
        .await
        .unwrap()
        .unwrap();

    // The old stack goes: its games revoked, and the towns' keys deleted outright, as a move to
    // another region would find them.
    games(&standin, &["revoke", &miners, "--api-id", &old_api]);
    games(&standin, &["revoke", &towns, "--api-id", &old_api]);
    apigateway
        .delete_api_key()
        .api_key(town["keyId"].as_str().unwrap())
        .send()
        .await
        .unwrap();

    let new_api = rest_api(&apigateway, "games-code-new").await;
    // A file with a bad entry changes nothing, and says which entry.
    let broken = std::env::temp_dir().join(format!("{}.json", unique_name("broken")));
    let mut bad = parsed.clone();
    bad["games"].as_array_mut().unwrap().push(serde_json::json!({
        "game": "unreadable", "rate": 1, "burst": 1, "keys": [format!("ssm:{prefix}/missing")]
    }));
    std::fs::write(&broken, bad.to_string()).unwrap();
    let refused = run_games(
        standin.endpoint(),
        &["apply", broken.to_str().unwrap(), "--api-id", &new_api],
    );
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && said.contains("games[2] (unreadable)"),
        "{said}"
    );
    assert!(games(&standin, &["list", "--api-id", &new_api]).is_empty());
    std::fs::remove_file(&broken).unwrap();

    let applied = games(&standin, &["apply", out, "--api-id", &new_api]);
    let applied_to = |game: &str| applied.iter().find(|a| a["game"] == game).cloned().unwrap();
    assert_eq!(
        (&applied_to(&miners)["added"], &applied_to(&miners)["keysTakenIn"]),
        (&Value::Bool(true), &Value::from(2))
    );
    assert_eq!(applied_to(&towns)["keysMade"], 1);

    // Every old key names its game on the new stage, with its settings, through the API's own
    // handling of a request of the HTTP API front.
    let new_stage = game_api::ApiStageRef {
        api_id: new_api.clone(),
        stage: "prod".into(),
    };
    let lookup = game_api::Games::ApiGateway(
        game_api::ApiGatewayGames::with_ttl(apigateway.clone(), std::time::Duration::ZERO)
            .with_ssm(ssm.clone())
            .with_front_stage(new_stage.clone()),
    );
    let sample = format!("{}/../../events/apigw-http-front.json", env!("CARGO_MANIFEST_DIR"));
    let sample: aws_lambda_events::apigw::ApiGatewayProxyRequest =
        serde_json::from_str(&std::fs::read_to_string(sample).unwrap()).unwrap();
    let stream = game_api::LocalStream::new("carried");
    for (value, game) in values.iter().zip([&miners, &miners, &towns]) {
        let mut request = sample.clone();
        request.headers.insert("x-api-key", value.parse().unwrap());
        request.multi_value_headers.remove("x-api-key");
        let resolved = lookup.resolve(&request).await.unwrap();
        assert_eq!(&resolved.id, game);
        let (response, _) = game_api::answer(&request, &lookup, &stream, &game_api::ApiConfig::default()).await;
        assert_eq!(response.status_code, 200, "{:?}", response.body);
    }
    let listed = games(&standin, &["list", "--api-id", &new_api]);
    let miners_key = listed.iter().find(|k| k["game"] == miners.as_str()).unwrap();
    assert_eq!(
        (
            &miners_key["rate"],
            &miners_key["burst"],
            &miners_key["maxAmount"],
            &miners_key["quota"]["limit"]
        ),
        (
            &Value::from(20.0),
            &Value::from(40),
            &Value::from(99.0),
            &Value::from(1000)
        )
    );
    // The towns' pseudonyms stay the same: the new stage's key is the old one.
    assert_eq!(
        game_api::pseudonym_key(&ssm, &new_stage, &towns).await.unwrap(),
        Some(pseudonym_key)
    );

    // Applying again changes nothing.
    for again in games(&standin, &["apply", out, "--api-id", &new_api]) {
        assert_eq!(
            (&again["added"], &again["keysMade"], &again["keysTakenIn"]),
            (&Value::Bool(false), &Value::from(0), &Value::from(0)),
            "{again}"
        );
        assert!(again["keysKept"].as_u64().unwrap() >= 1, "{again}");
    }
    std::fs::remove_file(&file).unwrap();
}

/// The stack's first game (`FirstGameId`; its plan tagged `lakelog:stack-owned`) is not changed by
/// `lakelog games` while the stack declares it, since the stack's next update would undo that;
/// once the stack's `FirstGameId` no longer names it, `lakelog games` takes it over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stacks_first_game_is_changed_only_once_the_stack_hands_it_over() {
    let standin = StandIn::connect().await.unwrap();
    let sdk = standin.sdk_config();
    let apigateway = aws_sdk_apigateway::Client::new(&sdk);
    let cloudformation = aws_sdk_cloudformation::Client::new(&sdk);
    let api_id = rest_api(&apigateway, "games-stack-owned").await;
    let game = unique_name("first");
    let added = games(&standin, &["add", &game, "--api-id", &api_id]).remove(0);
    let stack = unique_name("lakelog-owner");
    apigateway
        .tag_resource()
        .resource_arn(format!(
            "arn:aws:apigateway:{}::/usageplans/{}",
            lakelog_tests::REGION,
            added["usagePlanId"].as_str().unwrap()
        ))
        .tags("lakelog:stack-owned", &stack)
        .send()
        .await
        .unwrap();
    let template = serde_json::json!({
        "Parameters": {"FirstGameId": {"Type": "String"}},
        "Resources": {"Queue": {"Type": "AWS::SQS::Queue"}}
    })
    .to_string();
    let parameter = |value: &str| {
        aws_sdk_cloudformation::types::Parameter::builder()
            .parameter_key("FirstGameId")
            .parameter_value(value)
            .build()
    };
    cloudformation
        .create_stack()
        .stack_name(&stack)
        .template_body(&template)
        .parameters(parameter(&game))
        .send()
        .await
        .unwrap();
    let listed = games(&standin, &["list", "--api-id", &api_id]);
    assert_eq!(listed[0]["ownedByStack"], stack.as_str());
    for change in [
        vec!["set", game.as_str(), "--max-amount", "5", "--api-id", &api_id],
        vec!["revoke", game.as_str(), "--api-id", &api_id],
        vec!["rotate", game.as_str(), "--api-id", &api_id],
    ] {
        let refused = run_games(standin.endpoint(), &change);
        let said = String::from_utf8_lossy(&refused.stderr);
        assert!(
            !refused.status.success() && said.contains(&format!("first game of the stack {stack}")),
            "{change:?}: {said}"
        );
    }
    assert_eq!(
        games(&standin, &["list", "--api-id", &api_id]),
        listed,
        "nothing changed"
    );

    // The stack hands it over (FirstGameId emptied; its key and plan stay in API Gateway).
    cloudformation
        .update_stack()
        .stack_name(&stack)
        .template_body(&template)
        .parameters(parameter(""))
        .send()
        .await
        .unwrap();
    let set = games(&standin, &["set", &game, "--max-amount", "5", "--api-id", &api_id]);
    assert_eq!(
        (&set[0]["maxAmount"], set[0].get("ownedByStack")),
        (&Value::from(5.0), None)
    );
}
