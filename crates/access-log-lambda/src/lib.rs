//! The `access-log-lambda` function: SQS messages carrying S3 notifications of new raw log
//! objects in, the messages to retry out, and the invocation's metrics ([`metrics`]) on standard
//! output. [`handler::handle`] adapts the Lambda event to
//! [`access_log_ingest::Ingestor`]; everything else lives in that library, which `lakelog ingest`
//! shares.

pub mod handler;
pub mod metrics;
