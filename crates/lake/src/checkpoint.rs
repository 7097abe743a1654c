//! When a writer checkpoints: the checkpoint policy commits follow ([`checkpoint_due`]), spaced by
//! the size of the last checkpoint ([`checkpoint_spacing`]).

use deltalake::{DeltaTable, Path};
use object_store::ObjectStoreExt as _;

/// What `_delta_log/_last_checkpoint` says of the newest checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LastCheckpoint {
    /// The version checkpointed.
    version: u64,
    /// The actions it holds (files, tombstones, `txn`s, ...); 0 when the hint does not say.
    actions: u64,
}

/// `_delta_log/_last_checkpoint`, if it can be read.
async fn last_checkpoint(table: &DeltaTable) -> Option<LastCheckpoint> {
    let store = table.object_store();
    let bytes = store
        .get(&Path::from("_delta_log/_last_checkpoint"))
        .await
        .ok()?
        .bytes()
        .await
        .ok()?;
    let hint: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    Some(LastCheckpoint {
        version: hint.get("version")?.as_u64()?,
        actions: hint.get("size").and_then(serde_json::Value::as_u64).unwrap_or(0),
    })
}

/// The version in `_delta_log/_last_checkpoint`, if it can be read.
pub(crate) async fn last_checkpoint_version(table: &DeltaTable) -> Option<u64> {
    last_checkpoint(table).await.map(|last| last.version)
}

/// The most commits between two checkpoints a writer lets pass.
const MAX_CHECKPOINT_SPACING: u64 = 1000;

/// How many commits a writer lets follow a checkpoint of `actions` actions before it writes the
/// next: the table's `delta.checkpointInterval`, or the square root of a 32nd of the actions when
/// that is more (up to 1,000).
///
/// A checkpoint rewrites every action of the table: its live files and the files removed within
/// `delta.deletedFileRetentionDuration`. A sink whose small files are packed as it writes keeps
/// few live files but leaves a tombstone per commit, so a checkpoint every tenth commit came to
/// cost more per commit than the commit itself as the day went on. Each commit between
/// checkpoints costs a little more than the one before, though (delta-rs lists and reads the log
/// since the last checkpoint on each refresh; BENCHMARKS.md, "Checkpoints spaced by their size",
/// measures both), so the spacing that makes the two costs least, added up, grows
/// with the square root of the checkpoint's size: 10 up to about 3,800 actions, 55 at 100,000, 176 at
/// a million. Writers look `txn` ids up without a replay ([`crate::txns`]), or every commit in
/// between would cost far more.
pub(crate) fn checkpoint_spacing(interval: u64, actions: u64) -> u64 {
    (actions / 32)
        .isqrt()
        .clamp(interval, MAX_CHECKPOINT_SPACING.max(interval))
}

/// Whether the commit about to become `version` of `table` (the version after the one loaded)
/// should carry a checkpoint, in place of delta-rs' checkpoint every `delta.checkpointInterval`
/// commits: at those same versions, when the last checkpoint is [`checkpoint_spacing`] commits
/// old or more, or cannot be read. delta-rs then writes it after the commit, as it would have.
pub(crate) async fn checkpoint_due(table: &DeltaTable, version: u64) -> bool {
    use deltalake::table::config::TablePropertiesExt as _;
    let Ok(snapshot) = table.snapshot() else {
        return true;
    };
    let interval = snapshot.table_config().checkpoint_interval().get();
    if !(version + 1).is_multiple_of(interval) {
        return false;
    }
    match last_checkpoint(table).await {
        Some(last) => version.saturating_sub(last.version) >= checkpoint_spacing(interval, last.actions),
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::checkpoint_spacing;
    use deltalake::kernel::Add;

    use crate::append::tests::{row_count, write_source};
    use crate::append::{SourceFiles, commit_appends};
    use crate::commit::Retry;
    use crate::create::tests::spec;
    use crate::create::{open_or_create, open_table};
    use crate::storage::StorageConfig;
    use crate::txns::Txns;

    #[test]
    fn spacing_grows_with_the_square_root_of_the_checkpoint() {
        assert_eq!(checkpoint_spacing(10, 6_020), 13);
        assert_eq!(checkpoint_spacing(10, 3_000), 10);
        assert_eq!(checkpoint_spacing(10, 100_000), 55);
        assert_eq!(checkpoint_spacing(10, 100_000_000), 1000);
        assert_eq!(checkpoint_spacing(5000, 100_000_000), 5000);
    }

    #[tokio::test]
    async fn checkpoints_are_spaced_by_their_size() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().join("t").to_str().unwrap().to_owned();
        let mut table = open_or_create(&uri, &spec(), &StorageConfig::default()).await.unwrap();
        let memory = Txns::default();
        // Version 1: 6,000 files (entries of one file written: a checkpoint reads no data file).
        let written = write_source(&uri, &table, "big", &["x"]).await;
        let adds = (0..6000)
            .map(|i| Add {
                path: format!("{}-{i}", written.adds[0].path),
                ..written.adds[0].clone()
            })
            .collect();
        let big = SourceFiles {
            source: "big".into(),
            adds,
            rows: 6000,
        };
        commit_appends(&uri, &mut table, &memory, vec![big], &Retry::default())
            .await
            .unwrap();
        let mut checkpointed = Vec::new();
        for _ in 2..=50 {
            let files = write_source(&uri, &table, "small", &["y"]).await;
            let outcome = commit_appends(&uri, &mut table, &memory, vec![files], &Retry::default())
                .await
                .unwrap();
            if outcome.checkpointed {
                checkpointed.push(outcome.version.unwrap());
            }
        }
        // The first checkpoint, at version 9, holds over 6,000 actions: the next ones follow at
        // least 13 commits later, at the versions where delta-rs would checkpoint.
        assert_eq!(checkpointed, [9, 29, 49]);
        // A reader opening the table replays from the newest checkpoint.
        let reopened = open_table(&uri, &StorageConfig::default()).await.unwrap();
        assert_eq!(row_count(&reopened), 6000 + 49 * 2);
    }
}
