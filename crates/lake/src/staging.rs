//! Staged appends: writers that never contend with each other, and one committer per table.
//!
//! One Delta table takes a few commits a second, however many write it, and fewer as more
//! writers contend. So the writers of ordered streams (a Kinesis shard each) do not commit: a
//! writer writes its data files, then records what they hold in a *link* of its stream's chain,
//! and its batch is done once the link is durable. A committer then commits the links of every
//! stream in one Delta version, with each stream's new position (see [`crate::positions`]), so the
//! table sees one commit per pass whatever the number of streams.
//!
//! A stream's links live under `_lakelog_staged/<stream, hex>/` in the table's folder (Delta
//! readers and VACUUM leave names starting with `_` alone). A link is named by the position it
//! follows (`start` for a stream the table has no position of) and holds the position of its last
//! record and the files. It is written with put-if-absent, so each position is followed by one
//! link only: two writers handed the same records (a redelivery, a writer that was thought dead)
//! race for the same name and one of them loses, writing nothing. A writer's records are those
//! after its stream's *staged* position: the last record of the newest link, or the table's
//! position when the stream has no link.
//!
//! The committer walks each stream's chain from the table's position: the link named by it, then
//! the link named by that link's last record, and so on. The commit is guarded by the positions it
//! started from, so a second committer at the same time finds its guard broken and commits
//! nothing; a commit that lands late, or a committer killed after its commit, leaves links behind
//! the position, which the next pass deletes. Each stream keeps its newest link (even when
//! committed) so writers learn where the chain ends without reading the table.
//!
//! Writers whose rows come from sources that a `txn` each records (log objects) stage a *source
//! link* instead ([`Table::stage_sources`](crate::Table::stage_sources)): any name under `_lakelog_staged_sources/`, holding each
//! source's files. Two writers handed the same source both stage it; the committer commits each
//! source once, with its `txn`, leaving out sources the table already has and repeats of one.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use deltalake::DeltaTable;
use deltalake::kernel::{Action, Add};
use deltalake::logstore::ObjectStoreRef;
use futures::{StreamExt as _, TryStreamExt as _};
use object_store::{ObjectStoreExt as _, PutMode, PutOptions, PutPayload};
use serde::{Deserialize, Serialize};
use tracing::{debug, info, warn};

use crate::append::{SourceFiles, append_operation, now_micros};
use crate::commit::{Commit, CommitFailure, Guard, Landed, Retry, commit, delete_files};
use crate::error::LakeError;
use crate::files::read_object;
use crate::positions::{self, Advance};
use crate::txns::Txns;

/// The folder of the table where staged links are kept.
pub const STAGING_DIR: &str = "_lakelog_staged";

/// The folder of the table where source links are kept.
pub const SOURCES_DIR: &str = "_lakelog_staged_sources";

/// The name of the first link of a stream the table has no position of.
const START: &str = "start";

/// Links one committer pass of a table commits at most: a commit of about this many files stays
/// a few megabytes of log.
pub const MAX_LINKS_PER_COMMIT: usize = 2_000;

/// How many links a committer reads at once.
const READS_AT_ONCE: usize = 32;

/// What one link of a stream's chain holds: the files of the records after `from` up to `to`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Link {
    /// The stream.
    stream: String,
    /// The position the link follows; `None` for the first link of a stream.
    from: Option<String>,
    /// The position of its last record.
    to: String,
    /// Rows in its files.
    rows: u64,
    /// Its files, as their `add` actions will be committed.
    adds: Vec<Add>,
    /// When it was staged, in milliseconds since the Unix epoch.
    staged_at_ms: i64,
}

/// One source's files in a source link.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StagedSource {
    /// The source, recorded by a `txn` when committed.
    source: String,
    /// Rows in its files.
    rows: u64,
    /// Its files.
    adds: Vec<Add>,
}

/// A source link: the sources one writer staged at once.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SourcesLink {
    /// The sources.
    sources: Vec<StagedSource>,
    /// When it was staged, in milliseconds since the Unix epoch.
    staged_at_ms: i64,
}

/// A batch of a stream, staged: its link is durable and the committer will commit it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Staged {
    /// Rows in the staged files.
    pub rows: u64,
    /// Data files staged.
    pub files: usize,
}

/// What one committer pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StagedCommit {
    /// The version committed; `None` when nothing was staged.
    pub version: Option<u64>,
    /// Links committed.
    pub links: usize,
    /// Streams moved, or sources committed.
    pub streams: usize,
    /// Rows committed.
    pub rows: u64,
    /// Data files committed.
    pub files: usize,
    /// Tries the commit took.
    pub attempts: u32,
    /// Whether the commit's checkpoint failed (the maintenance pass writes one later).
    pub post_commit_failed: bool,
    /// How long the oldest committed link waited, in milliseconds.
    pub oldest_wait_ms: Option<i64>,
    /// Links left for a later pass (more than one pass takes).
    pub left: usize,
    /// Links behind their stream's position that were deleted.
    pub cleaned: usize,
    /// How long the oldest link left for a later pass has waited, in milliseconds: a link that
    /// waits for one that never comes shows here.
    pub oldest_left_ms: Option<i64>,
    /// Links of streams whose position cannot be told (see [`crate::positions`]): nothing of
    /// them is committed until an operator restores the position.
    pub stranded: usize,
    /// Links set aside to [`ASIDE_DIR`] this pass: they do not parse, or name a file that is gone.
    pub set_aside: usize,
}

impl StagedCommit {
    /// Whether the pass found nothing: no link committed, none left waiting, stranded or set aside.
    pub fn idle(&self) -> bool {
        self.version.is_none() && self.links == 0 && self.left == 0 && self.stranded == 0 && self.set_aside == 0
    }
}

/// The folder of `stream`'s links: the stream's bytes in hex, so that any stream name is one
/// plain path segment.
fn stream_dir(stream: &str) -> String {
    let mut dir = String::with_capacity(STAGING_DIR.len() + 1 + stream.len() * 2);
    dir.push_str(STAGING_DIR);
    dir.push('/');
    for byte in stream.bytes() {
        dir.push_str(&format!("{byte:02x}"));
    }
    dir
}

/// A position without leading zeros, as links are named and matched.
fn normal(position: &str) -> String {
    let digits = position.trim_start_matches('0');
    if digits.is_empty() {
        "0".to_owned()
    } else {
        digits.to_owned()
    }
}

/// The stream whose links `dir` holds (see [`stream_dir`]).
fn stream_of(dir: &str) -> Option<String> {
    let hex = dir.rsplit('/').next()?;
    if hex.len() % 2 != 0 {
        return None;
    }
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    String::from_utf8(bytes).ok()
}

