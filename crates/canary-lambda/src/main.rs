//! `canary-lambda`: a probe event through the deployed API on a schedule, and how long it took to
//! become a row.

use canary::probe_key;
use canary_lambda::{Canary, Config, handle};
use lake::StorageConfig;
use lambda_runtime::{Error, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let (config, namespace) =
        env_config::init::settings(|vars| Ok((Config::from_vars(vars)?, emf::namespace(vars)?))).await;
    let sdk = aws_config::load_from_env().await;
    let key = match probe_key(&aws_sdk_apigateway::Client::new(&sdk), &config.key_id).await {
        Ok(key) => key,
        Err(e) => env_config::init::fail(e).await,
    };
    let canary = Canary::new(config, key, StorageConfig::from_env()).with_metrics_namespace(&namespace);
    let canary = &canary;
    lambda_runtime::run(service_fn(move |event| handle(event, canary))).await
}
