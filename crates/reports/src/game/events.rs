//! The events the game report counts, read from the table one chunk of time at a time.
//!
//! The table is read in two passes, each a run of chunks of whole hours (whole days where they
//! fit) of at most a given number of rows ([`CHUNK_ROWS`] unless set; an hour is never split):
//!
//! 1. **By arrival.** Chunks of approximate arrival time, in order, with the columns that say
//!    which copy of an event came first and whether it came late. [`Judge`] walks each chunk in
//!    arrival order and carries to the next only the watermark and the ids seen.
//! 2. **By event time.** Chunks of `eventTime` within the range, in order, with the columns the
//!    KPIs read. Each chunk's rows are given their verdicts, and its first copies are registered
//!    as the in-memory table [`EVENTS`] for the chunk's own queries: events, bookings and late
//!    events per minute and platform ([`Minute`]), the devices active each day (into [`ACTIVE`])
//!    and the counted purchases (into [`PURCHASES`]). The sessions are cut as the chunks come
//!    ([`Cutter`]). Then the chunk is let go.
//!
//! Each chunk is held compactly while it is processed: the arrival order and the id of each row
//! ([`Arrivals`]: a fixed number of bytes a row), its device as the number of a device id kept once, its
//! time, and the columns the queries read with the short texts dictionary-encoded; `extraParams`
//! and `app_version` for purchases only. What outlives a chunk grows with the distinct ids (16
//! bytes each in a hash set, during the first pass only), the distinct devices (their ids, and
//! each one's session under way), the days each device was active, the counted purchases, the
//! sessions' lengths and the minutes with events, and with the later copies and late events found:
//! not with the events themselves. BENCHMARKS.md, "Chunks of time", measures it.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Date32Array, TimestampMicrosecondArray, UInt32Array};
use arrow::compute::{cast, filter_record_batch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use arrow::record_batch::RecordBatch;
use chrono::{DateTime, TimeDelta};
use deltalake::datafusion::datasource::MemTable;
use deltalake::datafusion::error::DataFusionError;
use deltalake::datafusion::physical_plan::SendableRecordBatchStream;
use futures::StreamExt;
use tracing::debug;

use super::arrival::{ArrivalColumns, Arrivals, Judge};
use super::attribution::{self, ACQUISITION, Attribution, EXPOSURES, MAY_CARRY, RowFacts};
use super::funnel::{FunnelReport, Matcher, Walker};
use super::paths::{PathWalker, Paths};
use super::sessions::{self, Cutter, Play, Sessions};
use super::texts::Texts;
use super::{COUNTED_PURCHASE, Close, DAY_MICROS, EVENTS, GameOptions, HOUR_MICROS, PURCHASE, WATERMARK_MINUTES};
use crate::error::ReportError;
use crate::range::TimeRange;
use crate::range::timestamp_literal;
use crate::session::ReportSession;
use crate::session::batch_column;

/// The rows a chunk holds at most, unless set (BENCHMARKS.md, "Chunks of time", measures the
/// memory it takes).
pub const CHUNK_ROWS: usize = 2_000_000;

/// The in-memory table of each device's platforms and days with events: `device`, `platform`,
/// `day` (a row may repeat).
pub(super) const ACTIVE: &str = "__game_kpi_active";

/// SQL of each device of [`ACTIVE`] with its first day and that day's platform (the smallest name,
/// if several): `device`, `first_day`, `platform`. Retention's cohorts, acquisition's groups and
/// the experiments' platforms all count a device so.
pub(super) fn first_days() -> String {
    format!(
        "SELECT f.device, f.first_day, min(a.platform) AS platform \
         FROM (SELECT device, min(day) AS first_day FROM {ACTIVE} GROUP BY device) f \
         JOIN {ACTIVE} a ON a.device = f.device AND a.day = f.first_day GROUP BY f.device, f.first_day"
    )
}

/// The in-memory table of the counted purchases: `day`, `game`, `extra`, `platform`, `device`,
/// `version`, `amount`.
pub(super) const PURCHASES: &str = "__game_kpi_purchases";

/// The query that reads the copies of events, by arrival, to judge them.
const ARRIVAL_QUERY: &str = "copies of events by arrival";

/// The query that reads the copies of events, by event time, to count them.
const COPIES: &str = "copies of events";

/// The columns of the copies that [`Arrivals`] reads.
const ARRIVAL: ArrivalColumns<'static> = ArrivalColumns {
    namespace: Some("game_id"),
    id: "event_id",
    time: "t",
    arrival: "arrival",
    shard: "shard",
    sequence: "seq",
};

