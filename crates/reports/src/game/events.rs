//! The events the game report counts, read once from the table and held in memory compactly.
//!
//! Every copy of every event is read as a stream of batches. Each batch is turned into what the
//! report keeps before the next is read: the arrival order and the id of each row ([`Arrivals`]:
//! about 60 bytes a row), its device as the number of a device id kept once, its time, and the
//! columns the queries read with the short texts (name, game, platform, app version)
//! dictionary-encoded. `extraParams` and `app_version` are kept for purchases only: the revenue
//! sections alone read them. Once every row is read, the first copies and their lateness are
//! judged, the sessions are cut, the arrival order is let go, and the first copies are registered
//! as the in-memory table [`EVENTS`] that the KPI queries read.
//!
//! So the memory the report needs grows with the events by a fixed number of bytes each, whatever
//! the length of their ids and texts, and with the distinct devices by the length of their ids.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, BooleanArray, Date32Array, TimestampMicrosecondArray, UInt32Array};
use arrow::compute::{cast, filter_record_batch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use arrow::record_batch::RecordBatch;
use chrono::TimeDelta;
use deltalake::datafusion::datasource::MemTable;
use deltalake::datafusion::error::DataFusionError;
use futures::StreamExt;

use super::sessions::{self, Play, Sessions};
use super::{EVENTS, PURCHASE, WATERMARK_MINUTES};
use crate::arrival::{ArrivalColumns, Arrivals};
use crate::session::batch_column;
use crate::{ReportError, ReportSession, TimeRange};

/// The query that reads every copy of every event.
const COPIES: &str = "copies of events";

/// Microseconds in a day.
const DAY_MICROS: i64 = 86_400_000_000;

/// The columns of [`COPIES`] that [`Arrivals`] reads.
const ARRIVAL: ArrivalColumns<'static> = ArrivalColumns {
    namespace: Some("game_id"),
    id: "event_id",
    time: "t",
    arrival: "arrival",
    shard: "shard",
    sequence: "seq",
};

/// What [`load`] registered and found.
#[derive(Debug)]
pub struct Loaded {
    /// First copies registered as [`EVENTS`].
    pub events: usize,
    /// The sessions of the first copies in the range.
    pub sessions: Sessions,
}

