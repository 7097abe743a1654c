//! Where records go: the [`RecordSink`] the handler writes through, and its Kinesis implementation.
//!
//! A sink takes up to [`MAX_RECORDS_PER_CALL`] entries at once and answers for each one, in order,
//! whether it was written, like Kinesis' `PutRecords`. [`crate::LocalStream`] is the in-memory sink
//! of `lakelog serve` and the tests; `testing` (feature `testing`) has sinks that inject faults.

use std::fmt;
use std::future::Future;

use aws_sdk_kinesis::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_kinesis::primitives::Blob;
use aws_sdk_kinesis::types::PutRecordsRequestEntry;
use bytes::Bytes;

/// The most records of one `PutRecords` call.
pub const MAX_RECORDS_PER_CALL: usize = 500;

/// The most bytes (data and partition keys) of one `PutRecords` call.
pub const MAX_BYTES_PER_CALL: usize = 5 << 20;

/// The longest partition key Kinesis accepts, in characters.
pub const MAX_PARTITION_KEY_CHARS: usize = 256;

/// The error code of a record refused for lack of throughput.
pub const THROUGHPUT_EXCEEDED: &str = "ProvisionedThroughputExceededException";

/// One record to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutEntry {
    /// The record's data.
    pub data: Bytes,
    /// The key that picks the shard, unless `explicit_hash_key` is given.
    pub partition_key: String,
    /// The hash key that picks the shard in place of the partition key's MD5: the game's lane
    /// ([`crate::Lane`]).
    pub explicit_hash_key: Option<u128>,
}

impl PutEntry {
    /// What the entry counts against Kinesis' size limits: its data and partition key.
    pub fn size(&self) -> usize {
        self.data.len() + self.partition_key.len()
    }
}

/// Where a written record landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The shard, e.g. `shardId-000000000000`.
    pub shard_id: String,
    /// The record's sequence number in its shard.
    pub sequence_number: String,
}

/// Why one record was not written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryFailure {
    /// Kinesis' error code, e.g. `ProvisionedThroughputExceededException`.
    pub code: String,
    /// Its message.
    pub message: String,
}

impl fmt::Display for EntryFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

/// The answer for one entry of a call.
pub type EntryResult = Result<Written, EntryFailure>;

/// A call that failed as a whole: none of its entries may be taken as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct SinkError {
    /// The error code (Kinesis' or the transport's).
    pub code: String,
    /// What happened.
    pub message: String,
    /// Whether trying again may succeed (throttling, time-outs, transport errors); a missing
    /// stream or a denied permission is not.
    pub retryable: bool,
}

/// A destination for records with Kinesis `PutRecords` semantics.
pub trait RecordSink: Send + Sync {
    /// Writes `entries` (at most `MAX_RECORDS_PER_CALL` and `MAX_BYTES_PER_CALL`, Kinesis' limits) and answers
    /// for each, in the same order. An `Err` means the call failed as a whole; its entries may or
    /// may not have been written, and none of them may be reported as written.
    fn put_records(&self, entries: &[PutEntry]) -> impl Future<Output = Result<Vec<EntryResult>, SinkError>> + Send;
}

impl<S: RecordSink> RecordSink for &S {
    fn put_records(&self, entries: &[PutEntry]) -> impl Future<Output = Result<Vec<EntryResult>, SinkError>> + Send {
        (**self).put_records(entries)
    }
}

/// Which stream a [`KinesisSink`] writes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamRef {
    /// By name, in the client's account and region.
    Name(String),
    /// By ARN.
    Arn(String),
}

impl StreamRef {
    /// A stream ARN (`arn:...`) or name.
    pub fn parse(text: &str) -> Self {
        let text = text.trim();
        if text.starts_with("arn:") {
            Self::Arn(text.to_owned())
        } else {
            Self::Name(text.to_owned())
        }
    }
}

impl fmt::Display for StreamRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Name(name) => f.write_str(name),
            Self::Arn(arn) => f.write_str(arn),
        }
    }
}

/// A Kinesis data stream, through aws-sdk-kinesis.
#[derive(Debug, Clone)]
pub struct KinesisSink {
    client: aws_sdk_kinesis::Client,
    stream: StreamRef,
}

impl KinesisSink {
    /// Writes to `stream` with `client`. The handler retries failed entries itself, within its
    /// time budget, so the client is best built by [`kinesis_client`] (no SDK retries).
    pub fn new(client: aws_sdk_kinesis::Client, stream: StreamRef) -> Self {
        Self { client, stream }
    }

    /// The stream.
    pub fn stream(&self) -> &StreamRef {
        &self.stream
    }
}

