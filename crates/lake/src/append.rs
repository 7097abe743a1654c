//! Appends: sources recorded by a `txn` each, written exactly once (raw log objects), and plain
//! appends of rows that carry their own identity (Kinesis batches, deduplicated by `eventId` later);
//! every commit of either lands at most once, however the store fails.

use arrow::array::{Array, ArrayRef, Scalar as ArrowScalar};
use arrow::compute::kernels::cmp::distinct;
use arrow::record_batch::RecordBatch;
use deltalake::DeltaTable;
use deltalake::kernel::scalars::ScalarExt;
use deltalake::kernel::{Action, Add, Transaction};
use deltalake::parquet::basic::Compression;
use deltalake::parquet::file::properties::WriterProperties;
use deltalake::parquet::schema::types::ColumnPath;
use deltalake::protocol::{DeltaOperation, SaveMode};
use deltalake::writer::{DeltaWriter, RecordBatchWriter, WriteMode};
use indexmap::IndexMap;
use tracing::debug;

pub(crate) use crate::commit::is_committed;
use crate::commit::{Commit, CommitFailure, Guard, Landed, Retry, commit};
use crate::error::LakeError;
use crate::positions::{self, Advance};
use crate::txns::Txns;

/// Microseconds since the Unix epoch, now.
pub fn now_micros() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

/// What one commit wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppendOutcome {
    /// The table version committed; `None` when there was nothing to commit.
    pub version: Option<u64>,
    /// Sources recorded by this commit.
    pub sources: usize,
    /// Rows written.
    pub rows: u64,
    /// Data files added.
    pub files: usize,
    /// Tries the commit took (1 when the first landed; 0 when there was nothing to commit).
    pub attempts: u32,
    /// Whether a step after the commit (checkpoint, log cleanup) failed: the version landed, and
    /// the step is left to the next writer or the maintenance run.
    pub post_commit_failed: bool,
    /// Whether this writer checkpointed the version it committed (checkpoints are spaced by
    /// their size: see `checkpoint::checkpoint_spacing`).
    pub checkpointed: bool,
}

/// Streams the rows of one source into data files of one table. Sources write files of their
/// own, so a source that fails half way is dropped without touching the rows of the others.
pub struct SourceWriter {
    uri: String,
    source: String,
    writer: RecordBatchWriter,
    /// The table's partition column, when it has exactly one.
    partition_column: Option<String>,
    rows: u64,
}

impl std::fmt::Debug for SourceWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceWriter")
            .field("uri", &self.uri)
            .field("source", &self.source)
            .field("rows", &self.rows)
            .finish()
    }
}

impl SourceWriter {
    /// A writer of `source`'s rows into `table` (named `uri` in errors and logs).
    pub(crate) fn new(uri: &str, table: &DeltaTable, source: &str) -> Result<Self, LakeError> {
        let snapshot = table.snapshot().map_err(|e| LakeError::delta(uri, e))?;
        let partition_column = match snapshot.metadata().partition_columns()[..] {
            [ref column] => Some(column.clone()),
            _ => None,
        };
        Ok(Self {
            uri: uri.to_owned(),
            source: source.to_owned(),
            writer: RecordBatchWriter::for_table(table).map_err(|e| LakeError::delta(uri, e))?,
            partition_column,
            rows: 0,
        })
    }

    /// Writes `columns` without a Parquet dictionary: columns nearly every row has a value of its
    /// own in (ids, line numbers), whose dictionary the encoder would build in full, then throw
    /// away or store beside as many indices. The other columns keep theirs; Snappy as before.
    pub fn without_dictionary(mut self, columns: &[&str]) -> Self {
        let mut properties = WriterProperties::builder()
            .set_created_by(concat!("lakelog ", env!("CARGO_PKG_VERSION"), " (delta-rs)").to_owned())
            .set_compression(Compression::SNAPPY);
        for column in columns {
            properties = properties.set_column_dictionary_enabled(ColumnPath::from(*column), false);
        }
        self.writer = self.writer.with_writer_properties(properties.build());
        self
    }

