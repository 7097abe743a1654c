//! The game events API: API Gateway REST proxy requests in, events validated, stamped and written
//! to Kinesis, per-event results out. The library behind the `game-api-lambda` function and
//! `lakelog serve`; it does not depend on the Lambda runtime.
//!
//! [`respond()`] first tells the request's game from its API key ([`Games`]: API Gateway's keys
//! tagged with their game, or a keys file), then checks the request completely before writing
//! anything ([`prepare()`]: method, content type and encoding, base64 and gzip bodies, every event
//! with [`game_events::parse_body`] and the game's bounds, every record's size), stamps each event
//! with the request's time, its `eventId` and its game, and writes the records in the seed's
//! envelope ([`game_events::Envelope`])
//! through a [`RecordSink`]: Kinesis ([`KinesisSink`]), the in-memory [`LocalStream`] of
//! `lakelog serve`, or a fault-injecting double of `testing` (feature `testing`). [`deliver()`] makes `PutRecords`
//! calls within Kinesis' limits and retries only the records that failed, with jittered
//! exponential backoff inside a time budget. The response is 200 only when every event was
//! written; otherwise 503 with `Retry-After` and which events to resend. No event that did not
//! reach the stream is ever acknowledged.

#[cfg(feature = "client")]
pub mod client;
mod config;
mod deliver;
mod games;
mod lane;
mod local;
mod pack;
mod pseudonym;
mod request;
mod respond;
mod sink;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use config::{ApiConfig, Config, ConfigError, PartitionKey, RecordFormat};
pub use deliver::{Delivery, DeliveryConfig, Outcome, deliver};
pub use games::{
    API_FUNCTION_TIMEOUT, API_KEY_HEADER, ApiGatewayGames, ApiStageRef, Game, GameError, Games, KEY_CACHE_TTL,
    KEY_NAME_PREFIX, SETTING_SETTLES, STACK_OWNED_TAG, UNKNOWN_KEY_REREAD, admin, code, pseudonym_key,
    pseudonym_key_name,
};
pub use lane::Lane;
pub use local::{DEFAULT_CAPACITY, ForeignSequence, LOCAL_SHARD_ID, LocalStream};
pub use pack::Packs;
pub use pseudonym::{Pseudonym, PseudonymError};
pub use request::{RequestError, body_bytes, envelope, proxy_request};
pub use respond::{Answered, ApiError, Prepared, answer, prepare, respond};
pub use sink::{
    EntryFailure, EntryResult, KinesisSink, PutEntry, RecordSink, SinkError, StreamRef, Written, kinesis_client,
};
