//! The Iceberg view of a table: Iceberg table metadata (format v2) beside the Delta log, over
//! the same data files, so that engines that read Iceberg and not Delta read lakelog's tables.
//!
//! The Delta log stays the source of truth. [`mirror`] brings the view to the Delta version
//! loaded: it compares the data files of that version with the files the view's current snapshot
//! holds, and commits one Iceberg snapshot that adds and removes the difference, with the
//! operation that matches (`append` for added files only, `delete` for removed files only,
//! `replace` when the rows stay the same, as after a compaction, `overwrite` otherwise, as after
//! an erasure), and names the Delta version it mirrors (summary and table property
//! `lakelog.delta-version`). A view that is behind by many versions (a crash between the Delta
//! commit and the snapshot, a table from a release without the view) is brought up to date in
//! one snapshot the same way. Every commit lakelog makes calls it.
//!
//! Layout: `<table>/_iceberg/metadata/v<N>.metadata.json` (the newest `N` also in
//! `version-hint.text`), manifests and manifest lists beside it. The folder starts with `_` so
//! that Delta's VACUUM, which deletes files no Delta version names, leaves it alone. The table's
//! location is the Delta table's, so data file paths are the Delta files' paths. The files carry
//! no Iceberg field ids: the table property `schema.name-mapping.default` maps column names to
//! ids; the date partitions are identity partitions, whose values readers take from the
//! manifests (Delta does not write partition columns into the files).
//!
//! Bounded: added files go into a new manifest; a manifest that loses files is rewritten; when a
//! snapshot would have more than [`MAX_MANIFESTS`] manifests they are merged into one. Snapshots
//! older than the history kept (an hour by default, at most [`MAX_SNAPSHOTS`], none after an
//! erasure) are expired with the manifest lists and manifests only they named, and metadata
//! files beyond the last [`PREVIOUS_VERSIONS_MAX`] are deleted. A snapshot never outlives the
//! Delta files it names: VACUUM keeps removed files for days, and a purge expires every snapshot
//! but the current one first.
//!
//! Writers race safely: metadata files are written only if absent, and a writer that loses the
//! race for `v<N>` reads the winner's and tries again.
//!
//! A catalog that names the view's current metadata file (Glue's Iceberg entries) is told of each
//! new one through the [`Publisher`] a process sets once ([`publish_to`]).

mod schema;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use bytes::Bytes;
use deltalake::DeltaTable;
use deltalake::logstore::ObjectStoreRef;
use futures::future::try_join_all;
use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFileBuilder, DataFileFormat, FormatVersion, Literal, ManifestFile, ManifestList,
    ManifestListWriter, ManifestWriterBuilder, Operation, PrimitiveType, Snapshot, SortOrder, Struct, Summary,
    TableMetadata, TableMetadataBuilder, Transform, Type, UnboundPartitionSpec,
};
use object_store::path::Path;
use object_store::{ObjectStoreExt as _, PutMode, PutOptions, PutPayload};
use tracing::{debug, info, warn};

use crate::error::LakeError;
use crate::files::StoreFile;

/// Where the view's metadata lives, relative to the table.
pub const METADATA_FOLDER: &str = "_iceberg/metadata";
/// The snapshot summary key and table property naming the Delta version mirrored.
pub const DELTA_VERSION: &str = "lakelog.delta-version";
/// The snapshot summary key listing the manifests of the parent this snapshot no longer names
/// (deleted once no snapshot kept names them).
const DROPPED_MANIFESTS: &str = "lakelog.dropped-manifests";
/// Manifests per snapshot before they are merged into one.
pub const MAX_MANIFESTS: usize = 16;
/// Snapshots kept at most.
pub const MAX_SNAPSHOTS: usize = 20;
/// Metadata files kept besides the current one.
pub const PREVIOUS_VERSIONS_MAX: usize = 10;
/// How long snapshots are kept by default.
pub const DEFAULT_HISTORY: Duration = Duration::from_secs(3600);
/// Tries when other writers keep winning the race for the next metadata file.
const TRIES: usize = 5;

/// The environment variable that turns the view off (`false`, `off` or `0`); it is on otherwise.
pub const ENABLED_VARIABLE: &str = "ICEBERG_VIEW";

/// Whether this process keeps Iceberg views ([`ENABLED_VARIABLE`]).
pub fn enabled() -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(|| {
        !std::env::var(ENABLED_VARIABLE)
            .map(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "false" | "off" | "0" | "no"))
            .unwrap_or(false)
    })
}

/// Where the newest metadata file of each view is announced, so that a catalog entry that names
/// it (Glue's `metadata_location`) follows the view. A process sets one with [`publish_to`];
/// [`mirror`] calls it after each metadata file it writes, before older files are deleted.
pub trait Publisher: Send + Sync {
    /// The view of `view.table` now has `view.metadata` as its newest metadata file. Best effort:
    /// an error is logged, and the next metadata file (or [`publish_current`]) announces again.
    fn publish<'a>(&'a self, view: &'a Published<'a>) -> futures::future::BoxFuture<'a, Result<(), String>>;
}

