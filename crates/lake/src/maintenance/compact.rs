//! Compaction of closed partitions: planning (bin-packing of small files) and rewriting, with
//! removal of duplicate rows by a key column. See [`crate::maintenance`] for the rules.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use arrow::compute::filter_record_batch;
use arrow::record_batch::RecordBatch;
use chrono::{DateTime, NaiveDate, TimeDelta, Utc};
use deltalake::DeltaTable;
use deltalake::kernel::{Action, Add, CommitInfo, DataType, LogicalFileView};
use deltalake::parquet::arrow::async_reader::ParquetRecordBatchStreamBuilder;
use deltalake::protocol::DeltaOperation;
use deltalake::writer::{DeltaWriter as _, RecordBatchWriter, WriteMode};
use futures::TryStreamExt as _;
use indexmap::IndexMap;
use tracing::{debug, info, warn};

use super::dedup::{Drops, KeyFile, find_duplicates, key_columns, key_implies};
use super::{MaintenanceError, now, past};
use crate::commit::{Commit, CommitFailure, Guard, Landed, Retry, commit, decode_path, delete_files};
use crate::conform::{conform, without_partitions};
use crate::files::{StoreFile, WRITTEN_SINCE_TAG, written_at};
use crate::partitions::{date_partition_column, partition_date, partition_label};
use crate::txns::Txns;

/// Tag of the files written by a deduplicating compaction, with the key column as its value: such
/// a file has no row whose key is in an earlier file of its partition. Files without it (fresh
/// appends) are rewritten by the next compaction of their closed partition.
pub const DEDUP_TAG: &str = "lakelog.deduplicatedBy";

/// The `lakelog.operation` of a commit that packed small files (see [`Settle`]; a compaction of
/// a closed partition says `compaction`).
pub const PACKING: &str = "packing";

/// Whether the commit of `info` is a packing ([`PACKING`]).
pub fn is_packing(info: &CommitInfo) -> bool {
    info.info.get("lakelog.operation").and_then(|v| v.as_str()) == Some(PACKING)
}

/// Default target size of compacted files: 128 MiB.
pub const DEFAULT_TARGET_FILE_SIZE: u64 = 128 << 20;

/// Default grace period after a partition's date has ended before it is compacted.
pub const DEFAULT_GRACE: TimeDelta = TimeDelta::hours(48);

/// Default memory for the keys of new rows while duplicates are looked for: 512 MiB, about 14.7
/// million keys a pass (see `dedup::entries_within`).
pub const DEFAULT_DEDUP_MEMORY: u64 = 512 << 20;

/// Rows per batch read from the files being compacted.
const BATCH_ROWS: usize = 8192;

/// How [`Table::compact`](crate::Table::compact) runs.
#[derive(Debug, Clone)]
pub struct CompactOptions {
    /// Files are packed into new files of about this many bytes; files of at least this size are
    /// left alone (unless they need deduplication). Default 128 MiB.
    pub target_file_size: u64,
    /// A partition is compacted once its date ended this long ago (a file of a table without a
    /// date partition column, once it is this old). Default 48 hours.
    pub grace: TimeDelta,
    /// Drop rows whose key was already seen in the partition (the first is kept): one column,
    /// or several joined by `+` (`gameId+eventId`), whose values together are the key.
    /// Rows whose key columns are all null are all kept.
    pub dedup_key: Option<String>,
    /// Bytes the keys of new rows may take while duplicates are looked for; more new rows than
    /// fit are taken in several passes. Default [`DEFAULT_DEDUP_MEMORY`].
    pub dedup_memory: u64,
    /// Compact the closed partitions (what the maintenance pass does). Default `true`.
    pub closed_partitions: bool,
    /// Also pack the small files of the *open* partitions: files smaller than this are
    /// packed into files of about [`Self::target_file_size`], never deduplicated (that waits for
    /// the partition to close, when every late copy is in) and committed as `OPTIMIZE` with
    /// `dataChange = false`. Without [`Self::closed_partitions`], the small files written within
    /// the grace into closed partitions (late events, a backfill) are packed too; files of a
    /// deduplicating compaction never are. A writer does this between its commits ([`Settle`])
    /// so that the files a day of small appends leaves do not make every commit slower.
    /// Default `None`.
    pub open_files_below: Option<u64>,
    /// The time that decides which partitions are closed.
    pub now: DateTime<Utc>,
    /// No bin is started after this instant.
    pub stop_at: Option<Instant>,
    /// Plan only: nothing is read, written or committed.
    pub dry_run: bool,
}

