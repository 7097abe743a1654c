//! The tables and the write path of one batch.

use std::collections::{BTreeMap, HashSet};

use arrow::record_batch::RecordBatch;
use aws_lambda_events::event::kinesis::KinesisEventRecord;
use game_events::batch::{
    EVENT_DATE, GameEventsBatchBuilder, Lineage, RejectsBatchBuilder, game_events_rejects_schema, game_events_schema,
};
use game_events::decode_record;
use lake::{AppendOutcome, LakeError, Retry, StorageConfig, Table, TableSpec};
use tokio::sync::{Mutex, OnceCell};
use tracing::{info, warn};
use uuid::Uuid;

use crate::config::Config;

/// The `game_events` table: partitioned by `eventDate`.
pub fn events_table_spec() -> TableSpec {
    TableSpec::new("game_events", game_events_schema(), &[EVENT_DATE])
}

/// The `game_events_rejects` table.
pub fn rejects_table_spec() -> TableSpec {
    TableSpec::new("game_events_rejects", game_events_rejects_schema(), &[])
}

/// Why a batch could not be committed.
#[derive(Debug, thiserror::Error)]
enum WriteError {
    /// The rows did not make a batch of the table's schema.
    #[error("building the batch: {0}")]
    Arrow(#[from] arrow::error::ArrowError),
    /// Writing or committing the files failed.
    #[error(transparent)]
    Lake(#[from] LakeError),
}

/// One table, opened (or created) at its first use and then kept open for appends by one batch
/// at a time.
#[derive(Debug)]
struct AppendTable {
    uri: String,
    spec: TableSpec,
    storage: StorageConfig,
    table: OnceCell<Mutex<Table>>,
}

impl AppendTable {
    fn new(uri: &str, spec: TableSpec, storage: &StorageConfig) -> Self {
        Self {
            uri: uri.to_owned(),
            spec,
            storage: storage.clone(),
            table: OnceCell::new(),
        }
    }

    /// The open table: opened by the first caller (later callers wait for it); after a failure
    /// the next call tries again.
    async fn table(&self) -> Result<&Mutex<Table>, LakeError> {
        self.table
            .get_or_try_init(|| async {
                Table::open_or_create(&self.uri, &self.spec, &self.storage)
                    .await
                    .map(Mutex::new)
            })
            .await
    }

    /// Appends `batch` as one commit.
    async fn append(
        &self,
        batch: Result<RecordBatch, arrow::error::ArrowError>,
        retry: &Retry,
    ) -> Result<AppendOutcome, WriteError> {
        let batch = batch?;
        // The commit brings the table to the newest version before it tries.
        let mut table = self.table().await?.lock().await;
        let mut writer = table.writer("kinesis")?;
        if let Err(e) = writer.write(batch).await {
            writer.abort();
            return Err(e.into());
        }
        let files = writer.finish().await?;
        Ok(table.commit_appends(vec![files], retry).await?)
    }
}

/// The events of a batch that one name and platform share: the figures of the live KPIs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EventCount {
    /// Events (distinct `eventId`s of the batch).
    pub events: u64,
    /// The sum of their bookings (`eventParams.amount` of `purchaseEvent`s).
    pub bookings: f64,
}

/// What became of one batch of records.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BatchReport {
    /// Records in the batch.
    pub records: usize,
    /// Rows committed to `game_events`.
    pub rows: u64,
    /// Records whose `eventId` came earlier in the same batch, so were not written again.
    pub duplicates: usize,
    /// Records committed to `game_events_rejects`.
    pub rejected: usize,
    /// The sequence number of the first record that was not committed: it and every record after
    /// it must be delivered again. `None` when the whole batch is in the tables.
    pub retry_from: Option<String>,
    /// Tries the batch's commits took (1 each when the first landed).
    pub commit_attempts: u32,
    /// Commits that landed but whose post-commit step (checkpoint, log cleanup) failed.
    pub post_commit_failures: u32,
    /// The events committed to `game_events`, by `eventName` and `eventParams.platform` (empty
    /// when their commit failed).
    pub events: BTreeMap<(String, Option<String>), EventCount>,
}

impl BatchReport {
    /// Where to deliver `batch`, the records this report is of, again from: the index of the
    /// record named by [`retry_from`](Self::retry_from), or 0 if it names none of them; `None`
    /// when the whole batch is in the tables.
    pub fn redeliver_from(&self, batch: &[KinesisEventRecord]) -> Option<usize> {
        let from = self.retry_from.as_deref()?;
        Some(
            batch
                .iter()
                .position(|r| r.kinesis.sequence_number == from)
                .unwrap_or(0),
        )
    }

