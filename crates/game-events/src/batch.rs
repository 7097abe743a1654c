//! Arrow batches of the `game_events` and `game_events_rejects` tables (feature `arrow`).
//!
//! Column names follow the seed's camelCase, because the seed's notebook queries them by name.
//! [`GameEventsBatchBuilder`] appends [`StampedEvent`]s with the Kinesis lineage of the record they
//! came in; [`RejectsBatchBuilder`] keeps records that can never become a row, with the reason.

use std::sync::{Arc, LazyLock};

use arrow::array::{
    ArrayBuilder, ArrayRef, BinaryBuilder, Date32Builder, StringBuilder, StructBuilder, TimestampMicrosecondBuilder,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use chrono::{DateTime, Utc};

use crate::event::{EventParams, GAME_ID, StampedEvent};
use crate::params::arrow_fields;

/// `eventDate`: the table's partition column, the UTC date of `eventTime`.
pub const EVENT_DATE: &str = "eventDate";

/// `extraParams`: every parameter of `eventParams` besides the typed ones, as a JSON object
/// with the values as the client sent them (null when there are none).
pub const EXTRA_PARAMS: &str = "extraParams";

/// `extraFields`: every top-level field of the event the model does not read, as a JSON object
/// (null when there are none).
pub const EXTRA_FIELDS: &str = "extraFields";

/// The key of an event in `game_events`, as compaction's `dedup_key` names it: one row per game
/// and `eventId` (two games may use the same ids).
pub const DEDUP_KEY: &str = "gameId+eventId";

/// Microseconds per day.
const MICROS_PER_DAY: i64 = 86_400_000_000;

fn timestamp() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

static GAME_EVENTS_SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("eventId", DataType::Utf8, false),
        Field::new("eventName", DataType::Utf8, false),
        Field::new("eventTime", timestamp(), false),
        Field::new(EVENT_DATE, DataType::Date32, false),
        Field::new("eventParams", DataType::Struct(arrow_fields()), true),
        Field::new("shardId", DataType::Utf8, false),
        Field::new("sequenceNumber", DataType::Utf8, false),
        Field::new("approximateArrivalTime", timestamp(), true),
        Field::new("ingestedAt", timestamp(), false),
        // Added after the first release: last, and nullable, so that tables created before get
        // them by schema evolution and their old rows read them as null.
        Field::new(GAME_ID, DataType::Utf8, true),
        Field::new(EXTRA_PARAMS, DataType::Utf8, true),
        Field::new(EXTRA_FIELDS, DataType::Utf8, true),
    ]))
});

static REJECTS_SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("shardId", DataType::Utf8, false),
        Field::new("sequenceNumber", DataType::Utf8, false),
        Field::new("approximateArrivalTime", timestamp(), true),
        Field::new("partitionKey", DataType::Utf8, true),
        Field::new("data", DataType::Binary, false),
        Field::new("reason", DataType::Utf8, false),
        Field::new("ingestedAt", timestamp(), false),
    ]))
});

/// The schema of the `game_events` table (partitioned by [`EVENT_DATE`]).
pub fn game_events_schema() -> SchemaRef {
    GAME_EVENTS_SCHEMA.clone()
}

/// The schema of the `game_events_rejects` table: records that can never become a row.
pub fn game_events_rejects_schema() -> SchemaRef {
    REJECTS_SCHEMA.clone()
}

/// Where a record came from: its Kinesis shard, sequence number and arrival time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lineage<'a> {
    /// `shardId-000000000000`.
    pub shard_id: &'a str,
    /// The record's sequence number in its shard.
    pub sequence_number: &'a str,
    /// When Kinesis accepted the record.
    pub arrival: Option<DateTime<Utc>>,
}

/// The UTC date of `time` as days since the Unix epoch (Arrow `Date32`).
pub fn epoch_day(time: DateTime<Utc>) -> i32 {
    // Any chrono date fits: |days| < 2^31 for years within +-262,143.
    time.timestamp_micros().div_euclid(MICROS_PER_DAY) as i32
}

