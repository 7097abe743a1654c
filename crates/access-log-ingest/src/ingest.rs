//! Raw log objects in, rows in Delta out: each object exactly once per table, whatever is
//! redelivered or processed twice at the same time.
//!
//! One call of [`Ingestor::ingest`] reads its objects concurrently, streaming every object's lines
//! through the parser into data files of its own per table (the object's observed bucket's table,
//! and the rejects table for lines that do not parse), then commits each table once with a `txn`
//! action per object. A table that already has an object's `txn` gets nothing from it again. When a
//! concurrent writer commits one of the same objects first, the commit is retried with the objects
//! still missing, re-read, a bounded number of times.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use arrow::record_batch::RecordBatch;
use futures::StreamExt;
use lake::maintenance::{MaintenanceError, Settle};
use lake::{
    AppendOutcome, LakeError, Retry, SourceFiles, SourceWriter, StagedCommit, StorageConfig, Table, TableSpec,
    now_micros,
};
use s3_access_log::{
    ACCESS_LOGS_UNIQUE_COLUMNS, AccessLogBatchBuilder, BATCH_ROWS, Lines, LogLine, PARTITION_COLUMN,
    REJECTS_UNIQUE_COLUMNS, RejectsBatchBuilder, access_logs_schema, is_blank, rejects_schema,
};
use tokio::io::AsyncReadExt;
use tokio::sync::Mutex;
use tokio::task::JoinSet;
use tracing::{info, warn};

use crate::config::{TableTemplate, is_bucket_name};
use crate::objects::{LogSource, ObjectReader, ObjectRef, ReadError};

/// Bytes read from an object at a time.
const CHUNK: usize = 1 << 20;

/// Tables a committer pass commits at a time: each commit mostly waits on S3, and a pass over
/// thousands of per-bucket tables must fit in a tick.
const COMMIT_CONCURRENCY: usize = 8;

/// A line longer than this is rejected (its first 4 KiB are kept in the rejects table).
pub const MAX_LINE: usize = 1 << 20;

/// How much of an overlong line the rejects table keeps.
const KEPT_OF_LONG_LINE: usize = 4096;

/// How many times, at most, objects are read after a concurrent writer committed some of them
/// first (each time fewer: those now in the table are skipped), within the retry's deadline.
const ATTEMPTS: usize = 8;

/// With [`Ingestor::with_read_deadline`], the share of the time to the commit's deadline that
/// reading the objects may take; the rest is the commit's.
pub const READ_SHARE: f64 = 0.6;

/// Why an object was not ingested. Its message names the object and, for commits, the table.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// The object could not be read.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The table location has `{account}` or `{region}`, and the object's key does not name them.
    #[error(
        "{object}: {table} needs the observed bucket's account and region, and the key is not in S3's \
         date-based partitioned format (PREFIX/ACCOUNT/REGION/BUCKET/YYYY/MM/DD/...): choose that log object key \
         format in the bucket's server access logging"
    )]
    NoLogSource {
        /// The object.
        object: String,
        /// The table location.
        table: String,
    },
    /// A table could not be opened, created or written.
    #[error("{object}: {source}")]
    Table {
        /// The object being ingested.
        object: String,
        /// What went wrong with the table.
        #[source]
        source: LakeError,
    },
    /// The commit that carried the object's rows failed (one commit carries many objects: they
    /// share its error).
    #[error("{object}: commit to {table} failed: {source}")]
    Commit {
        /// The object.
        object: String,
        /// The table.
        table: String,
        /// The commit's error.
        #[source]
        source: Arc<LakeError>,
    },
    /// The rows of the object were read for a table this attempt did not open (a defect: never
    /// reported as ingested).
    #[error("{object}: table {table} was not opened by this attempt")]
    NotOpened {
        /// The object.
        object: String,
        /// The table.
        table: String,
    },
    /// Rows could not be assembled into a batch.
    #[error("{object}: {source}")]
    Batch {
        /// The object being ingested.
        object: String,
        /// Arrow's error.
        #[source]
        source: arrow::error::ArrowError,
    },
    /// The object could not be read by the time reading had to end for the others' rows to be
    /// committed in time (an object far larger than the rest, or a read that stalls): it is
    /// failed alone, and the others commit.
    #[error(
        "{object}: not read within {seconds} s, the time an invocation leaves reading; the others were committed without it"
    )]
    TooSlow {
        /// The object.
        object: String,
        /// The time reading had.
        seconds: u64,
    },
    /// The invocation's hard deadline came while the object was being ingested: it may or may not
    /// be in the table (its `txn` tells the retry).
    #[error("{object}: not finished by the invocation's deadline; it is retried")]
    Unfinished {
        /// The object.
        object: String,
    },
    /// The object may have been committed before the table's `txn` ids can be trusted (its name
    /// has no date, or a date before that), and this ingestor does not look such objects up in
    /// the table's history ([`Ingestor::with_old_object_lookup`]): the backfill does.
    #[error(
        "{object}: {reason}, so it may have been ingested before the table's txn ids reach back; the function does \
         not search the table's history for it: ingest it with `lakelog ingest`, which does"
    )]
    NeedsBackfill {
        /// The object.
        object: String,
        /// Why its name does not tell.
        reason: &'static str,
    },
    /// Concurrent writers kept committing the same objects; the object is left for a retry.
    #[error("{object}: still conflicting with concurrent writers after {attempts} attempts")]
    Conflicts {
        /// The object.
        object: String,
        /// Attempts made.
        attempts: usize,
    },
}

