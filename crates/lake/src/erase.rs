//! Erasure: the rows of given ids removed from a table for good, while its writers go on.
//!
//! [`Table::erase`](crate::Table::erase) reads only the columns an [`Erasure`] looks at, from
//! every active file, and rewrites just the files that hold a matching row, without those rows.
//! The removals and the new files land in one commit guarded like a compaction's (every file
//! rewritten must still be active), so appends by the committer at the same time are neither lost
//! nor doubled, and a compaction that rewrote one of the files first makes the erasure scan again.
//!
//! The rewritten files are then out of the table but still on storage, as are the files of older
//! versions that compactions replaced: readers of older versions (and time travel) may read them.
//! [`Table::purge`](crate::Table::purge) deletes every such file that holds the ids, not after the table-wide VACUUM
//! retention but as soon as the caller judges no reader still needs them, and [`Table::scan_folder`](crate::Table::scan_folder)
//! proves that no Parquet file left under the table's folder holds the ids.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use aho_corasick::AhoCorasick;
use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, BooleanBufferBuilder, StructArray};
use arrow::compute::filter_record_batch;
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use deltalake::DeltaTable;
use deltalake::kernel::{Action, LogicalFileView};
use deltalake::parquet::arrow::ProjectionMask;
use deltalake::parquet::arrow::async_reader::ParquetRecordBatchStreamBuilder;
use deltalake::protocol::DeltaOperation;
use deltalake::writer::{DeltaWriter as _, RecordBatchWriter, WriteMode};
use deltalake::{ObjectStore, Path};
use futures::{StreamExt as _, TryStreamExt as _};
use indexmap::IndexMap;
use object_store::ObjectStoreExt as _;
use serde::Serialize;
use tracing::{info, warn};

use crate::commit::{Commit, CommitFailure, Guard, Landed, Retry, commit, delete_files};
use crate::conform::{conform, without_partitions};
use crate::error::LakeError;
use crate::files::StoreFile;
use crate::txns::Txns;

/// Rows read at once from a file.
const BATCH_ROWS: usize = 8_192;

/// Files read at once while looking for the ids.
const SCANS_AT_ONCE: usize = 8;

/// Times the erasure scans again after a concurrent rewrite of one of its files.
const ATTEMPTS: u32 = 5;

/// Which rows an erasure removes: those in which one of its columns holds one of its ids (and,
/// with [`Erasure::within`], whose namespace column is the given value or null).
#[derive(Debug, Clone)]
pub struct Erasure {
    ids: HashSet<String>,
    /// The ids in the order of `quoted`'s patterns.
    ordered: Vec<String>,
    /// Text columns (dotted paths into structs) whose value is an id.
    equals: Vec<String>,
    /// Text or binary columns (JSON) that name an id as a JSON string anywhere in them.
    mentions: Vec<String>,
    /// `(column, value)`: only rows of this namespace (or of none: rows written before it).
    within: Option<(String, String)>,
    /// The ids as JSON strings (`"id"`), found in one pass over a value (`None` when too many
    /// to build the automaton: then looked for one by one).
    quoted: Option<Arc<AhoCorasick>>,
}

impl Erasure {
    /// The rows of `ids`, in no column yet: add them with [`Erasure::equals`] and
    /// [`Erasure::mentions`]. An id is a non-empty text.
    pub fn new<I: IntoIterator<Item = S>, S: Into<String>>(ids: I) -> Self {
        let ids: HashSet<String> = ids.into_iter().map(Into::into).filter(|id| !id.is_empty()).collect();
        let ordered: Vec<String> = ids.iter().cloned().collect();
        let quoted: Vec<String> = ordered
            .iter()
            .map(|id| serde_json::Value::String(id.clone()).to_string())
            .collect();
        let quoted = AhoCorasick::new(&quoted).ok().map(Arc::new);
        Self {
            ids,
            ordered,
            equals: Vec::new(),
            mentions: Vec::new(),
            within: None,
            quoted,
        }
    }

    /// Also rows whose text column `path` (`eventParams.device_id`) is one of the ids.
    pub fn equals(mut self, path: impl Into<String>) -> Self {
        self.equals.push(path.into());
        self
    }

