//! The maintenance tests' one set-up: tables of many small commits with duplicate events, the
//! scheduled event the function is invoked with, and a Lambda context with its timeout ahead.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use arrow::array::{Date32Array, Float64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use lake::{StorageConfig, Table, TableSpec};
use lambda_runtime::Context;

/// The day of every row: 2024-06-01, long closed, so compaction takes it.
pub const DAY: i32 = 19_875;

/// The sample event of the maintenance schedule.
pub const SCHEDULED_EVENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../events/scheduled-maintenance.json");

/// A game-events-like table: `eventId`, `amount` and the date column `partition`.
fn spec(partition: &str) -> TableSpec {
    let schema = Arc::new(Schema::new(vec![
        Field::new("eventId", DataType::Utf8, false),
        Field::new("amount", DataType::Float64, true),
        Field::new(partition, DataType::Date32, false),
    ]));
    TableSpec::new("t", schema, &[partition])
}

/// Appends `commits` commits of the events `ids` (`event-{id}`, amount = the id) on [`DAY`] to
/// the table at `uri`, created if it is not there. Every commit is a source of its own, as a
/// redelivered Kinesis batch is: the same ids again are duplicate rows.
pub async fn table(uri: &str, storage: &StorageConfig, partition: &str, commits: usize, ids: &[u32]) {
    static SOURCES: AtomicUsize = AtomicUsize::new(0);
    let spec = spec(partition);
    let mut table = Table::open_or_create(uri, &spec, storage).await.unwrap();
    for _ in 0..commits {
        let batch = RecordBatch::try_new(
            spec.schema.clone(),
            vec![
                Arc::new(StringArray::from_iter_values(ids.iter().map(|i| format!("event-{i}")))),
                Arc::new(Float64Array::from_iter_values(ids.iter().map(|i| f64::from(*i)))),
                Arc::new(Date32Array::from(vec![DAY; ids.len()])),
            ],
        )
        .unwrap();
        let source = format!("batch-{}", SOURCES.fetch_add(1, Ordering::Relaxed));
        let mut writer = table.writer(&source).unwrap();
        writer.write(batch).await.unwrap();
        let files = writer.finish().await.unwrap();
        table
            .commit_sources(vec![files], &lake::Retry::default())
            .await
            .unwrap();
    }
}

/// [`SCHEDULED_EVENT`], parsed.
pub fn scheduled_event() -> EventBridgeEvent {
    serde_json::from_str(&std::fs::read_to_string(SCHEDULED_EVENT).unwrap()).unwrap()
}

/// A Lambda context with the maintenance function's 15 minutes ahead.
pub fn context() -> Context {
    let mut context = Context::default();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    context.deadline = now + 15 * 60 * 1000;
    context
}
