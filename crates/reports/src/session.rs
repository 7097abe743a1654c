//! A DataFusion session over Delta tables, and typed access to query results.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::compute::{CastOptions, cast_with_options};
use arrow::datatypes::{DataType, Date32Type, Float64Type, Int64Type, Schema, TimeUnit, TimestampMicrosecondType};
use arrow::record_batch::RecordBatch;
use chrono::{DateTime, NaiveDate, Utc};
use deltalake::datafusion::common::TableReference;
use deltalake::datafusion::prelude::SessionContext;
use deltalake::delta_datafusion::DeltaSessionContext;
use lake::StorageConfig;
use tracing::debug;

use crate::error::ReportError;

/// A SQL session with lakelog's tables registered in it.
///
/// Identifiers are case-sensitive (delta-rs' session defaults), so camelCase columns such as
/// `eventDate` need no quoting.
pub struct ReportSession {
    ctx: SessionContext,
}

impl std::fmt::Debug for ReportSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReportSession")
            .field("session_id", &self.ctx.session_id())
            .finish()
    }
}

impl Default for ReportSession {
    fn default() -> Self {
        Self::new()
    }
}

impl ReportSession {
    /// A session with delta-rs' DataFusion defaults.
    pub fn new() -> Self {
        Self {
            ctx: DeltaSessionContext::new().into_inner(),
        }
    }

    /// The DataFusion session, for registering functions or running DataFrame code.
    pub fn context(&self) -> &SessionContext {
        &self.ctx
    }

    /// Opens the Delta tables at `uris` and registers them as `name`: one table directly, several
    /// (which must have the same columns, in any order) as a `UNION ALL` view over tables named
    /// `name__0`, `name__1`, ... Returns the columns of `name`.
    pub async fn register_tables(
        &self,
        name: &str,
        uris: &[String],
        storage: &StorageConfig,
    ) -> Result<Arc<Schema>, ReportError> {
        let Some(first_uri) = uris.first() else {
            return Err(ReportError::invalid_argument("--table", "", "give at least one table"));
        };
        let mut schemas: Vec<Arc<Schema>> = Vec::with_capacity(uris.len());
        for (i, uri) in uris.iter().enumerate() {
            let table = lake::Table::open(uri, storage)
                .await
                .map_err(|source| ReportError::Open {
                    uri: uri.clone(),
                    source,
                })?
                .into_delta();
            let register = |message: String| ReportError::Register {
                uri: uri.clone(),
                message,
            };
            table
                .update_datafusion_session(&self.ctx.state())
                .map_err(|e| register(e.to_string()))?;
            let provider = table.table_provider().await.map_err(|e| register(e.to_string()))?;
            let schema = provider.schema();
            if let Some(first) = schemas.first() {
                check_same_columns(first, &schema).map_err(|detail| ReportError::SchemaMismatch {
                    uri: uri.clone(),
                    first: first_uri.clone(),
                    detail,
                })?;
            }
            schemas.push(schema);
            let table_name = if uris.len() == 1 {
                name.to_owned()
            } else {
                format!("{name}__{i}")
            };
            self.ctx
                .register_table(TableReference::bare(table_name.as_str()), provider)
                .map_err(|e| register(e.to_string()))?;
            debug!(table = %uri, name = %table_name, "registered");
        }
        let first = schemas.swap_remove(0);
        if uris.len() > 1 {
            let columns: Vec<String> = first.fields().iter().map(|f| quote_ident(f.name())).collect();
            let columns = columns.join(", ");
            let selects: Vec<String> = (0..uris.len())
                .map(|i| format!("SELECT {columns} FROM {}", quote_ident(&format!("{name}__{i}"))))
                .collect();
            let sql = format!("CREATE VIEW {} AS {}", quote_ident(name), selects.join(" UNION ALL "));
            self.execute("union of the tables", &sql).await?;
        }
        Ok(first)
    }

    /// Runs a statement that returns nothing of interest (`CREATE VIEW`, ...). `query` names it in
    /// errors.
    pub async fn execute(&self, query: &str, sql: &str) -> Result<(), ReportError> {
        self.query(query, sql).await.map(drop)
    }

