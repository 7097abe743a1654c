//! S3 Inventory lists of a generated lake, written as S3 writes them: a `manifest.json` naming
//! the data files, which are gzipped CSV without a header (every field quoted, keys URL-encoded,
//! columns as the manifest's `fileSchema` lists them) or Parquet (columns in snake case, keys as
//! they are, `last_modified_date` as milliseconds).
//!
//! The layout is the destination bucket's: `ROOT/PREFIX/SOURCE-BUCKET/CONFIG/YYYY-MM-DDTHH-MMZ/
//! manifest.json` and `ROOT/PREFIX/SOURCE-BUCKET/CONFIG/data/NAME`, the manifest naming each data
//! file by its key from `ROOT`.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use chrono::NaiveDateTime;
use flate2::Compression;
use flate2::write::GzEncoder;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::json;

/// One row of an inventory list: an object version, or a delete marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InventoryObject {
    /// Its bucket.
    pub bucket: &'static str,
    /// Its key.
    pub key: String,
    /// Its size; `None` for a delete marker.
    pub size: Option<i64>,
    /// When it was written (UTC).
    pub last_modified: NaiveDateTime,
    /// Its storage class (`STANDARD`, `GLACIER`, ...).
    pub storage_class: &'static str,
    /// Whether it is the current version.
    pub is_latest: bool,
    /// Whether it is a delete marker.
    pub is_delete_marker: bool,
}

/// The formats S3 writes inventory lists in (but ORC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InventoryFormat {
    /// Gzipped CSV.
    Csv,
    /// Apache Parquet.
    Parquet,
}

/// The fields of the lists written here, as a CSV manifest's `fileSchema` names them.
pub const CSV_SCHEMA: &str =
    "Bucket, Key, VersionId, IsLatest, IsDeleteMarker, Size, LastModifiedDate, ETag, StorageClass";

/// What S3 percent-encodes in a CSV list's keys: everything but letters, digits, `-`, `_`, `.`,
/// `~` and `/` (a space becomes `+`, as in a form).
const KEY_ENCODED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'/')
    .remove(b' ');

fn csv_key(key: &str) -> String {
    utf8_percent_encode(key, KEY_ENCODED).to_string().replace(' ', "+")
}

/// Writes the inventory list of `objects` (all of `bucket`) under `root` as S3 would on `taken`,
/// in `files` data files, and returns the manifest's path.
pub fn write(
    root: &Path,
    bucket: &str,
    objects: &[&InventoryObject],
    format: InventoryFormat,
    taken: NaiveDateTime,
    files: usize,
) -> io::Result<PathBuf> {
    let config = format!("inventory/{bucket}/daily");
    let data = root.join(&config).join("data");
    let stamp = taken.format("%Y-%m-%dT%H-%MZ").to_string();
    let manifest_dir = root.join(&config).join(&stamp);
    fs::create_dir_all(&data)?;
    fs::create_dir_all(&manifest_dir)?;
    let files = files.max(1);
    let per_file = objects.len().div_ceil(files).max(1);
    let mut listed = Vec::new();
    for (n, chunk) in objects.chunks(per_file).enumerate() {
        let (name, bytes) = match format {
            InventoryFormat::Csv => (format!("{stamp}-{n:04}.csv.gz"), csv_file(chunk)?),
            InventoryFormat::Parquet => (format!("{stamp}-{n:04}.parquet"), parquet_file(chunk)?),
        };
        fs::write(data.join(&name), &bytes)?;
        listed.push(json!({"key": format!("{config}/data/{name}"), "size": bytes.len()}));
    }
    let manifest = json!({
        "sourceBucket": bucket,
        "destinationBucket": "arn:aws:s3:::lake-inventory",
        "version": "2016-11-30",
        "creationTimestamp": taken.and_utc().timestamp_millis().to_string(),
        "fileFormat": match format { InventoryFormat::Csv => "CSV", InventoryFormat::Parquet => "Parquet" },
        "fileSchema": match format {
            InventoryFormat::Csv => CSV_SCHEMA.to_owned(),
            InventoryFormat::Parquet => "message s3.inventory { required binary bucket (STRING); required binary key \
                (STRING); optional binary version_id (STRING); optional boolean is_latest; optional boolean \
                is_delete_marker; optional int64 size; optional int64 last_modified_date (TIMESTAMP(MILLIS,true)); \
                optional binary e_tag (STRING); optional binary storage_class (STRING);}".to_owned(),
        },
        "files": listed,
    });
    let path = manifest_dir.join("manifest.json");
    fs::write(&path, serde_json::to_vec_pretty(&manifest).map_err(io::Error::other)?)?;
    Ok(path)
}