/// What ingesting one object did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectReport {
    /// Bytes read, decompressed.
    pub bytes: u64,
    /// Non-blank lines.
    pub lines: u64,
    /// Rows written to access-log tables.
    pub rows: u64,
    /// Lines written to the rejects table.
    pub rejects: u64,
    /// Rows and rejects not written because the table already had this object.
    pub duplicates: u64,
    /// Latest request time seen in the object (microseconds since the epoch).
    pub latest_request: Option<i64>,
}

impl ObjectReport {
    /// Whether every line of the object was already in its tables.
    pub fn already_ingested(&self) -> bool {
        self.duplicates > 0 && self.rows == 0 && self.rejects == 0
    }
}

/// Told what an ingest does as it does it: the CLI's progress bar and the function's metrics. `()`
/// observes nothing.
pub trait IngestObserver: Send + Sync {
    /// `bytes` more bytes were read.
    fn read(&self, _bytes: u64) {}
    /// An object's outcome is final.
    fn done(&self, _object: &ObjectRef, _result: &Result<ObjectReport, IngestError>) {}
    /// A commit to `table` landed.
    fn committed(&self, _table: &str, _outcome: &AppendOutcome) {}
    /// A commit to `table` met a concurrent commit of the same objects; they are read again.
    fn conflicted(&self, _table: &str) {}
}

impl IngestObserver for () {}

/// The table specs of the access-log tables.
pub fn access_logs_spec() -> TableSpec {
    TableSpec::new("access_logs", access_logs_schema(), &[PARTITION_COLUMN])
}

/// The table spec of the rejects table.
pub fn rejects_spec() -> TableSpec {
    TableSpec::new("access_log_rejects", rejects_schema(), &[])
}

/// What a committer pass did to each table: the table's location and its commit, or why it failed.
pub type TablesCommitted = Vec<(String, Result<StagedCommit, LakeError>)>;

/// Ingests raw log objects into the access-log tables. Keep one for the life of the process:
/// it caches opened tables and only reads the log commits that are new on each call. Clones
/// share that cache.
#[derive(Clone)]
pub struct Ingestor {
    table: TableTemplate,
    rejects: String,
    storage: StorageConfig,
    reader: ObjectReader,
    concurrency: usize,
    /// When the tables' small files are packed after a commit; `None`: never.
    settle: Option<Settle>,
    /// Whether tables that lack columns of this release get them (see
    /// [`Ingestor::with_schema_changes`]).
    evolve_schema: bool,
    /// Whether objects that may be older than the table's `txn` window are looked up in its
    /// history (see [`Ingestor::with_old_object_lookup`]).
    old_object_lookup: bool,
    /// Whether reading stops at [`READ_SHARE`] of the time to the retry's deadline (see
    /// [`Ingestor::with_read_deadline`]).
    read_deadline: bool,
    /// Whether each table's files are staged for a committer instead of committed (see
    /// [`Ingestor::with_staging`]).
    staging: bool,
    /// Whether `remote_ip` keeps only its network (see [`Ingestor::with_truncated_ips`]).
    truncate_ips: bool,
    tables: Arc<Mutex<HashMap<String, Table>>>,
    /// Per table, the log objects of its files added before its `txn` ids can be trusted
    /// (read once, the first time an object that old is ingested).
    old_sources: Arc<Mutex<HashMap<String, Arc<HashSet<String>>>>>,
    /// Per table, the packing of small files its committer started (see [`Ingestor::settled`]).
    packers: Arc<Mutex<HashMap<String, Arc<lake::Packer>>>>,
    /// Where tables are registered for Athena, and the tables this instance registered.
    catalog: Option<(catalog::Catalog, Arc<Mutex<HashSet<String>>>)>,
    /// Where the next committer pass starts in the sorted list of tables.
    next_table: Arc<AtomicUsize>,
}

impl std::fmt::Debug for Ingestor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ingestor")
            .field("table", &self.table)
            .field("rejects", &self.rejects)
            .field("concurrency", &self.concurrency)
            .finish()
    }
}

impl Ingestor {
    /// An ingestor writing to `table` (rejects to `rejects`), reading objects with `reader`,
    /// `concurrency` objects at a time.
    pub fn new(
        table: TableTemplate,
        rejects: String,
        storage: StorageConfig,
        reader: ObjectReader,
        concurrency: usize,
    ) -> Self {
        Self {
            table,
            rejects,
            storage,
            reader,
            concurrency: concurrency.max(1),
            settle: Some(Settle::default()),
            evolve_schema: true,
            read_deadline: false,
            staging: false,
            truncate_ips: false,
            old_object_lookup: true,
            tables: Arc::default(),
            old_sources: Arc::default(),
            packers: Arc::default(),
            catalog: None,
            next_table: Arc::default(),
        }
    }

