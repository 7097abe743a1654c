//! The maintenance Lambda end to end on the stand-in S3: a game-events-like table with retried
//! (duplicate) events and access-log-like tables under a prefix, all on `s3://`, maintained by the
//! handler from `events/scheduled-maintenance.json`, then read back by DuckDB.

use lake::{StorageConfig, Table};
use lakelog_tests::maintenance::{context, scheduled_event, table};
use lakelog_tests::{StandIn, duckdb};
use lambda_runtime::LambdaEvent;
use maintenance_lambda::{Config, Maintainer, handle};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_handler_compacts_and_deduplicates_tables_on_s3() {
    let standin = StandIn::connect().await.unwrap();
    let lake = standin.create_bucket("maintenance-lake").await.unwrap();
    let storage = StorageConfig {
        endpoint: Some(standin.endpoint().to_owned()),
        extra: standin.storage_options(),
    };
    let game = StandIn::s3_uri(&lake, "game_events");
    // Each batch sent three times (retries): 24 rows, 8 distinct events.
    for _ in 0..3 {
        table(&game, &storage, "eventDate", 1, &[1, 2, 3, 4]).await;
        table(&game, &storage, "eventDate", 1, &[5, 6, 7, 8]).await;
    }
    let buckets = ["web-assets", "backups"];
    for bucket in buckets {
        table(
            &StandIn::s3_uri(&lake, &format!("access_logs/{bucket}")),
            &storage,
            "request_date",
            5,
            &[1, 2],
        )
        .await;
    }
    let tables = format!("{game}#dedup=eventId s3://{lake}/access_logs/*");
    let config = Config::from_vars(|name| (name == "LAKE_TABLES").then(|| tables.clone())).unwrap();
    let maintainer = Maintainer::new(config, storage.clone());

    let report = handle(LambdaEvent::new(scheduled_event(), context()), &maintainer)
        .await
        .unwrap();
    assert_eq!(report.tables.len(), 3, "{report:?}");
    assert!(
        report.tables.iter().all(|t| t.error.is_none() && t.skipped.is_empty()),
        "{report:?}"
    );
    let summary = report.tables.iter().find(|t| t.table == game).unwrap();
    assert_eq!(
        (summary.files_before, summary.files_after, summary.duplicates_removed),
        (6, 1, 16)
    );
    assert!(summary.checkpoint_version.is_some());

    let stats = Table::open(&game, &storage).await.unwrap().file_stats().unwrap();
    assert_eq!((stats.files, stats.rows), (1, 8));
    for bucket in buckets {
        let uri = StandIn::s3_uri(&lake, &format!("access_logs/{bucket}"));
        let stats = Table::open(&uri, &storage).await.unwrap().file_stats().unwrap();
        assert_eq!(
            (stats.files, stats.rows),
            (1, 10),
            "{uri}: no deduplication without a key"
        );
    }

    // An independent reader sees each event once, with its amount, in its partition.
    let rows = duckdb(
        standin.endpoint(),
        &format!(
            "SELECT count(*), count(DISTINCT eventId), sum(amount), min(eventDate)::VARCHAR FROM delta_scan('{game}')"
        ),
    )
    .unwrap();
    assert_eq!(rows[0][0], 8);
    assert_eq!(rows[0][1], 8);
    assert_eq!(rows[0][2].as_f64(), Some(36.0));
    assert_eq!(rows[0][3], "2024-06-01");

    // The next pass finds nothing to do.
    let again = handle(LambdaEvent::new(scheduled_event(), context()), &maintainer)
        .await
        .unwrap();
    assert!(
        again.tables.iter().all(|t| t.bins == 0 && t.error.is_none()),
        "{again:?}"
    );
}