/// The name of the link that follows `from` in its stream's folder.
fn link_name(from: Option<&str>) -> String {
    format!("{}.json", from.map_or_else(|| START.to_owned(), normal))
}

/// The position a link's name says it follows: `Some(None)` for the first link, `None` for a name
/// that is no link.
fn link_from(name: &str) -> Option<Option<String>> {
    let stem = name.rsplit('/').next()?.strip_suffix(".json")?;
    if stem == START {
        Some(None)
    } else if positions::is_position(stem) {
        Some(Some(stem.to_owned()))
    } else {
        None
    }
}

/// Orders positions a link may follow: the start first, then by value.
fn compare_from(a: &Option<String>, b: &Option<String>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(a), Some(b)) => positions::compare(a, b),
    }
}

fn object_error(uri: &str, action: &'static str, object: &str, e: impl std::fmt::Display) -> LakeError {
    LakeError::Object {
        uri: uri.to_owned(),
        action,
        object: object.to_owned(),
        reason: e.to_string(),
    }
}

/// The names of the objects under `prefix`.
async fn list(uri: &str, store: &ObjectStoreRef, prefix: &str) -> Result<Vec<String>, LakeError> {
    store
        .list(Some(&deltalake::Path::from(prefix)))
        .map_ok(|meta| meta.location.to_string())
        .try_collect()
        .await
        .map_err(|e| object_error(uri, "listing", prefix, e))
}

/// The link (of a stream, or of sources) at `name`; `None` when it is gone (a committer deleted
/// it).
async fn read_link<T: serde::de::DeserializeOwned>(
    uri: &str,
    store: &ObjectStoreRef,
    name: &str,
) -> Result<Option<T>, LakeError> {
    let Some(bytes) = read_object(uri, store, name).await? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| object_error(uri, "reading", name, format!("not a staged link: {e}")))
}

/// The data files (paths relative to the table, decoded) that staged links name, committed or
/// not: files a purge must leave alone while a link may still bring them into the table.
pub(crate) async fn staged_files(
    uri: &str,
    store: &ObjectStoreRef,
) -> Result<std::collections::HashSet<String>, LakeError> {
    let mut files = std::collections::HashSet::new();
    for name in list(uri, store, STAGING_DIR).await? {
        if link_from(&name).is_none() {
            continue;
        }
        if let Some(link) = read_link::<Link>(uri, store, &name).await? {
            files.extend(link.adds.iter().map(|a| crate::commit::decode_path(&a.path)));
        }
    }
    for name in list(uri, store, SOURCES_DIR).await? {
        if let Some(link) = read_link::<SourcesLink>(uri, store, &name).await? {
            files.extend(
                link.sources
                    .iter()
                    .flat_map(|s| &s.adds)
                    .map(|a| crate::commit::decode_path(&a.path)),
            );
        }
    }
    Ok(files)
}

/// Takes the statistics (each column's smallest and largest value) out of the `add`s of staged
/// links whose statistics `names` (an erasure's ids): a link kept as its stream's newest after its
/// commit would otherwise hold an erased id as a file's smallest or largest value for as long as
/// the stream stays quiet, whether its file was since rewritten, compacted or vacuumed. A link
/// still waiting loses them too; its `add`s are committed without (readers skip no file by them).
/// The links rewritten.
pub(crate) async fn forget_stats(
    uri: &str,
    store: &ObjectStoreRef,
    names: impl Fn(&[u8]) -> bool,
) -> Result<usize, LakeError> {
    let strip = |adds: &mut Vec<Add>| {
        let mut changed = false;
        for add in adds.iter_mut() {
            if add.stats.as_deref().is_some_and(|stats| names(stats.as_bytes())) {
                add.stats = None;
                changed = true;
            }
        }
        changed
    };
    let mut rewritten = Vec::new();
    for name in list(uri, store, STAGING_DIR).await? {
        if link_from(&name).is_none() {
            continue;
        }
        if let Some(mut link) = read_link::<Link>(uri, store, &name).await?
            && strip(&mut link.adds)
        {
            rewritten.push((name, serde_json::to_vec(&link)));
        }
    }
    for name in list(uri, store, SOURCES_DIR).await? {
        if let Some(mut link) = read_link::<SourcesLink>(uri, store, &name).await?
            && link.sources.iter_mut().fold(false, |any, s| strip(&mut s.adds) | any)
        {
            rewritten.push((name, serde_json::to_vec(&link)));
        }
    }
    let count = rewritten.len();
    for (name, bytes) in rewritten {
        let bytes = bytes.map_err(|e| object_error(uri, "writing", &name, e))?;
        // Overwritten in place: a committer that deleted it meanwhile (it was behind its stream's
        // position) finds it again behind the position and deletes it again.
        store
            .put(&deltalake::Path::from(name.as_str()), PutPayload::from(bytes))
            .await
            .map_err(|e| object_error(uri, "writing", &name, e))?;
    }
    Ok(count)
}

/// The streams that have a folder of links (each keeps its newest link, so every stream ever
/// staged).
pub(crate) async fn streams(uri: &str, store: &ObjectStoreRef) -> Result<Vec<String>, LakeError> {
    let mut found: Vec<String> = list(uri, store, STAGING_DIR)
        .await?
        .iter()
        .filter(|name| link_from(name).is_some())
        .filter_map(|name| name.rsplit_once('/').and_then(|(dir, _)| stream_of(dir)))
        .collect();
    found.sort();
    found.dedup();
    Ok(found)
}

/// How far `stream` is staged: the last record of its newest link, or `None` when it has no link
/// (the table's position then says).
pub(crate) async fn staged_position(
    uri: &str,
    store: &ObjectStoreRef,
    stream: &str,
) -> Result<Option<Option<String>>, LakeError> {
    let dir = stream_dir(stream);
    // A committer may delete the newest link between the listing and the read when a newer one
    // came: then list again.
    for _ in 0..5 {
        let newest = list(uri, store, &dir)
            .await?
            .into_iter()
            .filter_map(|name| link_from(&name).map(|from| (from, name)))
            .max_by(|a, b| compare_from(&a.0, &b.0));
        let Some((_, name)) = newest else {
            return Ok(None);
        };
        if let Some(link) = read_link::<Link>(uri, store, &name).await? {
            return Ok(Some(Some(link.to)));
        }
    }
    Err(object_error(
        uri,
        "reading",
        &dir,
        "the newest staged link kept disappearing",
    ))
}