impl Default for CompactOptions {
    fn default() -> Self {
        Self {
            target_file_size: DEFAULT_TARGET_FILE_SIZE,
            grace: DEFAULT_GRACE,
            dedup_key: None,
            dedup_memory: DEFAULT_DEDUP_MEMORY,
            closed_partitions: true,
            open_files_below: None,
            now: now(),
            stop_at: None,
            dry_run: false,
        }
    }
}

/// When a writer packs the small files it wrote between its commits: once the table has at
/// least [`Settle::files`] active files and that many small ones in open partitions or written
/// within the grace into closed ones.
///
/// Every commit costs time in proportion to the table's active files: delta-rs replays their
/// list after each commit, and checkpoints write them all. The
/// maintenance pass compacts a partition only when it has closed, so without this a sink that
/// commits every second adds 86,400 files a day per shard and its commits slow down all day.
/// Packing is [`CompactOptions::open_files_below`]: guarded like every compaction (a bin whose
/// files another writer removed is dropped), never deduplicating, `dataChange = false`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settle {
    /// Small files to pack that start a packing.
    pub files: usize,
    /// Files smaller than this are small.
    pub below: u64,
    /// Size of the packed files.
    pub target_file_size: u64,
}

impl Settle {
    /// Small files that start a packing by default: from about a thousand active files a commit
    /// costs markedly more than on a fresh table (BENCHMARKS.md, "Commit cost and table size").
    pub const DEFAULT_FILES: usize = 1000;
    /// Files below 16 MiB are small by default: a packed file of that size is left until the
    /// partition closes, so no row is rewritten again and again while its day goes on.
    pub const DEFAULT_BELOW: u64 = 16 << 20;
    /// How long after a writer's commit its packing may still start a bin: an invocation spends
    /// little of its time on packing, and the next commit packs the rest.
    pub const BUDGET: std::time::Duration = std::time::Duration::from_secs(20);

    /// Packing once `files` small files are there, with the default sizes.
    pub fn after(files: usize) -> Self {
        Self {
            files,
            ..Self::default()
        }
    }

    /// The compaction that packs, stopping new bins at `stop_at`.
    pub fn options(&self, stop_at: Option<Instant>) -> CompactOptions {
        CompactOptions {
            target_file_size: self.target_file_size,
            closed_partitions: false,
            open_files_below: Some(self.below),
            stop_at,
            ..CompactOptions::default()
        }
    }
}

impl Default for Settle {
    fn default() -> Self {
        Self {
            files: Self::DEFAULT_FILES,
            below: Self::DEFAULT_BELOW,
            target_file_size: DEFAULT_TARGET_FILE_SIZE,
        }
    }
}

/// A data file of the plan.
#[derive(Clone)]
struct DataFile {
    /// Path relative to the table, decoded.
    path: String,
    size: u64,
    modified: i64,
    rows: Option<u64>,
    /// Written by a deduplicating compaction with the plan's key.
    deduplicated: bool,
    /// Written by a deduplicating compaction, with any key: packing leaves it alone.
    compacted: bool,
    /// The file as the log has it, to remove it.
    view: LogicalFileView,
}

impl std::fmt::Debug for DataFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataFile")
            .field("path", &self.path)
            .field("size", &self.size)
            .field("modified", &self.modified)
            .field("rows", &self.rows)
            .field("deduplicated", &self.deduplicated)
            .finish()
    }
}

/// The work in one partition.
#[derive(Debug, Clone)]
pub struct PartitionPlan {
    /// `column=value` of the partition.
    pub label: String,
    /// Whether this is a packing ([`CompactOptions::open_files_below`]): small files merged,
    /// never deduplicated.
    pub packing: bool,
    /// Files of the partition that stay, whose keys count as seen when deduplicating.
    kept: Vec<DataFile>,
    /// When deduplicating a table partitioned by date: the files of the day before, whose keys
    /// count as seen too, so that a copy sent again after midnight (a client's resend, with a
    /// later time) goes as well.
    previous: Vec<DataFile>,
    /// Groups of files, each rewritten into new files and committed as one version.
    bins: Vec<Vec<DataFile>>,
}