/// Copies the folder `from` into `to`, recursively.
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Today's sink writes 20 events of `game` to the table at `uri`, each sent twice with the
/// client's `eventId` through the API's handler (in two batches: the sink drops an `eventId`
/// repeated within one batch itself); then a maintenance pass closes every partition and
/// compacts it, deduplicated by today's key. Its report.
async fn send_each_twice_and_compact(uri: &str, game: &str) -> lake::maintenance::TableReport {
    use game_api::{ApiConfig, Game, Games, LocalStream, respond};
    use lake::maintenance::{CompactOptions, MaintenanceOptions, maintain};

    const KEY: &str = "today-test-key-0123456789";
    let storage = StorageConfig::default();
    let sink = game_sink::Sink::open(&game_sink::Config::new(uri, None).unwrap(), &storage)
        .await
        .unwrap_or_else(|e| panic!("today's sink cannot open {uri}: {e}"));
    let games = Games::keys([(KEY.to_owned(), Game::new(game).unwrap())]);
    let stream = LocalStream::new(game);
    let body: Vec<serde_json::Value> = (0..20)
        .map(|i| {
            serde_json::json!({
                "eventId": format!("00000000-0000-4000-8000-{i:012}"),
                "eventName": "levelUp",
                "eventParams": {"device_id": format!("d{i}"), "level": i},
            })
        })
        .collect();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../events/apigw-batch.json");
    let mut request: aws_lambda_events::apigw::ApiGatewayProxyRequest =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    request.body = Some(serde_json::json!({ "events": body }).to_string());
    request.headers.insert(
        game_api::API_KEY_HEADER,
        aws_lambda_events::http::HeaderValue::from_static(KEY),
    );
    for _ in 0..2 {
        let response = respond(&request, &games, &stream, &ApiConfig::default()).await;
        assert_eq!(response.status_code, 200, "{:?}", response.body);
        let report = sink.process(&stream.drain(), &lake::Retry::default()).await;
        assert_eq!((report.rows, report.retry_from), (20, None), "{uri}");
    }
    maintain(
        uri,
        &storage,
        &MaintenanceOptions::all(CompactOptions {
            grace: chrono::TimeDelta::zero(),
            dedup_key: Some(game_events::batch::DEDUP_KEY.to_owned()),
            now: chrono::Utc::now() + chrono::TimeDelta::days(2),
            ..CompactOptions::default()
        }),
        &(),
    )
    .await
    .unwrap()
}

/// Tables that earlier releases of lakelog wrote with their own code (`lakelog serve` fed by
/// `lakelog send-events`; tests/fixtures/releases/README.md says which releases and how): one from
/// before `gameId`, `extraParams` and `extraFields`, one from before the packing tags. Today's
/// release opens each, writes events to it (each sent twice, as a client resends), compacts it
/// with deduplication by today's key, checkpoints and vacuums it, and DuckDB counts every row once,
/// through the Delta log and through the Iceberg view the first commit of this release made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_of_earlier_releases_are_written_and_maintained_by_this_one() {
    let releases = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/releases");
    for release in ["8e3b438", "5a1f3db"] {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(&releases.join(release), dir.path());
        let events = dir.path().join("game_events");
        let uri = events.to_str().unwrap();
        let count = |sql: &str| -> Vec<serde_json::Value> {
            duckdb("http://127.0.0.1:9", &format!("{sql} FROM delta_scan('{uri}')"))
                .unwrap()
                .remove(0)
        };
        let before = count("SELECT count(*), count(DISTINCT eventId)");
        assert_eq!(before[0], before[1], "{release}: the fixture holds each event once");
        let old_rows = before[0].as_i64().unwrap();
        assert!(old_rows > 0, "{release}: an empty fixture");

        // Today's sink writes 20 events of a game, each sent twice with the client's eventId, and
        // every partition is closed, deduplicated by today's key against files of the old release.
        let report = send_each_twice_and_compact(uri, "upgraded").await;
        assert!(report.failed.is_empty(), "{release}: {:?}", report.failure());
        assert_eq!(report.compaction.map(|c| c.duplicates()), Some(20), "{release}");
        assert!(report.checkpoint.is_some() && report.vacuum.is_some(), "{release}");

        let after = count(
            "SELECT count(*), count(DISTINCT (coalesce(gameId, ''), eventId)), count(gameId), \
             count(*) FILTER (WHERE gameId = 'upgraded' AND eventParams.device_id IS NOT NULL)",
        );
        assert_eq!(after[0].as_i64(), Some(old_rows + 20), "{release}: {after:?}");
        assert_eq!(after[1], after[0], "{release}: each event once");
        assert_eq!(after[3], 20, "{release}: {after:?}");
        // The old release wrote no Iceberg view; this one's first commit made it, over every file.
        lakelog_tests::assert_views_mirror(None, &[uri.to_owned()], Some(old_rows + 20));
    }
}

