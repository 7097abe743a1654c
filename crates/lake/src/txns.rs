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
pub(crate) fn transactions_of(commit: &[u8]) -> Option<Vec<Transaction>> {
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

/// What a table handle knows of the ledger: every stream's position as of a version, the stored
/// ledger brought forward by the commits since.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    /// The version `positions` are of; `None` before it is first read.
    pub(crate) at: Option<u64>,
    /// Each stream's position at `at`.
    pub(crate) positions: std::collections::BTreeMap<String, String>,
    /// The version of the stored ledger, as last read or written.
    pub(crate) stored: Option<u64>,
}

/// The `txn` versions asked about through one table handle and its clones (see the module
/// documentation). Cloning shares the memory.
#[derive(Debug, Clone, Default)]
pub(crate) struct Txns(Arc<Mutex<Memory>>, Arc<Mutex<Ledger>>);

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

    /// What this handle knows of the streams' position ledger.
    pub(crate) fn ledger(&self) -> &Mutex<Ledger> {
        &self.1
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
    use arrow::array::{Array as _, AsArray as _};

    use crate::append::tests::write_source;
    use crate::append::{commit_appends_at, commit_sources};
    use crate::commit::{Retry, is_committed};
    use crate::create::tests::spec;
    use crate::create::{open_or_create, open_table};
    use crate::positions::{self, Advance};
    use crate::storage::StorageConfig;

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

    #[tokio::test]
    async fn remembered_ids_answer_as_a_replay_does_while_two_writers_commit() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().join("t").to_str().unwrap().to_owned();
        let mut a = open_or_create(&uri, &spec(), &StorageConfig::default()).await.unwrap();
        let mut b = open_table(&uri, &StorageConfig::default()).await.unwrap();
        let (memory_a, memory_b) = (Txns::default(), Txns::default());
        let streams = ["kinesis:a", "kinesis:b"];
        let mut ids: Vec<String> = (0..30).step_by(3).map(|r| format!("s3://raw/{r}")).collect();
        for stream in streams {
            ids.push(format!("{}{stream}:n", positions::POSITION_APP_ID));
            ids.extend((0..3).map(|g| format!("{}{stream}:{g}", positions::POSITION_APP_ID)));
        }
        let mut checkpointed = Vec::new();
        for round in 0..30u64 {
            let (table, memory, stream) = if round % 2 == 0 {
                (&mut a, &memory_a, streams[0])
            } else {
                (&mut b, &memory_b, streams[1])
            };
            table.update_incremental(None).await.unwrap();
            let from = positions::position(&uri, table, memory, stream).await.unwrap();
            assert_eq!(
                from,
                positions::position(&uri, table, &Txns::default(), stream)
                    .await
                    .unwrap()
            );
            let outcome = if round % 3 == 0 {
                let files = write_source(&uri, table, &format!("s3://raw/{round}"), &["x"]).await;
                commit_sources(&uri, table, memory, vec![files], &Retry::default()).await
            } else {
                // Positions of 19 to 22 digits: two groups of 18.
                let to = (10u128.pow(18) + u128::from(round) * 10u128.pow(20)).to_string();
                let advance = Advance {
                    stream: stream.into(),
                    from,
                    to,
                };
                let files = write_source(&uri, table, "kinesis", &["y"]).await;
                commit_appends_at(&uri, table, memory, vec![files], &[advance], &Retry::default()).await
            }
            .unwrap();
            if outcome.checkpointed {
                checkpointed.push(outcome.version.unwrap());
            }
            // Each writer, at whatever version it has loaded, answers every id as a replay does.
            for (table, memory) in [(&a, &memory_a), (&b, &memory_b)] {
                for id in &ids {
                    assert_eq!(
                        memory.version(&uri, table, id).await.unwrap(),
                        Txns::default().version(&uri, table, id).await.unwrap(),
                        "{id} at version {:?}, round {round}",
                        table.version()
                    );
                }
            }
        }
        // A small table is checkpointed at delta-rs' versions: every tenth.
        assert_eq!(checkpointed, [9, 19, 29]);
    }

    #[tokio::test]
    async fn transaction_ids_expire_after_the_retention() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().join("t").to_str().unwrap().to_owned();
        let mut short = spec();
        short.properties.insert(
            "delta.setTransactionRetentionDuration".into(),
            "interval 2 seconds".into(),
        );
        let mut table = open_or_create(&uri, &short, &StorageConfig::default()).await.unwrap();
        // The writer's memory of ids knows the one it commits, with its time.
        let txns = Txns::default();
        assert!(!is_committed(&uri, &table, &txns, "s3://raw/old").await.unwrap());
        let files = write_source(&uri, &table, "s3://raw/old", &["1"]).await;
        commit_sources(&uri, &mut table, &txns, vec![files], &Retry::default())
            .await
            .unwrap();
        assert!(is_committed(&uri, &table, &txns, "s3://raw/old").await.unwrap());
        assert!(
            is_committed(&uri, &table, &Txns::default(), "s3://raw/old")
                .await
                .unwrap()
        );
        tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
        // Past the retention the id is gone, however the table is opened, remembered or not.
        assert!(!is_committed(&uri, &table, &txns, "s3://raw/old").await.unwrap());
        assert!(
            !is_committed(&uri, &table, &Txns::default(), "s3://raw/old")
                .await
                .unwrap()
        );
        let reopened = open_table(&uri, &StorageConfig::default()).await.unwrap();
        assert!(
            !is_committed(&uri, &reopened, &Txns::default(), "s3://raw/old")
                .await
                .unwrap()
        );
        // A new id of a later commit is there.
        let files = write_source(&uri, &table, "s3://raw/new", &["2"]).await;
        commit_sources(&uri, &mut table, &Txns::default(), vec![files], &Retry::default())
            .await
            .unwrap();
        assert!(
            is_committed(&uri, &table, &Txns::default(), "s3://raw/new")
                .await
                .unwrap()
        );
        // A checkpoint keeps only the live id, so what a reader replays to open the table stays
        // bounded by the ids of one retention period, however long the table lives.
        crate::maintenance::checkpoint(&uri, &mut table, false).await.unwrap();
        let version = table.version().unwrap();
        let checkpoint = dir
            .path()
            .join(format!("t/_delta_log/{version:020}.checkpoint.parquet"));
        let reader = deltalake::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            std::fs::File::open(&checkpoint).unwrap(),
        )
        .unwrap()
        .build()
        .unwrap();
        let mut ids = Vec::new();
        for batch in reader {
            let batch = batch.unwrap();
            let txn = batch.column_by_name("txn").unwrap().as_struct();
            let app_ids = txn.column_by_name("appId").unwrap().as_string::<i32>();
            ids.extend(
                (0..batch.num_rows())
                    .filter(|&i| txn.is_valid(i))
                    .map(|i| app_ids.value(i).to_owned()),
            );
        }
        assert_eq!(ids, ["s3://raw/new"]);
    }
}
