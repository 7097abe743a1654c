//! `game-sink-lambda`: Kinesis (game events) -> the `game_events` Delta table.

use env_config::Vars;
use game_sink::{Config, Sink};
use game_sink_lambda::handler;
use game_sink_lambda::metrics::Reporter;
use lake::StorageConfig;
use lambda_runtime::{Error, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    // A missing or bad setting ends the function at init, reported in words to the Runtime API.
    let (config, namespace) = match Config::from_env().and_then(|c| Ok((c, emf::namespace(&Vars::env())?))) {
        Ok(settings) => settings,
        Err(e) => env_config::init::fail(e).await,
    };
    let sink = match Sink::open(&config, &StorageConfig::from_env()).await {
        Ok(sink) => sink,
        Err(e) => env_config::init::fail(e).await,
    };
    let metrics = Reporter::new(&namespace);
    let (sink, metrics) = (&sink, &metrics);
    lambda_runtime::run(service_fn(move |event| handler::handle(event, sink, metrics))).await
}
