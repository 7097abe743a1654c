//! The handler driven by `events/scheduled-maintenance.json` over local tables: a game-events-like
//! table with duplicates, access-log-like tables found under a prefix, and a broken entry; and over
//! tables in the S3 stand-in, with the Glue entries of their Iceberg views.

use lake::{StorageConfig, Table};
use lakelog_tests::maintenance::{context, scheduled_event, table};
use lambda_runtime::LambdaEvent;
use maintenance_lambda::{Config, HandlerError, Maintainer, handle};

async fn stats(uri: &str) -> lake::FileStats {
    Table::open(uri, &StorageConfig::default())
        .await
        .unwrap()
        .file_stats()
        .unwrap()
}

fn maintainer(tables: &str) -> Maintainer {
    let config = Config::from_vars(|name| (name == "LAKE_TABLES").then(|| tables.to_owned())).unwrap();
    Maintainer::new(config, StorageConfig::default())
}

#[tokio::test]
async fn a_scheduled_event_maintains_every_table() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().display();
    let game = format!("{root}/game_events");
    // The same three events sent five times: 15 rows, 3 distinct.
    table(&game, &StorageConfig::default(), "eventDate", 5, &[1, 2, 3]).await;
    for bucket in ["web-assets", "backups"] {
        table(
            &format!("{root}/access_logs/{bucket}"),
            &StorageConfig::default(),
            "request_date",
            4,
            &[1, 2],
        )
        .await;
    }
    let tables = format!("{game}#dedup=eventId, {root}/access_logs/*");

    let report = handle(LambdaEvent::new(scheduled_event(), context()), &maintainer(&tables))
        .await
        .unwrap();
    assert!(!report.stopped_early, "{report:?}");
    assert_eq!(report.tables.len(), 3, "{report:?}");
    let game_report = report.tables.iter().find(|t| t.table == game).unwrap();
    assert_eq!(game_report.duplicates_removed, 12);
    assert_eq!((game_report.files_before, game_report.files_after), (5, 1));
    assert!(game_report.checkpoint_version.is_some());
    assert_eq!(stats(&game).await.rows, 3);
    for bucket in ["web-assets", "backups"] {
        let uri = format!("{root}/access_logs/{bucket}");
        let summary = report.tables.iter().find(|t| t.table == uri).unwrap();
        assert_eq!(
            (summary.files_before, summary.files_after, summary.duplicates_removed),
            (4, 1, 0)
        );
        let stats = stats(&uri).await;
        assert_eq!((stats.files, stats.rows), (1, 8), "no deduplication without a key");
    }
    let json = serde_json::to_value(&report).unwrap();
    assert!(json["tables"][0]["checkpointVersion"].as_u64().is_some(), "{json}");

    // The next run has nothing to compact.
    let again = handle(LambdaEvent::new(scheduled_event(), context()), &maintainer(&tables))
        .await
        .unwrap();
    assert!(
        again.tables.iter().all(|t| t.bins == 0 && t.error.is_none()),
        "{again:?}"
    );
}

#[tokio::test]
async fn a_broken_table_fails_the_invocation_after_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().display();
    let good = format!("{root}/good");
    table(&good, &StorageConfig::default(), "day", 3, &[1]).await;
    std::fs::create_dir_all(format!("{root}/not-a-table")).unwrap();
    let tables = format!("{root}/not-a-table,{good}");
    let err = handle(LambdaEvent::new(scheduled_event(), context()), &maintainer(&tables))
        .await
        .unwrap_err();
    let HandlerError::TablesFailed { failed, total, first } = &err else {
        panic!("not a table failure: {err}");
    };
    assert_eq!((*failed, *total), (1, 2));
    assert!(first.starts_with(&format!("{root}/not-a-table: ")), "{first}");
    assert_eq!(stats(&good).await.files, 1, "the good table was maintained");
    let diagnostic = lambda_runtime::Diagnostic::from(err);
    assert_eq!(diagnostic.error_type, "LakeMaintenance.TablesFailed");
}

