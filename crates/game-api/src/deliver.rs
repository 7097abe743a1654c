//! Writing a request's records: `PutRecords` calls within Kinesis' limits, and retries of only the
//! records that failed, with jittered exponential backoff, inside a time budget.

use std::hash::{BuildHasher, RandomState};
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

use crate::sink::{
    EntryFailure, MAX_BYTES_PER_CALL, MAX_RECORDS_PER_CALL, PutEntry, RecordSink, SinkError, THROUGHPUT_EXCEEDED,
    Written,
};

/// How hard to try.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryConfig {
    /// Time from the first call after which no call and no wait starts; a call in flight is cut
    /// off at this point too. Well under API Gateway's 29 s.
    pub budget: Duration,
    /// The ceiling of the first backoff; it doubles after each round of retries.
    pub first_backoff: Duration,
    /// The largest backoff ceiling.
    pub max_backoff: Duration,
    /// Time after which records refused only for throughput (the game's lane of the stream is
    /// full) are not retried any more: the client is told to come back (429) rather than holding
    /// a function instance, which every game shares, for the whole budget.
    pub throttled_budget: Duration,
}

impl Default for DeliveryConfig {
    fn default() -> Self {
        Self {
            budget: Duration::from_secs(10),
            first_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(2),
            throttled_budget: Duration::from_secs(1),
        }
    }
}

/// What became of one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Written: the sink gave it a sequence number.
    Written(Written),
    /// Not known to be written when the budget ran out or retrying could not help: the last error.
    Failed(EntryFailure),
}

impl Outcome {
    /// Whether the record was written.
    pub fn is_written(&self) -> bool {
        matches!(self, Outcome::Written(_))
    }
}

/// What a delivery did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// One outcome per entry, in order.
    pub outcomes: Vec<Outcome>,
    /// `PutRecords` calls made.
    pub calls: u32,
    /// Rounds of calls (1 when nothing had to be retried).
    pub rounds: u32,
}

impl Delivery {
    /// Records written.
    pub fn written(&self) -> usize {
        self.outcomes.iter().filter(|o| o.is_written()).count()
    }

    /// Records not written.
    pub fn failed(&self) -> usize {
        self.outcomes.len() - self.written()
    }

    /// Whether records were not written, every one of them refused for throughput: the stream
    /// (the game's lane of it) is full, and the client should slow down.
    pub fn throttled(&self) -> bool {
        self.failed() > 0
            && self.outcomes.iter().all(|o| match o {
                Outcome::Written(_) => true,
                Outcome::Failed(failure) => failure.code == THROUGHPUT_EXCEEDED,
            })
    }
}

/// Groups the `pending` entries into calls of at most [`MAX_RECORDS_PER_CALL`] records and
/// [`MAX_BYTES_PER_CALL`] bytes, in order.
fn calls(entries: &[PutEntry], pending: &[usize]) -> Vec<Vec<usize>> {
    let mut calls = Vec::new();
    let mut call: Vec<usize> = Vec::new();
    let mut bytes = 0;
    for &i in pending {
        let size = entries[i].size();
        if !call.is_empty() && (call.len() == MAX_RECORDS_PER_CALL || bytes + size > MAX_BYTES_PER_CALL) {
            calls.push(std::mem::take(&mut call));
            bytes = 0;
        }
        call.push(i);
        bytes += size;
    }
    if !call.is_empty() {
        calls.push(call);
    }
    calls
}

