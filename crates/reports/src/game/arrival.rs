//! Events in Kinesis arrival order: which copy of an event came first, and which events came
//! late against the seed's event-time watermark.
//!
//! Kinesis' order is approximate arrival time, then shard, then sequence number (decimal digits,
//! so a shorter one is smaller). Of the copies of an event (one `eventId` written twice by a
//! retried batch or a resent request) the first in that order is the event. An event is late when
//! its `eventTime` is more than the watermark's delay older than the latest `eventTime` among the
//! events (first copies) of its namespace (the game) and shard that arrived before it: each game
//! and shard keeps its own watermark, as Kafka Streams keeps a stream time per partition, so one
//! game's clocks never make another game's events late and the work splits by shard.
//!
//! In SQL that is `row_number() OVER (PARTITION BY gameId, eventId ORDER BY arrival, shard,
//! length(seq), seq)` followed by a running `max(t) OVER (PARTITION BY gameId, shard ORDER BY
//! arrival, length(seq), seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)`, as the template's
//! saved Athena queries have it. DataFusion sorts each window's partitions with all their columns,
//! and the first window needs a hash aggregate and joins over every `eventId`; on a large table
//! the two are most of a report's time and memory. [`Arrivals`] and [`Judge`] do what a stream
//! consumer with a watermark would, one chunk of arrival time at a time: [`Arrivals`] holds a
//! chunk's rows in a fixed number of bytes a row whatever the texts' lengths (each row's id as 16
//! bytes, a lowercase hyphenated UUID as the API stamps them or the number of a text kept once;
//! its shard and the leading digits of its sequence number as numbers of texts kept once; the
//! sequence number's last 38 digits as a number), and [`Judge`] walks the chunk in arrival order,
//! carrying to the next chunk only the watermarks and the ids seen.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

use arrow::array::{Array, AsArray, LargeStringArray, StringArray, StringViewArray};
use arrow::datatypes::{DataType, TimeUnit, TimestampMicrosecondType};
use arrow::record_batch::RecordBatch;
use chrono::TimeDelta;
use uuid::Uuid;

use crate::error::ReportError;
use crate::session::{batch_column, cast_column};

/// The columns [`Arrivals::push`] reads.
#[derive(Debug, Clone, Copy)]
pub(super) struct ArrivalColumns<'a> {
    /// The namespace of the ids (text, such as the game; a missing one is the empty text), if the
    /// ids are unique only within one.
    pub namespace: Option<&'a str>,
    /// The event's id (text; a row without one is an event of its own).
    pub id: &'a str,
    /// The event time (a timestamp).
    pub time: &'a str,
    /// The approximate arrival time (a timestamp; nulls sort last).
    pub arrival: &'a str,
    /// The shard id (text; nulls sort last).
    pub shard: &'a str,
    /// The sequence number within the shard (text of decimal digits; nulls sort last, and text
    /// that is not decimal digits sorts after every number, by the text).
    pub sequence: &'a str,
}

/// What [`Judge::verdicts`] found, one value per row in the order the rows were pushed.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Verdicts {
    /// The row is the first copy of its event in arrival order.
    pub first: Vec<bool>,
    /// The row is a first copy whose time is more than the delay older than the latest time among
    /// the first copies before it. A row without a time is never late and does not move the
    /// watermark.
    pub late: Vec<bool>,
}

/// What identifies a row when it is read again: its id (with the namespace) and where it arrived
/// (time, shard and sequence number, as numbers of texts kept once).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct RowKey {
    space: u32,
    id: u128,
    arrival: i64,
    shard: u32,
    prefix: u32,
    low: u128,
}