    /// The ingestor, keeping of each request's `remote_ip` only its network (IPv4 /24, IPv6 /48:
    /// [`s3_access_log::truncate_ip`]) when `on`: the tables then hold no requester's address.
    pub fn with_truncated_ips(mut self, on: bool) -> Self {
        self.truncate_ips = on;
        self
    }

    /// The ingestor, packing the small files of each table's open partitions after its commits
    /// as `settle` says (`None`: never; the default is [`Settle::default`]).
    pub fn with_settle(mut self, settle: Option<Settle>) -> Self {
        self.settle = settle;
        self
    }

    /// The ingestor, adding the columns of this release that a table lacks only if `evolve` (the
    /// default, what the function does); otherwise such a table is refused
    /// ([`lake::LakeError::SchemaBehind`]), as a command run by hand against the functions' tables
    /// should be unless asked.
    pub fn with_schema_changes(mut self, evolve: bool) -> Self {
        self.evolve_schema = evolve;
        self
    }

    /// The ingestor, failing alone each object not read by [`READ_SHARE`] of the time to the
    /// commit's deadline ([`IngestError::TooSlow`]), so that one huge or stalled object does not
    /// keep every other object of its batch from being committed in time. What a function with a
    /// hard deadline wants; the command line reads as long as it takes.
    pub fn with_read_deadline(mut self, read_deadline: bool) -> Self {
        self.read_deadline = read_deadline;
        self
    }

    /// The ingestor, staging each table's files for a committer ([`Ingestor::commit_staged`])
    /// instead of committing them (see [`lake::staging`]): what the function does, so that its
    /// instances never contend for a table's commits. An object is then done once staged; staged
    /// twice (a redelivery), it is committed once.
    pub fn with_staging(mut self, staging: bool) -> Self {
        self.staging = staging;
        self
    }

    /// Waits for the packings of small files that [`Ingestor::commit_staged`] started, if any are
    /// running.
    pub async fn settled(&self) {
        let packers: Vec<Arc<lake::Packer>> = self.packers.lock().await.values().cloned().collect();
        futures::future::join_all(packers.iter().map(|packer| packer.finish())).await;
    }

    /// Commits what the writers staged in every access-log table (found under the location's
    /// folder when it has one table per bucket) and the rejects table, one commit per table with
    /// anything staged; a packing of small files starts beside the next commits when due
    /// ([`Ingestor::settled`] waits for it). A table that does not exist yet is
    /// skipped; the error of one table does not stop the others. [`COMMIT_CONCURRENCY`] tables
    /// are committed at a time; none is started past the retry's deadline (but the first), and
    /// the next pass starts with the first table this one did not reach, so every table is
    /// reached however many there are.
    pub async fn commit_staged(
        &self,
        retry: &Retry,
    ) -> Result<Vec<(String, Result<StagedCommit, LakeError>)>, MaintenanceError> {
        let mut uris = match self.table.folder() {
            Some(folder) => lake::maintenance::discover_tables(folder, &self.storage).await?,
            None => vec![self.table.to_string()],
        };
        uris.push(self.rejects.clone());
        uris.sort();
        uris.dedup();
        // Each pass starts where the last one stopped, so that a pass that cannot reach every
        // table before the deadline (thousands of buckets) leaves different ones to the next.
        let start = self.next_table.load(Ordering::Relaxed) % uris.len();
        uris.rotate_left(start);
        let deadline = retry.deadline();
        let mut first = true;
        let reached: Vec<Option<(String, Result<StagedCommit, LakeError>)>> = futures::stream::iter(uris)
            .take_while(|_| {
                let go = std::mem::take(&mut first) || Instant::now() < deadline;
                std::future::ready(go)
            })
            .map(|uri| self.commit_table(uri, retry))
            .buffered(COMMIT_CONCURRENCY)
            .collect()
            .await;
        self.next_table.store(start + reached.len(), Ordering::Relaxed);
        Ok(reached.into_iter().flatten().collect())
    }

    /// Commits what is staged in one table; `None` when the table does not exist yet.
    async fn commit_table(&self, uri: String, retry: &Retry) -> Option<(String, Result<StagedCommit, LakeError>)> {
        let cached = self.tables.lock().await.get(&uri).cloned();
        let table = match cached {
            Some(table) => Ok(table),
            None => Table::open(&uri, &self.storage).await,
        };
        let mut table = match table {
            Ok(table) => table,
            Err(e) if e.is_not_a_table() => return None,
            Err(e) => return Some((uri, Err(e))),
        };
        let result = table.commit_staged(lake::staging::MAX_LINKS_PER_COMMIT, retry).await;
        if let Ok(done) = &result
            && done.version.is_some()
            && let Some(settle) = self.settle
        {
            let packer = Arc::clone(self.packers.lock().await.entry(uri.clone()).or_default());
            packer.start(&table, settle, retry.deadline());
        }
        if result.is_ok() {
            self.tables.lock().await.insert(uri.clone(), table);
        }
        Some((uri, result))
    }

