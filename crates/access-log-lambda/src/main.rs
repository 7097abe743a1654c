//! `access-log-lambda`: SQS (S3 notifications of new raw log objects) -> Delta tables.

use access_log_ingest::Config;
use access_log_lambda::handler;
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
    let ingestor = access_log_ingest::ingestor(&config, StorageConfig::from_env()).await;
    let ingestor = &ingestor;
    lambda_runtime::run(service_fn(move |event| handler::handle(event, ingestor))).await
}
