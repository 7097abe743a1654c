//! Sources written so long ago that their `txn` may have expired, read back from the rows.
//!
//! A source's `txn` is kept for the table's `delta.setTransactionRetentionDuration` (30 days by
//! default) after its commit; after that, [`Table::is_committed`](crate::Table::is_committed) no longer knows
//! it. Raw logs live longer than that (the template keeps them 90 days), so a backfill of old
//! objects must look elsewhere: every row names its source in a column (`log_object` for access
//! logs), and the files added before the retention began hold every source whose `txn` may be
//! gone. Only those files are read, and only that column of them.

use std::collections::HashSet;
use std::time::Duration;

use arrow::array::AsArray as _;
use arrow::compute::cast;
use arrow::datatypes::DataType;
use deltalake::DeltaTable;
use deltalake::parquet::arrow::ProjectionMask;
use deltalake::parquet::arrow::async_reader::ParquetRecordBatchStreamBuilder;
use futures::TryStreamExt as _;

use crate::error::LakeError;
use crate::files::{StoreFile, written_at};

/// How long before the retention ends a `txn` is no longer trusted alone: the writer's clock and
/// the commit's may differ, and a check and a commit are not the same instant.
pub const RETENTION_MARGIN: Duration = Duration::from_secs(86_400);

/// The table's `txn` retention (`delta.setTransactionRetentionDuration`); `None` when the table
/// keeps `txn` ids for ever.
pub(crate) fn transaction_retention(uri: &str, table: &DeltaTable) -> Result<Option<Duration>, LakeError> {
    let snapshot = table.snapshot().map_err(|e| LakeError::delta(uri, e))?;
    Ok(snapshot.table_config().set_transaction_retention_duration)
}

/// When, in milliseconds since the epoch, commits began whose `txn` ids are still certainly
/// known: everything committed before may have lost its id. `None` when ids never expire.
pub(crate) fn trusted_since_ms(uri: &str, table: &DeltaTable, now_ms: i64) -> Result<Option<i64>, LakeError> {
    Ok(transaction_retention(uri, table)?.map(|retention| {
        let untrusted = retention.saturating_sub(RETENTION_MARGIN);
        now_ms - i64::try_from(untrusted.as_millis()).unwrap_or(i64::MAX)
    }))
}

/// Whether any active file of `table` holds rows first written before `before_ms` (milliseconds
/// since the epoch; see [`column_values_in_files_before`]), from the log alone.
pub(crate) fn has_files_written_before(uri: &str, table: &DeltaTable, before_ms: i64) -> Result<bool, LakeError> {
    let snapshot = table.snapshot().map_err(|e| LakeError::delta(uri, e))?;
    Ok(snapshot.log_data().iter().any(|view| written_at(&view) < before_ms))
}

/// The distinct values of the string column `column` in the active files of `table` whose rows
/// were first written before `added_before_ms` (milliseconds since the epoch): files added
/// before it, and files compaction wrote later from such files (by their
/// [`WRITTEN_SINCE_TAG`](crate::files::WRITTEN_SINCE_TAG), not their new modification time).
pub(crate) async fn column_values_in_files_before(
    uri: &str,
    table: &DeltaTable,
    column: &str,
    added_before_ms: i64,
) -> Result<HashSet<String>, LakeError> {
    let snapshot = table.snapshot().map_err(|e| LakeError::delta(uri, e))?;
    let store = table.object_store();
    let mut values = HashSet::new();
    for view in snapshot.log_data().iter() {
        if written_at(&view) >= added_before_ms {
            continue;
        }
        let file = view.path().into_owned();
        let error = |reason: String| LakeError::ReadFile {
            uri: uri.to_owned(),
            file: file.clone(),
            reason,
        };
        let reader = StoreFile {
            store: store.clone(),
            path: view.object_store_path(),
            size: u64::try_from(view.size()).unwrap_or(0),
        };
        let builder = ParquetRecordBatchStreamBuilder::new(reader)
            .await
            .map_err(|e| error(e.to_string()))?;
        // A file written before the column was added holds no value of it.
        let Ok(index) = builder.schema().index_of(column) else {
            continue;
        };
        let mask = ProjectionMask::roots(builder.parquet_schema(), [index]);
        let mut stream = builder
            .with_projection(mask)
            .build()
            .map_err(|e| error(e.to_string()))?;
        while let Some(batch) = stream.try_next().await.map_err(|e| error(e.to_string()))? {
            let strings = cast(batch.column(0), &DataType::Utf8).map_err(|e| error(e.to_string()))?;
            values.extend(strings.as_string::<i32>().iter().flatten().map(str::to_owned));
        }
    }
    Ok(values)
}