    /// The ingestor, looking up (the default) or refusing ([`IngestError::NeedsBackfill`]) an
    /// object that may have been committed before the table's `txn` window: one whose name has no
    /// date, or a date before the window, in a table that has files from before it. The lookup
    /// reads the `log_object` column of every such file, once per instance: the backfill's work,
    /// not a function's, whose instances would each scan the table's history.
    pub fn with_old_object_lookup(mut self, look_up: bool) -> Self {
        self.old_object_lookup = look_up;
        self
    }

    /// The ingestor, registering each table it opens in `catalog` (once per instance; a table
    /// created by another instance is registered too). A registration that fails is a warning:
    /// it never fails an object, and the next instance to open the table tries again.
    pub fn with_catalog(mut self, catalog: catalog::Catalog) -> Self {
        self.catalog = Some((catalog, Arc::default()));
        self
    }

    async fn register(&self, uri: &str, table: &Table) {
        let Some((catalog, registered)) = &self.catalog else {
            return;
        };
        if registered.lock().await.contains(uri) {
            return;
        }
        let per_bucket = uri != self.rejects && self.table.per_bucket();
        let name = catalog::table_name(uri, per_bucket);
        match catalog.register(&name, table).await {
            Ok(done) => {
                info!(table = %uri, name, database = catalog.database(), ?done.table, ?done.view, "registered in the catalog");
                registered.lock().await.insert(uri.to_owned());
            }
            Err(error) => {
                warn!(table = %uri, name, %error, "not registered in the catalog; the next instance tries again")
            }
        }
    }

    /// Whether `source`, not recorded by a `txn` of `table`, was written all the same, by a
    /// commit so old that its `txn` may have expired: an object whose name dates it after the
    /// table's trusted window began is new; an older one (or one without a date in its name) is
    /// looked up in the `log_object` column of the files added before that window.
    async fn written_before_retention(&self, table: &Table, source: &str) -> Result<bool, IngestError> {
        let uri = table.uri();
        let table_error = |source_error| IngestError::Table {
            object: source.to_owned(),
            source: source_error,
        };
        let now_ms = now_micros() / 1000;
        let Some(since) = table.trusted_since_ms(now_ms).map_err(table_error)? else {
            return Ok(false);
        };
        let named = log_object_time_ms(source);
        if named.is_some_and(|t| t >= since) || !table.has_files_written_before(since).map_err(table_error)? {
            return Ok(false);
        }
        if !self.old_object_lookup {
            return Err(IngestError::NeedsBackfill {
                object: source.to_owned(),
                reason: if named.is_some() {
                    "its name dates it before the table's txn window"
                } else {
                    "its name has no date"
                },
            });
        }
        let known = self.old_sources.lock().await.get(uri).cloned();
        let sources = match known {
            Some(sources) => sources,
            None => {
                let read = table
                    .column_values_in_files_before(LOG_OBJECT, since)
                    .await
                    .map_err(table_error)?;
                info!(
                    table = uri,
                    sources = read.len(),
                    "read the log objects of files older than the txn retention"
                );
                let read = Arc::new(read);
                self.old_sources.lock().await.insert(uri.to_owned(), read.clone());
                read
            }
        };
        Ok(sources.contains(source))
    }

    /// Reads the objects at `indices` of `objects` into data files, `concurrency` at a time, each
    /// in a task of its own so that parsing and encoding run on every worker thread; reports the
    /// bytes read to `observer` as they come.
    async fn read_objects(
        &self,
        session: &Arc<Session>,
        objects: &[ObjectRef],
        indices: &[usize],
        read_until: Option<Instant>,
        observer: &dyn IngestObserver,
    ) -> Vec<(usize, Result<ObjectFiles, IngestError>)> {
        let (bytes_read, mut reads) = tokio::sync::mpsc::unbounded_channel();
        let mut tasks = JoinSet::new();
        let mut queue = indices.iter().copied();
        let started = Instant::now();
        let spawn = |tasks: &mut JoinSet<_>, i: usize| {
            let (session, object, bytes_read) = (session.clone(), objects[i].clone(), bytes_read.clone());
            tasks.spawn(async move {
                let read = session.read_object(&object, &bytes_read);
                let Some(until) = read_until else {
                    return (i, read.await);
                };
                // Dropping the read stops it; its files are in no commit, and VACUUM removes them.
                let result = tokio::time::timeout_at(until.into(), read).await.unwrap_or_else(|_| {
                    Err(IngestError::TooSlow {
                        object: object.uri(),
                        seconds: until.saturating_duration_since(started).as_secs(),
                    })
                });
                (i, result)
            });
        };
        for i in queue.by_ref().take(self.concurrency) {
            spawn(&mut tasks, i);
        }
        let mut read = Vec::with_capacity(indices.len());
        loop {
            tokio::select! {
                Some(bytes) = reads.recv() => observer.read(bytes),
                joined = tasks.join_next() => match joined {
                    None => break,
                    Some(Ok(result)) => {
                        read.push(result);
                        if let Some(i) = queue.next() {
                            spawn(&mut tasks, i);
                        }
                    }
                    // A task fails only by panicking (none is aborted): the panic goes on here.
                    Some(Err(error)) => std::panic::resume_unwind(error.into_panic()),
                },
            }
        }
        while let Ok(bytes) = reads.try_recv() {
            observer.read(bytes);
        }
        read
    }