/// Appends events into a `game_events` batch.
#[derive(Debug)]
pub struct GameEventsBatchBuilder {
    event_id: StringBuilder,
    event_name: StringBuilder,
    event_time: TimestampMicrosecondBuilder,
    event_date: Date32Builder,
    event_params: StructBuilder,
    shard_id: StringBuilder,
    sequence_number: StringBuilder,
    arrival: TimestampMicrosecondBuilder,
    ingested_at: TimestampMicrosecondBuilder,
    game_id: StringBuilder,
    extra_params: StringBuilder,
    extra_fields: StringBuilder,
    /// Events whose `client_event_time` could not be read (stored as null).
    unreadable_client_times: usize,
}

impl Default for GameEventsBatchBuilder {
    fn default() -> Self {
        Self::with_capacity(0)
    }
}

impl GameEventsBatchBuilder {
    /// A builder with room for `rows` events.
    pub fn with_capacity(rows: usize) -> Self {
        Self {
            event_id: StringBuilder::with_capacity(rows, rows * 36),
            event_name: StringBuilder::with_capacity(rows, rows * 16),
            event_time: TimestampMicrosecondBuilder::with_capacity(rows),
            event_date: Date32Builder::with_capacity(rows),
            event_params: StructBuilder::from_fields(arrow_fields(), rows),
            shard_id: StringBuilder::with_capacity(rows, rows * 20),
            sequence_number: StringBuilder::with_capacity(rows, rows * 56),
            arrival: TimestampMicrosecondBuilder::with_capacity(rows),
            ingested_at: TimestampMicrosecondBuilder::with_capacity(rows),
            game_id: StringBuilder::with_capacity(rows, rows * 16),
            extra_params: StringBuilder::new(),
            extra_fields: StringBuilder::new(),
            unreadable_client_times: 0,
        }
    }

    /// Rows appended since the last [`finish`](Self::finish).
    pub fn len(&self) -> usize {
        self.event_id.len()
    }

    /// Whether no row was appended since the last [`finish`](Self::finish).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Events appended so far whose `client_event_time` could not be read, so is null. The API
    /// validates it; records written to the stream by other producers may carry anything.
    pub fn unreadable_client_times(&self) -> usize {
        self.unreadable_client_times
    }

    /// Appends one event; `ingested_at` is microseconds since the epoch.
    pub fn append(&mut self, event: &StampedEvent, lineage: Lineage<'_>, ingested_at: i64) {
        self.event_id.append_value(event.event_id.hyphenated().to_string());
        self.event_name.append_value(&event.event_name);
        self.event_time.append_value(event.event_time.timestamp_micros());
        self.event_date.append_value(epoch_day(event.event_time));
        self.append_params(event);
        self.shard_id.append_value(lineage.shard_id);
        self.sequence_number.append_value(lineage.sequence_number);
        self.arrival
            .append_option(lineage.arrival.map(|t| t.timestamp_micros()));
        self.ingested_at.append_value(ingested_at);
        self.game_id.append_option(event.game_id.as_deref());
        let params = event.event_params.as_ref().map(|p| &p.extra);
        self.extra_params.append_option(json_object(params));
        self.extra_fields.append_option(json_object(Some(&event.extra)));
    }

    fn append_params(&mut self, event: &StampedEvent) {
        if !EventParams::append_arrow(event.event_params.as_ref(), &mut self.event_params) {
            self.unreadable_client_times += 1;
        }
    }

    /// The rows appended so far as a batch; the builder is empty again.
    pub fn finish(&mut self) -> Result<RecordBatch, ArrowError> {
        self.unreadable_client_times = 0;
        let params = self.event_params.finish();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.event_id.finish()),
            Arc::new(self.event_name.finish()),
            Arc::new(self.event_time.finish().with_timezone("UTC")),
            Arc::new(self.event_date.finish()),
            Arc::new(params),
            Arc::new(self.shard_id.finish()),
            Arc::new(self.sequence_number.finish()),
            Arc::new(self.arrival.finish().with_timezone("UTC")),
            Arc::new(self.ingested_at.finish().with_timezone("UTC")),
            Arc::new(self.game_id.finish()),
            Arc::new(self.extra_params.finish()),
            Arc::new(self.extra_fields.finish()),
        ];
        RecordBatch::try_new(game_events_schema(), columns)
    }
}

