//! Parse Amazon S3 server access log lines into typed records and Arrow batches.
//!
//! The crate has no AWS and no async dependency: it works on bytes. [`Fields::split`] tokenizes one
//! line into borrowed slices (a word-at-a-time byte search: its spans are too short for `memchr`),
//! recovering quoted fields that contain unescaped quotes;
//! [`AccessLogRecord::parse`] types them (request time normalised to UTC, numbers, `-` as null, the
//! key decoded form-style); [`AccessLogBatchBuilder`] appends lines, checked by
//! [`ParsedLine::parse`], column by column into a `RecordBatch` with the `access_logs` schema that
//! lakelog's Delta tables use, their text going from the line into the columns.
//!
//! ```
//! use s3_access_log::{AccessLogBatchBuilder, AccessLogRecord, ParsedLine};
//!
//! let line = br#"owner bkt [06/Feb/2019:00:00:38 +0000] 192.0.2.3 me ID REST.GET.OBJECT a%20b "GET /bkt/a%20b HTTP/1.1" 200 - 11 11 7 6 "-" "curl/8""#;
//! let record = AccessLogRecord::parse(line)?;
//! assert_eq!(record.key.as_deref(), Some("a b"));
//! let mut batch = AccessLogBatchBuilder::new(0);
//! batch.append(&ParsedLine::parse(line)?, "s3://raw-logs/2019-02-06-00-00-38-EXAMPLE", 1);
//! assert_eq!(batch.finish()?.num_rows(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Every era of the format parses: 17, 18, 24, 25, 26 and 27 fields, and fields beyond the 27th
//! are kept verbatim. A line that cannot be parsed gives a [`ParseError`] naming the field; no input
//! makes the parser panic.

mod batch;
mod error;
mod field;
pub mod json;
mod lines;
mod record;
pub mod render;
mod time;
mod tokenizer;

pub use batch::{
    ACCESS_LOGS_UNIQUE_COLUMNS, AccessLogBatchBuilder, BATCH_ROWS, PARTITION_COLUMN, REJECTS_UNIQUE_COLUMNS,
    RejectsBatchBuilder, UTC, access_logs_schema, rejects_schema, truncate_ip,
};
pub use error::ParseError;
pub use field::Field;
pub use lines::{Lines, LogLine, is_blank, parse_lines};
pub use record::{AccessLogRecord, ParsedLine, decode_key};
pub use time::{date_of, parse_request_time};
pub use tokenizer::{Fields, MIN_FIELDS, NAMED_FIELDS};
