//! Commits whose outcome is read from the Delta log, never guessed from an error, and that are
//! tried again with backoff until a deadline.
//!
//! An error of delta-rs' commit future does not mean that nothing was committed: S3 may answer
//! 500 to a PUT it carried out (and object_store's retry then meets the commit as a competitor),
//! a connection may drop after the request was carried out, and a post-commit step (checkpoint,
//! snapshot refresh) may fail after the version landed. So every commit carries an
//! id of its own in its `commitInfo` (`lakelog.commitId`), and after any error the version the
//! try wrote is read back (delta-rs' own retries are off, so a try on base `b` writes only
//! `b + 1`): if it carries the id, the commit landed. When a later try is refused by its guard,
//! every version since the first try is read, in case an earlier write landed late. Only when the
//! log has been read and names none of them is the commit known not to have landed, and only
//! then may its data files be deleted, and only when no try's write met an ambiguous answer (a
//! timeout, a dropped connection, a 5xx): such a write may still be carried out after the log was
//! read back, and name the files. When the log cannot be read in time, or a try was ambiguous,
//! the outcome is [`CommitFailure::Unknown`] and the files stay (files that no version names are
//! invisible to readers, and VACUUM removes them).

use std::time::{Duration, Instant};

use deltalake::kernel::transaction::{CommitBuilder, CommitProperties, TransactionError};
use deltalake::kernel::{Action, Add, Transaction};
use deltalake::logstore::{LogStoreRef, ObjectStoreRef};
use deltalake::protocol::DeltaOperation;
use deltalake::{DeltaTable, DeltaTableError, Path};
use object_store::ObjectStoreExt as _;
use rand::Rng as _;
use serde_json::Value;
use tracing::{debug, warn};

use crate::checkpoint::checkpoint_due;
use crate::error::LakeError;
use crate::positions::{self, Advance};
use crate::txns::Txns;

/// The `commitInfo` key under which each commit records its own id.
pub const COMMIT_ID_KEY: &str = "lakelog.commitId";

/// How long a commit may keep trying, and how it waits between tries: exponential backoff with
/// full jitter (a random wait between zero and a ceiling that doubles with each try, up to a cap),
/// so that writers that collided, or that S3 throttled, do not collide again in step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    deadline: Instant,
    first: Duration,
    cap: Duration,
}

impl Retry {
    /// What a caller without a deadline of its own (the CLI) allows one commit.
    pub const DEFAULT_BUDGET: Duration = Duration::from_secs(120);

    /// Tries until `deadline`, waiting 25 ms to 2 s (ceilings) between tries.
    pub fn until(deadline: Instant) -> Self {
        Self {
            deadline,
            first: Duration::from_millis(25),
            cap: Duration::from_secs(2),
        }
    }

    /// Tries for `budget` from now.
    pub fn within(budget: Duration) -> Self {
        Self::until(Instant::now() + budget)
    }

    /// Tries until `margin` before a Lambda invocation's deadline (`deadline_ms`, milliseconds
    /// since the Unix epoch, as the Runtime API gives it), so that the handler still has `margin`
    /// to answer; a deadline already past (or within the margin) leaves one try. A deadline of 0,
    /// which a context built outside Lambda has, gives [`Retry::DEFAULT_BUDGET`].
    pub fn for_invocation(deadline_ms: u64, margin: Duration) -> Self {
        if deadline_ms == 0 {
            return Self::default();
        }
        let deadline = std::time::UNIX_EPOCH + Duration::from_millis(deadline_ms);
        let left = deadline
            .duration_since(std::time::SystemTime::now())
            .unwrap_or_default()
            .saturating_sub(margin);
        Self::within(left)
    }

    /// The same deadline with other ceilings of the waits (tests use short ones).
    pub fn with_delays(mut self, first: Duration, cap: Duration) -> Self {
        self.first = first;
        self.cap = cap.max(first);
        self
    }

    /// When trying stops.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether the deadline has passed.
    pub fn expired(&self) -> bool {
        Instant::now() >= self.deadline
    }