/// [`ARRIVAL`]'s columns, from the table.
const ARRIVAL_SQL: &str = r#"SELECT "gameId" AS game_id, "eventId" AS event_id, "eventTime" AS t,
    "approximateArrivalTime" AS arrival, "shardId" AS shard, "sequenceNumber" AS seq"#;

/// The columns the KPIs read, from the table: `extraParams` of purchases, of the events whose
/// funnel steps read it and of those that may carry an acquisition or an exposure, and the typed
/// parameters the steps read.
fn copies_sql(matcher: &Matcher) -> String {
    let extra_names: String = matcher.extra_names().map(|name| format!(", {name}")).collect();
    let typed = matcher.typed_columns();
    format!(
        r#"SELECT "gameId" AS game_id, "eventId" AS event_id, "eventName" AS name, "eventTime" AS t,
                  coalesce("gameId", 'unknown') AS game,
                  CASE WHEN "eventName" IN ('{PURCHASE}'{extra_names}) OR {MAY_CARRY} THEN "extraParams" END AS extra{typed},
                  coalesce("eventParams"['platform'], 'unknown') AS platform,
                  "eventParams"['device_id'] AS device,
                  CASE WHEN "eventName" = '{PURCHASE}' THEN "eventParams"['app_version'] END AS version,
                  "eventParams"['amount'] AS amount,
                  "approximateArrivalTime" AS arrival, "shardId" AS shard, "sequenceNumber" AS seq"#
    )
}

/// The counted events, bookings and late events of one minute.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Minute {
    /// First copies on time.
    pub events: i64,
    /// The sum of the counted purchases' amounts, if there were any.
    pub bookings: Option<f64>,
    /// First copies that came late.
    pub late: i64,
}

/// [`Minute`]s by platform (`None`: all platforms together), then by the minute's start in
/// microseconds since the epoch.
pub(super) type Minutes = BTreeMap<Option<String>, BTreeMap<i64, Minute>>;

/// What [`load`] registered and found.
#[derive(Debug)]
pub(super) struct Loaded {
    /// The sessions of the first copies in the range.
    pub sessions: Sessions,
    /// The events, bookings and late events of each minute in the range.
    pub minutes: Minutes,
    /// The `device_id` of each device number of [`ACTIVE`] and [`PURCHASES`].
    pub devices: Vec<Box<str>>,
    /// The funnels asked for.
    pub funnels: Vec<FunnelReport>,
    /// The devices' acquisitions and exposures.
    pub attribution: Attribution,
    /// The paths asked for.
    pub paths: Option<Paths>,
}

