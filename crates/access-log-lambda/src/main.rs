//! `access-log-lambda`: SQS (S3 notifications of new raw log objects) -> Delta tables.

use access_log_ingest::Config;
use access_log_lambda::handler;
use lake::StorageConfig;
use lambda_runtime::{Error, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let (config, namespace, database) =
        env_config::init::settings(|vars| Ok((Config::from_env()?, emf::namespace(vars)?, catalog::database(vars)?)))
            .await;
    // An object that cannot be read in time fails alone; the others of its batch commit.
    let mut ingestor = access_log_ingest::ingestor(&config, StorageConfig::from_env())
        .await
        .with_read_deadline(true)
        // Objects that may be older than a table's txn window are the backfill's.
        .with_old_object_lookup(false);
    // Each table is registered for Athena the first time this instance opens it.
    if let Some(database) = database {
        ingestor = ingestor.with_catalog(catalog::Catalog::from_env(&database).await);
    }
    let (ingestor, namespace) = (&ingestor, namespace.as_str());
    lambda_runtime::run(service_fn(move |event| handler::handle(event, ingestor, namespace))).await
}
