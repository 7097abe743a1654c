//! Events in Kinesis arrival order: which copy of an event came first, and which events came
//! late against the seed's event-time watermark.
//!
//! Kinesis' order is approximate arrival time, then shard, then sequence number (decimal digits,
//! so a shorter one is smaller). Of the copies of an event (one `eventId` written twice by a
//! retried batch or a resent request) the first in that order is the event. An event is late when
//! its `eventTime` is more than the watermark's delay older than the latest `eventTime` among the
//! events (first copies) that arrived before it.
//!
//! In SQL that is `row_number() OVER (PARTITION BY eventId ORDER BY arrival, shard,
//! length(seq), seq)` followed by a running `max(t) OVER (ORDER BY arrival, shard, length(seq),
//! seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)`. The second window orders every row in a
//! single partition, so DataFusion sorts all rows with all their columns on one core, and the
//! first needs a hash aggregate and joins over every `eventId`; on ten million events the two
//! were most of the game report's time. [`judge`] does what a stream consumer with a watermark
//! would: it sorts row positions by a compact key (sequence numbers are compared only where
//! arrival time and shard tie) and walks them once, remembering the ids seen.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, LargeStringArray, PrimitiveArray, StringArray, StringViewArray,
};
use arrow::datatypes::{DataType, TimeUnit, TimestampMicrosecondType};
use arrow::record_batch::RecordBatch;
use chrono::TimeDelta;

use super::ReportError;
use super::session::{batch_column, cast_column};

/// The columns [`judge`] reads.
#[derive(Debug, Clone, Copy)]
pub struct ArrivalColumns<'a> {
    /// The event's id (text; a row without one is an event of its own).
    pub id: &'a str,
    /// The event time (a timestamp).
    pub time: &'a str,
    /// The approximate arrival time (a timestamp; nulls sort last).
    pub arrival: &'a str,
    /// The shard id (text).
    pub shard: &'a str,
    /// The sequence number within the shard (text of decimal digits).
    pub sequence: &'a str,
}

/// What [`judge`] found about the rows of one batch.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdicts {
    /// The row is the first copy of its event in arrival order.
    pub first: BooleanArray,
    /// The row is a first copy whose time is more than the delay older than the latest time among
    /// the first copies before it. A row without a time is never late and does not move the
    /// watermark.
    pub late: BooleanArray,
}

impl Verdicts {
    /// Every row is a first copy.
    pub fn all_first(&self) -> bool {
        self.first.true_count() == self.first.len()
    }
}