    /// Adds the counts of `later`, a report of a later delivery; its `retry_from` replaces this one's.
    pub fn add(&mut self, later: BatchReport) {
        self.records += later.records;
        self.rows += later.rows;
        self.duplicates += later.duplicates;
        self.rejected += later.rejected;
        self.commit_attempts += later.commit_attempts;
        self.post_commit_failures += later.post_commit_failures;
        self.retry_from = later.retry_from;
        for (key, count) in later.events {
            let total = self.events.entry(key).or_default();
            total.events += count.events;
            total.bookings += count.bookings;
        }
    }
}

/// Appends batches of Kinesis records to the `game_events` table and its rejects table.
#[derive(Debug)]
pub struct Sink {
    events: AppendTable,
    rejects: AppendTable,
}

/// The lineage of a record: the shard comes from the Lambda's `eventID`,
/// `shardId-000000000000:<sequence number>`.
fn lineage(record: &KinesisEventRecord) -> Lineage<'_> {
    let shard_id = record
        .event_id
        .as_deref()
        .and_then(|id| id.split_once(':'))
        .map_or("unknown", |(shard, _)| shard);
    Lineage {
        shard_id,
        sequence_number: &record.kinesis.sequence_number,
        arrival: Some(record.kinesis.approximate_arrival_timestamp.0),
    }
}

impl Sink {
    /// The sink of `config`'s tables, opened at their first use: [`Sink::ready`] opens them
    /// ahead of it (the Lambda does so beside its first poll), [`Sink::process`] waits for that or
    /// opens them itself.
    pub fn new(config: &Config, storage: &StorageConfig) -> Self {
        Self {
            events: AppendTable::new(&config.events_table, events_table_spec(), storage),
            rejects: AppendTable::new(&config.rejects_table, rejects_table_spec(), storage),
        }
    }

    /// Opens the tables of `config`, creating them when they are missing: [`Sink::new`], then
    /// [`Sink::ready`].
    pub async fn open(config: &Config, storage: &StorageConfig) -> Result<Self, LakeError> {
        let sink = Self::new(config, storage);
        sink.ready().await?;
        Ok(sink)
    }

    /// Opens both tables, at once, creating them when they are missing; a table already open is
    /// not opened again, and one that failed is tried again.
    pub async fn ready(&self) -> Result<(), LakeError> {
        let (events, rejects) = tokio::join!(self.events.table(), self.rejects.table());
        events?;
        rejects?;
        Ok(())
    }

    /// Registers both tables in `catalog`, as `game_events` and `game_events_rejects` (their
    /// locations' last segments), opening them first if they are not open yet.
    pub async fn register(&self, catalog: &catalog::Catalog) -> Result<(), catalog::CatalogError> {
        for table in [&self.events, &self.rejects] {
            let unreadable = |e: LakeError| catalog::CatalogError::TableUnreadable {
                location: table.uri.clone(),
                message: e.to_string(),
            };
            let handle = table.table().await.map_err(unreadable)?.lock().await;
            let schema = handle.schema().map_err(unreadable)?;
            let partitions = handle.partition_columns().map_err(unreadable)?;
            let name = catalog::table_name(&table.uri, false);
            let done = catalog.register(&name, &table.uri, &schema, &partitions).await?;
            info!(table = %table.uri, name, database = catalog.database(), ?done, "registered in the catalog");
        }
        Ok(())
    }

    /// The `game_events` table's location.
    pub fn events_uri(&self) -> &str {
        &self.events.uri
    }

    /// The rejects table's location.
    pub fn rejects_uri(&self) -> &str {
        &self.rejects.uri
    }

