//! Registers lakelog's Delta tables in the AWS Glue Data Catalog, so that Athena (and any engine
//! that reads Glue) can query them by name without a hand-written `CREATE TABLE`.
//!
//! A table is registered as Athena's Delta Lake support reads one: an `EXTERNAL_TABLE` whose
//! parameters say `table_type=DELTA`, with its location; Athena reads the rows, the schema and the
//! partitions from the table's Delta log. The columns (in Hive types) and partition keys are
//! written too, so that the Glue console and other engines show the schema. Registering again
//! updates the entry, so [`Catalog::register`] can be called whenever a table is opened.
//!
//! Each table's Iceberg view (see [`lake::iceberg_view`]) is registered beside it as `NAME_iceberg`
//! ([`view_name`]), in the form Glue's Iceberg tables take (`table_type=ICEBERG`,
//! `metadata_location`), for the engines that read Iceberg and not Delta (Athena's DuckDB engine,
//! Snowflake, Spark's Glue catalog). An Iceberg entry names one metadata file, so it must follow the
//! view: a [`Catalog`] is also the process's [`lake::iceberg_view::Publisher`], and moves the entry
//! of each table it registered to each new metadata file, only ever forward, under Glue's
//! optimistic lock (`VersionId`), as Iceberg's own Glue catalog commits.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arrow::datatypes::{DataType, Field, Schema};
use aws_sdk_glue::error::{DisplayErrorContext, SdkError};
use aws_sdk_glue::types::{Column, StorageDescriptor, TableInput};
use env_config::{ConfigError, Vars};

/// The variable that names the Glue database of a function's tables (unset: no registration).
pub const DATABASE_VAR: &str = "GLUE_DATABASE";

/// The Glue database of [`DATABASE_VAR`], if set: 1 to 255 lower-case letters, digits and `_`.
pub fn database<F: Fn(&str) -> Option<String>>(vars: &Vars<F>) -> Result<Option<String>, ConfigError> {
    let Some(value) = vars.optional(DATABASE_VAR) else {
        return Ok(None);
    };
    let valid = (1..=255).contains(&value.len())
        && value
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if valid {
        Ok(Some(value))
    } else {
        Err(ConfigError::invalid(
            DATABASE_VAR,
            &value,
            "a Glue database name: 1 to 255 lower-case letters, digits and _",
        ))
    }
}

/// Why a table could not be registered.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// A column's type has no Hive equivalent that Athena reads.
    #[error("{table}: column {column} has type {data_type}, which the catalog cannot describe")]
    UnsupportedType {
        /// The table's catalog name.
        table: String,
        /// The column.
        column: String,
        /// Its Arrow type.
        data_type: String,
    },
    /// Glue refused the table or could not be reached.
    #[error("{table}: Glue {operation} in database {database} failed: {message}")]
    Glue {
        /// The table's catalog name.
        table: String,
        /// The database.
        database: String,
        /// `CreateTable` or `UpdateTable`.
        operation: &'static str,
        /// Glue's answer.
        message: String,
    },
    /// Another table holds the name: two locations whose names map to one catalog name
    /// (`access_logs/a.b` and `access_logs/a-b`). The entry is left as it is.
    #[error(
        "{table}: the catalog name in database {database} is taken by {registered}, so {location} is not \
         registered (both map to this name; register one of them under another name)"
    )]
    NameTaken {
        /// The catalog name.
        table: String,
        /// The database.
        database: String,
        /// The location of the table to register.
        location: String,
        /// The location the entry has.
        registered: String,
    },
    /// The Delta table to register could not be opened or its schema read.
    #[error("{location}: the table to register cannot be read: {source}")]
    TableUnreadable {
        /// The table's location.
        location: String,
        /// Why.
        #[source]
        source: lake::LakeError,
    },
}

