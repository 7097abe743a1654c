//! `access-log-lambda`: SQS (S3 notifications of new raw log objects) -> Delta tables: instances
//! stage the objects' rows, and the same binary, on its schedule, commits what they staged.

use access_log_ingest::Config;
use access_log_lambda::handler;
use aws_lambda_events::event::sqs::SqsEvent;
use lake::StorageConfig;
use lambda_runtime::{Error, LambdaEvent, service_fn};

/// Time between the committer's passes.
const COMMIT_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let (config, namespace, database) =
        env_config::init::settings(|vars| Ok((Config::from_env()?, emf::namespace(vars)?, catalog::database(vars)?)))
            .await;
    // An object that cannot be read in time fails alone; the others of its batch commit.
    let mut ingestor = access_log_ingest::ingestor(&config, StorageConfig::from_env())
        .await
        // Instances stage; the schedule's tick commits (one commit per table per pass).
        .with_staging(true)
        .with_read_deadline(true)
        // Objects that may be older than a table's txn window are the backfill's.
        .with_old_object_lookup(false);
    // Each table is registered for Athena the first time this instance opens it, and its
    // Iceberg view's entry follows each metadata file this instance writes.
    if let Some(database) = database {
        let catalog = catalog::Catalog::from_env(&database).await;
        catalog.publish_views();
        ingestor = ingestor.with_catalog(catalog);
    }
    let (ingestor, namespace) = (&ingestor, namespace.as_str());
    lambda_runtime::run(service_fn(move |event: LambdaEvent<serde_json::Value>| async move {
        // An SQS batch carries `Records`; anything else is the committer's schedule.
        if event.payload.get("Records").is_some() {
            let batch: SqsEvent = serde_json::from_value(event.payload)?;
            let response = handler::handle(LambdaEvent::new(batch, event.context), ingestor, namespace).await?;
            Ok::<_, Error>(serde_json::to_value(response)?)
        } else {
            let summary = handler::commit(event.context.deadline, ingestor, namespace, COMMIT_INTERVAL).await;
            Ok(serde_json::to_value(summary)?)
        }
    }))
    .await
}