/// Reads every copy of every event of `table`, registers the first copies with their lateness as
/// [`EVENTS`], and cuts the sessions of those in `range` after `gap` of inactivity.
pub async fn load(
    session: &ReportSession,
    table: &str,
    range: &TimeRange,
    gap: TimeDelta,
) -> Result<Loaded, ReportError> {
    let error = |source| ReportError::Query {
        query: COPIES.to_owned(),
        source,
    };
    let sql = format!(
        r#"SELECT "gameId" AS game_id, "eventId" AS event_id, "eventName" AS name, "eventTime" AS t,
                  coalesce("gameId", 'unknown') AS game,
                  CASE WHEN "eventName" = '{PURCHASE}' THEN "extraParams" END AS extra,
                  coalesce("eventParams"['platform'], 'unknown') AS platform,
                  "eventParams"['device_id'] AS device,
                  CASE WHEN "eventName" = '{PURCHASE}' THEN "eventParams"['app_version'] END AS version,
                  "eventParams"['amount'] AS amount,
                  "approximateArrivalTime" AS arrival, "shardId" AS shard, "sequenceNumber" AS seq
           FROM {table}"#
    );
    let mut stream = session
        .context()
        .sql(&sql)
        .await
        .map_err(error)?
        .execute_stream()
        .await
        .map_err(error)?;
    let mut held = Held::default();
    while let Some(batch) = stream.next().await {
        held.push(&batch.map_err(error)?)?;
    }
    drop(stream);
    held.arrivals.shrink_to_fit();
    let verdicts = held.arrivals.judge(TimeDelta::minutes(WATERMARK_MINUTES));

    // The sessions of the first copies in the range with a device and a time.
    let mut plays = Vec::new();
    for (row, &first) in verdicts.first.iter().enumerate() {
        let device = held.devices[row];
        if let (true, true, Some(t)) = (first, device != NO_DEVICE, held.arrivals.time(row))
            && range.contains_micros(t)
        {
            plays.push(Play {
                device,
                t,
                row: row as u32,
            });
        }
    }
    let sessions = sessions::cut(plays, gap, &held.marks, |a, b| held.arrivals.id_order(a, b));

    // The first copies, with their lateness, as the table the queries read.
    let schema = events_schema();
    let mut batches = Vec::with_capacity(held.chunks.len());
    let mut start = 0;
    let mut events = 0;
    for chunk in std::mem::take(&mut held.chunks) {
        let rows = start..start + chunk.rows;
        start = rows.end;
        let first = &verdicts.first[rows.clone()];
        let times = TimestampMicrosecondArray::from_iter(rows.clone().map(|r| held.arrivals.time(r)));
        let days = Date32Array::from_iter(times.iter().map(|t| t.map(|t| t.div_euclid(DAY_MICROS) as i32)));
        let devices = UInt32Array::from_iter(
            held.devices[rows.clone()]
                .iter()
                .map(|&d| (d != NO_DEVICE).then_some(d)),
        );
        let late = BooleanArray::from(verdicts.late[rows].to_vec());
        let columns: Vec<ArrayRef> = vec![
            chunk.name,
            Arc::new(times.with_timezone("UTC")),
            Arc::new(days),
            chunk.game,
            chunk.extra,
            chunk.platform,
            Arc::new(devices),
            chunk.version,
            chunk.amount,
            Arc::new(late),
        ];
        let arrow_error = |e| error(DataFusionError::ArrowError(Box::new(e), None));
        let mut batch = RecordBatch::try_new(schema.clone(), columns).map_err(arrow_error)?;
        if first.iter().any(|f| !f) {
            batch = filter_record_batch(&batch, &BooleanArray::from(first.to_vec())).map_err(arrow_error)?;
        }
        events += batch.num_rows();
        batches.push(batch);
    }
    drop(held);
    // Spread over the session's partitions, so that the KPI queries use every core.
    let partitions = session.context().copied_config().target_partitions().max(1);
    let mut spread: Vec<Vec<RecordBatch>> = vec![Vec::new(); partitions];
    for (i, batch) in batches.into_iter().enumerate() {
        spread[i % partitions].push(batch);
    }
    let table = MemTable::try_new(schema, spread).map_err(error)?;
    session
        .context()
        .register_table(EVENTS, Arc::new(table))
        .map_err(error)?;
    Ok(Loaded { events, sessions })
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
struct Chunk {
    rows: usize,
    name: ArrayRef,
    game: ArrayRef,
    extra: ArrayRef,
    platform: ArrayRef,
    version: ArrayRef,
    amount: ArrayRef,
}

/// What is held of the rows read so far.
#[derive(Default)]
struct Held {
    arrivals: Arrivals,
    chunks: Vec<Chunk>,
    /// Per row, the device's number ([`NO_DEVICE`] without one).
    devices: Vec<u32>,
    device_ids: HashMap<Box<str>, u32, foldhash::fast::RandomState>,
    /// Per row, what its name says about sessions.
    marks: Vec<sessions::Mark>,
}

impl Held {
    fn push(&mut self, batch: &RecordBatch) -> Result<(), ReportError> {
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
        let amount = cast(batch_column(COPIES, batch, "amount")?, &DataType::Float64)
            .map_err(|e| ReportError::column(COPIES, "amount", e.to_string()))?;
        self.chunks.push(Chunk {
            rows: batch.num_rows(),
            name: cast(&name, &dictionary).map_err(|e| ReportError::column(COPIES, "name", e.to_string()))?,
            game: column("game", &dictionary)?,
            extra: column("extra", &DataType::Utf8)?,
            platform: column("platform", &dictionary)?,
            version: column("version", &dictionary)?,
            amount,
        });
        Ok(())
    }
}