/// The catalog name of the table at `location`: its last path segment, lower-cased, with every
/// character other than a letter, digit or `_` made `_`. A segment that starts with `_` (a
/// rejects table beside per-bucket tables, `access_logs/_rejects`) or a table of `per_bucket`
/// (`access_logs/{bucket}`) is prefixed with its parent segment: `access_logs_rejects`,
/// `access_logs_web_assets`.
pub fn table_name(location: &str, per_bucket: bool) -> String {
    let path = location.split_once("://").map_or(location, |(_, rest)| rest);
    let mut segments = path.trim_end_matches('/').rsplit('/');
    let last = segments.next().unwrap_or_default();
    let parent = segments.next().filter(|_| per_bucket || last.starts_with('_'));
    let name = match parent {
        Some(parent) => format!("{parent}_{}", last.trim_start_matches('_')),
        None => last.to_owned(),
    };
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// What a table's Iceberg view is named in the catalog: its Delta entry's name with this suffix.
pub const VIEW_SUFFIX: &str = "_iceberg";

/// The catalog name of the Iceberg view of the table registered as `name`.
pub fn view_name(name: &str) -> String {
    format!("{name}{VIEW_SUFFIX}")
}

/// The Hive type of an Arrow type, as Glue and Athena name it; `None` when there is none.
pub fn hive_type(data_type: &DataType) -> Option<String> {
    Some(match data_type {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "string".into(),
        DataType::Boolean => "boolean".into(),
        DataType::Int8 => "tinyint".into(),
        DataType::Int16 => "smallint".into(),
        DataType::Int32 => "int".into(),
        DataType::Int64 | DataType::UInt8 | DataType::UInt16 | DataType::UInt32 => "bigint".into(),
        DataType::Float32 => "float".into(),
        DataType::Float64 => "double".into(),
        DataType::Date32 => "date".into(),
        DataType::Timestamp(_, _) => "timestamp".into(),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => "binary".into(),
        DataType::Decimal128(precision, scale) => format!("decimal({precision},{scale})"),
        DataType::List(item) | DataType::LargeList(item) => format!("array<{}>", hive_type(item.data_type())?),
        DataType::Struct(fields) => {
            let fields: Option<Vec<String>> = fields
                .iter()
                .map(|f| Some(format!("{}:{}", f.name(), hive_type(f.data_type())?)))
                .collect();
            format!("struct<{}>", fields?.join(","))
        }
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => {
                format!(
                    "map<{},{}>",
                    hive_type(kv[0].data_type())?,
                    hive_type(kv[1].data_type())?
                )
            }
            _ => return None,
        },
        _ => return None,
    })
}

/// A Glue database that tables are registered in.
#[derive(Debug, Clone)]
pub struct Catalog {
    client: aws_sdk_glue::Client,
    database: String,
    /// The tables registered through this catalog (root URI without a trailing `/`) and their
    /// entries' names: the views whose entries [`Catalog::publish_view`] moves.
    registered: Arc<Mutex<HashMap<String, String>>>,
}

/// What [`Catalog::register`] did to a table's two entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registration {
    /// The Delta table's entry.
    pub table: Registered,
    /// Its Iceberg view's entry; `None` when there is no view (yet, or `ICEBERG_VIEW` is off):
    /// the view's first metadata file registers it.
    pub view: Option<Registered>,
}

/// What [`Catalog::register`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registered {
    /// The table was new to the database.
    Created,
    /// The table was there; its entry now matches the table.
    Updated,
    /// The table was there with this very entry: nothing was written, and Glue keeps no new
    /// version of it.
    Unchanged,
}

impl Catalog {
    /// The database `database`, through `client`.
    pub fn new(client: aws_sdk_glue::Client, database: &str) -> Self {
        Self {
            client,
            database: database.to_owned(),
            registered: Arc::default(),
        }
    }

    /// The database `database`, with a Glue client from the environment's AWS configuration.
    pub async fn from_env(database: &str) -> Self {
        let config = aws_config::load_from_env().await;
        Self::new(aws_sdk_glue::Client::new(&config), database)
    }