    /// Also rows whose text or binary column `path` holds JSON naming one of the ids as a string
    /// (a raw record, a JSON object of extra parameters).
    pub fn mentions(mut self, path: impl Into<String>) -> Self {
        self.mentions.push(path.into());
        self
    }

    /// Only rows whose text column `column` is `value`, or null (rows written before the column
    /// existed).
    pub fn within(mut self, column: impl Into<String>, value: impl Into<String>) -> Self {
        self.within = Some((column.into(), value.into()));
        self
    }

    /// The ids.
    pub fn ids(&self) -> &HashSet<String> {
        &self.ids
    }

    /// Whether `bytes` name one of the ids as a JSON string.
    pub fn mentioned_in(&self, bytes: &[u8]) -> bool {
        match &self.quoted {
            Some(automaton) => automaton.is_match(bytes),
            None => self.ids.iter().any(|id| {
                let quoted = serde_json::Value::String(id.clone()).to_string();
                memchr::memmem::find(bytes, quoted.as_bytes()).is_some()
            }),
        }
    }

    /// The ids that `bytes` name as JSON strings.
    pub fn ids_mentioned_in<'a>(&'a self, bytes: &[u8]) -> Vec<&'a str> {
        match &self.quoted {
            Some(automaton) => automaton
                .find_iter(bytes)
                .filter_map(|m| self.ordered.get(m.pattern().as_usize()))
                .map(String::as_str)
                .collect(),
            None => self
                .ordered
                .iter()
                .filter(|id| {
                    let quoted = serde_json::Value::String((*id).clone()).to_string();
                    memchr::memmem::find(bytes, quoted.as_bytes()).is_some()
                })
                .map(String::as_str)
                .collect(),
        }
    }

    /// Adds to `found` the ids that the rows of `batch` marked in `gone` hold.
    fn ids_of(&self, batch: &RecordBatch, gone: &BooleanArray, found: &mut BTreeSet<String>) {
        for path in &self.equals {
            if let Some(column) = column(batch, path) {
                each_text(&column, |i, value| {
                    if gone.value(i) && self.ids.contains(value) && !found.contains(value) {
                        found.insert(value.to_owned());
                    }
                });
            }
        }
        for path in &self.mentions {
            if let Some(column) = column(batch, path) {
                each_bytes(&column, |i, value| {
                    if gone.value(i) {
                        found.extend(self.ids_mentioned_in(value).into_iter().map(str::to_owned));
                    }
                });
            }
        }
    }

    /// The columns read to decide.
    fn columns(&self) -> impl Iterator<Item = &str> {
        self.equals
            .iter()
            .chain(&self.mentions)
            .chain(self.within.iter().map(|(c, _)| c))
            .map(String::as_str)
    }

    /// Which rows of `batch` are to go. A column the batch lacks matches nothing (for
    /// [`Erasure::within`]: every row, as null).
    pub fn rows(&self, batch: &RecordBatch) -> BooleanArray {
        let n = batch.num_rows();
        let mut hit = vec![false; n];
        for path in &self.equals {
            if let Some(column) = column(batch, path) {
                each_text(&column, |i, value| {
                    if !hit[i] && self.ids.contains(value) {
                        hit[i] = true;
                    }
                });
            }
        }
        for path in &self.mentions {
            if let Some(column) = column(batch, path) {
                each_bytes(&column, |i, value| {
                    if !hit[i] && self.mentioned_in(value) {
                        hit[i] = true;
                    }
                });
            }
        }
        // Rows of another namespace are kept; a null one is none.
        if let Some((path, value)) = &self.within
            && let Some(column) = column(batch, path)
        {
            each_text(&column, |i, v| {
                if v != value {
                    hit[i] = false;
                }
            });
        }
        let mut builder = BooleanBufferBuilder::new(n);
        builder.append_slice(&hit);
        BooleanArray::new(builder.finish(), None)
    }
}

