//! Reports over lakelog's Delta tables: SQL through DataFusion, printed as a text table or JSON,
//! and written as an HTML page with SVG charts.
//!
//! Two reports, each a module with a plain async function that builds the report's data and
//! methods that render it as text, JSON and an HTML page; the CLI, the demo and `lakelog serve`
//! call them in-process:
//!
//! * [`access`]: `lakelog report access`, over `access_logs` tables ([`access::run`]).
//! * [`game`]: `lakelog report game`, over a `game_events` table ([`game::game_report`]).
//!
//! What both share:
//!
//! * [`ReportSession`] opens one or more Delta tables (local paths or `s3://`) and registers them
//!   under one name in a DataFusion session; several tables of the same schema become one
//!   `UNION ALL` view.
//! * [`TimeRange`] is `--from`/`--to` (RFC 3339 or a date), turned into a SQL filter on a
//!   table's partition column and its timestamp, so only the partitions in range are read.
//! * [`Format`] picks text or JSON on stdout; [`ReportDir`] writes the files of a report's page.
//! * [`ReportError`] says why a report could not be made, naming the table, query, argument or
//!   file.
//!
//! ```no_run
//! use lakelog_reports::{ReportSession, TimeRange, game};
//!
//! # async fn example() -> Result<(), lakelog_reports::ReportError> {
//! let session = ReportSession::new();
//! let tables = ["/tmp/lake/game_events".to_owned()];
//! session.register_tables("game_events", &tables, &lake::StorageConfig::from_env()).await?;
//! let report = game::game_report(&session, "game_events", &TimeRange::parse(Some("2024-06-01"), None)?).await?;
//! print!("{}", report.render_text());
//! # Ok(())
//! # }
//! ```
#![warn(unreachable_pub)]

pub mod access;
mod chart;
mod error;
pub mod figures;
pub mod game;
mod html;
mod range;
mod session;
mod text;

pub use error::ReportError;
pub use html::ReportDir;
pub use range::TimeRange;
pub use session::{ReportSession, quote_literal};
pub use text::Format;
