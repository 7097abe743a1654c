//! Table maintenance: compaction of small files (with removal of duplicate rows), checkpoints,
//! expired log cleanup and VACUUM, for the scheduled `maintenance-lambda` function and the
//! `lakelog optimize|vacuum|checkpoint` commands, which run the same code.
//!
//! Tables fed by many small appends accumulate small files; readers then spend their time opening
//! files instead of reading rows. [`Table::compact`](crate::Table::compact) rewrites the small files of *closed* partitions into
//! files near a target size:
//!
//! * A partition is closed when its partition date (the table's `date` partition column, read
//!   from the table's metadata: `request_date` for access logs, `eventDate` for game events) ended
//!   longer ago than a grace period. Tables without a date partition column (the rejects table)
//!   count a file as closed once it is older than the grace period. Appends go to the open
//!   partitions, and Delta appends never touch existing files, so compaction does not race the
//!   appenders; even a late append into a closed partition only adds a file, which the next run
//!   picks up.
//! * Each closed partition's small files are bin-packed, in the order they were written, into
//!   bins of at most the target size; every bin of two or more files is read with the parquet
//!   reader, written back through delta-rs' [`RecordBatchWriter`](deltalake::writer::RecordBatchWriter)
//!   (statistics included) and committed as one Delta version that removes the old files and adds
//!   the new ones.
//! * With a deduplication key (`gameId+eventId` for game events), rows whose key was already seen
//!   in the partition (or, partitioned by date, on the day before) are dropped. Files written by a
//!   deduplicating compaction are tagged ([`DEDUP_TAG`]) and hold each key once; any untagged file
//!   of a closed partition is rewritten, its rows dropped when their key is in a tagged file or in
//!   an earlier untagged row, so late duplicates are removed too. The keys of the untagged rows are
//!   held as fingerprints within [`CompactOptions::dedup_memory`], in several passes when they do
//!   not fit: memory does not grow with the partition.
//! * A bin without dropped rows is committed as `OPTIMIZE` with `dataChange = false`: readers,
//!   streaming ones included, see the same rows. A bin that dropped duplicates changed the table's
//!   rows, so it is committed as a `DELETE` with `dataChange = true` and the number of rows removed
//!   in the commit info.
//! * Each commit first checks, against the table version it is written on top of, that every file
//!   the bin read (its own files, the partition's files whose keys were used for deduplication, and
//!   the files of the bins committed before it) is still active, and is then written as exactly the
//!   next version (S3 conditional write). A concurrent maintenance run that rewrote the same files
//!   makes the check fail: the bin is dropped, its new files deleted, and nothing is lost or
//!   duplicated. Concurrent appends only add files and never fail the check.
//! * Open partitions are left to the writers: a writer packs their small files between its
//!   commits ([`Settle`], [`CompactOptions::open_files_below`]) into files of the target size,
//!   never deduplicating, as `OPTIMIZE` with `dataChange = false`, so that a day of small commits
//!   does not make each commit slower. It packs the small files written within the grace into
//!   closed partitions too (late events, a backfill), but never a deduplicated file. Files packed
//!   this way are untagged, so the partition's compaction at close deduplicates them like any
//!   other.
//! * Work stops starting new bins when a deadline passes (the Lambda's remaining time less a
//!   reserve); every committed bin is complete, and the next run finds the rest still to do.
//!
//! [`Table::checkpoint`](crate::Table::checkpoint) writes a checkpoint of the current version (when the last one is older) and
//! deletes log files older than `delta.logRetentionDuration` that the checkpoint makes
//! unnecessary. [`Table::vacuum`](crate::Table::vacuum) deletes data files that were removed longer ago than the retention
//! (at least 7 days unless forced) and files that no commit references, so time travel within the
//! retention keeps working.

use std::time::Instant;

use chrono::{DateTime, TimeDelta, Utc};
use deltalake::DeltaTable;
use deltalake::DeltaTableBuilder;
use deltalake::checkpoints::{cleanup_metadata, create_checkpoint};
use deltalake::operations::vacuum::VacuumMode;
use futures::{StreamExt as _, TryStreamExt as _};
use object_store::ObjectStoreExt as _;
use tracing::{info, warn};