/// The column at the dotted `path` of `batch` (through struct columns), if it has it.
fn column(batch: &RecordBatch, path: &str) -> Option<ArrayRef> {
    let mut parts = path.split('.');
    let mut current: ArrayRef = batch.column_by_name(parts.next()?)?.clone();
    for part in parts {
        let parent: &StructArray = current.as_struct_opt()?;
        let child = parent.column_by_name(part)?.clone();
        // A null struct makes its fields null.
        current = match parent.nulls() {
            Some(nulls) if parent.null_count() > 0 => {
                let data = child.to_data();
                let merged = arrow::buffer::NullBuffer::union(Some(nulls), data.nulls());
                arrow::array::make_array(data.into_builder().nulls(merged).build().ok()?)
            }
            _ => child,
        };
    }
    Some(current)
}

/// Calls `f` with each non-null text value of `array` (any string type) and its row.
fn each_text(array: &ArrayRef, mut f: impl FnMut(usize, &str)) {
    let mut visit = |i: usize, v: Option<&str>| {
        if let Some(v) = v {
            f(i, v)
        }
    };
    match array.data_type() {
        DataType::Utf8 => array
            .as_string::<i32>()
            .iter()
            .enumerate()
            .for_each(|(i, v)| visit(i, v)),
        DataType::LargeUtf8 => array
            .as_string::<i64>()
            .iter()
            .enumerate()
            .for_each(|(i, v)| visit(i, v)),
        DataType::Utf8View => array.as_string_view().iter().enumerate().for_each(|(i, v)| visit(i, v)),
        DataType::Dictionary(_, _) => {
            if let Ok(plain) = arrow::compute::cast(array, &DataType::Utf8) {
                plain
                    .as_string::<i32>()
                    .iter()
                    .enumerate()
                    .for_each(|(i, v)| visit(i, v));
            }
        }
        _ => {}
    }
}

/// Calls `f` with the bytes of each non-null text or binary value of `array` and its row.
fn each_bytes(array: &ArrayRef, mut f: impl FnMut(usize, &[u8])) {
    let mut visit = |i: usize, v: Option<&[u8]>| {
        if let Some(v) = v {
            f(i, v)
        }
    };
    match array.data_type() {
        DataType::Binary => array
            .as_binary::<i32>()
            .iter()
            .enumerate()
            .for_each(|(i, v)| visit(i, v)),
        DataType::LargeBinary => array
            .as_binary::<i64>()
            .iter()
            .enumerate()
            .for_each(|(i, v)| visit(i, v)),
        DataType::BinaryView => array.as_binary_view().iter().enumerate().for_each(|(i, v)| visit(i, v)),
        _ => each_text(array, |i, v| f(i, v.as_bytes())),
    }
}

/// One file an erasure rewrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RewrittenFile {
    /// The file removed from the table (relative to the table's folder).
    pub removed: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// The rows of the ids it held.
    pub rows_removed: u64,
    /// The files that replace it (none when every row was of the ids).
    pub added: Vec<String>,
}

/// What [`Table::erase`](crate::Table::erase) did to one table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ErasureReport {
    /// The table.
    pub table: String,
    /// The version the last scan read.
    pub version_scanned: u64,
    /// The version that removed the rows; `None` when no row was of the ids.
    pub version: Option<u64>,
    /// The active files read.
    pub files_scanned: usize,
    /// The files rewritten.
    pub files: Vec<RewrittenFile>,
    /// Rows removed in all.
    pub rows_removed: u64,
    /// Bytes of the new files.
    pub bytes_written: u64,
    /// The ids found in the rows removed (never written out: receipts name no id).
    #[serde(skip)]
    pub ids_found: BTreeSet<String>,
}

/// What one active file was found to hold.
struct Found {
    view: LogicalFileView,
    rows: u64,
}

fn read_error(uri: &str, file: &str, reason: impl ToString) -> LakeError {
    LakeError::ReadFile {
        uri: uri.to_owned(),
        file: file.to_owned(),
        reason: reason.to_string(),
    }
}

async fn open(
    uri: &str,
    store: Arc<dyn ObjectStore>,
    path: Path,
    size: u64,
    shown: &str,
) -> Result<ParquetRecordBatchStreamBuilder<StoreFile>, LakeError> {
    ParquetRecordBatchStreamBuilder::new(StoreFile { store, path, size })
        .await
        .map(|b| b.with_batch_size(BATCH_ROWS))
        .map_err(|e| read_error(uri, shown, e))
}

