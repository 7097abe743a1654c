//! [`Table`]: one open table and everything lakelog's writers do with it.

use deltalake::DeltaTable;

use crate::append::{
    AppendOutcome, SourceFiles, SourceWriter, commit_appends, commit_appends_at, commit_sources, is_committed,
};
use crate::commit::Retry;
use crate::error::LakeError;
use crate::progress::{self, Advance};
use crate::storage::StorageConfig;
use crate::table::{TableSpec, open_or_create, open_table};

/// An open table at its location: the version loaded, brought up to date by [`Table::refresh`],
/// and the writes of lakelog's pipelines (a writer per source, commits of sources or plain
/// appends). Cloning is cheap next to opening: the clone shares the loaded log.
#[derive(Debug, Clone)]
pub struct Table {
    uri: String,
    delta: DeltaTable,
}

impl Table {
    /// Opens the table at `uri`, creating it from `spec` when it is missing (see
    /// [`open_or_create`]).
    pub async fn open_or_create(uri: &str, spec: &TableSpec, storage: &StorageConfig) -> Result<Self, LakeError> {
        Ok(Self {
            uri: uri.to_owned(),
            delta: open_or_create(uri, spec, storage).await?,
        })
    }

    /// Opens the table at `uri`, which must exist (see [`open_table`]).
    pub async fn open(uri: &str, storage: &StorageConfig) -> Result<Self, LakeError> {
        Ok(Self {
            uri: uri.to_owned(),
            delta: open_table(uri, storage).await?,
        })
    }

    /// The table's location, as it was opened.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// Reads the commits written since the version loaded.
    pub async fn refresh(&mut self) -> Result<(), LakeError> {
        self.delta
            .update_incremental(None)
            .await
            .map_err(|e| LakeError::delta(&self.uri, e))
    }

    /// Whether `source` is recorded by a `txn` of the version loaded (see [`is_committed`]).
    pub async fn is_committed(&self, source: &str) -> Result<bool, LakeError> {
        is_committed(&self.uri, &self.delta, source).await
    }

    /// A writer of `source`'s rows into data files of this table.
    pub fn writer(&self, source: &str) -> Result<SourceWriter, LakeError> {
        SourceWriter::new(&self.uri, &self.delta, source)
    }

    /// Commits `sources` with a `txn` each (see [`commit_sources`]).
    pub async fn commit_sources(
        &mut self,
        sources: Vec<SourceFiles>,
        retry: &Retry,
    ) -> Result<AppendOutcome, LakeError> {
        commit_sources(&self.uri, &mut self.delta, sources, retry).await
    }

    /// Commits `sources` as plain appends (see [`commit_appends`]).
    pub async fn commit_appends(
        &mut self,
        sources: Vec<SourceFiles>,
        retry: &Retry,
    ) -> Result<AppendOutcome, LakeError> {
        commit_appends(&self.uri, &mut self.delta, sources, retry).await
    }

    /// How far `stream` is in the loaded version (see [`crate::progress`]); `None` when no commit
    /// recorded a position of it.
    pub async fn position(&self, stream: &str) -> Result<Option<String>, LakeError> {
        progress::position(&self.uri, &self.delta, stream).await
    }

    /// Commits `sources` as plain appends with the streams' new positions; see
    /// [`commit_appends_at`].
    pub async fn commit_appends_at(
        &mut self,
        sources: Vec<SourceFiles>,
        advances: &[Advance],
        retry: &Retry,
    ) -> Result<AppendOutcome, LakeError> {
        commit_appends_at(&self.uri, &mut self.delta, sources, advances, retry).await
    }

    /// The schema of the version loaded, as Arrow has it.
    pub fn schema(&self) -> Result<arrow::datatypes::SchemaRef, LakeError> {
        Ok(self
            .delta
            .snapshot()
            .map_err(|e| LakeError::delta(&self.uri, e))?
            .snapshot()
            .arrow_schema())
    }

    /// The partition columns of the version loaded.
    pub fn partition_columns(&self) -> Result<Vec<String>, LakeError> {
        Ok(self
            .delta
            .snapshot()
            .map_err(|e| LakeError::delta(&self.uri, e))?
            .metadata()
            .partition_columns()
            .to_vec())
    }

    /// The delta-rs table, for what this handle does not do (maintenance, queries).
    pub fn delta(&self) -> &DeltaTable {
        &self.delta
    }
}