use crate::commit::Retry;
use crate::storage::{StorageConfig, table_url};

mod compact;
mod dedup;
#[cfg(test)]
mod tests;

pub use self::compact::{
    BinOutcome, CompactObserver, CompactOptions, CompactionPlan, CompactionReport, DEDUP_TAG, DEFAULT_DEDUP_MEMORY,
    PACKING, PartitionPlan, Settle, is_packing,
};
pub(crate) use self::compact::{compact, compact_planned, plan_compaction};
pub use crate::error::MaintenanceError;
pub use crate::files::WRITTEN_SINCE_TAG;

/// The shortest VACUUM retention accepted without `force`: files removed less than 7 days ago
/// may still be read by running queries and by time travel.
pub const MIN_VACUUM_RETENTION: TimeDelta = TimeDelta::days(7);

/// What [`Table::checkpoint`](crate::Table::checkpoint) did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckpointReport {
    /// The table version checkpointed (or already checkpointed).
    pub version: u64,
    /// Whether a new checkpoint was written (false: the last one is of this version already).
    pub created: bool,
    /// Log files deleted because they are older than `delta.logRetentionDuration` and covered by a
    /// checkpoint.
    pub logs_removed: usize,
}

/// Writes a checkpoint of the table's current version unless the last checkpoint is of that
/// version, then, with `cleanup_logs`, deletes expired log files (older than the table's
/// `delta.logRetentionDuration` and older than a checkpoint, so every version within the retention
/// can still be loaded).
pub(crate) async fn checkpoint(
    uri: &str,
    table: &mut DeltaTable,
    cleanup_logs: bool,
) -> Result<CheckpointReport, MaintenanceError> {
    table
        .update_incremental(None)
        .await
        .map_err(|e| MaintenanceError::delta(uri, "checkpoint", e))?;
    let version = table
        .version()
        .ok_or_else(|| MaintenanceError::delta(uri, "checkpoint", deltalake::DeltaTableError::NotInitialized))?;
    let last = crate::checkpoint::last_checkpoint_version(table).await;
    let created = last != Some(version);
    if created {
        create_checkpoint(table, None)
            .await
            .map_err(|e| MaintenanceError::delta(uri, "checkpoint", e))?;
        info!(table = uri, version, "checkpoint written");
    }
    let logs_removed = if cleanup_logs {
        // The position ledger first, at this version: the commits it would need to bring an
        // expired position forward are about to go (see `crate::positions`).
        let streams = crate::staging::streams(uri, &table.object_store()).await?;
        crate::positions::save_ledger(uri, table, &crate::txns::Txns::default(), &streams, true).await?;
        cleanup_metadata(table, None)
            .await
            .map_err(|e| MaintenanceError::delta(uri, "expired log cleanup", e))?
    } else {
        0
    };
    Ok(CheckpointReport {
        version,
        created,
        logs_removed,
    })
}

/// How [`Table::vacuum`](crate::Table::vacuum) runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VacuumOptions {
    /// Data files removed from the table longer ago than this are deleted. Default 7 days.
    pub retention: TimeDelta,
    /// Accept a retention below [`MIN_VACUUM_RETENTION`] and the table's
    /// `delta.deletedFileRetentionDuration`.
    pub force: bool,
    /// Only list what would be deleted.
    pub dry_run: bool,
    /// Also delete files that no commit references (left by writers that failed before their
    /// commit) once they are older than the retention. Default true.
    pub full: bool,
}

impl Default for VacuumOptions {
    fn default() -> Self {
        Self {
            retention: MIN_VACUUM_RETENTION,
            force: false,
            dry_run: false,
            full: true,
        }
    }
}

/// What [`Table::vacuum`](crate::Table::vacuum) did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VacuumReport {
    /// Whether this was a dry run (nothing deleted).
    pub dry_run: bool,
    /// The files deleted (or, in a dry run, that would be).
    pub files: Vec<String>,
}

/// Files VACUUM deletes at once.
const VACUUM_DELETES_AT_ONCE: usize = 32;

