//! Small local tables for the maintenance tests.

use std::sync::Arc;

use arrow::array::{Date32Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use lake::{StorageConfig, Table, TableSpec};

/// The day of every row: long closed, so compaction takes it.
const DAY: i32 = 19_000;

fn spec(partition: &str) -> TableSpec {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new(partition, DataType::Date32, false),
    ]));
    TableSpec::new("t", schema, &[partition])
}

/// A table of `commits` small commits of `ids`, all in one closed day.
pub async fn table(uri: &str, partition: &str, commits: usize, ids: &[&str]) {
    let spec = spec(partition);
    let mut table = Table::open_or_create(uri, &spec, &StorageConfig::default())
        .await
        .unwrap();
    for commit in 0..commits {
        let batch = RecordBatch::try_new(
            spec.schema.clone(),
            vec![
                Arc::new(StringArray::from(ids.to_vec())),
                Arc::new(Date32Array::from(vec![DAY; ids.len()])),
            ],
        )
        .unwrap();
        let mut writer = table.writer(&format!("source-{commit}")).unwrap();
        writer.write(batch).await.unwrap();
        let files = writer.finish().await.unwrap();
        table
            .commit_sources(vec![files], &lake::Retry::default())
            .await
            .unwrap();
    }
}