/// Judges the rows of `batches` (one [`Verdicts`] per batch, in order) against a watermark of
/// `delay`. `query` names the rows' query in errors.
pub fn judge(
    query: &str,
    batches: &[RecordBatch],
    columns: ArrivalColumns<'_>,
    delay: TimeDelta,
) -> Result<Vec<Verdicts>, ReportError> {
    let delay = delay.num_microseconds().unwrap_or(i64::MAX);
    let mut ids = Vec::with_capacity(batches.len());
    let mut times = Vec::with_capacity(batches.len());
    let mut sequences = Vec::with_capacity(batches.len());
    let mut keys = Vec::with_capacity(batches.iter().map(RecordBatch::num_rows).sum());
    let mut shards = ShardRanks::default();
    for (b, batch) in batches.iter().enumerate() {
        let batch_index = u32::try_from(b).map_err(|_| too_many(query))?;
        let arrival = micros(query, batch, columns.arrival)?;
        let arrival = arrival.as_primitive::<TimestampMicrosecondType>();
        let shard = Text::new(
            query,
            columns.shard,
            batch_column(query, batch, columns.shard)?.as_ref(),
        )?;
        for row in 0..batch.num_rows() {
            let row_index = u32::try_from(row).map_err(|_| too_many(query))?;
            let arrival_missing = arrival.is_null(row);
            keys.push(Key {
                arrival_missing,
                arrival: if arrival_missing { 0 } else { arrival.value(row) },
                shard: shard.get(row).map_or(u32::MAX, |s| shards.id(s)),
                batch: batch_index,
                row: row_index,
            });
        }
        ids.push(Text::new(
            query,
            columns.id,
            batch_column(query, batch, columns.id)?.as_ref(),
        )?);
        times.push(micros(query, batch, columns.time)?);
        sequences.push(Text::new(
            query,
            columns.sequence,
            batch_column(query, batch, columns.sequence)?.as_ref(),
        )?);
    }
    let ranks = shards.ranks();
    for key in &mut keys {
        if let Some(rank) = ranks.get(key.shard as usize) {
            key.shard = *rank;
        }
    }
    let sequence = |key: &Key| sequences[key.batch as usize].get(key.row as usize);
    keys.sort_unstable_by(|a, b| {
        (a.arrival_missing, a.arrival, a.shard)
            .cmp(&(b.arrival_missing, b.arrival, b.shard))
            .then_with(|| sequence_order(sequence(a), sequence(b)))
    });

    let times: Vec<&PrimitiveArray<TimestampMicrosecondType>> = times
        .iter()
        .map(|t| t.as_primitive::<TimestampMicrosecondType>())
        .collect();
    let mut first: Vec<Vec<bool>> = batches.iter().map(|b| vec![false; b.num_rows()]).collect();
    let mut late: Vec<Vec<bool>> = batches.iter().map(|b| vec![false; b.num_rows()]).collect();
    let mut seen: HashSet<&str, foldhash::fast::RandomState> =
        HashSet::with_capacity_and_hasher(keys.len(), Default::default());
    let mut latest: Option<i64> = None;
    for key in &keys {
        let (b, row) = (key.batch as usize, key.row as usize);
        if let Some(id) = ids[b].get(row)
            && !seen.insert(id)
        {
            continue;
        }
        first[b][row] = true;
        let time = times[b];
        if time.is_null(row) {
            continue;
        }
        let t = time.value(row);
        match latest {
            Some(max) => {
                late[b][row] = t < max.saturating_sub(delay);
                latest = Some(max.max(t));
            }
            None => latest = Some(t),
        }
    }
    Ok(first
        .into_iter()
        .zip(late)
        .map(|(first, late)| Verdicts {
            first: BooleanArray::from(first),
            late: BooleanArray::from(late),
        })
        .collect())
}

/// A row's place in arrival order, and where the row is.
struct Key {
    arrival_missing: bool,
    arrival: i64,
    /// The shard's rank among the shards' names (`u32::MAX`: no shard).
    shard: u32,
    batch: u32,
    row: u32,
}