    /// The database's name.
    pub fn database(&self) -> &str {
        &self.database
    }

    /// Registers `table` as `name` (see [`table_name`]): its location, schema and partition
    /// columns; an entry of that name is replaced. Its Iceberg view, if it has one, is registered as
    /// [`view_name`]`(name)`, naming the view's newest metadata file, and its entry is moved by
    /// every later metadata file this process writes (see [`Catalog::publish_view`]).
    pub async fn register(&self, name: &str, table: &lake::Table) -> Result<Registration, CatalogError> {
        let unreadable = |source| CatalogError::TableUnreadable {
            location: table.uri().to_owned(),
            source,
        };
        let schema = table.schema().map_err(unreadable)?;
        let partition_columns = table.partition_columns().map_err(unreadable)?;
        let delta = table_input(name, table.uri(), &schema, &partition_columns, Format::Delta)?;
        let registered = self.put_table(delta, table.uri()).await?;
        if !lake::iceberg_view::enabled() {
            return Ok(Registration {
                table: registered,
                view: None,
            });
        }
        self.follow(table.uri(), name);
        let view = match table.iceberg_metadata().await.map_err(unreadable)? {
            Some(metadata) => {
                let format = Format::Iceberg { metadata: &metadata };
                let input = table_input(&view_name(name), table.uri(), &schema, &partition_columns, format)?;
                Some(self.put_table(input, table.uri()).await?)
            }
            None => None,
        };
        Ok(Registration {
            table: registered,
            view,
        })
    }