    /// Streams rows into the source's data files (encoded and uploaded as they come). A batch
    /// whose rows are all of one partition goes straight to that partition's file; delta-rs
    /// copies any other into one batch per partition first.
    pub async fn write(&mut self, batch: RecordBatch) -> Result<(), LakeError> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        // The table's schema may have grown since this release's batches were shaped (a nullable
        // column added by another engine): its rows then read the new columns as null.
        let target = self.writer.arrow_schema();
        let batch = if batch.schema().fields() != target.fields()
            && crate::conform::covers(target.fields(), batch.schema().fields())
        {
            crate::conform::conform(batch, &target).map_err(|e| LakeError::delta(&self.uri, e))?
        } else {
            batch
        };
        self.rows += batch.num_rows() as u64;
        let values = self.single_partition(&batch).and_then(|(name, column)| {
            Some(IndexMap::from([(
                name.to_owned(),
                ScalarExt::from_array(column.as_ref(), 0)?,
            )]))
        });
        let written = match values {
            Some(values) => self
                .writer
                .write_partition(batch, &values, WriteMode::Default)
                .await
                .map(drop),
            None => self.writer.write(batch).await,
        };
        written.map_err(|e| LakeError::delta(&self.uri, e))
    }

    /// The table's partition column and its values in `batch`, when the table has one partition
    /// column and every row of `batch` has the same value in it, not null.
    fn single_partition<'b>(&'b self, batch: &'b RecordBatch) -> Option<(&'b str, &'b ArrayRef)> {
        let name = self.partition_column.as_deref()?;
        let column = batch.column_by_name(name)?;
        if column.null_count() > 0 {
            return None;
        }
        let first = ArrowScalar::new(column.slice(0, 1));
        let others = distinct(column, &first).ok()?;
        (others.true_count() == 0).then_some((name, column))
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Closes the data files; they become visible once [`Table::commit_sources`](crate::Table::commit_sources) commits them.
    pub async fn finish(mut self) -> Result<SourceFiles, LakeError> {
        let adds = self.writer.flush().await.map_err(|e| LakeError::delta(&self.uri, e))?;
        Ok(SourceFiles {
            source: self.source,
            adds,
            rows: self.rows,
        })
    }

    /// Drops the rows written so far: uploads in progress are aborted.
    pub fn abort(mut self) {
        self.writer.reset();
    }
}

/// The closed data files of one source, ready to commit.
#[derive(Debug, Clone)]
pub struct SourceFiles {
    pub(crate) source: String,
    pub(crate) adds: Vec<Add>,
    pub(crate) rows: u64,
}

impl SourceFiles {
    /// The source these files hold rows of.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Rows in the files.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// A source that contributes no rows, recorded all the same so that it is not read again.
    pub fn empty(source: &str) -> Self {
        Self {
            source: source.to_owned(),
            adds: Vec::new(),
            rows: 0,
        }
    }
}

/// Commits the files of `sources` and one Delta `txn` action per source (app id = the source,
/// version 1) as one new version of `table`, so rows and the record that their source was
/// written land atomically.
///
/// Commits of other sources by concurrent writers only move this commit to a later version; it is
/// tried again, with backoff, until `retry`'s deadline. A concurrent commit of one of the same
/// sources makes it fail with [`LakeError::Conflict`]: nothing is written, and a retry skips the
/// sources now in the table. The outcome is read from the log (see [`Retry`]): the files are
/// deleted again only when no version carries the commit, never on [`LakeError::CommitUnknown`].
pub(crate) async fn commit_sources(
    uri: &str,
    table: &mut DeltaTable,
    txns: &Txns,
    sources: Vec<SourceFiles>,
    retry: &Retry,
) -> Result<AppendOutcome, LakeError> {
    commit_files(uri, table, txns, sources, Records::Sources, retry).await
}

/// Commits the files of `sources` as one new version of `table`, as plain appends: no `txn` is
/// recorded, so writing the same rows again adds them again. For sources whose rows carry their
/// own identity (game events and their `eventId`), where duplicates are removed later and a `txn`
/// per invocation would only grow the log. The commit itself still lands at most once, however
/// the store fails. Failures behave as in [`commit_sources`].
pub(crate) async fn commit_appends(
    uri: &str,
    table: &mut DeltaTable,
    txns: &Txns,
    sources: Vec<SourceFiles>,
    retry: &Retry,
) -> Result<AppendOutcome, LakeError> {
    commit_files(uri, table, txns, sources, Records::Nothing, retry).await
}

/// Commits the files of `sources` as plain appends together with the new positions of the
/// streams their rows came from (see [`crate::positions`]), so that the rows and the record of
/// how far each stream is in land atomically: a writer handed the same records again reads the
/// positions ([`crate::positions::position`]) and skips what the table has.
///
/// The commit is refused with [`LakeError::Conflict`] (nothing written, files deleted) when
/// another writer moved one of the streams since [`Advance::from`] was read; failures otherwise
/// behave as in [`commit_sources`].
pub(crate) async fn commit_appends_at(
    uri: &str,
    table: &mut DeltaTable,
    txns: &Txns,
    sources: Vec<SourceFiles>,
    advances: &[Advance],
    retry: &Retry,
) -> Result<AppendOutcome, LakeError> {
    commit_files(uri, table, txns, sources, Records::Positions(advances), retry).await
}

