//! Parking and replay: a batch that still cannot be staged when the stream is about to drop its
//! records is written to the parking folder ([`Parking`]), one object per table, shard and range of
//! sequence numbers; [`Sink::replay`] brings such an object into its table exactly once.

use aws_lambda_events::event::kinesis::KinesisEventRecord;
use game_events::{RecordError, StampedEvent, decode_record};
use lake::{LakeError, Retry};
use serde::{Deserialize, Serialize};
use tracing::{error, info, warn};

use super::{Sink, WriteError, after, event_rows, lineage, reject_rows, runs, stream_of, write_files};
use crate::config::Parking;

/// Why parked records could not be replayed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The object is not parked records of this sink.
    #[error("{object} is not an object of parked records: {reason}")]
    NotParked {
        /// The object.
        object: String,
        /// What is wrong.
        reason: String,
    },
    /// The object could not be read, or the rows not written or committed.
    #[error(transparent)]
    Lake(#[from] LakeError),
    /// The rows could not be made.
    #[error(transparent)]
    Write(#[from] WriteError),
}

/// The table parked records are for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ParkedFor {
    /// `game_events`: the records are events.
    Events,
    /// `game_events_rejects`: the records can never be events.
    Rejects,
}

impl ParkedFor {
    fn name(self) -> &'static str {
        match self {
            ParkedFor::Events => "events",
            ParkedFor::Rejects => "rejects",
        }
    }
}

/// An object of parked records: the records of one batch that one table did not have when the
/// stream was about to drop them, as Lambda delivered them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Parked {
    /// The table they are for.
    pub table: ParkedFor,
    /// The table's location when they were parked.
    pub location: String,
    /// The records, in their shard's order.
    pub records: Vec<KinesisEventRecord>,
}

/// What [`Sink::replay`] did with one object of parked records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replayed {
    /// Its rows were committed (as many as given), with the object recorded in the same commit.
    Committed(u64),
    /// An earlier replay committed it: nothing was written.
    AlreadyIn,
}

impl Sink {
    /// `table` could not take its rows of `records` (`failure` says why): parks what it does not
    /// have of them when the oldest is about to be dropped by the stream (see [`Parking`]) and
    /// returns the number parked; `None` when it is not time yet, parking is off, or the records
    /// could not be parked, and then the batch is to be retried.
    pub(super) async fn park_if_due(
        &self,
        table: ParkedFor,
        failure: &WriteError,
        records: &[KinesisEventRecord],
        decoded: &[Result<StampedEvent, RecordError>],
    ) -> Option<usize> {
        let uri = &self.table_for(table).uri;
        let due = self.parking.as_ref().filter(|parking| {
            let oldest = records.iter().map(|r| r.kinesis.approximate_arrival_timestamp.0).min();
            oldest.is_some_and(|oldest| {
                let age = chrono::Utc::now()
                    .signed_duration_since(oldest)
                    .to_std()
                    .unwrap_or_default();
                age >= parking.after
            })
        });
        let Some(parking) = due else {
            warn!(table = %uri, error = %failure, "not committed; the batch will be retried");
            return None;
        };
        match self.park(parking, table, records, decoded).await {
            Ok(parked) => {
                error!(table = %uri, error = %failure, parked, "not committed in time; parked");
                Some(parked)
            }
            Err(e) => {
                error!(table = %uri, error = %failure, folder = %parking.folder, park_error = %e, "not committed, and could not park the records; the batch will be retried");
                None
            }
        }
    }

    /// Writes the records of `records` that `table` does not have yet (by its shards' positions)
    /// and that belong in it to an object of the parking folder, named by the table, shard and
    /// sequence numbers.
    async fn park(
        &self,
        parking: &Parking,
        table: ParkedFor,
        records: &[KinesisEventRecord],
        decoded: &[Result<StampedEvent, RecordError>],
    ) -> Result<usize, WriteError> {
        let target = self.table_for(table);
        let mut new = Vec::with_capacity(records.len());
        {
            let mut handle = target.table().await?.lock().await;
            for (stream, range) in runs(records) {
                let done = handle.staged_position(&stream).await?;
                new.extend(after(&records[range], done.as_deref()).0);
            }
        }
        let parked: Vec<KinesisEventRecord> = records
            .iter()
            .zip(decoded)
            .zip(&new)
            .filter(|((_, event), new)| **new && (event.is_ok() == (table == ParkedFor::Events)))
            .map(|((record, _), _)| record.clone())
            .collect();
        let (Some(first), Some(last)) = (parked.first(), parked.last()) else {
            return Ok(0);
        };
        let name = format!(
            "{}/{}/{}-{}.json",
            table.name(),
            lineage(first).shard_id,
            first.kinesis.sequence_number,
            last.kinesis.sequence_number
        );
        let count = parked.len();
        let object = Parked {
            table,
            location: target.uri.clone(),
            records: parked,
        };
        let bytes = serde_json::to_vec(&object).map_err(|e| WriteError::Parking(e.to_string()))?;
        let folder = lake::Folder::open(&parking.folder, &self.storage)?;
        folder.put(&name, bytes).await?;
        info!(object = %folder.object_uri(&name), records = count, "records parked");
        Ok(count)
    }

