//! Reports over lakelog's Delta tables: SQL through DataFusion, printed as a text table or JSON,
//! and written as an HTML page with SVG charts.
//!
//! The pieces every report shares:
//!
//! * [`ReportSession`] opens one or more Delta tables (local paths or `s3://`) and registers them
//!   under one name in a DataFusion session; several tables of the same schema become one
//!   `UNION ALL` view. [`ReportSession::query`] runs SQL and gives [`Rows`] with typed columns.
//! * [`TimeRange`] is `--from`/`--to` (RFC 3339 or a date), turned into a SQL filter on a
//!   table's partition column and its timestamp, so only the partitions in range are read.
//! * [`TextTable`] prints aligned plain-text tables; [`Format`] picks text or JSON on stdout.
//! * [`chart`] draws bar charts, line charts and histograms as [`Svg`]; [`HtmlPage`] lays out an
//!   `index.html` with the charts inline and tables, escaping all text; [`ReportDir`] writes the
//!   files of a report.
//!
//! ```no_run
//! use lakelog_reports::{ReportSession, TextTable, TimeRange};
//!
//! # async fn example() -> Result<(), lakelog_reports::ReportError> {
//! let session = ReportSession::new();
//! let tables = ["/tmp/lake/access_logs/a".to_owned(), "/tmp/lake/access_logs/b".to_owned()];
//! session.register_tables("access_logs", &tables, &lake::StorageConfig::from_env()).await?;
//! let range = TimeRange::parse(Some("2024-06-01"), None)?;
//! let rows = session
//!     .query(
//!         "requests per day",
//!         &format!(
//!             "SELECT request_date, count(*) AS n FROM access_logs WHERE {} GROUP BY 1 ORDER BY 1",
//!             range.filter("request_date", "request_time")
//!         ),
//!     )
//!     .await?;
//! let mut table = TextTable::new(["day", "requests"]);
//! for (day, n) in rows.dates("request_date")?.into_iter().zip(rows.i64s("n")?) {
//!     table.push([day.map(|d| d.to_string()).unwrap_or_default(), n.unwrap_or(0).to_string()]);
//! }
//! print!("{}", table.render());
//! # Ok(())
//! # }
//! ```
//!
//! Each report lives in a module of its own with a plain async function that builds the report's
//! data from a session, and methods that render it as text, JSON and an HTML page; the CLI and
//! the demo both call them in-process.

pub mod access;
mod arrival;
pub mod chart;
pub mod figures;
pub mod game;
mod html;
mod range;
mod session;
mod text;

use std::path::PathBuf;

pub use chart::Svg;
pub use html::{HtmlPage, ReportDir, escape_html};
pub use range::TimeRange;
pub use session::{ReportSession, Rows, quote_ident, quote_literal};
pub use text::TextTable;

/// How a report is printed on standard output.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Format {
    /// Aligned plain-text tables.
    #[default]
    Table,
    /// One JSON document.
    Json,
}

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