    /// Ingests `objects`, each distinct object once, and returns the outcome of each distinct
    /// object in the order of first appearance. Objects that fail leave nothing in any table they
    /// did not commit to, and can simply be ingested again. Commits are tried until `retry`'s
    /// deadline (see [`lake::Retry`]); what is not committed by then is reported as failed.
    pub async fn ingest(
        &self,
        objects: &[ObjectRef],
        retry: &Retry,
        observer: &dyn IngestObserver,
    ) -> Vec<(ObjectRef, Result<ObjectReport, IngestError>)> {
        let mut seen = std::collections::HashSet::new();
        let objects: Vec<ObjectRef> = objects.iter().filter(|o| seen.insert(*o)).cloned().collect();
        let mut results: Vec<Option<Result<ObjectReport, IngestError>>> = objects.iter().map(|_| None).collect();
        let mut pending: Vec<usize> = (0..objects.len()).collect();
        let mut attempts = 0;
        while !pending.is_empty() && attempts < ATTEMPTS {
            // Writers that met on the same objects read them again at different times.
            if attempts > 0 && !retry.wait(attempts as u32).await {
                break;
            }
            attempts += 1;
            let session = Arc::new(Session {
                ingestor: self.clone(),
                targets: Mutex::new(HashMap::new()),
            });
            let read_until = self.read_deadline.then(|| {
                let now = Instant::now();
                now + retry.deadline().saturating_duration_since(now).mul_f64(READ_SHARE)
            });
            let read = self
                .read_objects(&session, &objects, &pending, read_until, observer)
                .await;

            let mut per_table: BTreeMap<String, Vec<(usize, SourceFiles)>> = BTreeMap::new();
            let mut reports: BTreeMap<usize, ObjectReport> = BTreeMap::new();
            for (i, result) in read {
                match result {
                    Ok(files) => {
                        for (table, source_files) in files.tables {
                            per_table.entry(table).or_default().push((i, source_files));
                        }
                        reports.insert(i, files.report);
                    }
                    Err(e) => results[i] = Some(Err(e)),
                }
            }

            let mut again = Vec::new();
            let mut failed: HashMap<usize, IngestError> = HashMap::new();
            let targets = std::mem::take(&mut *session.targets.lock().await);
            for (uri, files) in per_table {
                let indices: Vec<usize> = files.iter().map(|(i, _)| *i).collect();
                let mut fail_all = |error: &dyn Fn(String) -> IngestError| {
                    for &i in &indices {
                        failed.entry(i).or_insert_with(|| error(objects[i].uri()));
                    }
                };
                let Some(target) = targets.get(&uri) else {
                    // Files of a table this attempt never opened: impossible by construction, and
                    // never reported as ingested.
                    fail_all(&|object| IngestError::NotOpened {
                        object,
                        table: uri.clone(),
                    });
                    continue;
                };
                let mut table = target.table.clone();
                let rows: u64 = files.iter().map(|(_, f)| f.rows()).sum();
                // Every object of the table failed with the table's error.
                let mut fail_commit = |e: LakeError| {
                    let source = Arc::new(e);
                    fail_all(&|object| IngestError::Commit {
                        object,
                        table: uri.clone(),
                        source: Arc::clone(&source),
                    });
                };
                if self.staging {
                    match table.stage_sources(files.into_iter().map(|(_, f)| f).collect()).await {
                        Ok(staged) => {
                            info!(table = %uri, objects = indices.len(), rows = staged.rows, files = staged.files, "staged")
                        }
                        Err(e) => fail_commit(e),
                    }
                    continue;
                }
                match table
                    .commit_sources(files.into_iter().map(|(_, f)| f).collect(), retry)
                    .await
                {
                    Ok(outcome) => {
                        info!(
                            table = %uri,
                            version = ?outcome.version,
                            objects = outcome.sources,
                            rows,
                            files = outcome.files,
                            commit_attempts = outcome.attempts,
                            post_commit_failed = outcome.post_commit_failed,
                            "committed"
                        );
                        observer.committed(&uri, &outcome);
                        if let Some(settle) = &self.settle {
                            table.settle_after_commit(settle, retry.deadline()).await;
                        }
                        self.tables.lock().await.insert(uri, table);
                    }
                    Err(LakeError::Conflict { reason, .. }) => {
                        observer.conflicted(&uri);
                        warn!(table = %uri, objects = indices.len(), %reason, "concurrent commit; re-reading the objects not yet in the table");
                        again.extend(indices);
                    }
                    Err(e) => {
                        fail_commit(e);
                        self.tables.lock().await.remove(&uri);
                    }
                }
            }
            again.sort_unstable();
            again.dedup();
            for (i, report) in reports {
                if let Some(e) = failed.remove(&i) {
                    results[i] = Some(Err(e));
                } else if again.binary_search(&i).is_err() {
                    results[i] = Some(Ok(report));
                }
            }
            again.retain(|i| results[*i].is_none());
            pending = again;
        }
        for i in pending {
            results[i] = Some(Err(IngestError::Conflicts {
                object: objects[i].uri(),
                attempts,
            }));
        }
        objects
            .into_iter()
            .zip(results)
            .map(|(object, result)| {
                let result = result.unwrap_or_else(|| {
                    Err(IngestError::Conflicts {
                        object: object.uri(),
                        attempts,
                    })
                });
                observer.done(&object, &result);
                log_outcome(&object, &result);
                (object, result)
            })
            .collect()
    }
}