impl PartitionPlan {
    /// Files to rewrite.
    pub fn files(&self) -> usize {
        self.bins.iter().map(Vec::len).sum()
    }

    /// Bytes of the files to rewrite.
    pub fn bytes(&self) -> u64 {
        self.bins.iter().flatten().map(|f| f.size).sum()
    }

    /// Bins (commits) of this partition.
    pub fn bins(&self) -> usize {
        self.bins.len()
    }
}

/// What compaction would do to a table.
#[derive(Debug, Clone)]
pub struct CompactionPlan {
    /// The table's partition columns.
    pub partition_columns: Vec<String>,
    /// The date partition column that decides which partitions are closed, if the table has one.
    pub date_column: Option<String>,
    /// Active data files of the table.
    pub active_files: usize,
    /// Partitions (or, without a date column, groups of files) still open.
    pub open_partitions: usize,
    /// Partitions with work, newest first (an open partition before its closed files, in a
    /// table without a date column).
    pub partitions: Vec<PartitionPlan>,
}

impl CompactionPlan {
    /// Files to rewrite.
    pub fn files(&self) -> usize {
        self.partitions.iter().map(PartitionPlan::files).sum()
    }

    /// Bytes of the files to rewrite.
    pub fn bytes(&self) -> u64 {
        self.partitions.iter().map(PartitionPlan::bytes).sum()
    }

    /// Bins (commits) to write.
    pub fn bins(&self) -> usize {
        self.partitions.iter().map(PartitionPlan::bins).sum()
    }
}

/// What one committed bin did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BinOutcome {
    /// The partition.
    pub partition: String,
    /// The table version committed.
    pub version: u64,
    /// Files removed.
    pub files_removed: usize,
    /// Bytes of the files removed.
    pub bytes_removed: u64,
    /// Files added.
    pub files_added: usize,
    /// Bytes of the files added.
    pub bytes_added: u64,
    /// Rows written to the new files.
    pub rows: u64,
    /// Duplicate rows dropped.
    pub duplicates: u64,
}

/// What [`Table::compact`](crate::Table::compact) did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactionReport {
    /// Active data files before.
    pub files_before: usize,
    /// Active data files after.
    pub files_after: usize,
    /// Partitions with work.
    pub partitions_planned: usize,
    /// Bins planned.
    pub bins_planned: usize,
    /// Bins committed.
    pub bins: Vec<BinOutcome>,
    /// Partitions left because a concurrent commit rewrote files they read.
    pub conflicts: Vec<String>,
    /// Whether the deadline stopped the work before the plan was done.
    pub stopped_early: bool,
    /// Whether this was a dry run.
    pub dry_run: bool,
}

impl CompactionReport {
    /// Files removed by all bins.
    pub fn files_removed(&self) -> usize {
        self.bins.iter().map(|b| b.files_removed).sum()
    }

    /// Files added by all bins.
    pub fn files_added(&self) -> usize {
        self.bins.iter().map(|b| b.files_added).sum()
    }

    /// Bytes read and rewritten.
    pub fn bytes_removed(&self) -> u64 {
        self.bins.iter().map(|b| b.bytes_removed).sum()
    }

    /// Duplicate rows dropped.
    pub fn duplicates(&self) -> u64 {
        self.bins.iter().map(|b| b.duplicates).sum()
    }
}

/// Told how a compaction goes, for progress bars; `()` observes nothing. Calls come from the
/// compacting task.
pub trait CompactObserver: Sync {
    /// The plan is made.
    fn planned(&self, _plan: &CompactionPlan) {}
    /// A file of `bytes` was read (and its rows written).
    fn file_read(&self, _bytes: u64) {}
    /// A bin was committed.
    fn bin_done(&self, _outcome: &BinOutcome) {}
}

impl CompactObserver for () {}

