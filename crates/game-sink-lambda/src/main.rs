//! `game-sink-lambda`: Kinesis (game events) -> the `game_events` Delta table.

use game_sink::{Config, Sink};
use game_sink_lambda::handler;
use lake::StorageConfig;
use lambda_runtime::{Error, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    // A missing or bad setting ends the function at init, reported in words to the Runtime API.
    let config = match Config::from_env() {
        Ok(config) => config,
        Err(e) => env_config::init::fail(e).await,
    };
    let sink = match Sink::open(&config, &StorageConfig::from_env()).await {
        Ok(sink) => sink,
        Err(e) => env_config::init::fail(e).await,
    };
    let sink = &sink;
    lambda_runtime::run(service_fn(move |event| handler::handle(event, sink))).await
}
