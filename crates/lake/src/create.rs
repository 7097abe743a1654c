//! Opening tables, and creating them when they are missing, safely under concurrency.

use std::collections::HashMap;

use arrow::datatypes::SchemaRef;
use deltalake::kernel::engine::arrow_conversion::TryIntoKernel;
use deltalake::kernel::transaction::CommitProperties;
use deltalake::kernel::{DataType as DeltaDataType, StructField, StructType};
use deltalake::operations::create::CreateBuilder;
use deltalake::protocol::SaveMode;
use deltalake::{DeltaTable, DeltaTableBuilder, DeltaTableError};
use tracing::{debug, info};

use crate::error::LakeError;
use crate::storage::{StorageConfig, table_url};

/// What a lakelog table looks like: its schema, partitioning and table properties.
#[derive(Debug, Clone)]
pub struct TableSpec {
    /// The table's name in the Delta metadata, e.g. `access_logs`.
    pub name: String,
    /// The Arrow schema of the rows written to it.
    pub schema: SchemaRef,
    /// The partition columns, in order.
    pub partition_columns: Vec<String>,
    /// Delta table properties set when the table is created.
    pub properties: HashMap<String, String>,
    /// Whether opening an existing table that lacks nullable columns of this spec adds them
    /// (schema evolution); when not, opening it fails with [`LakeError::SchemaBehind`].
    pub evolve: bool,
}