/// Judges rows chunk by chunk of arrival time: which is the first copy of its event, and which
/// first copies came late. A chunk's rows must all have arrived after those of the chunks judged
/// before it (rows without an arrival time come in the last chunk).
///
/// What it carries from one chunk to the next is the watermark and the ids seen, one 16-byte
/// number per distinct id (per namespace), as a hash set; what it found is kept only for the rows
/// that are not simply on-time first copies: the later copies and the late events, by [`RowKey`].
/// [`verdicts`](Self::verdicts) then gives each row its verdict when it is read again, in any
/// order and chunking, through the same [`Arrivals`] (so that texts keep their numbers).
#[derive(Debug)]
pub(super) struct Judge {
    delay: i64,
    /// The latest event time among the first copies judged so far, by namespace and shard (see
    /// [`Arrivals::watermark_key`]).
    latest: HashMap<u64, i64, foldhash::fast::RandomState>,
    /// The ids seen so far, by namespace (with [`TEXT_ID`] for ids kept as a text's number).
    seen: HashMap<u32, HashSet<u128, foldhash::fast::RandomState>, foldhash::fast::RandomState>,
    /// Rows that are a later copy of their event, and how many rows of that key are.
    later: HashMap<RowKey, u32, foldhash::fast::RandomState>,
    /// First copies that came late.
    late: HashSet<RowKey, foldhash::fast::RandomState>,
    /// Rows judged.
    rows: u64,
    /// The rows expected in all: the room the namespaces of the first chunk share at once.
    expected: usize,
}

impl Judge {
    /// A judge with a watermark of `delay`, of about `expected` rows in all. The namespaces of the
    /// first chunk with ids get room for their share of them at once, by their share of that
    /// chunk's rows (growing a set holds it twice for a moment); a namespace met later grows.
    pub(super) fn new(delay: TimeDelta, expected: usize) -> Self {
        Judge {
            expected,
            delay: delay.num_microseconds().unwrap_or(i64::MAX),
            latest: HashMap::default(),
            seen: HashMap::default(),
            later: HashMap::default(),
            late: HashSet::default(),
            rows: 0,
        }
    }

    /// Rows judged so far.
    pub(super) fn rows(&self) -> u64 {
        self.rows
    }

    /// Later copies found so far.
    pub(super) fn later_copies(&self) -> u64 {
        self.later.values().map(|&n| u64::from(n)).sum()
    }

    /// Judges the rows of `arrivals`: the next chunk of arrival time.
    pub(super) fn judge_chunk(&mut self, arrivals: &Arrivals) {
        if self.seen.is_empty() {
            self.make_room(arrivals);
        }
        for r in arrivals.arrival_order() {
            let r = r as usize;
            self.rows += 1;
            let space = arrivals.id_namespace[r];
            if space != NONE && !self.ids(space).insert(arrivals.id[r]) {
                *self.later.entry(arrivals.row_key(r)).or_default() += 1;
                continue;
            }
            let t = arrivals.time[r];
            if t == MISSING {
                continue;
            }
            let latest = self.latest.entry(arrivals.watermark_key(r)).or_insert(t);
            if t < latest.saturating_sub(self.delay) {
                self.late.insert(arrivals.row_key(r));
            }
            *latest = (*latest).max(t);
        }
    }

    /// Gives each namespace of `arrivals`, the first chunk with ids, room for its share of the
    /// expected rows: its share of the chunk's rows with ids.
    fn make_room(&mut self, arrivals: &Arrivals) {
        let mut rows: HashMap<u32, usize, foldhash::fast::RandomState> = HashMap::default();
        for &space in arrivals.id_namespace.iter().filter(|&&space| space != NONE) {
            *rows.entry(space).or_default() += 1;
        }
        let with_ids: usize = rows.values().sum();
        for (space, n) in rows {
            // At most `expected` in all; the product fits in a u128.
            let room = (self.expected as u128 * n as u128 / with_ids as u128) as usize;
            self.seen.insert(
                space,
                HashSet::with_capacity_and_hasher(room, foldhash::fast::RandomState::default()),
            );
        }
    }

    /// The ids seen of namespace `space`.
    fn ids(&mut self, space: u32) -> &mut HashSet<u128, foldhash::fast::RandomState> {
        self.seen.entry(space).or_default()
    }

    /// The ids seen are no longer needed once every chunk is judged: gives their memory back.
    pub(super) fn forget_ids(&mut self) {
        self.seen = HashMap::default();
    }

