//! Tables registered in the Glue Data Catalog (moto's) as Athena reads Delta tables, and their
//! Iceberg views as Glue's Iceberg tables: the ingest registers each per-bucket table it opens, the
//! sink its two tables, and `lakelog catalog sync` tables created before; the views' entries follow
//! each commit.

use std::collections::BTreeMap;
use std::process::Command;

use access_log_ingest::{Ingestor, ObjectReader, TableTemplate};
use aws_lambda_events::event::kinesis::KinesisEvent;
use aws_sdk_glue::types::DatabaseInput;
use aws_sdk_s3::primitives::ByteStream;
use catalog::Catalog;
use fixtures::log_lines::{SynthConfig, corpus};
use lake::StorageConfig;
use lakelog_tests::{StandIn, unique_name};

async fn database(glue: &aws_sdk_glue::Client) -> String {
    let name = unique_name("lake").replace('-', "_").to_lowercase();
    glue.create_database()
        .database_input(DatabaseInput::builder().name(&name).build().unwrap())
        .send()
        .await
        .unwrap();
    name
}

/// Every table of `database`: name -> (table_type parameter, location, partition keys).
async fn tables(glue: &aws_sdk_glue::Client, database: &str) -> BTreeMap<String, (String, String, Vec<String>)> {
    let listed = glue.get_tables().database_name(database).send().await.unwrap();
    listed
        .table_list()
        .iter()
        .map(|t| {
            let kind = t
                .parameters()
                .and_then(|p| p.get("table_type"))
                .cloned()
                .unwrap_or_default();
            let location = t
                .storage_descriptor()
                .and_then(|s| s.location())
                .unwrap_or_default()
                .to_owned();
            let partitions = t.partition_keys().iter().map(|c| c.name().to_owned()).collect();
            (t.name().to_owned(), (kind, location, partitions))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_writers_register_their_tables_and_sync_registers_older_ones() {
    let standin = StandIn::connect().await.unwrap();
    let glue = aws_sdk_glue::Client::new(&standin.sdk_config());
    let raw = standin.create_bucket("catalog-raw").await.unwrap();
    let lake = standin.create_bucket("catalog-lake").await.unwrap();
    let storage = StorageConfig {
        endpoint: Some(standin.endpoint().to_owned()),
        extra: standin.storage_options(),
    };

    // Two observed buckets' logs, one object each, and a line that is no log line.
    for (i, bucket) in ["web-assets", "backups.example"].iter().enumerate() {
        let mut body = corpus(
            SynthConfig {
                seed: i as u64,
                malformed_rate: 0.0,
                buckets: vec![(*bucket).into()],
                ..SynthConfig::default()
            },
            16 * 1024,
        );
        body.extend_from_slice(b"not a log line\n");
        standin
            .s3()
            .put_object()
            .bucket(&raw)
            .key(format!("{bucket}/2024-06-01-00-00-0{i}-ABCDEF"))
            .body(ByteStream::from(body))
            .send()
            .await
            .unwrap();
    }
    let db = database(&glue).await;
    // The catalog the functions set up at init: it registers, and its views' entries follow
    // the metadata files this process writes.
    let catalog = Catalog::new(glue.clone(), &db);
    assert!(catalog.publish_views());
    let template = TableTemplate::parse("table", &format!("s3://{lake}/access_logs/{{bucket}}")).unwrap();
    let rejects = template.default_rejects();
    let reader = ObjectReader::s3(standin.s3());
    let objects = reader.list(&format!("s3://{raw}/")).await.unwrap();
    let ingestor = Ingestor::new(template, rejects, storage.clone(), reader, 2).with_catalog(catalog.clone());
    for (object, result) in ingestor.ingest(&objects, &lake::Retry::default(), &()).await {
        result.unwrap_or_else(|e| panic!("{object}: {e}"));
    }

    let sink_config = game_sink::Config::new(&StandIn::s3_uri(&lake, "game_events"), None).unwrap();
    let sink = game_sink::Sink::open(&sink_config, &storage).await.unwrap();
    sink.register(&catalog).await.unwrap();

    let registered = tables(&glue, &db).await;
    let entry = |kind: &str, path: &str, partitions: &[&str]| {
        (
            kind.to_owned(),
            format!("s3://{lake}/{path}/"),
            partitions.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>(),
        )
    };
    let delta = |path: &str, partitions: &[&str]| entry("DELTA", path, partitions);
    // Iceberg's partitions are hidden: no partition keys.
    let iceberg = |path: &str| entry("ICEBERG", path, &[]);
    let mut want = BTreeMap::from([
        (
            "access_logs_backups_example".to_owned(),
            delta("access_logs/backups.example", &["request_date"]),
        ),
        ("access_logs_rejects".to_owned(), delta("access_logs/_rejects", &[])),
        (
            "access_logs_web_assets".to_owned(),
            delta("access_logs/web-assets", &["request_date"]),
        ),
        ("game_events".to_owned(), delta("game_events", &["eventDate"])),
        ("game_events_rejects".to_owned(), delta("game_events_rejects", &[])),
        // The views of the tables with a commit: the sink's tables have none yet.
        (
            "access_logs_backups_example_iceberg".to_owned(),
            iceberg("access_logs/backups.example"),
        ),
        (
            "access_logs_rejects_iceberg".to_owned(),
            iceberg("access_logs/_rejects"),
        ),
        (
            "access_logs_web_assets_iceberg".to_owned(),
            iceberg("access_logs/web-assets"),
        ),
    ]);
    assert_eq!(registered, want);
    let access_tables: Vec<String> = [
        "access_logs/backups.example",
        "access_logs/_rejects",
        "access_logs/web-assets",
    ]
    .iter()
    .map(|path| StandIn::s3_uri(&lake, path))
    .collect();
    lakelog_tests::assert_glue_views_mirror(Some(standin.endpoint()), &db, &access_tables, None);

    // A later commit moves its view's entry to the new metadata file, keeping the one before.
    let web_assets = StandIn::s3_uri(&lake, "access_logs/web-assets");
    let before = lake::Table::open(&web_assets, &storage)
        .await
        .unwrap()
        .iceberg_metadata()
        .await
        .unwrap()
        .unwrap();
    let body = corpus(
        SynthConfig {
            seed: 7,
            malformed_rate: 0.0,
            buckets: vec!["web-assets".into()],
            ..SynthConfig::default()
        },
        8 * 1024,
    );
    let key = "web-assets/2024-06-02-00-00-00-ABCDEF";
    standin
        .s3()
        .put_object()
        .bucket(&raw)
        .key(key)
        .body(ByteStream::from(body))
        .send()
        .await
        .unwrap();
    let later = ObjectReader::s3(standin.s3())
        .list(&format!("s3://{raw}/{key}"))
        .await
        .unwrap();
    for (object, result) in ingestor.ingest(&later, &lake::Retry::default(), &()).await {
        result.unwrap_or_else(|e| panic!("{object}: {e}"));
    }
    let entry = glue
        .get_table()
        .database_name(&db)
        .name("access_logs_web_assets_iceberg")
        .send()
        .await
        .unwrap();
    let parameters = entry.table().unwrap().parameters().unwrap();
    assert_ne!(parameters["metadata_location"], before);
    assert_eq!(parameters["previous_metadata_location"], before);
    lakelog_tests::assert_glue_views_mirror(Some(standin.endpoint()), &db, std::slice::from_ref(&web_assets), None);

    // The sink's tables' views are registered with their first commit.
    for name in ["kinesis-game-events.json", "kinesis-bad-record.json"] {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../events/");
        let event: KinesisEvent = serde_json::from_slice(&std::fs::read(format!("{path}{name}")).unwrap()).unwrap();
        let report = sink.process(&event.records, &lake::Retry::default()).await;
        assert_eq!(report.retry_from, None, "{name}: {report:?}");
    }
    want.insert("game_events_iceberg".to_owned(), iceberg("game_events"));
    want.insert("game_events_rejects_iceberg".to_owned(), iceberg("game_events_rejects"));
    assert_eq!(tables(&glue, &db).await, want);
    let game_tables = [sink.events_uri().to_owned(), sink.rejects_uri().to_owned()];
    lakelog_tests::assert_glue_views_mirror(Some(standin.endpoint()), &db, &game_tables, None);
    let events = glue
        .get_table()
        .database_name(&db)
        .name("game_events")
        .send()
        .await
        .unwrap();
    let columns = events.table().unwrap().storage_descriptor().unwrap().columns();
    let event_params = columns.iter().find(|c| c.name() == "eventParams").unwrap();
    assert!(
        event_params.r#type().unwrap().starts_with("struct<"),
        "{:?}",
        event_params.r#type()
    );

    // The same tables, created before the catalog, registered by the command line.
    let other = database(&glue).await;
    // `lakelog catalog sync --database OTHER TABLES...` against the stand-in.
    let lakelog = |tables: &[String]| {
        Command::new(env!("CARGO_BIN_EXE_lakelog"))
            .args(["catalog", "sync", "--database", &other])
            .args(tables)
            .envs(lakelog_tests::runtime_api::Function::standin_vars(standin.endpoint()))
            .env("AWS_REGION", lakelog_tests::REGION)
            .output()
            .unwrap()
    };
    let sync = || {
        lakelog(&[
            format!("s3://{lake}/access_logs/*"),
            StandIn::s3_uri(&lake, "game_events"),
            StandIn::s3_uri(&lake, "game_events_rejects"),
        ])
    };
    let first = sync();
    let stdout = String::from_utf8_lossy(&first.stdout);
    assert!(
        first.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&first.stderr)
    );
    // Five tables and their views.
    assert_eq!(stdout.matches("created)").count(), 10, "{stdout}");
    assert_eq!(stdout.matches("(Iceberg view, created)").count(), 5, "{stdout}");
    assert_eq!(tables(&glue, &other).await, want);
    let again = sync();
    assert!(again.status.success());
    // Registering again what is registered writes nothing: Glue keeps one version of each table,
    // however many cold starts register it.
    assert_eq!(String::from_utf8_lossy(&again.stdout).matches("unchanged)").count(), 10);
    for name in want.keys() {
        let versions = glue
            .get_table_versions()
            .database_name(&other)
            .table_name(name)
            .send()
            .await
            .unwrap();
        assert_eq!(versions.table_versions().len(), 1, "{name}");
    }

    // A table that is not there fails the command, naming it.
    let missing = lakelog(&[StandIn::s3_uri(&lake, "no_such_table")]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no_such_table"));
}

/// Two buckets whose tables map to one catalog name (`a.b` and `a-b`): the second is refused,
/// naming both locations, and the first keeps its entry; a table whose schema grew is updated in
/// place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tables_never_share_a_catalog_name() {
    let standin = StandIn::connect().await.unwrap();
    let glue = aws_sdk_glue::Client::new(&standin.sdk_config());
    let lake = standin.create_bucket("catalog-names").await.unwrap();
    let storage = StorageConfig {
        endpoint: Some(standin.endpoint().to_owned()),
        extra: standin.storage_options(),
    };
    let db = database(&glue).await;
    let catalog = Catalog::new(glue.clone(), &db);
    let spec = game_sink::events_table_spec();
    let dotted = StandIn::s3_uri(&lake, "access_logs/a.b");
    let dashed = StandIn::s3_uri(&lake, "access_logs/a-b");
    let first = lake::Table::open_or_create(&dotted, &spec, &storage).await.unwrap();
    let second = lake::Table::open_or_create(&dashed, &spec, &storage).await.unwrap();
    let name = catalog::table_name(&dotted, true);
    assert_eq!(name, catalog::table_name(&dashed, true));

    assert_eq!(
        catalog.register(&name, &first).await.unwrap().table,
        catalog::Registered::Created
    );
    let err = catalog.register(&name, &second).await.unwrap_err().to_string();
    assert!(err.contains(&dotted) && err.contains(&dashed), "{err}");
    assert_eq!(
        tables(&glue, &db).await[&name].1,
        format!("{dotted}/"),
        "the first table keeps its entry"
    );
    assert_eq!(
        catalog.register(&name, &first).await.unwrap().table,
        catalog::Registered::Unchanged
    );

    // An entry that no longer matches its table (a column dropped by hand) is brought up to date.
    let entry = glue.get_table().database_name(&db).name(&name).send().await.unwrap();
    let entry = entry.table().unwrap();
    let descriptor = entry.storage_descriptor().unwrap();
    let fewer = aws_sdk_glue::types::StorageDescriptor::builder()
        .location(descriptor.location().unwrap())
        .set_columns(Some(descriptor.columns()[..1].to_vec()))
        .build();
    let input = aws_sdk_glue::types::TableInput::builder()
        .name(&name)
        .table_type("EXTERNAL_TABLE")
        .storage_descriptor(fewer)
        .build()
        .unwrap();
    glue.update_table()
        .database_name(&db)
        .table_input(input)
        .send()
        .await
        .unwrap();
    assert_eq!(
        catalog.register(&name, &first).await.unwrap().table,
        catalog::Registered::Updated
    );
    let columns = |t: &aws_sdk_glue::types::Table| t.storage_descriptor().unwrap().columns().len();
    let after = glue.get_table().database_name(&db).name(&name).send().await.unwrap();
    assert_eq!(columns(after.table().unwrap()), columns(entry));
    assert_eq!(
        catalog.register(&name, &first).await.unwrap().table,
        catalog::Registered::Unchanged
    );
}
