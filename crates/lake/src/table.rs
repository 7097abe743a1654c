//! [`Table`]: one open table and everything lakelog's writers do with it.

use std::collections::HashSet;
use std::time::Duration;

use deltalake::DeltaTable;

use crate::append::{
    AppendOutcome, SourceFiles, SourceWriter, commit_appends, commit_appends_at, commit_sources, is_committed,
};
use crate::commit::Retry;
use crate::create::{FileStats, TableSpec, file_stats, open_or_create, open_table};
use crate::erase::{self, Erasure, ErasureReport, FolderScan};
use crate::error::LakeError;
use crate::iceberg_view;
use crate::maintenance::{
    self, CheckpointReport, CompactObserver, CompactOptions, CompactionPlan, CompactionReport, MaintenanceError,
    Settle, VacuumOptions, VacuumReport,
};
use crate::positions::{self, Advance};
use crate::sources;
use crate::staging::{self, Staged, StagedCommit};
use crate::storage::StorageConfig;
use crate::txns::Txns;

/// An open table at its location: the version loaded, brought up to date by [`Table::refresh`],
/// and the writes of lakelog's pipelines (a writer per source, commits of sources or plain
/// appends). Cloning is cheap next to opening: the clone shares the loaded log and the `txn`
/// versions known.
#[derive(Debug, Clone)]
pub struct Table {
    uri: String,
    delta: DeltaTable,
    txns: Txns,
}

impl Table {
    /// Opens the table at `uri`, creating it from `spec` when it is missing.
    pub async fn open_or_create(uri: &str, spec: &TableSpec, storage: &StorageConfig) -> Result<Self, LakeError> {
        Ok(Self {
            uri: uri.to_owned(),
            delta: open_or_create(uri, spec, storage).await?,
            txns: Txns::default(),
        })
    }

    /// Opens the table at `uri`, which must exist.
    pub async fn open(uri: &str, storage: &StorageConfig) -> Result<Self, LakeError> {
        Ok(Self {
            uri: uri.to_owned(),
            delta: open_table(uri, storage).await?,
            txns: Txns::default(),
        })
    }

    /// The table's location, as it was opened.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// Reads the commits written since the version loaded.
    pub async fn refresh(&mut self) -> Result<(), LakeError> {
        self.delta
            .update_incremental(None)
            .await
            .map_err(|e| LakeError::delta(&self.uri, e))
    }

    /// Whether `source` is recorded by a `txn` of the version loaded; an
    /// id asked about before is answered without reading the log again.
    pub async fn is_committed(&self, source: &str) -> Result<bool, LakeError> {
        is_committed(&self.uri, &self.delta, &self.txns, source).await
    }

    /// A writer of `source`'s rows into data files of this table.
    pub fn writer(&self, source: &str) -> Result<SourceWriter, LakeError> {
        SourceWriter::new(&self.uri, &self.delta, source)
    }

    /// Commits `sources` with a `txn` each.
    pub async fn commit_sources(
        &mut self,
        sources: Vec<SourceFiles>,
        retry: &Retry,
    ) -> Result<AppendOutcome, LakeError> {
        commit_sources(&self.uri, &mut self.delta, &self.txns, sources, retry).await
    }

    /// Commits `sources` as plain appends.
    pub async fn commit_appends(
        &mut self,
        sources: Vec<SourceFiles>,
        retry: &Retry,
    ) -> Result<AppendOutcome, LakeError> {
        commit_appends(&self.uri, &mut self.delta, &self.txns, sources, retry).await
    }

    /// How far `stream` is in the loaded version (see [`crate::positions`]); `None` when no commit
    /// recorded a position of it.
    pub async fn position(&self, stream: &str) -> Result<Option<String>, LakeError> {
        positions::position(&self.uri, &self.delta, &self.txns, stream).await
    }

    /// Commits `sources` as plain appends with the streams' new positions.
    pub async fn commit_appends_at(
        &mut self,
        sources: Vec<SourceFiles>,
        advances: &[Advance],
        retry: &Retry,
    ) -> Result<AppendOutcome, LakeError> {
        commit_appends_at(&self.uri, &mut self.delta, &self.txns, sources, advances, retry).await
    }

    /// How far `stream` is staged or committed (see [`crate::staging`]): the last record of its
    /// newest staged link, or, when it has none, its position in the table's newest version.
    pub async fn staged_position(&mut self, stream: &str) -> Result<Option<String>, LakeError> {
        match staging::staged_position(&self.uri, &self.delta.object_store(), stream).await? {
            Some(position) => Ok(position),
            None => {
                self.refresh().await?;
                self.position(stream).await
            }
        }
    }

