//! The game events sink: Kinesis records (the seed's envelope of one stamped event each) become
//! rows of the `game_events` Delta table, partitioned by `eventDate`.
//!
//! * Writers stage, one committer commits ([`lake::staging`]): [`Sink::stage`] writes a batch's
//!   files and a link of its shard's chain, and its batch is done once the link is durable;
//!   [`Sink::commit_staged`] commits what every writer staged in one version per table, with each
//!   shard's position. The table sees one commit per pass, however many shards there are.
//! * A record that can never become a row (not JSON, no event, no `eventName`, no `eventTime`) is
//!   written to the `game_events_rejects` table with its reason and data, and is not retried.
//! * Each Kinesis record is written once: a batch delivered again stages only the records after
//!   its shard's staged position, and two writers of the same records race for one link name.
//!   An event (`gameId`, `eventId`) seen twice in one batch is written once; a client's resend
//!   is a new record, and compaction of closed partitions removes it.
//! * A batch that still cannot be staged when the stream is about to drop its records is
//!   parked ([`Parking`]) and brought in later by [`Sink::replay`], exactly once.
//! * When staging fails, [`BatchReport::retry_from`] names the first record that was not
//!   staged; the Lambda reports it as a batch item failure, so only it and the records after
//!   it are retried.
//!
//! * [`erasure`] erases players from the tables and the parked records, with a receipt.
//!
//! The `game-sink-lambda` function stages on Kinesis batches and commits on its schedule;
//! `lakelog serve` and the demo call [`Sink::process`], which does both in turn. This library
//! does not depend on the Lambda runtime.

pub mod config;
pub mod erasure;
mod sink;

pub use config::{Config, ConfigError, Parking, Settle};
pub use sink::{
    BatchReport, Committed, EventCount, Parked, ParkedFor, ReplayError, Replayed, Sink, SinkCommit, WriteError,
    events_table_spec, rejects_table_spec,
};
