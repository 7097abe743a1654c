//! The Lambda handler: a scheduled EventBridge event in, one maintenance pass over every table of
//! the deployment, a report out.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use lake::StorageConfig;
use lake::maintenance::{CompactOptions, MaintenanceOptions, TableReport, VacuumOptions, discover_tables, maintain};
use lambda_runtime::LambdaEvent;
use serde::Serialize;
use tracing::{error, info};

use crate::config::{Config, Location};
use crate::rotation::{State, Store};

/// Some tables could not be maintained. The others were; the invocation is reported as failed so
/// that the error alarm fires and the event goes to the failure destination.
#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    /// Maintenance of one or more tables failed.
    #[error("{failed} of {total} tables failed; first: {first}")]
    TablesFailed {
        /// Tables (or prefixes that could not be listed) that failed.
        failed: usize,
        /// All tables and prefixes.
        total: usize,
        /// The first failure.
        first: String,
    },
    /// An erasure request could not be carried out (it stays for the next pass).
    #[error("erasure request {request} failed: {error}")]
    ErasureFailed {
        /// The request's object.
        request: String,
        /// Why.
        error: String,
    },
}

impl From<HandlerError> for lambda_runtime::Diagnostic {
    fn from(e: HandlerError) -> Self {
        lambda_runtime::Diagnostic {
            error_type: match &e {
                HandlerError::TablesFailed { .. } => "LakeMaintenance.TablesFailed",
                HandlerError::ErasureFailed { .. } => "LakeMaintenance.ErasureFailed",
            }
            .into(),
            error_message: e.to_string(),
        }
    }
}

/// The maintenance function's dependencies, built once per instance.
#[derive(Debug, Clone)]
pub struct Maintainer {
    config: Config,
    storage: StorageConfig,
    namespace: String,
    /// Left to readers of older versions before an erasure deletes their files.
    reader_grace: Duration,
    /// Reads the pseudonym keys of games that pseudonymise (with [`ErasureConfig::api`](crate::config::ErasureConfig::api)).
    ssm: Option<aws_sdk_ssm::Client>,
    /// Moves the Glue entries of the tables' Iceberg views with the commits of each pass.
    catalog: Option<catalog::Catalog>,
}

impl Maintainer {
    /// A maintainer of the tables `config` names, writing its metrics in
    /// [`emf::DEFAULT_NAMESPACE`].
    pub fn new(config: Config, storage: StorageConfig) -> Self {
        Self {
            config,
            storage,
            namespace: emf::DEFAULT_NAMESPACE.to_owned(),
            reader_grace: READER_GRACE,
            ssm: None,
            catalog: None,
        }
    }

    /// The same, reading the pseudonym keys of the configured API's games with `ssm`.
    pub fn with_ssm(mut self, ssm: aws_sdk_ssm::Client) -> Self {
        self.ssm = Some(ssm);
        self
    }

    /// The same, moving the Glue entry of each table's Iceberg view (registered as
    /// [`catalog::view_name`] of its [`catalog::table_name`]) with each metadata file the pass
    /// writes; `catalog` should be the process's publisher ([`catalog::Catalog::publish_views`]).
    pub fn with_catalog(mut self, catalog: catalog::Catalog) -> Self {
        for entry in &self.config.tables {
            if let Location::Table(uri) = &entry.location {
                catalog.follow(uri, &catalog::table_name(uri, false));
            }
        }
        self.catalog = Some(catalog);
        self
    }

    /// The same, leaving readers of older versions `grace` before an erasure deletes their files
    /// (a minute unless told).
    pub fn with_reader_grace(mut self, grace: Duration) -> Self {
        self.reader_grace = grace;
        self
    }

    /// The maintainer, writing its metrics in `namespace`.
    pub fn with_metrics_namespace(mut self, namespace: &str) -> Self {
        self.namespace = namespace.to_owned();
        self
    }
}