/// The rows of `erasure` in the Parquet file at `path`, and the ids they hold, reading only the
/// columns it looks at.
async fn count_in_file(
    uri: &str,
    store: Arc<dyn ObjectStore>,
    path: Path,
    size: u64,
    erasure: &Erasure,
) -> Result<(u64, BTreeSet<String>), LakeError> {
    let shown = path.to_string();
    let builder = open(uri, store, path, size, &shown).await?;
    let mask = ProjectionMask::columns(builder.parquet_schema(), erasure.columns());
    let mut stream = builder
        .with_projection(mask)
        .build()
        .map_err(|e| read_error(uri, &shown, e))?;
    let mut rows = 0u64;
    let mut ids = BTreeSet::new();
    while let Some(batch) = stream.try_next().await.map_err(|e| read_error(uri, &shown, e))? {
        let gone = erasure.rows(&batch);
        let hits = gone.true_count() as u64;
        if hits > 0 {
            rows += hits;
            erasure.ids_of(&batch, &gone, &mut ids);
        }
    }
    Ok((rows, ids))
}

/// Every active file of the version `table` holds that has rows of `erasure`.
async fn find(uri: &str, table: &DeltaTable, erasure: &Erasure) -> Result<(usize, Vec<Found>), LakeError> {
    let snapshot = table.snapshot().map_err(|e| LakeError::delta(uri, e))?;
    let views: Vec<LogicalFileView> = snapshot.log_data().iter().collect();
    if let Some(view) = views.iter().find(|v| v.deletion_vector_descriptor().is_some()) {
        return Err(read_error(
            uri,
            &view.path(),
            "has a deletion vector, which lakelog does not rewrite",
        ));
    }
    let scanned = views.len();
    let found = scan_files(uri, table, views, erasure).await?;
    Ok((
        scanned,
        found
            .into_iter()
            .filter(|(_, rows, _)| *rows > 0)
            .map(|(view, rows, _)| Found { view, rows })
            .collect(),
    ))
}

/// Each of `views` (files of `table`) with its rows of `erasure` and the ids they hold, read
/// [`SCANS_AT_ONCE`] at a time, only the columns the erasure looks at.
async fn scan_files(
    uri: &str,
    table: &DeltaTable,
    views: Vec<LogicalFileView>,
    erasure: &Erasure,
) -> Result<Vec<(LogicalFileView, u64, BTreeSet<String>)>, LakeError> {
    let store = table.object_store();
    futures::stream::iter(views)
        .map(|view| {
            let store = store.clone();
            async move {
                let size = u64::try_from(view.size()).unwrap_or(0);
                let (rows, ids) = count_in_file(uri, store, view.object_store_path(), size, erasure).await?;
                Ok::<_, LakeError>((view, rows, ids))
            }
        })
        .buffered(SCANS_AT_ONCE)
        .try_collect()
        .await
}

/// The ids of `erasure` that rows of `table`'s current version hold, reading only the active
/// files that `keep` takes (by their partition values: column name to value as text) and only
/// the columns the erasure looks at.
pub(crate) async fn ids_present(
    uri: &str,
    table: &DeltaTable,
    erasure: &Erasure,
    keep: impl Fn(&HashMap<String, String>) -> bool,
) -> Result<BTreeSet<String>, LakeError> {
    let present = rows_present(uri, table, erasure, |values, _| keep(values), &mut Scanned::default()).await?;
    Ok(present.ids)
}

/// What [`rows_present`] found: the rows holding one of the ids, and which ids they hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Present {
    /// Rows holding one of the ids.
    pub rows: u64,
    /// The ids found.
    pub ids: BTreeSet<String>,
}

/// The files [`rows_present`] has read, each with what it held: kept from one call to the next,
/// so that a call reads only the files added since (a data file never changes) and counts only
/// those still active (a packing or compaction that rewrote a file counts its rows once).
#[derive(Debug, Clone, Default)]
pub struct Scanned {
    files: HashMap<String, Present>,
}

