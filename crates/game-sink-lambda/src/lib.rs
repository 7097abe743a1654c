//! The `game-sink-lambda` function: a Kinesis batch of game events in, the record to retry from
//! out, and the batch's metrics ([`metrics`]) on standard output. [`handler::handle`] adapts the
//! Lambda event to [`game_sink::Sink::process`]; everything else lives in that library, which
//! `lakelog serve` and the demo share.

pub mod handler;
pub mod metrics;
pub mod wake;
