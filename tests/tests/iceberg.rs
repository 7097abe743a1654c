//! The Iceberg view of a table on the stand-in S3, read by DuckDB's Iceberg reader and by
//! PyIceberg and compared row for row with DuckDB's Delta reader after each change lakelog makes:
//! redelivered appends, the maintenance pass's compaction and deduplication, a committer killed
//! between its Delta commit and the view's snapshot, an added column, an erasure and its purge,
//! and a retention expiry; and after a thousand small commits with packing and compaction.

use std::sync::Arc;

use arrow::array::{Date32Array, Float64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use lake::{Erasure, StorageConfig, Table, TableSpec};
use lakelog_tests::maintenance::{DAY, context, scheduled_event, table};
use lakelog_tests::{StandIn, assert_views_mirror, iceberg_compare};
use lambda_runtime::LambdaEvent;
use maintenance_lambda::{Config, Maintainer, handle};

/// The view's metadata objects, by key, under the table `path` of `bucket`.
async fn view_objects(standin: &StandIn, bucket: &str, path: &str) -> Vec<String> {
    let listed = standin
        .s3()
        .list_objects_v2()
        .bucket(bucket)
        .prefix(format!("{path}/_iceberg/metadata/"))
        .send()
        .await
        .unwrap();
    listed
        .contents()
        .iter()
        .filter_map(|o| o.key().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_change_reaches_the_iceberg_view_and_both_readers_find_the_delta_rows() {
    let standin = StandIn::connect().await.unwrap();
    let lake = standin.create_bucket("iceberg-lake").await.unwrap();
    let storage = StorageConfig {
        endpoint: Some(standin.endpoint().to_owned()),
        extra: standin.storage_options(),
    };
    let endpoint = Some(standin.endpoint());
    let uri = StandIn::s3_uri(&lake, "game_events");
    let tables = [uri.clone()];

    // Each batch delivered three times: 12 rows, 4 distinct events.
    table(&uri, &storage, "eventDate", 3, &[1, 2, 3, 4]).await;
    assert_views_mirror(endpoint, &tables, Some(12));

    // The maintenance pass compacts and deduplicates: one snapshot replaces the files.
    let lake_tables = format!("{uri}#dedup=eventId");
    let config = Config::from_vars(|name| (name == "LAKE_TABLES").then(|| lake_tables.clone())).unwrap();
    let maintainer = Maintainer::new(config, storage.clone());
    let report = handle(LambdaEvent::new(scheduled_event(), context()), &maintainer)
        .await
        .unwrap();
    assert!(report.tables.iter().all(|t| t.error.is_none()), "{report:?}");
    assert_views_mirror(endpoint, &tables, Some(4));

    // A committer killed between its Delta commit and the view's metadata: the metadata file
    // it would have written is missing and the hint names the one before.
    table(&uri, &storage, "eventDate", 1, &[5]).await;
    let keys = view_objects(&standin, &lake, "game_events").await;
    let newest = keys
        .iter()
        .filter_map(|k| lake::iceberg_view::metadata_number(k))
        .max()
        .unwrap();
    let s3 = standin.s3();
    s3.delete_object()
        .bucket(&lake)
        .key(format!("game_events/_iceberg/metadata/v{newest}.metadata.json"))
        .send()
        .await
        .unwrap();
    s3.put_object()
        .bucket(&lake)
        .key("game_events/_iceberg/metadata/version-hint.text")
        .body((newest - 1).to_string().into_bytes().into())
        .send()
        .await
        .unwrap();
    let behind = iceberg_compare(endpoint, None, &tables).unwrap();
    assert_eq!(behind[0]["missingFromIceberg"], 1, "the view is behind: {behind:?}");
    // The next commit brings it up to date.
    table(&uri, &storage, "eventDate", 1, &[6]).await;
    assert_views_mirror(endpoint, &tables, Some(6));

    // A documented ADD COLUMNS: a nullable column, then rows that have it.
    let schema = Arc::new(Schema::new(vec![
        Field::new("eventId", DataType::Utf8, false),
        Field::new("amount", DataType::Float64, true),
        Field::new("eventDate", DataType::Date32, false),
        Field::new("country", DataType::Utf8, true),
    ]));
    let spec = TableSpec::new("t", schema.clone(), &["eventDate"]);
    let mut wider = Table::open_or_create(&uri, &spec, &storage).await.unwrap();
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from(vec!["event-7"])),
            Arc::new(Float64Array::from(vec![7.0])),
            Arc::new(Date32Array::from(vec![DAY])),
            Arc::new(StringArray::from(vec!["FI"])),
        ],
    )
    .unwrap();
    let mut writer = wider.writer("with-country").unwrap();
    writer.write(batch).await.unwrap();
    let files = writer.finish().await.unwrap();
    wider
        .commit_sources(vec![files], &lake::Retry::default())
        .await
        .unwrap();
    assert_views_mirror(endpoint, &tables, Some(7));
    let countries = lakelog_tests::duckdb(
        standin.endpoint(),
        &format!("SELECT count(country) FROM iceberg_scan('{uri}/_iceberg')"),
    )
    .unwrap();
    assert_eq!(countries[0][0], 1, "the new column reads through the view");

    // An erasure: the rows are gone from the view as from Delta, and after the purge no
    // snapshot is left that names the files it deleted.
    let erasure = Erasure::new(["event-1"]).equals("eventId");
    wider.erase(&erasure, &lake::Retry::default()).await.unwrap();
    assert_views_mirror(endpoint, &tables, Some(6));
    wider.purge(&erasure).await.unwrap();
    assert_views_mirror(endpoint, &tables, Some(6));
    let keys = view_objects(&standin, &lake, "game_events").await;
    let metadata_files: Vec<_> = keys
        .iter()
        .filter(|k| lake::iceberg_view::metadata_number(k).is_some())
        .collect();
    assert_eq!(
        metadata_files.len(),
        1,
        "no older metadata file outlives the purge: {keys:?}"
    );
    let snapshots = lakelog_tests::duckdb(
        standin.endpoint(),
        &format!("SELECT count(*) FROM iceberg_snapshots('{uri}/_iceberg')"),
    )
    .unwrap();
    assert_eq!(snapshots[0][0], 1, "one snapshot outlives the purge");

    // Retention: the day is long past; its partition goes from both.
    let expired = wider.expire(30, &lake::Retry::default()).await.unwrap();
    assert!(format!("{expired:?}").contains("2024-06-01"), "{expired:?}");
    assert_views_mirror(endpoint, &tables, Some(0));
}