    /// The wait before retry number `retry` (1 for the first retry): a random duration up to
    /// `first * 2^(retry - 1)`, capped.
    pub fn delay(&self, retry: u32) -> Duration {
        let ceiling = self
            .first
            .saturating_mul(1u32 << retry.saturating_sub(1).min(20))
            .min(self.cap);
        let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(rand::rng().random_range(0..=nanos))
    }

    /// Waits before retry number `retry`; `false`, without waiting, when the wait would end past
    /// the deadline.
    pub async fn wait(&self, retry: u32) -> bool {
        let delay = self.delay(retry);
        if Instant::now() + delay >= self.deadline {
            return false;
        }
        tokio::time::sleep(delay).await;
        true
    }
}

impl Default for Retry {
    fn default() -> Self {
        Self::within(Self::DEFAULT_BUDGET)
    }
}

/// What must still hold, on the version a commit follows, for it to go ahead.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Guard<'a> {
    /// Nothing: plain appends never conflict.
    None,
    /// None of the commit's `txn` app ids may be in the table (another writer wrote the source).
    NewTransactions,
    /// Each of these files (paths as the log writes them) must still be active.
    Active(&'a [&'a str]),
    /// Each stream must still be where the writer read it ([`Advance::from`]).
    Positions(&'a [Advance]),
}

/// One commit to make.
#[derive(Debug)]
pub(crate) struct Commit<'a> {
    /// The table, as errors and logs name it.
    pub uri: &'a str,
    /// The commit's actions.
    pub actions: Vec<Action>,
    /// Its `txn` actions.
    pub transactions: Vec<Transaction>,
    /// The operation recorded in `commitInfo`.
    pub operation: DeltaOperation,
    /// More `commitInfo` entries.
    pub metadata: Vec<(String, Value)>,
    /// What must hold for it to go ahead.
    pub guard: Guard<'a>,
    /// Whether its data files stay when it is known not to have landed: staged files, which
    /// their link still names for a later commit.
    pub keep_files: bool,
}

/// A commit that landed, or that its guard stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Landed {
    /// The commit is `version` of the table.
    Version {
        /// The version.
        version: u64,
        /// Tries it took (1 when the first landed).
        attempts: u32,
        /// Whether a step after the commit (checkpoint, refresh) failed; the next
        /// writer or the maintenance run does it instead.
        post_commit_failed: bool,
        /// Whether the version was checkpointed after the commit (see [`checkpoint_due`]).
        checkpointed: bool,
    },
    /// The guard no longer held: nothing was committed.
    Refused {
        /// What no longer held.
        reason: String,
    },
}

/// A commit that did not land, or whose outcome is unknown.
#[derive(Debug)]
pub(crate) enum CommitFailure {
    /// The log was read and no version carries the commit: its files may be deleted.
    NotCommitted(LakeError),
    /// The log could not be read back: the commit may have landed, so its files must stay.
    Unknown(LakeError),
}

/// Errors that no retry can cure: the commit itself is not acceptable to the table.
fn permanent(e: &DeltaTableError) -> bool {
    matches!(
        e,
        DeltaTableError::Transaction {
            source: TransactionError::DeltaTableAppendOnly
                | TransactionError::UnsupportedTableFeatures(_)
                | TransactionError::TableFeaturesRequired(_)
        } | DeltaTableError::SerializeLogJson { .. }
            | DeltaTableError::CommitValidation { .. }
            | DeltaTableError::SchemaMismatch { .. }
            | DeltaTableError::MissingFeature { .. }
            | DeltaTableError::InvalidTableLocation(_)
    )
}

/// Whether a try's error says that the store did not take its write: the version was taken
/// (put-if-absent refused), or the commit is not acceptable at all. Anything else (a timeout, a
/// dropped connection, a 5xx) leaves open whether the write will still be carried out.
fn refused_outright(e: &DeltaTableError) -> bool {
    permanent(e)
        || matches!(
            e,
            DeltaTableError::VersionAlreadyExists(_)
                | DeltaTableError::Transaction {
                    source: TransactionError::VersionAlreadyExists(_)
                }
        )
}

