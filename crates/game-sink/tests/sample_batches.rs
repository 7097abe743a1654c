//! `Sink::process` driven by the sample events in `events/kinesis-*.json` (what Lambda hands the
//! sink function), writing local tables.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use arrow::array::{AsArray, RecordBatch};
use aws_lambda_events::event::kinesis::KinesisEvent;
use game_sink::{BatchReport, Config, Sink};
use lake::{Retry, StorageConfig};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

fn sample(name: &str) -> KinesisEvent {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../events").join(name);
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

fn sequence(event: &KinesisEvent, index: usize) -> String {
    event.records[index].kinesis.sequence_number.clone()
}

async fn process(event: &KinesisEvent, sink: &Sink) -> BatchReport {
    sink.process(&event.records, &Retry::default()).await
}

/// Every row of a local table, with the partition directory each file is in.
pub(crate) async fn rows(uri: &str) -> Vec<(String, RecordBatch)> {
    let table = lake::Table::open(uri, &StorageConfig::default()).await.unwrap();
    let mut out = Vec::new();
    for file in table.delta().get_file_uris().unwrap() {
        let path = file.strip_prefix("file://").unwrap_or(&file).to_owned();
        let partition = Path::new(&path)
            .parent()
            .and_then(|p| p.file_name())
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&path).unwrap())
            .unwrap()
            .build()
            .unwrap();
        for batch in reader {
            out.push((partition.clone(), batch.unwrap()));
        }
    }
    out
}

/// Event ids per partition directory.
async fn ids_by_partition(uri: &str) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (partition, batch) in rows(uri).await {
        let ids = batch.column_by_name("eventId").unwrap().as_string::<i32>();
        out.entry(partition)
            .or_default()
            .extend(ids.iter().map(|id| id.unwrap().to_owned()));
    }
    out
}

struct Fixture {
    _dir: tempfile::TempDir,
    config: Config,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let events = dir.path().join("game_events").to_str().unwrap().to_owned();
        let config = Config::new(&events, None).unwrap();
        Self { _dir: dir, config }
    }

    async fn sink(&self) -> Sink {
        Sink::open(&self.config, &StorageConfig::default()).await.unwrap()
    }

    /// Makes every write under `uri` fail: the table's directory becomes a plain file.
    fn break_table(uri: &str) {
        std::fs::rename(uri, format!("{uri}.moved")).unwrap();
        std::fs::write(uri, b"not a directory").unwrap();
    }
}

#[tokio::test]
async fn a_batch_becomes_rows_partitioned_by_event_date_and_duplicates_are_written_once() {
    let fixture = Fixture::new();
    let sink = fixture.sink().await;
    let event = sample("kinesis-game-events.json");
    let report = process(&event, &sink).await;
    assert_eq!(report.retry_from, None);

    let ids = ids_by_partition(&fixture.config.events_table).await;
    assert_eq!(
        ids.keys().collect::<Vec<_>>(),
        ["eventDate=2024-06-01", "eventDate=2024-06-02"]
    );
    assert_eq!(
        ids["eventDate=2024-06-01"].iter().collect::<BTreeSet<_>>(),
        BTreeSet::from([
            &"0b5e8a52-7d4d-4f4b-9c39-6d9a8a0c1e11".to_owned(),
            &"5f0c3c2e-1f1a-4c1e-8d35-0d6f3f1c2a01".to_owned()
        ])
    );
    assert_eq!(
        ids["eventDate=2024-06-01"].len(),
        2,
        "the repeated purchase is written once"
    );
    assert_eq!(ids["eventDate=2024-06-02"], ["9a7d1a3e-52f4-4b7a-9a55-3f2a6c7d8e90"]);

    // The purchase's parameters and lineage.
    let all = rows(&fixture.config.events_table).await;
    let (_, batch) = all
        .iter()
        .find(|(_, b)| {
            let names = b.column_by_name("eventName").unwrap().as_string::<i32>();
            names.iter().any(|n| n == Some("purchaseEvent"))
        })
        .unwrap();
    let names = batch.column_by_name("eventName").unwrap().as_string::<i32>();
    let row = names.iter().position(|n| n == Some("purchaseEvent")).unwrap();
    let params = batch.column_by_name("eventParams").unwrap().as_struct();
    let amount = params.column_by_name("amount").unwrap();
    assert_eq!(amount.as_primitive::<arrow::datatypes::Float64Type>().value(row), 4.99);
    let shard = batch.column_by_name("shardId").unwrap().as_string::<i32>();
    assert_eq!(shard.value(row), "shardId-000000000000");
    let seq = batch.column_by_name("sequenceNumber").unwrap().as_string::<i32>();
    assert_eq!(seq.value(row), sequence(&event, 0));

    // Nothing was rejected.
    assert!(rows(&fixture.config.rejects_table).await.is_empty());
}