/// A thousand small commits, as the sink makes them on a quiet stream (one record a batch, each
/// batch committed), with the sink packing small files beside its commits once 50 are there, then
/// the maintenance pass compacting and deduplicating the closed day: both Iceberg readers find the
/// Delta rows after the commits and after the compaction, and the view's metadata stays bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_small_commits_with_packing_and_compaction_read_the_same() {
    use chrono::TimeZone as _;

    const COMMITS: u64 = 1000;
    let dir = tempfile::tempdir().unwrap();
    let uri = format!("{}/game_events", dir.path().display());
    let config = game_sink::Config::new(&uri, None)
        .unwrap()
        .with_settle(Some(game_sink::Settle::after(50)));
    let sink = game_sink::Sink::open(&config, &StorageConfig::default()).await.unwrap();
    // A closed day, so that the maintenance pass compacts it.
    let day = chrono::Utc.with_ymd_and_hms(2024, 6, 1, 0, 0, 0).unwrap();
    for i in 0..COMMITS {
        let time = day + chrono::Duration::seconds(i64::try_from(i).unwrap() * 60);
        let records = lakelog_tests::level_ups("g1", &[format!("device-{}", i % 40)], i + 1, time);
        let report = sink.process(&records, &lake::Retry::default()).await;
        assert_eq!((report.rows, &report.retry_from), (1, &None), "batch {i}: {report:?}");
    }
    sink.settled().await;
    let table = Table::open(&uri, &StorageConfig::default()).await.unwrap();
    let version = table.delta().version().unwrap_or_default();
    assert!(version >= COMMITS, "one version a batch: {version}");
    let files = table.file_stats().unwrap().files;
    assert!(files < 100, "the sink packed the small files: {files} left");
    let tables = [uri.clone()];
    assert_views_mirror(None, &tables, Some(COMMITS as i64));

    let lake_tables = format!("{uri}#dedup=gameId+eventId");
    let config = Config::from_vars(|name| (name == "LAKE_TABLES").then(|| lake_tables.clone())).unwrap();
    let maintainer = Maintainer::new(config, StorageConfig::default());
    let report = handle(LambdaEvent::new(scheduled_event(), context()), &maintainer)
        .await
        .unwrap();
    assert_eq!(report.tables[0].files_after, 1, "{report:?}");
    assert_views_mirror(None, &tables, Some(COMMITS as i64));

    // Bounded: at most 20 snapshots, 16 manifests each and 11 metadata files, whatever the commits.
    let folder = dir.path().join("game_events").join(lake::iceberg_view::METADATA_FOLDER);
    let objects = std::fs::read_dir(&folder).unwrap().count();
    assert!(
        objects < 100,
        "{objects} objects in the view's metadata after {COMMITS} commits"
    );
}