/// A Kinesis client for `config` whose calls are tried once: retries (of the failed entries only)
/// and their time budget belong to the handler.
pub fn kinesis_client(config: &aws_config::SdkConfig) -> aws_sdk_kinesis::Client {
    let config = aws_sdk_kinesis::config::Builder::from(config)
        .retry_config(aws_config::retry::RetryConfig::disabled())
        .build();
    aws_sdk_kinesis::Client::from_conf(config)
}

/// Error codes of Kinesis after which the same call can succeed later.
fn retryable_code(code: &str) -> bool {
    matches!(
        code,
        THROUGHPUT_EXCEEDED
            | "LimitExceededException"
            | "KMSThrottlingException"
            | "InternalFailure"
            | "InternalFailureException"
            | "ServiceUnavailable"
            | "ServiceUnavailableException"
            | "Throttling"
            | "ThrottlingException"
            | "RequestTimeout"
            | "RequestTimeoutException"
    )
}

fn sdk_error<E, R>(err: SdkError<E, R>) -> SinkError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: fmt::Debug,
{
    match &err {
        SdkError::ServiceError(service) => {
            let code = service.err().code().unwrap_or("Unknown").to_owned();
            let message = service.err().message().unwrap_or("no message").to_owned();
            SinkError {
                retryable: retryable_code(&code),
                code,
                message,
            }
        }
        SdkError::ConstructionFailure(_) => SinkError {
            code: "ConstructionFailure".into(),
            message: aws_smithy_types::error::display::DisplayErrorContext(&err).to_string(),
            retryable: false,
        },
        // Time-outs, connection and transport errors, unreadable responses: the records may or may
        // not have been written, and another call may succeed.
        _ => SinkError {
            code: "TransportError".into(),
            message: aws_smithy_types::error::display::DisplayErrorContext(&err).to_string(),
            retryable: true,
        },
    }
}

impl RecordSink for KinesisSink {
    async fn put_records(&self, entries: &[PutEntry]) -> Result<Vec<EntryResult>, SinkError> {
        let mut request = self.client.put_records();
        request = match &self.stream {
            StreamRef::Name(name) => request.stream_name(name),
            StreamRef::Arn(arn) => request.stream_arn(arn),
        };
        for entry in entries {
            let record = PutRecordsRequestEntry::builder()
                .data(Blob::new(entry.data.to_vec()))
                .partition_key(&entry.partition_key)
                .set_explicit_hash_key(entry.explicit_hash_key.map(|k| k.to_string()))
                .build()
                .map_err(|e| SinkError {
                    code: "ConstructionFailure".into(),
                    message: e.to_string(),
                    retryable: false,
                })?;
            request = request.records(record);
        }
        let output = request.send().await.map_err(sdk_error)?;
        let records = output.records();
        if records.len() != entries.len() {
            return Err(SinkError {
                code: "MismatchedResponse".into(),
                message: format!("PutRecords answered for {} of {} records", records.len(), entries.len()),
                retryable: true,
            });
        }
        Ok(records
            .iter()
            .map(|record| match (record.error_code(), record.sequence_number()) {
                (None, Some(sequence_number)) => Ok(Written {
                    shard_id: record.shard_id().unwrap_or_default().to_owned(),
                    sequence_number: sequence_number.to_owned(),
                }),
                (Some(code), _) => Err(EntryFailure {
                    code: code.to_owned(),
                    message: record.error_message().unwrap_or_default().to_owned(),
                }),
                (None, None) => Err(EntryFailure {
                    code: "NoSequenceNumber".into(),
                    message: "PutRecords reported neither an error nor a sequence number".into(),
                }),
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_references() {
        assert_eq!(StreamRef::parse(" game-events "), StreamRef::Name("game-events".into()));
        let arn = "arn:aws:kinesis:us-east-1:123456789012:stream/game-events";
        assert_eq!(StreamRef::parse(arn), StreamRef::Arn(arn.into()));
        assert_eq!(StreamRef::parse(arn).to_string(), arn);
    }

    #[test]
    fn which_codes_are_retried() {
        for code in [THROUGHPUT_EXCEEDED, "KMSThrottlingException", "InternalFailure"] {
            assert!(retryable_code(code), "{code}");
        }
        for code in [
            "ResourceNotFoundException",
            "AccessDeniedException",
            "KMSDisabledException",
            "ValidationException",
        ] {
            assert!(!retryable_code(code), "{code}");
        }
    }

    #[test]
    fn entry_sizes_count_data_and_key() {
        let entry = PutEntry {
            data: Bytes::from_static(b"12345"),
            partition_key: "abc".into(),
            explicit_hash_key: Some(1 << 127),
        };
        assert_eq!(entry.size(), 8);
    }
}