    /// Stages `files`, the rows of `advance.stream` after `advance.from` (its staged position, as
    /// read) up to `advance.to`, for the committer; [`LakeError::Conflict`] when another writer
    /// staged past `advance.from` first (nothing staged, the files deleted).
    pub async fn stage(&self, files: SourceFiles, advance: &Advance) -> Result<Staged, LakeError> {
        staging::stage(&self.uri, &self.delta.object_store(), files, advance).await
    }

    /// Stages the files of `sources` for the committer, which commits each source once with a
    /// `txn` (see [`crate::staging`]).
    pub async fn stage_sources(&self, sources: Vec<SourceFiles>) -> Result<Staged, LakeError> {
        staging::stage_sources(&self.uri, &self.delta.object_store(), sources).await
    }

    /// Commits what the writers staged, at most `max_links` links, in one version with each
    /// stream's new position (see [`crate::staging`]).
    pub async fn commit_staged(&mut self, max_links: usize, retry: &Retry) -> Result<StagedCommit, LakeError> {
        staging::commit_staged(&self.uri, &mut self.delta, &self.txns, max_links, retry).await
    }

    /// The schema of the version loaded, as Arrow has it.
    pub fn schema(&self) -> Result<arrow::datatypes::SchemaRef, LakeError> {
        Ok(self
            .delta
            .snapshot()
            .map_err(|e| LakeError::delta(&self.uri, e))?
            .snapshot()
            .arrow_schema())
    }

    /// The partition columns of the version loaded.
    pub fn partition_columns(&self) -> Result<Vec<String>, LakeError> {
        Ok(self
            .delta
            .snapshot()
            .map_err(|e| LakeError::delta(&self.uri, e))?
            .metadata()
            .partition_columns()
            .to_vec())
    }

    /// Active files, rows and bytes of the version loaded.
    pub fn file_stats(&self) -> Result<FileStats, LakeError> {
        file_stats(&self.delta).map_err(|e| LakeError::delta(&self.uri, e))
    }

    /// When, in milliseconds since the epoch, commits began whose `txn` ids are still certainly
    /// known (see [`sources`]); `None` when ids never expire.
    pub fn trusted_since_ms(&self, now_ms: i64) -> Result<Option<i64>, LakeError> {
        sources::trusted_since_ms(&self.uri, &self.delta, now_ms)
    }

    /// Whether any active file holds rows first written before `before_ms` (see [`sources`]); no
    /// data file is read.
    pub fn has_files_written_before(&self, before_ms: i64) -> Result<bool, LakeError> {
        sources::has_files_written_before(&self.uri, &self.delta, before_ms)
    }

    /// The distinct values of the string column `column` in the active files whose rows were
    /// first written before `before_ms` (see [`sources`]).
    pub async fn column_values_in_files_before(
        &self,
        column: &str,
        before_ms: i64,
    ) -> Result<HashSet<String>, LakeError> {
        sources::column_values_in_files_before(&self.uri, &self.delta, column, before_ms).await
    }

    /// Plans the compaction of the closed partitions, changing nothing (see [`maintenance`]).
    pub fn plan_compaction(&self, options: &CompactOptions) -> Result<CompactionPlan, MaintenanceError> {
        maintenance::plan_compaction(&self.uri, &self.delta, options)
    }

    /// Compacts the closed partitions, removing duplicate rows by `options.dedup_key`, bin by
    /// bin (see [`maintenance`]).
    pub async fn compact(
        &mut self,
        options: &CompactOptions,
        observer: &dyn CompactObserver,
    ) -> Result<CompactionReport, MaintenanceError> {
        maintenance::compact(&self.uri, &mut self.delta, options, observer).await
    }

    /// Packs the small files the writers left when `settle` says it is time (see
    /// [`Settle`]), starting no bin after `stop_at`; `None` when it was not time. Deciding costs
    /// nothing while the table has fewer active files than [`Settle::files`], and one pass over
    /// the files of the version loaded after that.
    pub async fn settle(
        &mut self,
        settle: &Settle,
        stop_at: Option<std::time::Instant>,
    ) -> Result<Option<CompactionReport>, MaintenanceError> {
        let active = self
            .delta
            .snapshot()
            .map_err(|e| MaintenanceError::delta(&self.uri, "compaction plan", e))?
            .log_data()
            .num_files();
        if active < settle.files.max(2) {
            return Ok(None);
        }
        let options = settle.options(stop_at);
        let plan = self.plan_compaction(&options)?;
        if plan.files() < settle.files {
            return Ok(None);
        }
        maintenance::compact_planned(&self.uri, &mut self.delta, &plan, &options, &())
            .await
            .map(Some)
    }

