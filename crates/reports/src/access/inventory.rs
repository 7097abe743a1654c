//! S3 Inventory as an input of the access report: what is stored, exactly, where the logs only
//! see what requests touched.
//!
//! An inventory is read from its `manifest.json` (local or `s3://`), in the CSV (gzipped, keys
//! URL-encoded, columns as `fileSchema` lists them) or Parquet format S3 writes; ORC is refused
//! with a clear error. Its object versions (delete markers are not objects; older versions are
//! stored and billed, so they count) are grouped per dataset by the report's [`DatasetRule`], by
//! the day their data is of (the date in the key, else the day it was last modified), storage
//! class and whether they are large enough to move ([`advisor::MIN_TRANSITION_BYTES`]): a few
//! groups per dataset and day, whatever the number of objects. Data files are read one at a time.
//!
//! Local manifests find their data files the way the destination bucket holds them: each file's
//! key is looked up under the manifest's folder and each folder above it, so a copy of the
//! destination bucket (or of its prefix) works as it is.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{DateTime, NaiveDate, Utc};
use deltalake::arrow::array::{Array, AsArray};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{DataType, Int64Type};
use deltalake::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use object_store::DynObjectStore;
use object_store::ObjectStoreExt as _;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::local::LocalFileSystem;
use object_store::path::Path as StorePath;
use serde::{Deserialize, Serialize};
use url::Url;

use super::advisor::{self, StoredAt};
use super::dataset::{DatasetRule, key_date};
use crate::error::ReportError;

/// The storage class of an object a list names no class for.
const DEFAULT_CLASS: &str = "STANDARD";

/// The objects of one group.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Count {
    /// Object versions.
    pub objects: u64,
    /// Their bytes.
    pub bytes: u64,
}

impl Count {
    fn add(&mut self, bytes: u64) {
        self.objects += 1;
        self.bytes += bytes;
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Group {
    dataset: String,
    day: Option<NaiveDate>,
    class: String,
    movable: bool,
}

/// One inventory list, read and grouped.
#[derive(Debug, Clone)]
pub struct Inventory {
    /// The bucket it lists (`sourceBucket`).
    pub bucket: String,
    /// Where its manifest was read from.
    pub location: String,
    /// When S3 began the list (`creationTimestamp`).
    pub taken: DateTime<Utc>,
    /// `CSV` or `Parquet`.
    pub format: String,
    /// All its objects.
    pub total: Count,
    /// How it was reached, to read it again object by object ([`Inventory::objects`]).
    storage: lake::StorageConfig,
    groups: BTreeMap<Group, Count>,
    /// The datasets holding a table format's files, with the format's index in
    /// [`advisor::TABLE_FORMATS`] (the first when several).
    formats: BTreeMap<String, usize>,
}

/// The stored objects of one dataset, by storage class.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DatasetStorage {
    /// All its objects.
    pub total: Count,
    /// By storage class.
    pub by_class: BTreeMap<String, Count>,
    /// The first and last day its data is of.
    pub days: Option<(NaiveDate, NaiveDate)>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    source_bucket: String,
    creation_timestamp: Option<String>,
    file_format: String,
    #[serde(default)]
    file_schema: String,
    files: Vec<ManifestFile>,
}

#[derive(Debug, Deserialize)]
struct ManifestFile {
    key: String,
}

/// One row as the lists give it.
struct Row<'a> {
    key: &'a str,
    version_id: &'a str,
    size: Option<u64>,
    modified: Option<DateTime<Utc>>,
    class: &'a str,
    delete_marker: bool,
}

/// One stored object version of a list (delete markers are not objects).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListedObject<'a> {
    /// Its key.
    pub key: &'a str,
    /// Its version id; empty for an unversioned bucket's objects (and lists without the field).
    pub version_id: &'a str,
    /// Its size in bytes.
    pub size: u64,
    /// When it was last written, if the list has the field.
    pub modified: Option<DateTime<Utc>>,
    /// Its storage class (`STANDARD` when the list names none).
    pub class: &'a str,
}

