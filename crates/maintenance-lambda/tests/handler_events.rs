//! The handler driven by `events/scheduled-maintenance.json` over local tables: a game-events-like
//! table with duplicates, access-log-like tables found under a prefix, and a broken entry.

mod common;

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use common::table;
use lake::{StorageConfig, Table};
use lambda_runtime::{Context, LambdaEvent};
use maintenance_lambda::{Config, HandlerError, Maintainer, handle};

fn event() -> EventBridgeEvent {
    let path = format!("{}/../../events/scheduled-maintenance.json", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A Lambda context with 15 minutes left.
fn context() -> Context {
    let mut context = Context::default();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    context.deadline = now + 15 * 60 * 1000;
    context
}

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
    table(&game, "eventDate", 5, &["a", "b", "c"]).await;
    for bucket in ["web-assets", "backups"] {
        table(&format!("{root}/access_logs/{bucket}"), "request_date", 4, &["1", "2"]).await;
    }
    let tables = format!("{game}#dedup=id, {root}/access_logs/*");

    let report = handle(LambdaEvent::new(event(), context()), &maintainer(&tables))
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
    let again = handle(LambdaEvent::new(event(), context()), &maintainer(&tables))
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
    table(&good, "day", 3, &["x"]).await;
    std::fs::create_dir_all(format!("{root}/not-a-table")).unwrap();
    let tables = format!("{root}/not-a-table,{good}");
    let err = handle(LambdaEvent::new(event(), context()), &maintainer(&tables))
        .await
        .unwrap_err();
    let HandlerError::TablesFailed { failed, total, first } = &err;
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
    table(&uri, "day", 3, &["x"]).await;
    let mut context = context();
    // Two minutes left, three minutes of reserve.
    context.deadline -= 13 * 60 * 1000;
    let report = handle(LambdaEvent::new(event(), context), &maintainer(&uri))
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
        table(table_uri, "request_date", 2, &["1"]).await;
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
    let report = handle(LambdaEvent::new(event(), context()), &maintainer).await.unwrap();
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
