//! The function's metrics of one invocation, in CloudWatch's embedded metric format.

use std::sync::atomic::{AtomicU64, Ordering};

use access_log_ingest::{IngestError, IngestObserver, ObjectRef, ObjectReport};
use emf::{Metrics, Unit};
use lake::AppendOutcome;

/// The value of the `Function` dimension.
pub const FUNCTION: &str = "access-log";

/// The value of the `Function` dimension of the committer's passes.
pub const COMMITTER: &str = "access-log-committer";

/// The metrics of one committer pass over the access-log tables: links, rows and versions
/// committed, tries, the longest a committed link had waited, tables whose commit failed, and a
/// pass that could not even find the tables.
pub fn commit_pass(
    namespace: &str,
    pass: &Result<access_log_ingest::TablesCommitted, lake::maintenance::MaintenanceError>,
    took: std::time::Duration,
) -> Metrics {
    let mut metrics = Metrics::new(namespace).dimension("Function", COMMITTER);
    metrics.put("CommitPassSeconds", took.as_secs_f64(), Unit::Seconds).put(
        "CommitPassesFailed",
        f64::from(u8::from(pass.is_err())),
        Unit::Count,
    );
    if let Ok(tables) = pass {
        let done: Vec<&lake::StagedCommit> = tables.iter().filter_map(|(_, r)| r.as_ref().ok()).collect();
        let sum = |f: fn(&lake::StagedCommit) -> f64| done.iter().map(|t| f(t)).sum::<f64>();
        metrics
            .put("TablesFailed", (tables.len() - done.len()) as f64, Unit::Count)
            .put("LinksCommitted", sum(|t| t.links as f64), Unit::Count)
            .put("RowsCommitted", sum(|t| t.rows as f64), Unit::Count)
            .put(
                "Commits",
                sum(|t| f64::from(u8::from(t.version.is_some()))),
                Unit::Count,
            )
            .put("CommitAttempts", sum(|t| f64::from(t.attempts)), Unit::Count)
            .put(
                "PostCommitFailures",
                sum(|t| f64::from(u8::from(t.post_commit_failed))),
                Unit::Count,
            );
        if let Some(wait) = done.iter().filter_map(|t| t.oldest_wait_ms).max() {
            metrics.put("StagedWaitSeconds", wait.max(0) as f64 / 1e3, Unit::Seconds);
        }
    }
    metrics
}

/// Commits as the ingestor reports them.
#[derive(Debug, Default)]
pub struct Commits {
    landed: AtomicU64,
    attempts: AtomicU64,
    conflicts: AtomicU64,
    post_commit_failures: AtomicU64,
}

impl IngestObserver for Commits {
    fn committed(&self, _table: &str, outcome: &AppendOutcome) {
        self.landed.fetch_add(1, Ordering::Relaxed);
        self.attempts.fetch_add(u64::from(outcome.attempts), Ordering::Relaxed);
        self.post_commit_failures
            .fetch_add(u64::from(outcome.post_commit_failed), Ordering::Relaxed);
    }

    fn conflicted(&self, _table: &str) {
        self.conflicts.fetch_add(1, Ordering::Relaxed);
    }
}

/// The metrics of an invocation: objects ingested, already ingested and failed, rows, rejected
/// lines, bytes read, commits with their tries and conflicts, messages reported for retry, and
/// the lag: `now_micros` minus the newest `request_time` ingested.
pub fn invocation(
    namespace: &str,
    outcomes: &[(ObjectRef, Result<ObjectReport, IngestError>)],
    commits: &Commits,
    messages_failed: usize,
    now_micros: i64,
) -> Metrics {
    let mut metrics = Metrics::new(namespace).dimension("Function", FUNCTION);
    let reports: Vec<&ObjectReport> = outcomes.iter().filter_map(|(_, r)| r.as_ref().ok()).collect();
    let sum = |field: fn(&ObjectReport) -> u64| reports.iter().map(|r| field(r)).sum::<u64>() as f64;
    let already = reports.iter().filter(|r| r.already_ingested()).count();
    metrics
        .put("Objects", (reports.len() - already) as f64, Unit::Count)
        .put("ObjectsAlreadyIngested", already as f64, Unit::Count)
        .put("ObjectsFailed", (outcomes.len() - reports.len()) as f64, Unit::Count)
        .put("Rows", sum(|r| r.rows), Unit::Count)
        .put("RejectedLines", sum(|r| r.rejects), Unit::Count)
        .put("BytesRead", sum(|r| r.bytes), Unit::Bytes)
        .put("Commits", commits.landed.load(Ordering::Relaxed) as f64, Unit::Count)
        .put(
            "CommitAttempts",
            commits.attempts.load(Ordering::Relaxed) as f64,
            Unit::Count,
        )
        .put(
            "CommitConflicts",
            commits.conflicts.load(Ordering::Relaxed) as f64,
            Unit::Count,
        )
        .put(
            "PostCommitFailures",
            commits.post_commit_failures.load(Ordering::Relaxed) as f64,
            Unit::Count,
        )
        .put("MessagesFailed", messages_failed as f64, Unit::Count);
    if let Some(newest) = reports.iter().filter_map(|r| r.latest_request).max() {
        metrics.put("LagSeconds", (now_micros - newest).max(0) as f64 / 1e6, Unit::Seconds);
    }
    metrics
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invocation_counts_its_objects_rows_and_commits() {
        let report = |rows, rejects, duplicates, latest| ObjectReport {
            bytes: 100,
            lines: rows + rejects,
            rows,
            rejects,
            duplicates,
            latest_request: Some(latest),
        };
        let object = |key: &str| ObjectRef::S3 {
            bucket: "raw".into(),
            key: key.into(),
        };
        let outcomes = vec![
            (object("a"), Ok(report(10, 1, 0, 1_000_000))),
            (object("b"), Ok(report(0, 0, 5, 9_000_000))),
            (
                object("c"),
                Err(IngestError::Conflicts {
                    object: "s3://raw/c".into(),
                    attempts: 4,
                }),
            ),
        ];
        let commits = Commits::default();
        let outcome = AppendOutcome {
            version: Some(3),
            sources: 1,
            rows: 10,
            files: 1,
            attempts: 2,
            post_commit_failed: false,
            checkpointed: false,
        };
        commits.committed("t", &outcome);
        commits.conflicted("t");
        let document = invocation("ns", &outcomes, &commits, 1, 11_000_000).document(0);
        assert_eq!(document["Function"], FUNCTION);
        for (name, value) in [
            ("Objects", 1.0),
            ("ObjectsAlreadyIngested", 1.0),
            ("ObjectsFailed", 1.0),
            ("Rows", 10.0),
            ("RejectedLines", 1.0),
            ("BytesRead", 200.0),
            ("Commits", 1.0),
            ("CommitAttempts", 2.0),
            ("CommitConflicts", 1.0),
            ("MessagesFailed", 1.0),
            ("LagSeconds", 2.0),
        ] {
            assert_eq!(document[name], value, "{name}: {document}");
        }
        let declared = &document["_aws"]["CloudWatchMetrics"][0]["Metrics"];
        assert!(
            declared
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["Name"] == "LagSeconds" && m["Unit"] == "Seconds")
        );
        assert!(
            declared
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["Name"] == "BytesRead" && m["Unit"] == "Bytes")
        );
    }
}