fn error(location: &str, reason: impl Into<String>) -> ReportError {
    ReportError::Inventory {
        location: location.to_owned(),
        reason: reason.into(),
    }
}

/// Two inventories are equal when they hold the same: how each was reached is not compared.
impl PartialEq for Inventory {
    fn eq(&self, other: &Self) -> bool {
        (
            &self.bucket,
            &self.location,
            self.taken,
            &self.format,
            self.total,
            &self.groups,
            &self.formats,
        ) == (
            &other.bucket,
            &other.location,
            other.taken,
            &other.format,
            other.total,
            &other.groups,
            &other.formats,
        )
    }
}

impl Inventory {
    /// Reads the inventory whose manifest is at `location` (a path, `file://` or `s3://` URL) and
    /// groups its objects by `rule`'s datasets.
    pub async fn read(location: &str, storage: &lake::StorageConfig, rule: &DatasetRule) -> Result<Self, ReportError> {
        let list = List::open(location, storage).await?;
        let mut inventory = Self {
            bucket: list.manifest.source_bucket.clone(),
            location: location.to_owned(),
            taken: list.taken,
            format: list.manifest.file_format.clone(),
            total: Count::default(),
            storage: storage.clone(),
            groups: BTreeMap::new(),
            formats: BTreeMap::new(),
        };
        list.rows(|row| inventory.add(row, rule)).await?;
        Ok(inventory)
    }

    /// Reads the list again, data file by data file, giving each stored object version to
    /// `each`: what object-level advice needs, without holding the list in memory.
    pub async fn objects(&self, mut each: impl FnMut(ListedObject<'_>)) -> Result<(), ReportError> {
        let list = List::open(&self.location, &self.storage).await?;
        list.rows(|row| {
            if !row.delete_marker {
                each(ListedObject {
                    key: row.key,
                    version_id: row.version_id,
                    size: row.size.unwrap_or(0),
                    modified: row.modified,
                    class: if row.class.is_empty() { DEFAULT_CLASS } else { row.class },
                });
            }
        })
        .await
    }

    /// Reads the inventories whose manifests are at `locations`, one after the other.
    pub async fn read_all(
        locations: &[String],
        storage: &lake::StorageConfig,
        rule: &DatasetRule,
    ) -> Result<Vec<Self>, ReportError> {
        let mut inventories = Vec::with_capacity(locations.len());
        for location in locations {
            inventories.push(Self::read(location, storage, rule).await?);
        }
        Ok(inventories)
    }

    fn add(&mut self, row: Row<'_>, rule: &DatasetRule) {
        if row.delete_marker {
            return;
        }
        let size = row.size.unwrap_or(0);
        let group = Group {
            dataset: rule.dataset(row.key).to_owned(),
            day: key_date(row.key).or_else(|| row.modified.map(|t| t.date_naive())),
            class: if row.class.is_empty() { DEFAULT_CLASS } else { row.class }.to_owned(),
            movable: size >= advisor::MIN_TRANSITION_BYTES as u64,
        };
        let directories = row.key.rsplit_once('/').map_or("", |(dirs, _)| dirs);
        let format = advisor::TABLE_FORMATS
            .iter()
            .position(|(_, dir)| directories.split('/').any(|d| d == *dir));
        if let Some(format) = format {
            let known = self.formats.entry(group.dataset.clone()).or_insert(format);
            *known = (*known).min(format);
        }
        self.groups.entry(group).or_default().add(size);
        self.total.add(size);
    }

    /// The table format whose files `dataset` holds, if any (Delta Lake, Iceberg or Hudi).
    pub fn table_format(&self, dataset: &str) -> Option<&'static str> {
        let index = *self.formats.get(dataset)?;
        advisor::TABLE_FORMATS.get(index).map(|(name, _)| *name)
    }