/// The column of both tables that names each row's log object.
const LOG_OBJECT: &str = "log_object";

/// When S3 wrote a server access log object, from its name
/// (`[prefix]YYYY-mm-DD-HH-MM-SS-UniqueString`, or the same under a date-partitioned prefix), in
/// milliseconds since the epoch; `None` for a name of another form.
fn log_object_time_ms(source: &str) -> Option<i64> {
    let name = source.rsplit('/').next()?;
    // With a simple prefix, the prefix may run into the name: the date is its last 19 + 17 bytes
    // at most (the unique string is 16 characters); find it by its shape instead.
    let bytes = name.as_bytes();
    (0..bytes.len().saturating_sub(18)).rev().find_map(|start| {
        let candidate = name.get(start..start + 19)?;
        chrono::NaiveDateTime::parse_from_str(candidate, "%Y-%m-%d-%H-%M-%S")
            .ok()
            .map(|t| t.and_utc().timestamp_millis())
    })
}

fn log_outcome(object: &ObjectRef, result: &Result<ObjectReport, IngestError>) {
    match result {
        Ok(report) => {
            let lag_seconds = report.latest_request.map(|t| (now_micros() - t) / 1_000_000);
            info!(
                object = %object,
                bytes = report.bytes,
                rows = report.rows,
                rejected = report.rejects,
                duplicates = report.duplicates,
                lag_seconds,
                "ingested"
            );
        }
        Err(e) => warn!(object = %object, error = %e, "not ingested"),
    }
}

/// A table as one attempt sees it.
struct Target {
    uri: String,
    table: Table,
}

/// Where an object's reader reports the bytes it read, for [`IngestObserver::read`].
type BytesRead = tokio::sync::mpsc::UnboundedSender<u64>;

/// One attempt: the tables it has opened, each at the version it read.
struct Session {
    ingestor: Ingestor,
    targets: Mutex<HashMap<String, Arc<Target>>>,
}

/// The data files one object wrote, per table.
struct ObjectFiles {
    tables: Vec<(String, SourceFiles)>,
    report: ObjectReport,
}

/// Rows of one object on their way into one table.
struct Output<B> {
    target: Arc<Target>,
    /// `None` when the table already has this object.
    writer: Option<SourceWriter>,
    builder: B,
}

/// The Arrow builders rows are buffered in before they are written.
trait Buffer {
    fn buffered(&self) -> usize;
    fn take_batch(&mut self) -> Result<RecordBatch, arrow::error::ArrowError>;
}

impl Buffer for AccessLogBatchBuilder {
    fn buffered(&self) -> usize {
        self.len()
    }

    fn take_batch(&mut self) -> Result<RecordBatch, arrow::error::ArrowError> {
        self.finish()
    }
}

impl Buffer for RejectsBatchBuilder {
    fn buffered(&self) -> usize {
        self.len()
    }

    fn take_batch(&mut self) -> Result<RecordBatch, arrow::error::ArrowError> {
        self.finish()
    }
}

impl<B: Buffer> Output<B> {
    /// Writes the buffered rows into the data file once a batch is full.
    async fn write_when_full(&mut self, source: &str) -> Result<(), IngestError> {
        if self.builder.buffered() < BATCH_ROWS {
            return Ok(());
        }
        let batch = self.builder.take_batch().map_err(|e| arrow_error(source, e))?;
        if let Some(writer) = &mut self.writer {
            writer.write(batch).await.map_err(|e| IngestError::Table {
                object: source.to_owned(),
                source: e,
            })?;
        }
        Ok(())
    }

    /// The writer, with the rows still buffered, for the table the object is new to.
    fn into_open(mut self, source: &str) -> Result<Option<(String, SourceWriter, RecordBatch)>, IngestError> {
        let batch = self.builder.take_batch().map_err(|e| arrow_error(source, e))?;
        Ok(self
            .writer
            .take()
            .map(|writer| (self.target.uri.clone(), writer, batch)))
    }
}

