//! `maintenance-lambda`: scheduled compaction, deduplication, checkpoints and VACUUM of the tables.

use lake::StorageConfig;
use lambda_runtime::{Error, service_fn};
use maintenance_lambda::{Config, Maintainer, handle};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let (config, namespace, database) =
        env_config::init::settings(|vars| Ok((Config::from_env()?, emf::namespace(vars)?, catalog::database(vars)?)))
            .await;
    let reads_keys = config.erasure.as_ref().is_some_and(|e| e.api.is_some());
    let mut maintainer = Maintainer::new(config, StorageConfig::from_env()).with_metrics_namespace(&namespace);
    if reads_keys {
        maintainer = maintainer.with_ssm(aws_sdk_ssm::Client::new(&aws_config::load_from_env().await));
    }
    // The Iceberg views' Glue entries follow what the passes commit (erasures, compaction, expiry).
    if let Some(database) = database {
        let catalog = catalog::Catalog::from_env(&database).await;
        catalog.publish_views();
        maintainer = maintainer.with_catalog(catalog);
    }
    let maintainer = &maintainer;
    lambda_runtime::run(service_fn(move |event| handle(event, maintainer))).await
}