/// A metadata file announced to the [`Publisher`].
#[derive(Debug)]
pub struct Published<'a> {
    /// The table's URI, as the committer opened it (the Iceberg table's location).
    pub table: &'a str,
    /// The metadata file's URI (`<location>/_iceberg/metadata/v<N>.metadata.json`).
    pub metadata: &'a str,
    /// The schema of the Delta version mirrored.
    pub schema: &'a arrow::datatypes::Schema,
    /// Its partition columns.
    pub partition_columns: &'a [String],
}

static PUBLISHER: std::sync::OnceLock<std::sync::Arc<dyn Publisher>> = std::sync::OnceLock::new();

/// Sets this process's [`Publisher`]; `false` when one was set already (it stays).
pub fn publish_to(publisher: std::sync::Arc<dyn Publisher>) -> bool {
    PUBLISHER.set(publisher).is_ok()
}

/// The number `N` of a metadata file's name or URI (`.../v<N>.metadata.json`).
pub fn metadata_number(metadata: &str) -> Option<u64> {
    metadata
        .rsplit('/')
        .next()?
        .strip_prefix('v')?
        .strip_suffix(".metadata.json")?
        .parse()
        .ok()
}

/// Announces `metadata` of the view of `table` to the process's [`Publisher`], if any.
async fn publish(uri: &str, table: &DeltaTable, metadata: &str) {
    let Some(publisher) = PUBLISHER.get() else {
        return;
    };
    let Ok(state) = table.snapshot() else {
        return;
    };
    let schema = state.snapshot().arrow_schema();
    let view = Published {
        table: uri,
        metadata,
        schema: &schema,
        partition_columns: state.metadata().partition_columns(),
    };
    if let Err(reason) = publisher.publish(&view).await {
        warn!(table = uri, metadata, %reason, "the catalog does not name the view's newest metadata yet; the next pass announces it again");
    }
}

/// The URI of the view's newest metadata file (listed, not read); `None` when the table has no
/// view yet.
pub async fn metadata_location(uri: &str, table: &DeltaTable) -> Result<Option<String>, LakeError> {
    Ok(newest_number(uri, &table.object_store())
        .await?
        .map(|number| format!("{}/{}", root(table), metadata_name(number))))
}

/// Announces the view's newest metadata file to the process's [`Publisher`], so that a catalog
/// entry an earlier announcement failed to move is brought up to date.
pub async fn publish_current(uri: &str, table: &DeltaTable) -> Result<(), LakeError> {
    if let Some(metadata) = metadata_location(uri, table).await? {
        publish(uri, table, &metadata).await;
    }
    Ok(())
}

/// What [`mirror`] wrote.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Mirrored {
    /// The Delta version the view now mirrors.
    pub delta_version: i64,
    /// The new metadata file (its URI).
    pub metadata: String,
    /// The snapshot committed, if the files changed.
    pub snapshot_id: Option<i64>,
    /// Its operation (`append`, `replace`, `overwrite`, `delete`).
    pub operation: Option<String>,
    /// Data files added and removed.
    pub added_files: usize,
    /// Data files removed.
    pub removed_files: usize,
    /// Bytes of metadata written (metadata file, manifest list, manifests).
    pub bytes_written: u64,
    /// Snapshots expired.
    pub expired_snapshots: usize,
}

/// Brings the Iceberg view of `table` to the Delta version loaded, keeping snapshots younger than
/// `history`; `None` when it was already there (or further: another writer mirrored a newer
/// version) and nothing had to expire.
pub async fn mirror(uri: &str, table: &DeltaTable, history: Duration) -> Result<Option<Mirrored>, LakeError> {
    for _ in 0..TRIES {
        match try_mirror(uri, table, history).await? {
            Try::Done(mirrored) => return Ok(mirrored),
            Try::Lost => debug!(
                table = uri,
                "another writer committed the view's next metadata first; reading it"
            ),
        }
    }
    Err(iceberg_error(
        uri,
        format!("other writers won the race for the view's next metadata {TRIES} times"),
    ))
}

/// The newest metadata file of the view at `uri`: its number, URI and content.
#[cfg(test)]
pub(crate) async fn current_metadata(
    uri: &str,
    table: &DeltaTable,
) -> Result<Option<(u64, String, TableMetadata)>, LakeError> {
    let store = table.object_store();
    let root = root(table);
    Ok(latest(uri, &store)
        .await?
        .map(|l| (l.number, format!("{root}/{}", l.name), l.metadata)))
}

enum Try {
    Done(Option<Mirrored>),
    Lost,
}

fn iceberg_error(uri: &str, reason: impl Into<String>) -> LakeError {
    LakeError::Iceberg {
        uri: uri.to_owned(),
        reason: reason.into(),
    }
}

fn failed(uri: &str) -> impl Fn(iceberg::Error) -> LakeError + '_ {
    move |e| iceberg_error(uri, e.to_string())
}

/// The table's root URI, without a trailing slash.
fn root(table: &DeltaTable) -> String {
    table.table_url().as_str().trim_end_matches('/').to_owned()
}

/// The newest metadata file found.
struct Latest {
    number: u64,
    name: String,
    metadata: TableMetadata,
}

fn metadata_name(number: u64) -> String {
    format!("{METADATA_FOLDER}/v{number}.metadata.json")
}

