//! The maintenance Lambda end to end on the stand-in S3: a game-events-like table with retried
//! (duplicate) events and access-log-like tables under a prefix, all on `s3://`, maintained by the
//! handler from `events/scheduled-maintenance.json`, then read back by DuckDB.

use std::sync::Arc;

use arrow::array::{Date32Array, Float64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use lake::{StorageConfig, Table, TableSpec};
use lakelog_tests::{StandIn, duckdb};
use lambda_runtime::{Context, LambdaEvent};
use maintenance_lambda::{Config, Maintainer, handle};

/// 2024-06-01, long closed.
const DAY: i32 = 19_875;

fn spec(partition: &str) -> TableSpec {
    let schema = Arc::new(Schema::new(vec![
        Field::new("eventId", DataType::Utf8, false),
        Field::new("amount", DataType::Float64, true),
        Field::new(partition, DataType::Date32, false),
    ]));
    TableSpec::new("t", schema, &[partition])
}

/// `commits` commits of the events `ids` (amount = the id's number), all on one closed day.
async fn table(uri: &str, storage: &StorageConfig, partition: &str, commits: usize, ids: &[u32]) {
    let spec = spec(partition);
    let mut table = Table::open_or_create(uri, &spec, storage).await.unwrap();
    for commit in 0..commits {
        let batch = RecordBatch::try_new(
            spec.schema.clone(),
            vec![
                Arc::new(StringArray::from_iter_values(ids.iter().map(|i| format!("event-{i}")))),
                Arc::new(Float64Array::from_iter_values(ids.iter().map(|i| f64::from(*i)))),
                Arc::new(Date32Array::from(vec![DAY; ids.len()])),
            ],
        )
        .unwrap();
        // A source of its own per commit: the same rows sent again are new sources, as a
        // redelivered Kinesis batch is.
        static SOURCES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = SOURCES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let source = format!("batch-{n}-{commit}");
        let mut writer = table.writer(&source).unwrap();
        writer.write(batch).await.unwrap();
        let files = writer.finish().await.unwrap();
        table
            .commit_sources(vec![files], &lake::Retry::default())
            .await
            .unwrap();
    }
}

fn context() -> Context {
    let mut context = Context::default();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    context.deadline = now + 15 * 60 * 1000;
    context
}

fn event() -> EventBridgeEvent {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../events/scheduled-maintenance.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

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

    let report = handle(LambdaEvent::new(event(), context()), &maintainer).await.unwrap();
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
    let again = handle(LambdaEvent::new(event(), context()), &maintainer).await.unwrap();
    assert!(
        again.tables.iter().all(|t| t.bins == 0 && t.error.is_none()),
        "{again:?}"
    );
}