/// Writes `entries` (each at most 1 MiB with its partition key) through `sink`.
///
/// Records that fail (per-record errors such as `ProvisionedThroughputExceededException`, or a
/// call that fails as a whole with a retryable error) are retried, and only they, after a backoff
/// drawn uniformly between zero and a ceiling that doubles from `first_backoff` up to
/// `max_backoff`. Nothing starts after `budget` has passed, and a call still running then is
/// abandoned: its records count as failed (they may have been written; `eventId` makes a resend
/// safe). A non-retryable call error (missing stream, denied permission) ends the retries at once,
/// and so does `throttled_budget` when every record left was refused for throughput.
pub async fn deliver<S: RecordSink>(sink: &S, entries: &[PutEntry], config: &DeliveryConfig) -> Delivery {
    let started = Instant::now();
    let deadline = started + config.budget;
    let mut rng = SmallRng::seed_from_u64(RandomState::new().hash_one(entries.len()));
    let mut outcomes: Vec<Option<Outcome>> = vec![None; entries.len()];
    let mut last_error: Vec<Option<EntryFailure>> = vec![None; entries.len()];
    let mut pending: Vec<usize> = (0..entries.len()).collect();
    let mut ceiling = config.first_backoff;
    let mut calls_made = 0;
    let mut rounds = 0;
    'rounds: while !pending.is_empty() {
        rounds += 1;
        let mut retry = Vec::new();
        // Set when a call fails in a way no retry can mend: the records not yet sent share its fate.
        let mut permanent: Option<EntryFailure> = None;
        let mut give_up = false;
        for call in calls(entries, &pending) {
            if give_up || Instant::now() >= deadline {
                for &i in &call {
                    if let Some(failure) = &permanent {
                        last_error[i] = Some(failure.clone());
                    }
                    retry.push(i);
                }
                give_up = true;
                continue;
            }
            // A call of consecutive entries (every call of the first round) is a slice of them;
            // retries of scattered entries are gathered into a batch of their own.
            let gathered: Vec<PutEntry>;
            let batch = match call.first() {
                Some(&first) if call.iter().enumerate().all(|(k, &i)| i == first + k) => {
                    &entries[first..first + call.len()]
                }
                _ => {
                    gathered = call.iter().map(|&i| entries[i].clone()).collect();
                    &gathered[..]
                }
            };
            calls_made += 1;
            let answer = match tokio::time::timeout_at(deadline, sink.put_records(batch)).await {
                Ok(answer) => answer,
                Err(_) => Err(SinkError {
                    code: "Timeout".into(),
                    message: format!(
                        "PutRecords did not answer within the {} ms budget",
                        config.budget.as_millis()
                    ),
                    retryable: false,
                }),
            };
            match answer {
                Ok(results) if results.len() == call.len() => {
                    for (&i, result) in call.iter().zip(results) {
                        match result {
                            Ok(written) => outcomes[i] = Some(Outcome::Written(written)),
                            Err(failure) => {
                                last_error[i] = Some(failure);
                                retry.push(i);
                            }
                        }
                    }
                }
                Ok(results) => {
                    let failure = EntryFailure {
                        code: "MismatchedResponse".into(),
                        message: format!("the sink answered for {} of {} records", results.len(), call.len()),
                    };
                    for &i in &call {
                        last_error[i] = Some(failure.clone());
                        retry.push(i);
                    }
                }
                Err(error) => {
                    let failure = EntryFailure {
                        code: error.code.clone(),
                        message: error.message.clone(),
                    };
                    for &i in &call {
                        last_error[i] = Some(failure.clone());
                        retry.push(i);
                    }
                    if !error.retryable {
                        permanent = Some(failure);
                        give_up = true;
                    }
                }
            }
        }
        retry.sort_unstable();
        pending = retry;
        if pending.is_empty() || give_up {
            break 'rounds;
        }
        let only_throttled = pending
            .iter()
            .all(|&i| last_error[i].as_ref().is_some_and(|e| e.code == THROUGHPUT_EXCEEDED));
        if only_throttled && started.elapsed() >= config.throttled_budget {
            break 'rounds;
        }
        let backoff = Duration::from_secs_f64(rng.random_range(0.0..=ceiling.as_secs_f64()));
        if Instant::now() + backoff >= deadline {
            break 'rounds;
        }
        tokio::time::sleep(backoff).await;
        ceiling = (ceiling * 2).min(config.max_backoff);
    }
    let outcomes = outcomes
        .into_iter()
        .zip(last_error)
        .map(|(outcome, error)| {
            outcome.unwrap_or_else(|| {
                Outcome::Failed(error.unwrap_or_else(|| EntryFailure {
                    code: "NotSent".into(),
                    message: "the time budget ran out before the record was sent".into(),
                }))
            })
        })
        .collect();
    Delivery {
        outcomes,
        calls: calls_made,
        rounds,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU32, Ordering};

    use bytes::Bytes;

    use super::*;
    use crate::LocalStream;
    use crate::sink::EntryResult;
    use crate::testing::{FailingSink, FlakySink};

    fn entries(n: usize, size: usize) -> Vec<PutEntry> {
        (0..n)
            .map(|i| PutEntry {
                data: Bytes::from(vec![b'x'; size]),
                partition_key: format!("{i:04}"),
                explicit_hash_key: None,
            })
            .collect()
    }

    fn quick() -> DeliveryConfig {
        DeliveryConfig {
            budget: Duration::from_secs(5),
            first_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(4),
            throttled_budget: Duration::from_secs(5),
        }
    }

    #[test]
    fn calls_respect_record_and_byte_limits() {
        let many = entries(1201, 10);
        let pending: Vec<usize> = (0..many.len()).collect();
        let sizes: Vec<usize> = calls(&many, &pending).iter().map(Vec::len).collect();
        assert_eq!(sizes, [500, 500, 201]);
        // Near-1 MiB records: five fit in 5 MiB with their keys, not six.
        let big = entries(11, (1 << 20) - 100);
        let pending: Vec<usize> = (0..big.len()).collect();
        let groups = calls(&big, &pending);
        assert_eq!(groups.iter().map(Vec::len).collect::<Vec<_>>(), [5, 5, 1]);
        for group in &groups {
            assert!(group.iter().map(|&i| big[i].size()).sum::<usize>() <= MAX_BYTES_PER_CALL);
        }
        assert!(calls(&big, &[]).is_empty());
        assert_eq!(calls(&big, &[3, 7]), vec![vec![3, 7]]);
    }

    #[tokio::test]
    async fn everything_written_in_one_round() {
        let stream = LocalStream::new("s");
        let delivery = deliver(&stream, &entries(700, 100), &quick()).await;
        assert_eq!(delivery.written(), 700);
        assert_eq!((delivery.calls, delivery.rounds), (2, 1));
        assert_eq!(stream.len(), 700);
    }

    #[tokio::test]
    async fn only_failed_records_are_retried_until_written() {
        let sink = FlakySink::new(LocalStream::new("s"), 0.5, 7);
        let sent = entries(300, 10);
        let delivery = deliver(&sink, &sent, &quick()).await;
        assert_eq!(delivery.written(), 300, "{delivery:?}");
        assert!(delivery.rounds > 2);
        // Each record reached the stream exactly once, and the sequence numbers are the stream's.
        let stored = sink.inner().drain();
        let mut keys: Vec<String> = stored.iter().map(|r| r.kinesis.partition_key.clone()).collect();
        keys.sort();
        let want: Vec<String> = sent.iter().map(|e| e.partition_key.clone()).collect();
        assert_eq!(keys, want);
        for (entry, outcome) in sent.iter().zip(&delivery.outcomes) {
            let Outcome::Written(written) = outcome else {
                panic!("{outcome:?}")
            };
            let record = stored
                .iter()
                .find(|r| r.kinesis.sequence_number == written.sequence_number)
                .unwrap();
            assert_eq!(record.kinesis.partition_key, entry.partition_key);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_budget_ends_retries_and_nothing_unwritten_is_reported_written() {
        let sink = FailingSink::throttled();
        let config = DeliveryConfig {
            budget: Duration::from_secs(10),
            ..DeliveryConfig::default()
        };
        let started = Instant::now();
        let delivery = deliver(&sink, &entries(3, 10), &config).await;
        assert_eq!(delivery.written(), 0);
        assert!(started.elapsed() <= Duration::from_secs(10));
        assert!(sink.calls() > 3, "{}", sink.calls());
        for outcome in &delivery.outcomes {
            let Outcome::Failed(failure) = outcome else { panic!() };
            assert_eq!(failure.code, "ProvisionedThroughputExceededException");
        }
    }

    #[tokio::test]
    async fn a_permanent_error_stops_at_once() {
        let sink = FailingSink::new(SinkError {
            code: "ResourceNotFoundException".into(),
            message: "Stream game-events not found".into(),
            retryable: false,
        });
        let delivery = deliver(&sink, &entries(1200, 10), &quick()).await;
        assert_eq!(sink.calls(), 1);
        assert_eq!(delivery.failed(), 1200);
        assert!(matches!(&delivery.outcomes[1199], Outcome::Failed(f) if f.code == "ResourceNotFoundException"));
    }

    /// Answers after `delay`, writing nothing.
    struct Slow {
        delay: Duration,
        calls: AtomicU32,
    }

    impl RecordSink for Slow {
        async fn put_records(&self, entries: &[PutEntry]) -> Result<Vec<EntryResult>, SinkError> {
            self.calls.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(self.delay).await;
            Ok(entries
                .iter()
                .map(|_| {
                    Ok(Written {
                        shard_id: "s".into(),
                        sequence_number: "1".into(),
                    })
                })
                .collect())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_still_running_at_the_deadline_counts_as_failed() {
        let sink = Slow {
            delay: Duration::from_secs(60),
            calls: AtomicU32::new(0),
        };
        let started = Instant::now();
        let delivery = deliver(&sink, &entries(2, 10), &DeliveryConfig::default()).await;
        assert_eq!(started.elapsed(), Duration::from_secs(10));
        assert_eq!(delivery.failed(), 2);
        assert!(matches!(&delivery.outcomes[0], Outcome::Failed(f) if f.code == "Timeout"));
    }

    /// Answers with one result too few.
    struct Short(Mutex<u32>);

    impl RecordSink for Short {
        async fn put_records(&self, entries: &[PutEntry]) -> Result<Vec<EntryResult>, SinkError> {
            *self.0.lock().unwrap() += 1;
            Ok(entries[1..]
                .iter()
                .map(|_| {
                    Ok(Written {
                        shard_id: "s".into(),
                        sequence_number: "1".into(),
                    })
                })
                .collect())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_mismatched_answer_acknowledges_nothing() {
        let delivery = deliver(&Short(Mutex::new(0)), &entries(4, 10), &DeliveryConfig::default()).await;
        assert_eq!(delivery.written(), 0);
        assert!(matches!(&delivery.outcomes[0], Outcome::Failed(f) if f.code == "MismatchedResponse"));
    }
}