    /// The verdicts of the rows of `arrivals`, rows judged before and read again. Each later copy
    /// is given once: rows read twice would both count as the event.
    pub(super) fn verdicts(&mut self, arrivals: &Arrivals) -> Verdicts {
        let rows = arrivals.len();
        let (mut first, mut late) = (vec![true; rows], vec![false; rows]);
        if self.later.is_empty() && self.late.is_empty() {
            return Verdicts { first, late };
        }
        for r in 0..rows {
            let key = arrivals.row_key(r);
            if let Some(n) = self.later.get_mut(&key).filter(|n| **n > 0) {
                *n -= 1;
                first[r] = false;
            } else {
                late[r] = self.late.contains(&key);
            }
        }
        Verdicts { first, late }
    }
}

/// A missing time or arrival time, as held: no timestamp of a real event is this far back.
const MISSING: i64 = i64::MIN;

/// A missing shard, sequence number or id: after every other.
const NONE: u32 = u32::MAX;

/// Marks, in [`Arrivals`]' id namespaces, an id kept as the number of its text.
const TEXT_ID: u32 = 1 << 31;

/// The arrival order and identity of rows pushed batch by batch (see the module's docs).
#[derive(Debug, Default)]
pub(super) struct Arrivals {
    namespaces: Interner,
    /// Ids that are not lowercase hyphenated UUIDs.
    id_texts: Interner,
    shards: Interner,
    /// A sequence number's length and leading digits (all but the last 38), or a text that is not
    /// digits: see [`prefix_key`].
    prefixes: Interner,
    /// Per row: the namespace (0 without a namespace column; a missing one is the empty text).
    namespace: Vec<u32>,
    /// Per row: the id's namespace (with [`TEXT_ID`] when the id is a text's number; [`NONE`]
    /// without an id) and the id.
    id_namespace: Vec<u32>,
    id: Vec<u128>,
    time: Vec<i64>,
    arrival: Vec<i64>,
    shard: Vec<u32>,
    prefix: Vec<u32>,
    /// The sequence number's last 38 digits.
    low: Vec<u128>,
}

impl Arrivals {
    /// Rows pushed so far.
    pub(super) fn len(&self) -> usize {
        self.time.len()
    }

    /// The event time of row `row` in microseconds since the epoch, if it has one.
    pub(super) fn time(&self, row: usize) -> Option<i64> {
        self.time.get(row).copied().filter(|t| *t != MISSING)
    }

    /// Appends the rows of `batch`. `query` names the rows' query in errors.
    pub(super) fn push(
        &mut self,
        query: &str,
        batch: &RecordBatch,
        columns: ArrivalColumns<'_>,
    ) -> Result<(), ReportError> {
        let text = |name: &str| Text::new(query, name, batch_column(query, batch, name)?.as_ref());
        let namespace = columns.namespace.map(text).transpose()?;
        let (id, shard, sequence) = (text(columns.id)?, text(columns.shard)?, text(columns.sequence)?);
        let time = micros(query, batch, columns.time)?;
        let arrival = micros(query, batch, columns.arrival)?;
        let (time, arrival) = (
            time.as_primitive::<TimestampMicrosecondType>(),
            arrival.as_primitive::<TimestampMicrosecondType>(),
        );
        if self.len() + batch.num_rows() > NONE as usize {
            return Err(ReportError::column(query, "", "more than 2^32 rows"));
        }
        // Each row adds at most one namespace: checked once for the batch, not row by row.
        if self.namespaces.names.len() + batch.num_rows() > TEXT_ID as usize {
            return Err(ReportError::column(query, columns.id, "more than 2^31 namespaces"));
        }
        let mut prefix = String::new();
        for row in 0..batch.num_rows() {
            let space = namespace
                .as_ref()
                .map_or(0, |n| self.namespaces.id(n.get(row).unwrap_or("")));
            self.namespace.push(space);
            let (space, value) = match id.get(row) {
                None => (NONE, 0),
                Some(text) => match Uuid::try_parse(text) {
                    Ok(uuid) if is_lower_hyphenated(text) => (space, uuid.as_u128()),
                    _ => (space | TEXT_ID, u128::from(self.id_texts.id(text))),
                },
            };
            self.id_namespace.push(space);
            self.id.push(value);
            self.time
                .push(if time.is_null(row) { MISSING } else { time.value(row) });
            self.arrival.push(if arrival.is_null(row) {
                MISSING
            } else {
                arrival.value(row)
            });
            self.shard.push(shard.get(row).map_or(NONE, |s| self.shards.id(s)));
            let (p, low) = match sequence.get(row) {
                None => (NONE, 0),
                Some(seq) => {
                    let low = prefix_key(seq, &mut prefix);
                    (self.prefixes.id(&prefix), low)
                }
            };
            self.prefix.push(p);
            self.low.push(low);
        }
        Ok(())
    }

