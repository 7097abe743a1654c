//! An in-memory stream with one shard, in place of Kinesis: `lakelog serve` writes to it, and hands
//! what it holds to the consumer as the Kinesis records a Lambda would receive.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use aws_lambda_events::event::kinesis::KinesisEventRecord;
use chrono::Utc;
use tokio::sync::Notify;

use crate::sink::{EntryFailure, EntryResult, PutEntry, RecordSink, SinkError, THROUGHPUT_EXCEEDED, Written};

/// The only shard of a [`LocalStream`].
pub const LOCAL_SHARD_ID: &str = "shardId-000000000000";

/// The region in the ARN and records of a [`LocalStream`].
pub const LOCAL_REGION: &str = "local";

/// Records a [`LocalStream`] holds by default before refusing more.
pub const DEFAULT_CAPACITY: usize = 100_000;

/// A record as the stream keeps it; it becomes a [`KinesisEventRecord`] when it is taken.
#[derive(Debug)]
struct Stored {
    data: bytes::Bytes,
    partition_key: String,
    /// The record's number in the shard; its sequence number is [`sequence_number`] of it.
    sequence: u128,
    arrival: chrono::DateTime<Utc>,
}

#[derive(Debug, Default)]
struct State {
    records: VecDeque<Stored>,
    next_sequence: u128,
    received: u64,
    refused: u64,
}

/// What every sequence number of a [`LocalStream`] starts with.
const SEQUENCE_PREFIX: &str = "4959";

/// The digits of a sequence number after [`SEQUENCE_PREFIX`]: the record's number, zero-padded.
const SEQUENCE_DIGITS: usize = 52;

/// A sequence number that no [`LocalStream`] gives, so a stream cannot continue after it.
#[derive(Debug, thiserror::Error)]
#[error(
    "the local stream {stream} cannot continue after {sequence_number:?}: not a sequence number of a local stream \
     (4959 and 52 digits)"
)]
pub struct ForeignSequence {
    /// The stream's name.
    pub stream: String,
    /// The sequence number (at most 160 characters of it).
    pub sequence_number: String,
}

/// The `n`th Kinesis sequence number of the shard: 56 decimal digits, increasing with `n`. The
/// same text as `format!("4959{n:052}")` (a test compares them), with `itoa`'s digits in place of
/// the formatter's padding one character at a time.
fn sequence_number(n: u128) -> String {
    const ZEROS: &str = "0000000000000000000000000000000000000000000000000000";
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(n);
    let mut out = String::with_capacity(56);
    out.push_str(SEQUENCE_PREFIX);
    out.push_str(ZEROS.get(digits.len()..).unwrap_or_default());
    out.push_str(digits);
    out
}

/// An in-memory stream of one shard (`shardId-000000000000`).
///
/// Writes (through [`RecordSink`]) append records with increasing sequence numbers; consumers take
/// them with [`LocalStream::next_batch`] as [`KinesisEventRecord`]s, exactly as a Kinesis event
/// source hands them to a Lambda. Like a shard at its throughput limit, a stream holding
/// `capacity` records not yet consumed refuses further records with
/// `ProvisionedThroughputExceededException`.
#[derive(Debug)]
pub struct LocalStream {
    name: String,
    arn: String,
    shard_id: String,
    capacity: usize,
    state: Mutex<State>,
    arrived: Notify,
}

impl LocalStream {
    /// A stream named `name` holding at most [`DEFAULT_CAPACITY`] records.
    pub fn new(name: &str) -> Self {
        Self::with_capacity(name, DEFAULT_CAPACITY)
    }

    /// A stream named `name` holding at most `capacity` records not yet consumed.
    pub fn with_capacity(name: &str, capacity: usize) -> Self {
        Self::shard(name, 0, capacity)
    }

    /// The shard `shardId-<index>` of a stream named `name`, holding at most `capacity` records
    /// not yet consumed: several of them make a stream of several shards (see
    /// [`crate::testing::LanedStream`]).
    pub fn shard(name: &str, index: u32, capacity: usize) -> Self {
        Self {
            name: name.to_owned(),
            arn: format!("arn:aws:kinesis:{LOCAL_REGION}:000000000000:stream/{name}"),
            shard_id: format!("shardId-{index:012}"),
            capacity,
            state: Mutex::new(State::default()),
            arrived: Notify::new(),
        }
    }