#[tokio::test]
async fn bad_records_go_to_the_rejects_table_with_their_reason_and_are_not_retried() {
    let fixture = Fixture::new();
    let sink = fixture.sink().await;
    let event = sample("kinesis-bad-record.json");
    let report = process(&event, &sink).await;
    assert_eq!(
        (report.records, report.rows, report.rejected, report.duplicates),
        (4, 2, 2, 0)
    );
    assert_eq!(report.retry_from, None);

    let rejects = rows(&fixture.config.rejects_table).await;
    let mut found = Vec::new();
    for (_, batch) in &rejects {
        let seqs = batch.column_by_name("sequenceNumber").unwrap().as_string::<i32>();
        let reasons = batch.column_by_name("reason").unwrap().as_string::<i32>();
        let data = batch.column_by_name("data").unwrap().as_binary::<i32>();
        for i in 0..batch.num_rows() {
            found.push((
                seqs.value(i).to_owned(),
                reasons.value(i).to_owned(),
                data.value(i).to_vec(),
            ));
        }
    }
    found.sort();
    assert_eq!(found.len(), 2);
    assert_eq!(found[0].0, sequence(&event, 1));
    assert!(found[0].1.starts_with("record data is not JSON"), "{}", found[0].1);
    assert_eq!(found[0].2, b"this is not JSON");
    assert_eq!(found[1].0, sequence(&event, 2));
    assert_eq!(
        found[1].1,
        "body.eventTime: required (the server's stamp, epoch seconds)"
    );

    let ids: usize = ids_by_partition(&fixture.config.events_table)
        .await
        .values()
        .map(Vec::len)
        .sum();
    assert_eq!(ids, 2);
}

#[tokio::test]
async fn a_retried_batch_adds_no_row() {
    let fixture = Fixture::new();
    let sink = fixture.sink().await;
    let event = sample("kinesis-game-events.json");
    process(&event, &sink).await;
    let again = process(&event, &sink).await;
    assert_eq!((again.rows, again.retry_from), (0, None));
    let ids: Vec<String> = ids_by_partition(&fixture.config.events_table)
        .await
        .into_values()
        .flatten()
        .collect();
    assert_eq!(ids.len(), 3, "each record once: {ids:?}");
    assert_eq!(ids.iter().collect::<BTreeSet<_>>().len(), 3);
}

#[tokio::test]
async fn a_failed_events_commit_retries_the_whole_batch() {
    let fixture = Fixture::new();
    let sink = fixture.sink().await;
    Fixture::break_table(&fixture.config.events_table);
    let event = sample("kinesis-bad-record.json");
    let report = process(&event, &sink).await;
    assert_eq!(report.retry_from, Some(sequence(&event, 0)));
}

#[tokio::test]
async fn a_failed_rejects_commit_retries_from_the_first_reject() {
    let fixture = Fixture::new();
    let sink = fixture.sink().await;
    Fixture::break_table(&fixture.config.rejects_table);
    let event = sample("kinesis-bad-record.json");
    let report = process(&event, &sink).await;
    assert_eq!(report.retry_from, Some(sequence(&event, 1)));
    // The events before it are in the table.
    let ids: usize = ids_by_partition(&fixture.config.events_table)
        .await
        .values()
        .map(Vec::len)
        .sum();
    assert_eq!(ids, 2);
}