/// The operation an append to `table` records: a write in append mode, with the table's partition
/// columns.
pub(crate) fn append_operation(uri: &str, table: &DeltaTable) -> Result<DeltaOperation, LakeError> {
    let partition_columns = table
        .snapshot()
        .map_err(|e| LakeError::delta(uri, e))?
        .metadata()
        .partition_columns()
        .to_vec();
    Ok(DeltaOperation::Write {
        mode: SaveMode::Append,
        partition_by: (!partition_columns.is_empty()).then_some(partition_columns),
        predicate: None,
    })
}

/// What an append records beside its files, and so what its commit is guarded by.
#[derive(Debug, Clone, Copy)]
enum Records<'a> {
    /// Nothing: plain appends, never in conflict.
    Nothing,
    /// A `txn` per source: refused when another writer committed one of them.
    Sources,
    /// The streams' new positions: refused when another writer moved one of them.
    Positions(&'a [Advance]),
}

async fn commit_files(
    uri: &str,
    table: &mut DeltaTable,
    txns: &Txns,
    sources: Vec<SourceFiles>,
    records: Records<'_>,
    retry: &Retry,
) -> Result<AppendOutcome, LakeError> {
    let advances = match records {
        Records::Positions(advances) => advances,
        Records::Nothing | Records::Sources => &[],
    };
    if sources.is_empty() && advances.is_empty() {
        return Ok(AppendOutcome::default());
    }
    let now_ms = now_micros() / 1000;
    let mut outcome = AppendOutcome {
        sources: sources.len(),
        ..AppendOutcome::default()
    };
    let mut transactions = Vec::with_capacity(sources.len());
    let mut actions = Vec::new();
    for files in sources {
        if matches!(records, Records::Sources) {
            transactions.push(Transaction::new_with_last_update(&files.source, 1, Some(now_ms)));
        }
        outcome.rows += files.rows;
        outcome.files += files.adds.len();
        actions.extend(files.adds.into_iter().map(Action::Add));
    }
    for advance in advances {
        transactions.extend(positions::transactions(uri, &advance.stream, &advance.to, now_ms)?);
    }
    if actions.is_empty() && transactions.is_empty() {
        return Ok(outcome);
    }
    let operation = append_operation(uri, table)?;
    let guard = match records {
        Records::Sources => Guard::NewTransactions,
        Records::Positions(advances) => Guard::Positions(advances),
        Records::Nothing => Guard::None,
    };
    let to_commit = Commit {
        uri,
        actions,
        transactions,
        operation,
        metadata: Vec::new(),
        guard,
        keep_files: false,
    };
    match commit(table, txns, to_commit, retry).await {
        Ok(Landed::Version {
            version,
            attempts,
            post_commit_failed,
            checkpointed,
        }) => {
            debug!(
                table = uri,
                version,
                attempts,
                sources = outcome.sources,
                rows = outcome.rows,
                "committed"
            );
            outcome.version = Some(version);
            outcome.attempts = attempts;
            outcome.post_commit_failed = post_commit_failed;
            outcome.checkpointed = checkpointed;
            Ok(outcome)
        }
        Ok(Landed::Refused { reason }) => Err(LakeError::Conflict {
            uri: uri.to_owned(),
            reason,
        }),
        Err(CommitFailure::NotCommitted(e) | CommitFailure::Unknown(e)) => Err(e),
    }
}

