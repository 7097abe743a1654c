//! lakelog's Delta tables: storage options, open-or-create, and appends that write each source
//! exactly once.
//!
//! Every writer of lakelog (the access-log and game-event Lambdas, the CLI's ingest and demo) goes
//! through this crate, so the delivery guarantees of the design live in one place:
//!
//! * [`Table`] is the way in: an open table and what the pipelines do with it. It opens a table,
//!   creating it with the expected schema, partitioning and properties when it is missing (many
//!   writers may race to create it, and all of them end up with the one table that won); gives a
//!   [`SourceWriter`] per source (for example a raw log object), which streams the rows into data
//!   files of its own; and commits the files of many sources with one Delta `txn` action per
//!   source in a single commit ([`Table::commit_sources`]). A source whose `txn` is already in the
//!   table ([`Table::is_committed`]) is skipped, and a concurrent writer that commits the same
//!   source first makes the commit fail with [`LakeError::Conflict`] instead of writing it twice.
//!   [`Table::commit_appends`] commits files without a `txn`, for rows that carry their own
//!   identity, and [`Table::commit_appends_at`] with the positions of the streams they came from.
//!   Its maintenance ([`Table::compact`], [`Table::checkpoint`], [`Table::vacuum`]) is described in
//!   [`maintenance`].
//! * [`staging`] lets the writers of ordered streams stage their files instead of committing
//!   them ([`Table::stage`]), and one committer per table commits what every writer staged in one
//!   version ([`Table::commit_staged`]), so a table's commit rate does not bound its throughput.
//! * Commits rely on S3 conditional writes (put-if-absent): no lock table, no unsafe rename.
//!   A commit's outcome is read from the log, never guessed from an error: each commit carries an
//!   id of its own, and after any error the version the try wrote is read back. Commits are
//!   tried again with backoff and jitter until a deadline ([`Retry`]), and data files are deleted
//!   only when no version names them.
//! * [`erase`] removes the rows of given ids for good ([`Table::erase`], [`Table::purge`],
//!   [`Table::scan_folder`]), coexisting with the writers.
//! * [`retention`] drops the partitions older than the days a table keeps ([`Table::expire`]).
//! * [`maintenance`] keeps tables fed by many small appends healthy: compaction of closed
//!   partitions (with removal of duplicate rows by a key), checkpoints, expired log cleanup and
//!   VACUUM.

mod append;
mod checkpoint;
mod commit;
mod conform;
mod create;
pub mod erase;
mod error;
mod files;
mod folder;
pub mod iceberg_view;
pub mod maintenance;
mod packer;
mod partitions;
pub mod positions;
pub mod retention;
pub mod sources;
pub mod staging;
mod storage;
mod table;
mod txns;

pub use append::{AppendOutcome, SourceFiles, SourceWriter, now_micros};
pub use commit::{COMMIT_ID_KEY, Retry};
pub use create::{FileStats, TableSpec};
pub use erase::{Erasure, ErasureReport, FolderScan, Present, Purge, Scanned};
pub use error::LakeError;
pub use folder::Folder;
pub use packer::Packer;
pub use positions::Advance;
pub use staging::{Staged, StagedCommit};
pub use storage::{StorageConfig, table_url};
pub use table::Table;

// The table type the functions above open, for callers that read or inspect it.
pub use deltalake::DeltaTable;