fn etag(o: &InventoryObject) -> String {
    format!("{:032x}", (o.key.len() as u128) << 64 | o.size.unwrap_or(0) as u128)
}

fn csv_file(objects: &[&InventoryObject]) -> io::Result<Vec<u8>> {
    let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
    for o in objects {
        let size = o.size.map(|s| s.to_string()).unwrap_or_default();
        let modified = o.last_modified.format("%Y-%m-%dT%H:%M:%S%.3fZ");
        writeln!(
            gz,
            "\"{}\",\"{}\",\"\",\"{}\",\"{}\",\"{size}\",\"{modified}\",\"{}\",\"{}\"",
            o.bucket,
            csv_key(&o.key),
            o.is_latest,
            o.is_delete_marker,
            etag(o),
            o.storage_class
        )?;
    }
    gz.finish()
}

fn parquet_file(objects: &[&InventoryObject]) -> io::Result<Vec<u8>> {
    let text = |name: &str, values: Vec<Option<String>>, nullable: bool| {
        (
            Field::new(name, DataType::Utf8, nullable),
            Arc::new(StringArray::from(values)) as ArrayRef,
        )
    };
    let columns = vec![
        text(
            "bucket",
            objects.iter().map(|o| Some(o.bucket.to_owned())).collect(),
            false,
        ),
        text("key", objects.iter().map(|o| Some(o.key.clone())).collect(), false),
        text("version_id", objects.iter().map(|_| None).collect(), true),
        (
            Field::new("is_latest", DataType::Boolean, true),
            Arc::new(BooleanArray::from(
                objects.iter().map(|o| Some(o.is_latest)).collect::<Vec<_>>(),
            )) as ArrayRef,
        ),
        (
            Field::new("is_delete_marker", DataType::Boolean, true),
            Arc::new(BooleanArray::from(
                objects.iter().map(|o| Some(o.is_delete_marker)).collect::<Vec<_>>(),
            )) as ArrayRef,
        ),
        (
            Field::new("size", DataType::Int64, true),
            Arc::new(Int64Array::from(objects.iter().map(|o| o.size).collect::<Vec<_>>())) as ArrayRef,
        ),
        (
            Field::new(
                "last_modified_date",
                DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
                true,
            ),
            Arc::new(
                TimestampMillisecondArray::from(
                    objects
                        .iter()
                        .map(|o| Some(o.last_modified.and_utc().timestamp_millis()))
                        .collect::<Vec<_>>(),
                )
                .with_timezone("UTC"),
            ) as ArrayRef,
        ),
        text("e_tag", objects.iter().map(|o| Some(etag(o))).collect(), true),
        text(
            "storage_class",
            objects.iter().map(|o| Some(o.storage_class.to_owned())).collect(),
            true,
        ),
    ];
    let (fields, arrays): (Vec<Field>, Vec<ArrayRef>) = columns.into_iter().unzip();
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).map_err(io::Error::other)?;
    let mut out = Vec::new();
    let mut writer = parquet::arrow::ArrowWriter::try_new(&mut out, batch.schema(), None).map_err(io::Error::other)?;
    writer.write(&batch).map_err(io::Error::other)?;
    writer.close().map_err(io::Error::other)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_keys_are_encoded_as_s3_encodes_them() {
        assert_eq!(
            csv_key("raw/café données/file+1.json"),
            "raw/caf%C3%A9+donn%C3%A9es/file%2B1.json"
        );
        assert_eq!(csv_key("a/b-c_d.e~f"), "a/b-c_d.e~f");
    }
}