/// Deletes data files that were removed from the table longer ago than the retention, and with
/// `full` unreferenced files older than it. A retention below [`MIN_VACUUM_RETENTION`] is refused
/// unless `force` is set.
pub(crate) async fn vacuum(
    uri: &str,
    table: &mut DeltaTable,
    options: &VacuumOptions,
) -> Result<VacuumReport, MaintenanceError> {
    if options.retention < MIN_VACUUM_RETENTION && !options.force {
        return Err(MaintenanceError::RetentionTooShort {
            uri: uri.to_owned(),
            hours: options.retention.num_hours(),
            minimum_hours: MIN_VACUUM_RETENTION.num_hours(),
        });
    }
    crate::create::reload(uri, table).await?;
    // No snapshot of the Iceberg view may outlive the files VACUUM deletes.
    if crate::iceberg_view::enabled() && !options.dry_run {
        let history = options
            .retention
            .to_std()
            .unwrap_or_default()
            .min(crate::iceberg_view::DEFAULT_HISTORY);
        crate::iceberg_view::mirror(uri, table, history).await?;
    }
    let mode = if options.full {
        VacuumMode::Full
    } else {
        VacuumMode::Lite
    };
    // delta-rs' plan, not its deletion: files that staged links name are in no version yet, and a
    // committer stopped longer than the retention still commits them (see `crate::staging`).
    let (_, plan) = table
        .clone()
        .vacuum()
        .with_retention_period(options.retention)
        .with_enforce_retention_duration(!options.force)
        .with_dry_run(true)
        .with_mode(mode)
        .await
        .map_err(|e| MaintenanceError::delta(uri, "vacuum", e))?;
    // The links are listed after the plan and the table read again after the links, so that a
    // link committed (and deleted) meanwhile has its files in the version read.
    let store = table.object_store();
    let staged = crate::staging::staged_files(uri, &store).await?;
    table
        .update_incremental(None)
        .await
        .map_err(|e| MaintenanceError::delta(uri, "vacuum", e))?;
    let snapshot = table
        .snapshot()
        .map_err(|e| MaintenanceError::delta(uri, "vacuum", e))?;
    let active: std::collections::HashSet<String> = snapshot
        .log_data()
        .iter()
        .map(|f| crate::commit::decode_path(&f.path()))
        .collect();
    let (files, kept): (Vec<String>, Vec<String>) = plan.files_deleted.into_iter().partition(|f| {
        let f = crate::commit::decode_path(f);
        !staged.contains(&f) && !active.contains(&f)
    });
    if !kept.is_empty() {
        info!(
            table = uri,
            files = kept.len(),
            "vacuum keeps files that staged links name"
        );
    }
    if !options.dry_run {
        // Many at once, as delta-rs' own deletion: a week of packed small files is thousands.
        futures::stream::iter(files.clone())
            .map(|file| {
                let store = store.clone();
                async move {
                    match store.delete(&deltalake::Path::from(file.as_str())).await {
                        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                        Err(e) => Err(MaintenanceError::Lake(crate::error::LakeError::Object {
                            uri: uri.to_owned(),
                            action: "deleting",
                            object: file,
                            reason: e.to_string(),
                        })),
                    }
                }
            })
            .buffer_unordered(VACUUM_DELETES_AT_ONCE)
            .try_collect::<Vec<()>>()
            .await?;
    }
    let metrics = VacuumReport {
        dry_run: options.dry_run,
        files,
    };
    info!(
        table = uri,
        files = metrics.files.len(),
        dry_run = options.dry_run,
        "vacuum"
    );
    Ok(metrics)
}

/// Everything one maintenance pass over a table does.
#[derive(Debug, Clone)]
pub struct MaintenanceOptions {
    /// Days of partitions the table keeps (see [`crate::retention`]); `None`: every day.
    pub retain_days: Option<u32>,
    /// Compaction, or `None` to skip it.
    pub compact: Option<CompactOptions>,
    /// Checkpoint (and, with `cleanup_logs`, delete expired log files).
    pub checkpoint: bool,
    /// Delete expired log files after the checkpoint.
    pub cleanup_logs: bool,
    /// VACUUM, or `None` to skip it.
    pub vacuum: Option<VacuumOptions>,
    /// Nothing is started after this instant (compaction stops between bins; checkpoint and vacuum
    /// are skipped).
    pub stop_at: Option<Instant>,
}