/// Commits `commit` to `table` as the version after the newest, tried again (refreshing the
/// table, re-checking the guard, with backoff) until it lands or `retry`'s deadline passes.
/// Every try's outcome is read from the log, so a commit is reported as landed exactly when a
/// version carries it. The data files the commit adds are deleted again exactly when it is known
/// not to have landed ([`Landed::Refused`], [`CommitFailure::NotCommitted`]); on
/// [`CommitFailure::Unknown`] they stay.
pub(crate) async fn commit(
    table: &mut DeltaTable,
    txns: &Txns,
    commit: Commit<'_>,
    retry: &Retry,
) -> Result<Landed, CommitFailure> {
    let uri = commit.uri;
    let adds: Vec<Add> = commit
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Add(add) => Some(add.clone()),
            _ => None,
        })
        .collect();
    let keep_files = commit.keep_files;
    let outcome = try_commit(table, txns, commit, retry).await;
    match &outcome {
        Ok(Landed::Refused { .. }) | Err(CommitFailure::NotCommitted(_)) if keep_files => {}
        Ok(Landed::Refused { .. }) | Err(CommitFailure::NotCommitted(_)) => {
            delete_files(&table.object_store(), &adds).await;
        }
        Err(CommitFailure::Unknown(e)) => {
            warn!(table = uri, files = adds.len(), error = %e, "commit outcome unknown: its data files are kept");
        }
        Ok(Landed::Version { .. }) => {
            if crate::iceberg_view::enabled() {
                mirror_after_commit(table, uri, retry).await;
            }
        }
    }
    outcome
}

/// Brings the table's Iceberg view to the version just committed, best effort and within the
/// commit's deadline: the commit has landed whatever happens here, and a view left behind is
/// brought up to date by the next commit or maintenance pass.
async fn mirror_after_commit(table: &DeltaTable, uri: &str, retry: &Retry) {
    let left = retry.deadline().saturating_duration_since(Instant::now());
    let mirrored = crate::iceberg_view::mirror(uri, table, crate::iceberg_view::DEFAULT_HISTORY);
    match tokio::time::timeout(left, mirrored).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => warn!(table = uri, error = %e, "committed; the Iceberg view is left behind for the next pass"),
        Err(_) => warn!(
            table = uri,
            "committed; the Iceberg view was stopped at the deadline and is left for the next pass"
        ),
    }
}

/// Deletes the data files of `adds`, best effort: only once no version names them (files left
/// behind are in no commit, so no reader sees them, and VACUUM removes them).
pub(crate) async fn delete_files(store: &ObjectStoreRef, adds: &[Add]) {
    for add in adds {
        let path = Path::from(decode_path(&add.path));
        if let Err(e) = store.delete(&path).await {
            debug!(file = %path, error = %e, "could not remove an uncommitted file");
        }
    }
}

/// A data file's path as the log writes it (percent-encoded), decoded.
pub(crate) fn decode_path(path: &str) -> String {
    percent_encoding::percent_decode_str(path)
        .decode_utf8_lossy()
        .into_owned()
}