/// The rows of `erasure`'s ids in `table`'s current version, in the active files that `keep`
/// takes, by their partition values (column name to value as text) and when each was written
/// (milliseconds since the epoch); reading, of the columns the erasure looks at, only the files
/// `scanned` does not hold yet, and recording them there.
pub(crate) async fn rows_present(
    uri: &str,
    table: &DeltaTable,
    erasure: &Erasure,
    keep: impl Fn(&HashMap<String, String>, i64) -> bool,
    scanned: &mut Scanned,
) -> Result<Present, LakeError> {
    let snapshot = table.snapshot().map_err(|e| LakeError::delta(uri, e))?;
    let mut active = HashSet::new();
    let mut unread = Vec::new();
    for view in snapshot.log_data().iter() {
        let values: HashMap<String, String> = view
            .partition_values_map()
            .into_iter()
            .map(|(column, value)| (column, value.unwrap_or_default()))
            .collect();
        if !keep(&values, view.modification_time()) {
            continue;
        }
        let path = view.path().into_owned();
        if !scanned.files.contains_key(&path) {
            unread.push(view);
        }
        active.insert(path);
    }
    for (view, rows, ids) in scan_files(uri, table, unread, erasure).await? {
        scanned.files.insert(view.path().into_owned(), Present { rows, ids });
    }
    scanned.files.retain(|path, _| active.contains(path));
    Ok(scanned.files.values().fold(Present::default(), |mut present, file| {
        present.rows += file.rows;
        present.ids.extend(file.ids.iter().cloned());
        present
    }))
}

/// Rewrites `file` without the rows of `erasure` into new files of the table; their adds.
async fn rewrite(
    uri: &str,
    table: &DeltaTable,
    file: &Found,
    erasure: &Erasure,
) -> Result<(Vec<deltalake::kernel::Add>, u64, BTreeSet<String>), LakeError> {
    let delta = |e| LakeError::delta(uri, e);
    let values: IndexMap<String, _> = file
        .view
        .partition_values()
        .map(|values| {
            values
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .zip(values.values().iter().cloned())
                .collect()
        })
        .unwrap_or_default();
    let mut writer = RecordBatchWriter::for_table(table).map_err(delta)?;
    let file_schema = without_partitions(&writer.arrow_schema(), values.keys());
    let shown = file.view.path().into_owned();
    let size = u64::try_from(file.view.size()).unwrap_or(0);
    let written = async {
        let mut stream = open(uri, table.object_store(), file.view.object_store_path(), size, &shown)
            .await?
            .build()
            .map_err(|e| read_error(uri, &shown, e))?;
        let mut removed = 0u64;
        let mut ids = BTreeSet::new();
        while let Some(batch) = stream.try_next().await.map_err(|e| read_error(uri, &shown, e))? {
            let gone = erasure.rows(&batch);
            removed += gone.true_count() as u64;
            erasure.ids_of(&batch, &gone, &mut ids);
            let keep = arrow::compute::not(&gone).map_err(|e| read_error(uri, &shown, e))?;
            let kept = filter_record_batch(&batch, &keep).map_err(|e| read_error(uri, &shown, e))?;
            if kept.num_rows() > 0 {
                let kept = conform(kept, &file_schema).map_err(delta)?;
                writer
                    .write_partition(kept, &values, WriteMode::Default)
                    .await
                    .map_err(delta)?;
            }
        }
        let adds = writer.flush().await.map_err(delta)?;
        Ok::<_, LakeError>((adds, removed, ids))
    }
    .await;
    if written.is_err() {
        writer.reset();
    }
    written
}