/// What one table's maintenance did, as the function reports and logs it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TableSummary {
    /// The table (or, for a prefix that could not be listed, the prefix).
    pub table: String,
    /// Active data files before compaction.
    pub files_before: usize,
    /// Active data files after compaction.
    pub files_after: usize,
    /// Commits written by compaction.
    pub bins: usize,
    /// Bins planned (more than committed when the deadline stopped the work).
    pub bins_planned: usize,
    /// Duplicate rows removed.
    pub duplicates_removed: u64,
    /// Partitions left because of a concurrent rewrite.
    pub conflicts: Vec<String>,
    /// Partitions dropped because they were past the table's retention.
    pub partitions_expired: Vec<String>,
    /// Their rows.
    pub rows_expired: u64,
    /// The version checkpointed.
    pub checkpoint_version: Option<u64>,
    /// Expired log files deleted.
    pub logs_removed: usize,
    /// Data files deleted by VACUUM.
    pub files_vacuumed: usize,
    /// Steps not done because the deadline came first.
    pub skipped: Vec<String>,
    /// Why maintenance of this table failed.
    pub error: Option<String>,
}

impl From<TableReport> for TableSummary {
    fn from(report: TableReport) -> Self {
        let error = report.failure();
        let compaction = report.compaction.unwrap_or_default();
        let mut skipped: Vec<String> = report.skipped.iter().map(|s| (*s).to_owned()).collect();
        if compaction.stopped_early {
            skipped.insert(0, "compaction (partly)".to_owned());
        }
        Self {
            table: report.uri,
            files_before: compaction.files_before,
            files_after: compaction.files_after,
            bins: compaction.bins.len(),
            bins_planned: compaction.bins_planned,
            duplicates_removed: compaction.duplicates(),
            conflicts: compaction.conflicts,
            partitions_expired: report
                .retention
                .as_ref()
                .map(|r| r.partitions.clone())
                .unwrap_or_default(),
            rows_expired: report.retention.as_ref().map_or(0, |r| r.rows),
            checkpoint_version: report.checkpoint.map(|c| c.version),
            logs_removed: report.checkpoint.map_or(0, |c| c.logs_removed),
            files_vacuumed: report.vacuum.map_or(0, |v| v.files.len()),
            skipped,
            error,
        }
    }
}

/// The function's response.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// One entry per table.
    pub tables: Vec<TableSummary>,
    /// Whether the deadline stopped the pass before every table was done; the next scheduled run
    /// goes on from there.
    pub stopped_early: bool,
    /// Minutes since the table maintained through longest ago was (with a rotation state).
    pub minutes_since_maintained: Option<u64>,
    /// The erasure requests taken.
    pub erasures: Vec<ErasureSummary>,
}

/// One erasure request the pass took.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ErasureSummary {
    /// The request's object.
    pub request: String,
    /// Where its receipt was written.
    pub receipt: Option<String>,
    /// Rows removed from the tables.
    pub rows_removed: u64,
    /// Whether no file is left holding the players.
    pub verified: bool,
    /// Why it could not be done (the request stays for the next pass).
    pub error: Option<String>,
}

/// The folder under the requests' where receipts go.
pub const RECEIPTS: &str = "receipts/";

/// Where a request that matched nothing is moved (beside its receipt under [`RECEIPTS`]): it is
/// not taken again each pass, and its summary carries an error, which an alarm reads.
pub const UNMATCHED: &str = "unmatched/";

/// The share of a pass's time that erasures may take; tables get the rest.
const ERASURE_SHARE: f64 = 0.5;

/// Seconds left to readers of the older versions before an erasure deletes their files.
const READER_GRACE: Duration = Duration::from_secs(60);

