//! Errors of the lake crate.

use deltalake::DeltaTableError;

/// What can go wrong with a lakelog table.
#[derive(Debug, thiserror::Error)]
pub enum LakeError {
    /// The table location is neither a local path nor a URL the lake can write to.
    #[error("invalid table location {uri:?}: {reason}")]
    InvalidLocation {
        /// The location as given.
        uri: String,
        /// Why it was refused.
        reason: String,
    },
    /// Delta Lake reported an error while working on a table.
    #[error("table {uri}: {source}")]
    Delta {
        /// The table.
        uri: String,
        /// What delta-rs said.
        #[source]
        source: Box<DeltaTableError>,
    },
    /// The table exists but its schema is not the one this writer produces.
    #[error("table {uri}: existing schema does not match: {detail}")]
    SchemaMismatch {
        /// The table.
        uri: String,
        /// The first difference found.
        detail: String,
    },
    /// The table lacks nullable columns this release writes, and the writer was not asked to
    /// add them ([`crate::TableSpec::with_schema_changes`]).
    #[error(
        "table {uri} lacks the columns {columns:?} that this release writes; adding them changes the schema of a \
         table other writers use (docs/tables.md, \"Schema changes\"): pass --evolve-schema to add them"
    )]
    SchemaBehind {
        /// The table.
        uri: String,
        /// The columns (or struct columns with new fields) it lacks.
        columns: Vec<String>,
    },
    /// A concurrent commit conflicts with this one (it wrote one of the same sources, or changed
    /// the table's metadata); nothing of this commit was written. Retrying against the new
    /// version skips the sources that are now in the table.
    #[error("table {uri}: conflicting concurrent commit: {reason}")]
    Conflict {
        /// The table.
        uri: String,
        /// Delta's description of the conflict.
        reason: String,
    },
    /// A commit was tried until its deadline without landing: every try was refused outright (its
    /// version was taken, or nothing was written), the log was read back after each, and no version
    /// carries it, so its data files were deleted again. Retrying later (a redelivery) is safe.
    #[error("table {uri}: not committed after {attempts} tries before the deadline; last error: {last_error}")]
    CommitTimedOut {
        /// The table.
        uri: String,
        /// Tries made.
        attempts: u32,
        /// What the last try met.
        last_error: String,
    },
    /// A commit was tried until its deadline, and a try's write met an answer that does not say
    /// whether the store will carry it out (a timeout, a dropped connection, a 5xx): the log did
    /// not have it when read back, but the write may still land later. Its data files are kept
    /// (files no version names are invisible to readers, and VACUUM removes them); a retry reads
    /// the log again and skips what landed.
    #[error(
        "table {uri}: not committed after {attempts} tries before the deadline, but a try's write may still land; last error: {last_error}"
    )]
    CommitMayLand {
        /// The table.
        uri: String,
        /// Tries made.
        attempts: u32,
        /// What the last try met.
        last_error: String,
    },
    /// A commit failed and the log could not be read back to tell whether it landed. Its data
    /// files are kept (no reader sees files that no version names; VACUUM removes them); a retry
    /// reads the log again and skips what landed.
    #[error(
        "table {uri}: outcome of a commit unknown after {attempts} tries (commit: {commit_error}; reading the log back: {source})"
    )]
    CommitUnknown {
        /// The table.
        uri: String,
        /// Tries made.
        attempts: u32,
        /// What the commit met.
        commit_error: String,
        /// Why the log could not be read back.
        #[source]
        source: Box<DeltaTableError>,
    },
    /// A stream position that is not a decimal number of at most
    /// [`MAX_POSITION_DIGITS`](crate::positions::MAX_POSITION_DIGITS) digits, or a recorded one
    /// whose `txn` actions do not make one.
    #[error("table {uri}: stream {stream}: {position:?} is not a position (a decimal number of at most 129 digits)")]
    InvalidPosition {
        /// The table.
        uri: String,
        /// The stream.
        stream: String,
        /// The position given, or what was found.
        position: String,
    },
    /// The streams' positions cannot be told: a stream's `txn` has expired, and commits the
    /// position ledger does not cover are gone from the log (see [`crate::positions`]). Nothing is
    /// committed for such a stream until an operator restores its position.
    #[error("table {uri}: stream positions cannot be told: {reason}")]
    PositionsUnknown {
        /// The table.
        uri: String,
        /// What is missing.
        reason: String,
    },
    /// A data file of the table could not be read.
    #[error("table {uri}: data file {file}: {reason}")]
    ReadFile {
        /// The table.
        uri: String,
        /// The file, relative to the table.
        file: String,
        /// What went wrong.
        reason: String,
    },
    /// An object of a folder beside the tables ([`Folder`](crate::Folder)) could not be listed,
    /// read or written.
    #[error("folder {uri}: {action} {object}: {reason}")]
    Object {
        /// The folder.
        uri: String,
        /// What was done: `reading`, `writing`, `deleting` or `listing`.
        action: &'static str,
        /// The object, relative to the folder (empty when listing).
        object: String,
        /// What went wrong.
        reason: String,
    },
    /// Creating a missing table failed, and not because another writer created it first.
    #[error("table {uri}: could not be created: {source}")]
    Create {
        /// The table.
        uri: String,
        /// What delta-rs said.
        #[source]
        source: Box<DeltaTableError>,
    },
    /// The table's Iceberg view (see [`crate::iceberg_view`]) could not be read or brought up to date.
    /// The Delta table is unaffected; the next commit or maintenance pass tries again.
    #[error("table {uri}: Iceberg view: {reason}")]
    Iceberg {
        /// The table.
        uri: String,
        /// What went wrong.
        reason: String,
    },
}

