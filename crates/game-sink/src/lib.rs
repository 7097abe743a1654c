//! The game events sink: Kinesis records (the seed's envelope of one stamped event each) become
//! rows of the `game_events` Delta table, partitioned by `eventDate`, with one commit per batch.
//!
//! * A record that can never become a row (not JSON, no event, no `eventName`, no `eventTime`) is
//!   written to the `game_events_rejects` table with its reason and data, and is not retried.
//! * Each Kinesis record is written once: every commit carries the position of each shard it
//!   covers (`lake::progress`), and a batch delivered again writes only the records after them.
//!   An event (`gameId`, `eventId`) seen twice in one batch is written once; a client's resend
//!   is a new record, and compaction of closed partitions removes it.
//! * A batch that still cannot be committed when the stream is about to drop its records is
//!   parked ([`Parking`]) and brought in later by [`Sink::replay`], exactly once.
//! * When a commit fails, [`BatchReport::retry_from`] names the first record that was not
//!   committed; the Lambda reports it as a batch item failure, so only it and the records after
//!   it are retried.
//!
//! The `game-sink-lambda` function and `lakelog serve` both call [`Sink::process`]; this library
//! does not depend on the Lambda runtime.

pub mod config;
mod sink;

pub use config::{Config, ConfigError, Parking, Settle};
pub use sink::{
    BatchReport, EventCount, Parked, ParkedFor, ReplayError, Replayed, Sink, WriteError, events_table_spec,
    rejects_table_spec,
};