/// The tries of [`commit`], without the clean-up of its files.
async fn try_commit(
    table: &mut DeltaTable,
    txns: &Txns,
    commit: Commit<'_>,
    retry: &Retry,
) -> Result<Landed, CommitFailure> {
    let uri = commit.uri;
    let id = uuid::Uuid::new_v4().to_string();
    let mut metadata = commit.metadata;
    metadata.push((COMMIT_ID_KEY.to_owned(), Value::String(id.clone())));
    let mut attempts = 0u32;
    let mut last_error = String::new();
    let mut first_base: Option<u64> = None;
    // Whether a try's write met an answer that leaves its outcome open (a timeout, a reset, a
    // 5xx): the store may still carry it out after the log was read back, so its files must stay.
    let mut ambiguous = false;
    loop {
        if attempts > 0 && !retry.wait(attempts).await {
            let (uri, last_error) = (uri.to_owned(), last_error);
            return Err(if ambiguous {
                CommitFailure::Unknown(LakeError::CommitMayLand {
                    uri,
                    attempts,
                    last_error,
                })
            } else {
                CommitFailure::NotCommitted(LakeError::CommitTimedOut {
                    uri,
                    attempts,
                    last_error,
                })
            });
        }
        attempts += 1;
        // Start from the newest version: a try on an old one is refused at once.
        if let Err(e) = table.update_incremental(None).await {
            debug!(table = uri, attempts, error = %e, "could not refresh the table before committing");
            last_error = e.to_string();
            continue;
        }
        let snapshot = match table.snapshot() {
            Ok(snapshot) => snapshot.clone(),
            Err(e) => return Err(CommitFailure::NotCommitted(LakeError::delta(uri, e))),
        };
        let base = snapshot.version();
        let first_base = *first_base.get_or_insert(base);
        match check_guard(uri, table, txns, &snapshot, &commit.guard, &commit.transactions).await {
            Ok(None) => {}
            // Refused after an earlier try failed: that try's write may have landed late (a
            // request the store carried out after this writer had read the log back), and be
            // what the guard sees. Only a log without this commit's id makes it a refusal.
            Ok(Some(reason)) if attempts > 1 => {
                return match find_commit(&table.log_store(), Versions::After(first_base), &id, retry).await {
                    Ok(Some(version)) => {
                        warn!(table = uri, version, "an earlier try of the commit landed late");
                        Ok(landed(table, uri, version, attempts, false, false).await)
                    }
                    Ok(None) => Ok(Landed::Refused { reason }),
                    Err(e) => Err(CommitFailure::Unknown(LakeError::CommitUnknown {
                        uri: uri.to_owned(),
                        attempts,
                        commit_error: last_error,
                        source: Box::new(e),
                    })),
                };
            }
            Ok(Some(reason)) => return Ok(Landed::Refused { reason }),
            Err(e) => {
                debug!(table = uri, attempts, error = %e, "could not check the commit's guard");
                last_error = e.to_string();
                continue;
            }
        }
        let log_store = table.log_store();
        let checkpoint = checkpoint_due(table, base + 1).await;
        let properties = CommitProperties::default()
            // Never delta-rs' own retries: they cannot tell a version of this commit's from a
            // competitor's, and would commit the same files again.
            .with_max_retries(0)
            // Never delta-rs' expired-log cleanup after the commit: it lists the whole
            // `_delta_log` (a month of per-second commits is millions of keys), which would make
            // every commit slower as the log grows. The maintenance pass cleans the log instead.
            .with_cleanup_expired_logs(Some(false))
            // A checkpoint only where one is due: they are spaced by their size.
            .with_create_checkpoint(checkpoint)
            .with_metadata(metadata.iter().cloned())
            .with_application_transactions(commit.transactions.clone());
        let prepared = CommitBuilder::from(properties)
            .with_actions(commit.actions.clone())
            .build(Some(&snapshot), log_store.clone(), commit.operation.clone())
            .into_prepared_commit_future()
            .await;
        let prepared = match prepared {
            Ok(prepared) => prepared,
            // Nothing was written: the commit bytes are only prepared in memory.
            Err(e) if permanent(&e) => return Err(CommitFailure::NotCommitted(LakeError::delta(uri, e))),
            Err(e) => {
                last_error = e.to_string();
                continue;
            }
        };
        let error = match prepared.await {
            Ok(post_commit) => {
                let version = post_commit.version;
                // The version is in the log; what follows is best effort, and stops at the
                // deadline: the caller must still answer that the commit landed, or its batch is
                // delivered again (and bisected) for nothing.
                let left = retry.deadline().saturating_duration_since(Instant::now());
                let (post_commit_failed, checkpointed) = match tokio::time::timeout(left, post_commit).await {
                    Ok(Ok(finalized)) => (false, finalized.metrics.new_checkpoint_created),
                    Ok(Err(e)) => {
                        warn!(table = uri, version, error = %e, "committed, but a post-commit step failed (checkpoint); left to the next writer or maintenance");
                        (true, false)
                    }
                    Err(_) => {
                        warn!(
                            table = uri,
                            version,
                            "committed; the post-commit step (checkpoint) was stopped at the deadline and is left to the next writer or maintenance"
                        );
                        (true, false)
                    }
                };
                txns.committed(version, &commit.transactions).await;
                return Ok(landed(table, uri, version, attempts, post_commit_failed, checkpointed).await);
            }
            Err(e) => e,
        };
        match find_commit(&log_store, Versions::Only(base + 1), &id, retry).await {
            Ok(Some(version)) => {
                warn!(table = uri, version, error = %error, "the commit landed although the store reported an error");
                return Ok(landed(table, uri, version, attempts, false, false).await);
            }
            Ok(None) if permanent(&error) => {
                return Err(CommitFailure::NotCommitted(LakeError::delta(uri, error)));
            }
            Ok(None) => {
                debug!(table = uri, attempts, base, error = %error, "not committed, trying again");
                ambiguous |= !refused_outright(&error);
                last_error = error.to_string();
            }
            Err(e) => {
                return Err(CommitFailure::Unknown(LakeError::CommitUnknown {
                    uri: uri.to_owned(),
                    attempts,
                    commit_error: error.to_string(),
                    source: Box::new(e),
                }));
            }
        }
    }
}