/// Reads every copy of every event of `table` (a quoted name), chunks of at most `chunk_rows` rows
/// at a time: judges them, counts the first copies in `range` per minute, registers [`ACTIVE`] and
/// [`PURCHASES`], cuts the sessions after `gap` of inactivity and follows the devices through
/// `funnels`, whose figures are final once their windows end by `close`.
pub(super) async fn load(
    session: &ReportSession,
    table: &str,
    range: &TimeRange,
    options: &GameOptions,
    close: &Close,
) -> Result<Loaded, ReportError> {
    let (gap, chunk_rows) = (options.session_gap, options.chunk_rows);
    let matcher = Matcher::new(&options.funnels)?;
    let mut walker = Walker::new(&options.funnels);
    // Pass 1: by arrival.
    let started = Instant::now();
    let arrival_column = r#""approximateArrivalTime""#;
    // The probes of the canary and `lakelog check` are rows until erased, never figures.
    let not_probe = format!(r#"("gameId" IS DISTINCT FROM '{}')"#, game_events::PROBE_GAME);
    let hours = hour_counts(session, arrival_column, table, &not_probe).await?;
    let mut arrivals = Arrivals::default();
    let rows: u64 = hours.iter().map(|&(_, n)| n).sum();
    let mut judge = Judge::new(
        TimeDelta::minutes(WATERMARK_MINUTES),
        usize::try_from(rows).unwrap_or(0),
    );
    for chunk in chunks(&hours, chunk_rows) {
        let sql = format!(
            "{ARRIVAL_SQL} FROM {table} WHERE {not_probe} AND {}",
            chunk.filter(arrival_column)
        );
        let mut batches = stream(session, ARRIVAL_QUERY, &sql).await?;
        while let Some(batch) = batches.next().await {
            arrivals.push(ARRIVAL_QUERY, &batch.map_err(query_error(ARRIVAL_QUERY))?, ARRIVAL)?;
        }
        judge.judge_chunk(&arrivals);
        arrivals.clear();
    }
    judge.forget_ids();
    debug!(
        query = "first copies and lateness",
        rows = judge.rows(),
        later_copies = judge.later_copies(),
        ms = started.elapsed().as_millis() as u64,
        "query"
    );

    // Pass 2: by event time, within the range.
    let started = Instant::now();
    let time_column = r#""eventTime""#;
    let within = format!("{} AND {not_probe}", range.filter("eventDate", "eventTime"));
    let hours = hour_counts(session, time_column, table, &within).await?;
    let mut held = Held {
        arrivals,
        matcher,
        conversion: options.conversion.clone(),
        paths: options.paths.clone().map(PathWalker::new),
        ..Held::default()
    };
    let mut cutter = Cutter::new(gap);
    let mut minutes = Minutes::new();
    let (mut active, mut purchases) = (Vec::new(), Vec::new());
    let mut events = 0;
    for chunk in chunks(&hours, chunk_rows) {
        let sql = format!(
            "{} FROM {table} WHERE {within} AND {}",
            copies_sql(&held.matcher),
            chunk.filter(time_column)
        );
        let mut batches = stream(session, COPIES, &sql).await?;
        while let Some(batch) = batches.next().await {
            held.push(&batch.map_err(query_error(COPIES))?)?;
        }
        drop(batches);
        let verdicts = judge.verdicts(&held.arrivals);
        let mut plays = Vec::new();
        for (row, &first) in verdicts.first.iter().enumerate() {
            let device = held.devices[row];
            if let (true, true, Some(t)) = (first, device != NO_DEVICE, held.arrivals.time(row)) {
                plays.push(Play {
                    device,
                    t,
                    row: row as u32,
                });
            }
        }
        sessions::in_order(&mut plays, |a, b| held.arrivals.id_order(a, b));
        let starts = cutter.add(&plays, &held.marks);
        if let Some(paths) = held.paths.as_mut() {
            paths.add(&plays, &starts, &held.names);
        }
        // A purchase counts for the experiments as for revenue: when it came on time.
        let spend: Vec<f64> = held
            .purchases
            .iter()
            .zip(&verdicts.late)
            .map(|(&amount, &late)| if late { 0.0 } else { amount })
            .collect();
        let facts = RowFacts {
            spend: &spend,
            converts: &held.converts,
        };
        held.attribution.walk(&plays, facts);
        walker.add(&plays, &held.masks, &held.platforms);
        let batches = held.first_copies(&verdicts.first, &verdicts.late)?;
        events += batches.iter().map(RecordBatch::num_rows).sum::<usize>();
        held.clear();
        register(session, EVENTS, events_schema(), batches)?;
        let counted = count_chunk(session, &mut minutes, &mut active, &mut purchases).await;
        deregister(session, EVENTS)?;
        counted?;
    }
    register(session, ACTIVE, active_schema(), active)?;
    register(session, PURCHASES, purchases_schema(), purchases)?;
    let (acquisition, exposures) = held.attribution.batches()?;
    register(session, ACQUISITION, attribution::acquisition_schema(), acquisition)?;
    register(session, EXPOSURES, attribution::exposures_schema(), exposures)?;
    debug!(
        query = "events by minute, active devices, purchases and sessions",
        rows = events,
        ms = started.elapsed().as_millis() as u64,
        "query"
    );
    let mut devices: Vec<Box<str>> = vec![Box::from(""); held.device_ids.len()];
    for (id, number) in held.device_ids.drain() {
        if let Some(slot) = devices.get_mut(number as usize) {
            *slot = id;
        }
    }
    Ok(Loaded {
        sessions: cutter.finish(),
        minutes,
        devices,
        funnels: walker.finish(&held.platform_names, close),
        attribution: {
            held.attribution.finish();
            std::mem::take(&mut held.attribution)
        },
        paths: held.paths.take().map(|walker| walker.finish(false)),
    })
}

/// The queries over one chunk's [`EVENTS`]: its minutes into `minutes`, its active devices into
/// `active`, its counted purchases into `purchases`.
async fn count_chunk(
    session: &ReportSession,
    minutes: &mut Minutes,
    active: &mut Vec<RecordBatch>,
    purchases: &mut Vec<RecordBatch>,
) -> Result<(), ReportError> {
    // GROUPING SETS give the totals and the per-platform figures from one pass; `platform` is
    // NULL in the totals' rows (it is never NULL in the data: missing is 'unknown').
    let rows = session
        .query(
            "minutes of a chunk",
            &format!(
                "SELECT date_trunc('minute', t) AS minute, platform,
                        count(*) FILTER (WHERE NOT late) AS events,
                        sum(amount) FILTER (WHERE {COUNTED_PURCHASE}) AS bookings,
                        count(*) FILTER (WHERE late) AS late
                 FROM {EVENTS} WHERE t IS NOT NULL
                 GROUP BY GROUPING SETS ((date_trunc('minute', t)), (date_trunc('minute', t), platform))"
            ),
        )
        .await?;
    let (starts, platforms) = (rows.timestamps("minute")?, rows.strings("platform")?);
    let (counts, bookings, late) = (rows.i64s("events")?, rows.f64s("bookings")?, rows.i64s("late")?);
    for (i, (start, platform)) in starts.into_iter().zip(platforms).enumerate() {
        let Some(start) = start else { continue };
        let minute = minutes
            .entry(platform)
            .or_default()
            .entry(start.timestamp_micros())
            .or_default();
        minute.events += counts[i].unwrap_or(0);
        minute.late += late[i].unwrap_or(0);
        if let Some(amount) = bookings[i] {
            *minute.bookings.get_or_insert(0.0) += amount;
        }
    }
    let rows = session
        .query(
            "devices of a chunk",
            &format!("SELECT DISTINCT device, platform, day FROM {EVENTS} WHERE device IS NOT NULL"),
        )
        .await?;
    let schema = active_schema();
    for batch in rows.into_batches() {
        active.push(conform("devices of a chunk", &batch, &schema)?);
    }
    let rows = session
        .query(
            "purchases of a chunk",
            &format!(
                "SELECT day, game, extra, platform, device, version, amount FROM {EVENTS} WHERE {COUNTED_PURCHASE}"
            ),
        )
        .await?;
    let schema = purchases_schema();
    for batch in rows.into_batches() {
        purchases.push(conform("purchases of a chunk", &batch, &schema)?);
    }
    Ok(())
}

/// The number of rows of each hour of `column` (`None`: rows without a value) among the rows of
/// `table` that meet `condition`.
async fn hour_counts(
    session: &ReportSession,
    column: &str,
    table: &str,
    condition: &str,
) -> Result<Vec<(Option<i64>, u64)>, ReportError> {
    let rows = session
        .query(
            "rows per hour",
            &format!(
                "SELECT date_trunc('hour', {column}) AS hour, count(*) AS n FROM {table} WHERE {condition} GROUP BY 1"
            ),
        )
        .await?;
    Ok(rows
        .timestamps("hour")?
        .into_iter()
        .zip(rows.i64s("n")?)
        .map(|(hour, n)| (hour.map(|h| h.timestamp_micros()), n.unwrap_or(0).max(0) as u64))
        .collect())
}

/// A chunk of rows: those of a span of time, or those without a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// From (unbounded when `None`) and up to (unbounded when `None`), in microseconds.
    Span(Option<i64>, Option<i64>),
    /// The rows without a time.
    Missing,
}