    /// Continues the shard after `sequence_number`: the next record written gets the sequence
    /// number after it (or after the stream's last, if that is later). A stream that starts anew
    /// in front of a table it fed before (`lakelog serve` restarted on one `--lake`) continues
    /// after the table's committed position, so that no new record is taken for one already in.
    pub fn continue_after(&self, sequence_number: &str) -> Result<(), ForeignSequence> {
        let n = sequence_number
            .strip_prefix(SEQUENCE_PREFIX)
            .filter(|digits| digits.len() == SEQUENCE_DIGITS && digits.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|digits| digits.parse::<u128>().ok())
            .ok_or_else(|| ForeignSequence {
                stream: self.name.clone(),
                sequence_number: sequence_number.chars().take(160).collect(),
            })?;
        let mut state = self.state();
        state.next_sequence = state.next_sequence.max(n);
        Ok(())
    }

    /// The stream's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The stream's ARN, the `eventSourceARN` of its records.
    pub fn arn(&self) -> &str {
        &self.arn
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The state stays consistent whatever panicked while holding the lock: every update is
        // one push or drain.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records held, not yet consumed.
    pub fn len(&self) -> usize {
        self.state().records.len()
    }

    /// Whether no record is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records written since the stream was created.
    pub fn received(&self) -> u64 {
        self.state().received
    }

    /// Records refused because the stream was full.
    pub fn refused(&self) -> u64 {
        self.state().refused
    }

    /// Takes up to `max` of the oldest records, waiting up to `wait` for the first one to arrive;
    /// empty when none did.
    pub async fn next_batch(&self, max: usize, wait: Duration) -> Vec<KinesisEventRecord> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let arrived = self.arrived.notified();
            tokio::pin!(arrived);
            // Registered before looking, so that a record pushed in between still wakes us.
            arrived.as_mut().enable();
            let batch = self.take(max);
            if !batch.is_empty() || max == 0 {
                return batch;
            }
            if tokio::time::timeout_at(deadline, arrived).await.is_err() {
                return self.take(max);
            }
        }
    }

    /// Takes up to `max` of the oldest records without waiting.
    pub fn take(&self, max: usize) -> Vec<KinesisEventRecord> {
        let taken: Vec<Stored> = {
            let mut state = self.state();
            let n = max.min(state.records.len());
            state.records.drain(..n).collect()
        };
        taken.into_iter().map(|stored| self.record(stored)).collect()
    }

    /// Takes every record held.
    pub fn drain(&self) -> Vec<KinesisEventRecord> {
        self.take(usize::MAX)
    }

    fn record(&self, stored: Stored) -> KinesisEventRecord {
        let mut record = KinesisEventRecord::default();
        record.aws_region = Some(LOCAL_REGION.to_owned());
        let sequence_number = sequence_number(stored.sequence);
        record.event_id = Some(format!("{}:{sequence_number}", self.shard_id));
        record.event_name = Some("aws:kinesis:record".to_owned());
        record.event_source = Some("aws:kinesis".to_owned());
        record.event_source_arn = Some(self.arn.clone());
        record.event_version = Some("1.0".to_owned());
        record.invoke_identity_arn = Some("arn:aws:iam::000000000000:role/lakelog-local".to_owned());
        record.kinesis.approximate_arrival_timestamp.0 = stored.arrival;
        // A copy, unless the stream holds the only reference to the data.
        record.kinesis.data.0 = Vec::from(stored.data);
        record.kinesis.partition_key = stored.partition_key;
        record.kinesis.sequence_number = sequence_number;
        record.kinesis.kinesis_schema_version = Some("1.0".to_owned());
        record
    }
}