#[tokio::test]
async fn nothing_starts_inside_the_reserve() {
    let dir = tempfile::tempdir().unwrap();
    let uri = format!("{}/t", dir.path().display());
    table(&uri, &StorageConfig::default(), "day", 3, &[1]).await;
    let mut context = context();
    // Two minutes left, three minutes of reserve.
    context.deadline -= 13 * 60 * 1000;
    let report = handle(LambdaEvent::new(scheduled_event(), context), &maintainer(&uri))
        .await
        .unwrap();
    assert!(report.stopped_early);
    assert_eq!(report.tables[0].skipped, vec!["all (deadline)"]);
    assert_eq!(stats(&uri).await.files, 3, "the table is untouched");
}

#[tokio::test]
async fn the_rotation_state_orders_the_tables_and_records_each_one() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().display();
    let tables: Vec<String> = ["a", "b", "c"].iter().map(|t| format!("{root}/{t}")).collect();
    for table_uri in &tables {
        table(table_uri, &StorageConfig::default(), "request_date", 2, &[1]).await;
    }
    let state_uri = format!("{root}/state");
    let entries = tables.join(",");
    let config = Config::from_vars(|name| match name {
        "LAKE_TABLES" => Some(entries.clone()),
        "MAINTENANCE_STATE_URI" => Some(state_uri.clone()),
        _ => None,
    })
    .unwrap();
    let maintainer = Maintainer::new(config, StorageConfig::default());
    // b was started longest ago, then c, then a: the order of this run.
    let store = maintenance_lambda::rotation::Store::open(&state_uri, &StorageConfig::default()).unwrap();
    let mut state = maintenance_lambda::rotation::State::default();
    for (table_uri, started) in tables.iter().zip([30, 10, 20]) {
        state.started(table_uri, started);
    }
    store.save(&state).await.unwrap();
    let report = handle(LambdaEvent::new(scheduled_event(), context()), &maintainer)
        .await
        .unwrap();
    let order: Vec<&str> = report.tables.iter().map(|t| t.table.as_str()).collect();
    assert_eq!(order, [&tables[1], &tables[2], &tables[0]]);
    assert_eq!(report.minutes_since_maintained, Some(0));
    // Each table's start and completion are recorded for the next run.
    let saved = store.load().await;
    let now = chrono::Utc::now().timestamp();
    for table_uri in &tables {
        let times = saved.tables[table_uri];
        assert!(
            now - times.started < 60 && times.completed.is_some_and(|c| now - c < 60),
            "{saved:?}"
        );
    }
}