/// The commit landed as `version`: brings `table` to it (if that fails, the next refresh
/// catches up) and says so.
async fn landed(
    table: &mut DeltaTable,
    uri: &str,
    version: u64,
    attempts: u32,
    post_commit_failed: bool,
    checkpointed: bool,
) -> Landed {
    if let Err(e) = table.update_incremental(Some(version)).await {
        warn!(table = uri, version, error = %e, "could not refresh the table after commit");
    }
    Landed::Version {
        version,
        attempts,
        post_commit_failed,
        checkpointed,
    }
}

/// Why the commit must not go ahead on `snapshot`, the version `table` has loaded, if it must not.
async fn check_guard(
    uri: &str,
    table: &DeltaTable,
    txns: &Txns,
    snapshot: &deltalake::table::state::DeltaTableState,
    guard: &Guard<'_>,
    transactions: &[Transaction],
) -> Result<Option<String>, LakeError> {
    match guard {
        Guard::None => Ok(None),
        Guard::NewTransactions => {
            for txn in transactions {
                if is_committed(uri, table, txns, &txn.app_id).await? {
                    return Ok(Some(format!(
                        "version {} or earlier already records {}",
                        snapshot.version(),
                        txn.app_id
                    )));
                }
            }
            Ok(None)
        }
        Guard::Positions(advances) => {
            for advance in advances.iter() {
                let now = positions::position(uri, table, txns, &advance.stream).await?;
                if now != advance.from {
                    return Ok(Some(format!(
                        "version {} moved stream {} to {} (this commit read {})",
                        snapshot.version(),
                        advance.stream,
                        now.as_deref().unwrap_or("no position"),
                        advance.from.as_deref().unwrap_or("no position")
                    )));
                }
            }
            Ok(None)
        }
        Guard::Active(paths) => {
            let active: std::collections::HashSet<String> =
                snapshot.log_data().iter().map(|f| f.path().into_owned()).collect();
            Ok(paths
                .iter()
                .find(|p| !active.contains(**p))
                .map(|gone| format!("{gone} is no longer active in version {}", snapshot.version())))
        }
    }
}

/// Which versions may carry a commit.
#[derive(Debug, Clone, Copy)]
enum Versions {
    /// Only this one: a try on base `b` writes nothing but version `b + 1` (delta-rs' own
    /// retries are off), so that is where it landed if it did.
    Only(u64),
    /// Every version after this one, up to the newest.
    After(u64),
}

/// The version of `versions` whose commit carries `id`, reading the log until the deadline of
/// `retry` if the store fails; `Ok(None)` once they were read without it.
async fn find_commit(
    log_store: &LogStoreRef,
    versions: Versions,
    id: &str,
    retry: &Retry,
) -> Result<Option<u64>, DeltaTableError> {
    let needle = id.as_bytes();
    let mut tries = 0u32;
    loop {
        let found = async {
            let range = match versions {
                Versions::Only(version) => version..=version,
                Versions::After(base) => base + 1..=log_store.get_latest_version(base).await?,
            };
            for version in range {
                if let Some(bytes) = log_store.read_commit_entry(version).await?
                    && memchr::memmem::find(&bytes, needle).is_some()
                {
                    return Ok(Some(version));
                }
            }
            Ok::<_, DeltaTableError>(None)
        }
        .await;
        match found {
            Ok(found) => return Ok(found),
            Err(e) => {
                tries += 1;
                // Reading the log back is worth more than the deadline's margin: without it the
                // commit's files can never be cleaned up by this writer, and its source is retried.
                if !retry.wait(tries).await {
                    return Err(e);
                }
                debug!(?versions, error = %e, "could not read the log back, trying again");
            }
        }
    }
}