/// Plans the compaction of `table` (named `uri` in errors): its closed partitions with work,
/// newest first, each with its bins.
pub(crate) fn plan_compaction(
    uri: &str,
    table: &DeltaTable,
    options: &CompactOptions,
) -> Result<CompactionPlan, MaintenanceError> {
    let delta = |e| MaintenanceError::delta(uri, "compaction plan", e);
    let snapshot = table.snapshot().map_err(delta)?;
    let partition_columns = snapshot.metadata().partition_columns().to_vec();
    let schema = snapshot.schema();
    let date_column = date_partition_column(&partition_columns, &schema);
    for key in options.dedup_key.iter().flat_map(|k| key_columns(k)) {
        let key = &key.to_owned();
        let reason = match schema.field(key) {
            None => Some("no such column".to_owned()),
            Some(_) if partition_columns.contains(key) => Some("is a partition column".to_owned()),
            Some(f) if !matches!(f.data_type(), DataType::Primitive(_)) => {
                Some(format!("is a {:?}, expected a primitive column", f.data_type()))
            }
            Some(_) => None,
        };
        if let Some(reason) = reason {
            return Err(MaintenanceError::DedupKey {
                uri: uri.to_owned(),
                key: key.clone(),
                reason,
            });
        }
    }
    let closed_before_ms = (options.now - options.grace).timestamp_millis();
    let closed_date = |date: NaiveDate| {
        date.succ_opt()
            .and_then(|next| next.and_hms_opt(0, 0, 0))
            .is_some_and(|end| end.and_utc() + options.grace <= options.now)
    };

    // Files of each partition, by partition values in partition column order.
    let mut partitions: BTreeMap<Vec<Option<String>>, (String, Vec<DataFile>)> = BTreeMap::new();
    let mut active_files = 0;
    for view in snapshot.log_data().iter() {
        active_files += 1;
        if view.deletion_vector_descriptor().is_some() {
            return Err(MaintenanceError::Unsupported {
                uri: uri.to_owned(),
                reason: format!("file {} has a deletion vector", view.path()),
            });
        }
        let values = view.partition_values_map();
        let key: Vec<Option<String>> = partition_columns
            .iter()
            .map(|c| values.get(c).cloned().flatten())
            .collect();
        let tag = dedup_tag(&view);
        let deduplicated = tag
            .as_deref()
            .zip(options.dedup_key.as_deref())
            .is_some_and(|(tag, key)| key_implies(tag, key));
        let compacted = tag.is_some();
        let file = DataFile {
            path: view.path().into_owned(),
            size: u64::try_from(view.size()).unwrap_or(0),
            modified: view.modification_time(),
            rows: view.num_records().map(|n| n as u64),
            deduplicated,
            compacted,
            view,
        };
        partitions
            .entry(key)
            .or_insert_with(|| (partition_label(&partition_columns, &values), Vec::new()))
            .1
            .push(file);
    }
    let column_mapping = snapshot.metadata().configuration().get("delta.columnMapping.mode");
    if column_mapping.is_some_and(|mode| mode != "none") {
        return Err(MaintenanceError::Unsupported {
            uri: uri.to_owned(),
            reason: "the table uses column mapping".into(),
        });
    }

    let date_index = date_column
        .as_ref()
        .and_then(|d| partition_columns.iter().position(|c| c == d));
    let mut plans = Vec::new();
    let mut open_partitions = 0;
    // Newest partitions first: they are the ones read most. Taken from the end of the map, so
    // that a partition's day before (a smaller key: the same other values, an earlier date) is
    // still in it when the partition is planned.
    while let Some((key, (label, mut files))) = partitions.pop_last() {
        files.sort_by(|a, b| (a.modified, &a.path).cmp(&(b.modified, &b.path)));
        let date = date_index.and_then(|i| key[i].as_deref()).and_then(partition_date);
        let (mut closed, young): (Vec<DataFile>, Vec<DataFile>) = match date {
            Some(date) if closed_date(date) => (files, Vec::new()),
            Some(_) => (Vec::new(), files),
            // No date to go by: files are closed once they are old enough.
            None => files.into_iter().partition(|f| f.modified <= closed_before_ms),
        };
        if !young.is_empty() {
            open_partitions += 1;
        }
        if let Some(below) = options.open_files_below {
            let small = |f: &DataFile| f.size < below && !f.compacted;
            let mut packed: Vec<DataFile> = young.into_iter().filter(small).collect();
            if !options.closed_partitions {
                // Closed partitions are the maintenance pass's; what was written into them
                // within the grace (late events, a backfill) is packed as well, so that it too
                // stops weighing on every commit until then.
                let recent = std::mem::take(&mut closed).into_iter();
                packed.extend(recent.filter(|f| f.modified > closed_before_ms && small(f)));
            }
            plans.extend(plan_partition(label.clone(), packed, options, true));
        }
        if !options.closed_partitions {
            continue;
        }
        let Some(mut plan) = plan_partition(label, closed, options, false) else {
            continue;
        };
        // Deduplicating by date: the files of the day before (same other partition values).
        if let (Some(i), Some(before), true) =
            (date_index, date.and_then(|d| d.pred_opt()), options.dedup_key.is_some())
        {
            let mut previous_key = key;
            previous_key[i] = Some(before.format("%Y-%m-%d").to_string());
            if let Some((_, files)) = partitions.get(&previous_key) {
                plan.previous = files.clone();
            }
        }
        plans.push(plan);
    }
    Ok(CompactionPlan {
        partition_columns,
        date_column,
        active_files,
        open_partitions,
        partitions: plans,
    })
}

