//! The `txn` versions a writer asks about, kept as its table moves on, so that a lookup costs
//! nothing once an id is known instead of a replay of the log since the last checkpoint.
//!
//! delta-rs answers each [`transaction_version`](deltalake::table::state::DeltaTableState::transaction_version)
//! by replaying every `txn` action of the checkpoint and of each commit since it. A sink asks
//! for its stream's position (a handful of ids) before each batch and again in the commit's
//! guard, so that replay grows with the commits between checkpoints, and checkpoints could not
//! be spaced out as a table grows (see [`crate::checkpoint`]) without making every commit slower.
//!
//! [`Txns`] remembers, per id asked about, what the version of the table it was asked at holds:
//! - the newest `txn` of the id with its `lastUpdated`, when a commit this writer read or wrote
//!   since it began remembering carries it (asked about yet or not): exact, and kept as the table
//!   moves on, since a newer `txn` of the id can only come in a newer commit, read on the way;
//! - that the id has no live `txn`: the log held none, or its newest had expired. Kept too: an
//!   expired `txn` stays expired, and a new one comes in a newer commit.
//!
//! A live version found by a replay is not kept: delta-rs does not say its `lastUpdated`, so
//! when it expires is unknown. (A sink's position is such a one only until its first commit.)
//!
//! When the table moves on, the commits in between are read once (one GET each; none for the
//! writer's own commit, whose `txn` actions it knows) and their `txn` actions applied. Expiry is
//! delta-rs', applied when answering: a `txn` whose `lastUpdated` is at or before now minus
//! `delta.setTransactionRetentionDuration` does not count. Whatever cannot be read, or a jump
//! of more than [`MAX_CATCH_UP`] commits, starts the memory afresh: the answer then comes from a
//! replay, as without it.

use std::collections::HashMap;
use std::sync::Arc;

use deltalake::DeltaTable;
use deltalake::kernel::Transaction;
use serde::Deserialize;
use tokio::sync::Mutex;

use crate::error::LakeError;

/// The most commits read to bring the memory up to a newer version; past that it starts afresh.
const MAX_CATCH_UP: u64 = 1000;

/// The most ids remembered; past that the memory starts afresh (an ingest asks about each log
/// object once, so a long-lived writer would otherwise hold every one of them).
const MAX_IDS: usize = 100_000;

/// What the table version remembered holds for one id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Known {
    /// No live `txn`.
    Absent,
    /// The newest `txn`, read from a commit.
    Newest { version: i64, last_updated: Option<i64> },
}

#[derive(Debug, Default)]
struct Memory {
    /// The table version the ids are known at.
    at: Option<u64>,
    ids: HashMap<String, Known>,
}

impl Memory {
    fn start_afresh(&mut self, at: u64) {
        self.at = Some(at);
        self.ids.clear();
    }

    /// Remembers `known` of `id` at the version remembered, forgetting everything else first
    /// when [`MAX_IDS`] are remembered already (a memory of no id is right at any version).
    fn remember(&mut self, id: String, known: Known) {
        if self.ids.len() >= MAX_IDS && !self.ids.contains_key(&id) {
            self.ids.clear();
        }
        self.ids.insert(id, known);
    }

    /// Moves to version `at`, having applied the `txn` actions of the commits in between.
    fn advance(&mut self, at: u64, transactions: impl IntoIterator<Item = Transaction>) {
        for txn in transactions {
            let known = Known::Newest {
                version: txn.version,
                last_updated: txn.last_updated,
            };
            self.remember(txn.app_id, known);
        }
        self.at = Some(at);
    }
}

/// One line of a commit: only its `txn` action, if it is one.
#[derive(Deserialize)]
struct Line {
    txn: Option<Transaction>,
}

/// The `txn` actions of a commit's bytes; `None` when a line is not JSON.
fn transactions_of(commit: &[u8]) -> Option<Vec<Transaction>> {
    let mut found = Vec::new();
    for line in commit
        .split(|&b| b == b'\n')
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
    {
        if let Some(txn) = serde_json::from_slice::<Line>(line).ok()?.txn {
            found.push(txn);
        }
    }
    Some(found)
}

/// The `txn` versions asked about through one table handle and its clones (see the module
/// documentation). Cloning shares the memory.
#[derive(Debug, Clone, Default)]
pub(crate) struct Txns(Arc<Mutex<Memory>>);