/// Takes every request of the erasure folder (JSON objects at its top): erases its players
/// ([`game_sink::erasure::forget_merged`], the waiting requests of one game in one pass), writes
/// each request's receipt under [`RECEIPTS`] with the request's name, then deletes the request.
/// An erasure still running at `stop_at` is stopped there (what it committed stays done). A request
/// that fails or is stopped stays, and is tried again next pass; one that is not a request is
/// named in the summary and left alone; one that matched nothing moves to [`UNMATCHED`].
async fn take_erasures(
    config: &crate::config::ErasureConfig,
    storage: &StorageConfig,
    grace: Duration,
    stop_at: Option<Instant>,
    keys: Option<(&game_api::ApiStageRef, &aws_sdk_ssm::Client)>,
) -> Vec<ErasureSummary> {
    let mut summaries = Vec::new();
    let folder = match lake::Folder::open(&config.requests, storage) {
        Ok(folder) => folder,
        Err(e) => {
            error!(folder = %config.requests, error = %e, "cannot open the erasure requests");
            return summaries;
        }
    };
    let names = match folder.list().await {
        Ok(names) => names,
        Err(e) => {
            error!(folder = %config.requests, error = %e, "cannot list the erasure requests");
            return summaries;
        }
    };
    // Every waiting request, read; those that cannot be are named now.
    let mut waiting = Vec::new();
    for name in names.into_iter().filter(|n| !n.contains('/')) {
        let object = folder.object_uri(&name);
        let read = async {
            let bytes = folder.get(&name).await.map_err(|e| e.to_string())?;
            let mut request =
                game_sink::erasure::ErasureRequest::from_json(&object, &bytes).map_err(|e| e.to_string())?;
            // A game that pseudonymises: the rows hold its players' pseudonyms.
            if let Some((api, ssm)) = keys
                && let Some(key) = game_api::pseudonym_key(ssm, api, &request.game)
                    .await
                    .map_err(|e| e.to_string())?
            {
                let pseudonym = game_api::Pseudonym::new(&request.id_param, key).map_err(|e| e.to_string())?;
                request = request.with_pseudonyms(pseudonym.params(), |id| pseudonym.of(id));
            }
            Ok::<_, String>((bytes, request))
        };
        match read.await {
            Ok((bytes, request)) => waiting.push((name, bytes, request)),
            Err(e) => {
                error!(request = %object, error = %e, "erasure request not read; it stays for the next pass");
                summaries.push(ErasureSummary {
                    request: object,
                    error: Some(e),
                    ..ErasureSummary::default()
                });
            }
        }
    }
    while !waiting.is_empty() {
        let requests: Vec<&game_sink::erasure::ErasureRequest> = waiting.iter().map(|(_, _, r)| r).collect();
        let Some((merged, took)) = game_sink::erasure::ErasureRequest::merged(&requests) else {
            break;
        };
        let mut group = Vec::with_capacity(took.len());
        for i in took.into_iter().rev() {
            group.push(waiting.remove(i));
        }
        group.reverse();
        if stop_at.is_some_and(|at| Instant::now() >= at) {
            info!(
                requests = group.len() + waiting.len(),
                "erasures' share of the pass is spent; the next pass takes the rest"
            );
            break;
        }
        let erasure = game_sink::erasure::forget_merged(&config.targets, storage, &merged, grace);
        let receipt = match stop_at {
            Some(at) => tokio::time::timeout_at(at.into(), erasure).await.unwrap_or_else(|_| {
                Err(game_sink::erasure::ErasureError::Request {
                    source_name: format!("{} requests of game {}", group.len(), merged.game),
                    reason: "stopped at the end of the erasures' share of the pass; what it committed stays, \
                                 and the next pass goes on"
                        .to_owned(),
                })
            }),
            None => erasure.await,
        };
        let others = group.len() - 1;
        for (name, bytes, request) in group {
            let object = folder.object_uri(&name);
            let mut summary = ErasureSummary {
                request: object.clone(),
                ..ErasureSummary::default()
            };
            let done = async {
                let receipt = receipt
                    .as_ref()
                    .map_err(|e| e.to_string())?
                    .of_request(&request, others);
                let json = serde_json::to_vec_pretty(&receipt).map_err(|e| e.to_string())?;
                let at = format!("{RECEIPTS}{name}");
                folder.put(&at, json).await.map_err(|e| e.to_string())?;
                if receipt.verified {
                    folder.delete(&name).await.map_err(|e| e.to_string())?;
                } else if receipt.found == 0 {
                    folder
                        .put(&format!("{UNMATCHED}{name}"), bytes.to_vec())
                        .await
                        .map_err(|e| e.to_string())?;
                    folder.delete(&name).await.map_err(|e| e.to_string())?;
                    return Err(format!(
                        "{}; the request is moved to {}",
                        receipt.unverified_because.unwrap_or_default(),
                        folder.object_uri(&format!("{UNMATCHED}{name}"))
                    ));
                }
                let rows = receipt.tables.values().map(|t| t.erasure.rows_removed).sum::<u64>();
                Ok::<_, String>((folder.object_uri(&at), rows, receipt.verified))
            }
            .await;
            match done {
                Ok((receipt, rows, verified)) => {
                    info!(request = %object, receipt = %receipt, rows, verified, "erasure done");
                    summary.receipt = Some(receipt);
                    summary.rows_removed = rows;
                    summary.verified = verified;
                }
                Err(e) => {
                    error!(request = %object, error = %e, "erasure failed; the request stays for the next pass");
                    summary.error = Some(e);
                }
            }
            summaries.push(summary);
        }
    }
    summaries
}