impl Chunk {
    /// The chunk's rows as a SQL condition on `column`.
    fn filter(&self, column: &str) -> String {
        let literal =
            |micros: i64| DateTime::from_timestamp_micros(micros).map_or_else(|| "NULL".to_owned(), timestamp_literal);
        match *self {
            Chunk::Missing => format!("{column} IS NULL"),
            Chunk::Span(from, to) => {
                let mut conditions = vec![format!("{column} IS NOT NULL")];
                conditions.extend(from.map(|f| format!("{column} >= {}", literal(f))));
                conditions.extend(to.map(|t| format!("{column} < {}", literal(t))));
                conditions.join(" AND ")
            }
        }
    }
}

/// Chunks of whole hours of at most `limit` rows, in order, from the rows of each hour: a day is
/// not split when its rows fit in one chunk, nor is an hour ever. The spans meet, so that every
/// row with a time is in one of them; the rows without one come last.
fn chunks(hours: &[(Option<i64>, u64)], limit: usize) -> Vec<Chunk> {
    let limit = limit.max(1) as u64;
    let mut known: Vec<(i64, u64)> = hours.iter().filter_map(|&(h, n)| Some((h?, n))).collect();
    known.sort_unstable();
    // Units that are never split: whole days when they fit, else their hours.
    let mut units: Vec<(i64, u64)> = Vec::new();
    let mut rest = known.as_slice();
    while let Some(&(first, _)) = rest.first() {
        let day = first.div_euclid(DAY_MICROS);
        let end = rest
            .iter()
            .position(|&(h, _)| h.div_euclid(DAY_MICROS) != day)
            .unwrap_or(rest.len());
        let (today, later) = rest.split_at(end);
        let rows: u64 = today.iter().map(|&(_, n)| n).sum();
        if rows <= limit {
            units.push((day * DAY_MICROS, rows));
        } else {
            units.extend(today.iter().map(|&(h, n)| (h.div_euclid(HOUR_MICROS) * HOUR_MICROS, n)));
        }
        rest = later;
    }
    let mut starts: Vec<i64> = Vec::new();
    let mut rows = 0u64;
    for (start, n) in units {
        if starts.is_empty() || rows + n > limit {
            starts.push(start);
            rows = 0;
        }
        rows += n;
    }
    let mut chunks: Vec<Chunk> = (0..starts.len())
        .map(|i| Chunk::Span((i > 0).then(|| starts[i]), starts.get(i + 1).copied()))
        .collect();
    if hours.iter().any(|&(h, n)| h.is_none() && n > 0) {
        chunks.push(Chunk::Missing);
    }
    chunks
}