/// The number of the newest metadata file in the folder (listed, not read); `None` when there is
/// none.
async fn newest_number(uri: &str, store: &ObjectStoreRef) -> Result<Option<u64>, LakeError> {
    use futures::TryStreamExt;
    let listed: Vec<_> = store
        .list(Some(&Path::from(METADATA_FOLDER)))
        .try_collect()
        .await
        .map_err(|e| iceberg_error(uri, format!("listing {METADATA_FOLDER}: {e}")))?;
    Ok(listed.iter().filter_map(|o| metadata_number(o.location.as_ref())).max())
}

async fn latest(uri: &str, store: &ObjectStoreRef) -> Result<Option<Latest>, LakeError> {
    let Some(number) = newest_number(uri, store).await? else {
        return Ok(None);
    };
    let name = metadata_name(number);
    let bytes = read(uri, store, &name).await?;
    let metadata: TableMetadata =
        serde_json::from_slice(&bytes).map_err(|e| iceberg_error(uri, format!("{name}: {e}")))?;
    Ok(Some(Latest { number, name, metadata }))
}

async fn read(uri: &str, store: &ObjectStoreRef, name: &str) -> Result<Bytes, LakeError> {
    crate::files::read_object(uri, store, name)
        .await?
        .ok_or_else(|| iceberg_error(uri, format!("{name} is missing")))
}

async fn put(uri: &str, store: &ObjectStoreRef, name: &str, bytes: Bytes) -> Result<(), LakeError> {
    store
        .put(&Path::from(name), PutPayload::from_bytes(bytes))
        .await
        .map(|_| ())
        .map_err(|e| iceberg_error(uri, format!("writing {name}: {e}")))
}

/// Deletes `names`, best effort: an object left behind is named by no snapshot kept.
async fn delete_all(uri: &str, store: &ObjectStoreRef, names: &[String]) {
    let deletes = names.iter().map(|name| async move {
        match store.delete(&Path::from(name.as_str())).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => {
                warn!(table = uri, object = %name, error = %e, "could not delete an expired Iceberg metadata object")
            }
        }
    });
    futures::future::join_all(deletes).await;
}

/// A data file of the Delta version mirrored.
struct DeltaFile {
    size: u64,
    records: Option<u64>,
    partition: HashMap<String, Option<String>>,
    relative: String,
}

/// The manifests of a snapshot with their entries, and its live files by path.
type LiveEntries = (
    Vec<(ManifestFile, Vec<iceberg::spec::ManifestEntryRef>)>,
    HashMap<String, LiveEntry>,
);

/// A data file the view's current snapshot holds, with the entry that holds it.
struct LiveEntry {
    manifest: usize,
    entry: iceberg::spec::ManifestEntryRef,
}