    /// Creates the entry `input` of the table at `location`, or brings the entry of that location
    /// up to date. An entry of another location is left alone ([`CatalogError::NameTaken`]), as is
    /// an Iceberg entry that names a newer metadata file than `input`; an entry already up to date
    /// is not written again. An update keeps no archived version (`SkipArchive`), so registering at
    /// every cold start does not fill Glue's versions of the table, and is made only if nobody
    /// updated the entry since it was read (`VersionId`), else read and decided again.
    async fn put_table(&self, input: TableInput, location: &str) -> Result<Registered, CatalogError> {
        let name = input.name().to_owned();
        let glue_error = |operation: &'static str, message: String| CatalogError::Glue {
            table: name.clone(),
            database: self.database.clone(),
            operation,
            message,
        };
        let mut conflicts = 0;
        loop {
            let existing = match self.existing(&name).await.map_err(|m| glue_error("GetTable", m))? {
                Some(existing) => existing,
                None => {
                    let created = self
                        .client
                        .create_table()
                        .database_name(&self.database)
                        .table_input(input.clone())
                        .send()
                        .await;
                    match created {
                        Ok(_) => return Ok(Registered::Created),
                        // Another writer created it in between: compare with theirs.
                        Err(SdkError::ServiceError(e))
                            if e.err().is_already_exists_exception() && conflicts < CONFLICTS =>
                        {
                            conflicts += 1;
                            continue;
                        }
                        Err(e) => return Err(glue_error("CreateTable", DisplayErrorContext(e).to_string())),
                    }
                }
            };
            let registered = existing
                .storage_descriptor()
                .and_then(|s| s.location())
                .unwrap_or_default();
            if registered.trim_end_matches('/') != location.trim_end_matches('/') {
                return Err(CatalogError::NameTaken {
                    table: name.clone(),
                    database: self.database.clone(),
                    location: location.to_owned(),
                    registered: registered.to_owned(),
                });
            }
            let metadata_of = |parameters: Option<&HashMap<String, String>>| {
                parameters.and_then(|p| p.get(METADATA_LOCATION)).cloned()
            };
            let (theirs, ours) = (metadata_of(existing.parameters()), metadata_of(input.parameters()));
            let number = |m: &Option<String>| m.as_deref().and_then(lake::iceberg_view::metadata_number);
            if ours.is_some() && theirs != ours && number(&theirs) >= number(&ours) {
                return Ok(Registered::Unchanged);
            }
            if same_entry(&existing, &input) {
                return Ok(Registered::Unchanged);
            }
            let mut update = input.clone();
            if let Some(previous) = theirs.filter(|_| ours.is_some()) {
                let mut parameters = update.parameters.take().unwrap_or_default();
                parameters.insert(PREVIOUS_METADATA_LOCATION.to_owned(), previous);
                update.parameters = Some(parameters);
            }
            let updated = self
                .client
                .update_table()
                .database_name(&self.database)
                .table_input(update)
                .skip_archive(true)
                .set_version_id(existing.version_id().map(str::to_owned))
                .send()
                .await;
            match updated {
                Ok(_) => return Ok(Registered::Updated),
                Err(SdkError::ServiceError(e))
                    if e.err().is_concurrent_modification_exception() && conflicts < CONFLICTS =>
                {
                    conflicts += 1;
                }
                Err(e) => return Err(glue_error("UpdateTable", DisplayErrorContext(e).to_string())),
            }
        }
    }

    /// Moves the view entry of the table at `uri`, registered as `name`, with each metadata file
    /// this process writes (see [`Catalog::publish_view`]), without registering it now: for a process
    /// that commits to tables it does not open itself (the maintenance pass).
    pub fn follow(&self, uri: &str, name: &str) {
        if let Ok(mut names) = self.registered.lock() {
            names.insert(uri.trim_end_matches('/').to_owned(), name.to_owned());
        }
    }

    /// Makes this catalog the process's [`lake::iceberg_view::Publisher`]: each view metadata file
    /// written from now on moves the entry of its view, if its table was registered (or followed)
    /// through this catalog or a clone of it. `false` when the process has a publisher already.
    pub fn publish_views(&self) -> bool {
        lake::iceberg_view::publish_to(Arc::new(self.clone()))
    }

    /// Moves the entry of the view described by `view`, if its table was registered through this
    /// catalog, to `view.metadata`, creating the entry if there is none; `None` for a table this
    /// catalog did not register.
    pub async fn publish_view(
        &self,
        view: &lake::iceberg_view::Published<'_>,
    ) -> Result<Option<Registered>, CatalogError> {
        let name = self
            .registered
            .lock()
            .ok()
            .and_then(|names| names.get(view.table.trim_end_matches('/')).cloned());
        let Some(name) = name else {
            return Ok(None);
        };
        let format = Format::Iceberg {
            metadata: view.metadata,
        };
        let input = table_input(
            &view_name(&name),
            view.table,
            view.schema,
            view.partition_columns,
            format,
        )?;
        self.put_table(input, view.table).await.map(Some)
    }

    /// The entry `name` of the database, `None` when there is none; Err: Glue's answer.
    async fn existing(&self, name: &str) -> Result<Option<aws_sdk_glue::types::Table>, String> {
        match self
            .client
            .get_table()
            .database_name(&self.database)
            .name(name)
            .send()
            .await
        {
            Ok(found) => Ok(found.table),
            Err(SdkError::ServiceError(e)) if e.err().is_entity_not_found_exception() => Ok(None),
            Err(e) => Err(DisplayErrorContext(e).to_string()),
        }
    }
}

/// Glue's Iceberg entries: the parameter naming the current metadata file, and the one before.
const METADATA_LOCATION: &str = "metadata_location";
const PREVIOUS_METADATA_LOCATION: &str = "previous_metadata_location";
/// Updates tried again after another writer updated the entry in between.
const CONFLICTS: usize = 5;

impl lake::iceberg_view::Publisher for Catalog {
    fn publish<'a>(
        &'a self,
        view: &'a lake::iceberg_view::Published<'a>,
    ) -> futures::future::BoxFuture<'a, Result<(), String>> {
        Box::pin(async move { self.publish_view(view).await.map(drop).map_err(|e| e.to_string()) })
    }
}