impl Session {
    async fn target(&self, uri: &str, spec: impl FnOnce() -> TableSpec) -> Result<Arc<Target>, LakeError> {
        let mut targets = self.targets.lock().await;
        if let Some(target) = targets.get(uri) {
            return Ok(target.clone());
        }
        let cached = self.ingestor.tables.lock().await.remove(uri);
        let table = match cached {
            Some(mut table) => {
                table.refresh().await?;
                table
            }
            None => {
                let spec = spec().with_schema_changes(self.ingestor.evolve_schema);
                let table = Table::open_or_create(uri, &spec, &self.ingestor.storage).await?;
                self.ingestor.register(uri, &table).await;
                table
            }
        };
        let target = Arc::new(Target {
            uri: uri.to_owned(),
            table,
        });
        targets.insert(uri.to_owned(), target.clone());
        Ok(target)
    }

    async fn output<B>(
        &self,
        uri: &str,
        source: &str,
        spec: fn() -> TableSpec,
        unique_columns: &[&str],
        builder: B,
    ) -> Result<Output<B>, IngestError> {
        let table_error = |e| IngestError::Table {
            object: source.to_owned(),
            source: e,
        };
        let target = self.target(uri, spec).await.map_err(table_error)?;
        let written = target.table.is_committed(source).await.map_err(table_error)?
            || self.ingestor.written_before_retention(&target.table, source).await?;
        let writer = if written {
            None
        } else {
            Some(
                target
                    .table
                    .writer(source)
                    .map_err(table_error)?
                    .without_dictionary(unique_columns),
            )
        };
        Ok(Output {
            target,
            writer,
            builder,
        })
    }

    /// Reads one object into data files of its own; on any error they are dropped.
    async fn read_object(&self, object: &ObjectRef, bytes_read: &BytesRead) -> Result<ObjectFiles, IngestError> {
        let mut state = ObjectState {
            session: self,
            source: object.uri(),
            log_source: object.log_source(),
            now: now_micros(),
            rows: Vec::new(),
            by_bucket: HashMap::new(),
            rejects: None,
            report: ObjectReport::default(),
        };
        match state.read(object, bytes_read).await {
            Ok(()) => state.finish().await,
            Err(e) => {
                state.abort();
                Err(e)
            }
        }
    }
}

/// The state of one object being read.
struct ObjectState<'s> {
    session: &'s Session,
    source: String,
    /// The account and region of the observed bucket, when the object's key names them.
    log_source: Option<LogSource>,
    now: i64,
    rows: Vec<Output<AccessLogBatchBuilder>>,
    /// Index into `rows` of each bucket seen (all buckets share one entry without `{bucket}`).
    by_bucket: HashMap<String, usize>,
    rejects: Option<Output<RejectsBatchBuilder>>,
    report: ObjectReport,
}