/// A rollback: a newer release grew the table (a nullable column, and a nullable field at the end
/// of `eventParams`, as a release that types one more parameter adds them); today's release,
/// deployed again over it, opens it without changing its schema, writes events (each sent twice)
/// and compacts them, and DuckDB counts every row once, the newer release's column and field null
/// in today's rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn this_release_writes_a_table_a_newer_release_grew() {
    use arrow::datatypes::{DataType, Field, Schema};
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("game_events");
    let uri = uri.to_str().unwrap();
    let storage = StorageConfig::default();
    // The newer release's spec: today's, with one more column and one more typed parameter.
    let today = game_sink::events_table_spec();
    let mut newer = today.clone();
    let fields: Vec<Field> = today
        .schema
        .fields()
        .iter()
        .map(|f| match (f.name().as_str(), f.data_type()) {
            ("eventParams", DataType::Struct(params)) => {
                let mut params: Vec<Field> = params.iter().map(|p| p.as_ref().clone()).collect();
                params.push(Field::new("newer_parameter", DataType::Utf8, true));
                Field::new("eventParams", DataType::Struct(params.into()), f.is_nullable())
            }
            _ => f.as_ref().clone(),
        })
        .chain([Field::new("newerColumn", DataType::Utf8, true)])
        .collect();
    newer.schema = std::sync::Arc::new(Schema::new(fields));
    let grown = Table::open_or_create(uri, &newer, &storage).await.unwrap();
    let version = grown.delta().version();

    let report = send_each_twice_and_compact(uri, "rolled-back").await;
    assert!(report.failed.is_empty(), "{:?}", report.failure());
    assert_eq!(report.compaction.map(|c| c.duplicates()), Some(20));

    let rows = duckdb(
        "http://127.0.0.1:9",
        &format!(
            "SELECT count(*), count(DISTINCT eventId), count(newerColumn), count(eventParams.newer_parameter), \
             count(eventParams.device_id) FROM delta_scan('{uri}')"
        ),
    )
    .unwrap()
    .remove(0);
    assert_eq!(
        rows,
        [20, 20, 0, 0, 20],
        "each event once, the newer column and field null"
    );
    let reopened = Table::open(uri, &storage).await.unwrap();
    assert!(reopened.delta().version() > version, "today's rows were committed");
    let schema = reopened.delta().snapshot().unwrap().schema();
    assert!(
        schema.field("newerColumn").is_some(),
        "the newer release's column stays"
    );
}

/// An erasure request names a pseudonymising game's player by the id the client sent: the
/// function reads the game's key from Parameter Store (the stand-in's) and erases the rows of the
/// player's pseudonym, verified.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erasure_request_reaches_a_pseudonymising_games_rows_through_its_key() {
    let standin = StandIn::connect().await.unwrap();
    let ssm = aws_sdk_ssm::Client::new(&standin.sdk_config());
    let api = game_api::ApiStageRef {
        api_id: lakelog_tests::unique_name("api"),
        stage: "prod".into(),
    };
    let game = "hashed-heroes";
    let key = "a-pseudonym-key-of-32-characters";
    ssm.put_parameter()
        .name(game_api::pseudonym_key_name(&api, game))
        .value(key)
        .r#type(aws_sdk_ssm::types::ParameterType::SecureString)
        .send()
        .await
        .unwrap();
    let pseudonym = game_api::Pseudonym::new("device_id", key.as_bytes().to_vec()).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().display().to_string();
    let events = format!("{root}/game_events");
    let requests = format!("{root}/erasure-requests");
    let storage = StorageConfig::default();
    let sink = game_sink::Sink::open(&game_sink::Config::new(&events, None).unwrap(), &storage)
        .await
        .unwrap();
    let devices: Vec<String> = (0..7)
        .map(|i| pseudonym.of(if i < 4 { "player-1" } else { "player-2" }))
        .collect();
    let time = chrono::Utc::now() - chrono::TimeDelta::days(1);
    let records = lakelog_tests::level_ups(game, &devices, 10, time);
    assert_eq!(sink.process(&records, &lake::Retry::default()).await.rows, 7);

    let folder = lake::Folder::open(&requests, &storage).unwrap();
    folder
        .put(
            "ticket-1.json",
            serde_json::to_vec(&serde_json::json!({"game": game, "players": ["player-1"]})).unwrap(),
        )
        .await
        .unwrap();
    let vars = [
        ("LAKE_TABLES", events.clone()),
        ("ERASURE_REQUESTS_URI", requests.clone()),
        ("GAME_EVENTS_TABLE_URI", events.clone()),
        ("GAME_EVENTS_API_ID", api.api_id.clone()),
    ];
    let config = Config::from_vars(|name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v.clone())).unwrap();
    let maintainer = Maintainer::new(config, storage.clone())
        .with_reader_grace(std::time::Duration::ZERO)
        .with_ssm(ssm);
    let report = handle(LambdaEvent::new(scheduled_event(), context()), &maintainer)
        .await
        .unwrap();
    let done = &report.erasures[0];
    assert!(done.verified && done.error.is_none(), "{done:?}");
    assert_eq!(done.rows_removed, 4);
    let left = Table::open(&events, &storage).await.unwrap().file_stats().unwrap().rows;
    assert_eq!(left, 3, "the other player's rows stay");
}