    /// The objects of each dataset as the advisor takes them, aged to `end_day`: those not in S3
    /// Standard count as moved already.
    pub fn stored(&self, end_day: NaiveDate) -> BTreeMap<String, Vec<StoredAt>> {
        let mut out: BTreeMap<String, Vec<StoredAt>> = BTreeMap::new();
        for (group, count) in &self.groups {
            out.entry(group.dataset.clone()).or_default().push(StoredAt {
                age: group.day.map(|d| (end_day - d).num_days().max(0)),
                moved: group.class != DEFAULT_CLASS,
                class: Some(group.class.as_str())
                    .filter(|c| *c != DEFAULT_CLASS)
                    .and_then(advisor::storage_class),
                movable: group.movable,
                objects: count.objects,
                bytes: count.bytes,
            });
        }
        out
    }

    /// The objects of each dataset, by storage class.
    pub fn datasets(&self) -> BTreeMap<String, DatasetStorage> {
        let mut out: BTreeMap<String, DatasetStorage> = BTreeMap::new();
        for (group, count) in &self.groups {
            let d = out.entry(group.dataset.clone()).or_default();
            d.total.objects += count.objects;
            d.total.bytes += count.bytes;
            let class = d.by_class.entry(group.class.clone()).or_default();
            class.objects += count.objects;
            class.bytes += count.bytes;
            if let Some(day) = group.day {
                d.days = Some(d.days.map_or((day, day), |(a, b)| (a.min(day), b.max(day))));
            }
        }
        out
    }
}

/// An inventory list opened: its manifest read and checked.
struct List {
    location: String,
    source: Source,
    manifest: Manifest,
    format: Format,
    taken: DateTime<Utc>,
}

impl List {
    async fn open(location: &str, storage: &lake::StorageConfig) -> Result<Self, ReportError> {
        let source = Source::of(location, storage)?;
        let text = source.get(&source.manifest).await?;
        let manifest: Manifest =
            serde_json::from_slice(&text).map_err(|e| error(location, format!("not an S3 Inventory manifest: {e}")))?;
        let format = match manifest.file_format.to_ascii_uppercase().as_str() {
            "CSV" => Format::Csv(CsvColumns::of(&manifest.file_schema).map_err(|reason| error(location, reason))?),
            "PARQUET" => Format::Parquet,
            other => {
                return Err(error(
                    location,
                    format!("fileFormat {other:?} is not read (only CSV and Parquet inventories are)"),
                ));
            }
        };
        let taken = manifest
            .creation_timestamp
            .as_deref()
            .and_then(|t| t.parse::<i64>().ok())
            .and_then(DateTime::from_timestamp_millis)
            .ok_or_else(|| error(location, "creationTimestamp is missing or not milliseconds since 1970"))?;
        Ok(Self {
            location: location.to_owned(),
            source,
            manifest,
            format,
            taken,
        })
    }