/// Bins the files of one partition (a closed one's, or the small files a packing merges): next-fit in
/// the order the files were written, so a bin holds files written close in time. A bin is
/// rewritten when it has two files or more, or, when deduplicating (closed partitions only), a
/// file not yet deduplicated.
fn plan_partition(
    label: String,
    files: Vec<DataFile>,
    options: &CompactOptions,
    packing: bool,
) -> Option<PartitionPlan> {
    let dedup = !packing && options.dedup_key.is_some();
    let target = options.target_file_size.max(1);
    let mut kept = Vec::new();
    let mut bins: Vec<Vec<DataFile>> = Vec::new();
    let mut current: Vec<DataFile> = Vec::new();
    let mut current_size = 0u64;
    for file in files {
        let candidate = file.size < target || (dedup && !file.deduplicated);
        if !candidate {
            kept.push(file);
            continue;
        }
        if !current.is_empty() && current_size + file.size > target {
            bins.push(std::mem::take(&mut current));
            current_size = 0;
        }
        current_size += file.size;
        current.push(file);
    }
    if !current.is_empty() {
        bins.push(current);
    }
    let (rewrite, leave): (Vec<_>, Vec<_>) = bins
        .into_iter()
        .partition(|bin| bin.len() > 1 || (dedup && bin.iter().any(|f| !f.deduplicated)));
    kept.extend(leave.into_iter().flatten());
    (!rewrite.is_empty()).then_some(PartitionPlan {
        label,
        packing,
        kept,
        previous: Vec::new(),
        bins: rewrite,
    })
}

#[allow(deprecated)] // The only accessor of a file's tags; see `LogicalFileView::add_action`.
fn dedup_tag(view: &LogicalFileView) -> Option<String> {
    view.add_action().tags.as_ref()?.get(DEDUP_TAG).cloned().flatten()
}

/// Compacts the closed partitions of `table` (named `uri` in errors and logs), newest first, bin
/// by bin, until the plan is done or `options.stop_at` passes. Each bin is one commit.
pub(crate) async fn compact(
    uri: &str,
    table: &mut DeltaTable,
    options: &CompactOptions,
    observer: &dyn CompactObserver,
) -> Result<CompactionReport, MaintenanceError> {
    table
        .update_incremental(None)
        .await
        .map_err(|e| MaintenanceError::delta(uri, "compaction", e))?;
    let plan = plan_compaction(uri, table, options)?;
    compact_planned(uri, table, &plan, options, observer).await
}