/// What one committer invocation (one tick of its schedule) did, as the function answers it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CommitSummary {
    /// Passes run.
    pub passes: u32,
    /// Passes, or tables of a pass, whose commit failed (their work stays staged for the next).
    pub failed: u32,
    /// Versions committed.
    pub commits: u32,
    /// Links committed.
    pub links: usize,
    /// Rows committed.
    pub rows: u64,
}

impl CommitSummary {
    /// Adds one table's commit of a pass.
    pub fn add(&mut self, commit: &StagedCommit) {
        self.commits += u32::from(commit.version.is_some());
        self.links += commit.links;
        self.rows += commit.rows;
    }
}

/// How long one committer invocation runs its passes: a scheduled function invoked once a minute
/// then has one committer at a time, the next starting as this one ends.
pub const TICK: std::time::Duration = std::time::Duration::from_secs(55);

/// What a committer's pass tells the loop it runs in ([`every`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Run the next pass at its time.
    Again,
    /// Nothing was staged or waiting: end the loop now, and let the next tick find what is staged
    /// meanwhile (a committer then costs what it commits, not a whole tick).
    Idle,
}

/// Runs `pass` every `interval` (from the start of one to the start of the next) until `stop`,
/// or, when a pass ends past `stop`, once more not at all, or until a pass says [`Next::Idle`];
/// returns the passes run. A committer's loop: each pass is one
/// [`Table::commit_staged`](crate::Table::commit_staged) of its tables.
pub async fn every<F, Fut>(interval: std::time::Duration, stop: std::time::Instant, mut pass: F) -> u32
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Next>,
{
    let mut passes = 0;
    loop {
        let started = std::time::Instant::now();
        if started >= stop && passes > 0 {
            return passes;
        }
        passes += 1;
        if pass().await == Next::Idle {
            return passes;
        }
        let next = started + interval;
        if next >= stop {
            return passes;
        }
        tokio::time::sleep_until(next.into()).await;
    }
}

/// Whether two links name the same files (file names are unique to their writer).
fn same_files(a: &[Add], b: &[Add]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(a, b)| a.path == b.path)
}

/// Stages `files`, the rows of `advance.stream` after `advance.from` up to `advance.to`: writes
/// the link that follows `advance.from`, if no other writer wrote it first. When one did, the
/// files are deleted and [`LakeError::Conflict`] says so: nothing was staged, and the batch is to
/// be handed over again (its records are then after the new staged position, or staged already).
pub(crate) async fn stage(
    uri: &str,
    store: &ObjectStoreRef,
    files: SourceFiles,
    advance: &Advance,
) -> Result<Staged, LakeError> {
    if !positions::is_position(&advance.to) {
        return Err(LakeError::InvalidPosition {
            uri: uri.to_owned(),
            stream: advance.stream.clone(),
            position: advance.to.chars().take(160).collect(),
        });
    }
    let staged = Staged {
        rows: files.rows,
        files: files.adds.len(),
    };
    let link = Link {
        stream: advance.stream.clone(),
        from: advance.from.clone(),
        to: advance.to.clone(),
        rows: files.rows,
        adds: files.adds,
        staged_at_ms: now_micros() / 1000,
    };
    let name = format!("{}/{}", stream_dir(&advance.stream), link_name(advance.from.as_deref()));
    let bytes = serde_json::to_vec(&link).map_err(|e| object_error(uri, "writing", &name, e))?;
    let options = PutOptions {
        mode: PutMode::Create,
        ..PutOptions::default()
    };
    match store
        .put_opts(&deltalake::Path::from(name.as_str()), PutPayload::from(bytes), options)
        .await
    {
        Ok(_) => {
            debug!(table = uri, link = name, rows = staged.rows, "staged");
            Ok(staged)
        }
        Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => {
            // The store's own retry of a write that it carried out but answered with an error
            // meets that write: then the link there is this one.
            match read_link::<Link>(uri, store, &name).await {
                Ok(Some(there)) if same_files(&there.adds, &link.adds) => {
                    debug!(table = uri, link = name, "staged (the store's retry met its own write)");
                    return Ok(staged);
                }
                Ok(_) => {}
                // Unknown whose link it is: the files stay (VACUUM removes them if not).
                Err(e) => return Err(e),
            }
            delete_files(store, &link.adds).await;
            Err(LakeError::Conflict {
                uri: uri.to_owned(),
                reason: format!(
                    "stream {} was staged past {} by another writer",
                    advance.stream,
                    advance.from.as_deref().unwrap_or("its start")
                ),
            })
        }
        // The link may have been written all the same: its files stay (a redelivery finds the
        // link, or stages them again and VACUUM removes these).
        Err(e) => Err(object_error(uri, "writing", &name, e)),
    }
}

/// Stages the files of `sources` in one source link, for the committer to commit with a `txn` per
/// source. A source staged twice (a redelivery) is committed once. On an error the link may have
/// been written all the same, so the files stay (VACUUM removes them if it was not).
pub(crate) async fn stage_sources(
    uri: &str,
    store: &ObjectStoreRef,
    sources: Vec<SourceFiles>,
) -> Result<Staged, LakeError> {
    let mut staged = Staged::default();
    let link = SourcesLink {
        sources: sources
            .into_iter()
            .map(|files| {
                staged.rows += files.rows;
                staged.files += files.adds.len();
                StagedSource {
                    source: files.source().to_owned(),
                    rows: files.rows,
                    adds: files.adds,
                }
            })
            .collect(),
        staged_at_ms: now_micros() / 1000,
    };
    if link.sources.is_empty() {
        return Ok(staged);
    }
    let name = format!("{SOURCES_DIR}/{}.json", uuid::Uuid::new_v4());
    let bytes = serde_json::to_vec(&link).map_err(|e| object_error(uri, "writing", &name, e))?;
    store
        .put(&deltalake::Path::from(name.as_str()), PutPayload::from(bytes))
        .await
        .map_err(|e| object_error(uri, "writing", &name, e))?;
    debug!(table = uri, link = name, rows = staged.rows, "sources staged");
    Ok(staged)
}

