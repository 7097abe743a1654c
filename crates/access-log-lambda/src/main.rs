//! `access-log-lambda`: SQS (S3 notifications of new raw log objects) -> Delta tables.

use access_log_ingest::Config;
use access_log_lambda::handler;
use env_config::Vars;
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
    let ingestor = access_log_ingest::ingestor(&config, StorageConfig::from_env()).await;
    let (ingestor, namespace) = (&ingestor, namespace.as_str());
    lambda_runtime::run(service_fn(move |event| handler::handle(event, ingestor, namespace))).await
}