/// Sequence numbers in numeric order: shorter first, then by digits; missing last.
fn sequence_order(a: Option<&str>, b: Option<&str>) -> Ordering {
    match (a, b) {
        (Some(a), Some(b)) => a.len().cmp(&b.len()).then_with(|| a.cmp(b)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    }
}

/// Shard names numbered as they are met, then ranked by name. Rows of one shard come in runs, so
/// the last name is checked before the map.
#[derive(Default)]
struct ShardRanks<'a> {
    ids: HashMap<&'a str, u32>,
    names: Vec<&'a str>,
    last: Option<(&'a str, u32)>,
}

impl<'a> ShardRanks<'a> {
    fn id(&mut self, name: &'a str) -> u32 {
        if let Some((last, id)) = self.last
            && last == name
        {
            return id;
        }
        let next = self.names.len() as u32;
        let id = *self.ids.entry(name).or_insert(next);
        if id == next {
            self.names.push(name);
        }
        self.last = Some((name, id));
        id
    }

    /// For each id, its rank by name.
    fn ranks(&self) -> Vec<u32> {
        let mut order: Vec<usize> = (0..self.names.len()).collect();
        order.sort_unstable_by_key(|&id| self.names[id]);
        let mut ranks = vec![0; self.names.len()];
        for (rank, id) in order.into_iter().enumerate() {
            ranks[id] = rank as u32;
        }
        ranks
    }
}

/// A text column of any of Arrow's string layouts, read in place.
enum Text<'a> {
    Utf8(&'a StringArray),
    Large(&'a LargeStringArray),
    View(&'a StringViewArray),
}

impl<'a> Text<'a> {
    fn new(query: &str, name: &str, array: &'a dyn Array) -> Result<Self, ReportError> {
        Ok(match array.data_type() {
            DataType::Utf8 => Self::Utf8(array.as_string::<i32>()),
            DataType::LargeUtf8 => Self::Large(array.as_string::<i64>()),
            DataType::Utf8View => Self::View(array.as_string_view()),
            other => return Err(ReportError::column(query, name, format!("is {other}, not text"))),
        })
    }

    fn get(&self, row: usize) -> Option<&'a str> {
        match self {
            Self::Utf8(a) => a.is_valid(row).then(|| a.value(row)),
            Self::Large(a) => a.is_valid(row).then(|| a.value(row)),
            Self::View(a) => a.is_valid(row).then(|| a.value(row)),
        }
    }
}

/// A timestamp column as microseconds since the epoch, whatever its unit and zone.
fn micros(query: &str, batch: &RecordBatch, name: &str) -> Result<ArrayRef, ReportError> {
    let kind = batch_column(query, batch, name)?.data_type();
    if !matches!(kind, DataType::Timestamp(..)) {
        return Err(ReportError::column(query, name, format!("is {kind}, not a timestamp")));
    }
    cast_column(query, batch, name, &DataType::Timestamp(TimeUnit::Microsecond, None))
}

fn too_many(query: &str) -> ReportError {
    ReportError::column(query, "", "more than 2^32 batches or rows per batch")
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::TimestampMillisecondArray;
    use arrow::datatypes::{Field, Schema};

    use super::*;

    const COLUMNS: ArrivalColumns<'static> = ArrivalColumns {
        id: "id",
        time: "t",
        arrival: "arrival",
        shard: "shard",
        sequence: "seq",
    };

    const MINUTE_MS: i64 = 60_000;

    /// Event id, event time in minutes, arrival in minutes, shard, sequence number.
    type Row<'a> = (Option<&'a str>, Option<i64>, Option<i64>, &'a str, &'a str);

    /// The rows as a batch with times in milliseconds, the ids as large strings and the sequence
    /// numbers as a string view: the layouts DataFusion may hand over.
    fn batch(rows: &[Row<'_>]) -> RecordBatch {
        let timestamp = DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()));
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::LargeUtf8, true),
            Field::new("t", timestamp.clone(), true),
            Field::new("arrival", timestamp, true),
            Field::new("shard", DataType::Utf8, true),
            Field::new("seq", DataType::Utf8View, true),
        ]));
        let minutes = |f: fn(&Row<'_>) -> Option<i64>| {
            TimestampMillisecondArray::from(rows.iter().map(|r| f(r).map(|m| m * MINUTE_MS)).collect::<Vec<_>>())
                .with_timezone("UTC")
        };
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(LargeStringArray::from(rows.iter().map(|r| r.0).collect::<Vec<_>>())),
                Arc::new(minutes(|r| r.1)),
                Arc::new(minutes(|r| r.2)),
                Arc::new(StringArray::from(rows.iter().map(|r| r.3).collect::<Vec<_>>())),
                Arc::new(StringViewArray::from(rows.iter().map(|r| r.4).collect::<Vec<_>>())),
            ],
        )
        .unwrap()
    }

    /// Per row of all batches in order: `F` a first copy on time, `L` a late first copy, `-` a
    /// later copy.
    fn judged(batches: &[RecordBatch]) -> String {
        let verdicts = judge("test", batches, COLUMNS, TimeDelta::minutes(180)).unwrap();
        assert_eq!(verdicts.len(), batches.len());
        verdicts
            .iter()
            .flat_map(|v| {
                v.first
                    .iter()
                    .zip(v.late.iter())
                    .map(|(first, late)| match (first, late) {
                        (Some(true), Some(false)) => 'F',
                        (Some(true), Some(true)) => 'L',
                        (Some(false), Some(false)) => '-',
                        other => panic!("unexpected verdict {other:?}"),
                    })
            })
            .collect()
    }

    #[test]
    fn an_event_is_late_when_older_than_the_watermark_of_what_arrived_before_it() {
        let rows = batch(&[
            (Some("a"), Some(1000), Some(1), "s", "1"),
            // Exactly 180 minutes behind: on time.
            (Some("b"), Some(820), Some(2), "s", "2"),
            // 181 minutes behind: late.
            (Some("c"), Some(819), Some(3), "s", "3"),
            // A late event does not lower the watermark; a later one raises it.
            (Some("d"), Some(1200), Some(4), "s", "4"),
            (Some("e"), Some(1019), Some(5), "s", "5"),
            (Some("f"), Some(1020), Some(6), "s", "6"),
        ]);
        assert_eq!(judged(&[rows]), "FFLFLF");
    }

    #[test]
    fn arrival_order_not_row_order_decides_across_batches() {
        // The old event is stored first but arrived last.
        let first = batch(&[(Some("a"), Some(100), Some(50), "s", "9")]);
        let second = batch(&[
            (Some("b"), Some(1000), Some(10), "s", "1"),
            (Some("c"), Some(500), Some(20), "s", "2"),
        ]);
        assert_eq!(judged(&[first, second]), "LFL");
    }

    #[test]
    fn ties_in_arrival_are_ordered_by_shard_then_numeric_sequence_number() {
        // Same arrival: shard "a" before "b"; within "a", "9" before "10" (numeric order).
        let rows = batch(&[
            (Some("x"), Some(100), Some(1), "b", "1"),
            (Some("y"), Some(600), Some(1), "a", "9"),
            (Some("z"), Some(300), Some(1), "a", "10"),
        ]);
        assert_eq!(judged(&[rows]), "LFL");
    }

    #[test]
    fn the_first_copy_to_arrive_is_the_event_and_later_copies_move_nothing() {
        let rows = batch(&[
            // A resent copy of "a" (the API stamped it again, later), stored first but arrived
            // after the original.
            (Some("a"), Some(2000), Some(9), "s", "9"),
            (Some("a"), Some(1000), Some(1), "s", "1"),
            (Some("b"), Some(1500), Some(2), "s", "2"),
            // The same record twice (a retried batch): one of them is the event.
            (Some("c"), Some(1600), Some(3), "s", "3"),
            (Some("c"), Some(1600), Some(3), "s", "3"),
            // Rows without an id are events of their own.
            (None, Some(1600), Some(4), "s", "4"),
            (None, Some(1600), Some(4), "s", "5"),
            // Would be late against the resent copy's time, which does not count.
            (Some("d"), Some(1700), Some(10), "s", "10"),
        ]);
        let out = judged(&[rows]);
        assert_eq!(&out[..3], "-FF");
        assert!(out[3..5] == *"F-" || out[3..5] == *"-F", "{out}");
        assert_eq!(&out[5..], "FFF");
    }

    #[test]
    fn missing_arrival_sorts_last_and_missing_time_is_never_late() {
        let rows = batch(&[
            (Some("a"), Some(100), None, "s", "1"),
            (Some("b"), None, Some(1), "s", "2"),
            (Some("c"), Some(1000), Some(2), "s", "3"),
        ]);
        assert_eq!(judged(&[rows]), "LFF");
    }

    #[test]
    fn the_first_event_and_an_empty_input_are_never_late() {
        let one = batch(&[(Some("a"), Some(5), Some(1), "s", "1")]);
        assert_eq!(judged(&[one]), "F");
        assert_eq!(judged(&[]), "");
        assert_eq!(judged(&[batch(&[])]), "");
    }

    #[test]
    fn a_missing_or_mistyped_column_is_named() {
        let rows = batch(&[(Some("a"), Some(5), Some(1), "s", "1")]);
        let columns = ArrivalColumns {
            shard: "nope",
            ..COLUMNS
        };
        let err = judge("firsts", std::slice::from_ref(&rows), columns, TimeDelta::minutes(1)).unwrap_err();
        assert_eq!(err.to_string(), "query \"firsts\", column nope: not in the result");
        let columns = ArrivalColumns { id: "t", ..COLUMNS };
        let err = judge("firsts", std::slice::from_ref(&rows), columns, TimeDelta::minutes(1)).unwrap_err();
        let err = err.to_string();
        assert!(
            err.starts_with("query \"firsts\", column t: is Timestamp") && err.ends_with("not text"),
            "{err}"
        );
        let columns = ArrivalColumns {
            arrival: "id",
            ..COLUMNS
        };
        let err = judge("firsts", &[rows], columns, TimeDelta::minutes(1)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "query \"firsts\", column id: is LargeUtf8, not a timestamp"
        );
    }
}