    /// Forgets the rows pushed, keeping the texts numbered so far: a text keeps its number from
    /// one chunk of rows to the next, so that [`RowKey`]s of the same row read twice are equal.
    pub(super) fn clear(&mut self) {
        self.namespace.clear();
        self.id_namespace.clear();
        self.id.clear();
        self.time.clear();
        self.arrival.clear();
        self.shard.clear();
        self.prefix.clear();
        self.low.clear();
    }

    /// What identifies row `row` across reads: its id and where it arrived.
    fn row_key(&self, row: usize) -> RowKey {
        RowKey {
            space: self.id_namespace[row],
            id: self.id[row],
            arrival: self.arrival[row],
            shard: self.shard[row],
            prefix: self.prefix[row],
            low: self.low[row],
        }
    }

    /// Which watermark row `row` is judged against: that of its namespace and shard.
    fn watermark_key(&self, row: usize) -> u64 {
        u64::from(self.namespace[row]) << 32 | u64::from(self.shard[row])
    }

    /// The rows pushed, in arrival order: time (missing last), shard, then the sequence number.
    fn arrival_order(&self) -> Vec<u32> {
        let shard_ranks = self.shards.ranks();
        let prefix_ranks = self.prefixes.ranks();
        let rank = |ranks: &[u32], id: u32| ranks.get(id as usize).copied().unwrap_or(NONE);
        let key = |r: usize| {
            let arrival = self.arrival[r];
            (
                arrival == MISSING,
                arrival,
                rank(&shard_ranks, self.shard[r]),
                rank(&prefix_ranks, self.prefix[r]),
                self.low[r],
            )
        };
        let mut order: Vec<u32> = (0..self.len() as u32).collect();
        order.sort_unstable_by_key(|&r| key(r as usize));
        order
    }

    /// Rows `a` and `b` in the order of their ids as texts, `namespace/id` when the ids have a
    /// namespace (a missing id is the empty text).
    pub(super) fn id_order(&self, a: usize, b: usize) -> Ordering {
        let (sa, sb) = (self.id_namespace[a], self.id_namespace[b]);
        if sa == sb && sa & TEXT_ID == 0 {
            // Lowercase hyphenated UUIDs of one namespace sort as their numbers.
            return self.id[a].cmp(&self.id[b]);
        }
        let (mut ta, mut tb) = (String::new(), String::new());
        self.id_text(a, &mut ta);
        self.id_text(b, &mut tb);
        ta.cmp(&tb)
    }

    fn id_text(&self, row: usize, out: &mut String) {
        let space = self.id_namespace[row];
        let namespace = if space == NONE { 0 } else { space & !TEXT_ID };
        if let Some(name) = self.namespaces.names.get(namespace as usize) {
            out.push_str(name);
            out.push('/');
        }
        if space == NONE {
            return;
        }
        if space & TEXT_ID != 0 {
            if let Some(text) = self.id_texts.names.get(self.id[row] as usize) {
                out.push_str(text);
            }
        } else {
            out.push_str(
                Uuid::from_u128(self.id[row])
                    .hyphenated()
                    .encode_lower(&mut Uuid::encode_buffer()),
            );
        }
    }
}

/// Whether `text` is written as [`Uuid`] writes a lowercase hyphenated UUID (`Uuid::try_parse`
/// also takes other forms, whose text order differs).
fn is_lower_hyphenated(text: &str) -> bool {
    text.len() == 36 && !text.bytes().any(|b| b.is_ascii_uppercase())
}

/// The digits of a sequence number that [`Arrivals`] keeps as a number.
const LOW_DIGITS: usize = 38;