async fn try_mirror(uri: &str, table: &DeltaTable, history: Duration) -> Result<Try, LakeError> {
    let state = table.snapshot().map_err(|e| LakeError::delta(uri, e))?;
    let version = i64::try_from(state.version()).map_err(|_| iceberg_error(uri, "Delta version out of range"))?;
    let store = table.object_store();
    let root = root(table);
    let now_ms = chrono::Utc::now().timestamp_millis();

    let latest = latest(uri, &store).await?;
    let mirrored = latest
        .as_ref()
        .and_then(|l| l.metadata.properties().get(DELTA_VERSION))
        .and_then(|v| v.parse::<i64>().ok());
    let expiring = latest
        .as_ref()
        .map(|l| expired_snapshots(&l.metadata, history, now_ms, None))
        .unwrap_or_default();
    if mirrored.is_some_and(|m| m >= version) && expiring.is_empty() {
        return Ok(Try::Done(None));
    }
    // A writer holding an older Delta version than the view's must not move the view back; it
    // may still expire snapshots, keeping the files it mirrors.
    let behind = mirrored.is_some_and(|m| m >= version);

    // The schema and partitioning of the version loaded.
    let arrow = state.snapshot().arrow_schema();
    let partition_columns = state.metadata().partition_columns().to_vec();
    let previous = latest.as_ref().map(|l| &l.metadata);
    let last_column_id = previous.map_or(0, |m| m.last_column_id());
    let schema = schema::iceberg_schema(
        &arrow,
        &partition_columns,
        previous.map(|m| m.current_schema().as_ref()),
        last_column_id,
    )
    .map_err(|e| iceberg_error(uri, e.to_string()))?;

    let (base, mut expired_metadata) = base_metadata(uri, &root, latest.as_ref(), schema, &partition_columns, behind)?;
    let schema = base.current_schema().clone();
    let spec = base.default_partition_spec().clone();

    // The files of each side.
    let delta_files = if behind {
        BTreeMap::new()
    } else {
        delta_files(uri, table, &store, &root).await?
    };
    let (manifests, live) = match base.current_snapshot() {
        Some(current) => match live_entries(uri, &store, &root, current.manifest_list()).await? {
            Some(found) => found,
            // A writer that expired the snapshot committed after this one read the metadata.
            None if newest_number(uri, &store).await?.unwrap_or(0) > latest.as_ref().map_or(0, |l| l.number) => {
                return Ok(Try::Lost);
            }
            None => {
                warn!(
                    table = uri,
                    "the view's current snapshot names a missing manifest; writing a snapshot of every file anew"
                );
                (Vec::new(), HashMap::new())
            }
        },
        None => (Vec::new(), HashMap::new()),
    };
    let added: Vec<(&String, &DeltaFile)> = delta_files
        .iter()
        .filter(|(path, _)| !live.contains_key(*path))
        .collect();
    let removed: Vec<&LiveEntry> = if behind {
        Vec::new()
    } else {
        live.iter()
            .filter(|(path, _)| !delta_files.contains_key(*path))
            .map(|(_, e)| e)
            .collect()
    };

    let sequence_number = base.last_sequence_number() + 1;
    let snapshot_id = new_snapshot_id(&base);
    let mut written: Vec<String> = Vec::new();
    let mut bytes_written = 0u64;
    let mut builder = TableMetadataBuilder::new_from_metadata(base.clone(), None);
    let mut committed = None;
    if !added.is_empty() || !removed.is_empty() {
        let io = FileIO::new_with_memory();
        let partition_type = spec.partition_type(&schema).map_err(failed(uri))?;
        let mut new_manifests: Vec<ManifestFile> = Vec::new();
        let mut dropped: Vec<String> = Vec::new();
        let removed_paths: HashSet<&str> = removed.iter().map(|e| e.entry.file_path()).collect();
        let touched: HashSet<usize> = removed.iter().map(|e| e.manifest).collect();
        let kept = manifests.len() - touched.len();
        let merge = kept + touched.len() + usize::from(!added.is_empty()) > MAX_MANIFESTS;
        let manifest_name = |n: usize| format!("{METADATA_FOLDER}/{}-m{n}.avro", uuid::Uuid::new_v4());
        let writer_for = |n: usize| -> Result<(iceberg::spec::ManifestWriter, String), LakeError> {
            let name = manifest_name(n);
            let output = io.new_output(format!("{root}/{name}")).map_err(failed(uri))?;
            let writer = ManifestWriterBuilder::new(output, Some(snapshot_id), schema.clone(), spec.as_ref().clone())
                .build_v2_data();
            Ok((writer, name))
        };
        let mut rewritten: Vec<(iceberg::spec::ManifestWriter, String)> = Vec::new();
        // The manifest the added files go into: the merged one, or a new one.
        let mut adding = None;
        if merge {
            let (mut writer, name) = writer_for(0)?;
            for (file, entries) in &manifests {
                dropped.push(file.manifest_path.clone());
                for entry in entries.iter().filter(|e| e.is_alive()) {
                    carry(uri, &mut writer, entry, removed_paths.contains(entry.file_path()))?;
                }
            }
            adding = Some((writer, name));
        } else {
            for (index, (file, entries)) in manifests.iter().enumerate() {
                if !touched.contains(&index) {
                    new_manifests.push(file.clone());
                    continue;
                }
                dropped.push(file.manifest_path.clone());
                let (mut writer, name) = writer_for(index + 1)?;
                for entry in entries.iter().filter(|e| e.is_alive()) {
                    carry(uri, &mut writer, entry, removed_paths.contains(entry.file_path()))?;
                }
                rewritten.push((writer, name));
            }
            if !added.is_empty() {
                adding = Some(writer_for(0)?);
            }
        }
        if let Some((mut writer, name)) = adding {
            add_files(
                uri,
                &mut writer,
                &added,
                &partition_columns,
                &partition_type,
                sequence_number,
            )?;
            rewritten.push((writer, name));
        }
        // The manifests and the manifest list, written at once: nothing names them until the
        // metadata file does.
        let mut uploads: Vec<(String, Bytes)> = Vec::new();
        for (writer, name) in rewritten {
            let file = writer.write_manifest_file().await.map_err(failed(uri))?;
            let bytes = io
                .new_input(&file.manifest_path)
                .map_err(failed(uri))?
                .read()
                .await
                .map_err(failed(uri))?;
            bytes_written += bytes.len() as u64;
            uploads.push((name, bytes));
            new_manifests.push(file);
        }

        let list_name = format!("{METADATA_FOLDER}/snap-{snapshot_id}-{}.avro", uuid::Uuid::new_v4());
        let list_uri = format!("{root}/{list_name}");
        let output = io.new_output(&list_uri).map_err(failed(uri))?;
        let mut list = ManifestListWriter::v2(
            output.writer().await.map_err(failed(uri))?,
            snapshot_id,
            base.current_snapshot_id(),
            sequence_number,
        );
        list.add_manifests(new_manifests.into_iter()).map_err(failed(uri))?;
        list.close().await.map_err(failed(uri))?;
        let bytes = io
            .new_input(&list_uri)
            .map_err(failed(uri))?
            .read()
            .await
            .map_err(failed(uri))?;
        bytes_written += bytes.len() as u64;
        uploads.push((list_name.clone(), bytes));
        let puts = uploads
            .iter()
            .map(|(name, bytes)| put(uri, &store, name, bytes.clone()));
        let put_all = try_join_all(puts).await;
        written.extend(uploads.into_iter().map(|(name, _)| name));
        if let Err(e) = put_all {
            delete_all(uri, &store, &written).await;
            return Err(e);
        }

        let added_records: u64 = added.iter().map(|(_, f)| f.records.unwrap_or(0)).sum();
        let removed_records: u64 = removed.iter().map(|e| e.entry.record_count()).sum();
        let total_records: u64 = delta_files.values().map(|f| f.records.unwrap_or(0)).sum();
        let operation = match (added.is_empty(), removed.is_empty()) {
            (false, true) => Operation::Append,
            (true, false) => Operation::Delete,
            _ if added_records == removed_records => Operation::Replace,
            _ => Operation::Overwrite,
        };
        let mut properties = HashMap::from([
            (DELTA_VERSION.to_owned(), version.to_string()),
            ("added-data-files".to_owned(), added.len().to_string()),
            ("deleted-data-files".to_owned(), removed.len().to_string()),
            ("added-records".to_owned(), added_records.to_string()),
            ("deleted-records".to_owned(), removed_records.to_string()),
            ("total-data-files".to_owned(), delta_files.len().to_string()),
            ("total-records".to_owned(), total_records.to_string()),
        ]);
        if !dropped.is_empty() {
            properties.insert(DROPPED_MANIFESTS.to_owned(), dropped.join(","));
        }
        let snapshot = Snapshot::builder()
            .with_snapshot_id(snapshot_id)
            .with_parent_snapshot_id(base.current_snapshot_id())
            .with_sequence_number(sequence_number)
            .with_timestamp_ms(now_ms.max(base.last_updated_ms()))
            .with_manifest_list(list_uri)
            .with_summary(Summary {
                operation: operation.clone(),
                additional_properties: properties,
            })
            .with_schema_id(schema.schema_id())
            .build();
        builder = builder.set_branch_snapshot(snapshot, "main").map_err(failed(uri))?;
        committed = Some((snapshot_id, operation, added.len(), removed.len()));
    }

    // Snapshots past the history kept, with what only they named.
    let current = committed.as_ref().map(|c| c.0).or(base.current_snapshot_id());
    let expire = expired_snapshots(&base, history, now_ms, current);
    let mut garbage: Vec<String> = Vec::new();
    if !expire.is_empty() {
        let expire_set: HashSet<i64> = expire.iter().copied().collect();
        let mut children: Vec<(Option<i64>, Option<String>)> = base
            .snapshots()
            .map(|s| {
                (
                    s.parent_snapshot_id(),
                    s.summary().additional_properties.get(DROPPED_MANIFESTS).cloned(),
                )
            })
            .collect();
        for snapshot in base.snapshots().filter(|s| expire_set.contains(&s.snapshot_id())) {
            garbage.push(relative(uri, &root, snapshot.manifest_list())?);
        }
        children.retain(|(parent, _)| parent.is_some_and(|p| expire_set.contains(&p)));
        for (_, dropped) in children {
            for path in dropped.iter().flat_map(|d| d.split(',')) {
                garbage.push(relative(uri, &root, path)?);
            }
        }
        builder = builder.remove_snapshots(&expire);
    }
    let new_dropped_if_parent_expired =
        committed.is_some() && base.current_snapshot_id().is_some_and(|p| expire.contains(&p));

    let mapping =
        serde_json::to_string(&schema::name_mapping(&schema)).map_err(|e| iceberg_error(uri, e.to_string()))?;
    let delta_version = if behind { mirrored.unwrap_or(version) } else { version };
    builder = builder
        .set_properties(HashMap::from([
            (DELTA_VERSION.to_owned(), delta_version.to_string()),
            ("schema.name-mapping.default".to_owned(), mapping),
        ]))
        .map_err(failed(uri))?;
    let built = builder.build().map_err(failed(uri))?;
    expired_metadata.extend(built.expired_metadata_logs.into_iter().map(|m| m.metadata_file));
    let metadata = built.metadata;

    let number = latest.as_ref().map_or(1, |l| l.number + 1);
    let name = metadata_name(number);
    let body = Bytes::from(serde_json::to_vec(&metadata).map_err(|e| iceberg_error(uri, e.to_string()))?);
    bytes_written += body.len() as u64;
    let create = PutOptions {
        mode: PutMode::Create,
        ..Default::default()
    };
    match store
        .put_opts(&Path::from(name.as_str()), PutPayload::from_bytes(body), create)
        .await
    {
        Ok(_) => {}
        Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => {
            delete_all(uri, &store, &written).await;
            return Ok(Try::Lost);
        }
        // The write may have landed all the same (a timeout, a dropped answer): what it names
        // stays; if it did not land, the maintenance pass removes the orphans.
        Err(e) => return Err(iceberg_error(uri, format!("writing {name}: {e}"))),
    }
    // Readers that find the table by its folder read the hint; a hint behind by a race is set
    // right by the next writer.
    put(
        uri,
        &store,
        &format!("{METADATA_FOLDER}/version-hint.text"),
        Bytes::from(number.to_string()),
    )
    .await?;
    publish(uri, table, &format!("{root}/{name}")).await;

    // The manifests the new snapshot dropped, when its parent expired with this commit.
    if new_dropped_if_parent_expired
        && let Some(dropped) = metadata
            .current_snapshot()
            .and_then(|current| current.summary().additional_properties.get(DROPPED_MANIFESTS))
    {
        for path in dropped.split(',') {
            garbage.push(relative(uri, &root, path)?);
        }
    }
    // After an erasure no metadata file but the new one may name the snapshots expired.
    if history.is_zero() {
        expired_metadata.extend(metadata.metadata_log().iter().map(|m| m.metadata_file.clone()));
    }
    for file in &expired_metadata {
        garbage.push(relative(uri, &root, file)?);
    }
    delete_all(uri, &store, &garbage).await;

    let (snapshot_id, operation, added_files, removed_files) = match committed {
        Some((id, op, a, r)) => (Some(id), Some(op.as_str().to_owned()), a, r),
        None => (None, None, 0, 0),
    };
    Ok(Try::Done(Some(Mirrored {
        delta_version,
        metadata: format!("{root}/{name}"),
        snapshot_id,
        operation,
        added_files,
        removed_files,
        bytes_written,
        expired_snapshots: expire.len(),
    })))
}