/// Commits the sources of every source link, each once and only if the table does not have it
/// yet, in one version with a `txn` each; then deletes the links read. At most `max_links` links.
async fn commit_staged_sources(
    uri: &str,
    table: &mut DeltaTable,
    txns: &Txns,
    max_links: usize,
    retry: &Retry,
    report: &mut StagedCommit,
) -> Result<(), LakeError> {
    let store = table.object_store();
    let mut names: Vec<String> = list(uri, &store, SOURCES_DIR)
        .await?
        .into_iter()
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    report.left += names.len().saturating_sub(max_links);
    names.truncate(max_links);
    if names.is_empty() {
        return Ok(());
    }
    let read: Vec<(String, Option<SourcesLink>)> = futures::stream::iter(names)
        .map(|name| {
            let store = store.clone();
            async move { read_link(uri, &store, &name).await.map(|link| (name, link)) }
        })
        .buffered(READS_AT_ONCE)
        .try_collect()
        .await?;
    let now_ms = now_micros() / 1000;
    let mut seen = std::collections::HashSet::new();
    let (mut actions, mut transactions) = (Vec::new(), Vec::new());
    let mut done: Vec<String> = Vec::new();
    let (mut links, mut rows, mut files, mut committed_sources) = (0usize, 0u64, 0usize, 0usize);
    let mut oldest: Option<i64> = None;
    for (name, link) in read {
        let Some(link) = link else { continue };
        links += 1;
        oldest = Some(oldest.map_or(now_ms - link.staged_at_ms, |o: i64| o.max(now_ms - link.staged_at_ms)));
        for staged in link.sources {
            if !seen.insert(staged.source.clone())
                || crate::commit::is_committed(uri, table, txns, &staged.source).await?
            {
                // Committed already, or staged twice: these files are in no version (or are the
                // ones a killed committer committed); VACUUM removes what no version names.
                continue;
            }
            rows += staged.rows;
            files += staged.adds.len();
            committed_sources += 1;
            transactions.push(deltalake::kernel::Transaction::new_with_last_update(
                &staged.source,
                1,
                Some(now_ms),
            ));
            actions.extend(staged.adds.into_iter().map(Action::Add));
        }
        done.push(name);
    }
    if !transactions.is_empty() {
        let landed =
            commit_staged_files(uri, table, txns, actions, transactions, Guard::NewTransactions, retry).await?;
        report.version = Some(landed.version);
        report.attempts += landed.attempts;
        report.post_commit_failed |= landed.post_commit_failed;
        report.streams += committed_sources;
        info!(
            table = uri,
            version = landed.version,
            links,
            rows,
            "committed staged sources"
        );
        report.rows += rows;
        report.files += files;
    }
    report.links += links;
    if let Some(oldest) = oldest {
        report.oldest_wait_ms = Some(report.oldest_wait_ms.map_or(oldest, |w| w.max(oldest)));
    }
    report.cleaned += done.len();
    delete_links(uri, &store, done).await;
    Ok(())
}

/// Deletes committed links, `READS_AT_ONCE` at a time, best effort: a link left behind is found
/// committed (behind its stream's position, or its sources in the table) by the next pass, which
/// deletes it then.
async fn delete_links(uri: &str, store: &ObjectStoreRef, names: Vec<String>) {
    futures::stream::iter(names)
        .for_each_concurrent(READS_AT_ONCE, |name| {
            let store = store.clone();
            async move {
                if let Err(e) = store.delete(&deltalake::Path::from(name.as_str())).await {
                    warn!(table = uri, link = name, error = %e, "could not delete a committed link; the next pass does");
                }
            }
        })
        .await;
}

/// A committer's commit that landed.
struct Appended {
    version: u64,
    attempts: u32,
    post_commit_failed: bool,
}

/// Commits staged files (`actions`) with `transactions` as one append that `guard` must allow.
/// The files stay whatever happens: their links name them for a later pass.
async fn commit_staged_files(
    uri: &str,
    table: &mut DeltaTable,
    txns: &Txns,
    actions: Vec<Action>,
    transactions: Vec<deltalake::kernel::Transaction>,
    guard: Guard<'_>,
    retry: &Retry,
) -> Result<Appended, LakeError> {
    let to_commit = Commit {
        uri,
        actions,
        transactions,
        operation: append_operation(uri, table)?,
        metadata: Vec::new(),
        guard,
        keep_files: true,
    };
    match commit(table, txns, to_commit, retry).await {
        Ok(Landed::Version {
            version,
            attempts,
            post_commit_failed,
            ..
        }) => Ok(Appended {
            version,
            attempts,
            post_commit_failed,
        }),
        Ok(Landed::Refused { reason }) => Err(LakeError::Conflict {
            uri: uri.to_owned(),
            reason,
        }),
        Err(CommitFailure::NotCommitted(e) | CommitFailure::Unknown(e)) => Err(e),
    }
}

/// The links of one stream found by a committer pass.
#[derive(Debug, Default)]
struct StreamLinks {
    /// Every link, by the position it follows.
    links: Vec<(Option<String>, String)>,
}

