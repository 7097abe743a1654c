//! [`ReportError`]: why a report could not be made.

use std::path::PathBuf;

/// Why a report could not be made. Every message names the table, query, argument or file.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// An S3 Inventory could not be read: its manifest, a data file, or a row of one.
    #[error("S3 Inventory {location}: {reason}")]
    Inventory {
        /// The manifest as given, and the data file when it is one of them.
        location: String,
        /// What is wrong, and where (line and field, or column).
        reason: String,
    },
    /// A table could not be opened.
    #[error("cannot open table {uri}: {source}")]
    Open {
        /// The table's URI as given.
        uri: String,
        /// What went wrong.
        #[source]
        source: lake::LakeError,
    },
    /// A table could not be registered in the SQL session.
    #[error("cannot read table {uri}: {message}")]
    Register {
        /// The table's URI as given.
        uri: String,
        /// DataFusion's or delta-rs' error.
        message: String,
    },
    /// Tables given as one have different columns.
    #[error("table {uri} cannot be read together with {first}: {detail}")]
    SchemaMismatch {
        /// The table that differs.
        uri: String,
        /// The first table given.
        first: String,
        /// Which column differs, and how.
        detail: String,
    },
    /// A table lacks a column the report needs.
    #[error("table {name} has no column {column} (is it a {expected} table?)")]
    MissingColumn {
        /// The registered name of the table(s).
        name: String,
        /// The missing column.
        column: String,
        /// The kind of table the report reads.
        expected: String,
    },
    /// A query failed.
    #[error("query {query:?} failed: {source}")]
    Query {
        /// Which query of the report.
        query: String,
        /// DataFusion's error.
        #[source]
        source: deltalake::datafusion::error::DataFusionError,
    },
    /// A result column is missing or cannot be read as the type the report expects.
    #[error("query {query:?}, column {column}: {detail}")]
    Column {
        /// Which query of the report.
        query: String,
        /// The column.
        column: String,
        /// What is wrong with it.
        detail: String,
    },
    /// A command-line value is invalid.
    #[error("{argument} {value:?}: {reason}")]
    InvalidArgument {
        /// The argument, e.g. `--from`.
        argument: String,
        /// The value given.
        value: String,
        /// Why it is refused and what is expected.
        reason: String,
    },
    /// A file given to the report is invalid.
    #[error("{path}: {detail}")]
    InvalidFile {
        /// The file.
        path: String,
        /// What is wrong, and where in the file.
        detail: String,
    },
    /// A chart could not be drawn.
    #[error("chart {chart:?}: {message}")]
    Chart {
        /// The chart's title.
        chart: String,
        /// The drawing error.
        message: String,
    },
    /// A file of the report could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

impl ReportError {
    /// A result column of the query named `query` that is missing or cannot be read.
    pub fn column(query: &str, column: &str, detail: impl Into<String>) -> Self {
        Self::Column {
            query: query.to_owned(),
            column: column.to_owned(),
            detail: detail.into(),
        }
    }

    /// An invalid command-line value.
    pub fn invalid_argument(argument: &str, value: &str, reason: impl Into<String>) -> Self {
        Self::InvalidArgument {
            argument: argument.to_owned(),
            value: value.to_owned(),
            reason: reason.into(),
        }
    }
}