/// The metadata the next snapshot builds on: a new table of `schema` partitioned by
/// `partition_columns` when there is no view yet, else the latest metadata with `schema` as its
/// current schema if it changed (unless this writer is `behind`); and the metadata files it
/// drops from its log.
fn base_metadata(
    uri: &str,
    root: &str,
    latest: Option<&Latest>,
    schema: iceberg::spec::Schema,
    partition_columns: &[String],
    behind: bool,
) -> Result<(TableMetadata, Vec<String>), LakeError> {
    let mut expired_metadata = Vec::new();
    let base = match latest {
        None => {
            let mut spec = UnboundPartitionSpec::builder().with_spec_id(0);
            for column in partition_columns {
                let source = schema
                    .field_id_by_name(column)
                    .ok_or_else(|| iceberg_error(uri, format!("partition column {column} is not in the schema")))?;
                spec = spec
                    .add_partition_field(source, column, Transform::Identity)
                    .map_err(failed(uri))?;
            }
            let properties = HashMap::from([
                (
                    "write.metadata.previous-versions-max".to_owned(),
                    PREVIOUS_VERSIONS_MAX.to_string(),
                ),
                (
                    "write.metadata.delete-after-commit.enabled".to_owned(),
                    "true".to_owned(),
                ),
                ("write.parquet.compression-codec".to_owned(), "snappy".to_owned()),
            ]);
            TableMetadataBuilder::new(
                schema,
                spec.build(),
                SortOrder::unsorted_order(),
                root.to_owned(),
                FormatVersion::V2,
                properties,
            )
            .map_err(failed(uri))?
            .build()
            .map_err(failed(uri))?
            .metadata
        }
        Some(latest) => {
            let previous = &latest.metadata;
            let mut builder =
                TableMetadataBuilder::new_from_metadata(previous.clone(), Some(format!("{root}/{}", latest.name)));
            if !behind && schema.as_struct() != previous.current_schema().as_struct() {
                info!(
                    table = uri,
                    "the Delta schema changed: the Iceberg view takes the new schema"
                );
                builder = builder.add_current_schema(schema).map_err(failed(uri))?;
            }
            let built = builder.build().map_err(failed(uri))?;
            expired_metadata.extend(built.expired_metadata_logs.into_iter().map(|m| m.metadata_file));
            built.metadata
        }
    };
    Ok((base, expired_metadata))
}

