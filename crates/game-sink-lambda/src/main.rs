//! `game-sink-lambda`: Kinesis (game events) -> the `game_events` Delta table.

use std::sync::Arc;

use game_sink::{Config, Sink};
use game_sink_lambda::handler;
use game_sink_lambda::metrics::Reporter;
use lake::StorageConfig;
use lambda_runtime::{Error, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let (config, namespace, database) =
        env_config::init::settings(|vars| Ok((Config::from_env()?, emf::namespace(vars)?, catalog::database(vars)?)))
            .await;
    // The tables are opened beside the first poll, not before it: init stays short whatever the
    // length of their logs, and the first batch waits for the opening or does it again if it
    // failed (then its records are retried, with the cause in the log).
    let sink = Arc::new(Sink::new(&config, &StorageConfig::from_env()));
    let opening = Arc::clone(&sink);
    tokio::spawn(async move {
        if let Err(error) = opening.ready().await {
            tracing::error!(%error, "the tables cannot be opened; every batch will be retried");
            return;
        }
        // Registered for Athena at every cold start (an update when they are there): a failure
        // is a warning, and the next instance tries again.
        if let Some(database) = database
            && let Err(error) = opening.register(&catalog::Catalog::from_env(&database).await).await
        {
            tracing::warn!(%error, "the tables are not registered in the catalog");
        }
    });
    let metrics = Reporter::new(&namespace);
    let (sink, metrics) = (&*sink, &metrics);
    lambda_runtime::run(service_fn(move |event| handler::handle(event, sink, metrics))).await
}
