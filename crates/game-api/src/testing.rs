//! Sinks that inject faults, for tests and load experiments: what the handler must survive without
//! acknowledging an event that was not written; and a stream of several bounded shards, on which a
//! game's lane can be seen to fill while the others' do not.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::games::{Game, Games};
use crate::lane::Lane;
use crate::local::LocalStream;
use crate::sink::{EntryFailure, EntryResult, PutEntry, RecordSink, SinkError, THROUGHPUT_EXCEEDED};

/// The API key of the sample requests in `events/` (their `x-api-key` header).
pub const SAMPLE_KEY: &str = "EXAMPLEKEYexamplekey0123456789abcdefGHIJ";

/// The game of [`SAMPLE_KEY`].
pub const SAMPLE_GAME: &str = "lakelog-legends";

/// Games that know [`SAMPLE_KEY`] as [`SAMPLE_GAME`]'s, with the default limits.
pub fn sample_games() -> Games {
    match Game::new(SAMPLE_GAME) {
        Ok(game) => Games::keys([(SAMPLE_KEY.to_owned(), game)]),
        Err(e) => unreachable!("{SAMPLE_GAME} is a game name: {e}"),
    }
}

/// Refuses a share of the entries of every call with `ProvisionedThroughputExceededException`, as
/// Kinesis does when a shard is over its limit; the other entries go to `inner` (in one call).
/// The refused ones never reach `inner`.
#[derive(Debug)]
pub struct FlakySink<S> {
    inner: S,
    share: f64,
    rng: Mutex<StdRng>,
    refused: AtomicU64,
}

impl<S> FlakySink<S> {
    /// Refuses each entry with probability `share` (0 to 1), drawn from a generator seeded with
    /// `seed`.
    pub fn new(inner: S, share: f64, seed: u64) -> Self {
        Self {
            inner,
            share: share.clamp(0.0, 1.0),
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            refused: AtomicU64::new(0),
        }
    }

    /// Entries refused so far.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// The sink behind.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

impl<S: RecordSink> RecordSink for FlakySink<S> {
    async fn put_records(&self, entries: &[PutEntry]) -> Result<Vec<EntryResult>, SinkError> {
        let refuse: Vec<bool> = {
            let mut rng = self.rng.lock().unwrap_or_else(PoisonError::into_inner);
            entries.iter().map(|_| rng.random_bool(self.share)).collect()
        };
        let passed: Vec<PutEntry> = entries
            .iter()
            .zip(&refuse)
            .filter(|(_, refused)| !**refused)
            .map(|(entry, _)| entry.clone())
            .collect();
        let mut inner_results = if passed.is_empty() {
            Vec::new().into_iter()
        } else {
            self.inner.put_records(&passed).await?.into_iter()
        };
        let mut results = Vec::with_capacity(entries.len());
        for refused in refuse {
            if refused {
                self.refused.fetch_add(1, Ordering::Relaxed);
                results.push(Err(EntryFailure {
                    code: THROUGHPUT_EXCEEDED.to_owned(),
                    message: "Rate exceeded for shard shardId-000000000000 (injected)".to_owned(),
                }));
            } else {
                results.push(inner_results.next().ok_or_else(|| SinkError {
                    code: "MismatchedResponse".into(),
                    message: "the inner sink answered for fewer entries than it was given".into(),
                    retryable: true,
                })?);
            }
        }
        Ok(results)
    }
}

/// Fails every call as a whole, writing nothing.
#[derive(Debug)]
pub struct FailingSink {
    error: SinkError,
    calls: AtomicU64,
}

impl FailingSink {
    /// Fails every call with `error`.
    pub fn new(error: SinkError) -> Self {
        Self {
            error,
            calls: AtomicU64::new(0),
        }
    }

    /// Fails every call as a throttled (retryable) `PutRecords` would.
    pub fn throttled() -> Self {
        Self::new(SinkError {
            code: "ProvisionedThroughputExceededException".into(),
            message: "Rate exceeded for stream game-events (injected)".into(),
            retryable: true,
        })
    }

    /// Calls made so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }
}

impl RecordSink for FailingSink {
    async fn put_records(&self, _entries: &[PutEntry]) -> Result<Vec<EntryResult>, SinkError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        Err(self.error.clone())
    }
}