/// Deletes the objects of the view's metadata folder that nothing kept names and that are older
/// than `grace`: what a writer stopped between its manifests and its metadata file left behind.
/// Kept: the newest metadata file and those its log names, the hint, the manifest list of every
/// snapshot kept and the manifests those lists name. `grace` spares what a writer still at work
/// has written and not yet committed. Returns the objects deleted.
pub async fn remove_orphans(uri: &str, table: &DeltaTable, grace: Duration) -> Result<Vec<String>, LakeError> {
    use futures::TryStreamExt;
    let store = table.object_store();
    let root = root(table);
    // Listed before the metadata is read: an object written after the listing is not a candidate.
    let listed: Vec<_> = store
        .list(Some(&Path::from(METADATA_FOLDER)))
        .try_collect()
        .await
        .map_err(|e| iceberg_error(uri, format!("listing {METADATA_FOLDER}: {e}")))?;
    let Some(latest) = latest(uri, &store).await? else {
        return Ok(Vec::new());
    };
    let mut kept: HashSet<String> =
        HashSet::from([latest.name.clone(), format!("{METADATA_FOLDER}/version-hint.text")]);
    for log in latest.metadata.metadata_log() {
        kept.insert(relative(uri, &root, &log.metadata_file)?);
    }
    // Metadata files newer than the one read were written since: not orphans.
    kept.extend(
        listed
            .iter()
            .filter(|o| {
                o.location
                    .filename()
                    .and_then(|n| n.strip_prefix('v')?.strip_suffix(".metadata.json")?.parse::<u64>().ok())
                    .is_some_and(|n| n > latest.number)
            })
            .map(|o| o.location.to_string()),
    );
    for snapshot in latest.metadata.snapshots() {
        let list_name = relative(uri, &root, snapshot.manifest_list())?;
        let bytes = read(uri, &store, &list_name).await?;
        let list = ManifestList::parse_with_version(&bytes, FormatVersion::V2).map_err(failed(uri))?;
        for manifest in list.entries() {
            kept.insert(relative(uri, &root, &manifest.manifest_path)?);
        }
        kept.insert(list_name);
    }
    let before = chrono::Utc::now() - chrono::Duration::from_std(grace).unwrap_or(chrono::Duration::MAX);
    let orphans: Vec<String> = listed
        .into_iter()
        .filter(|o| o.last_modified < before && !kept.contains(o.location.as_ref()))
        .map(|o| o.location.to_string())
        .collect();
    delete_all(uri, &store, &orphans).await;
    if !orphans.is_empty() {
        info!(
            table = uri,
            objects = orphans.len(),
            "deleted Iceberg metadata objects no snapshot names"
        );
    }
    Ok(orphans)
}