/// Whether the entry `existing` already says what `input` would write: type, parameters,
/// location, columns and partition keys.
fn same_entry(existing: &aws_sdk_glue::types::Table, input: &TableInput) -> bool {
    let columns = |c: &[Column]| -> Vec<(String, Option<String>)> {
        c.iter()
            .map(|c| (c.name().to_owned(), c.r#type().map(str::to_owned)))
            .collect()
    };
    let descriptor = |s: Option<&StorageDescriptor>| s.map(|s| (s.location().map(str::to_owned), columns(s.columns())));
    let parameters_included = input.parameters().is_none_or(|want| {
        let have = existing.parameters();
        want.iter().all(|(k, v)| have.and_then(|h| h.get(k)) == Some(v))
    });
    existing.table_type() == input.table_type()
        && parameters_included
        && descriptor(existing.storage_descriptor()) == descriptor(input.storage_descriptor())
        && columns(existing.partition_keys()) == columns(input.partition_keys())
}

fn column(table: &str, field: &Field) -> Result<Column, CatalogError> {
    let data_type = hive_type(field.data_type()).ok_or_else(|| CatalogError::UnsupportedType {
        table: table.to_owned(),
        column: field.name().clone(),
        data_type: field.data_type().to_string(),
    })?;
    // Only a missing name or type fails to build, and both are set.
    Column::builder()
        .name(field.name())
        .r#type(data_type)
        .build()
        .map_err(|e| CatalogError::UnsupportedType {
            table: table.to_owned(),
            column: field.name().clone(),
            data_type: e.to_string(),
        })
}

/// Which entry [`table_input`] builds.
#[derive(Debug, Clone, Copy)]
enum Format<'a> {
    /// Athena's Delta form: `table_type=DELTA`, the location, columns and partition keys.
    Delta,
    /// Glue's Iceberg form: `table_type=ICEBERG`, the current metadata file, every column
    /// (partition columns too: Iceberg's partitions are hidden).
    Iceberg {
        /// The view's metadata file.
        metadata: &'a str,
    },
}

/// The Glue entry `name` of the table at `location` in `format`, with the columns (and, for
/// Delta, the partition keys) in Hive types.
fn table_input(
    name: &str,
    location: &str,
    schema: &Schema,
    partition_columns: &[String],
    format: Format<'_>,
) -> Result<TableInput, CatalogError> {
    let mut columns = Vec::new();
    let mut partition_keys = Vec::new();
    for field in schema.fields() {
        let column = column(name, field)?;
        if matches!(format, Format::Delta) && partition_columns.contains(field.name()) {
            partition_keys.push(column);
        } else {
            columns.push(column);
        }
    }
    let location = format!("{}/", location.trim_end_matches('/'));
    let builder = TableInput::builder()
        .name(name)
        .table_type("EXTERNAL_TABLE")
        .parameters("EXTERNAL", "TRUE")
        .storage_descriptor(
            StorageDescriptor::builder()
                .location(location)
                .set_columns(Some(columns))
                .build(),
        )
        .set_partition_keys(Some(partition_keys));
    let builder = match format {
        Format::Delta => builder
            .description("Delta Lake table written by lakelog")
            .parameters("table_type", "DELTA"),
        Format::Iceberg { metadata } => builder
            .description("Iceberg view of a Delta Lake table written by lakelog, over the same files")
            .parameters("table_type", "ICEBERG")
            .parameters(METADATA_LOCATION, metadata),
    };
    builder.build().map_err(|e| CatalogError::Glue {
        table: name.to_owned(),
        database: String::new(),
        operation: "CreateTable",
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::datatypes::{Fields, TimeUnit};

    use super::*;

    #[test]
    fn the_database_is_checked() {
        let vars = |value: Option<&str>| {
            let value = value.map(str::to_owned);
            Vars::new(move |_| value.clone())
        };
        assert_eq!(database(&vars(None)).unwrap(), None);
        assert_eq!(
            database(&vars(Some("lakelog_lake"))).unwrap().as_deref(),
            Some("lakelog_lake")
        );
        let err = database(&vars(Some("Lake-DB"))).unwrap_err().to_string();
        assert!(err.contains(DATABASE_VAR), "{err}");
    }

    #[test]
    fn names_of_tables() {
        assert_eq!(table_name("s3://lake/game_events", false), "game_events");
        assert_eq!(
            table_name("s3://lake/game_events_rejects/", false),
            "game_events_rejects"
        );
        assert_eq!(
            table_name("s3://lake/access_logs/_rejects", false),
            "access_logs_rejects"
        );
        assert_eq!(
            table_name("s3://lake/access_logs/web-assets.example", true),
            "access_logs_web_assets_example"
        );
        assert_eq!(table_name("./lake/Game-Events", false), "game_events");
    }

    #[test]
    fn hive_types_of_the_tables_columns() {
        let params = DataType::Struct(Fields::from(vec![
            Field::new("amount", DataType::Float64, true),
            Field::new(
                "tags",
                DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
                true,
            ),
        ]));
        assert_eq!(hive_type(&params).unwrap(), "struct<amount:double,tags:array<string>>");
        assert_eq!(
            hive_type(&DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))).unwrap(),
            "timestamp"
        );
        assert_eq!(hive_type(&DataType::Date32).unwrap(), "date");
        assert_eq!(hive_type(&DataType::Duration(TimeUnit::Second)), None);
    }

    #[test]
    fn an_entry_in_athenas_form() {
        let schema = Schema::new(vec![
            Field::new("eventId", DataType::Utf8, false),
            Field::new("eventDate", DataType::Date32, false),
        ]);
        let partitions = ["eventDate".to_owned()];
        let input = table_input(
            "game_events",
            "s3://lake/game_events",
            &schema,
            &partitions,
            Format::Delta,
        )
        .unwrap();
        assert_eq!(input.table_type(), Some("EXTERNAL_TABLE"));
        assert_eq!(input.parameters().unwrap()["table_type"], "DELTA");
        let storage = input.storage_descriptor().unwrap();
        assert_eq!(storage.location(), Some("s3://lake/game_events/"));
        assert_eq!(storage.columns().len(), 1);
        assert_eq!(input.partition_keys()[0].name(), "eventDate");
        assert_eq!(input.partition_keys()[0].r#type(), Some("date"));

        let bad = Schema::new(vec![Field::new("d", DataType::Duration(TimeUnit::Second), true)]);
        let err = table_input("t", "s3://lake/t", &bad, &[], Format::Delta)
            .unwrap_err()
            .to_string();
        assert!(err.contains("column d"), "{err}");
    }

    #[test]
    fn a_view_entry_in_glues_iceberg_form() {
        let schema = Schema::new(vec![
            Field::new("eventId", DataType::Utf8, false),
            Field::new("eventDate", DataType::Date32, false),
        ]);
        let metadata = "s3://lake/game_events/_iceberg/metadata/v7.metadata.json";
        let input = table_input(
            &view_name("game_events"),
            "s3://lake/game_events",
            &schema,
            &["eventDate".into()],
            Format::Iceberg { metadata },
        )
        .unwrap();
        assert_eq!(input.name(), "game_events_iceberg");
        assert_eq!(input.table_type(), Some("EXTERNAL_TABLE"));
        let parameters = input.parameters().unwrap();
        assert_eq!(parameters["table_type"], "ICEBERG");
        assert_eq!(parameters[METADATA_LOCATION], metadata);
        // Iceberg's partitions are hidden: every column is a column.
        let storage = input.storage_descriptor().unwrap();
        assert_eq!(storage.location(), Some("s3://lake/game_events/"));
        assert_eq!(storage.columns().len(), 2);
        assert!(input.partition_keys().is_empty());
        assert_eq!(lake::iceberg_view::metadata_number(metadata), Some(7));
    }
}