/// The rows of `sql`, as a stream of batches.
async fn stream(session: &ReportSession, query: &str, sql: &str) -> Result<SendableRecordBatchStream, ReportError> {
    let error = query_error(query);
    session
        .context()
        .sql(sql)
        .await
        .map_err(&error)?
        .execute_stream()
        .await
        .map_err(error)
}

fn query_error(query: &str) -> impl Fn(DataFusionError) -> ReportError + '_ {
    move |source| ReportError::Query {
        query: query.to_owned(),
        source,
    }
}

/// Registers `batches` as the in-memory table `name`, spread over the session's partitions so
/// that the queries over it use every core.
fn register(
    session: &ReportSession,
    name: &str,
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
) -> Result<(), ReportError> {
    let error = query_error(name);
    let partitions = session.context().copied_config().target_partitions().max(1);
    let mut spread: Vec<Vec<RecordBatch>> = vec![Vec::new(); partitions];
    for (i, batch) in batches.into_iter().enumerate() {
        spread[i % partitions].push(batch);
    }
    let table = MemTable::try_new(schema, spread).map_err(&error)?;
    session
        .context()
        .register_table(name, Arc::new(table))
        .map_err(&error)?;
    Ok(())
}

/// Drops the in-memory table `name`.
pub(super) fn deregister(session: &ReportSession, name: &str) -> Result<(), ReportError> {
    let query = format!("drop {name}");
    session.context().deregister_table(name).map_err(query_error(&query))?;
    Ok(())
}

