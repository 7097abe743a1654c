//! The `game-api-lambda` function: API Gateway REST proxy requests in, validated and stamped
//! events written to Kinesis, per-event results out. [`handler::handle`] adapts the Lambda event
//! to [`game_api::respond()`] and writes its metrics ([`metrics`]) to standard output; everything
//! else lives in that library, which `lakelog serve` shares.

pub mod handler;
pub mod metrics;