    /// Runs `sql` and collects its rows. `query` names it in errors and logs.
    pub async fn query(&self, query: &str, sql: &str) -> Result<Rows, ReportError> {
        let error = |source| ReportError::Query {
            query: query.to_owned(),
            source,
        };
        let started = std::time::Instant::now();
        let frame = self.ctx.sql(sql).await.map_err(error)?;
        let batches = frame.collect().await.map_err(error)?;
        let rows = Rows::new(query, batches);
        debug!(
            query,
            rows = rows.len(),
            ms = started.elapsed().as_millis() as u64,
            "query"
        );
        Ok(rows)
    }
}

/// The two schemas have the same column names and types (order aside).
fn check_same_columns(first: &Schema, other: &Schema) -> Result<(), String> {
    for field in first.fields() {
        match other.field_with_name(field.name()) {
            Err(_) => return Err(format!("it has no column {}", field.name())),
            Ok(found) if found.data_type() != field.data_type() => {
                return Err(format!(
                    "column {} is {}, not {}",
                    field.name(),
                    found.data_type(),
                    field.data_type()
                ));
            }
            Ok(_) => {}
        }
    }
    match other.fields().iter().find(|f| first.field_with_name(f.name()).is_err()) {
        Some(extra) => Err(format!("it has a column {} the first table lacks", extra.name())),
        None => Ok(()),
    }
}

/// `"name"`, with quotes inside doubled: a SQL identifier that keeps its case.
pub(crate) fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `'text'`, with quotes inside doubled: a SQL string literal.
pub fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The rows of a query, read column by column with the type the report expects. Columns are cast
/// (a string view, a dictionary-encoded partition value or an `Int32` read as `i64` is fine);
/// a column that is missing, or a value that cannot be cast, is an error naming the query and the
/// column (never a silent null).
#[derive(Debug, Clone)]
pub struct Rows {
    query: String,
    batches: Vec<RecordBatch>,
    len: usize,
}

impl Rows {
    /// Rows of `batches`, from the query named `query`.
    pub fn new(query: &str, batches: Vec<RecordBatch>) -> Self {
        let len = batches.iter().map(RecordBatch::num_rows).sum();
        Self {
            query: query.to_owned(),
            batches,
            len,
        }
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The Arrow batches as DataFusion returned them.
    pub fn batches(&self) -> &[RecordBatch] {
        &self.batches
    }

    /// The Arrow batches, taken out.
    pub fn into_batches(self) -> Vec<RecordBatch> {
        self.batches
    }

    /// Every batch's `column`, cast to `to`.
    fn columns(&self, column: &str, to: &DataType) -> Result<Vec<Arc<dyn Array>>, ReportError> {
        self.batches
            .iter()
            .map(|batch| cast_column(&self.query, batch, column, to))
            .collect()
    }

    /// A text column.
    pub fn strings(&self, column: &str) -> Result<Vec<Option<String>>, ReportError> {
        let mut out = Vec::with_capacity(self.len);
        for array in self.columns(column, &DataType::Utf8)? {
            out.extend(array.as_string::<i32>().iter().map(|v| v.map(str::to_owned)));
        }
        Ok(out)
    }

    /// An integer column (any integer type, or a decimal without fraction).
    pub fn i64s(&self, column: &str) -> Result<Vec<Option<i64>>, ReportError> {
        let mut out = Vec::with_capacity(self.len);
        for array in self.columns(column, &DataType::Int64)? {
            out.extend(array.as_primitive::<Int64Type>().iter());
        }
        Ok(out)
    }

    /// A floating-point column (any numeric type).
    pub fn f64s(&self, column: &str) -> Result<Vec<Option<f64>>, ReportError> {
        let mut out = Vec::with_capacity(self.len);
        for array in self.columns(column, &DataType::Float64)? {
            out.extend(array.as_primitive::<Float64Type>().iter());
        }
        Ok(out)
    }

    /// A boolean column.
    pub fn bools(&self, column: &str) -> Result<Vec<Option<bool>>, ReportError> {
        let mut out = Vec::with_capacity(self.len);
        for array in self.columns(column, &DataType::Boolean)? {
            out.extend(array.as_boolean().iter());
        }
        Ok(out)
    }

    /// A date column.
    pub fn dates(&self, column: &str) -> Result<Vec<Option<NaiveDate>>, ReportError> {
        let mut out = Vec::with_capacity(self.len);
        for array in self.columns(column, &DataType::Date32)? {
            out.extend(
                array
                    .as_primitive::<Date32Type>()
                    .iter()
                    .map(|d| d.and_then(|d| NaiveDate::from_num_days_from_ce_opt(d + UNIX_EPOCH_DAYS_FROM_CE))),
            );
        }
        Ok(out)
    }

    /// A timestamp column, in UTC.
    pub fn timestamps(&self, column: &str) -> Result<Vec<Option<DateTime<Utc>>>, ReportError> {
        let mut out = Vec::with_capacity(self.len);
        let to = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
        for array in self.columns(column, &to)? {
            out.extend(
                array
                    .as_primitive::<TimestampMicrosecondType>()
                    .iter()
                    .map(|t| t.and_then(DateTime::from_timestamp_micros)),
            );
        }
        Ok(out)
    }
}

/// `batch`'s column `name`; missing, an error naming `query` and the column.
pub(super) fn batch_column<'b>(query: &str, batch: &'b RecordBatch, name: &str) -> Result<&'b ArrayRef, ReportError> {
    batch
        .column_by_name(name)
        .ok_or_else(|| ReportError::column(query, name, "not in the result"))
}