/// An erasure request dropped in `ERASURE_REQUESTS_URI` is carried out by the next pass: the
/// players' rows leave the game table and no file under it holds them, the receipt lands under
/// `receipts/` (naming the players only by hash), and the request is gone. A request that is not
/// one stays, fails the invocation, and names its object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erasure_request_is_carried_out_with_its_receipt() {
    use fixtures::game::{Synth, SynthConfig};

    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().display().to_string();
    let game_table = format!("{root}/game_events");
    let requests = format!("{root}/erasure-requests");
    let storage = StorageConfig::default();

    // A day of 10 devices' events through the sink.
    let sink = game_sink::Sink::open(&game_sink::Config::new(&game_table, None).unwrap(), &storage)
        .await
        .unwrap();
    let time = chrono::Utc::now() - chrono::TimeDelta::days(3);
    let events = Synth::new(SynthConfig {
        seed: 5,
        devices: 10,
        ..SynthConfig::default()
    })
    .events(200, time);
    let envelope = game_events::Envelope::new(serde_json::Map::new());
    let records: Vec<_> = events
        .iter()
        .enumerate()
        .map(|(i, e)| {
            lakelog_tests::StreamRecord {
                shard_id: "shardId-000000000000".into(),
                sequence_number: format!("{}", 1000 + i),
                partition_key: format!("k{i}"),
                data: envelope.record(&e.clone().stamp(time)).unwrap(),
                arrival: time,
            }
            .to_lambda()
        })
        .collect();
    let staged = sink.process(&records, &lake::Retry::default()).await;
    assert_eq!(staged.rows, 200);
    let device = |e: &game_events::GameEvent| e.event_params.as_ref().unwrap().device_id.clone().unwrap();
    let forgotten = device(&events[0]);
    let theirs = events.iter().filter(|e| device(e) == forgotten).count() as u64;

    let folder = lake::Folder::open(&requests, &storage).unwrap();
    // Events sent before games had ids (no gameId) are any game's.
    let game = "lakelog-legends";
    folder
        .put(
            "2026-12-05-player.json",
            serde_json::to_vec(&serde_json::json!({"game": game, "players": [forgotten]})).unwrap(),
        )
        .await
        .unwrap();
    let vars = [
        ("LAKE_TABLES", game_table.clone()),
        ("ERASURE_REQUESTS_URI", requests.clone()),
        ("GAME_EVENTS_TABLE_URI", game_table.clone()),
    ];
    let config = Config::from_vars(|name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v.clone())).unwrap();
    let maintainer = Maintainer::new(config.clone(), storage.clone()).with_reader_grace(std::time::Duration::ZERO);
    let report = handle(LambdaEvent::new(scheduled_event(), context()), &maintainer)
        .await
        .unwrap();
    assert_eq!(report.erasures.len(), 1, "{report:?}");
    let done = &report.erasures[0];
    assert!(done.verified && done.error.is_none(), "{done:?}");
    assert_eq!(done.rows_removed, theirs);
    assert_eq!(stats(&game_table).await.rows, 200 - theirs);
    assert_eq!(folder.list().await.unwrap(), ["receipts/2026-12-05-player.json"]);
    let receipt = String::from_utf8(folder.get("receipts/2026-12-05-player.json").await.unwrap()).unwrap();
    assert!(
        !receipt.contains(&forgotten),
        "the receipt names the player only by hash"
    );
    let scan = Table::open(&game_table, &storage)
        .await
        .unwrap()
        .scan_folder(&lake::Erasure::new([forgotten.clone()]).equals("eventParams.device_id"))
        .await
        .unwrap();
    assert!(scan.files > 0 && scan.holding.is_empty(), "{scan:?}");

    // Three requests waiting at once are erased in one pass over the table: two of players
    // with rows, verified each, and one of an id no row holds, moved aside unverified.
    let mut others: Vec<String> = events.iter().map(device).filter(|d| *d != forgotten).collect();
    others.sort();
    others.dedup();
    let (a, b) = (others[0].clone(), others[1].clone());
    let of = |d: &str| events.iter().filter(|e| device(e) == d).count() as u64;
    for (name, player) in [
        ("a.json", &a),
        ("b.json", &b),
        ("nobody.json", &"no-such-device".to_owned()),
    ] {
        folder
            .put(
                name,
                serde_json::to_vec(&serde_json::json!({"game": game, "players": [player]})).unwrap(),
            )
            .await
            .unwrap();
    }
    let failed = handle(LambdaEvent::new(scheduled_event(), context()), &maintainer)
        .await
        .unwrap_err();
    assert!(
        matches!(&failed, HandlerError::ErasureFailed { request, .. } if request.ends_with("nobody.json")),
        "{failed}"
    );
    assert_eq!(stats(&game_table).await.rows, 200 - theirs - of(&a) - of(&b));
    let receipt = |name: &str| {
        let folder = folder.clone();
        let name = name.to_owned();
        async move { serde_json::from_slice::<serde_json::Value>(&folder.get(&name).await.unwrap()).unwrap() }
    };
    let (ra, rb, rn) = (
        receipt("receipts/a.json").await,
        receipt("receipts/b.json").await,
        receipt("receipts/nobody.json").await,
    );
    for r in [&ra, &rb, &rn] {
        assert_eq!(r["mergedRequests"], 2, "{r}");
    }
    assert_eq!(
        (ra["verified"].as_bool(), rb["verified"].as_bool()),
        (Some(true), Some(true))
    );
    assert_eq!(
        (rn["verified"].as_bool(), rn["found"].as_u64()),
        (Some(false), Some(0)),
        "{rn}"
    );
    assert_eq!(
        ra["tables"][&game_table]["erasure"]["version"], rb["tables"][&game_table]["erasure"]["version"],
        "one version erased both"
    );
    assert_ne!(ra["playersSha256"], rb["playersSha256"]);
    let left = folder.list().await.unwrap();
    assert!(
        left.contains(&"unmatched/nobody.json".to_owned()) && !left.iter().any(|n| !n.contains('/')),
        "{left:?}"
    );

    // An erasure still running at the end of its share of the pass (here, waiting out the
    // readers' grace) is stopped there: its request stays, and the next pass finishes it.
    let c = others[2].clone();
    folder
        .put(
            "c.json",
            serde_json::to_vec(&serde_json::json!({"game": game, "players": [c]})).unwrap(),
        )
        .await
        .unwrap();
    let patient =
        Maintainer::new(config.clone(), storage.clone()).with_reader_grace(std::time::Duration::from_secs(600));
    let mut short = context();
    // The reserve (180 s) and four seconds: two for the erasures, two for the tables.
    short.deadline = chrono::Utc::now().timestamp_millis() as u64 + 184_000;
    let started = std::time::Instant::now();
    let failed = handle(LambdaEvent::new(scheduled_event(), short), &patient)
        .await
        .unwrap_err();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "the grace was not waited out"
    );
    assert!(
        matches!(&failed, HandlerError::ErasureFailed { request, .. } if request.ends_with("c.json")),
        "{failed}"
    );
    assert!(failed.to_string().contains("stopped"), "{failed}");
    assert!(folder.list().await.unwrap().contains(&"c.json".to_owned()));
    let report = handle(LambdaEvent::new(scheduled_event(), context()), &maintainer)
        .await
        .unwrap();
    assert!(report.erasures.iter().all(|e| e.verified), "{report:?}");
    assert!(!folder.list().await.unwrap().contains(&"c.json".to_owned()));

    // Not a request: it stays, and the invocation fails naming it.
    folder.put("broken.json", b"{\"players\": 3}".to_vec()).await.unwrap();
    let failed = handle(LambdaEvent::new(scheduled_event(), context()), &maintainer)
        .await
        .unwrap_err();
    assert!(
        matches!(&failed, HandlerError::ErasureFailed { request, .. } if request.ends_with("broken.json")),
        "{failed}"
    );
    assert!(folder.list().await.unwrap().contains(&"broken.json".to_owned()));
}