/// `batch`'s columns of `schema`, cast to its types.
fn conform(query: &str, batch: &RecordBatch, schema: &SchemaRef) -> Result<RecordBatch, ReportError> {
    let columns = schema
        .fields()
        .iter()
        .map(|field| {
            let column = batch_column(query, batch, field.name())?;
            cast(column, field.data_type()).map_err(|e| ReportError::column(query, field.name(), e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(schema.clone(), columns).map_err(|e| ReportError::column(query, "", e.to_string()))
}

fn dictionary() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

/// The columns of [`ACTIVE`].
fn active_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("device", DataType::UInt32, true),
        Field::new("platform", dictionary(), true),
        Field::new("day", DataType::Date32, true),
    ]))
}

/// The columns of [`PURCHASES`].
fn purchases_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("day", DataType::Date32, true),
        Field::new("game", dictionary(), true),
        Field::new("extra", DataType::Utf8, true),
        Field::new("platform", dictionary(), true),
        Field::new("device", DataType::UInt32, true),
        Field::new("version", dictionary(), true),
        Field::new("amount", DataType::Float64, true),
    ]))
}

/// The columns of [`EVENTS`].
fn events_schema() -> SchemaRef {
    let text = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
    Arc::new(Schema::new(vec![
        Field::new("name", text.clone(), true),
        Field::new(
            "t",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new("day", DataType::Date32, true),
        Field::new("game", text.clone(), true),
        Field::new("extra", DataType::Utf8, true),
        Field::new("platform", text.clone(), true),
        // The device as a number: the same number for the same `device_id`.
        Field::new("device", DataType::UInt32, true),
        Field::new("version", text, true),
        Field::new("amount", DataType::Float64, true),
        Field::new("late", DataType::Boolean, false),
    ]))
}

/// A row without a device.
const NO_DEVICE: u32 = u32::MAX;

/// The columns of one batch read that go to [`EVENTS`] as they are.
struct Columns {
    rows: usize,
    name: ArrayRef,
    game: ArrayRef,
    extra: ArrayRef,
    platform: ArrayRef,
    version: ArrayRef,
    amount: ArrayRef,
}

/// What is held of the rows of the chunk read so far, and the device ids of every chunk.
#[derive(Default)]
struct Held {
    arrivals: Arrivals,
    columns: Vec<Columns>,
    /// Per row, the device's number ([`NO_DEVICE`] without one).
    devices: Vec<u32>,
    device_ids: HashMap<Box<str>, u32, foldhash::fast::RandomState>,
    /// Per row, what its name says about sessions.
    marks: Vec<sessions::Mark>,
    /// What rows are matched to the funnels' steps with.
    matcher: Matcher,
    /// The devices' acquisitions and exposures found so far.
    attribution: Attribution,
    /// The paths followed, if asked for, and per row the number of its name.
    paths: Option<PathWalker>,
    names: Vec<u32>,
    /// The event an experiment's conversion is, and per row whether it is that event.
    conversion: String,
    converts: Vec<bool>,
    /// Per row, the amount of its purchase (0 for any other row), late or not.
    purchases: Vec<f64>,
    /// Per row, the funnel steps it is (when there are funnels).
    masks: Vec<u64>,
    /// Per row, its platform's number in `platform_names` (when there are funnels).
    platforms: Vec<u32>,
    platform_names: Texts,
}

impl Held {
    fn push(&mut self, batch: &RecordBatch) -> Result<(), ReportError> {
        let first_row = self.devices.len();
        self.arrivals.push(COPIES, batch, ARRIVAL)?;
        let column = |name: &str, to: &DataType| -> Result<ArrayRef, ReportError> {
            let array = batch_column(COPIES, batch, name)?;
            let text = cast(array, &DataType::Utf8).map_err(|e| ReportError::column(COPIES, name, e.to_string()))?;
            if to == &DataType::Utf8 {
                return Ok(text);
            }
            cast(&text, to).map_err(|e| ReportError::column(COPIES, name, e.to_string()))
        };
        let dictionary = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
        let name = column("name", &DataType::Utf8)?;
        self.marks.extend(
            name.as_string::<i32>()
                .iter()
                .map(|n| sessions::Mark::of(n.unwrap_or(""))),
        );
        let device = column("device", &DataType::Utf8)?;
        for id in device.as_string::<i32>().iter() {
            let number = match id {
                None => NO_DEVICE,
                Some(id) => match self.device_ids.get(id) {
                    Some(&n) => n,
                    None => {
                        let n = u32::try_from(self.device_ids.len())
                            .ok()
                            .filter(|n| *n < NO_DEVICE)
                            .ok_or_else(|| ReportError::column(COPIES, "device", "more than 2^32 - 1 devices"))?;
                        self.device_ids.insert(id.into(), n);
                        n
                    }
                },
            };
            self.devices.push(number);
        }
        let platform = column("platform", &DataType::Utf8)?;
        let extra = column("extra", &DataType::Utf8)?;
        if !self.matcher.is_empty() {
            self.match_steps(batch, &name, &platform, &extra)?;
        }
        for (i, text) in extra.as_string::<i32>().iter().enumerate() {
            if let Some(text) = text {
                self.attribution.read((first_row + i) as u32, text);
            }
        }
        let amount = cast(batch_column(COPIES, batch, "amount")?, &DataType::Float64)
            .map_err(|e| ReportError::column(COPIES, "amount", e.to_string()))?;
        if let Some(paths) = self.paths.as_mut() {
            for n in name.as_string::<i32>().iter() {
                self.names.push(paths.number(n.unwrap_or("")));
            }
        }
        let amounts = amount.as_primitive::<arrow::datatypes::Float64Type>();
        for (row, name) in name.as_string::<i32>().iter().enumerate() {
            let purchase = name == Some(PURCHASE) && amounts.is_valid(row);
            self.purchases.push(if purchase { amounts.value(row) } else { 0.0 });
            self.converts.push(name == Some(self.conversion.as_str()));
        }
        self.columns.push(Columns {
            rows: batch.num_rows(),
            name: cast(&name, &dictionary).map_err(|e| ReportError::column(COPIES, "name", e.to_string()))?,
            game: column("game", &dictionary)?,
            extra,
            platform: cast(&platform, &dictionary)
                .map_err(|e| ReportError::column(COPIES, "platform", e.to_string()))?,
            version: column("version", &dictionary)?,
            amount,
        });
        Ok(())
    }

    /// The funnel steps of a batch's rows and their platforms, into `masks` and `platforms`.
    fn match_steps(
        &mut self,
        batch: &RecordBatch,
        name: &ArrayRef,
        platform: &ArrayRef,
        extra: &ArrayRef,
    ) -> Result<(), ReportError> {
        let typed: Vec<ArrayRef> = (0..self.matcher.typed_count())
            .map(|n| {
                let column = format!("p{n}");
                cast(batch_column(COPIES, batch, &column)?, &DataType::Utf8)
                    .map_err(|e| ReportError::column(COPIES, &column, e.to_string()))
            })
            .collect::<Result<_, _>>()?;
        let typed: Vec<_> = typed.iter().map(|a| a.as_string::<i32>()).collect();
        let (names, extras) = (name.as_string::<i32>(), extra.as_string::<i32>());
        let mut values: Vec<Option<&str>> = Vec::with_capacity(typed.len());
        for row in 0..batch.num_rows() {
            values.clear();
            values.extend(
                typed
                    .iter()
                    .map(|column| column.is_valid(row).then(|| column.value(row))),
            );
            let name = if names.is_valid(row) { names.value(row) } else { "" };
            let extra = extras.is_valid(row).then(|| extras.value(row));
            self.masks.push(self.matcher.mask(name, &values, extra));
        }
        for p in platform.as_string::<i32>().iter() {
            self.platforms.push(self.platform_names.number(p.unwrap_or("unknown")));
        }
        Ok(())
    }

    /// The first copies of the rows held, given which rows are first copies and which of them
    /// came late, as batches of [`EVENTS`]. The columns held are let go.
    fn first_copies(&mut self, first: &[bool], late: &[bool]) -> Result<Vec<RecordBatch>, ReportError> {
        let schema = events_schema();
        let arrow_error = |e| query_error(COPIES)(DataFusionError::ArrowError(Box::new(e), None));
        let mut batches = Vec::with_capacity(self.columns.len());
        let mut start = 0;
        for columns in std::mem::take(&mut self.columns) {
            let rows = start..start + columns.rows;
            start = rows.end;
            let first = &first[rows.clone()];
            let times = TimestampMicrosecondArray::from_iter(rows.clone().map(|r| self.arrivals.time(r)));
            let days = Date32Array::from_iter(times.iter().map(|t| t.map(|t| t.div_euclid(DAY_MICROS) as i32)));
            let devices = UInt32Array::from_iter(
                self.devices[rows.clone()]
                    .iter()
                    .map(|&d| (d != NO_DEVICE).then_some(d)),
            );
            let late = BooleanArray::from(late[rows].to_vec());
            let columns: Vec<ArrayRef> = vec![
                columns.name,
                Arc::new(times.with_timezone("UTC")),
                Arc::new(days),
                columns.game,
                columns.extra,
                columns.platform,
                Arc::new(devices),
                columns.version,
                columns.amount,
                Arc::new(late),
            ];
            let mut batch = RecordBatch::try_new(schema.clone(), columns).map_err(arrow_error)?;
            if first.iter().any(|f| !f) {
                batch = filter_record_batch(&batch, &BooleanArray::from(first.to_vec())).map_err(arrow_error)?;
            }
            batches.push(batch);
        }
        Ok(batches)
    }

    /// Forgets the rows held, keeping the numbers given to device ids and texts.
    fn clear(&mut self) {
        self.arrivals.clear();
        self.columns.clear();
        self.devices.clear();
        self.marks.clear();
        self.masks.clear();
        self.platforms.clear();
        self.converts.clear();
        self.purchases.clear();
        self.names.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = HOUR_MICROS;
    const D: i64 = DAY_MICROS;

    #[test]
    fn chunks_hold_whole_days_when_they_fit_and_whole_hours_always() {
        // Day 0: 3 rows in two hours; day 1: 10 rows in three hours; day 3: 1 row; 2 rows
        // without a time.
        let hours = [
            (Some(D + 2 * H), 5),
            (Some(H), 2),
            (Some(0), 1),
            (Some(D), 4),
            (Some(D + H), 1),
            (None, 2),
            (Some(3 * D + 5 * H), 1),
        ];
        // Day 1 does not fit in 6 rows: its hours are chunked; the day after joins the last hour.
        assert_eq!(
            chunks(&hours, 6),
            [
                Chunk::Span(None, Some(D)),
                Chunk::Span(Some(D), Some(D + 2 * H)),
                Chunk::Span(Some(D + 2 * H), None),
                Chunk::Missing,
            ]
        );
        // Everything fits: one chunk.
        assert_eq!(chunks(&hours, 100), [Chunk::Span(None, None), Chunk::Missing]);
        // An hour is never split, and nothing is empty.
        assert_eq!(chunks(&hours[..1], 1), [Chunk::Span(None, None)]);
        assert_eq!(chunks(&[], 10), []);
        assert_eq!(chunks(&[(None, 0)], 10), []);
    }

    #[test]
    fn a_chunk_is_a_condition_on_its_column() {
        assert_eq!(Chunk::Missing.filter("t"), "t IS NULL");
        assert_eq!(Chunk::Span(None, None).filter("t"), "t IS NOT NULL");
        let both = Chunk::Span(Some(0), Some(H)).filter("t");
        assert!(
            both.starts_with("t IS NOT NULL AND t >= arrow_cast('1970-01-01T00:00:00Z'")
                && both.contains("AND t < arrow_cast('1970-01-01T01:00:00Z'"),
            "{both}"
        );
    }
}