/// The snapshots of `metadata` to expire: all but `current` (the snapshot that will be current)
/// that are older than `history`, or beyond the newest [`MAX_SNAPSHOTS`].
fn expired_snapshots(metadata: &TableMetadata, history: Duration, now_ms: i64, current: Option<i64>) -> Vec<i64> {
    let current = current.or(metadata.current_snapshot_id());
    let mut others: Vec<(i64, i64)> = metadata
        .snapshots()
        .filter(|s| Some(s.snapshot_id()) != current)
        .map(|s| (s.timestamp_ms(), s.snapshot_id()))
        .collect();
    // Newest first; the one that will be current counts as one of the kept.
    others.sort_unstable_by(|a, b| b.cmp(a));
    let oldest_kept = now_ms.saturating_sub(i64::try_from(history.as_millis()).unwrap_or(i64::MAX));
    others
        .into_iter()
        .enumerate()
        .filter(|(index, (timestamp, _))| *index + 1 >= MAX_SNAPSHOTS || *timestamp < oldest_kept || history.is_zero())
        .map(|(_, (_, id))| id)
        .collect()
}

/// A snapshot id not yet in `metadata`: positive, random.
fn new_snapshot_id(metadata: &TableMetadata) -> i64 {
    loop {
        let id = (uuid::Uuid::new_v4().as_u64_pair().0 >> 1) as i64;
        if id != 0 && metadata.snapshot_by_id(id).is_none() {
            return id;
        }
    }
}

/// `absolute` relative to the table's root, as the object store names it.
fn relative(uri: &str, root: &str, absolute: &str) -> Result<String, LakeError> {
    absolute
        .strip_prefix(root)
        .and_then(|rest| rest.strip_prefix('/'))
        .map(str::to_owned)
        .ok_or_else(|| iceberg_error(uri, format!("{absolute} is not under the table's location {root}")))
}

/// The data files of the Delta version loaded, by their URI.
async fn delta_files(
    uri: &str,
    table: &DeltaTable,
    store: &ObjectStoreRef,
    root: &str,
) -> Result<BTreeMap<String, DeltaFile>, LakeError> {
    let state = table.snapshot().map_err(|e| LakeError::delta(uri, e))?;
    let mut files = BTreeMap::new();
    for view in state.log_data().iter() {
        let relative = view.path().into_owned();
        let size = u64::try_from(view.size()).unwrap_or(0);
        let records = view.num_records().map(|n| n as u64);
        files.insert(
            format!("{root}/{relative}"),
            DeltaFile {
                size,
                records,
                partition: view.partition_values_map(),
                relative,
            },
        );
    }
    // Files without a row count in their statistics: read from their footers.
    for file in files.values_mut().filter(|f| f.records.is_none()) {
        use deltalake::parquet::arrow::async_reader::AsyncFileReader;
        let mut reader = StoreFile {
            store: store.clone(),
            path: Path::from(file.relative.as_str()),
            size: file.size,
        };
        let footer = reader.get_metadata(None).await.map_err(|e| LakeError::ReadFile {
            uri: uri.to_owned(),
            file: file.relative.clone(),
            reason: e.to_string(),
        })?;
        file.records = Some(u64::try_from(footer.file_metadata().num_rows()).unwrap_or(0));
    }
    Ok(files)
}

/// The manifests of the manifest list at `list` with their entries (sequence numbers and
/// snapshot ids inherited), and the live files by path; `None` when the list or one of its
/// manifests is missing.
async fn live_entries(
    uri: &str,
    store: &ObjectStoreRef,
    root: &str,
    list: &str,
) -> Result<Option<LiveEntries>, LakeError> {
    let Some(bytes) = crate::files::read_object(uri, store, &relative(uri, root, list)?).await? else {
        return Ok(None);
    };
    let list = ManifestList::parse_with_version(&bytes, FormatVersion::V2).map_err(failed(uri))?;
    let io = FileIO::new_with_memory();
    let reads = list.entries().iter().map(|file| {
        let io = &io;
        async move {
            if let Some(entries) = cached(&file.manifest_path) {
                return Ok::<_, LakeError>(Some((file.clone(), entries)));
            }
            let Some(bytes) = crate::files::read_object(uri, store, &relative(uri, root, &file.manifest_path)?).await?
            else {
                return Ok(None);
            };
            io.new_output(&file.manifest_path)
                .map_err(failed(uri))?
                .write(bytes)
                .await
                .map_err(failed(uri))?;
            let entries = file.load_manifest(io).await.map_err(failed(uri))?.entries().to_vec();
            cache(&file.manifest_path, &entries);
            Ok(Some((file.clone(), entries)))
        }
    });
    let Some(manifests) = try_join_all(reads).await?.into_iter().collect::<Option<Vec<_>>>() else {
        return Ok(None);
    };
    let mut live = HashMap::new();
    for (index, (_, entries)) in manifests.iter().enumerate() {
        for entry in entries.iter().filter(|e| e.is_alive()) {
            live.insert(
                entry.file_path().to_owned(),
                LiveEntry {
                    manifest: index,
                    entry: entry.clone(),
                },
            );
        }
    }
    Ok(Some((manifests, live)))
}

