//! The tables and the write path of one batch.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashSet};

use arrow::record_batch::RecordBatch;
use aws_lambda_events::event::kinesis::KinesisEventRecord;
use game_events::batch::{
    EVENT_DATE, GameEventsBatchBuilder, Lineage, RejectsBatchBuilder, game_events_rejects_schema, game_events_schema,
};
use game_events::{RecordError, StampedEvent, decode_record, packed};
use lake::{Advance, LakeError, Retry, SourceFiles, Staged, StagedCommit, StorageConfig, Table, TableSpec, positions};
use tokio::sync::{Mutex, OnceCell};
use tracing::{debug, info, warn};
use uuid::Uuid;

use crate::config::{Config, Parking, Settle};

mod parking;
pub use parking::{Parked, ParkedFor, ReplayError, Replayed};

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
pub enum WriteError {
    /// The rows did not make a batch of the table's schema.
    #[error("building the batch: {0}")]
    Arrow(#[from] arrow::error::ArrowError),
    /// Writing or committing the files failed.
    #[error(transparent)]
    Lake(#[from] LakeError),
    /// The parked records could not be serialised (never expected).
    #[error("parking: {0}")]
    Parking(String),
}

/// One table, opened (or created) at its first use: a handle for the writers, which stage one
/// batch at a time, and one for the committer, so that staging never waits for a commit.
#[derive(Debug)]
struct AppendTable {
    uri: String,
    spec: TableSpec,
    storage: StorageConfig,
    settle: Option<Settle>,
    table: OnceCell<Mutex<Table>>,
    committer: OnceCell<Mutex<Table>>,
    /// Packs the table's small files beside the committer.
    packer: lake::Packer,
}

impl AppendTable {
    fn new(uri: &str, spec: TableSpec, storage: &StorageConfig, settle: Option<Settle>) -> Self {
        Self {
            uri: uri.to_owned(),
            spec,
            storage: storage.clone(),
            settle,
            table: OnceCell::new(),
            committer: OnceCell::new(),
            packer: lake::Packer::default(),
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

    /// The committer's handle: a copy of the writers' (sharing what it has read of the log).
    async fn committer(&self) -> Result<&Mutex<Table>, LakeError> {
        self.committer
            .get_or_try_init(|| async { Ok(Mutex::new(self.table().await?.lock().await.clone())) })
            .await
    }

    /// Stages the rows of `records`, records of `stream` in its order, that this table has
    /// neither committed nor staged yet, in one link of the stream's chain (see [`lake::staging`]).
    ///
    /// The stream's staged position is read; a record at or before it is already in (a
    /// redelivery), so `rows` is asked for the rows of the others only (`new[i]` says whether
    /// `records[i]` is new). Staging is refused, and nothing staged, if another writer staged
    /// the stream past that position in between. Returns what was staged (`None` when there was
    /// nothing new), what `rows` returned besides the batch, and how many records were already in.
    async fn stage_new<T>(
        &self,
        stream: &str,
        records: &[KinesisEventRecord],
        rows: impl FnOnce(&[bool]) -> (Result<RecordBatch, arrow::error::ArrowError>, T),
    ) -> Result<(Option<Staged>, T, usize), WriteError> {
        let mut table = self.table().await?.lock().await;
        let from = table.staged_position(stream).await?;
        let (new, to) = after(records, from.as_deref());
        let already = new.iter().filter(|n| !**n).count();
        let (batch, extra) = rows(&new);
        let batch = batch?;
        if batch.num_rows() == 0 {
            return Ok((None, extra, already));
        }
        let Some(to) = to else {
            // Records without a sequence number: never from Kinesis.
            return Err(LakeError::InvalidPosition {
                uri: self.uri.clone(),
                stream: stream.to_owned(),
                position: records
                    .first()
                    .map(|r| r.kinesis.sequence_number.clone())
                    .unwrap_or_default(),
            }
            .into());
        };
        let files = write_files(&table, "kinesis", batch).await?;
        let advance = Advance {
            stream: stream.to_owned(),
            from,
            to,
        };
        let staged = table.stage(files, &advance).await?;
        Ok((Some(staged), extra, already))
    }

    /// Commits what the writers staged, then starts packing the open partitions' small files
    /// beside the next commits when due ([`lake::Packer`]).
    async fn commit_staged(&self, retry: &Retry) -> Result<StagedCommit, LakeError> {
        let mut table = self.committer().await?.lock().await;
        let report = table.commit_staged(lake::staging::MAX_LINKS_PER_COMMIT, retry).await?;
        if report.version.is_some()
            && let Some(settle) = self.settle
        {
            self.packer.start(&table, settle, retry.deadline());
        }
        Ok(report)
    }
}

/// Writes `batch` into data files of `table` for `source`, ready to commit; the uploads are
/// aborted when the write fails.
async fn write_files(table: &Table, source: &str, batch: RecordBatch) -> Result<SourceFiles, LakeError> {
    let mut writer = table.writer(source)?;
    if let Err(e) = writer.write(batch).await {
        writer.abort();
        return Err(e);
    }
    writer.finish().await
}

/// The live KPIs of the events rows of one commit, and the repeats left out of it.
#[derive(Debug, Default)]
struct EventRows {
    /// By `eventName` and platform.
    counts: BTreeMap<(String, Option<String>), EventCount>,
    /// By game.
    by_game: BTreeMap<String, EventCount>,
    /// Records whose (`gameId`, `eventId`) came earlier in the batch.
    duplicates: usize,
}

/// The `game_events` rows of the records marked `new` that are events, each (`gameId`,
/// `eventId`) once, and their KPIs.
fn event_rows(
    records: &[KinesisEventRecord],
    decoded: &[Result<StampedEvent, RecordError>],
    new: &[bool],
    ingested_at: i64,
) -> (Result<RecordBatch, arrow::error::ArrowError>, EventRows) {
    let mut events = GameEventsBatchBuilder::with_capacity(records.len());
    let mut seen: HashSet<(Option<&str>, Uuid)> = HashSet::with_capacity(records.len());
    let mut rows = EventRows::default();
    for ((record, event), _) in records.iter().zip(decoded).zip(new).filter(|(_, new)| **new) {
        let Ok(event) = event else { continue };
        if !seen.insert((event.game_id.as_deref(), event.event_id)) {
            rows.duplicates += 1;
            continue;
        }
        events.append(event, lineage(record), ingested_at);
        // A probe of the canary or `lakelog check` is a row until erased, never a KPI.
        if event.game_id.as_deref() == Some(game_events::PROBE_GAME) {
            continue;
        }
        let platform = event.event_params.as_ref().and_then(|p| p.platform.clone());
        let one = EventCount {
            events: 1,
            bookings: event.booking().unwrap_or(0.0),
        };
        rows.counts
            .entry((event.event_name.clone(), platform))
            .or_default()
            .add(one);
        let game = event.game_id.as_deref().unwrap_or("unknown");
        rows.by_game.entry(game.to_owned()).or_default().add(one);
    }
    if events.unreadable_client_times() > 0 {
        warn!(
            events = events.unreadable_client_times(),
            "client_event_time could not be read; stored as null"
        );
    }
    (events.finish(), rows)
}

/// The `game_events_rejects` rows of the records marked `new` that can never be events.
fn reject_rows(
    records: &[KinesisEventRecord],
    decoded: &[Result<StampedEvent, RecordError>],
    new: &[bool],
    ingested_at: i64,
) -> Result<RecordBatch, arrow::error::ArrowError> {
    let mut rejects = RejectsBatchBuilder::default();
    for (index, ((record, event), _)) in records
        .iter()
        .zip(decoded)
        .zip(new)
        .enumerate()
        .filter(|(_, (_, new))| **new)
    {
        let Err(reason) = event else { continue };
        let lineage = lineage(record);
        warn!(
            index,
            shard = lineage.shard_id,
            sequence_number = lineage.sequence_number,
            %reason,
            "record rejected"
        );
        rejects.append(
            lineage,
            Some(&record.kinesis.partition_key),
            &record.kinesis.data,
            &reason.to_string(),
            ingested_at,
        );
    }
    rejects.finish()
}

/// Which of `records`, records of one stream in its order, come after the stream's position
/// `done`, and the sequence number of the last of them. A record without a sequence number (never
/// from Kinesis) counts as new.
fn after(records: &[KinesisEventRecord], done: Option<&str>) -> (Vec<bool>, Option<String>) {
    let mut to: Option<&str> = None;
    let new = records
        .iter()
        .map(|record| {
            let sequence = record.kinesis.sequence_number.as_str();
            if !positions::is_position(sequence) {
                return true;
            }
            let after = done.is_none_or(|done| positions::compare(sequence, done) == Ordering::Greater);
            if after && to.is_none_or(|to| positions::compare(sequence, to) == Ordering::Greater) {
                to = Some(sequence);
            }
            after
        })
        .collect();
    (new, to.map(str::to_owned))
}

/// The runs of `records` from one stream each, in order: `(stream, range)`. Kinesis hands a
/// function one shard's records at a time; other callers may mix streams.
fn runs(records: &[KinesisEventRecord]) -> Vec<(String, std::ops::Range<usize>)> {
    let mut runs: Vec<(String, std::ops::Range<usize>)> = Vec::new();
    for (i, record) in records.iter().enumerate() {
        let stream = stream_of(record);
        match runs.last_mut() {
            Some((last, range)) if *last == stream => range.end = i + 1,
            _ => runs.push((stream, i..i + 1)),
        }
    }
    runs
}

/// The events of a batch that one name and platform share: the figures of the live KPIs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EventCount {
    /// Events (distinct `eventId`s of the batch).
    pub events: u64,
    /// The sum of their bookings (`eventParams.amount` of `purchaseEvent`s).
    pub bookings: f64,
}

impl EventCount {
    /// Adds `other`'s events and bookings.
    pub fn add(&mut self, other: EventCount) {
        self.events += other.events;
        self.bookings += other.bookings;
    }
}

/// What became of one batch of records.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BatchReport {
    /// Records in the batch.
    pub records: usize,
    /// Rows staged for `game_events`.
    pub rows: u64,
    /// Records whose `(gameId, eventId)` came earlier in the same batch, so were not written again.
    pub duplicates: usize,
    /// Records the tables already had, staged or committed (a batch delivered again): not written
    /// again.
    pub already_committed: usize,
    /// Records staged for `game_events_rejects`.
    pub rejected: usize,
    /// Records parked because a table could not take them before the stream would drop them
    /// (`lakelog replay` brings them in).
    pub parked: usize,
    /// The sequence number of the first record that was not staged: it and every record after
    /// it must be delivered again. `None` when the whole batch is staged (or in the tables).
    pub retry_from: Option<String>,
    /// Tries the batch's commits took (1 each when the first landed).
    pub commit_attempts: u32,
    /// Commits that landed but whose post-commit step (checkpoint, log cleanup) failed.
    pub post_commit_failures: u32,
    /// The events staged for `game_events`, by `eventName` and `eventParams.platform` (empty
    /// when their staging failed).
    pub events: BTreeMap<(String, Option<String>), EventCount>,
    /// The same events by `gameId` (`unknown` for records that name no game).
    pub by_game: BTreeMap<String, EventCount>,
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
        self.already_committed += later.already_committed;
        self.rejected += later.rejected;
        self.parked += later.parked;
        self.commit_attempts += later.commit_attempts;
        self.post_commit_failures += later.post_commit_failures;
        self.retry_from = later.retry_from;
        for (key, count) in later.events {
            self.events.entry(key).or_default().add(count);
        }
        for (game, count) in later.by_game {
            self.by_game.entry(game).or_default().add(count);
        }
    }
}

/// Appends batches of Kinesis records to the `game_events` table and its rejects table.
#[derive(Debug)]
pub struct Sink {
    events: AppendTable,
    rejects: AppendTable,
    parking: Option<Parking>,
    storage: StorageConfig,
}

/// The stream a record's position is kept under: `kinesis:<stream ARN>/<shard>`, so that a table
/// fed by another stream later does not take its sequence numbers for those of the first.
fn stream_of(record: &KinesisEventRecord) -> String {
    stream_key(
        record.event_source_arn.as_deref().unwrap_or("local"),
        lineage(record).shard_id,
    )
}

/// The name a shard's position is kept under (see [`stream_of`]).
fn stream_key(event_source_arn: &str, shard_id: &str) -> String {
    format!("kinesis:{event_source_arn}/{shard_id}")
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
        let spec = |spec: TableSpec| spec.with_schema_changes(config.evolve_schema);
        Self {
            events: AppendTable::new(&config.events_table, spec(events_table_spec()), storage, config.settle),
            rejects: AppendTable::new(
                &config.rejects_table,
                spec(rejects_table_spec()),
                storage,
                config.settle,
            ),
            parking: config.parking.clone(),
            storage: storage.clone(),
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
    /// locations' last segments), and their Iceberg views as `game_events_iceberg` and
    /// `game_events_rejects_iceberg`, opening them first if they are not open yet.
    pub async fn register(&self, catalog: &catalog::Catalog) -> Result<(), catalog::CatalogError> {
        for table in [&self.events, &self.rejects] {
            let handle = table
                .table()
                .await
                .map_err(|source| catalog::CatalogError::TableUnreadable {
                    location: table.uri.clone(),
                    source,
                })?
                .lock()
                .await;
            let name = catalog::table_name(&table.uri, false);
            let done = catalog.register(&name, &handle).await?;
            info!(table = %table.uri, name, database = catalog.database(), ?done.table, ?done.view, "registered in the catalog");
        }
        Ok(())
    }

    /// How far the tables have the records of the shard `shard_id` of the stream
    /// `event_source_arn`: the later of the two tables' staged positions (see
    /// [`Table::staged_position`]); `None` when neither has one.
    pub async fn position(&self, event_source_arn: &str, shard_id: &str) -> Result<Option<String>, LakeError> {
        let stream = stream_key(event_source_arn, shard_id);
        let mut latest: Option<String> = None;
        for table in [&self.events, &self.rejects] {
            let mut table = table.table().await?.lock().await;
            if let Some(position) = table.staged_position(&stream).await?
                && latest
                    .as_deref()
                    .is_none_or(|l| positions::compare(&position, l) == Ordering::Greater)
            {
                latest = Some(position);
            }
        }
        Ok(latest)
    }

    /// The `game_events` table's location.
    pub fn events_uri(&self) -> &str {
        &self.events.uri
    }

    /// The rejects table's location.
    pub fn rejects_uri(&self) -> &str {
        &self.rejects.uri
    }

    fn table_for(&self, table: ParkedFor) -> &AppendTable {
        match table {
            ParkedFor::Events => &self.events,
            ParkedFor::Rejects => &self.rejects,
        }
    }

    /// Hands `records` to [`Sink::process`] as Lambda's Kinesis event source does with
    /// ReportBatchItemFailures: what was not committed is delivered again from its first
    /// uncommitted record, up to `deliveries` deliveries in all, waiting `wait(n)` before the
    /// `n`-th repeat (1, 2, ...). Returns the reports added up and the records still not committed
    /// (none when the whole batch is in).
    pub async fn process_until_committed<'r>(
        &self,
        records: &'r [KinesisEventRecord],
        retry: &Retry,
        deliveries: u32,
        wait: impl Fn(u32) -> std::time::Duration,
    ) -> (BatchReport, &'r [KinesisEventRecord]) {
        let mut total = BatchReport::default();
        let mut rest = records;
        for delivery in 1..=deliveries.max(1) {
            if delivery > 1 {
                tokio::time::sleep(wait(delivery - 1)).await;
            }
            let report = self.process(rest, retry).await;
            let redeliver = report.redeliver_from(rest);
            total.add(report);
            match redeliver {
                None => return (total, &[]),
                Some(from) => rest = &rest[from..],
            }
        }
        (total, rest)
    }

    /// Stages the records of one batch and commits what is staged: the writer and the committer
    /// of the functions, one after the other, as `lakelog serve`, the demo and the tests run
    /// them. The report is [`Sink::stage`]'s, with the commits' tries added; a commit that fails
    /// leaves the batch staged for the next pass ([`Sink::commit_staged`]).
    pub async fn process(&self, records: &[KinesisEventRecord], retry: &Retry) -> BatchReport {
        let mut report = self.stage(records).await;
        let committed = self.commit_staged(retry).await;
        self.settled().await;
        for table in [&committed.events, &committed.rejects] {
            match table {
                Ok(table) => {
                    report.commit_attempts += table.attempts;
                    report.post_commit_failures += u32::from(table.post_commit_failed);
                }
                Err(e) => warn!(error = %e, "staged, not committed yet; the next pass commits it"),
            }
        }
        report
    }

    /// Waits for the packings of small files that the commits started, if any are running.
    pub async fn settled(&self) {
        tokio::join!(self.events.packer.finish(), self.rejects.packer.finish());
    }

    /// Commits what the writers staged in both tables: one version of each with rows (see
    /// [`lake::staging`]); a packing of small files starts beside the next commits when due
    /// ([`Sink::settled`] waits for it). Both tables are tried, each with its own outcome: a
    /// table that committed is reported so even when the other failed.
    pub async fn commit_staged(&self, retry: &Retry) -> SinkCommit {
        let (events, rejects) = tokio::join!(self.events.commit_staged(retry), self.rejects.commit_staged(retry));
        SinkCommit { events, rejects }
    }

    /// Stages the records of one batch (in their shards' order), the writer's part: per stream,
    /// the events in one link of `game_events`' chain, then the records that can never be rows in
    /// one link of the rejects table's. Each table stages only the records after its stream's
    /// staged position: a batch delivered again, whole or in part, adds no row. What could not be
    /// staged is named in [`BatchReport::retry_from`], for Kinesis to deliver again.
    pub async fn stage(&self, records: &[KinesisEventRecord]) -> BatchReport {
        let ingested_at = lake::now_micros();
        let records = packed::unpack_records(records);
        let records = records.as_ref();
        let decoded: Vec<Result<StampedEvent, RecordError>> =
            records.iter().map(|r| decode_record(&r.kinesis.data)).collect();
        let mut report = BatchReport {
            records: records.len(),
            ..BatchReport::default()
        };
        for (stream, range) in runs(records) {
            let (run, decoded) = (&records[range.clone()], &decoded[range]);
            if let Err(retry_from) = self.stage_run(&stream, run, decoded, ingested_at, &mut report).await {
                report.retry_from = Some(retry_from);
                return report;
            }
        }
        let lag_ms = records
            .iter()
            .map(|r| r.kinesis.approximate_arrival_timestamp.0.timestamp_millis())
            .min()
            .map(|oldest| lake::now_micros() / 1000 - oldest);
        // The batch's health document carries the same figures; at the default level a batch
        // adds no line of its own to the log, which CloudWatch Logs bills by the byte.
        debug!(
            records = report.records,
            rows_staged = report.rows,
            already_in = report.already_committed,
            duplicates = report.duplicates,
            records_rejected = report.rejected,
            records_parked = report.parked,
            lag_ms,
            "batch staged"
        );
        report
    }

    /// Stages one stream's run of a batch; `Err` holds the sequence number to deliver again from.
    async fn stage_run(
        &self,
        stream: &str,
        records: &[KinesisEventRecord],
        decoded: &[Result<StampedEvent, RecordError>],
        ingested_at: i64,
        report: &mut BatchReport,
    ) -> Result<(), String> {
        let first = records
            .first()
            .map(|r| r.kinesis.sequence_number.clone())
            .unwrap_or_default();
        let events = self
            .events
            .stage_new(stream, records, |new| event_rows(records, decoded, new, ingested_at))
            .await;
        match events {
            Ok((staged, kpis, already)) => {
                report.already_committed += already;
                report.duplicates += kpis.duplicates;
                if let Some(staged) = staged {
                    report.rows += staged.rows;
                    for (key, count) in kpis.counts {
                        report.events.entry(key).or_default().add(count);
                    }
                    for (game, count) in kpis.by_game {
                        report.by_game.entry(game).or_default().add(count);
                    }
                }
            }
            Err(e) => match self.park_if_due(ParkedFor::Events, &e, records, decoded).await {
                Some(parked) => report.parked += parked,
                None => return Err(first),
            },
        }
        // Where Kinesis delivers the batch again from if the rejects are not staged: the first
        // record that is one (the events after it are in, and are skipped then).
        let Some(first_reject) = records
            .iter()
            .zip(decoded)
            .find(|(_, event)| event.is_err())
            .map(|(record, _)| record.kinesis.sequence_number.clone())
        else {
            return Ok(());
        };
        let rejects = self
            .rejects
            .stage_new(stream, records, |new| {
                (reject_rows(records, decoded, new, ingested_at), ())
            })
            .await;
        match rejects {
            Ok((Some(staged), (), _)) => {
                report.rejected += usize::try_from(staged.rows).unwrap_or(usize::MAX);
            }
            Ok((None, (), _)) => {}
            Err(e) => match self.park_if_due(ParkedFor::Rejects, &e, records, decoded).await {
                Some(parked) => report.parked += parked,
                None => return Err(first_reject),
            },
        }
        Ok(())
    }
}

/// What one committer pass did to each of the two tables: each table's outcome is its own, so
/// two committers that split the tables both report what they did.
#[derive(Debug)]
pub struct SinkCommit {
    /// `game_events`.
    pub events: Result<StagedCommit, LakeError>,
    /// `game_events_rejects`.
    pub rejects: Result<StagedCommit, LakeError>,
}

/// Both tables' commits of a pass in which neither failed ([`SinkCommit::both`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Committed {
    /// `game_events`.
    pub events: StagedCommit,
    /// `game_events_rejects`.
    pub rejects: StagedCommit,
}