/// Removes every row of `erasure` from `table` (see the module's documentation).
pub(crate) async fn erase(
    uri: &str,
    table: &mut DeltaTable,
    erasure: &Erasure,
    retry: &Retry,
) -> Result<ErasureReport, LakeError> {
    for attempt in 1..=ATTEMPTS {
        table
            .update_incremental(None)
            .await
            .map_err(|e| LakeError::delta(uri, e))?;
        let version_scanned = table.version().unwrap_or(0);
        let (files_scanned, found) = find(uri, table, erasure).await?;
        let mut report = ErasureReport {
            table: uri.to_owned(),
            version_scanned,
            files_scanned,
            ..ErasureReport::default()
        };
        if found.is_empty() {
            info!(table = uri, files_scanned, "no row of the ids");
            return Ok(report);
        }
        let mut actions: Vec<Action> = Vec::new();
        let mut all_adds = Vec::new();
        for file in &found {
            let (adds, removed, ids) = match rewrite(uri, table, file, erasure).await {
                Ok(done) => done,
                Err(e) => {
                    delete_files(&table.object_store(), &all_adds).await;
                    return Err(e);
                }
            };
            if removed != file.rows {
                delete_files(&table.object_store(), &all_adds).await;
                delete_files(&table.object_store(), &adds).await;
                return Err(read_error(
                    uri,
                    &file.view.path(),
                    format!("{} rows of the ids when scanned, {removed} when rewritten", file.rows),
                ));
            }
            actions.push(Action::Remove(file.view.remove_action(true)));
            report.rows_removed += removed;
            report.ids_found.extend(ids);
            report.bytes_written += adds.iter().map(|a| u64::try_from(a.size).unwrap_or(0)).sum::<u64>();
            report.files.push(RewrittenFile {
                removed: file.view.path().into_owned(),
                bytes: u64::try_from(file.view.size()).unwrap_or(0),
                rows_removed: removed,
                added: adds.iter().map(|a| crate::commit::decode_path(&a.path)).collect(),
            });
            all_adds.extend(adds);
        }
        for add in &all_adds {
            actions.push(Action::Add(add.clone()));
        }
        let paths: Vec<String> = found.iter().map(|f| f.view.path().into_owned()).collect();
        let must_be_active: Vec<&str> = paths.iter().map(String::as_str).collect();
        let to_commit = Commit {
            uri,
            actions,
            transactions: Vec::new(),
            operation: DeltaOperation::Delete {
                predicate: Some(format!("rows of {} erased ids", erasure.ids.len())),
            },
            metadata: vec![
                ("lakelog.operation".to_owned(), serde_json::json!("erasure")),
                ("lakelog.rowsRemoved".to_owned(), serde_json::json!(report.rows_removed)),
            ],
            guard: Guard::Active(&must_be_active),
            keep_files: false,
        };
        match commit(table, &Txns::default(), to_commit, retry).await {
            Ok(Landed::Version { version, .. }) => {
                report.version = Some(version);
                info!(
                    table = uri,
                    version,
                    files = report.files.len(),
                    rows = report.rows_removed,
                    "rows erased"
                );
                return Ok(report);
            }
            Ok(Landed::Refused { reason }) => {
                warn!(table = uri, attempt, %reason, "a file to rewrite was rewritten by another commit; scanning again");
            }
            Err(CommitFailure::NotCommitted(e) | CommitFailure::Unknown(e)) => return Err(e),
        }
    }
    Err(LakeError::Conflict {
        uri: uri.to_owned(),
        reason: format!("other commits rewrote the files to erase from {ATTEMPTS} times running"),
    })
}

/// How old a data file that no version of the log names (not active, not removed) must be before
/// a purge takes it for an orphan: a writer writes its link right after its files, within one
/// invocation (15 minutes at most).
pub const ORPHAN_AGE: chrono::TimeDelta = chrono::TimeDelta::hours(1);

/// What [`Table::purge`](crate::Table::purge) did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Purge {
    /// Files deleted from storage: out of the table (removed by an erasure, a compaction or an
    /// older rewrite, or orphans), yet holding rows of the ids.
    pub deleted: Vec<String>,
    /// Files holding rows of the ids that stay, with why: still active (rows that arrived after
    /// the erasure), or named by a staged link the committer has still to commit.
    pub kept: Vec<(String, String)>,
    /// Staged links (most kept as their stream's newest after their commit) whose statistics
    /// named an id as a file's smallest or largest value, rewritten without them.
    pub links_rewritten: usize,
    /// The scan after the deletions: what still holds rows of the ids.
    pub after: FolderScan,
    /// The ids the deleted files held (never written out).
    #[serde(skip)]
    pub ids_found: BTreeSet<String>,
}