/// Writes into `key` the part of sequence number `seq` kept as a text's number, and returns the
/// part kept as a number. For decimal digits, the key is `d`, the length in ten digits and the
/// leading digits, and the number the last 38 digits; other text is `x` and the text, with 0.
/// Keys sort as the numbers do: by length, then by digits; other text after.
fn prefix_key(seq: &str, key: &mut String) -> u128 {
    use std::fmt::Write;
    key.clear();
    if !seq.is_empty() && seq.bytes().all(|b| b.is_ascii_digit()) {
        let split = seq.len().saturating_sub(LOW_DIGITS);
        let _ = write!(key, "d{:010}{}", seq.len(), &seq[..split]);
        // At most 38 digits: always fits.
        seq[split..].parse().unwrap_or_default()
    } else {
        key.push('x');
        key.push_str(seq);
        0
    }
}

/// Texts numbered as they are met. Rows of one shard or game come in runs, so the last text is
/// checked before the map.
#[derive(Debug, Default)]
struct Interner {
    ids: HashMap<Box<str>, u32, foldhash::fast::RandomState>,
    names: Vec<Box<str>>,
    last: Option<u32>,
}

impl Interner {
    fn id(&mut self, name: &str) -> u32 {
        if let Some(last) = self.last
            && self.names.get(last as usize).is_some_and(|n| **n == *name)
        {
            return last;
        }
        let next = self.names.len() as u32;
        let id = *self.ids.entry(name.into()).or_insert(next);
        if id == next {
            self.names.push(name.into());
        }
        self.last = Some(id);
        id
    }