impl TableSpec {
    /// A spec with lakelog's default properties: a checkpoint interval of 10 commits (appends are
    /// small and frequent, and readers replay the log since the last checkpoint; writers space
    /// checkpoints further as they grow, see [`crate::maintenance`]), `txn` ids kept 30 days
    /// (beyond SQS's 14-day retention, so every redelivery of a log object is recognised; raw logs
    /// kept longer are checked by [`crate::sources`]), log and deleted files kept 7 days for time travel.
    pub fn new(name: impl Into<String>, schema: SchemaRef, partition_columns: &[&str]) -> Self {
        let properties = [
            ("delta.checkpointInterval", "10"),
            ("delta.setTransactionRetentionDuration", "interval 30 days"),
            ("delta.logRetentionDuration", "interval 30 days"),
            ("delta.deletedFileRetentionDuration", "interval 7 days"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        Self {
            name: name.into(),
            schema,
            partition_columns: partition_columns.iter().map(|c| (*c).to_owned()).collect(),
            properties,
            evolve: true,
        }
    }

    /// The spec, adding its missing nullable columns to an existing table if `evolve` (the
    /// default); otherwise opening such a table fails ([`LakeError::SchemaBehind`]): a command run
    /// by hand against tables that deployed functions write does not change their schema unless
    /// asked.
    pub fn with_schema_changes(mut self, evolve: bool) -> Self {
        self.evolve = evolve;
        self
    }

    /// The Delta (kernel) schema of this spec.
    pub(crate) fn delta_schema(&self) -> Result<StructType, DeltaTableError> {
        Ok(self.schema.as_ref().try_into_kernel()?)
    }
}

/// Opens the table at `location`, which must exist.
pub(crate) async fn open_table(location: &str, storage: &StorageConfig) -> Result<DeltaTable, LakeError> {
    let url = table_url(location)?;
    let options = storage.options_for(&url);
    DeltaTableBuilder::from_url(url)
        .map_err(|e| LakeError::delta(location, e))?
        .with_storage_options(options)
        .load()
        .await
        .map_err(|e| LakeError::delta(location, e))
}

/// Opens the table at `location`, creating it from `spec` when it does not exist yet, and checks
/// that its schema and partitioning are the spec's.
///
/// Many writers may call this at once on a missing table: the first commit of version 0 wins
/// (S3 conditional write), and every other writer then opens the table that won.
pub(crate) async fn open_or_create(
    location: &str,
    spec: &TableSpec,
    storage: &StorageConfig,
) -> Result<DeltaTable, LakeError> {
    let url = table_url(location)?;
    let options = storage.options_for(&url);
    let builder = || {
        DeltaTableBuilder::from_url(url.clone())
            .map(|b| b.with_storage_options(options.clone()))
            .map_err(|e| LakeError::delta(location, e))
    };
    let mut table = builder()?.build().map_err(|e| LakeError::delta(location, e))?;
    let exists = table
        .verify_deltatable_existence()
        .await
        .map_err(|e| LakeError::delta(location, e))?;
    if exists {
        table.load().await.map_err(|e| LakeError::delta(location, e))?;
    } else {
        let schema = spec.delta_schema().map_err(|e| LakeError::delta(location, e))?;
        let created = CreateBuilder::new()
            .with_location(url.as_str())
            .with_storage_options(options.clone())
            .with_table_name(&spec.name)
            .with_columns(schema.fields().cloned())
            .with_partition_columns(spec.partition_columns.clone())
            .with_configuration(spec.properties.iter().map(|(k, v)| (k.clone(), Some(v.clone()))))
            .with_save_mode(SaveMode::Ignore)
            // A creator that loses the race for version 0 must not retry as version 1: that
            // would write the metadata twice and conflict with the winner's first appends.
            .with_commit_properties(CommitProperties::default().with_max_retries(0))
            .await;
        table = match created {
            Ok(table) => {
                info!(table = location, "created table");
                table
            }
            Err(e) => {
                // Either another writer created it between our check and our commit, or our own
                // commit of version 0 landed although the store answered with an error (a retried
                // PUT then meets it): in both cases version 0 is there now. Otherwise the
                // creation failed, and its cause is the error to report.
                let mut existing = builder()?.build().map_err(|e| LakeError::delta(location, e))?;
                match existing.verify_deltatable_existence().await {
                    Ok(true) => {
                        debug!(table = location, error = %e, "version 0 is there after a failed create, opening it");
                        existing.load().await.map_err(|e| LakeError::delta(location, e))?;
                        existing
                    }
                    _ => {
                        return Err(LakeError::Create {
                            uri: location.to_owned(),
                            source: Box::new(e),
                        });
                    }
                }
            }
        };
    }
    let missing = check_schema(location, &table, spec)?;
    if !missing.is_empty() && !spec.evolve {
        return Err(LakeError::SchemaBehind {
            uri: location.to_owned(),
            columns: missing.iter().map(|c| c.name().to_owned()).collect(),
        });
    }
    if !missing.is_empty() {
        table = add_columns(location, table, missing, &builder).await?;
        if let Some(column) = check_schema(location, &table, spec)?.first() {
            return Err(LakeError::SchemaMismatch {
                uri: location.into(),
                detail: format!("column {} is missing and could not be added", column.name()),
            });
        }
    }
    Ok(table)
}

/// Adds the nullable `columns` a newer release of the spec has to an existing table (Delta
/// schema evolution: the rows written before read them as null). Another writer may add them
/// first: then the table is opened again and has them.
async fn add_columns(
    location: &str,
    table: DeltaTable,
    columns: Vec<StructField>,
    builder: &impl Fn() -> Result<DeltaTableBuilder, LakeError>,
) -> Result<DeltaTable, LakeError> {
    let names: Vec<String> = columns.iter().map(|c| c.name().to_owned()).collect();
    match table
        .add_columns()
        .with_fields(columns)
        .with_commit_properties(CommitProperties::default().with_max_retries(0))
        .await
    {
        Ok(table) => {
            info!(table = location, columns = ?names, "added the new nullable columns to the table");
            Ok(table)
        }
        Err(e) => {
            debug!(table = location, error = %e, "adding columns failed; opening the table again");
            let mut table = builder()?.build().map_err(|e| LakeError::delta(location, e))?;
            table.load().await.map_err(|e| LakeError::delta(location, e))?;
            Ok(table)
        }
    }
}

/// Size of a table's current version, from the Delta log alone (no data file is read).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileStats {
    /// Active data files.
    pub files: u64,
    /// Rows in them, from the file statistics.
    pub rows: u64,
    /// Bytes in them.
    pub bytes: u64,
}

/// Counts the active files, rows and bytes of the table's loaded version.
pub(crate) fn file_stats(table: &DeltaTable) -> Result<FileStats, DeltaTableError> {
    let mut stats = FileStats::default();
    for file in table.snapshot()?.log_data().iter() {
        stats.files += 1;
        stats.rows += file.num_records().unwrap_or(0) as u64;
        stats.bytes += file.size().max(0) as u64;
    }
    Ok(stats)
}

/// The table must have the spec's columns (same names, types, nullability) and partitioning.
/// Checks the table's partitioning and columns against `spec`; returns the nullable columns of
/// the spec the table does not have yet (they can be added), and fails on any other difference
/// but what a newer release added: nullable columns, and nullable fields at the end of a struct
/// column, which this release's rows read as null.
fn check_schema(location: &str, table: &DeltaTable, spec: &TableSpec) -> Result<Vec<StructField>, LakeError> {
    let snapshot = table.snapshot().map_err(|e| LakeError::delta(location, e))?;
    let mismatch = |detail: String| LakeError::SchemaMismatch {
        uri: location.into(),
        detail,
    };
    let partitions = snapshot.metadata().partition_columns();
    if *partitions != spec.partition_columns {
        return Err(mismatch(format!(
            "partitioned by {partitions:?}, expected {:?}",
            spec.partition_columns
        )));
    }
    let expected = spec.delta_schema().map_err(|e| LakeError::delta(location, e))?;
    let actual = snapshot.schema();
    let mut missing = Vec::new();
    for field in expected.fields() {
        match actual.field(field.name()) {
            None if field.is_nullable() => missing.push(field.clone()),
            None => return Err(mismatch(format!("column {} is missing", field.name()))),
            // A struct column whose spec has new nullable fields at its end (a new typed event
            // parameter): Delta adds them by merging the column's type.
            Some(found) if grows_into(found.data_type(), field.data_type()) => missing.push(field.clone()),
            // A table a newer release wrote, whose struct column has nullable fields after this
            // release's (rolled back after a new typed parameter): rows written here read them as
            // null, as the writer conforms its batches to the table's schema.
            Some(found) if grows_into(field.data_type(), found.data_type()) => {}
            Some(found) if found.data_type() != field.data_type() => {
                return Err(mismatch(format!(
                    "column {} is {:?}, expected {:?}",
                    field.name(),
                    found.data_type(),
                    field.data_type()
                )));
            }
            Some(_) => {}
        }
    }
    Ok(missing)
}

/// Whether `expected` is `found` with new nullable fields after its own, in a struct at any
/// depth: what [`add_columns`] can add to rows that were written without them.
fn grows_into(found: &DeltaDataType, expected: &DeltaDataType) -> bool {
    let (DeltaDataType::Struct(found), DeltaDataType::Struct(expected)) = (found, expected) else {
        return false;
    };
    let found_count = found.fields().count();
    if found_count > expected.fields().count() {
        return false;
    }
    let mut grew = false;
    for (f, e) in found.fields().zip(expected.fields()) {
        if f.name() != e.name() || f.is_nullable() != e.is_nullable() {
            return false;
        }
        if f.data_type() != e.data_type() {
            if !grows_into(f.data_type(), e.data_type()) {
                return false;
            }
            grew = true;
        }
    }
    let added: Vec<&StructField> = expected.fields().skip(found_count).collect();
    (grew || !added.is_empty()) && added.iter().all(|f| f.is_nullable())
}

/// Reads `table` afresh from its newest checkpoint, replacing its state only once that succeeds.
/// What reads the whole log again (VACUUM's plan, the tombstones an erasure's purge looks at) needs
/// it: a handle that lived through a log cleanup, its own or another process's, may still be based
/// on a checkpoint the cleanup deleted.
pub(crate) async fn reload(uri: &str, table: &mut DeltaTable) -> Result<(), LakeError> {
    let mut fresh = DeltaTable::new(table.log_store());
    fresh
        .update_incremental(None)
        .await
        .map_err(|e| LakeError::delta(uri, e))?;
    *table = fresh;
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Arc;

    use arrow::datatypes::{DataType, Field, Schema, TimeUnit};

    use super::*;

    pub(crate) fn spec() -> TableSpec {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new(
                "at",
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                false,
            ),
            Field::new("day", DataType::Date32, false),
        ]));
        TableSpec::new("things", schema, &["day"])
    }

    #[tokio::test]
    async fn creates_once_then_opens() {
        let dir = tempfile::tempdir().unwrap();
        let location = dir.path().join("things");
        let location = location.to_str().unwrap();
        let storage = StorageConfig::default();
        let table = open_or_create(location, &spec(), &storage).await.unwrap();
        assert_eq!(table.version(), Some(0));
        let config = table.snapshot().unwrap().metadata().configuration().clone();
        assert_eq!(config["delta.setTransactionRetentionDuration"], "interval 30 days");
        let again = open_or_create(location, &spec(), &storage).await.unwrap();
        assert_eq!(again.version(), Some(0));
        assert_eq!(open_table(location, &storage).await.unwrap().version(), Some(0));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_creators_share_one_table() {
        let dir = tempfile::tempdir().unwrap();
        let location = dir.path().join("raced").to_str().unwrap().to_owned();
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let location = location.clone();
                tokio::spawn(async move { open_or_create(&location, &spec(), &StorageConfig::default()).await })
            })
            .collect();
        for task in tasks {
            assert_eq!(task.await.unwrap().unwrap().version(), Some(0));
        }
        let log = std::fs::read_dir(dir.path().join("raced/_delta_log")).unwrap().count();
        assert_eq!(log, 1, "exactly one commit");
    }

    #[tokio::test]
    async fn new_nullable_columns_are_added_and_old_rows_read_them_as_null() {
        let dir = tempfile::tempdir().unwrap();
        let location = dir.path().join("t");
        let location = location.to_str().unwrap();
        open_or_create(location, &spec(), &StorageConfig::default())
            .await
            .unwrap();
        let mut newer = spec();
        let mut fields: Vec<Field> = newer.schema.fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.push(Field::new("extra", DataType::Utf8, true));
        newer.schema = Arc::new(Schema::new(fields.clone()));
        // A writer told not to change the schema refuses the table, naming the column.
        let err = open_or_create(
            location,
            &newer.clone().with_schema_changes(false),
            &StorageConfig::default(),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(&err, LakeError::SchemaBehind { columns, .. } if columns == &["extra"]),
            "{err}"
        );
        assert!(err.to_string().contains("--evolve-schema"), "{err}");
        let table = open_or_create(location, &newer, &StorageConfig::default())
            .await
            .unwrap();
        assert_eq!(table.version(), Some(1));
        // Once the table has the column, such a writer opens it.
        open_or_create(
            location,
            &newer.clone().with_schema_changes(false),
            &StorageConfig::default(),
        )
        .await
        .unwrap();
        let schema = table.snapshot().unwrap().schema();
        assert!(schema.field("extra").is_some_and(StructField::is_nullable));
        // Opened again, nothing more is added.
        let again = open_or_create(location, &newer, &StorageConfig::default())
            .await
            .unwrap();
        assert_eq!(again.version(), Some(1));
        // A new column that may not be null cannot be added to rows that have none.
        fields.push(Field::new("required", DataType::Utf8, false));
        newer.schema = Arc::new(Schema::new(fields));
        let err = open_or_create(location, &newer, &StorageConfig::default())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("column required is missing"), "{err}");
    }

    /// Appends one row of `spec`'s schema (every struct field set) from `source`.
    async fn append_row(location: &str, table: &mut DeltaTable, spec: &TableSpec, source: &str) {
        use arrow::array::{ArrayRef, Date32Array, StringArray, StructArray, TimestampMicrosecondArray};
        let columns: Vec<ArrayRef> = spec
            .schema
            .fields()
            .iter()
            .map(|field| -> ArrayRef {
                match field.data_type() {
                    DataType::Utf8 => Arc::new(StringArray::from(vec![source])),
                    DataType::Timestamp(..) => Arc::new(TimestampMicrosecondArray::from(vec![0]).with_timezone("UTC")),
                    DataType::Date32 => Arc::new(Date32Array::from(vec![0])),
                    DataType::Struct(fields) => Arc::new(StructArray::new(
                        fields.clone(),
                        fields
                            .iter()
                            .map(|_| Arc::new(StringArray::from(vec![source])) as ArrayRef)
                            .collect(),
                        None,
                    )),
                    other => panic!("no test value for {other}"),
                }
            })
            .collect();
        let batch = arrow::record_batch::RecordBatch::try_new(spec.schema.clone(), columns).unwrap();
        crate::append::commit_batch(location, table, source, batch).await;
    }

    #[tokio::test]
    async fn new_nullable_fields_of_a_struct_column_are_added() {
        let dir = tempfile::tempdir().unwrap();
        let location = dir.path().join("t");
        let location = location.to_str().unwrap();
        let with_params = |params: Vec<Field>| {
            let mut spec = spec();
            let mut fields: Vec<Field> = spec.schema.fields().iter().map(|f| f.as_ref().clone()).collect();
            fields.push(Field::new("params", DataType::Struct(params.into()), true));
            spec.schema = Arc::new(Schema::new(fields));
            spec
        };
        let older = vec![Field::new("device_id", DataType::Utf8, true)];
        let mut table = open_or_create(location, &with_params(older.clone()), &StorageConfig::default())
            .await
            .unwrap();
        append_row(location, &mut table, &with_params(older.clone()), "before").await;
        // A new parameter, last in the struct, as a release that types one more adds it.
        let mut newer = older.clone();
        newer.push(Field::new("session_id", DataType::Utf8, true));
        let table = open_or_create(location, &with_params(newer.clone()), &StorageConfig::default())
            .await
            .unwrap();
        assert_eq!(table.version(), Some(2), "version 1 is the row written before");
        let schema = table.snapshot().unwrap().schema();
        let DeltaDataType::Struct(params) = schema.field("params").unwrap().data_type() else {
            panic!("params is a struct");
        };
        let names: Vec<&String> = params.fields().map(StructField::name).collect();
        assert_eq!(names, ["device_id", "session_id"]);
        // Opened again, nothing more is added; rows with the new field are written beside the old.
        let mut again = open_or_create(location, &with_params(newer.clone()), &StorageConfig::default())
            .await
            .unwrap();
        assert_eq!(again.version(), Some(2));
        append_row(location, &mut again, &with_params(newer.clone()), "after").await;
        assert_eq!(again.version(), Some(3));
        assert_eq!(file_stats(&again).unwrap().rows, 2);
        // What cannot be added to old rows is refused: a new field that may not be null, or one
        // placed before the fields the table has.
        let mut required = newer.clone();
        required.push(Field::new("level", DataType::Int32, false));
        let err = open_or_create(location, &with_params(required), &StorageConfig::default())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("column params is"), "{err}");
        let mut reordered = newer;
        reordered.insert(0, Field::new("level", DataType::Int32, true));
        let err = open_or_create(location, &with_params(reordered), &StorageConfig::default())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("column params is"), "{err}");

        // Rolled back: the older release opens the table the newer one grew, leaves its schema
        // as it is, and appends rows without the new field, which read it as null.
        let mut rolled_back = open_or_create(location, &with_params(older.clone()), &StorageConfig::default())
            .await
            .unwrap();
        assert_eq!(rolled_back.version(), Some(3), "nothing changed by opening");
        append_row(location, &mut rolled_back, &with_params(older), "rolled back").await;
        assert_eq!(file_stats(&rolled_back).unwrap().rows, 3);
        let schema = rolled_back.snapshot().unwrap().schema();
        let DeltaDataType::Struct(params) = schema.field("params").unwrap().data_type() else {
            panic!("params is a struct");
        };
        assert_eq!(params.fields().count(), 2, "the newer field stays");
    }

    #[tokio::test]
    async fn a_different_schema_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let location = dir.path().join("t");
        let location = location.to_str().unwrap();
        open_or_create(location, &spec(), &StorageConfig::default())
            .await
            .unwrap();
        let mut other = spec();
        let mut fields: Vec<Field> = other.schema.fields().iter().map(|f| f.as_ref().clone()).collect();
        fields[0] = Field::new("id", DataType::Int64, false);
        other.schema = Arc::new(Schema::new(fields));
        let err = open_or_create(location, &other, &StorageConfig::default())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("column id is"), "{err}");
        assert!(
            open_table(&format!("{location}-missing"), &StorageConfig::default())
                .await
                .is_err()
        );
    }
}