impl LakeError {
    /// Whether the error says that there is no table at the location (no `_delta_log`).
    pub fn is_not_a_table(&self) -> bool {
        matches!(self, LakeError::Delta { source, .. } if matches!(**source, DeltaTableError::NotATable(_)))
    }

    pub(crate) fn delta(uri: impl Into<String>, source: DeltaTableError) -> Self {
        LakeError::Delta {
            uri: uri.into(),
            source: Box::new(source),
        }
    }
}

/// What can go wrong while maintaining a table.
#[derive(Debug, thiserror::Error)]
pub enum MaintenanceError {
    /// Opening or reading the table failed.
    #[error(transparent)]
    Lake(#[from] LakeError),
    /// delta-rs failed in a maintenance operation.
    #[error("table {uri}: {operation}: {source}")]
    Delta {
        /// The table.
        uri: String,
        /// The operation (compaction, checkpoint, vacuum, ...).
        operation: &'static str,
        /// What delta-rs said.
        #[source]
        source: Box<deltalake::DeltaTableError>,
    },
    /// A data file of the table could not be read.
    #[error("table {uri}: data file {file}: {reason}")]
    ReadFile {
        /// The table.
        uri: String,
        /// The file, relative to the table.
        file: String,
        /// What went wrong.
        reason: String,
    },
    /// The deduplication key cannot be used on this table.
    #[error("table {uri}: deduplication key {key:?}: {reason}")]
    DedupKey {
        /// The table.
        uri: String,
        /// The key column.
        key: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// The table uses a Delta feature that compaction does not rewrite correctly.
    #[error("table {uri}: cannot compact: {reason}")]
    Unsupported {
        /// The table.
        uri: String,
        /// The feature.
        reason: String,
    },
    /// The files written by a compaction do not hold the rows read; nothing was committed.
    #[error("table {uri}: partition {partition}: rewritten files hold {written} rows, expected {expected}")]
    RowCount {
        /// The table.
        uri: String,
        /// The partition.
        partition: String,
        /// Rows the new files' statistics report.
        written: u64,
        /// Rows read less duplicates dropped.
        expected: u64,
    },
    /// A VACUUM retention below [`MIN_VACUUM_RETENTION`](crate::maintenance::MIN_VACUUM_RETENTION)
    /// was asked for without `force`.
    #[error(
        "table {uri}: VACUUM retention of {hours} hours is below the minimum of {minimum_hours} hours; \
         files removed more recently may still be read (time travel, running queries): force it only \
         if no reader needs them"
    )]
    RetentionTooShort {
        /// The table.
        uri: String,
        /// The retention asked for, in hours.
        hours: i64,
        /// The least retention taken without `force`, in hours.
        minimum_hours: i64,
    },
    /// A location listing tables could not be listed.
    #[error("cannot list tables under {prefix}: {reason}")]
    Discover {
        /// The location.
        prefix: String,
        /// What went wrong.
        reason: String,
    },
}

impl MaintenanceError {
    pub(crate) fn delta(uri: &str, operation: &'static str, source: deltalake::DeltaTableError) -> Self {
        MaintenanceError::Delta {
            uri: uri.to_owned(),
            operation,
            source: Box::new(source),
        }
    }
}
