//! `game-events-sink`: Kinesis (game events) -> the `game_events` Delta table.

use game_sink::{Config, Sink, handler};
use lake::StorageConfig;
use lambda_runtime::{Error, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let config = Config::from_env()?;
    let sink = Sink::open(&config, &StorageConfig::from_env()).await?;
    let sink = &sink;
    lambda_runtime::run(service_fn(move |event| handler::handle(event, sink))).await
}