/// Commits the staged links of every stream that follow its position in `table`, in one
/// version, with each stream's new position; at most `max_links` links. Links behind a stream's
/// position (committed by an earlier pass) are deleted, all but each stream's newest.
pub(crate) async fn commit_staged(
    uri: &str,
    table: &mut DeltaTable,
    txns: &Txns,
    max_links: usize,
    retry: &Retry,
) -> Result<StagedCommit, LakeError> {
    let store = table.object_store();
    table
        .update_incremental(None)
        .await
        .map_err(|e| LakeError::delta(uri, e))?;
    let mut streams: BTreeMap<String, StreamLinks> = BTreeMap::new();
    for name in list(uri, &store, STAGING_DIR).await? {
        let Some(from) = link_from(&name) else { continue };
        let Some((dir, _)) = name.rsplit_once('/') else {
            continue;
        };
        streams.entry(dir.to_owned()).or_default().links.push((from, name));
    }
    let mut report = StagedCommit::default();
    // Source links (log objects) first: a table has one kind or the other.
    commit_staged_sources(uri, table, txns, max_links, retry, &mut report).await?;
    if streams.is_empty() {
        return Ok(report);
    }
    // Each stream's position, and the links at or after it, read at once. A stream whose position
    // cannot be told is stranded: nothing of it is committed (never a guess), and it is counted.
    let mut wanted: Vec<String> = Vec::new();
    let mut behind: Vec<String> = Vec::new();
    let mut positions: BTreeMap<String, Option<String>> = BTreeMap::new();
    for links in streams.values_mut() {
        links.links.sort_by(|a, b| compare_from(&a.0, &b.0));
    }
    for (dir, links) in &streams {
        let Some(stream) = stream_of(dir) else {
            warn!(table = uri, folder = dir, "not a folder of staged links; left alone");
            continue;
        };
        let position = match positions::position(uri, table, txns, &stream).await {
            Ok(position) => position,
            Err(e @ LakeError::PositionsUnknown { .. }) => {
                warn!(table = uri, stream, error = %e, "stream stranded: its position cannot be told");
                report.stranded += links.links.len();
                continue;
            }
            Err(e) => return Err(e),
        };
        let newest = links.links.last().map(|(_, name)| name.clone());
        for (from, name) in &links.links {
            let after = match (&position, from) {
                (None, _) => true,
                (Some(_), None) => false,
                (Some(p), Some(f)) => positions::compare(f, p) != Ordering::Less,
            };
            if after {
                wanted.push(name.clone());
            } else if Some(name) != newest.as_ref() {
                behind.push(name.clone());
            }
        }
        positions.insert(stream, position);
    }
    let read: Vec<(String, Option<bytes::Bytes>)> = futures::stream::iter(wanted)
        .map(|name| {
            let store = store.clone();
            async move { read_object(uri, &store, &name).await.map(|bytes| (name, bytes)) }
        })
        .buffered(READS_AT_ONCE)
        .try_collect()
        .await?;
    let now_ms = now_micros() / 1000;
    let mut by_from: BTreeMap<(String, Option<String>), (String, Link)> = BTreeMap::new();
    for (name, bytes) in read.into_iter() {
        let Some(bytes) = bytes else { continue };
        let link = match serde_json::from_slice::<Link>(&bytes) {
            Ok(link) => link,
            Err(e) => {
                set_aside(uri, &store, &name, &format!("not a staged link: {e}"), &mut report).await;
                continue;
            }
        };
        if now_ms - link.staged_at_ms > CHECK_FILES_AFTER_MS
            && let Some(missing) = missing_file(&store, &link.adds).await
        {
            set_aside(uri, &store, &name, &format!("its file {missing} is gone"), &mut report).await;
            continue;
        }
        let from = link.from.as_deref().map(normal);
        by_from.insert((link.stream.clone(), from), (name, link));
    }
    // Walk each chain from its stream's position.
    let mut actions: Vec<Action> = Vec::new();
    let mut advances: Vec<Advance> = Vec::new();
    let mut committed: Vec<String> = Vec::new();
    for (stream, position) in &positions {
        let mut at = position.clone();
        while report.links < max_links {
            let key = (stream.clone(), at.as_deref().map(normal));
            let Some((name, link)) = by_from.remove(&key) else {
                break;
            };
            report.links += 1;
            report.rows += link.rows;
            report.files += link.adds.len();
            let waited = now_ms - link.staged_at_ms;
            report.oldest_wait_ms = Some(report.oldest_wait_ms.map_or(waited, |w| w.max(waited)));
            actions.extend(link.adds.into_iter().map(Action::Add));
            at = Some(link.to);
            committed.push(name);
        }
        if at != *position
            && let Some(to) = at
        {
            advances.push(Advance {
                stream: stream.clone(),
                from: position.clone(),
                to,
            });
        }
    }
    report.left = by_from.len();
    report.oldest_left_ms = by_from.values().map(|(_, link)| now_ms - link.staged_at_ms).max();
    for ((stream, from), (name, _)) in &by_from {
        debug!(
            table = uri,
            stream,
            ?from,
            link = name,
            "staged link not next in its chain yet"
        );
    }
    if !advances.is_empty() {
        report.streams = advances.len();
        let mut transactions = Vec::new();
        for advance in &advances {
            transactions.extend(positions::transactions(uri, &advance.stream, &advance.to, now_ms)?);
        }
        let landed = commit_staged_files(
            uri,
            table,
            txns,
            actions,
            transactions,
            Guard::Positions(&advances),
            retry,
        )
        .await?;
        report.version = Some(landed.version);
        report.attempts = landed.attempts;
        report.post_commit_failed = landed.post_commit_failed;
        info!(
            table = uri,
            version = landed.version,
            links = report.links,
            streams = report.streams,
            rows = report.rows,
            "committed staged links"
        );
        // The committed links are behind their streams' new positions now; each stream's last
        // one stays, as the newest link of its chain.
        let last_of_stream: Vec<String> = positions
            .keys()
            .filter_map(|stream| streams.get(&stream_dir(stream)))
            .filter_map(|links| links.links.last().map(|(_, name)| name.clone()))
            .collect();
        behind.extend(committed.into_iter().filter(|name| !last_of_stream.contains(name)));
    }
    report.cleaned = behind.len();
    delete_links(uri, &store, behind).await;
    let streams: Vec<String> = positions.into_keys().collect();
    if let Err(e) = positions::save_ledger(uri, table, txns, &streams, false).await {
        // The ledger is written again at the next pass; positions are in the log meanwhile.
        warn!(table = uri, error = %e, "could not write the position ledger");
    }
    Ok(report)
}

/// Links older than this have their files checked before they are committed: only a committer
/// stopped for a long time meets such links, and VACUUM or an operator may have deleted files.
const CHECK_FILES_AFTER_MS: i64 = 60 * 60 * 1000;

/// The folder where links that cannot be committed are set aside, with the same names below it.
pub const ASIDE_DIR: &str = "_lakelog_staged_aside";

/// The first of `adds` whose file is not in the store, if one is not.
async fn missing_file(store: &ObjectStoreRef, adds: &[Add]) -> Option<String> {
    for add in adds {
        let path = crate::commit::decode_path(&add.path);
        if let Err(object_store::Error::NotFound { .. }) = store.head(&deltalake::Path::from(path.as_str())).await {
            return Some(path);
        }
    }
    None
}