impl MaintenanceOptions {
    /// Every step with `compact`: compaction, a checkpoint with expired log cleanup and VACUUM
    /// with its default retention, without a deadline (what `lakelog` runs on one machine).
    pub fn all(compact: CompactOptions) -> Self {
        Self {
            retain_days: None,
            compact: Some(compact),
            checkpoint: true,
            cleanup_logs: true,
            vacuum: Some(VacuumOptions::default()),
            stop_at: None,
        }
    }
}

/// What one maintenance pass over a table did.
#[derive(Debug, Clone, Default)]
pub struct TableReport {
    /// The table.
    pub uri: String,
    /// Retention, if it ran.
    pub retention: Option<crate::retention::RetentionReport>,
    /// Compaction, if it ran.
    pub compaction: Option<CompactionReport>,
    /// Checkpoint, if it ran.
    pub checkpoint: Option<CheckpointReport>,
    /// VACUUM, if it ran.
    pub vacuum: Option<VacuumReport>,
    /// The Iceberg view brought up to date, if it was behind (see [`crate::iceberg_view`]).
    pub iceberg: Option<crate::iceberg_view::Mirrored>,
    /// Steps skipped because the deadline passed.
    pub skipped: Vec<&'static str>,
    /// Steps that failed, each with its error; the steps after a failed one still ran.
    pub failed: Vec<(&'static str, String)>,
}

impl TableReport {
    /// The failed steps as one line: `compaction: ...; vacuum: ...`; `None` when none failed.
    pub fn failure(&self) -> Option<String> {
        (!self.failed.is_empty()).then(|| {
            self.failed
                .iter()
                .map(|(step, error)| format!("{step}: {error}"))
                .collect::<Vec<_>>()
                .join("; ")
        })
    }
}

/// The share of a table's remaining time that compaction may take: the rest is left for the
/// checkpoint, log cleanup and VACUUM of the same pass, so that a long compaction never starves
/// them.
const COMPACTION_SHARE: f64 = 0.75;

/// When compaction of a pass that ends at `pass_stop_at` stops, starting `now`: at
/// [`COMPACTION_SHARE`] of the time left, or at its own `stop_at` if that is earlier.
fn compaction_stop_at(own: Option<Instant>, pass_stop_at: Option<Instant>, now: Instant) -> Option<Instant> {
    let share = pass_stop_at.map(|at| now + at.saturating_duration_since(now).mul_f64(COMPACTION_SHARE));
    match (own, share) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Runs retention, compaction, checkpoint (with expired log cleanup), the Iceberg view's
/// catch-up and VACUUM on the table at `uri`, as `options` says, stopping at the deadline.
/// Compaction gets `COMPACTION_SHARE` of the time left. A step that fails is named in [`TableReport::failed`] and the next steps run all the
/// same: a table whose compaction fails still gets its checkpoints, log cleanup and VACUUM. `Err`
/// only when the table cannot be opened.
pub async fn maintain(
    uri: &str,
    storage: &StorageConfig,
    options: &MaintenanceOptions,
    observer: &dyn CompactObserver,
) -> Result<TableReport, MaintenanceError> {
    let mut table = crate::create::open_table(uri, storage).await?;
    let mut report = TableReport {
        uri: uri.to_owned(),
        ..TableReport::default()
    };
    let past_deadline = || options.stop_at.is_some_and(|at| Instant::now() >= at);
    // First: partitions about to be dropped are not worth compacting.
    if let Some(days) = options.retain_days {
        let retry = Retry::until(
            options
                .stop_at
                .unwrap_or_else(|| Instant::now() + Retry::DEFAULT_BUDGET),
        );
        match crate::retention::expire(uri, &mut table, days, now(), &retry).await {
            Ok(done) => report.retention = Some(done),
            Err(e) => report.failed.push(("retention", e.to_string())),
        }
    }
    if let Some(compact_options) = &options.compact {
        let mut compact_options = compact_options.clone();
        compact_options.stop_at = compaction_stop_at(compact_options.stop_at, options.stop_at, Instant::now());
        match compact(uri, &mut table, &compact_options, observer).await {
            Ok(compaction) => report.compaction = Some(compaction),
            Err(e) => report.failed.push(("compaction", e.to_string())),
        }
    }
    if options.checkpoint {
        if past_deadline() {
            report.skipped.push("checkpoint");
        } else {
            match checkpoint(uri, &mut table, options.cleanup_logs).await {
                Ok(done) => report.checkpoint = Some(done),
                Err(e) => report.failed.push(("checkpoint", e.to_string())),
            }
        }
    }
    // A view behind its table (a committer stopped between the two commits, a table from a
    // release without views) is brought up to date even when nothing else commits, and the
    // catalog told of its metadata.
    if crate::iceberg_view::enabled() {
        if past_deadline() {
            report.skipped.push("iceberg");
        } else {
            let view = async {
                let mirrored = crate::iceberg_view::mirror(uri, &table, crate::iceberg_view::DEFAULT_HISTORY).await?;
                // A catalog entry an earlier announcement failed to move is moved now.
                if mirrored.is_none() {
                    crate::iceberg_view::publish_current(uri, &table).await?;
                }
                crate::iceberg_view::remove_orphans(uri, &table, crate::iceberg_view::DEFAULT_HISTORY).await?;
                Ok::<_, crate::error::LakeError>(mirrored)
            };
            match view.await {
                Ok(mirrored) => report.iceberg = mirrored,
                Err(e) => report.failed.push(("iceberg", e.to_string())),
            }
        }
    }
    if let Some(vacuum_options) = &options.vacuum {
        if past_deadline() {
            report.skipped.push("vacuum");
        } else {
            match vacuum(uri, &mut table, vacuum_options).await {
                Ok(done) => report.vacuum = Some(done),
                Err(e) => report.failed.push(("vacuum", e.to_string())),
            }
        }
    }
    if !report.skipped.is_empty() {
        warn!(table = uri, skipped = ?report.skipped, "deadline reached, the next run goes on");
    }
    if let Some(failure) = report.failure() {
        warn!(table = uri, failure, "a maintenance step failed; the others ran");
    }
    Ok(report)
}

/// The Delta tables directly under `prefix` (a local path or `s3://bucket/prefix`): every folder
/// that has a `_delta_log/`. Their URIs are `prefix/FOLDER`, sorted.
pub async fn discover_tables(prefix: &str, storage: &StorageConfig) -> Result<Vec<String>, MaintenanceError> {
    let discover = |reason: String| MaintenanceError::Discover {
        prefix: prefix.to_owned(),
        reason,
    };
    let url = table_url(prefix)?;
    let options = storage.options_for(&url);
    let log_store = DeltaTableBuilder::from_url(url)
        .map_err(|e| discover(e.to_string()))?
        .with_storage_options(options)
        .build_storage()
        .map_err(|e| discover(e.to_string()))?;
    let store = log_store.object_store(None);
    let listing = store
        .list_with_delimiter(None)
        .await
        .map_err(|e| discover(e.to_string()))?;
    let mut tables = Vec::new();
    for folder in listing.common_prefixes {
        let Some(name) = folder.filename().map(str::to_owned) else {
            continue;
        };
        let log = folder.clone().join("_delta_log");
        let first = store
            .list(Some(&log))
            .try_next()
            .await
            .map_err(|e| discover(format!("{log}: {e}")))?;
        if first.is_some() {
            tables.push(format!("{}/{name}", prefix.trim_end_matches('/')));
        }
    }
    tables.sort();
    Ok(tables)
}

/// Now, for options that take the current time.
pub(crate) fn now() -> DateTime<Utc> {
    Utc::now()
}

/// Whether the deadline `stop_at` (if any) has passed.
pub(crate) fn past(stop_at: Option<Instant>) -> bool {
    stop_at.is_some_and(|at| Instant::now() >= at)
}