/// Writes `batch` as the rows of `source` and commits them with a `txn` of the source: how tests
/// of other modules put rows in a table.
#[cfg(test)]
pub(crate) async fn commit_batch(uri: &str, table: &mut DeltaTable, source: &str, batch: RecordBatch) {
    let mut writer = SourceWriter::new(uri, table, source).unwrap();
    writer.write(batch).await.unwrap();
    let files = writer.finish().await.unwrap();
    commit_sources(uri, table, &Txns::default(), vec![files], &Retry::default())
        .await
        .unwrap();
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use arrow::array::{AsArray as _, Date32Array, StringArray, TimestampMicrosecondArray};

    use super::*;
    use crate::create::tests::spec;
    use crate::create::{file_stats, open_or_create, open_table};
    use crate::storage::StorageConfig;

    pub(crate) fn batch(ids: &[&str], day: i32) -> RecordBatch {
        let n = ids.len();
        RecordBatch::try_new(
            spec().schema,
            vec![
                Arc::new(StringArray::from(ids.to_vec())),
                Arc::new(
                    TimestampMicrosecondArray::from(vec![i64::from(day) * 86_400_000_000; n]).with_timezone("UTC"),
                ),
                Arc::new(Date32Array::from(vec![day; n])),
            ],
        )
        .unwrap()
    }

    pub(crate) fn row_count(table: &DeltaTable) -> u64 {
        file_stats(table).unwrap().rows
    }

    /// Writes `rows` of `source` on two days, uncommitted.
    pub(crate) async fn write_source(uri: &str, table: &DeltaTable, source: &str, rows: &[&str]) -> SourceFiles {
        let mut writer = SourceWriter::new(uri, table, source).unwrap();
        writer.write(batch(rows, 19_000)).await.unwrap();
        writer.write(batch(rows, 19_001)).await.unwrap();
        assert_eq!(writer.rows(), 2 * rows.len() as u64);
        writer.finish().await.unwrap()
    }

    /// Appends `rows` for `source` unless the table already has it.
    async fn append_once(
        uri: &str,
        table: &mut DeltaTable,
        source: &str,
        rows: &[&str],
    ) -> Result<AppendOutcome, LakeError> {
        table.update_incremental(None).await.unwrap();
        if is_committed(uri, table, &Txns::default(), source).await? {
            return Ok(AppendOutcome::default());
        }
        let files = write_source(uri, table, source, rows).await;
        commit_sources(uri, table, &Txns::default(), vec![files], &Retry::default()).await
    }

    #[tokio::test]
    async fn plain_appends_record_no_source() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().join("t").to_str().unwrap().to_owned();
        let mut table = open_or_create(&uri, &spec(), &StorageConfig::default()).await.unwrap();
        for expected_version in [1, 2] {
            let files = write_source(&uri, &table, "kinesis batch", &["1", "2"]).await;
            let outcome = commit_appends(&uri, &mut table, &Txns::default(), vec![files], &Retry::default())
                .await
                .unwrap();
            assert_eq!(outcome.version, Some(expected_version));
            assert_eq!((outcome.rows, outcome.files), (4, 2));
        }
        assert!(
            !is_committed(&uri, &table, &Txns::default(), "kinesis batch")
                .await
                .unwrap()
        );
        assert_eq!(row_count(&table), 8);
        // Nothing to commit is no commit.
        let nothing = commit_appends(
            &uri,
            &mut table,
            &Txns::default(),
            vec![SourceFiles::empty("none")],
            &Retry::default(),
        )
        .await
        .unwrap();
        assert_eq!(nothing.version, None);
        assert_eq!(table.version(), Some(2));
    }

    #[tokio::test]
    async fn stream_positions_land_with_their_rows() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().join("t").to_str().unwrap().to_owned();
        let mut table = open_or_create(&uri, &spec(), &StorageConfig::default()).await.unwrap();
        let shard = "kinesis:arn:aws:kinesis:us-east-1:1:stream/s/shardId-000000000000";
        assert_eq!(
            crate::positions::position(&uri, &table, &Txns::default(), shard)
                .await
                .unwrap(),
            None
        );
        let first = "49590338271490256608559692538361571095921575989136588898";
        let files = write_source(&uri, &table, "kinesis", &["1"]).await;
        let advance = Advance {
            stream: shard.into(),
            from: None,
            to: first.into(),
        };
        let outcome = commit_appends_at(
            &uri,
            &mut table,
            &Txns::default(),
            vec![files],
            &[advance],
            &Retry::default(),
        )
        .await
        .unwrap();
        assert_eq!(outcome.version, Some(1));
        let reopened = open_table(&uri, &StorageConfig::default()).await.unwrap();
        assert_eq!(
            crate::positions::position(&uri, &reopened, &Txns::default(), shard)
                .await
                .unwrap()
                .as_deref(),
            Some(first)
        );
        // Another shard's position is its own.
        assert_eq!(
            crate::positions::position(&uri, &reopened, &Txns::default(), "kinesis:other")
                .await
                .unwrap(),
            None
        );

        // A writer that read the old position loses to the one that moved it, and writes nothing.
        let mut stale = open_table(&uri, &StorageConfig::default()).await.unwrap();
        let second = "49590338271490256608559692540925702759324208523137515618";
        let files = write_source(&uri, &table, "kinesis", &["2"]).await;
        commit_appends_at(
            &uri,
            &mut table,
            &Txns::default(),
            vec![files],
            &[Advance {
                stream: shard.into(),
                from: Some(first.into()),
                to: second.into(),
            }],
            &Retry::default(),
        )
        .await
        .unwrap();
        let files = write_source(&uri, &stale, "kinesis", &["3"]).await;
        let err = commit_appends_at(
            &uri,
            &mut stale,
            &Txns::default(),
            vec![files],
            &[Advance {
                stream: shard.into(),
                from: Some(first.into()),
                to: "49590338271490256608559692540925702759324208523137515619".into(),
            }],
            &Retry::default(),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, LakeError::Conflict { .. }), "{err}");
        let table = open_table(&uri, &StorageConfig::default()).await.unwrap();
        assert_eq!(row_count(&table), 4);
        assert_eq!(
            crate::positions::position(&uri, &table, &Txns::default(), shard)
                .await
                .unwrap()
                .as_deref(),
            Some(second)
        );
        // A shorter number after a longer one reads back as itself, not with the old digits.
        let mut table = table;
        commit_appends_at(
            &uri,
            &mut table,
            &Txns::default(),
            Vec::new(),
            &[Advance {
                stream: shard.into(),
                from: Some(second.into()),
                to: "7".into(),
            }],
            &Retry::default(),
        )
        .await
        .unwrap();
        assert_eq!(
            crate::positions::position(&uri, &table, &Txns::default(), shard)
                .await
                .unwrap()
                .as_deref(),
            Some("7")
        );
        // A position that is not a number is refused before anything is written.
        let err = commit_appends_at(
            &uri,
            &mut table,
            &Txns::default(),
            Vec::new(),
            &[Advance {
                stream: shard.into(),
                from: None,
                to: "12a".into(),
            }],
            &Retry::default(),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, LakeError::InvalidPosition { .. }), "{err}");
    }

    #[tokio::test]
    async fn a_source_is_written_once() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().join("t").to_str().unwrap().to_owned();
        let mut table = open_or_create(&uri, &spec(), &StorageConfig::default()).await.unwrap();
        let first = append_once(&uri, &mut table, "s3://raw/a", &["1", "2"]).await.unwrap();
        assert_eq!(first.version, Some(1));
        assert_eq!((first.sources, first.rows, first.files), (1, 4, 2));
        let again = append_once(&uri, &mut table, "s3://raw/a", &["1", "2"]).await.unwrap();
        assert_eq!(again, AppendOutcome::default());
        // A source without rows is recorded too.
        let empty = commit_sources(
            &uri,
            &mut table,
            &Txns::default(),
            vec![SourceFiles::empty("s3://raw/empty")],
            &Retry::default(),
        )
        .await
        .unwrap();
        assert_eq!((empty.version, empty.rows), (Some(2), 0));
        assert!(
            is_committed(&uri, &table, &Txns::default(), "s3://raw/empty")
                .await
                .unwrap()
        );
        let other = append_once(&uri, &mut table, "s3://raw/b", &["3"]).await.unwrap();
        assert_eq!(other.version, Some(3));
        let reopened = open_table(&uri, &StorageConfig::default()).await.unwrap();
        assert_eq!(row_count(&reopened), 6);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn racing_writers_of_one_source_write_it_once() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().join("t").to_str().unwrap().to_owned();
        open_or_create(&uri, &spec(), &StorageConfig::default()).await.unwrap();
        // Both writers check before either commits, so both believe the source is new.
        let mut t1 = open_table(&uri, &StorageConfig::default()).await.unwrap();
        let mut t2 = open_table(&uri, &StorageConfig::default()).await.unwrap();
        let mut written = Vec::new();
        for t in [&t1, &t2] {
            assert!(!is_committed(&uri, t, &Txns::default(), "s3://raw/same").await.unwrap());
            written.push(write_source(&uri, t, "s3://raw/same", &["x"]).await);
        }
        let other = write_source(&uri, &t2, "s3://raw/other", &["z"]).await;
        let f2 = vec![written.pop().unwrap(), other];
        assert_eq!(
            commit_sources(&uri, &mut t1, &Txns::default(), written, &Retry::default())
                .await
                .unwrap()
                .version,
            Some(1)
        );
        let err = commit_sources(&uri, &mut t2, &Txns::default(), f2, &Retry::default())
            .await
            .unwrap_err();
        assert!(matches!(err, LakeError::Conflict { .. }), "{err}");
        let table = open_table(&uri, &StorageConfig::default()).await.unwrap();
        assert_eq!(table.version(), Some(1));
        assert_eq!(row_count(&table), 2);
        // The loser's data files, its other source's included, were removed again.
        let parquet_files = walk(dir.path()).into_iter().filter(|p| p.ends_with(".parquet")).count();
        assert_eq!(parquet_files, 2);
        // Retried, the loser skips the source that is in and writes the other one.
        let mut t2 = open_table(&uri, &StorageConfig::default()).await.unwrap();
        assert_eq!(
            append_once(&uri, &mut t2, "s3://raw/same", &["x"])
                .await
                .unwrap()
                .version,
            None
        );
        assert_eq!(
            append_once(&uri, &mut t2, "s3://raw/other", &["z"])
                .await
                .unwrap()
                .version,
            Some(2)
        );
        assert_eq!(row_count(&t2), 4);
    }

    #[tokio::test]
    async fn batches_of_one_partition_or_several_land_in_theirs_and_unique_columns_stay_plain() {
        use deltalake::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().join("t").to_str().unwrap().to_owned();
        let mut table = open_or_create(&uri, &spec(), &StorageConfig::default()).await.unwrap();
        let mut writer = SourceWriter::new(&uri, &table, "s3://raw/a")
            .unwrap()
            .without_dictionary(&["id"]);
        // One partition (written as it is), then three rows of two (split by delta-rs).
        writer.write(batch(&["a", "b"], 19_000)).await.unwrap();
        let mixed = RecordBatch::try_new(
            spec().schema,
            vec![
                Arc::new(StringArray::from(vec!["x", "y", "z"])),
                Arc::new(TimestampMicrosecondArray::from(vec![0; 3]).with_timezone("UTC")),
                Arc::new(Date32Array::from(vec![19_000, 19_001, 19_000])),
            ],
        )
        .unwrap();
        writer.write(mixed).await.unwrap();
        let files = writer.finish().await.unwrap();
        commit_sources(&uri, &mut table, &Txns::default(), vec![files], &Retry::default())
            .await
            .unwrap();
        let mut ids = BTreeMap::new();
        for (day, partition) in [("2022-01-08", 19_000), ("2022-01-09", 19_001)] {
            let folder = dir.path().join("t").join(format!("day={day}"));
            for entry in std::fs::read_dir(&folder).unwrap() {
                let file = std::fs::File::open(entry.unwrap().path()).unwrap();
                let builder = ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
                let columns = builder.metadata().row_group(0).columns();
                assert_eq!(columns[0].column_path().string(), "id");
                assert_eq!(columns[0].dictionary_page_offset(), None, "id is written plain");
                assert!(columns[1].dictionary_page_offset().is_some(), "at keeps its dictionary");
                for batch in builder.build().unwrap() {
                    let batch = batch.unwrap();
                    let column = batch.column_by_name("id").unwrap().as_string::<i32>().clone();
                    for id in column.iter().flatten() {
                        ids.insert(id.to_owned(), partition);
                    }
                }
            }
        }
        let want = [
            ("a", 19_000),
            ("b", 19_000),
            ("x", 19_000),
            ("y", 19_001),
            ("z", 19_000),
        ];
        assert_eq!(ids, want.map(|(id, day)| (id.to_owned(), day)).into());
        assert_eq!(row_count(&table), 5);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writers_of_different_sources_all_land() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().join("t").to_str().unwrap().to_owned();
        open_or_create(&uri, &spec(), &StorageConfig::default()).await.unwrap();
        let tasks: Vec<_> = (0..8)
            .map(|i| {
                let uri = uri.clone();
                tokio::spawn(async move {
                    let mut table = open_table(&uri, &StorageConfig::default()).await.unwrap();
                    append_once(&uri, &mut table, &format!("s3://raw/{i}"), &["a", "b", "c"]).await
                })
            })
            .collect();
        for task in tasks {
            assert_eq!(task.await.unwrap().unwrap().sources, 1);
        }
        let table = open_table(&uri, &StorageConfig::default()).await.unwrap();
        assert_eq!(table.version(), Some(8));
        assert_eq!(row_count(&table), 8 * 6);
    }

    fn walk(dir: &std::path::Path) -> Vec<String> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                out.extend(walk(&path));
            } else {
                out.push(path.to_string_lossy().into_owned());
            }
        }
        out
    }
}