/// Writes every entry to `inner` and then fails the call as if the reply had been lost (a
/// time-out after Kinesis wrote the records): the records are in the stream, but the handler
/// cannot know it. It must not acknowledge them; the client's resend makes duplicates, which
/// `eventId` identifies downstream.
#[derive(Debug)]
pub struct LostReplySink<S> {
    inner: S,
}

impl<S> LostReplySink<S> {
    /// Loses the reply of every call to `inner`.
    pub fn new(inner: S) -> Self {
        Self { inner }
    }
}

impl<S: RecordSink> RecordSink for LostReplySink<S> {
    async fn put_records(&self, entries: &[PutEntry]) -> Result<Vec<EntryResult>, SinkError> {
        let _ = self.inner.put_records(entries).await;
        Err(SinkError {
            code: "TransportError".into(),
            message: "the reply was lost after the records were sent (injected)".into(),
            retryable: true,
        })
    }
}

/// A stream of several shards, each a [`LocalStream`] of bounded capacity covering an equal part
/// of the hash key range, as Kinesis' `CreateStream` cuts it: a record goes to the shard that
/// holds its explicit hash key, or the MD5 of its partition key. A full shard refuses records with
/// `ProvisionedThroughputExceededException`, as a throttled Kinesis shard does, and only its own.
#[derive(Debug)]
pub struct LanedStream {
    shards: Vec<(Lane, LocalStream)>,
}

impl LanedStream {
    /// A stream `name` of `shards` shards (1 to 1024), each holding at most `capacity` records not
    /// yet consumed.
    pub fn new(name: &str, shards: u32, capacity: usize) -> Self {
        let shards = (0..shards)
            .filter_map(|index| Some((Lane::new(index, shards)?, LocalStream::shard(name, index, capacity))))
            .collect();
        Self { shards }
    }

    /// The shards, each with the part of the hash key range it holds.
    pub fn shards(&self) -> impl Iterator<Item = (Lane, &LocalStream)> {
        self.shards.iter().map(|(lane, shard)| (*lane, shard))
    }
}

impl RecordSink for LanedStream {
    async fn put_records(&self, entries: &[PutEntry]) -> Result<Vec<EntryResult>, SinkError> {
        let mut results = Vec::with_capacity(entries.len());
        for entry in entries {
            let key = entry
                .explicit_hash_key
                .unwrap_or_else(|| crate::lane::md5_of(&entry.partition_key));
            let Some((_, shard)) = self.shards.iter().find(|(lane, _)| lane.holds(key)) else {
                return Err(SinkError {
                    code: "ValidationException".into(),
                    message: format!("no shard holds the hash key {key}"),
                    retryable: false,
                });
            };
            results.extend(shard.put_records(std::slice::from_ref(entry)).await?);
        }
        Ok(results)
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::local::LocalStream;

    fn entries(n: usize) -> Vec<PutEntry> {
        (0..n)
            .map(|i| PutEntry {
                data: Bytes::from(i.to_string()),
                partition_key: "k".into(),
                explicit_hash_key: None,
            })
            .collect()
    }

    #[tokio::test]
    async fn flaky_sink_refuses_a_share_and_passes_the_rest_in_order() {
        let sink = FlakySink::new(LocalStream::new("s"), 0.3, 1);
        let results = sink.put_records(&entries(1000)).await.unwrap();
        let refused = results.iter().filter(|r| r.is_err()).count();
        assert!((200..400).contains(&refused), "{refused}");
        assert_eq!(sink.refused(), refused as u64);
        let passed: Vec<Vec<u8>> = entries(1000)
            .into_iter()
            .zip(&results)
            .filter(|(_, r)| r.is_ok())
            .map(|(e, _)| e.data.to_vec())
            .collect();
        let stored: Vec<Vec<u8>> = sink.inner().drain().into_iter().map(|r| r.kinesis.data.0).collect();
        assert_eq!(stored, passed);
        let all = FlakySink::new(LocalStream::new("s"), 1.0, 1);
        assert!(all.put_records(&entries(3)).await.unwrap().iter().all(Result::is_err));
        assert_eq!(all.inner().received(), 0);
    }

    #[tokio::test]
    async fn failing_and_lost_reply_sinks() {
        let failing = FailingSink::throttled();
        assert!(failing.put_records(&entries(2)).await.unwrap_err().retryable);
        assert_eq!(failing.calls(), 1);
        let stream = LocalStream::new("s");
        let lost = LostReplySink::new(&stream);
        assert!(lost.put_records(&entries(2)).await.is_err());
        assert_eq!(stream.len(), 2);
    }
}