    /// Gives every row of every data file to `each`, one data file at a time.
    async fn rows(&self, mut each: impl FnMut(Row<'_>)) -> Result<(), ReportError> {
        for file in &self.manifest.files {
            let path = self.source.data_file(&file.key)?;
            let bytes = self.source.get(&path).await?;
            let at = format!("{}: data file {}", self.location, file.key);
            match &self.format {
                Format::Csv(columns) => columns.rows(&bytes, &at, &mut each)?,
                Format::Parquet => parquet_rows(bytes, &at, &mut each)?,
            }
        }
        Ok(())
    }
}

/// Where a manifest and its data files are.
struct Source {
    location: String,
    store: Arc<DynObjectStore>,
    manifest: StorePath,
    /// For a local manifest, its file.
    local: Option<PathBuf>,
}

impl Source {
    fn of(location: &str, storage: &lake::StorageConfig) -> Result<Self, ReportError> {
        if let Some(rest) = location.strip_prefix("s3://") {
            let url = Url::parse(location).map_err(|e| error(location, format!("not an s3:// URL: {e}")))?;
            let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() || key.is_empty() {
                return Err(error(location, "expected s3://BUCKET/KEY/manifest.json"));
            }
            let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
            for (name, value) in storage.options_for(&url) {
                if let Ok(key) = name.to_ascii_lowercase().parse::<AmazonS3ConfigKey>() {
                    builder = builder.with_config(key, value);
                }
            }
            let store = builder
                .build()
                .map_err(|e| error(location, format!("cannot reach S3: {e}")))?;
            return Ok(Self {
                location: location.to_owned(),
                store: Arc::new(store),
                manifest: StorePath::from(key),
                local: None,
            });
        }
        let path = Path::new(location.strip_prefix("file://").unwrap_or(location));
        let path = std::path::absolute(path).map_err(|e| error(location, e.to_string()))?;
        if !path.is_file() {
            return Err(error(location, "no such file (expected the path of a manifest.json)"));
        }
        let manifest = StorePath::from_filesystem_path(&path).map_err(|e| error(location, e.to_string()))?;
        Ok(Self {
            location: location.to_owned(),
            store: Arc::new(LocalFileSystem::new()),
            manifest,
            local: Some(path),
        })
    }

    /// The path of the data file the manifest names `key`.
    fn data_file(&self, key: &str) -> Result<StorePath, ReportError> {
        let Some(manifest) = &self.local else {
            return Ok(StorePath::from(key));
        };
        let found = manifest
            .ancestors()
            .skip(1)
            .map(|dir| dir.join(key))
            .find(|candidate| candidate.is_file())
            .ok_or_else(|| {
                error(
                    &self.location,
                    format!("data file {key} is not under the manifest's folder or any folder above it"),
                )
            })?;
        StorePath::from_filesystem_path(&found).map_err(|e| error(&self.location, e.to_string()))
    }

    async fn get(&self, path: &StorePath) -> Result<bytes::Bytes, ReportError> {
        let read = async { self.store.get(path).await?.bytes().await };
        read.await
            .map_err(|e| error(&self.location, format!("cannot read {path}: {e}")))
    }
}

enum Format {
    Csv(CsvColumns),
    Parquet,
}

/// Where the fields the report needs are in a CSV list's rows.
struct CsvColumns {
    key: usize,
    version_id: Option<usize>,
    size: usize,
    modified: Option<usize>,
    class: Option<usize>,
    delete_marker: Option<usize>,
}

impl CsvColumns {
    fn of(schema: &str) -> Result<Self, String> {
        let names: Vec<&str> = schema.split(',').map(str::trim).collect();
        let find = |name: &str| names.iter().position(|n| n.eq_ignore_ascii_case(name));
        let need = |name: &str| {
            find(name)
                .ok_or_else(|| format!("fileSchema {schema:?} has no {name} field (the report needs Key and Size)"))
        };
        Ok(Self {
            key: need("Key")?,
            version_id: find("VersionId"),
            size: need("Size")?,
            modified: find("LastModifiedDate"),
            class: find("StorageClass"),
            delete_marker: find("IsDeleteMarker"),
        })
    }