/// Moves a link that cannot be committed (it does not parse, or names a file that is gone) to
/// [`ASIDE_DIR`], so that it blocks no pass and an operator can see it; counted in the report's
/// `set_aside`, which an alarm reads.
async fn set_aside(uri: &str, store: &ObjectStoreRef, name: &str, reason: &str, report: &mut StagedCommit) {
    report.set_aside += 1;
    let aside = format!(
        "{ASIDE_DIR}/{}",
        name.strip_prefix(STAGING_DIR).unwrap_or(name).trim_start_matches('/')
    );
    let (from, to) = (deltalake::Path::from(name), deltalake::Path::from(aside.as_str()));
    match store.copy(&from, &to).await {
        Ok(()) => {
            if let Err(e) = store.delete(&from).await {
                warn!(table = uri, link = name, error = %e, "link set aside, but could not be deleted");
            }
            warn!(
                table = uri,
                link = name,
                aside,
                reason,
                "staged link set aside: it cannot be committed"
            );
        }
        Err(e) => warn!(table = uri, link = name, reason, error = %e, "staged link cannot be committed nor set aside"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::append::tests::batch;
    use crate::create::tests::spec;
    use crate::{StorageConfig, Table};

    /// The loop ends at once after a pass that says it was idle, long before its stop.
    #[tokio::test]
    async fn a_committer_loop_ends_after_an_idle_pass() {
        let interval = std::time::Duration::from_millis(10);
        let stop = std::time::Instant::now() + std::time::Duration::from_secs(600);
        let mut found = [3, 1, 0, 4].into_iter();
        let passes = every(interval, stop, || {
            let staged = found.next().unwrap_or(0);
            async move { if staged == 0 { Next::Idle } else { Next::Again } }
        })
        .await;
        assert_eq!(passes, 3);
    }

    async fn table(dir: &tempfile::TempDir) -> Table {
        let uri = dir.path().join("t").to_str().unwrap().to_owned();
        Table::open_or_create(&uri, &spec(), &StorageConfig::default())
            .await
            .unwrap()
    }

    async fn files(table: &Table, ids: &[&str]) -> SourceFiles {
        let mut writer = table.writer("kinesis").unwrap();
        writer.write(batch(ids, 19_000)).await.unwrap();
        writer.finish().await.unwrap()
    }

    /// Stages `ids` as the records of `stream` after its staged position, up to `to`.
    async fn stage_after(table: &mut Table, stream: &str, ids: &[&str], to: &str) -> Result<Staged, LakeError> {
        let from = table.staged_position(stream).await.unwrap();
        let files = files(table, ids).await;
        let advance = Advance {
            stream: stream.to_owned(),
            from,
            to: to.to_owned(),
        };
        table.stage(files, &advance).await
    }

    fn rows(table: &Table) -> u64 {
        table.file_stats().unwrap().rows
    }

    fn links(dir: &tempfile::TempDir) -> Vec<String> {
        let root = dir.path().join("t").join(STAGING_DIR);
        let mut names: Vec<String> = walk(&root).into_iter().filter(|n| link_from(n).is_some()).collect();
        names.sort();
        names
    }

    fn walk(dir: &std::path::Path) -> Vec<String> {
        walk_files(dir)
            .iter()
            .filter_map(|p| Some(p.file_name()?.to_string_lossy().into_owned()))
            .collect()
    }

    #[test]
    fn streams_and_links_are_named_reversibly() {
        let stream = "kinesis:arn:aws:kinesis:eu-west-1:1:stream/game-events/shardId-000000000001";
        assert_eq!(stream_of(&stream_dir(stream)).as_deref(), Some(stream));
        assert_eq!(link_name(None), "start.json");
        assert_eq!(link_name(Some("000120")), "120.json");
        assert_eq!(link_from("x/120.json"), Some(Some("120".to_owned())));
        assert_eq!(link_from("x/start.json"), Some(None));
        assert_eq!(link_from("x/notes.txt"), None);
        assert_eq!(compare_from(&None, &Some("0".into())), Ordering::Less);
    }

    #[tokio::test]
    async fn staged_links_are_committed_once_in_one_version_per_pass() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = table(&dir).await;
        let before = t.delta().version();
        for (stream, base) in [("a", 0), ("b", 100)] {
            stage_after(&mut t, stream, &["1", "2"], &(base + 2).to_string())
                .await
                .unwrap();
            stage_after(&mut t, stream, &["3"], &(base + 3).to_string())
                .await
                .unwrap();
        }
        // Nothing is in the table until the committer runs.
        assert_eq!(rows(&t), 0);
        assert_eq!(t.staged_position("a").await.unwrap().as_deref(), Some("3"));
        let report = t.commit_staged(1000, &Retry::default()).await.unwrap();
        assert_eq!((report.links, report.streams, report.rows, report.left), (4, 2, 6, 0));
        assert_eq!(t.delta().version(), before.map(|v| v + 1));
        assert_eq!(rows(&t), 6);
        assert_eq!(t.position("a").await.unwrap().as_deref(), Some("3"));
        assert_eq!(t.position("b").await.unwrap().as_deref(), Some("103"));
        // Each stream keeps its newest link, so writers know where its chain ends.
        assert_eq!(links(&dir), ["102.json", "2.json"]);
        assert_eq!(t.staged_position("b").await.unwrap().as_deref(), Some("103"));
        // A second pass has nothing to do.
        let again = t.commit_staged(1000, &Retry::default()).await.unwrap();
        assert_eq!((again.version, again.links), (None, 0));
        assert_eq!(rows(&t), 6);
    }

    #[tokio::test]
    async fn a_second_writer_of_the_same_records_stages_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = table(&dir).await;
        let first = files(&t, &["1", "2"]).await;
        let second = files(&t, &["1", "2"]).await;
        let advance = Advance {
            stream: "a".into(),
            from: None,
            to: "2".into(),
        };
        t.stage(first.clone(), &advance).await.unwrap();
        // The store answered the write with an error after carrying it out, and its retry meets
        // the link: it is this writer's, staged.
        t.stage(first, &advance).await.unwrap();
        let err = t.stage(second, &advance).await.unwrap_err();
        assert!(matches!(err, LakeError::Conflict { .. }), "{err}");
        t.commit_staged(1000, &Retry::default()).await.unwrap();
        assert_eq!(rows(&t), 2);
        // The loser's files were deleted: only the committed file is left in the partition.
        let parquet = walk(&dir.path().join("t"))
            .into_iter()
            .filter(|n| n.ends_with(".parquet"))
            .count();
        assert_eq!(parquet, 1);
    }

    #[tokio::test]
    async fn two_committers_at_once_commit_each_link_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = table(&dir).await;
        for i in 1..=20u32 {
            let stream = format!("s{}", i % 4);
            stage_after(&mut t, &stream, &["x"], &i.to_string()).await.unwrap();
        }
        let mut other = t.clone();
        let retry = Retry::default();
        let (a, b) = tokio::join!(t.commit_staged(1000, &retry), other.commit_staged(1000, &retry));
        let committed = [a, b].into_iter().map(|r| r.map_or(0, |c| c.links)).sum::<usize>();
        t.commit_staged(1000, &retry).await.unwrap();
        t.refresh().await.unwrap();
        assert_eq!(rows(&t), 20, "links committed by the two: {committed}");
    }

    #[tokio::test]
    async fn links_left_behind_by_a_killed_committer_are_not_committed_again() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = table(&dir).await;
        stage_after(&mut t, "a", &["1"], "1").await.unwrap();
        stage_after(&mut t, "a", &["2"], "2").await.unwrap();
        let kept = links(&dir);
        let saved: Vec<(std::path::PathBuf, Vec<u8>)> = std::fs::read_dir(dir.path().join("t").join(stream_dir("a")))
            .unwrap()
            .flatten()
            .map(|e| (e.path(), std::fs::read(e.path()).unwrap()))
            .collect();
        t.commit_staged(1000, &Retry::default()).await.unwrap();
        // As if the committer died after its commit, before deleting the links.
        for (path, bytes) in saved {
            std::fs::write(path, bytes).unwrap();
        }
        assert_eq!(links(&dir), kept);
        let again = t.commit_staged(1000, &Retry::default()).await.unwrap();
        assert_eq!((again.links, again.cleaned), (0, 1));
        assert_eq!(rows(&t), 2);
        // The next writer goes on after the newest link.
        stage_after(&mut t, "a", &["3"], "3").await.unwrap();
        t.commit_staged(1000, &Retry::default()).await.unwrap();
        assert_eq!(rows(&t), 3);
    }

    #[tokio::test]
    async fn a_pass_commits_at_most_its_share_and_the_next_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = table(&dir).await;
        for i in 1..=5u32 {
            stage_after(&mut t, "a", &["x"], &i.to_string()).await.unwrap();
        }
        let first = t.commit_staged(2, &Retry::default()).await.unwrap();
        assert_eq!((first.links, first.left), (2, 3));
        assert_eq!(t.position("a").await.unwrap().as_deref(), Some("2"));
        let second = t.commit_staged(1000, &Retry::default()).await.unwrap();
        assert_eq!(second.links, 3);
        assert_eq!(rows(&t), 5);
    }

    /// A table whose `txn` actions expire after a second, as any user may set.
    async fn short_lived_txns(dir: &tempfile::TempDir) -> Table {
        let uri = dir.path().join("t").to_str().unwrap().to_owned();
        let mut short = spec();
        short.properties.insert(
            "delta.setTransactionRetentionDuration".into(),
            "interval 1 second".into(),
        );
        Table::open_or_create(&uri, &short, &StorageConfig::default())
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn an_erasure_leaves_no_erased_id_in_the_statistics_of_kept_links() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = table(&dir).await;
        // A quiet stream's one batch: its link, kept as the stream's newest after its commit,
        // holds the file's smallest and largest id.
        stage_after(&mut t, "q", &["gone-1", "gone-2"], "1").await.unwrap();
        stage_after(&mut t, "r", &["stays"], "1").await.unwrap();
        t.commit_staged(1000, &Retry::default()).await.unwrap();
        let kept = |dir: &tempfile::TempDir| -> String {
            walk_files(&dir.path().join("t").join(STAGING_DIR))
                .iter()
                .map(|p| std::fs::read_to_string(p).unwrap())
                .collect()
        };
        assert!(
            kept(&dir).contains("gone-1"),
            "the kept link holds the id before the erasure"
        );
        let erasure = crate::Erasure::new(["gone-1", "gone-2"]).equals("id");
        t.erase(&erasure, &Retry::default()).await.unwrap();
        let purge = t.purge(&erasure).await.unwrap();
        assert_eq!(purge.links_rewritten, 1, "{purge:?}");
        let after = kept(&dir);
        assert!(!after.contains("gone-1") && !after.contains("gone-2"), "{after}");
        assert!(after.contains("stays"), "other links keep their statistics");
        // The stream goes on after its kept link, and nothing is committed twice.
        stage_after(&mut t, "q", &["q2"], "2").await.unwrap();
        let report = t.commit_staged(1000, &Retry::default()).await.unwrap();
        assert_eq!((report.links, report.left, report.stranded), (1, 0, 0), "{report:?}");
        assert_eq!(rows(&t), 2);
    }

    fn walk_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        entries
            .flatten()
            .flat_map(|e| {
                if e.path().is_dir() {
                    walk_files(&e.path())
                } else {
                    vec![e.path()]
                }
            })
            .collect()
    }

    #[tokio::test]
    async fn positions_outlive_the_txn_window() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = short_lived_txns(&dir).await;
        // Stream q has one batch (its kept link is `start.json`); r has two (its kept link is not).
        stage_after(&mut t, "q", &["q1"], "1").await.unwrap();
        stage_after(&mut t, "r", &["r1"], "1").await.unwrap();
        stage_after(&mut t, "r", &["r2"], "2").await.unwrap();
        t.commit_staged(1000, &Retry::default()).await.unwrap();
        assert_eq!(rows(&t), 3);
        tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
        // A committer that starts afresh (a new function instance) past the window.
        let uri = t.uri().to_owned();
        let mut fresh = Table::open(&uri, &StorageConfig::default()).await.unwrap();
        assert_eq!(fresh.position("q").await.unwrap().as_deref(), Some("1"));
        assert_eq!(fresh.position("r").await.unwrap().as_deref(), Some("2"));
        let again = fresh.commit_staged(1000, &Retry::default()).await.unwrap();
        assert_eq!((again.links, again.version), (0, None), "{again:?}");
        assert_eq!(rows(&fresh), 3, "a quiet stream's kept link was committed again");
        // New batches of both streams are committed, once.
        stage_after(&mut fresh, "q", &["q2"], "2").await.unwrap();
        stage_after(&mut fresh, "r", &["r3"], "3").await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
        let mut fresh = Table::open(&uri, &StorageConfig::default()).await.unwrap();
        let report = fresh.commit_staged(1000, &Retry::default()).await.unwrap();
        assert_eq!((report.links, report.left, report.stranded), (2, 0, 0), "{report:?}");
        assert_eq!(rows(&fresh), 5);
    }

    #[tokio::test]
    async fn a_position_whose_commits_are_gone_strands_its_stream() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = short_lived_txns(&dir).await;
        stage_after(&mut t, "q", &["q1"], "1").await.unwrap();
        t.commit_staged(1000, &Retry::default()).await.unwrap();
        stage_after(&mut t, "q", &["q2"], "2").await.unwrap();
        t.commit_staged(1000, &Retry::default()).await.unwrap();
        stage_after(&mut t, "z", &["z1"], "1").await.unwrap();
        t.commit_staged(1000, &Retry::default()).await.unwrap();
        t.checkpoint(false).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
        // The commits after the ledger's version are gone (a log cleaned by another engine while
        // the ledger was old), and the `txn` actions have expired: the positions cannot be told.
        let table_dir = dir.path().join("t");
        for version in 1..=2 {
            std::fs::remove_file(table_dir.join(format!("_delta_log/{version:020}.json"))).unwrap();
        }
        std::fs::write(
            table_dir.join(crate::positions::LEDGER),
            serde_json::json!({"version": 0, "positions": {}}).to_string(),
        )
        .unwrap();
        stage_after(&mut t, "q", &["q3"], "3").await.unwrap();
        let mut fresh = Table::open(t.uri(), &StorageConfig::default()).await.unwrap();
        let before = rows(&fresh);
        let report = fresh.commit_staged(1000, &Retry::default()).await.unwrap();
        // q's kept link and its new one, and z's kept link: nothing committed, all counted.
        assert_eq!((report.links, report.stranded), (0, 3), "{report:?}");
        assert_eq!(rows(&fresh), before);
    }

    #[tokio::test]
    async fn a_link_that_cannot_be_read_is_set_aside_and_the_rest_go_on() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = table(&dir).await;
        stage_after(&mut t, "a", &["1"], "1").await.unwrap();
        stage_after(&mut t, "b", &["2"], "2").await.unwrap();
        // A link of a format this release does not read.
        let a = dir.path().join("t").join(stream_dir("a")).join("start.json");
        std::fs::write(&a, br#"{"version":9,"what":"a future link"}"#).unwrap();
        let report = t.commit_staged(1000, &Retry::default()).await.unwrap();
        assert_eq!((report.links, report.set_aside), (1, 1), "{report:?}");
        assert_eq!(rows(&t), 1);
        assert!(!a.exists());
        assert!(
            dir.path()
                .join("t")
                .join(ASIDE_DIR)
                .join(stream_dir("a").trim_start_matches(STAGING_DIR).trim_start_matches('/'))
                .join("start.json")
                .exists()
        );
    }

    #[tokio::test]
    async fn a_link_whose_file_is_gone_is_set_aside_not_committed() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = table(&dir).await;
        stage_after(&mut t, "a", &["1"], "1").await.unwrap();
        // The link waited past the age its files are checked at, and VACUUM took a file.
        let path = dir.path().join("t").join(stream_dir("a")).join("start.json");
        let mut link: Link = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        link.staged_at_ms -= 8 * 24 * 3600 * 1000;
        std::fs::write(&path, serde_json::to_vec(&link).unwrap()).unwrap();
        std::fs::remove_file(
            dir.path()
                .join("t")
                .join(crate::commit::decode_path(&link.adds[0].path)),
        )
        .unwrap();
        let report = t.commit_staged(1000, &Retry::default()).await.unwrap();
        assert_eq!((report.links, report.set_aside), (0, 1), "{report:?}");
        assert_eq!(rows(&t), 0);
        // The table still reads: every file it names exists.
        assert!(t.file_stats().is_ok());
    }

    #[tokio::test]
    async fn vacuum_leaves_the_files_of_waiting_links() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = table(&dir).await;
        stage_after(&mut t, "a", &["1"], "1").await.unwrap();
        t.commit_staged(1000, &Retry::default()).await.unwrap();
        stage_after(&mut t, "a", &["2"], "2").await.unwrap();
        // A committer stopped longer than the retention (here none at all): the waiting link's
        // file is in no version, and VACUUM must leave it.
        let everything = crate::maintenance::VacuumOptions {
            retention: chrono::TimeDelta::zero(),
            force: true,
            dry_run: false,
            full: true,
        };
        let vacuumed = t.vacuum(&everything).await.unwrap();
        assert!(vacuumed.files.is_empty(), "{vacuumed:?}");
        let report = t.commit_staged(1000, &Retry::default()).await.unwrap();
        assert_eq!(report.links, 1);
        assert_eq!(rows(&t), 2);
        // Every file the table names exists.
        for file in t.delta().snapshot().unwrap().log_data().iter() {
            let path = dir.path().join("t").join(crate::commit::decode_path(&file.path()));
            assert!(path.exists(), "{path:?}");
        }
    }

    #[tokio::test]
    async fn writers_go_on_after_another_engine_adds_a_nullable_column() {
        use deltalake::kernel::{DataType, PrimitiveType, StructField};
        let dir = tempfile::tempdir().unwrap();
        let mut before = table(&dir).await;
        stage_after(&mut before, "a", &["1"], "1").await.unwrap();
        // `ALTER TABLE ... ADD COLUMNS (level INT)`, by another engine, while the writers run.
        let altered = before
            .delta()
            .clone()
            .add_columns()
            .with_fields([StructField::new(
                "level",
                DataType::Primitive(PrimitiveType::Integer),
                true,
            )])
            .await
            .unwrap();
        assert!(altered.snapshot().unwrap().schema().field("level").is_some());
        // A writer opened before the change, and one opened after it (a new function instance).
        stage_after(&mut before, "a", &["2"], "2").await.unwrap();
        let mut after = Table::open(before.uri(), &StorageConfig::default()).await.unwrap();
        stage_after(&mut after, "a", &["3"], "3").await.unwrap();
        stage_after(&mut after, "b", &["4"], "1").await.unwrap();
        let report = after.commit_staged(1000, &Retry::default()).await.unwrap();
        assert_eq!((report.links, report.rows), (4, 4), "{report:?}");
        assert_eq!(rows(&after), 4);
    }

    async fn source(table: &Table, source: &str, ids: &[&str]) -> SourceFiles {
        let mut writer = table.writer(source).unwrap();
        writer.write(batch(ids, 19_000)).await.unwrap();
        writer.finish().await.unwrap()
    }

    #[tokio::test]
    async fn staged_sources_are_committed_once_each_with_their_txn() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = table(&dir).await;
        // Object a was committed directly; b is staged by two writers (a redelivery); c once.
        let a = source(&t, "s3://raw/a", &["1"]).await;
        t.commit_sources(vec![a], &Retry::default()).await.unwrap();
        let first = vec![
            source(&t, "s3://raw/a", &["1"]).await,
            source(&t, "s3://raw/b", &["2", "3"]).await,
        ];
        t.stage_sources(first).await.unwrap();
        let second = vec![
            source(&t, "s3://raw/b", &["2", "3"]).await,
            source(&t, "s3://raw/c", &["4"]).await,
        ];
        t.stage_sources(second).await.unwrap();
        assert_eq!(rows(&t), 1);
        let report = t.commit_staged(1000, &Retry::default()).await.unwrap();
        assert_eq!((report.links, report.rows, report.streams), (2, 3, 2), "{report:?}");
        assert_eq!(rows(&t), 4);
        for committed in ["s3://raw/a", "s3://raw/b", "s3://raw/c"] {
            assert!(t.is_committed(committed).await.unwrap(), "{committed}");
        }
        // The links are gone; the next pass has nothing to do.
        let again = t.commit_staged(1000, &Retry::default()).await.unwrap();
        assert_eq!((again.links, again.version), (0, None));
        assert_eq!(rows(&t), 4);
    }
}
