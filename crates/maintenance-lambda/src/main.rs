//! `maintenance-lambda`: scheduled compaction, deduplication, checkpoints and VACUUM of the tables.

use env_config::Vars;
use lake::StorageConfig;
use lambda_runtime::{Error, service_fn};
use maintenance_lambda::{Config, Maintainer, handle};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    // A missing or bad setting ends the function at init, reported in words to the Runtime API.
    let (config, namespace) = match Config::from_env().and_then(|c| Ok((c, emf::namespace(&Vars::env())?))) {
        Ok(settings) => settings,
        Err(e) => env_config::init::fail(e).await,
    };
    let maintainer = Maintainer::new(config, StorageConfig::from_env()).with_metrics_namespace(&namespace);
    let maintainer = &maintainer;
    lambda_runtime::run(service_fn(move |event| handle(event, maintainer))).await
}