impl RecordSink for LocalStream {
    async fn put_records(&self, entries: &[PutEntry]) -> Result<Vec<EntryResult>, SinkError> {
        let mut results = Vec::with_capacity(entries.len());
        let arrival = Utc::now();
        {
            let mut state = self.state();
            for entry in entries {
                if state.records.len() >= self.capacity {
                    state.refused += 1;
                    results.push(Err(EntryFailure {
                        code: THROUGHPUT_EXCEEDED.to_owned(),
                        message: format!(
                            "local stream {} holds {} records not yet consumed",
                            self.name, self.capacity
                        ),
                    }));
                    continue;
                }
                state.next_sequence += 1;
                let sequence = state.next_sequence;
                state.records.push_back(Stored {
                    data: entry.data.clone(),
                    partition_key: entry.partition_key.clone(),
                    sequence,
                    arrival,
                });
                state.received += 1;
                results.push(Ok(Written {
                    shard_id: self.shard_id.clone(),
                    sequence_number: sequence_number(sequence),
                }));
            }
        }
        self.arrived.notify_waiters();
        Ok(results)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;

    use super::*;

    fn entry(data: &'static str, key: &str) -> PutEntry {
        PutEntry {
            data: Bytes::from_static(data.as_bytes()),
            partition_key: key.into(),
            explicit_hash_key: None,
        }
    }

    #[tokio::test]
    async fn records_come_out_as_kinesis_event_records_in_order() {
        let stream = LocalStream::new("game-events");
        let results = stream.put_records(&[entry("a", "k1"), entry("b", "k2")]).await.unwrap();
        let written: Vec<Written> = results.into_iter().map(Result::unwrap).collect();
        assert!(written[0].sequence_number < written[1].sequence_number);
        assert_eq!(written[0].sequence_number.len(), 56);
        assert_eq!(written[0].shard_id, LOCAL_SHARD_ID);
        assert_eq!(stream.len(), 2);
        let batch = stream.next_batch(10, Duration::from_millis(1)).await;
        assert_eq!(batch.len(), 2);
        let first = &batch[0];
        assert_eq!(first.kinesis.data.0, b"a");
        assert_eq!(first.kinesis.partition_key, "k1");
        assert_eq!(first.kinesis.sequence_number, written[0].sequence_number);
        assert_eq!(
            first.event_id.as_deref(),
            Some(format!("{LOCAL_SHARD_ID}:{}", written[0].sequence_number).as_str())
        );
        assert_eq!(
            first.event_source_arn.as_deref(),
            Some("arn:aws:kinesis:local:000000000000:stream/game-events")
        );
        assert!((Utc::now() - first.kinesis.approximate_arrival_timestamp.0).num_seconds() < 60);
        // The record serialises as the Kinesis event a Lambda receives.
        let json = serde_json::to_value(first).unwrap();
        assert_eq!(json["kinesis"]["data"], "YQ==");
        assert_eq!(json["eventSource"], "aws:kinesis");
        assert!(stream.is_empty());
        assert_eq!(stream.received(), 2);
    }

    #[test]
    fn sequence_numbers_are_56_digits_in_order() {
        for n in [0, 1, 9, 10, 123_456_789, u128::from(u64::MAX), u128::MAX] {
            assert_eq!(sequence_number(n), format!("4959{n:052}"), "{n}");
        }
        assert_eq!(sequence_number(1).len(), 56);
        assert!(sequence_number(9) < sequence_number(10));
    }

    #[tokio::test]
    async fn a_stream_continues_after_a_sequence_number_it_gave() {
        let first = LocalStream::new("s");
        let written = first.put_records(&[entry("a", "k"), entry("b", "k")]).await.unwrap();
        let last = written[1].as_ref().unwrap().sequence_number.clone();

        let again = LocalStream::new("s");
        again.continue_after(&last).unwrap();
        let next = again.put_records(&[entry("c", "k")]).await.unwrap();
        let next = &next[0].as_ref().unwrap().sequence_number;
        assert_eq!(*next, sequence_number(3));
        assert!(*next > last);
        // An earlier position never moves the stream back.
        again.continue_after(&sequence_number(1)).unwrap();
        let after = again.put_records(&[entry("d", "k")]).await.unwrap();
        assert_eq!(after[0].as_ref().unwrap().sequence_number, sequence_number(4));

        for foreign in ["", "12", "49590", &format!("4960{:052}", 1), &format!("4959{:052}x", 1)] {
            let err = again.continue_after(foreign).unwrap_err();
            assert!(err.to_string().contains("cannot continue after"), "{err}");
        }
    }

    #[tokio::test]
    async fn a_full_stream_refuses_like_a_throttled_shard() {
        let stream = LocalStream::with_capacity("s", 2);
        let results = stream
            .put_records(&[entry("1", "k"), entry("2", "k"), entry("3", "k")])
            .await
            .unwrap();
        assert!(results[0].is_ok() && results[1].is_ok());
        assert_eq!(results[2].as_ref().unwrap_err().code, THROUGHPUT_EXCEEDED);
        assert_eq!(stream.refused(), 1);
        assert_eq!(stream.take(1).len(), 1);
        let results = stream.put_records(&[entry("4", "k")]).await.unwrap();
        assert!(results[0].is_ok());
        let data: Vec<Vec<u8>> = stream.drain().into_iter().map(|r| r.kinesis.data.0).collect();
        assert_eq!(data, [b"2".to_vec(), b"4".to_vec()]);
    }

    #[tokio::test]
    async fn next_batch_waits_for_records_and_times_out() {
        let stream = Arc::new(LocalStream::new("s"));
        let started = tokio::time::Instant::now();
        assert!(stream.next_batch(5, Duration::from_millis(20)).await.is_empty());
        assert!(started.elapsed() >= Duration::from_millis(20));
        let writer = {
            let stream = Arc::clone(&stream);
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                stream.put_records(&[entry("late", "k")]).await.unwrap();
            })
        };
        let batch = stream.next_batch(5, Duration::from_secs(30)).await;
        assert_eq!(batch.len(), 1);
        assert!(started.elapsed() < Duration::from_secs(30));
        writer.await.unwrap();
    }
}
