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
}

impl LakeError {
    pub(crate) fn delta(uri: impl Into<String>, source: DeltaTableError) -> Self {
        LakeError::Delta {
            uri: uri.into(),
            source: Box::new(source),
        }
    }
}