    fn rows(&self, bytes: &[u8], at: &str, mut each: impl FnMut(Row<'_>)) -> Result<(), ReportError> {
        let reader: Box<dyn Read + '_> = if bytes.starts_with(&[0x1f, 0x8b]) {
            Box::new(flate2::read::MultiGzDecoder::new(bytes))
        } else {
            Box::new(bytes)
        };
        let mut csv = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .from_reader(reader);
        let mut record = csv::StringRecord::new();
        let mut line = 0u64;
        loop {
            line += 1;
            match csv.read_record(&mut record) {
                Ok(false) => return Ok(()),
                Ok(true) => {}
                Err(e) => return Err(error(at, format!("line {line}: {e}"))),
            }
            let field = |i: usize| record.get(i).unwrap_or("");
            let bad = |name: &str, detail: String| error(at, format!("line {line}, field {name}: {detail}"));
            let encoded = field(self.key);
            let spaced = encoded.replace('+', " ");
            let key = percent_encoding::percent_decode_str(&spaced)
                .decode_utf8()
                .map_err(|e| bad("Key", format!("{encoded:?} is not URL-encoded UTF-8: {e}")))?;
            let delete_marker = self
                .delete_marker
                .is_some_and(|i| field(i).eq_ignore_ascii_case("true"));
            let size = match field(self.size) {
                "" => None,
                text => Some(
                    text.parse::<u64>()
                        .map_err(|e| bad("Size", format!("{text:?} is not a byte count: {e}")))?,
                ),
            };
            let modified = match self.modified.map(field) {
                None | Some("") => None,
                Some(text) => Some(
                    DateTime::parse_from_rfc3339(text)
                        .map_err(|e| bad("LastModifiedDate", format!("{text:?} is not a time: {e}")))?
                        .to_utc(),
                ),
            };
            each(Row {
                key: &key,
                version_id: self.version_id.map(field).unwrap_or(""),
                size,
                modified,
                class: self.class.map(field).unwrap_or(""),
                delete_marker,
            });
        }
    }
}

fn parquet_rows(bytes: bytes::Bytes, at: &str, mut each: impl FnMut(Row<'_>)) -> Result<(), ReportError> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .and_then(|b| b.build())
        .map_err(|e| error(at, format!("not a Parquet file: {e}")))?;
    for batch in reader {
        let batch = batch.map_err(|e| error(at, e.to_string()))?;
        let column = |name: &str, to: &DataType| -> Result<Option<Arc<dyn Array>>, ReportError> {
            batch
                .column_by_name(name)
                .map(|c| cast(c, to).map_err(|e| error(at, format!("column {name}: {e}"))))
                .transpose()
        };
        let need = |name: &str, to: &DataType| {
            column(name, to)?.ok_or_else(|| error(at, format!("no column {name} (the report needs key and size)")))
        };
        let keys = need("key", &DataType::Utf8)?;
        let sizes = need("size", &DataType::Int64)?;
        let modified = column("last_modified_date", &DataType::Int64)?;
        let classes = column("storage_class", &DataType::Utf8)?;
        let markers = column("is_delete_marker", &DataType::Boolean)?;
        let versions = column("version_id", &DataType::Utf8)?;
        let (keys, sizes) = (keys.as_string::<i32>(), sizes.as_primitive::<Int64Type>());
        let modified = modified.as_ref().map(|m| m.as_primitive::<Int64Type>());
        let classes = classes.as_ref().map(|c| c.as_string::<i32>());
        let markers = markers.as_ref().map(|m| m.as_boolean());
        let versions = versions.as_ref().map(|v| v.as_string::<i32>());
        for i in 0..batch.num_rows() {
            if keys.is_null(i) {
                return Err(error(at, format!("row {i} of a batch has no key")));
            }
            each(Row {
                key: keys.value(i),
                version_id: versions.filter(|v| !v.is_null(i)).map_or("", |v| v.value(i)),
                size: (!sizes.is_null(i)).then(|| sizes.value(i).max(0) as u64),
                modified: modified
                    .filter(|m| !m.is_null(i))
                    .and_then(|m| DateTime::from_timestamp_millis(m.value(i))),
                class: classes.filter(|c| !c.is_null(i)).map_or("", |c| c.value(i)),
                delete_marker: markers.is_some_and(|m| !m.is_null(i) && m.value(i)),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCHEMA: &str = "Bucket, Key, Size, LastModifiedDate, StorageClass, IsDeleteMarker";

    fn write_manifest(dir: &Path, format: &str, schema: &str, files: &[(&str, &[u8])]) -> PathBuf {
        let listed: Vec<serde_json::Value> = files
            .iter()
            .map(|(key, bytes)| {
                let path = dir.join(key);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, bytes).unwrap();
                serde_json::json!({"key": key, "size": bytes.len()})
            })
            .collect();
        let manifest = dir.join("inv/b/cfg/2024-06-01T00-00Z/manifest.json");
        std::fs::create_dir_all(manifest.parent().unwrap()).unwrap();
        let body = serde_json::json!({
            "sourceBucket": "b", "fileFormat": format, "fileSchema": schema,
            "creationTimestamp": "1717200000000", "files": listed,
        });
        std::fs::write(&manifest, body.to_string()).unwrap();
        manifest
    }

    async fn read(manifest: &Path) -> Result<Inventory, ReportError> {
        Inventory::read(
            manifest.to_str().unwrap(),
            &lake::StorageConfig::default(),
            &DatasetRule::default(),
        )
        .await
    }

    #[tokio::test]
    async fn a_csv_list_is_decoded_grouped_and_aged() {
        let dir = tempfile::tempdir().unwrap();
        let rows = "\"b\",\"raw/caf%C3%A9+donn%C3%A9es/file%2B1.json\",\"1024\",\"2024-01-02T03:04:05.000Z\",\"STANDARD\",\"false\"\n\
                    \"b\",\"events/dt=2024-05-30/part-0.parquet\",\"1048576\",\"2024-05-31T01:00:00.000Z\",\"STANDARD\",\"false\"\n\
                    \"b\",\"events/dt=2024-05-30/part-1.parquet\",\"2097152\",\"2024-05-31T01:00:00.000Z\",\"GLACIER_IR\",\"false\"\n\
                    \"b\",\"events/dt=2024-05-30/part-2.parquet\",\"\",\"2024-05-31T02:00:00.000Z\",\"STANDARD\",\"true\"\n";
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, rows.as_bytes()).unwrap();
        let manifest = write_manifest(
            dir.path(),
            "CSV",
            SCHEMA,
            &[("inv/b/cfg/data/one.csv.gz", &gz.finish().unwrap())],
        );
        let inventory = read(&manifest).await.unwrap();
        assert_eq!(inventory.bucket, "b");
        assert_eq!(inventory.taken.to_rfc3339(), "2024-06-01T00:00:00+00:00");
        assert_eq!(
            inventory.total,
            Count {
                objects: 3,
                bytes: 1024 + 3 * 1048576
            },
            "the delete marker is no object"
        );
        let datasets = inventory.datasets();
        assert_eq!(
            datasets["raw/café données/"].total,
            Count {
                objects: 1,
                bytes: 1024
            }
        );
        let events = &datasets["events/"];
        assert_eq!(
            events.by_class["GLACIER_IR"],
            Count {
                objects: 1,
                bytes: 2097152
            }
        );
        assert_eq!(events.days, NaiveDate::from_ymd_opt(2024, 5, 30).map(|d| (d, d)));
        let stored = inventory.stored(NaiveDate::from_ymd_opt(2024, 6, 1).unwrap());
        let mut events = stored["events/"].clone();
        events.sort_by_key(|s| s.moved);
        assert_eq!(
            events,
            vec![
                StoredAt {
                    age: Some(2),
                    moved: false,
                    class: None,
                    movable: true,
                    objects: 1,
                    bytes: 1048576
                },
                StoredAt {
                    age: Some(2),
                    moved: true,
                    class: Some("GLACIER_IR"),
                    movable: true,
                    objects: 1,
                    bytes: 2097152
                },
            ]
        );
        // A key without a date is as old as its last change; 1 KiB is too small to move.
        let cafe = &stored["raw/café données/"];
        assert_eq!(cafe[0].age, Some(151));
        assert!(!cafe[0].movable);
    }

    /// Objects, bytes, and both by storage class.
    type Totals = (u64, u64, BTreeMap<String, (u64, u64)>);

    /// The generated lake's inventory, written as S3 writes it (the lake bucket in CSV over three
    /// files, the web bucket in Parquet), reads back as the generator counted it.
    #[tokio::test]
    async fn the_lakes_inventory_reads_back_as_generated() {
        use fixtures::workload::inventory::{InventoryFormat, write};
        use fixtures::workload::{LAKE_BUCKET, WEB_BUCKET, lake};
        let lake = lake::generate(NaiveDate::from_ymd_opt(2024, 3, 1).unwrap(), 8, 3);
        let dir = tempfile::tempdir().unwrap();
        for (bucket, format, files) in [
            (LAKE_BUCKET, InventoryFormat::Csv, 3),
            (WEB_BUCKET, InventoryFormat::Parquet, 1),
        ] {
            let objects: Vec<_> = lake.inventory.iter().filter(|o| o.bucket == bucket).collect();
            let manifest = write(dir.path(), bucket, &objects, format, lake.inventory_taken, files).unwrap();
            let inventory = read(&manifest).await.unwrap();
            assert_eq!(inventory.bucket, bucket);
            assert_eq!(inventory.taken.naive_utc(), lake.inventory_taken);
            let read: BTreeMap<String, Totals> = inventory
                .datasets()
                .into_iter()
                .map(|(d, s)| {
                    let classes = s.by_class.into_iter().map(|(c, n)| (c, (n.objects, n.bytes))).collect();
                    (d, (s.total.objects, s.total.bytes, classes))
                })
                .collect();
            let want: BTreeMap<String, Totals> = lake
                .storage
                .iter()
                .filter(|((b, _), _)| b == bucket)
                .map(|((_, d), t)| (d.clone(), (t.objects, t.bytes, t.by_class.clone())))
                .collect();
            assert_eq!(read, want, "{bucket}");
        }
    }

    #[tokio::test]
    async fn bad_lists_name_the_file_line_and_field() {
        let dir = tempfile::tempdir().unwrap();
        let manifest = write_manifest(
            dir.path(),
            "CSV",
            SCHEMA,
            &[(
                "inv/b/cfg/data/bad.csv",
                b"\"b\",\"k/x\",\"12\",\"\",\"STANDARD\",\"false\"\n\"b\",\"k/y\",\"twelve\",\"\",\"\",\"\"\n",
            )],
        );
        let e = read(&manifest).await.unwrap_err().to_string();
        assert!(
            e.contains("data file inv/b/cfg/data/bad.csv") && e.contains("line 2, field Size"),
            "{e}"
        );
        assert!(e.contains("\"twelve\""), "{e}");

        let manifest = write_manifest(dir.path(), "ORC", "", &[]);
        let e = read(&manifest).await.unwrap_err().to_string();
        assert!(e.contains("fileFormat \"ORC\" is not read"), "{e}");

        let manifest = write_manifest(dir.path(), "CSV", "Bucket, Key", &[]);
        let e = read(&manifest).await.unwrap_err().to_string();
        assert!(e.contains("has no Size field"), "{e}");

        let missing = dir.path().join("nowhere/manifest.json");
        let e = read(&missing).await.unwrap_err().to_string();
        assert!(e.contains("nowhere/manifest.json") && e.contains("no such file"), "{e}");

        let manifest = write_manifest(
            dir.path(),
            "Parquet",
            "",
            &[("inv/b/cfg/data/x.parquet", b"not parquet")],
        );
        let e = read(&manifest).await.unwrap_err().to_string();
        assert!(e.contains("x.parquet") && e.contains("not a Parquet file"), "{e}");

        std::fs::write(&manifest, "{\"files\": 3}").unwrap();
        let e = read(&manifest).await.unwrap_err().to_string();
        assert!(e.contains("not an S3 Inventory manifest"), "{e}");
    }
}