/// Deletes from the table's storage every Parquet data file that holds rows of `erasure` and no
/// reader of the current version needs: files the log removed (whatever removed them: this
/// erasure, a compaction of older versions) and orphans older than [`ORPHAN_AGE`]. Active files
/// and files of staged links not committed yet stay, and are listed. Then scans the folder again.
pub(crate) async fn purge(uri: &str, table: &mut DeltaTable, erasure: &Erasure) -> Result<Purge, LakeError> {
    crate::create::reload(uri, table).await?;
    let before = scan_folder(uri, table, erasure).await?;
    // The links first, then the table read again: a link committed (and deleted) while the folder
    // was scanned has its files in the version read now, and a link staged after the listing names
    // only files younger than the orphan age.
    let store = table.object_store();
    let staged = crate::staging::staged_files(uri, &store).await?;
    table
        .update_incremental(None)
        .await
        .map_err(|e| LakeError::delta(uri, e))?;
    let snapshot = table.snapshot().map_err(|e| LakeError::delta(uri, e))?;
    let active: HashSet<String> = snapshot.log_data().iter().map(|v| v.path().into_owned()).collect();
    let removed: HashSet<String> = snapshot
        .all_tombstones(&*table.log_store())
        .map_ok(|t| t.path().into_owned())
        .try_collect()
        .await
        .map_err(|e| LakeError::delta(uri, e))?;
    let orphan_before = chrono::Utc::now() - ORPHAN_AGE;
    let mut purge = Purge::default();
    let mut holding: Vec<(&String, &Holding)> = before.holding_since.iter().collect();
    holding.sort_by(|a, b| a.0.cmp(b.0));
    for (file, Holding { modified, ids }) in holding {
        let why_kept = if active.contains(file) {
            Some("active in the table: rows that arrived after the erasure")
        } else if removed.contains(file) {
            // Committed, then removed: a link that still names it is behind its stream's
            // position, and no committer brings it back.
            None
        } else if staged.contains(file) {
            Some("named by a staged link: erase again once the committer has committed it")
        } else if *modified > orphan_before {
            Some("in no version yet and recent: a writer may be about to stage it")
        } else {
            None
        };
        if let Some(why) = why_kept {
            purge.kept.push((file.clone(), why.to_owned()));
            continue;
        }
        match store.delete(&Path::from(file.as_str())).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {
                purge.deleted.push(file.clone());
                purge.ids_found.extend(ids.iter().cloned());
            }
            Err(e) => {
                return Err(LakeError::Object {
                    uri: uri.to_owned(),
                    action: "delete",
                    object: file.clone(),
                    reason: e.to_string(),
                });
            }
        }
    }
    purge.links_rewritten = crate::staging::forget_stats(uri, &store, |stats| erasure.mentioned_in(stats)).await?;
    info!(
        table = uri,
        deleted = purge.deleted.len(),
        kept = purge.kept.len(),
        links_rewritten = purge.links_rewritten,
        "purged"
    );
    purge.after = scan_folder(uri, table, erasure).await?;
    Ok(purge)
}

/// What [`Table::scan_folder`](crate::Table::scan_folder) found: every Parquet file under a table's folder, active or not.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FolderScan {
    /// Parquet files read (data files of every version and staged files; not the log's
    /// checkpoints).
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Files that still hold rows of the ids, with their number of such rows.
    pub holding: HashMap<String, u64>,
    /// The same files with when each was last modified and the ids they hold, for [`purge`].
    #[serde(skip)]
    holding_since: HashMap<String, Holding>,
}

/// A file that holds rows of the ids: when it was last modified, and which ids.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Holding {
    modified: chrono::DateTime<chrono::Utc>,
    ids: BTreeSet<String>,
}