    /// Writes the records of one batch (in their shard's order): events in one commit to
    /// `game_events`, then the records that can never be rows in one commit to the rejects table.
    /// Commits are tried until `retry`'s deadline; what is not committed by then is named in
    /// [`BatchReport::retry_from`], for Kinesis to deliver again.
    pub async fn process(&self, records: &[KinesisEventRecord], retry: &Retry) -> BatchReport {
        let ingested_at = lake::now_micros();
        let mut report = BatchReport {
            records: records.len(),
            ..BatchReport::default()
        };
        let mut events = GameEventsBatchBuilder::with_capacity(records.len());
        let mut rejects = RejectsBatchBuilder::default();
        let mut first_reject: Option<&str> = None;
        let mut seen: HashSet<Uuid> = HashSet::with_capacity(records.len());
        let mut counts: BTreeMap<(String, Option<String>), EventCount> = BTreeMap::new();
        for (index, record) in records.iter().enumerate() {
            let lineage = lineage(record);
            match decode_record(&record.kinesis.data) {
                Ok(event) => {
                    if seen.insert(event.event_id) {
                        events.append(&event, lineage, ingested_at);
                        let platform = event.event_params.as_ref().and_then(|p| p.platform.clone());
                        let count = counts.entry((event.event_name.clone(), platform)).or_default();
                        count.events += 1;
                        count.bookings += event.booking().unwrap_or(0.0);
                    } else {
                        report.duplicates += 1;
                    }
                }
                Err(reason) => {
                    warn!(
                        index,
                        shard = lineage.shard_id,
                        sequence_number = lineage.sequence_number,
                        %reason,
                        "record rejected"
                    );
                    first_reject.get_or_insert(lineage.sequence_number);
                    rejects.append(
                        lineage,
                        Some(&record.kinesis.partition_key),
                        &record.kinesis.data,
                        &reason.to_string(),
                        ingested_at,
                    );
                }
            }
        }
        if events.unreadable_client_times() > 0 {
            warn!(
                events = events.unreadable_client_times(),
                "client_event_time could not be read; stored as null"
            );
        }
        let first = records.first().map(|r| r.kinesis.sequence_number.clone());
        if !events.is_empty() {
            match self.events.append(events.finish(), retry).await {
                Ok(outcome) => {
                    report.rows = outcome.rows;
                    report.events = counts;
                    report.commit_attempts += outcome.attempts;
                    report.post_commit_failures += u32::from(outcome.post_commit_failed);
                }
                Err(e) => {
                    warn!(table = %self.events.uri, error = %e, "events not committed; the batch will be retried");
                    report.retry_from = first;
                    return report;
                }
            }
        }
        if !rejects.is_empty() {
            let count = rejects.len();
            match self.rejects.append(rejects.finish(), retry).await {
                Ok(outcome) => {
                    report.rejected = count;
                    report.commit_attempts += outcome.attempts;
                    report.post_commit_failures += u32::from(outcome.post_commit_failed);
                }
                Err(e) => {
                    warn!(table = %self.rejects.uri, error = %e, "rejects not committed; retrying from the first");
                    report.retry_from = first_reject.map(str::to_owned);
                    return report;
                }
            }
        }
        let lag_ms = records
            .iter()
            .map(|r| r.kinesis.approximate_arrival_timestamp.0.timestamp_millis())
            .min()
            .map(|oldest| lake::now_micros() / 1000 - oldest);
        info!(
            records = report.records,
            rows_written = report.rows,
            duplicates = report.duplicates,
            records_rejected = report.rejected,
            commit_attempts = report.commit_attempts,
            post_commit_failures = report.post_commit_failures,
            lag_ms,
            "batch committed"
        );
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(sequence_numbers: &[&str]) -> Vec<KinesisEventRecord> {
        sequence_numbers
            .iter()
            .map(|n| {
                let mut record = KinesisEventRecord::default();
                record.kinesis.sequence_number = (*n).to_owned();
                record
            })
            .collect()
    }

    #[test]
    fn redelivery_starts_at_the_first_uncommitted_record() {
        let records = batch(&["1", "2", "3"]);
        let mut report = BatchReport::default();
        assert_eq!(report.redeliver_from(&records), None);
        report.retry_from = Some("2".into());
        assert_eq!(report.redeliver_from(&records), Some(1));
        // A sequence number outside the batch: all of it again.
        report.retry_from = Some("9".into());
        assert_eq!(report.redeliver_from(&records), Some(0));
    }

    #[test]
    fn reports_of_redeliveries_add_up() {
        let mut total = BatchReport {
            records: 3,
            rows: 1,
            duplicates: 0,
            rejected: 0,
            retry_from: Some("2".into()),
            commit_attempts: 3,
            post_commit_failures: 0,
            events: BTreeMap::from([(
                ("purchaseEvent".into(), Some("ios".into())),
                EventCount {
                    events: 1,
                    bookings: 4.99,
                },
            )]),
        };
        total.add(BatchReport {
            records: 2,
            rows: 2,
            duplicates: 1,
            rejected: 1,
            retry_from: None,
            commit_attempts: 2,
            post_commit_failures: 1,
            events: BTreeMap::from([
                (
                    ("purchaseEvent".into(), Some("ios".into())),
                    EventCount {
                        events: 1,
                        bookings: 1.0,
                    },
                ),
                (
                    ("levelUp".into(), None),
                    EventCount {
                        events: 1,
                        bookings: 0.0,
                    },
                ),
            ]),
        });
        assert_eq!(
            total,
            BatchReport {
                records: 5,
                rows: 3,
                duplicates: 1,
                rejected: 1,
                retry_from: None,
                commit_attempts: 5,
                post_commit_failures: 1,
                events: BTreeMap::from([
                    (
                        ("purchaseEvent".into(), Some("ios".into())),
                        EventCount {
                            events: 2,
                            bookings: 5.99,
                        },
                    ),
                    (
                        ("levelUp".into(), None),
                        EventCount {
                            events: 1,
                            bookings: 0.0
                        }
                    ),
                ]),
            }
        );
    }
}