/// Manifests read before, by URI, with what their manifest list let them inherit: a manifest is
/// never rewritten in place (a changed one is a new file), so what was read holds, and a pass
/// reads only the manifests written since the last. Cleared when it holds [`CACHED_MANIFESTS`].
static MANIFESTS: std::sync::LazyLock<std::sync::Mutex<HashMap<String, Vec<iceberg::spec::ManifestEntryRef>>>> =
    std::sync::LazyLock::new(Default::default);
/// Manifests kept in [`MANIFESTS`] at most.
const CACHED_MANIFESTS: usize = 512;

fn cached(path: &str) -> Option<Vec<iceberg::spec::ManifestEntryRef>> {
    MANIFESTS.lock().ok()?.get(path).cloned()
}

fn cache(path: &str, entries: &[iceberg::spec::ManifestEntryRef]) {
    if let Ok(mut manifests) = MANIFESTS.lock() {
        if manifests.len() >= CACHED_MANIFESTS {
            manifests.clear();
        }
        manifests.insert(path.to_owned(), entries.to_vec());
    }
}

/// Writes a live entry of an older manifest into a new one: as existing, or as deleted by
/// `snapshot_id` when the Delta version no longer has its file.
fn carry(
    uri: &str,
    writer: &mut iceberg::spec::ManifestWriter,
    entry: &iceberg::spec::ManifestEntry,
    removed: bool,
) -> Result<(), LakeError> {
    let sequence_number = entry
        .sequence_number()
        .ok_or_else(|| iceberg_error(uri, format!("{}: no sequence number", entry.file_path())))?;
    let file_sequence_number = entry.file_sequence_number.or(Some(sequence_number));
    if removed {
        writer
            .add_delete_file(entry.data_file().clone(), sequence_number, file_sequence_number)
            .map_err(failed(uri))
    } else {
        let added_by = entry
            .snapshot_id()
            .ok_or_else(|| iceberg_error(uri, format!("{}: no snapshot id", entry.file_path())))?;
        writer
            .add_existing_file(
                entry.data_file().clone(),
                added_by,
                sequence_number,
                file_sequence_number,
            )
            .map_err(failed(uri))
    }
}

/// Writes the files the Delta version added as added entries.
fn add_files(
    uri: &str,
    writer: &mut iceberg::spec::ManifestWriter,
    added: &[(&String, &DeltaFile)],
    partition_columns: &[String],
    partition_type: &iceberg::spec::StructType,
    sequence_number: i64,
) -> Result<(), LakeError> {
    for (path, file) in added {
        let values = partition_columns
            .iter()
            .zip(partition_type.fields())
            .map(|(column, field)| partition_value(uri, path, column, &field.field_type, file.partition.get(column)))
            .collect::<Result<Vec<_>, _>>()?;
        let data_file = DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_path((*path).clone())
            .file_format(DataFileFormat::Parquet)
            .partition(Struct::from_iter(values))
            .partition_spec_id(0)
            .record_count(file.records.unwrap_or(0))
            .file_size_in_bytes(file.size)
            .build()
            .map_err(|e| iceberg_error(uri, format!("{path}: {e}")))?;
        writer.add_file(data_file, sequence_number).map_err(failed(uri))?;
    }
    Ok(())
}

/// A Delta partition value (a string in the log) as the Iceberg literal of its column's type.
fn partition_value(
    uri: &str,
    path: &str,
    column: &str,
    field_type: &Type,
    value: Option<&Option<String>>,
) -> Result<Option<Literal>, LakeError> {
    let Some(Some(value)) = value else {
        return Ok(None);
    };
    let bad = |reason: String| iceberg_error(uri, format!("{path}: partition {column}={value:?}: {reason}"));
    let literal = match field_type {
        Type::Primitive(PrimitiveType::Date) => Literal::date_from_str(value).map_err(|e| bad(e.to_string()))?,
        Type::Primitive(PrimitiveType::String) => Literal::string(value),
        Type::Primitive(PrimitiveType::Int) => Literal::int(value.parse::<i32>().map_err(|e| bad(e.to_string()))?),
        Type::Primitive(PrimitiveType::Long) => Literal::long(value.parse::<i64>().map_err(|e| bad(e.to_string()))?),
        other => return Err(bad(format!("partitions of type {other} are not mirrored"))),
    };
    Ok(Some(literal))
}

#[cfg(test)]
mod tests;