    /// What a writer does after each commit: [`Table::settle`], starting no bin after
    /// [`Settle::BUDGET`] or `deadline`. The commit has landed already, so a packing that fails is
    /// logged, not returned: packing is guarded like every compaction (a bin that failed or lost
    /// to another writer changes nothing), and the next commit tries again.
    pub async fn settle_after_commit(&mut self, settle: &Settle, deadline: std::time::Instant) {
        let stop_at = deadline.min(std::time::Instant::now() + Settle::BUDGET);
        match self.settle(settle, Some(stop_at)).await {
            Ok(Some(report)) => tracing::info!(
                table = %self.uri,
                files_removed = report.files_removed(),
                files_added = report.files_added(),
                conflicts = report.conflicts.len(),
                "packed the small files"
            ),
            Ok(None) => {}
            Err(e) => tracing::warn!(
                table = %self.uri,
                error = %e,
                "could not pack the small files; the next commit tries again"
            ),
        }
    }

    /// Checkpoints the current version and, with `cleanup_logs`, deletes expired log files.
    pub async fn checkpoint(&mut self, cleanup_logs: bool) -> Result<CheckpointReport, MaintenanceError> {
        maintenance::checkpoint(&self.uri, &mut self.delta, cleanup_logs).await
    }

    /// Deletes data files removed longer ago than the retention (see [`maintenance`]).
    pub async fn vacuum(&mut self, options: &VacuumOptions) -> Result<VacuumReport, MaintenanceError> {
        maintenance::vacuum(&self.uri, &mut self.delta, options).await
    }

    /// Brings the table's Iceberg view (see [`iceberg_view`]) to the version loaded, keeping
    /// snapshots younger than `history`; `None` when it was there already.
    pub async fn mirror_iceberg(&self, history: Duration) -> Result<Option<iceberg_view::Mirrored>, LakeError> {
        iceberg_view::mirror(&self.uri, &self.delta, history).await
    }

    /// The URI of the Iceberg view's newest metadata file (listed, not read); `None` when the table
    /// has no view yet.
    pub async fn iceberg_metadata(&self) -> Result<Option<String>, LakeError> {
        iceberg_view::metadata_location(&self.uri, &self.delta).await
    }

    /// Removes every row of `erasure` in one commit that coexists with the writers (see
    /// [`erase`]); the files it rewrote stay on storage until [`Table::purge`].
    pub async fn erase(&mut self, erasure: &Erasure, retry: &Retry) -> Result<ErasureReport, LakeError> {
        erase::erase(&self.uri, &mut self.delta, erasure, retry).await
    }

    /// Deletes from storage the files that hold rows of `erasure` and that the current version
    /// no longer names (see the `erase` module), then scans the folder again.
    pub async fn purge(&mut self, erasure: &Erasure) -> Result<erase::Purge, LakeError> {
        // The Iceberg view's older snapshots name the files the purge deletes: they go first.
        if iceberg_view::enabled() {
            self.mirror_iceberg(Duration::ZERO).await?;
        }
        erase::purge(&self.uri, &mut self.delta, erasure).await
    }

    /// Reads every Parquet data file under the table's folder, active or not, for rows of
    /// `erasure`.
    pub async fn scan_folder(&self, erasure: &Erasure) -> Result<FolderScan, LakeError> {
        erase::scan_folder(&self.uri, &self.delta, erasure).await
    }

    /// The ids of `erasure` that rows of the current version hold, reading only the active files
    /// whose partition values (column to value, as text: `2026-12-06` for a date) `keep` takes,
    /// and only the columns the erasure looks at: which of some records a table already has.
    pub async fn ids_present(
        &self,
        erasure: &Erasure,
        keep: impl Fn(&std::collections::HashMap<String, String>) -> bool,
    ) -> Result<std::collections::BTreeSet<String>, LakeError> {
        erase::ids_present(&self.uri, &self.delta, erasure, keep).await
    }

    /// The rows of `erasure`'s ids in the current version, in the active files that `keep` takes
    /// by their partition values (column to value, as text) and the time each was written
    /// (milliseconds since the epoch): whether, and how often, given records landed. Reads only
    /// the erasure's columns of the files `scanned` (kept from call to call) has not read yet.
    pub async fn rows_present(
        &self,
        erasure: &Erasure,
        keep: impl Fn(&std::collections::HashMap<String, String>, i64) -> bool,
        scanned: &mut erase::Scanned,
    ) -> Result<erase::Present, LakeError> {
        erase::rows_present(&self.uri, &self.delta, erasure, keep, scanned).await
    }

    /// Drops the partitions whose date is more than `keep_days` before today (UTC), in one
    /// commit, and deletes their files (see [`crate::retention`]).
    pub async fn expire(
        &mut self,
        keep_days: u32,
        retry: &Retry,
    ) -> Result<crate::retention::RetentionReport, MaintenanceError> {
        crate::retention::expire(&self.uri, &mut self.delta, keep_days, maintenance::now(), retry).await
    }

    /// The delta-rs table, for reading it (queries, statistics).
    pub fn delta(&self) -> &DeltaTable {
        &self.delta
    }

    /// The delta-rs table, for a query engine that takes it whole.
    pub fn into_delta(self) -> DeltaTable {
        self.delta
    }
}