/// `batch`'s column `name` cast to `to`; missing, or a value that cannot be cast, is an error
/// naming `query` and the column (never a silent null).
pub(super) fn cast_column(
    query: &str,
    batch: &RecordBatch,
    name: &str,
    to: &DataType,
) -> Result<ArrayRef, ReportError> {
    let array = batch_column(query, batch, name)?;
    let options = CastOptions {
        safe: false,
        ..CastOptions::default()
    };
    cast_with_options(array, to, &options)
        .map_err(|e| ReportError::column(query, name, format!("cannot read {} as {to}: {e}", array.data_type())))
}

/// Days from 0001-01-01 (day 1 of the common era) to 1970-01-01.
pub(crate) const UNIX_EPOCH_DAYS_FROM_CE: i32 = 719_163;

#[cfg(test)]
mod tests {
    use arrow::array::{Date32Array, Int32Array, StringViewArray};
    use arrow::datatypes::Field;

    use super::*;
    use crate::range::TimeRange;

    #[test]
    fn columns_are_cast_to_what_the_report_reads() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("name", DataType::Utf8View, true),
            Field::new("n", DataType::Int32, true),
            Field::new("day", DataType::Date32, true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringViewArray::from(vec![Some("a"), None])),
                Arc::new(Int32Array::from(vec![Some(7), Some(-1)])),
                Arc::new(Date32Array::from(vec![Some(19_875), None])),
            ],
        )
        .unwrap();
        let rows = Rows::new("test", vec![batch.clone(), batch]);
        assert_eq!(rows.len(), 4);
        assert_eq!(
            rows.strings("name").unwrap(),
            [Some("a".into()), None, Some("a".into()), None]
        );
        assert_eq!(rows.i64s("n").unwrap(), [Some(7), Some(-1), Some(7), Some(-1)]);
        assert_eq!(rows.f64s("n").unwrap()[0], Some(7.0));
        assert_eq!(rows.dates("day").unwrap()[0], NaiveDate::from_ymd_opt(2024, 6, 1));
        let err = rows.i64s("missing").unwrap_err().to_string();
        assert!(err.contains("\"test\"") && err.contains("missing"), "{err}");
        let err = rows.dates("name").unwrap_err().to_string();
        assert!(err.contains("column name"), "{err}");
    }

    /// Three access-log tables (one per bucket of the synthetic corpus) and their rejects table,
    /// with the rows the parser gives per bucket.
    async fn tables(lake: &std::path::Path) -> (Vec<String>, String, Vec<(String, i64)>) {
        use access_log_ingest::{Ingestor, ObjectReader, ObjectRef, TableTemplate};
        use fixtures::log_lines::{SynthConfig, corpus};

        let raw = lake.join("raw");
        std::fs::create_dir_all(&raw).unwrap();
        let data = corpus(
            SynthConfig {
                malformed_rate: 0.01,
                ..SynthConfig::default()
            },
            300_000,
        );
        let object = raw.join("2024-06-01-00-00-00-LOG");
        std::fs::write(&object, &data).unwrap();
        let template = TableTemplate::parse("table", &format!("{}/access_logs/{{bucket}}", lake.display())).unwrap();
        let rejects = template.default_rejects();
        let ingestor = Ingestor::new(
            template,
            rejects.clone(),
            StorageConfig::default(),
            ObjectReader::local(),
            1,
        );
        for (_, result) in ingestor
            .ingest(&[ObjectRef::Local(object)], &lake::Retry::default(), &())
            .await
        {
            result.unwrap();
        }
        let mut per_bucket = std::collections::BTreeMap::new();
        for (_, _, parsed) in s3_access_log::parse_lines(&data) {
            if let Ok(record) = parsed {
                *per_bucket.entry(record.bucket.unwrap().into_owned()).or_insert(0i64) += 1;
            }
        }
        let uris = per_bucket
            .keys()
            .map(|b| format!("{}/access_logs/{b}", lake.display()))
            .collect();
        (uris, rejects, per_bucket.into_iter().collect())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn several_tables_read_as_one_and_the_range_prunes() {
        let lake = tempfile::tempdir().unwrap();
        let (uris, rejects, expected) = tables(lake.path()).await;
        assert_eq!(uris.len(), 3);
        let session = ReportSession::new();
        let schema = session
            .register_tables("access_logs", &uris, &StorageConfig::default())
            .await
            .unwrap();
        assert!(schema.field_with_name("request_date").is_ok());
        let rows = session
            .query(
                "per bucket",
                "SELECT bucket, count(*) AS n FROM access_logs GROUP BY bucket ORDER BY bucket",
            )
            .await
            .unwrap();
        let got: Vec<(String, i64)> = rows
            .strings("bucket")
            .unwrap()
            .into_iter()
            .zip(rows.i64s("n").unwrap())
            .map(|(b, n)| (b.unwrap(), n.unwrap()))
            .collect();
        assert_eq!(got, expected);

        // The corpus starts at 2024-06-01T00:00:00Z and spans a few minutes: cut it in two.
        let count = |range: TimeRange| {
            let sql = format!(
                "SELECT count(*) AS n, min(request_time) AS first FROM access_logs WHERE {}",
                range.filter("request_date", "request_time")
            );
            let session = &session;
            async move {
                let rows = session.query("range", &sql).await.unwrap();
                (
                    rows.i64s("n").unwrap()[0].unwrap(),
                    rows.timestamps("first").unwrap()[0],
                )
            }
        };
        let all: i64 = expected.iter().map(|(_, n)| n).sum();
        let cut = TimeRange::parse(Some("2024-06-01T00:05:00Z"), None).unwrap();
        let (after, first) = count(cut).await;
        let (before, _) = count(TimeRange::parse(None, Some("2024-06-01T00:05:00Z")).unwrap()).await;
        assert!(after > 0 && before > 0);
        assert_eq!(after + before, all);
        assert!(first.unwrap() >= cut.from.unwrap());
        let (none, _) = count(TimeRange::parse(Some("2024-06-02"), None).unwrap()).await;
        assert_eq!(none, 0);

        // A rejects table cannot be read together with access logs; a missing table is named.
        let err = ReportSession::new()
            .register_tables("t", &[uris[0].clone(), rejects.clone()], &StorageConfig::default())
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains(&rejects) && err.contains("column"), "{err}");
        let missing = format!("{}/nothing", lake.path().display());
        let err = ReportSession::new()
            .register_tables("t", std::slice::from_ref(&missing), &StorageConfig::default())
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("nothing"), "{err}");
        let err = session
            .query("bad sql", "SELECT nope FROM access_logs")
            .await
            .unwrap_err();
        assert!(err.to_string().starts_with("query \"bad sql\" failed"), "{err}");
    }

    #[test]
    fn identifiers_and_literals_are_quoted() {
        assert_eq!(quote_ident("eventDate"), "\"eventDate\"");
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
        assert_eq!(quote_literal("it's"), "'it''s'");
    }
}