impl SinkCommit {
    /// Both tables' commits, or the first error (`game_events`' first).
    pub fn both(self) -> Result<Committed, LakeError> {
        Ok(Committed {
            events: self.events?,
            rejects: self.rejects?,
        })
    }

    /// The tables that committed, or had nothing to commit.
    pub fn done(&self) -> impl Iterator<Item = &StagedCommit> {
        [&self.events, &self.rejects]
            .into_iter()
            .filter_map(|t| t.as_ref().ok())
    }

    /// The errors of the tables that failed.
    pub fn failures(&self) -> impl Iterator<Item = &LakeError> {
        [&self.events, &self.rejects]
            .into_iter()
            .filter_map(|t| t.as_ref().err())
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
    fn a_probe_is_a_row_and_no_kpi() {
        let event = |game: &str| StampedEvent {
            event_name: "levelUp".into(),
            event_time: chrono::Utc::now(),
            event_id: Uuid::new_v4(),
            game_id: Some(game.into()),
            event_params: None,
            extra: serde_json::Map::new(),
        };
        let records = batch(&["1", "2"]);
        let decoded = vec![Ok(event("space-miners")), Ok(event(game_events::PROBE_GAME))];
        let (rows, kpis) = event_rows(&records, &decoded, &[true, true], 0);
        assert_eq!(rows.unwrap().num_rows(), 2);
        assert_eq!(kpis.by_game.keys().collect::<Vec<_>>(), ["space-miners"]);
        assert_eq!(kpis.counts.values().map(|c| c.events).sum::<u64>(), 1);
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
            already_committed: 2,
            rejected: 0,
            parked: 0,
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
            by_game: BTreeMap::from([(
                "space-miners".into(),
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
            already_committed: 0,
            rejected: 1,
            parked: 2,
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
            by_game: BTreeMap::from([(
                "space-miners".into(),
                EventCount {
                    events: 2,
                    bookings: 1.0,
                },
            )]),
        });
        assert_eq!(
            total,
            BatchReport {
                records: 5,
                rows: 3,
                duplicates: 1,
                already_committed: 2,
                rejected: 1,
                parked: 2,
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
                by_game: BTreeMap::from([(
                    "space-miners".into(),
                    EventCount {
                        events: 3,
                        bookings: 5.99
                    }
                )]),
            }
        );
    }
}
