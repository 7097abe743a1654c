//! Positions in ordered streams (a Kinesis shard's sequence numbers), committed in the same Delta
//! version as the rows they cover, so that a writer that is handed records again can tell which
//! of them the table already has.
//!
//! A Delta `txn` action holds an application id and a 64-bit version; a Kinesis sequence number
//! is a decimal number of up to 129 digits (56 in practice). So a position is stored as a few
//! `txn` actions of one stream: `lakelog.position:<stream>:n` holds its number of digits and
//! `lakelog.position:<stream>:<i>` its `i`th group of 18 digits (counted from the left of the
//! number padded with zeros to whole groups). Every commit that advances a stream writes all of
//! them, so the snapshot holds a fixed handful of ids per stream, however many commits there were,
//! and any Delta reader or writer (Spark, DuckDB, Athena) accepts the actions.
//!
//! Positions are compared as numbers ([`compare`]): a longer number is larger, numbers of one
//! length compare by their digits.
//!
//! A `txn` lives for the table's `delta.setTransactionRetentionDuration` (30 days as lakelog
//! creates tables; any user may shorten it) after its last commit: past it, Delta readers treat it
//! as absent, and a quiet stream (a closed parent shard, a rejects table that sees no reject) would
//! read as never committed. So positions do not depend on that window: the *ledger*
//! ([`LEDGER`], beside the log) records every stream's position as of a version, and the position
//! of a stream whose `txn` is no longer live is the ledger's, brought forward by the `txn` actions
//! of every commit after that version, read from the log whatever their age. The committer writes
//! the ledger again when it falls [`LEDGER_EVERY`] versions behind, and maintenance writes it
//! before it deletes expired log files, so the commits it needs are always there. When they are
//! not (a log cleaned by another engine while the ledger was old), the position is
//! [`LakeError::PositionsUnknown`] and nothing of that stream is committed: never a guess.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use deltalake::DeltaTable;
use deltalake::kernel::Transaction;
use futures::{StreamExt as _, TryStreamExt as _};
use object_store::{ObjectStoreExt as _, PutPayload};
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use crate::error::LakeError;
use crate::txns::{Ledger, Txns, transactions_of};

/// The ledger of stream positions, relative to the table's folder (a name starting with `_`, so
/// Delta readers and VACUUM leave it alone).
pub const LEDGER: &str = "_lakelog_staged/positions.json";

/// How many versions the ledger may fall behind the table before the committer writes it again:
/// a reader of an expired position then reads at most this many commits (as well as those since
/// its last look).
pub const LEDGER_EVERY: u64 = 100;

/// Commits read at once when bringing the ledger forward.
const LOG_READS_AT_ONCE: usize = 16;

/// The prefix of the `txn` application ids of every stream position.
pub const POSITION_APP_ID: &str = "lakelog.position:";

/// Digits in one `txn` version: 10^18 - 1 fits an `i64`.
const GROUP: usize = 18;

/// The most digits of a position: Kinesis' longest sequence number (`0|([1-9]\d{0,128})`).
pub const MAX_POSITION_DIGITS: usize = 129;

/// A stream's position to commit with the rows of a version: the stream moves from `from` (what
/// the writer read; `None` for a stream the table has no position of) to `to`. The commit is
/// refused if another writer moved the stream in between.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Advance {
    /// The stream, for example `kinesis:<stream ARN>/shardId-000000000000`.
    pub stream: String,
    /// The position the writer read before it chose its rows.
    pub from: Option<String>,
    /// The position of the last record the commit covers: a decimal number.
    pub to: String,
}

/// Why a position cannot be stored.
fn invalid(uri: &str, stream: &str, position: &str) -> LakeError {
    LakeError::InvalidPosition {
        uri: uri.to_owned(),
        stream: stream.to_owned(),
        position: position.chars().take(160).collect(),
    }
}

/// Whether `position` is a decimal number that a position can hold.
pub fn is_position(position: &str) -> bool {
    !position.is_empty() && position.len() <= MAX_POSITION_DIGITS && position.bytes().all(|b| b.is_ascii_digit())
}