    /// For each number, its rank by text.
    fn ranks(&self) -> Vec<u32> {
        let mut order: Vec<usize> = (0..self.names.len()).collect();
        order.sort_unstable_by_key(|&id| &self.names[id]);
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
fn micros(query: &str, batch: &RecordBatch, name: &str) -> Result<arrow::array::ArrayRef, ReportError> {
    let kind = batch_column(query, batch, name)?.data_type();
    if !matches!(kind, DataType::Timestamp(..)) {
        return Err(ReportError::column(query, name, format!("is {kind}, not a timestamp")));
    }
    cast_column(query, batch, name, &DataType::Timestamp(TimeUnit::Microsecond, None))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::TimestampMillisecondArray;
    use arrow::datatypes::{Field, Schema};

    use super::*;

    const COLUMNS: ArrivalColumns<'static> = ArrivalColumns {
        namespace: None,
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
        let verdicts = judge("test", batches, COLUMNS).unwrap();
        assert_eq!(
            verdicts.first.len(),
            batches.iter().map(RecordBatch::num_rows).sum::<usize>()
        );
        marks(&verdicts)
    }

    /// Per row: `F` a first copy on time, `L` a late first copy, `-` a later copy.
    fn marks(verdicts: &Verdicts) -> String {
        verdicts
            .first
            .iter()
            .zip(&verdicts.late)
            .map(|(first, late)| match (first, late) {
                (true, false) => 'F',
                (true, true) => 'L',
                (false, false) => '-',
                other => panic!("unexpected verdict {other:?}"),
            })
            .collect()
    }

    fn judge(query: &str, batches: &[RecordBatch], columns: ArrivalColumns<'_>) -> Result<Verdicts, ReportError> {
        let mut arrivals = Arrivals::default();
        for batch in batches {
            arrivals.push(query, batch, columns)?;
        }
        let mut judge = Judge::new(TimeDelta::minutes(180), 0);
        judge.judge_chunk(&arrivals);
        Ok(judge.verdicts(&arrivals))
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
    fn chunks_of_arrival_judge_as_one_walk_and_rows_read_again_get_their_verdicts() {
        // Chunk 1 sets the watermark and sees "a"; chunk 2 holds a later copy of "a" and an event
        // late against chunk 1's watermark; chunk 3 another copy of "a" identical to chunk 2's.
        let chunks = [
            batch(&[
                (Some("a"), Some(100), Some(1), "s", "1"),
                (Some("b"), Some(1000), Some(2), "s", "2"),
            ]),
            batch(&[
                (Some("c"), Some(700), Some(10), "s", "10"),
                (Some("a"), Some(900), Some(11), "s", "11"),
                (Some("d"), Some(900), Some(12), "s", "12"),
            ]),
            batch(&[
                (Some("a"), Some(900), Some(11), "s", "11"),
                (None, Some(1), Some(20), "s", "20"),
            ]),
        ];
        let mut arrivals = Arrivals::default();
        let mut judge = Judge::new(TimeDelta::minutes(180), 0);
        for chunk in &chunks {
            arrivals.push("test", chunk, COLUMNS).unwrap();
            judge.judge_chunk(&arrivals);
            arrivals.clear();
        }
        assert_eq!((judge.rows(), judge.later_copies()), (7, 2));
        // Read again in another chunking and order: the verdicts of one walk over all rows.
        let all = [chunks[2].clone(), chunks[1].clone(), chunks[0].clone()];
        for chunk in &all {
            arrivals.push("test", chunk, COLUMNS).unwrap();
        }
        let marks = marks(&judge.verdicts(&arrivals));
        assert_eq!(marks, "-LL-FFF");
        assert_eq!(marks, judged(&chunks.iter().rev().cloned().collect::<Vec<_>>()));
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
        // Same arrival: shard "a" before "b"; within "a", "9" before "10" (numeric order). Copies
        // of one event show which came first.
        let rows = batch(&[
            (Some("x"), Some(100), Some(1), "b", "1"),
            (Some("x"), Some(100), Some(1), "a", "10"),
            (Some("x"), Some(100), Some(1), "a", "9"),
            (Some("y"), Some(600), Some(1), "a", "11"),
            (Some("z"), Some(300), Some(1), "a", "12"),
        ]);
        assert_eq!(judged(&[rows]), "--FFL");
    }

    #[test]
    fn each_game_and_shard_has_its_own_watermark() {
        // (game, event time in minutes, shard), arriving in this order.
        let rows = [
            (Some("g1"), 1000, "s1"),
            // Far behind g1's watermark on s1, but the first of g2 on s1 and of g1 on s2.
            (Some("g2"), 500, "s1"),
            (Some("g1"), 500, "s2"),
            // Behind their own game and shard's: late.
            (Some("g2"), 300, "s1"),
            (Some("g1"), 319, "s2"),
            (Some("g1"), 819, "s1"),
            // No game is a namespace of its own.
            (None, 100, "s1"),
        ];
        let ids: Vec<String> = (0..rows.len()).map(|i| format!("e{i}")).collect();
        let arrival: Vec<i64> = (0..rows.len() as i64).collect();
        let schema = Arc::new(Schema::new(vec![
            Field::new("game", DataType::Utf8, true),
            Field::new("id", DataType::Utf8, true),
            Field::new("t", DataType::Timestamp(TimeUnit::Millisecond, None), true),
            Field::new("arrival", DataType::Timestamp(TimeUnit::Millisecond, None), true),
            Field::new("shard", DataType::Utf8, true),
            Field::new("seq", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(rows.iter().map(|r| r.0).collect::<Vec<_>>())),
                Arc::new(StringArray::from(ids)),
                Arc::new(TimestampMillisecondArray::from(
                    rows.iter().map(|r| r.1 * MINUTE_MS).collect::<Vec<_>>(),
                )),
                Arc::new(TimestampMillisecondArray::from(arrival)),
                Arc::new(StringArray::from(rows.iter().map(|r| r.2).collect::<Vec<_>>())),
                Arc::new(StringArray::from(vec!["1"; rows.len()])),
            ],
        )
        .unwrap();
        let columns = ArrivalColumns {
            namespace: Some("game"),
            ..COLUMNS
        };
        let verdicts = judge("watermarks", &[batch], columns).unwrap();
        assert_eq!(marks(&verdicts), "FFFLLLF");
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
    fn ids_are_unique_within_their_namespace_and_ordered_as_their_texts() {
        let (a, b) = (
            "0f8f7a10-84c2-4d09-9a8e-8a8d1c0e7b11",
            "9f8f7a10-84c2-4d09-9a8e-8a8d1c0e7b11",
        );
        let upper = "0F8F7A10-84C2-4D09-9A8E-8A8D1C0E7B11";
        let rows = [
            ("g1", a, 1),
            ("g2", a, 2),
            ("g1", a, 3),
            ("g1", b, 4),
            ("g1", upper, 5),
            ("g1", "plain-text-id", 6),
            ("g1", "plain-text-id", 7),
        ];
        let schema = Arc::new(Schema::new(vec![
            Field::new("game", DataType::Utf8, true),
            Field::new("id", DataType::Utf8, true),
            Field::new("t", DataType::Timestamp(TimeUnit::Millisecond, None), true),
            Field::new("shard", DataType::Utf8, true),
            Field::new("seq", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(rows.iter().map(|r| r.0).collect::<Vec<_>>())),
                Arc::new(StringArray::from(rows.iter().map(|r| r.1).collect::<Vec<_>>())),
                Arc::new(TimestampMillisecondArray::from(
                    rows.iter().map(|r| r.2 * MINUTE_MS).collect::<Vec<_>>(),
                )),
                Arc::new(StringArray::from(vec!["s"; rows.len()])),
                Arc::new(StringArray::from(
                    rows.iter().map(|r| r.2.to_string()).collect::<Vec<_>>(),
                )),
            ],
        )
        .unwrap();
        let columns = ArrivalColumns {
            namespace: Some("game"),
            id: "id",
            time: "t",
            arrival: "t",
            shard: "shard",
            sequence: "seq",
        };
        let mut arrivals = Arrivals::default();
        arrivals.push("ids", &batch, columns).unwrap();
        let mut judge = Judge::new(TimeDelta::minutes(180), 0);
        judge.judge_chunk(&arrivals);
        let verdicts = judge.verdicts(&arrivals);
        // The same UUID in two games is two events; an uppercase UUID is another text.
        assert_eq!(verdicts.first, [true, true, false, true, true, true, false]);
        // Expecting a thousand times these rows, each namespace gets room for its share at once
        // (g1's UUIDs 3 of 7 rows, g2's 1, g1's texts 3), not the first one room for all.
        let mut roomy = Judge::new(TimeDelta::minutes(180), 7000);
        roomy.judge_chunk(&arrivals);
        assert_eq!(roomy.verdicts(&arrivals).first, verdicts.first);
        let mut rooms: Vec<usize> = roomy.seen.values().map(HashSet::capacity).collect();
        rooms.sort_unstable();
        assert!(
            rooms.len() == 3 && rooms[0] >= 1000 && rooms[1] >= 3000 && rooms.iter().sum::<usize>() < 2 * 7000,
            "{rooms:?}"
        );
        // Ties are ordered as the texts `game/id` are.
        let texts: Vec<String> = rows.iter().map(|r| format!("{}/{}", r.0, r.1)).collect();
        for i in 0..rows.len() {
            for j in 0..rows.len() {
                assert_eq!(
                    arrivals.id_order(i, j),
                    texts[i].cmp(&texts[j]),
                    "{} {}",
                    texts[i],
                    texts[j]
                );
            }
        }
    }

    #[test]
    fn long_sequence_numbers_sort_as_numbers_and_text_after_them() {
        // Kinesis' 56 digits: beyond a 128-bit number.
        let base = "4959033827149025660855969253836157109592157598913658889";
        let rows = batch(&[
            (Some("a"), Some(500), Some(1), "s", &format!("{base}9")),
            (Some("b"), Some(900), Some(1), "s", &format!("{base}10")),
            (
                Some("c"),
                Some(700),
                Some(1),
                "s",
                &format!("{}89", &base[..base.len() - 1]),
            ),
            (Some("d"), Some(100), Some(1), "s", "not-a-number"),
        ]);
        // Arrival order: c (smallest), a, b (one digit longer), then the text.
        assert_eq!(judged(&[rows]), "LFFL");
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
        let err = judge("firsts", std::slice::from_ref(&rows), columns).unwrap_err();
        assert_eq!(err.to_string(), "query \"firsts\", column nope: not in the result");
        let columns = ArrivalColumns { id: "t", ..COLUMNS };
        let err = judge("firsts", std::slice::from_ref(&rows), columns).unwrap_err();
        let err = err.to_string();
        assert!(
            err.starts_with("query \"firsts\", column t: is Timestamp") && err.ends_with("not text"),
            "{err}"
        );
        let columns = ArrivalColumns {
            arrival: "id",
            ..COLUMNS
        };
        let err = judge("firsts", &[rows], columns).unwrap_err();
        assert_eq!(
            err.to_string(),
            "query \"firsts\", column id: is LargeUtf8, not a timestamp"
        );
    }
}