/// Whether `source` was already written to `table` (its `txn` is there and has not expired).
///
/// A source not asked about before costs a replay of the `txn` actions of the log since the last
/// checkpoint (and the checkpoint's), so check the sources of one invocation, not of a whole
/// backfill, against one snapshot; one asked about before costs nothing ([`Txns`]).
pub(crate) async fn is_committed(uri: &str, table: &DeltaTable, txns: &Txns, source: &str) -> Result<bool, LakeError> {
    Ok(txns.version(uri, table, source).await?.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::append::commit_sources;
    use crate::append::tests::write_source;
    use crate::create::open_or_create;
    use crate::create::tests::spec;
    use crate::storage::StorageConfig;

    #[test]
    fn delays_grow_to_the_cap_and_stay_below_the_ceiling() {
        let retry =
            Retry::within(Duration::from_secs(60)).with_delays(Duration::from_millis(10), Duration::from_millis(80));
        for _ in 0..200 {
            assert!(retry.delay(1) <= Duration::from_millis(10));
            assert!(retry.delay(3) <= Duration::from_millis(40));
            assert!(retry.delay(30) <= Duration::from_millis(80));
        }
        // Jittered: not every wait is the ceiling.
        let waits: std::collections::HashSet<Duration> = (0..50).map(|_| retry.delay(30)).collect();
        assert!(waits.len() > 10, "{waits:?}");
    }

    #[test]
    fn a_wall_clock_deadline_keeps_its_margin() {
        let now_ms = chrono::Utc::now().timestamp_millis() as u64;
        let retry = Retry::for_invocation(now_ms + 60_000, Duration::from_secs(10));
        let left = retry.deadline().saturating_duration_since(Instant::now());
        assert!(
            left <= Duration::from_secs(50) && left > Duration::from_secs(45),
            "{left:?}"
        );
        assert!(Retry::for_invocation(now_ms, Duration::from_secs(10)).expired());
        let unbounded = Retry::for_invocation(0, Duration::from_secs(10));
        assert!(unbounded.deadline() > Instant::now() + Duration::from_secs(100));
    }

    #[tokio::test]
    async fn no_wait_past_the_deadline() {
        let retry =
            Retry::within(Duration::from_millis(5)).with_delays(Duration::from_secs(10), Duration::from_secs(10));
        // A wait of up to ten seconds would, in all but a vanishing share of draws, end past it.
        let started = Instant::now();
        let mut waited = 0;
        for _ in 0..20 {
            if retry.wait(5).await {
                waited += 1;
            }
        }
        assert!(waited <= 1, "{waited}");
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[tokio::test]
    async fn every_commit_carries_an_id_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().join("t").to_str().unwrap().to_owned();
        let mut table = open_or_create(&uri, &spec(), &StorageConfig::default()).await.unwrap();
        let mut ids = std::collections::HashSet::new();
        for n in 0..3 {
            let files = write_source(&uri, &table, &format!("s3://raw/{n}"), &["1"]).await;
            let outcome = commit_sources(&uri, &mut table, &Txns::default(), vec![files], &Retry::default())
                .await
                .unwrap();
            assert_eq!(outcome.attempts, 1);
            let version = outcome.version.unwrap();
            let log = std::fs::read_to_string(dir.path().join(format!("t/_delta_log/{version:020}.json"))).unwrap();
            let info: serde_json::Value = log
                .lines()
                .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
                .find_map(|a| a.get("commitInfo").cloned())
                .unwrap();
            assert!(ids.insert(info[COMMIT_ID_KEY].as_str().unwrap().to_owned()), "{info}");
        }
    }
}
