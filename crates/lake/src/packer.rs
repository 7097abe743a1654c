//! Packing a table's small files beside its committer.

use std::time::Instant;

use tracing::warn;

use crate::maintenance::Settle;
use crate::table::Table;

/// Packs a table's small files beside its committer: at most one packing at a time, started after
/// a commit when due, never in the way of the next commits. A packing rewrites small files into
/// few (see [`crate::maintenance::Settle`]); its commit is guarded like every compaction, so it
/// and the committer's appends, which remove nothing, never undo each other.
#[derive(Debug, Default)]
pub struct Packer {
    running: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Packer {
    /// Starts packing a copy of `table` as `settle` says, starting no bin after `stop_at`, unless
    /// a packing is still running.
    pub fn start(&self, table: &Table, settle: Settle, stop_at: Instant) {
        let mut running = self.running.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if running.as_ref().is_some_and(|packing| !packing.is_finished()) {
            return;
        }
        let mut table = table.clone();
        *running = Some(tokio::spawn(async move {
            table.settle_after_commit(&settle, stop_at).await;
        }));
    }

    /// Waits for the packing that is running, if any (a function waits before it answers, so that
    /// no packing is frozen half way).
    pub async fn finish(&self) {
        let running = self
            .running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(packing) = running
            && let Err(e) = packing.await
        {
            warn!(error = %e, "a packing of small files ended abnormally; the next commit starts another");
        }
    }
}
