//! Retention: the partitions of a table's date column older than the days it keeps are dropped
//! in one commit, and their files deleted from storage at once.
//!
//! The commit removes every active file of those partitions, guarded like a compaction's (each
//! must still be active), so a compaction of one of them at the same time makes it wait for the
//! next run, and appends to younger partitions go on. A late row appended to a dropped date after
//! the commit is dropped by the next run. Tables without a date partition column keep every row.

use std::collections::BTreeSet;

use chrono::{DateTime, NaiveDate, TimeDelta, Utc};
use deltalake::DeltaTable;
use deltalake::kernel::Action;
use deltalake::protocol::DeltaOperation;
use object_store::ObjectStoreExt as _;
use serde::Serialize;
use tracing::{info, warn};

use crate::commit::{Commit, CommitFailure, Guard, Landed, Retry, commit};
use crate::error::MaintenanceError;
use crate::partitions::{date_partition_column, partition_date, partition_label};
use crate::txns::Txns;

/// What [`Table::expire`](crate::Table::expire) did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RetentionReport {
    /// Partitions of dates before this one were dropped; `None` for a table without a date
    /// partition column, to which retention does not apply.
    pub before: Option<NaiveDate>,
    /// The partitions dropped.
    pub partitions: Vec<String>,
    /// Their files, removed from the table.
    pub files: usize,
    /// Their rows (from the log's statistics).
    pub rows: u64,
    /// Their bytes.
    pub bytes: u64,
    /// The version that dropped them; `None` when there was nothing to drop or a concurrent
    /// rewrite of one of their files left them for the next run.
    pub version: Option<u64>,
    /// Files deleted from storage after the commit.
    pub purged: usize,
}

/// Drops the partitions of `table` whose date is more than `keep_days` before `now`'s date (see
/// the module's documentation).
pub(crate) async fn expire(
    uri: &str,
    table: &mut DeltaTable,
    keep_days: u32,
    now: DateTime<Utc>,
    retry: &Retry,
) -> Result<RetentionReport, MaintenanceError> {
    let delta = |e| MaintenanceError::delta(uri, "retention", e);
    table.update_incremental(None).await.map_err(delta)?;
    let snapshot = table.snapshot().map_err(delta)?;
    let partition_columns = snapshot.metadata().partition_columns().to_vec();
    let schema = snapshot.schema();
    let Some(date_column) = date_partition_column(&partition_columns, &schema) else {
        // Tables without one (the rejects tables) keep every row: no date says how old it is.
        info!(table = uri, "no date partition column: retention does not apply");
        return Ok(RetentionReport::default());
    };
    let before = now.date_naive() - TimeDelta::days(i64::from(keep_days));
    let mut report = RetentionReport {
        before: Some(before),
        ..RetentionReport::default()
    };
    let mut partitions = BTreeSet::new();
    let mut actions = Vec::new();
    let mut paths = Vec::new();
    let mut locations = Vec::new();
    for view in snapshot.log_data().iter() {
        let values = view.partition_values_map();
        let date = values
            .get(&date_column)
            .cloned()
            .flatten()
            .and_then(|v| partition_date(&v));
        if date.is_none_or(|d| d >= before) {
            continue;
        }
        partitions.insert(partition_label(&partition_columns, &values));
        report.files += 1;
        report.rows += view.num_records().map_or(0, |n| n as u64);
        report.bytes += u64::try_from(view.size()).unwrap_or(0);
        paths.push(view.path().into_owned());
        locations.push(view.object_store_path());
        actions.push(Action::Remove(view.remove_action(true)));
    }
    if actions.is_empty() {
        return Ok(report);
    }
    report.partitions = partitions.into_iter().collect();
    let must_be_active: Vec<&str> = paths.iter().map(String::as_str).collect();
    let to_commit = Commit {
        uri,
        actions,
        transactions: Vec::new(),
        operation: DeltaOperation::Delete {
            predicate: Some(format!("{date_column} < '{before}'")),
        },
        metadata: vec![
            ("lakelog.operation".to_owned(), serde_json::json!("retention")),
            ("lakelog.keepDays".to_owned(), serde_json::json!(keep_days)),
        ],
        guard: Guard::Active(&must_be_active),
        keep_files: false,
    };
    match commit(table, &Txns::default(), to_commit, retry).await {
        Ok(Landed::Version { version, .. }) => report.version = Some(version),
        Ok(Landed::Refused { reason }) => {
            warn!(table = uri, %reason, "a partition past retention is being rewritten; left for the next run");
            return Ok(report);
        }
        Err(CommitFailure::NotCommitted(e) | CommitFailure::Unknown(e)) => return Err(MaintenanceError::Lake(e)),
    }
    // Past retention, no reader is owed these rows: their files go now, not after VACUUM's
    // retention.
    let store = table.object_store();
    for location in &locations {
        match store.delete(location).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => report.purged += 1,
            Err(e) => warn!(table = uri, file = %location, error = %e, "not deleted; VACUUM deletes it later"),
        }
    }
    info!(
        table = uri,
        partitions = report.partitions.len(),
        files = report.files,
        rows = report.rows,
        "partitions past retention dropped"
    );
    Ok(report)
}