/// The JSON text of `fields`; `None` when there are none.
fn json_object(fields: Option<&serde_json::Map<String, serde_json::Value>>) -> Option<String> {
    // Serialising a map of `Value`s cannot fail (its keys are strings).
    fields
        .filter(|f| !f.is_empty())
        .and_then(|f| serde_json::to_string(f).ok())
}

/// Appends records that can never become a row into a `game_events_rejects` batch.
#[derive(Debug, Default)]
pub struct RejectsBatchBuilder {
    shard_id: StringBuilder,
    sequence_number: StringBuilder,
    arrival: TimestampMicrosecondBuilder,
    partition_key: StringBuilder,
    data: BinaryBuilder,
    reason: StringBuilder,
    ingested_at: TimestampMicrosecondBuilder,
}

impl RejectsBatchBuilder {
    /// Rows appended since the last [`finish`](Self::finish).
    pub fn len(&self) -> usize {
        self.shard_id.len()
    }

    /// Whether no row was appended since the last [`finish`](Self::finish).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends one record: its lineage, partition key, data as received, and why it was rejected.
    pub fn append(
        &mut self,
        lineage: Lineage<'_>,
        partition_key: Option<&str>,
        data: &[u8],
        reason: &str,
        ingested_at: i64,
    ) {
        self.shard_id.append_value(lineage.shard_id);
        self.sequence_number.append_value(lineage.sequence_number);
        self.arrival
            .append_option(lineage.arrival.map(|t| t.timestamp_micros()));
        self.partition_key.append_option(partition_key);
        self.data.append_value(data);
        self.reason.append_value(reason);
        self.ingested_at.append_value(ingested_at);
    }