/// Reads every Parquet data file under `table`'s folder (whatever version names it, staged files
/// included) for rows of `erasure`.
pub(crate) async fn scan_folder(uri: &str, table: &DeltaTable, erasure: &Erasure) -> Result<FolderScan, LakeError> {
    let store = table.object_store();
    let objects: Vec<object_store::ObjectMeta> = store
        .list(None)
        .try_filter(|meta| {
            let name = meta.location.as_ref();
            futures::future::ready(name.ends_with(".parquet") && !name.starts_with("_delta_log/"))
        })
        .try_collect()
        .await
        .map_err(|e| LakeError::Object {
            uri: uri.to_owned(),
            action: "list",
            object: String::new(),
            reason: e.to_string(),
        })?;
    let mut scan = FolderScan {
        files: objects.len(),
        bytes: objects.iter().map(|o| o.size).sum(),
        ..FolderScan::default()
    };
    let counts: Vec<(String, u64, Holding)> = futures::stream::iter(objects)
        .map(|meta| {
            let store = store.clone();
            async move {
                let name = meta.location.to_string();
                let modified = meta.last_modified;
                let (rows, ids) = count_in_file(uri, store, meta.location, meta.size, erasure).await?;
                Ok::<_, LakeError>((name, rows, Holding { modified, ids }))
            }
        })
        .buffered(SCANS_AT_ONCE)
        .try_collect()
        .await?;
    for (name, rows, holding) in counts.into_iter().filter(|(_, rows, _)| *rows > 0) {
        scan.holding.insert(name.clone(), rows);
        scan.holding_since.insert(name, holding);
    }
    Ok(scan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{BinaryArray, StringArray};
    use arrow::datatypes::{Field, Fields, Schema};

    fn batch() -> RecordBatch {
        let params = StructArray::new(
            Fields::from(vec![Field::new("device_id", DataType::Utf8, true)]),
            vec![Arc::new(StringArray::from(vec![Some("a"), Some("b"), None, Some("a")])) as ArrayRef],
            Some(vec![true, true, true, false].into()),
        );
        let schema = Schema::new(vec![
            Field::new("eventParams", params.data_type().clone(), true),
            Field::new("gameId", DataType::Utf8, true),
            Field::new("data", DataType::Binary, true),
        ]);
        RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(params),
                Arc::new(StringArray::from(vec![Some("g1"), Some("g2"), Some("g1"), None])),
                Arc::new(BinaryArray::from(vec![
                    Some(b"{}".as_ref()),
                    Some(b"{}".as_ref()),
                    Some(br#"{"eventParams":{"device_id":"b"}}"#.as_ref()),
                    None,
                ])),
            ],
        )
        .unwrap()
    }

    fn hits(erasure: &Erasure) -> Vec<bool> {
        erasure.rows(&batch()).iter().map(|v| v.unwrap_or(false)).collect()
    }

    #[test]
    fn equal_values_are_found_through_structs_and_a_null_struct_holds_none() {
        let erasure = Erasure::new(["a"]).equals("eventParams.device_id");
        assert_eq!(hits(&erasure), [true, false, false, false]);
    }

    #[test]
    fn a_namespace_keeps_other_games_rows_and_takes_rows_without_one() {
        let erasure = Erasure::new(["b"])
            .equals("eventParams.device_id")
            .within("gameId", "g1");
        assert_eq!(hits(&erasure), [false, false, false, false]);
        let erasure = Erasure::new(["b"]).mentions("data").within("gameId", "g1");
        assert_eq!(hits(&erasure), [false, false, true, false]);
    }

    #[test]
    fn mentions_need_the_id_as_a_whole_json_string() {
        assert_eq!(hits(&Erasure::new(["b"]).mentions("data")), [false, false, true, false]);
        assert_eq!(hits(&Erasure::new(["device"]).mentions("data")), [false; 4]);
        assert!(!Erasure::new([""]).mentioned_in(br#""""#));
    }

    #[test]
    fn the_ids_found_are_those_of_the_rows_that_go() {
        let erasure = Erasure::new(["a", "b", "z"])
            .equals("eventParams.device_id")
            .mentions("data")
            .within("gameId", "g1");
        let gone = erasure.rows(&batch());
        let mut found = BTreeSet::new();
        erasure.ids_of(&batch(), &gone, &mut found);
        // Row 1 holds b in game g2: kept, and b counts only for the raw record of row 2.
        assert_eq!(found, BTreeSet::from(["a".to_owned(), "b".to_owned()]));
        let only_other_game = Erasure::new(["b"])
            .equals("eventParams.device_id")
            .within("gameId", "g1");
        let mut found = BTreeSet::new();
        only_other_game.ids_of(&batch(), &only_other_game.rows(&batch()), &mut found);
        assert!(found.is_empty());
        assert_eq!(erasure.ids_mentioned_in(br#"{"x":"b","y":["a"]}"#).len(), 2);
    }

    #[test]
    fn missing_columns_match_nothing() {
        assert_eq!(hits(&Erasure::new(["a"]).equals("nope.device_id")), [false; 4]);
    }
}