/// Orders two decimal numbers (leading zeros ignored).
pub fn compare(a: &str, b: &str) -> Ordering {
    let a = a.trim_start_matches('0');
    let b = b.trim_start_matches('0');
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

fn length_id(stream: &str) -> String {
    format!("{POSITION_APP_ID}{stream}:n")
}

fn group_id(stream: &str, group: usize) -> String {
    format!("{POSITION_APP_ID}{stream}:{group}")
}

/// The `txn` actions that record `position` as `stream`'s.
pub(crate) fn transactions(
    uri: &str,
    stream: &str,
    position: &str,
    now_ms: i64,
) -> Result<Vec<Transaction>, LakeError> {
    if !is_position(position) {
        return Err(invalid(uri, stream, position));
    }
    let digits = position.trim_start_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    let padded = format!("{digits:0>width$}", width = digits.len().div_ceil(GROUP) * GROUP);
    let mut actions = vec![Transaction::new_with_last_update(
        length_id(stream),
        digits.len() as i64,
        Some(now_ms),
    )];
    for (i, group) in padded.as_bytes().chunks(GROUP).enumerate() {
        // ASCII digits, at most 18 of them: always an i64.
        let value = std::str::from_utf8(group)
            .ok()
            .and_then(|g| g.parse::<i64>().ok())
            .ok_or_else(|| invalid(uri, stream, position))?;
        actions.push(Transaction::new_with_last_update(
            group_id(stream, i),
            value,
            Some(now_ms),
        ));
    }
    Ok(actions)
}

/// The position of `stream` in `table`'s loaded version; `None` when no commit recorded one.
/// Its live `txn` says, or, past the `txn` retention, the ledger brought forward (see the module
/// documentation).
pub(crate) async fn position(
    uri: &str,
    table: &DeltaTable,
    txns: &Txns,
    stream: &str,
) -> Result<Option<String>, LakeError> {
    if let Some(live) = live_position(uri, table, txns, stream).await? {
        return Ok(Some(live));
    }
    let mut ledger = txns.ledger().lock().await;
    ledger.bring_to(uri, table).await?;
    Ok(ledger.positions.get(stream).cloned())
}

/// The position of `stream` that a live `txn` of the loaded version records.
async fn live_position(uri: &str, table: &DeltaTable, txns: &Txns, stream: &str) -> Result<Option<String>, LakeError> {
    let Some(length) = txns.version(uri, table, &length_id(stream)).await? else {
        return Ok(None);
    };
    let mut groups = Vec::new();
    for i in 0..usize::try_from(length)
        .unwrap_or(0)
        .div_ceil(GROUP)
        .min(MAX_POSITION_DIGITS)
    {
        groups.push(txns.version(uri, table, &group_id(stream, i)).await?);
    }
    if groups.iter().any(Option::is_none) {
        // The `txn` actions of one commit expire together; a group read as absent after its
        // length was read live expired in between: the ledger says.
        return Ok(None);
    }
    assemble(length, &groups)
        .map(Some)
        .map_err(|reason| LakeError::InvalidPosition {
            uri: uri.to_owned(),
            stream: stream.to_owned(),
            position: reason,
        })
}

/// The position that a length and its groups of 18 digits record; `Err` says what is wrong.
fn assemble(length: i64, groups: &[Option<i64>]) -> Result<String, String> {
    let corrupt = || format!("a recorded length of {length} digits with missing or bad groups");
    let length = usize::try_from(length)
        .ok()
        .filter(|l| (1..=MAX_POSITION_DIGITS).contains(l))
        .ok_or_else(corrupt)?;
    let count = length.div_ceil(GROUP);
    let mut padded = String::with_capacity(count * GROUP);
    for i in 0..count {
        let value = groups
            .get(i)
            .copied()
            .flatten()
            .filter(|v| (0..10i64.pow(GROUP as u32)).contains(v))
            .ok_or_else(corrupt)?;
        padded.push_str(&format!("{value:018}"));
    }
    Ok(padded[padded.len() - length..].to_owned())
}

/// The positions that one commit's `txn` actions record, by stream.
fn positions_in(transactions: &[Transaction]) -> BTreeMap<String, String> {
    let mut parts: BTreeMap<&str, (Option<i64>, Vec<Option<i64>>)> = BTreeMap::new();
    for txn in transactions {
        let Some(rest) = txn.app_id.strip_prefix(POSITION_APP_ID) else {
            continue;
        };
        let Some((stream, part)) = rest.rsplit_once(':') else {
            continue;
        };
        let entry = parts.entry(stream).or_default();
        if part == "n" {
            entry.0 = Some(txn.version);
        } else if let Ok(i) = part.parse::<usize>()
            && i < MAX_POSITION_DIGITS
        {
            if entry.1.len() <= i {
                entry.1.resize(i + 1, None);
            }
            entry.1[i] = Some(txn.version);
        }
    }
    parts
        .into_iter()
        .filter_map(|(stream, (length, groups))| {
            let position = assemble(length?, &groups).ok()?;
            Some((stream.to_owned(), position))
        })
        .collect()
}

/// The ledger as stored: every stream's position as of a version.
#[derive(Debug, Serialize, Deserialize)]
struct LedgerFile {
    /// The version the positions are of.
    version: u64,
    /// Each stream's position at that version.
    positions: BTreeMap<String, String>,
}

impl Ledger {
    /// Brings the positions to the version `table` has loaded: reads the stored ledger the first
    /// time, then the commits after it.
    async fn bring_to(&mut self, uri: &str, table: &DeltaTable) -> Result<(), LakeError> {
        let Some(version) = table.version() else {
            return Ok(());
        };
        if self.at.is_none() {
            self.load(uri, table).await?;
        }
        match self.catch_up(uri, table, version).await {
            // The commits after what this handle knew are cleaned up: the stored ledger, written
            // before they were (maybe by another handle), goes on from a later version.
            Err(LakeError::PositionsUnknown { .. }) if self.reload_is_newer(uri, table).await? => {
                self.catch_up(uri, table, version).await
            }
            done => done,
        }
    }

    /// Reads the stored ledger again; whether it is of a later version than what was known
    /// (then it replaces it).
    async fn reload_is_newer(&mut self, uri: &str, table: &DeltaTable) -> Result<bool, LakeError> {
        let mut stored = Ledger::default();
        stored.load(uri, table).await?;
        if stored.at.is_some() && stored.at > self.at {
            *self = stored;
            return Ok(true);
        }
        Ok(false)
    }

    /// Applies the commits after the version known up to `version`.
    async fn catch_up(&mut self, uri: &str, table: &DeltaTable, version: u64) -> Result<(), LakeError> {
        let from = match self.at {
            Some(at) if at >= version => return Ok(()),
            Some(at) => at + 1,
            None => 0,
        };
        let log_store = table.log_store();
        let commits: Vec<(u64, Option<bytes::Bytes>)> = futures::stream::iter(from..=version)
            .map(|v| {
                let log_store = log_store.clone();
                async move { log_store.read_commit_entry(v as _).await.map(|bytes| (v, bytes)) }
            })
            .buffered(LOG_READS_AT_ONCE)
            .try_collect()
            .await
            .map_err(|e| LakeError::delta(uri, e))?;
        for (v, bytes) in commits {
            let Some(bytes) = bytes else {
                if self.at.is_none() && v == 0 {
                    // No ledger, and the log's first commits are cleaned up: a table from a release
                    // without the ledger. Its live positions are what is known (see `save`).
                    warn!(
                        table = uri,
                        version,
                        "no position ledger and the log's start is cleaned up: starting one from the live positions"
                    );
                    self.at = Some(version);
                    return Ok(());
                }
                return Err(LakeError::PositionsUnknown {
                    uri: uri.to_owned(),
                    reason: format!(
                        "commit {v} is gone from the log, and the ledger ({LEDGER}) records positions only up to \
                         version {}",
                        self.at.map_or_else(|| "none".to_owned(), |a| a.to_string())
                    ),
                });
            };
            let transactions = transactions_of(&bytes).ok_or_else(|| LakeError::PositionsUnknown {
                uri: uri.to_owned(),
                reason: format!("commit {v} of the log is not JSON lines"),
            })?;
            self.positions.extend(positions_in(&transactions));
            self.at = Some(v);
        }
        Ok(())
    }

    /// Reads the stored ledger, if there is one.
    async fn load(&mut self, uri: &str, table: &DeltaTable) -> Result<(), LakeError> {
        let read_error = |reason: String| LakeError::Object {
            uri: uri.to_owned(),
            action: "reading",
            object: LEDGER.to_owned(),
            reason,
        };
        let Some(bytes) = crate::files::read_object(uri, &table.object_store(), LEDGER).await? else {
            return Ok(());
        };
        let file: LedgerFile =
            serde_json::from_slice(&bytes).map_err(|e| read_error(format!("not a position ledger: {e}")))?;
        self.at = Some(file.version);
        self.stored = Some(file.version);
        self.positions = file.positions;
        Ok(())
    }
}

/// Writes the ledger of `table`'s loaded version when the stored one is [`LEDGER_EVERY`] versions
/// behind, or missing, or with `force` (before log files are deleted). The live positions of
/// `streams` join it (a table from a release without the ledger learns its streams so). Returns
/// whether it was written.
pub(crate) async fn save_ledger(
    uri: &str,
    table: &DeltaTable,
    txns: &Txns,
    streams: &[String],
    force: bool,
) -> Result<bool, LakeError> {
    let mut live = Vec::new();
    for stream in streams {
        if let Some(position) = live_position(uri, table, txns, stream).await? {
            live.push((stream.clone(), position));
        }
    }
    let mut ledger = txns.ledger().lock().await;
    ledger.bring_to(uri, table).await?;
    let Some(at) = ledger.at else {
        return Ok(false);
    };
    for (stream, position) in live {
        let newer = ledger
            .positions
            .get(&stream)
            .is_none_or(|known| compare(&position, known) == Ordering::Greater);
        if newer {
            ledger.positions.insert(stream, position);
        }
    }
    let due = force || ledger.stored.is_none_or(|stored| at >= stored + LEDGER_EVERY);
    if !due || ledger.stored == Some(at) {
        return Ok(false);
    }
    let file = LedgerFile {
        version: at,
        positions: ledger.positions.clone(),
    };
    let write_error = |reason: String| LakeError::Object {
        uri: uri.to_owned(),
        action: "writing",
        object: LEDGER.to_owned(),
        reason,
    };
    let bytes = serde_json::to_vec(&file).map_err(|e| write_error(e.to_string()))?;
    table
        .object_store()
        .put(&deltalake::Path::from(LEDGER), PutPayload::from(bytes))
        .await
        .map_err(|e| write_error(e.to_string()))?;
    ledger.stored = Some(at);
    info!(
        table = uri,
        version = at,
        streams = file.positions.len(),
        "position ledger written"
    );
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_compare_by_value() {
        assert_eq!(compare("9", "10"), Ordering::Less);
        assert_eq!(compare("0010", "10"), Ordering::Equal);
        assert_eq!(
            compare(
                "49590338271490256608559692540925702759324208523137515618",
                "49590338271490256608559692538361571095921575989136588898"
            ),
            Ordering::Greater
        );
        assert!(is_position("0"));
        assert!(!is_position(""));
        assert!(!is_position("12a"));
        assert!(!is_position(&"1".repeat(130)));
    }

    #[test]
    fn positions_become_groups_of_eighteen_digits() {
        let seq = "49590338271490256608559692538361571095921575989136588898";
        let actions = transactions("t", "s", seq, 1).unwrap();
        let versions: Vec<(String, i64)> = actions.iter().map(|t| (t.app_id.clone(), t.version)).collect();
        assert_eq!(
            versions,
            vec![
                ("lakelog.position:s:n".to_owned(), 56),
                ("lakelog.position:s:0".to_owned(), 49),
                ("lakelog.position:s:1".to_owned(), 590338271490256608),
                ("lakelog.position:s:2".to_owned(), 559692538361571095),
                ("lakelog.position:s:3".to_owned(), 921575989136588898),
            ]
        );
        assert!(transactions("t", "s", "x1", 1).is_err());
        assert_eq!(transactions("t", "s", "000", 1).unwrap()[0].version, 1);
    }
}