    /// The rows appended so far as a batch; the builder is empty again.
    pub fn finish(&mut self) -> Result<RecordBatch, ArrowError> {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.shard_id.finish()),
            Arc::new(self.sequence_number.finish()),
            Arc::new(self.arrival.finish().with_timezone("UTC")),
            Arc::new(self.partition_key.finish()),
            Arc::new(self.data.finish()),
            Arc::new(self.reason.finish()),
            Arc::new(self.ingested_at.finish().with_timezone("UTC")),
        ];
        RecordBatch::try_new(game_events_rejects_schema(), columns)
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{Date32Type, Float64Type, Int32Type, TimestampMicrosecondType};
    use chrono::TimeZone;
    use serde_json::json;

    use super::*;
    use crate::GameEvent;

    fn stamped(value: serde_json::Value, secs: i64) -> StampedEvent {
        GameEvent::from_value(value)
            .unwrap()
            .stamp(Utc.timestamp_opt(secs, 0).unwrap())
    }

    const LINEAGE: Lineage<'static> = Lineage {
        shard_id: "shardId-000000000000",
        sequence_number: "49590338271490256608559692538361571095921575989136588898",
        arrival: None,
    };

    #[test]
    fn events_become_rows_of_the_table_schema() {
        let purchase = stamped(
            json!({"eventName": "purchaseEvent", "eventId": "0b5e8a52-7d4d-4f4b-9c39-6d9a8a0c1e11",
                   "eventParams": {"amount": 4.99, "device_id": "D1", "platform": "ios", "scoreAdjustment": 3,
                                   "client_event_time": "2024-06-01T11:59:58Z", "game_keyword": "league",
                                   "app_name": "Legends", "app_version": "1.0"}}),
            1_717_243_199, // 2024-06-01T11:59:59Z
        );
        let bare = stamped(json!({"eventName": "appOpen"}), 1_717_286_400); // 2024-06-02T00:00:00Z
        let mut builder = GameEventsBatchBuilder::with_capacity(2);
        let arrival = Utc.timestamp_opt(1_717_243_200, 0).unwrap();
        builder.append(
            &purchase,
            Lineage {
                arrival: Some(arrival),
                ..LINEAGE
            },
            7,
        );
        builder.append(&bare, LINEAGE, 8);
        assert_eq!(builder.len(), 2);
        let batch = builder.finish().unwrap();
        assert!(builder.is_empty());
        assert_eq!(batch.schema(), game_events_schema());
        assert_eq!(batch.num_rows(), 2);

        let ids = batch.column(0).as_string::<i32>();
        assert_eq!(ids.value(0), "0b5e8a52-7d4d-4f4b-9c39-6d9a8a0c1e11");
        assert_eq!(ids.value(1).len(), 36);
        let times = batch.column(2).as_primitive::<TimestampMicrosecondType>();
        assert_eq!(times.value(0), 1_717_243_199_000_000);
        let dates = batch.column(3).as_primitive::<Date32Type>();
        assert_eq!((dates.value(0), dates.value(1)), (19_875, 19_876));

        let params = batch.column(4).as_struct();
        assert!(params.is_valid(0));
        assert!(params.is_null(1));
        assert_eq!(params.column(0).as_string::<i32>().value(0), "league");
        assert_eq!(params.column(2).as_primitive::<Int32Type>().value(0), 3);
        assert_eq!(params.column(5).as_string::<i32>().value(0), "D1");
        assert_eq!(
            params.column(6).as_primitive::<TimestampMicrosecondType>().value(0),
            1_717_243_198_000_000
        );
        assert_eq!(params.column(7).as_primitive::<Float64Type>().value(0), 4.99);
        assert!(params.column(7).is_null(1));

        let arrivals = batch.column(7).as_primitive::<TimestampMicrosecondType>();
        assert_eq!(arrivals.value(0), 1_717_243_200_000_000);
        assert!(arrivals.is_null(1));
        assert_eq!(batch.column(8).as_primitive::<TimestampMicrosecondType>().value(1), 8);
    }

    #[test]
    fn the_game_and_every_other_parameter_are_kept() {
        let event = stamped(
            json!({"eventName": "purchaseEvent",
                   "eventParams": {"amount": 4.99, "sku": "gem_pack_5", "level": 12, "ab": {"arm": "b"}},
                   "sessionId": "s-1"}),
            1_717_243_199,
        )
        .with_game("space-miners");
        let bare = stamped(
            json!({"eventName": "appOpen", "eventParams": {"platform": "ios"}}),
            1_717_243_199,
        );
        let mut builder = GameEventsBatchBuilder::default();
        builder.append(&event, LINEAGE, 1);
        builder.append(&bare, LINEAGE, 1);
        let batch = builder.finish().unwrap();
        let column = |name: &str| batch.column_by_name(name).unwrap().as_string::<i32>().clone();
        assert_eq!(column(GAME_ID).value(0), "space-miners");
        assert!(column(GAME_ID).is_null(1));
        let params: serde_json::Value = serde_json::from_str(column(EXTRA_PARAMS).value(0)).unwrap();
        assert_eq!(params, json!({"sku": "gem_pack_5", "level": 12, "ab": {"arm": "b"}}));
        assert!(column(EXTRA_PARAMS).is_null(1));
        assert_eq!(column(EXTRA_FIELDS).value(0), r#"{"sessionId":"s-1"}"#);
        assert!(column(EXTRA_FIELDS).is_null(1));
    }

    #[test]
    fn epoch_days_before_1970_round_down() {
        assert_eq!(epoch_day(Utc.timestamp_opt(-1, 0).unwrap()), -1);
        assert_eq!(epoch_day(Utc.timestamp_opt(0, 0).unwrap()), 0);
        assert_eq!(epoch_day(Utc.timestamp_opt(86_399, 0).unwrap()), 0);
    }

    #[test]
    fn rejects_keep_the_data_and_the_reason() {
        let mut builder = RejectsBatchBuilder::default();
        builder.append(LINEAGE, Some("pk"), b"\xffnot json", "record data is not JSON", 5);
        let batch = builder.finish().unwrap();
        assert_eq!(batch.schema(), game_events_rejects_schema());
        assert_eq!(batch.column(4).as_binary::<i32>().value(0), b"\xffnot json");
        assert_eq!(batch.column(5).as_string::<i32>().value(0), "record data is not JSON");
    }
}
