//! `game-sink-lambda`: Kinesis (game events) -> the `game_events` Delta table: writers stage the
//! batches and wake the committer through the commit queue; the same binary, woken or on its
//! schedule, commits what they staged.

use std::sync::Arc;

use aws_lambda_events::event::kinesis::KinesisEvent;
use aws_lambda_events::event::sqs::SqsEvent;
use game_sink::{Config, Sink};
use game_sink_lambda::handler;
use game_sink_lambda::metrics::{self, Reporter};
use game_sink_lambda::wake::{self, CommitQueue, Role};
use lake::StorageConfig;
use lambda_runtime::{Error, LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let (config, namespace, database, queue, event_names) = env_config::init::settings(|vars| {
        Ok((
            Config::from_env()?,
            emf::namespace(vars)?,
            catalog::database(vars)?,
            vars.optional(wake::QUEUE_VAR),
            vars.number(metrics::EVENT_NAMES_VAR, 0, 0..=metrics::MAX_EVENT_NAMES as u64)?,
        ))
    })
    .await;
    let queue = CommitQueue::from_env(queue).await;
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
        // Their Iceberg views' entries then follow each metadata file this instance writes.
        if let Some(database) = database {
            let catalog = catalog::Catalog::from_env(&database).await;
            catalog.publish_views();
            if let Err(error) = opening.register(&catalog).await {
                tracing::warn!(%error, "the tables are not registered in the catalog");
            }
        }
    });
    let metrics = Reporter::new(
        &namespace,
        usize::try_from(event_names).unwrap_or(metrics::MAX_EVENT_NAMES),
    );
    let interval = config.commit_interval;
    let (sink, metrics, queue) = (&*sink, &metrics, queue.as_ref());
    lambda_runtime::run(service_fn(move |event: LambdaEvent<serde_json::Value>| async move {
        match Role::of(&event.payload) {
            Role::Stage => {
                let batch: KinesisEvent = serde_json::from_value(event.payload)?;
                let response = handler::handle(LambdaEvent::new(batch, event.context), sink, metrics, queue).await?;
                Ok::<_, Error>(serde_json::to_value(response)?)
            }
            Role::CommitWoken => {
                let wake_ups: SqsEvent = serde_json::from_value(event.payload)?;
                let response = handler::commit_woken(LambdaEvent::new(wake_ups, event.context), sink, metrics).await;
                Ok(serde_json::to_value(response)?)
            }
            Role::Tick => {
                let summary = handler::commit(event.context.deadline, sink, metrics, interval).await;
                Ok(serde_json::to_value(summary)?)
            }
        }
    }))
    .await
}
