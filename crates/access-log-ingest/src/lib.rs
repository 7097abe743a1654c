//! Lands S3 server access logs in Delta Lake: the library behind the `access-log-lambda`
//! function and `lakelog ingest`. It does not depend on the Lambda runtime.
//!
//! S3 writes small log objects into a raw-logs bucket and notifies an SQS queue of each one. The
//! Lambda reads the notifications ([`notification`]), and [`Ingestor::ingest`] streams each object
//! from S3 ([`objects`]) through the parser into per-bucket Delta tables and a rejects table
//! ([`ingest`]), reporting per object whether it landed. Each object is written to each table
//! exactly once: its rows and a Delta `txn` action named by the object's URI land in the same
//! commit.

pub mod config;
pub mod ingest;
pub mod notification;
pub mod objects;
pub mod teardown;

use aws_config::BehaviorVersion;
use lake::StorageConfig;

pub use config::{Config, ConfigError, TableTemplate};
pub use ingest::{IngestError, IngestObserver, Ingestor, ObjectReport, TablesCommitted};
pub use objects::{LogSource, ObjectReader, ObjectRef, ReadError};

/// An S3 client from the environment's AWS configuration; with `role_arn`, its credentials come
/// from assuming that role (raw logs in another account). With an endpoint override (local
/// stand-ins) requests address buckets by path.
pub async fn s3_client(role_arn: Option<&str>, storage: &StorageConfig) -> aws_sdk_s3::Client {
    let base = aws_config::defaults(BehaviorVersion::latest()).load().await;
    let mut builder = aws_sdk_s3::config::Builder::from(&base);
    if let Some(arn) = role_arn {
        let provider = aws_config::sts::AssumeRoleProvider::builder(arn)
            .session_name("lakelog-access-log-ingest")
            .configure(&base)
            .build()
            .await;
        builder = builder.credentials_provider(provider);
    }
    if let Some(endpoint) = &storage.endpoint {
        builder = builder.endpoint_url(endpoint).force_path_style(true);
    }
    aws_sdk_s3::Client::from_conf(builder.build())
}

/// The ingestor a configuration describes, with an S3 client for the raw logs.
pub async fn ingestor(config: &Config, storage: StorageConfig) -> Ingestor {
    let client = s3_client(config.raw_logs_role_arn.as_deref(), &storage).await;
    Ingestor::new(
        config.table.clone(),
        config.rejects.clone(),
        storage,
        ObjectReader::s3(client).with_expected_owners(config.raw_logs_bucket_owners.clone()),
        config.concurrency,
    )
    .with_settle(config.settle)
    .with_truncated_ips(config.truncate_ips)
}
