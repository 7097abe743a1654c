//! `lake-maintenance`: scheduled compaction, deduplication, checkpoints and VACUUM of the tables.

use lake::StorageConfig;
use lake_maintenance::{Config, Maintainer, handle};
use lambda_runtime::{Error, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let config = Config::from_env()?;
    let maintainer = Maintainer::new(config, StorageConfig::from_env());
    let maintainer = &maintainer;
    lambda_runtime::run(service_fn(move |event| handle(event, maintainer))).await
}