/// Carries out `plan`, made by [`plan_compaction`] on the version `table` holds, as [`compact`]
/// does.
pub(crate) async fn compact_planned(
    uri: &str,
    table: &mut DeltaTable,
    plan: &CompactionPlan,
    options: &CompactOptions,
    observer: &dyn CompactObserver,
) -> Result<CompactionReport, MaintenanceError> {
    observer.planned(plan);
    let mut report = CompactionReport {
        files_before: plan.active_files,
        files_after: plan.active_files,
        partitions_planned: plan.partitions.len(),
        bins_planned: plan.bins(),
        dry_run: options.dry_run,
        ..CompactionReport::default()
    };
    info!(
        table = uri,
        partitions = plan.partitions.len(),
        bins = plan.bins(),
        files = plan.files(),
        bytes = plan.bytes(),
        open_partitions = plan.open_partitions,
        "compaction planned"
    );
    if options.dry_run {
        return Ok(report);
    }
    'partitions: for partition in &plan.partitions {
        if past(options.stop_at) {
            report.stopped_early = true;
            break;
        }
        let Some(mut work) = PartitionWork::new(uri, table, partition, options).await? else {
            report.stopped_early = true;
            break;
        };
        for bin in &partition.bins {
            if past(options.stop_at) {
                report.stopped_early = true;
                break 'partitions;
            }
            match work.rewrite(table, bin, observer).await? {
                Some(outcome) => {
                    report.files_after = report.files_after + outcome.files_added - outcome.files_removed;
                    observer.bin_done(&outcome);
                    report.bins.push(outcome);
                }
                None => {
                    report.conflicts.push(partition.label.clone());
                    continue 'partitions;
                }
            }
        }
    }
    info!(
        table = uri,
        bins = report.bins.len(),
        files_removed = report.files_removed(),
        files_added = report.files_added(),
        duplicates = report.duplicates(),
        conflicts = report.conflicts.len(),
        stopped_early = report.stopped_early,
        "compaction done"
    );
    Ok(report)
}

impl DataFile {
    fn key_file(&self) -> KeyFile {
        KeyFile {
            path: self.path.clone(),
            location: self.view.object_store_path(),
            size: self.size,
            rows: self.rows,
        }
    }
}

/// The state of one partition's compaction: the duplicates found and the files the work read.
struct PartitionWork<'a> {
    uri: &'a str,
    partition: &'a PartitionPlan,
    options: &'a CompactOptions,
    /// The rows to drop, by new file (see [`find_duplicates`]); `None` when not deduplicating.
    drops: Option<Drops>,
    /// The index among the new files of each file that is one.
    new_files: HashMap<String, usize>,
    /// Files read so far that are not rewritten yet: they must still be active when a bin
    /// commits, or a concurrent commit may have changed what was seen.
    read: Vec<String>,
}

impl<'a> PartitionWork<'a> {
    /// The work of `partition`, with its duplicates when deduplicating by `options.dedup_key`;
    /// `None` when `options.stop_at` passed while they were looked for.
    async fn new(
        uri: &'a str,
        table: &DeltaTable,
        partition: &'a PartitionPlan,
        options: &'a CompactOptions,
    ) -> Result<Option<Self>, MaintenanceError> {
        let all = partition
            .previous
            .iter()
            .chain(&partition.kept)
            .chain(partition.bins.iter().flatten());
        let mut work = Self {
            uri,
            partition,
            options,
            drops: None,
            new_files: HashMap::new(),
            read: all.map(|f| f.path.clone()).collect(),
        };
        let Some(key) = options.dedup_key.as_ref().filter(|_| !partition.packing) else {
            return Ok(Some(work));
        };
        let (new, tagged): (Vec<&DataFile>, Vec<&DataFile>) =
            partition.bins.iter().flatten().partition(|f| !f.deduplicated);
        let reference: Vec<KeyFile> = partition
            .previous
            .iter()
            .chain(&partition.kept)
            .chain(tagged)
            .map(DataFile::key_file)
            .collect();
        let new_keys: Vec<KeyFile> = new.iter().map(|f| f.key_file()).collect();
        let found = find_duplicates(
            uri,
            &table.object_store(),
            key,
            &new_keys,
            &reference,
            options.dedup_memory,
            options.stop_at,
        )
        .await?;
        let Some(drops) = found else {
            return Ok(None);
        };
        work.drops = Some(drops);
        work.new_files = new.iter().enumerate().map(|(i, f)| (f.path.clone(), i)).collect();
        Ok(Some(work))
    }

    fn read_error(&self, file: &str, reason: impl ToString) -> MaintenanceError {
        MaintenanceError::ReadFile {
            uri: self.uri.to_owned(),
            file: file.to_owned(),
            reason: reason.to_string(),
        }
    }

    async fn open(
        &self,
        table: &DeltaTable,
        file: &DataFile,
    ) -> Result<ParquetRecordBatchStreamBuilder<StoreFile>, MaintenanceError> {
        let reader = StoreFile {
            store: table.object_store(),
            path: file.view.object_store_path(),
            size: file.size,
        };
        ParquetRecordBatchStreamBuilder::new(reader)
            .await
            .map_err(|e| self.read_error(&file.path, e))
    }