/// Maintains every table of the configuration: compaction of closed partitions (deduplicating by
/// the entry's key), checkpoint with expired log cleanup, VACUUM. Starts no new work once less
/// than the configured reserve is left before the invocation's deadline. The tables are taken
/// in a rotating order (by the hour of the event), so that no table waits behind a large one run
/// after run. A table that fails does not stop the others.
pub async fn handle(event: LambdaEvent<EventBridgeEvent>, maintainer: &Maintainer) -> Result<Report, HandlerError> {
    let stop_at = stop_at(event.context.deadline, maintainer.config.reserve);
    let config = &maintainer.config;
    info!(
        id = event.payload.id.as_deref(),
        detail_type = %event.payload.detail_type,
        "maintenance pass"
    );

    // Erasures first: a player's request is due within a month, and a pass may end early.
    let erasures = match &config.erasure {
        Some(erasure) => {
            let share = stop_at.map(|at| {
                let left = at.saturating_duration_since(Instant::now());
                Instant::now() + left.mul_f64(ERASURE_SHARE)
            });
            let keys = erasure.api.as_ref().zip(maintainer.ssm.as_ref());
            take_erasures(erasure, &maintainer.storage, maintainer.reader_grace, share, keys).await
        }
        None => Vec::new(),
    };
    // The tables, with their deduplication keys; prefixes are listed now.
    // Each table with its entry (deduplication key, retention).
    let mut tables: Vec<(String, &crate::config::TableEntry)> = Vec::new();
    let mut report = Report {
        erasures,
        ..Report::default()
    };
    for entry in &config.tables {
        match &entry.location {
            Location::Table(uri) => tables.push((uri.clone(), entry)),
            Location::Prefix(prefix) => match discover_tables(prefix, &maintainer.storage).await {
                Ok(found) => tables.extend(found.into_iter().map(|t| (t, entry))),
                Err(e) => {
                    error!(prefix = %prefix, error = %e, "cannot list tables");
                    report.tables.push(TableSummary {
                        table: format!("{prefix}/*"),
                        error: Some(e.to_string()),
                        ..TableSummary::default()
                    });
                }
            },
        }
    }
    // Tables found under a prefix are per-bucket tables, named as the ingest names them.
    if let Some(catalog) = &maintainer.catalog {
        for (uri, entry) in &tables {
            if matches!(entry.location, Location::Prefix(_)) {
                catalog.follow(uri, &catalog::table_name(uri, true));
            }
        }
    }
    // The order: by the rotation's state, the table started longest ago first; without one, a
    // rotation by the hour of the event.
    let store = config.state.as_deref().and_then(|uri| {
        Store::open(uri, &maintainer.storage)
            .map_err(|e| error!(state = uri, error = %e, "cannot open the rotation state"))
            .ok()
    });
    let mut state = match &store {
        Some(store) => store.load().await,
        None => State::default(),
    };
    let names: Vec<String> = tables.iter().map(|(uri, _)| uri.clone()).collect();
    if store.is_some() {
        state.retain(&names);
        state.order(&mut tables);
    } else if !tables.is_empty() {
        let hour = event
            .payload
            .time
            .map_or_else(|| chrono::Utc::now().timestamp(), |t| t.timestamp())
            / 3600;
        let start = usize::try_from(hour.rem_euclid(tables.len() as i64)).unwrap_or(0);
        tables.rotate_left(start);
    }
    let save = |state: State| {
        let store = store.clone();
        async move {
            if let Some(store) = store
                && let Err(e) = store.save(&state).await
            {
                error!(error = %e, "cannot save the rotation state");
            }
        }
    };

    for (uri, entry) in tables {
        if stop_at.is_some_and(|at| Instant::now() >= at) {
            report.stopped_early = true;
            report.tables.push(TableSummary {
                table: uri,
                skipped: vec!["all (deadline)".to_owned()],
                ..TableSummary::default()
            });
            continue;
        }
        state.started(&uri, chrono::Utc::now().timestamp());
        save(state.clone()).await;
        let options = MaintenanceOptions {
            retain_days: entry.retain_days,
            compact: Some(CompactOptions {
                target_file_size: config.target_file_size,
                grace: config.grace,
                dedup_key: entry.dedup_key.clone(),
                dedup_memory: config.dedup_memory,
                ..CompactOptions::default()
            }),
            checkpoint: true,
            cleanup_logs: true,
            vacuum: Some(VacuumOptions {
                retention: config.vacuum_retention,
                ..VacuumOptions::default()
            }),
            stop_at,
        };
        let summary = match maintain(&uri, &maintainer.storage, &options, &()).await {
            Ok(table_report) => {
                let summary = TableSummary::from(table_report);
                if let Some(failure) = &summary.error {
                    error!(table = %uri, error = %failure, "a maintenance step failed; the others ran");
                }
                report.stopped_early |= !summary.skipped.is_empty();
                summary
            }
            Err(e) => {
                error!(table = %uri, error = %e, "maintenance failed");
                TableSummary {
                    table: uri,
                    error: Some(e.to_string()),
                    ..TableSummary::default()
                }
            }
        };
        info!(
            table = %summary.table,
            files_before = summary.files_before,
            files_after = summary.files_after,
            bins = summary.bins,
            duplicates_removed = summary.duplicates_removed,
            files_vacuumed = summary.files_vacuumed,
            "table maintained"
        );
        if summary.error.is_none() && summary.skipped.is_empty() {
            state.completed(&summary.table, chrono::Utc::now().timestamp());
            save(state.clone()).await;
        }
        report.tables.push(summary);
    }
    if store.is_some() {
        report.minutes_since_maintained = state
            .oldest_hours(&names, chrono::Utc::now().timestamp())
            .map(|hours| (hours * 60.0) as u64);
    }

    report.metrics(&maintainer.namespace).emit();
    let failures: Vec<&TableSummary> = report.tables.iter().filter(|t| t.error.is_some()).collect();
    if let Some(first) = failures.first() {
        return Err(HandlerError::TablesFailed {
            failed: failures.len(),
            total: report.tables.len(),
            first: format!("{}: {}", first.table, first.error.as_deref().unwrap_or_default()),
        });
    }
    if let Some(failed) = report.erasures.iter().find(|e| e.error.is_some()) {
        return Err(HandlerError::ErasureFailed {
            request: failed.request.clone(),
            error: failed.error.clone().unwrap_or_default(),
        });
    }
    Ok(report)
}

/// The instant after which no new work starts: the invocation's deadline (milliseconds since the
/// epoch; 0 when unknown, as in a local run) less the reserve.
fn stop_at(deadline_ms: u64, reserve: Duration) -> Option<Instant> {
    if deadline_ms == 0 {
        return None;
    }
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let remaining = Duration::from_millis(deadline_ms.saturating_sub(now_ms));
    Some(Instant::now() + remaining.saturating_sub(reserve))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reserve_comes_off_the_deadline() {
        assert_eq!(stop_at(0, Duration::from_secs(60)), None);
        let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
        let at = stop_at(now_ms + 600_000, Duration::from_secs(180)).unwrap();
        let left = at.duration_since(Instant::now());
        assert!(
            left <= Duration::from_secs(420) && left > Duration::from_secs(410),
            "{left:?}"
        );
        // A deadline already closer than the reserve: nothing starts.
        let at = stop_at(now_ms + 10_000, Duration::from_secs(180)).unwrap();
        assert!(at <= Instant::now());
    }
}