    /// Brings the parked records of the object `name` of `folder` into their table, exactly once,
    /// then deletes the object: the rows and a `txn` of the records' stream and sequence numbers
    /// land in one commit, so replaying the object again (before it is deleted, or from a copy of
    /// it under another name or folder) writes nothing while the table keeps its `txn` ids.
    pub async fn replay(&self, folder: &lake::Folder, name: &str, retry: &Retry) -> Result<Replayed, ReplayError> {
        let object = folder.object_uri(name);
        let bad = |reason: String| ReplayError::NotParked {
            object: object.clone(),
            reason,
        };
        let bytes = folder.get(name).await?;
        let parked: Parked = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
        let (Some(first), Some(last)) = (parked.records.first(), parked.records.last()) else {
            return Err(bad("it holds no records".to_owned()));
        };
        // Named by what it holds, not where it lies: the same records under any name are one
        // source.
        let source = format!(
            "lakelog.parked:{}:{}:{}-{}",
            parked.table.name(),
            stream_of(first),
            first.kinesis.sequence_number,
            last.kinesis.sequence_number
        );
        let target = self.table_for(parked.table);
        let mut table = target.table().await?.lock().await;
        table.refresh().await?;
        // Objects replayed by earlier releases were recorded by their location.
        if table.is_committed(&source).await? || table.is_committed(&object).await? {
            drop(table);
            folder.delete(name).await?;
            return Ok(Replayed::AlreadyIn);
        }
        let decoded: Vec<Result<StampedEvent, RecordError>> =
            parked.records.iter().map(|r| decode_record(&r.kinesis.data)).collect();
        let events = parked.table == ParkedFor::Events;
        for (record, event) in parked.records.iter().zip(&decoded) {
            let seq = &record.kinesis.sequence_number;
            match (event, events) {
                (Err(reason), true) => return Err(bad(format!("record {seq}: {reason}"))),
                (Ok(_), false) => return Err(bad(format!("record {seq} is not a reject"))),
                _ => {}
            }
        }
        // Records the table has all the same are left out: a batch whose parking landed but
        // whose answer was lost (or whose function stopped after parking it) was delivered again
        // and staged.
        let present = present(&table, &parked, &decoded).await?;
        let keep: Vec<bool> = parked
            .records
            .iter()
            .zip(&decoded)
            .map(|(record, event)| match event {
                Ok(event) => !present.contains(&event.event_id.to_string()),
                Err(_) => !present.contains(&record.kinesis.sequence_number),
            })
            .collect();
        if !keep.contains(&true) {
            drop(table);
            folder.delete(name).await?;
            return Ok(Replayed::AlreadyIn);
        }
        let ingested_at = lake::now_micros();
        let batch = if events {
            event_rows(&parked.records, &decoded, &keep, ingested_at).0
        } else {
            reject_rows(&parked.records, &decoded, &keep, ingested_at)
        }
        .map_err(WriteError::from)?;
        let files = write_files(&table, &source, batch).await?;
        let outcome = table.commit_sources(vec![files], retry).await?;
        drop(table);
        folder.delete(name).await?;
        Ok(Replayed::Committed(outcome.rows))
    }
}

/// Which of `parked`'s records `table` already has: events by `eventId` (read from the days the
/// events fall on only), rejects by `sequenceNumber`.
async fn present(
    table: &lake::Table,
    parked: &Parked,
    decoded: &[Result<StampedEvent, RecordError>],
) -> Result<std::collections::BTreeSet<String>, LakeError> {
    if parked.table == ParkedFor::Events {
        let ids = decoded
            .iter()
            .filter_map(|e| e.as_ref().ok())
            .map(|e| e.event_id.to_string());
        let days: std::collections::HashSet<String> = decoded
            .iter()
            .filter_map(|e| e.as_ref().ok())
            .map(|e| e.event_time.date_naive().to_string())
            .collect();
        let erasure = lake::Erasure::new(ids).equals("eventId");
        table
            .ids_present(&erasure, |values| {
                values
                    .get(game_events::batch::EVENT_DATE)
                    .is_none_or(|day| days.contains(day))
            })
            .await
    } else {
        let sequences = parked.records.iter().map(|r| r.kinesis.sequence_number.clone());
        table
            .ids_present(&lake::Erasure::new(sequences).equals("sequenceNumber"), |_| true)
            .await
    }
}