impl Txns {
    /// The live version of `app_id`'s `txn` in the version `table` has loaded, as delta-rs'
    /// `transaction_version` answers it.
    pub(crate) async fn version(&self, uri: &str, table: &DeltaTable, app_id: &str) -> Result<Option<i64>, LakeError> {
        let snapshot = table.snapshot().map_err(|e| LakeError::delta(uri, e))?;
        let at = snapshot.version();
        let mut memory = self.0.lock().await;
        self.catch_up(&mut memory, table, at).await;
        if memory.at == Some(at)
            && let Some(known) = memory.ids.get(app_id)
        {
            return Ok(match *known {
                Known::Absent => None,
                Known::Newest { version, last_updated } => {
                    let retention = snapshot.table_config().set_transaction_retention_duration;
                    let expired = match (retention, last_updated) {
                        (Some(retention), Some(last_updated)) => {
                            let now_ms = chrono::Utc::now().timestamp_millis();
                            last_updated <= now_ms - i64::try_from(retention.as_millis()).unwrap_or(i64::MAX)
                        }
                        _ => false,
                    };
                    (!expired).then_some(version)
                }
            });
        }
        let found = snapshot
            .transaction_version(table.log_store().as_ref(), app_id)
            .await
            .map_err(|e| LakeError::delta(uri, e))?;
        if memory.at == Some(at) && found.is_none() {
            memory.remember(app_id.to_owned(), Known::Absent);
        }
        Ok(found)
    }

    /// Brings the memory to version `at` of `table`, reading the commits in between; starts
    /// afresh at `at` when they cannot all be read.
    async fn catch_up(&self, memory: &mut Memory, table: &DeltaTable, at: u64) {
        let from = match memory.at {
            Some(from) if from == at => return,
            // A clone of the table further on: its memory stays, and this version is answered
            // by a replay.
            Some(from) if from > at => return,
            Some(from) if at - from <= MAX_CATCH_UP => from,
            _ => return memory.start_afresh(at),
        };
        let log_store = table.log_store();
        let mut found = Vec::new();
        for version in from + 1..=at {
            match log_store.read_commit_entry(version).await {
                Ok(Some(bytes)) => match transactions_of(&bytes) {
                    Some(transactions) => found.extend(transactions),
                    None => return memory.start_afresh(at),
                },
                Ok(None) | Err(_) => return memory.start_afresh(at),
            }
        }
        memory.advance(at, found);
    }

    /// This writer committed `transactions` as `version`: the memory moves to it without reading
    /// the commit back, when it was at the version before.
    pub(crate) async fn committed(&self, version: u64, transactions: &[Transaction]) {
        let mut memory = self.0.lock().await;
        if memory.at.is_some_and(|at| at + 1 == version) {
            memory.advance(version, transactions.iter().cloned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_yields_its_txn_actions_and_nothing_else() {
        let commit = br#"{"commitInfo":{"timestamp":1,"operation":"WRITE"}}
{"txn":{"appId":"s3://raw/a","version":1,"lastUpdated":1700000000000}}
{"add":{"path":"x.parquet","size":1,"partitionValues":{},"modificationTime":1,"dataChange":true}}
{"txn":{"appId":"lakelog.position:s:n","version":56}}
"#;
        let found = transactions_of(commit).unwrap();
        assert_eq!(
            found,
            vec![
                Transaction::new_with_last_update("s3://raw/a", 1, Some(1_700_000_000_000)),
                Transaction::new("lakelog.position:s:n", 56),
            ]
        );
        assert!(transactions_of(b"{\"add\":").is_none());
    }

    #[test]
    fn moving_on_keeps_what_commits_say() {
        let mut memory = Memory::default();
        memory.start_afresh(3);
        memory.ids.insert("a".into(), Known::Absent);
        memory.ids.insert("c".into(), Known::Absent);
        memory.advance(
            5,
            [
                Transaction::new_with_last_update("a", 2, Some(9)),
                Transaction::new("z", 1),
            ],
        );
        assert_eq!(memory.at, Some(5));
        assert_eq!(
            memory.ids.get("a"),
            Some(&Known::Newest {
                version: 2,
                last_updated: Some(9)
            })
        );
        assert_eq!(memory.ids.get("c"), Some(&Known::Absent));
        // The newest `txn` of an id nobody asked about yet is known too.
        assert_eq!(
            memory.ids.get("z"),
            Some(&Known::Newest {
                version: 1,
                last_updated: None
            })
        );
    }

    #[test]
    fn commits_of_many_ids_keep_the_memory_within_its_bound() {
        let mut memory = Memory::default();
        memory.start_afresh(1);
        memory.advance(
            2,
            (0..MAX_IDS + 10).map(|i| Transaction::new(format!("s3://raw/{i}"), 1)),
        );
        assert_eq!(memory.at, Some(2));
        assert!(memory.ids.len() <= MAX_IDS, "{}", memory.ids.len());
        // What is still remembered is the newest of its id.
        let last = format!("s3://raw/{}", MAX_IDS + 9);
        assert_eq!(
            memory.ids.get(&last),
            Some(&Known::Newest {
                version: 1,
                last_updated: None
            })
        );
    }
}