impl ObjectState<'_> {
    async fn read(&mut self, object: &ObjectRef, bytes_read: &BytesRead) -> Result<(), IngestError> {
        let mut stream = self.session.ingestor.reader.open(object).await?;
        let mut buf: Vec<u8> = Vec::with_capacity(CHUNK);
        let mut next_line = 1u64;
        // While a line longer than MAX_LINE is being skipped: its number.
        let mut skipping: Option<u64> = None;
        loop {
            if buf.capacity() - buf.len() < CHUNK / 2 {
                buf.reserve(CHUNK);
            }
            let n = stream.read_buf(&mut buf).await.map_err(|source| ReadError::Io {
                object: self.source.clone(),
                source,
            })?;
            self.report.bytes += n as u64;
            // The receiver lives until every read has ended.
            let _ = bytes_read.send(n as u64);
            let eof = n == 0;
            let mut start = 0;
            if let Some(number) = skipping {
                match memchr::memchr(b'\n', &buf) {
                    Some(i) => {
                        skipping = None;
                        start = i + 1;
                        next_line = number + 1;
                    }
                    None => {
                        buf.clear();
                        if eof {
                            break;
                        }
                        continue;
                    }
                }
            }
            let end = if eof {
                buf.len()
            } else {
                match memchr::memrchr(b'\n', &buf[start..]) {
                    Some(i) => start + i + 1,
                    None => start,
                }
            };
            next_line = self.lines(&buf[start..end], next_line).await?;
            buf.drain(..end);
            if eof {
                break;
            }
            if buf.len() > MAX_LINE {
                let reason =
                    format!("line is longer than {MAX_LINE} bytes; its first {KEPT_OF_LONG_LINE} bytes are kept");
                self.reject(next_line, &buf[..KEPT_OF_LONG_LINE], &reason).await?;
                skipping = Some(next_line);
                buf.clear();
            }
        }
        Ok(())
    }

    /// Parses complete lines, the first of which has number `first`; returns the next number.
    async fn lines(&mut self, chunk: &[u8], first: u64) -> Result<u64, IngestError> {
        let mut next = first;
        for (number, line) in Lines::starting_at(chunk, first) {
            next = number + 1;
            if is_blank(line) {
                continue;
            }
            self.report.lines += 1;
            match LogLine::parse(line) {
                Ok(parsed) => self.row(&parsed, number, line).await?,
                Err(e) => self.reject(number, line, &e.to_string()).await?,
            }
        }
        Ok(next)
    }

    async fn row(&mut self, parsed: &LogLine<'_>, number: u64, line: &[u8]) -> Result<(), IngestError> {
        let template = &self.session.ingestor.table;
        let bucket = parsed.bucket();
        let bucket = bucket.as_deref().unwrap_or("");
        let index = match self.by_bucket.get(bucket) {
            Some(&i) => i,
            None if template.per_bucket() && !is_bucket_name(bucket) => {
                let reason = if bucket.is_empty() {
                    "bucket: required to choose the table, found -".to_owned()
                } else {
                    format!("bucket: {bucket:?} is not a valid bucket name")
                };
                return self.reject(number, line, &reason).await;
            }
            None => {
                let Some(uri) = template.resolve(bucket, self.log_source.as_ref()) else {
                    return Err(IngestError::NoLogSource {
                        object: self.source.clone(),
                        table: template.to_string(),
                    });
                };
                let existing = self.rows.iter().position(|o| o.target.uri == uri);
                let i = match existing {
                    Some(i) => i,
                    None => {
                        let builder = AccessLogBatchBuilder::with_capacity(self.now, BATCH_ROWS)
                            .with_truncated_ips(self.session.ingestor.truncate_ips);
                        let output = self
                            .session
                            .output(
                                &uri,
                                &self.source,
                                access_logs_spec,
                                &ACCESS_LOGS_UNIQUE_COLUMNS,
                                builder,
                            )
                            .await?;
                        self.rows.push(output);
                        self.rows.len() - 1
                    }
                };
                self.by_bucket.insert(bucket.to_owned(), i);
                i
            }
        };
        self.report.latest_request = self.report.latest_request.max(Some(parsed.request_time()));
        let output = &mut self.rows[index];
        if output.writer.is_none() {
            self.report.duplicates += 1;
            return Ok(());
        }
        output.builder.append_line(parsed, &self.source, number as i64);
        self.report.rows += 1;
        output.write_when_full(&self.source).await
    }

    async fn reject(&mut self, number: u64, line: &[u8], reason: &str) -> Result<(), IngestError> {
        if self.rejects.is_none() {
            let uri = self.session.ingestor.rejects.clone();
            let output = self
                .session
                .output(
                    &uri,
                    &self.source,
                    rejects_spec,
                    &REJECTS_UNIQUE_COLUMNS,
                    RejectsBatchBuilder::new(self.now).with_truncated_ips(self.session.ingestor.truncate_ips),
                )
                .await?;
            self.rejects = Some(output);
        }
        let Some(output) = &mut self.rejects else { return Ok(()) };
        if output.writer.is_none() {
            self.report.duplicates += 1;
            return Ok(());
        }
        output.builder.append(&self.source, number as i64, line, reason);
        self.report.rejects += 1;
        output.write_when_full(&self.source).await
    }

    /// Writes what is buffered and closes the data files.
    async fn finish(mut self) -> Result<ObjectFiles, IngestError> {
        let mut open: Vec<(String, SourceWriter, RecordBatch)> = Vec::new();
        for output in std::mem::take(&mut self.rows) {
            open.extend(output.into_open(&self.source)?);
        }
        if let Some(output) = self.rejects.take() {
            open.extend(output.into_open(&self.source)?);
        }
        let mut tables = Vec::with_capacity(open.len());
        let mut open = open.into_iter();
        while let Some((uri, mut writer, batch)) = open.next() {
            let closed = match writer.write(batch).await {
                Ok(()) => writer.finish().await,
                Err(e) => {
                    writer.abort();
                    Err(e)
                }
            };
            match closed {
                Ok(files) => tables.push((uri, files)),
                Err(source) => {
                    open.for_each(|(_, writer, _)| writer.abort());
                    return Err(IngestError::Table {
                        object: self.source.clone(),
                        source,
                    });
                }
            }
        }
        Ok(ObjectFiles {
            tables,
            report: self.report,
        })
    }

    fn abort(&mut self) {
        for output in self.rows.drain(..) {
            if let Some(writer) = output.writer {
                writer.abort();
            }
        }
        if let Some(output) = self.rejects.take()
            && let Some(writer) = output.writer
        {
            writer.abort();
        }
    }
}

fn arrow_error(object: &str, source: arrow::error::ArrowError) -> IngestError {
    IngestError::Batch {
        object: object.to_owned(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_objects_are_dated_by_their_names() {
        let at = chrono::NaiveDate::from_ymd_opt(2024, 6, 1)
            .and_then(|d| d.and_hms_opt(0, 1, 2))
            .map(|t| t.and_utc().timestamp_millis());
        for source in [
            "s3://raw/logs/2024-06-01-00-01-02-0123456789ABCDEF",
            "s3://raw/logs/web2024-06-01-00-01-02-0123456789ABCDEF",
            "s3://raw/123456789012/us-east-1/web/2024/06/01/2024-06-01-00-01-02-0123456789ABCDEF",
            "/tmp/logs/2024-06-01-00-01-02-x",
        ] {
            assert_eq!(log_object_time_ms(source), at, "{source}");
        }
        for source in [
            "s3://raw/logs/access.log",
            "s3://raw/2024-06-01/",
            "",
            "s3://raw/2024-13-01-00-01-02-x",
        ] {
            assert_eq!(log_object_time_ms(source), None, "{source}");
        }
    }
}