/// With a catalog, a pass moves the Glue entry of each table's Iceberg view to the snapshot it
/// committed (creating the entry if there is none): the view of a table found under a prefix is
/// named as the ingest names it, and PyIceberg reads through each entry what Delta's reader does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_views_glue_entries_follow_the_pass() {
    let standin = lakelog_tests::StandIn::connect().await.unwrap();
    let glue = aws_sdk_glue::Client::new(&standin.sdk_config());
    let lake = standin.create_bucket("maintenance-glue").await.unwrap();
    let storage = StorageConfig {
        endpoint: Some(standin.endpoint().to_owned()),
        extra: standin.storage_options(),
    };
    let database = lake.replace('-', "_");
    let input = aws_sdk_glue::types::DatabaseInput::builder()
        .name(&database)
        .build()
        .unwrap();
    glue.create_database().database_input(input).send().await.unwrap();
    let game = lakelog_tests::StandIn::s3_uri(&lake, "game_events");
    table(&game, &storage, "eventDate", 5, &[1, 2, 3]).await;
    let logs = lakelog_tests::StandIn::s3_uri(&lake, "access_logs/web-assets");
    table(&logs, &storage, "request_date", 4, &[1, 2]).await;
    let tables = format!("{game}#dedup=eventId, s3://{lake}/access_logs/*");
    let config = Config::from_vars(|name| (name == "LAKE_TABLES").then(|| tables.clone())).unwrap();
    let catalog = catalog::Catalog::new(glue.clone(), &database);
    assert!(catalog.publish_views());
    let maintainer = Maintainer::new(config, storage).with_catalog(catalog);

    let report = handle(LambdaEvent::new(scheduled_event(), context()), &maintainer)
        .await
        .unwrap();
    assert!(report.tables.iter().all(|t| t.error.is_none()), "{report:?}");
    for name in ["game_events_iceberg", "access_logs_web_assets_iceberg"] {
        let entry = glue.get_table().database_name(&database).name(name).send().await;
        let entry = entry.unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert_eq!(entry.table().unwrap().parameters().unwrap()["table_type"], "ICEBERG");
    }
    // Deduplicated and compacted: 3 rows in the game table, 8 in the log table.
    lakelog_tests::assert_glue_views_mirror(
        Some(standin.endpoint()),
        &database,
        std::slice::from_ref(&game),
        Some(3),
    );
    lakelog_tests::assert_glue_views_mirror(Some(standin.endpoint()), &database, &[logs], Some(8));
}