    /// Drops the rows of `batch` (rows `first..` of `file`) found to be duplicates.
    fn deduplicate(&self, file: &str, first: u64, batch: RecordBatch) -> Result<(RecordBatch, u64), MaintenanceError> {
        let (Some(drops), Some(&index)) = (&self.drops, self.new_files.get(file)) else {
            return Ok((batch, 0));
        };
        let Some(keep) = drops.keep(index, first, batch.num_rows()) else {
            return Ok((batch, 0));
        };
        let dropped = keep.false_count() as u64;
        let kept = filter_record_batch(&batch, &keep).map_err(|e| self.read_error(file, e))?;
        Ok((kept, dropped))
    }

    /// Rewrites one bin and commits it. `None` when a concurrent commit removed a file this
    /// partition's work read: nothing of the bin is committed, and the partition is left for the
    /// next run.
    async fn rewrite(
        &mut self,
        table: &mut DeltaTable,
        bin: &[DataFile],
        observer: &dyn CompactObserver,
    ) -> Result<Option<BinOutcome>, MaintenanceError> {
        let uri = self.uri;
        let delta = |e| MaintenanceError::delta(uri, "compaction", e);
        let values: IndexMap<String, _> = bin[0]
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
        let mut writer = RecordBatchWriter::for_table(table)
            .map_err(delta)?
            .with_target_file_size(self.options.target_file_size);
        // Files written before the schema grew are read into the current one.
        let file_schema = without_partitions(&writer.arrow_schema(), values.keys());
        let mut rows_read = 0u64;
        let mut duplicates = 0u64;
        let written = async {
            for file in bin {
                let mut stream = self
                    .open(table, file)
                    .await?
                    .with_batch_size(BATCH_ROWS)
                    .build()
                    .map_err(|e| self.read_error(&file.path, e))?;
                let mut file_rows = 0u64;
                while let Some(batch) = stream.try_next().await.map_err(|e| self.read_error(&file.path, e))? {
                    let first = file_rows;
                    file_rows += batch.num_rows() as u64;
                    let (batch, dropped) = self.deduplicate(&file.path, first, batch)?;
                    duplicates += dropped;
                    if batch.num_rows() > 0 {
                        let batch = conform(batch, &file_schema).map_err(delta)?;
                        writer
                            .write_partition(batch, &values, WriteMode::Default)
                            .await
                            .map_err(delta)?;
                    }
                }
                if let Some(expected) = file.rows
                    && expected != file_rows
                {
                    return Err(self.read_error(&file.path, format!("holds {file_rows} rows, the log says {expected}")));
                }
                rows_read += file_rows;
                observer.file_read(file.size);
            }
            writer.flush().await.map_err(delta)
        }
        .await;
        let mut adds = match written {
            Ok(adds) => adds,
            Err(e) => {
                writer.reset();
                return Err(e);
            }
        };
        let store = table.object_store();
        let rows_written: u64 = adds.iter().map(add_rows).sum();
        let expected = rows_read - duplicates;
        if rows_written != expected {
            delete_files(&store, &adds).await;
            return Err(MaintenanceError::RowCount {
                uri: uri.to_owned(),
                partition: self.partition.label.clone(),
                written: rows_written,
                expected,
            });
        }
        let data_change = duplicates > 0;
        let mut actions: Vec<Action> = Vec::with_capacity(bin.len() + adds.len());
        for file in bin {
            actions.push(Action::Remove(file.view.remove_action(data_change)));
        }
        let written_since = bin.iter().map(|f| written_at(&f.view)).min();
        for add in &mut adds {
            add.data_change = data_change;
            if let Some(since) = written_since {
                add.tags
                    .get_or_insert_with(HashMap::new)
                    .insert(WRITTEN_SINCE_TAG.to_owned(), Some(since.to_string()));
            }
            // An open partition's files are packed, not deduplicated: they stay untagged.
            if let Some(key) = self.options.dedup_key.as_ref().filter(|_| !self.partition.packing) {
                add.tags
                    .get_or_insert_with(HashMap::new)
                    .insert(DEDUP_TAG.to_owned(), Some(key.clone()));
            }
        }
        actions.extend(adds.iter().cloned().map(Action::Add));
        let operation = if data_change {
            DeltaOperation::Delete {
                predicate: Some(format!(
                    "{} duplicates of earlier rows in {}",
                    self.options.dedup_key.as_deref().unwrap_or_default(),
                    self.partition.label
                )),
            }
        } else {
            DeltaOperation::Optimize {
                predicate: Some(self.partition.label.clone()),
                target_size: i64::try_from(self.options.target_file_size).unwrap_or(i64::MAX),
            }
        };
        let metadata = [
            (
                "lakelog.operation".to_owned(),
                serde_json::json!(if self.partition.packing { PACKING } else { "compaction" }),
            ),
            ("lakelog.partition".to_owned(), serde_json::json!(self.partition.label)),
            ("lakelog.duplicatesRemoved".to_owned(), serde_json::json!(duplicates)),
        ];
        let must_be_active: Vec<&str> = self.read.iter().map(String::as_str).collect();
        // A bin started before `stop_at` may finish its commit a little after it: a bin killed by
        // the Lambda's own deadline loses nothing (its files are in no version), but its work.
        let retry = Retry::until(match self.options.stop_at {
            Some(stop_at) => stop_at.max(Instant::now() + Duration::from_secs(30)),
            None => Instant::now() + Retry::DEFAULT_BUDGET,
        });
        let version = match commit_rewrite(uri, table, actions, operation, metadata, &must_be_active, &retry).await {
            Ok(Some(version)) => version,
            Ok(None) => {
                warn!(table = uri, partition = %self.partition.label, "a concurrent commit rewrote files of this partition; left for the next run");
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        // The new files hold the rows whose keys the next bins' duplicates were found against.
        let rewritten: HashSet<&str> = bin.iter().map(|f| f.path.as_str()).collect();
        self.read.retain(|path| !rewritten.contains(path.as_str()));
        self.read.extend(adds.iter().map(|a| decode_path(&a.path)));
        let outcome = BinOutcome {
            partition: self.partition.label.clone(),
            version,
            files_removed: bin.len(),
            bytes_removed: bin.iter().map(|f| f.size).sum(),
            files_added: adds.len(),
            bytes_added: adds.iter().map(|a| u64::try_from(a.size).unwrap_or(0)).sum(),
            rows: rows_written,
            duplicates,
        };
        debug!(table = uri, ?outcome, "bin committed");
        Ok(Some(outcome))
    }
}

/// Rows of a new file, from its statistics.
fn add_rows(add: &Add) -> u64 {
    add.stats
        .as_deref()
        .and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok())
        .and_then(|s| s.get("numRecords").and_then(serde_json::Value::as_u64))
        .unwrap_or(0)
}

/// Commits `actions` as the version after the newest one, provided every file of
/// `must_be_active` is active in that newest version; tried again while other writers commit
/// first or the store fails, until `retry`'s deadline. `Ok(None)` when a file is no longer
/// active. No retries inside delta-rs: its conflict checker does not see two compactions removing
/// the same file without data change, so every try is checked here, on the version it must
/// follow. The outcome is read from the log: a bin whose commit landed is never taken for one a
/// competitor beat, and its new files are deleted only when it did not land.
async fn commit_rewrite(
    uri: &str,
    table: &mut DeltaTable,
    actions: Vec<Action>,
    operation: DeltaOperation,
    metadata: [(String, serde_json::Value); 3],
    must_be_active: &[&str],
    retry: &Retry,
) -> Result<Option<u64>, MaintenanceError> {
    let to_commit = Commit {
        uri,
        actions,
        transactions: Vec::new(),
        operation,
        metadata: metadata.to_vec(),
        guard: Guard::Active(must_be_active),
        keep_files: false,
    };
    // A rewrite records no `txn`: no memory of them to keep.
    match commit(table, &Txns::default(), to_commit, retry).await {
        Ok(Landed::Version { version, .. }) => Ok(Some(version)),
        Ok(Landed::Refused { reason }) => {
            debug!(table = uri, %reason, "file no longer active");
            Ok(None)
        }
        Err(CommitFailure::NotCommitted(e) | CommitFailure::Unknown(e)) => Err(MaintenanceError::Lake(e)),
    }
}
