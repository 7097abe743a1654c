//! A folder of plain objects beside the tables (`s3://bucket/prefix` or a local directory), on
//! the same storage settings as the tables: where the game sink parks records it could not
//! commit in time, for `lakelog replay` to bring in later.

use deltalake::logstore::ObjectStoreRef;
use deltalake::{DeltaTableBuilder, Path};
use futures::TryStreamExt as _;
use object_store::{ObjectStoreExt as _, PutPayload};

use crate::error::LakeError;
use crate::storage::{StorageConfig, table_url};

/// A folder of objects.
#[derive(Debug, Clone)]
pub struct Folder {
    uri: String,
    store: ObjectStoreRef,
}

impl Folder {
    /// The folder at `uri` (it need not exist yet: writing an object makes it).
    pub fn open(uri: &str, storage: &StorageConfig) -> Result<Self, LakeError> {
        let url = table_url(uri)?;
        let options = storage.options_for(&url);
        let log_store = DeltaTableBuilder::from_url(url)
            .map_err(|e| LakeError::delta(uri, e))?
            .with_storage_options(options)
            .build_storage()
            .map_err(|e| LakeError::delta(uri, e))?;
        Ok(Self {
            uri: uri.trim_end_matches('/').to_owned(),
            store: log_store.object_store(None),
        })
    }

    /// The folder's location.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The location of the object `name` in the folder.
    pub fn object_uri(&self, name: &str) -> String {
        format!("{}/{name}", self.uri)
    }

    fn error(&self, action: &'static str, name: &str, e: impl std::fmt::Display) -> LakeError {
        LakeError::Object {
            uri: self.uri.clone(),
            action,
            object: name.to_owned(),
            reason: e.to_string(),
        }
    }

    /// Writes `bytes` as the object `name` (a path relative to the folder), replacing it.
    pub async fn put(&self, name: &str, bytes: Vec<u8>) -> Result<(), LakeError> {
        self.store
            .put(&Path::from(name), PutPayload::from(bytes))
            .await
            .map(|_| ())
            .map_err(|e| self.error("writing", name, e))
    }

    /// The object `name`'s bytes.
    pub async fn get(&self, name: &str) -> Result<Vec<u8>, LakeError> {
        let object = self
            .store
            .get(&Path::from(name))
            .await
            .map_err(|e| self.error("reading", name, e))?;
        let bytes = object.bytes().await.map_err(|e| self.error("reading", name, e))?;
        Ok(bytes.to_vec())
    }

    /// Deletes the object `name`; one that is not there is no error.
    pub async fn delete(&self, name: &str) -> Result<(), LakeError> {
        match self.store.delete(&Path::from(name)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.error("deleting", name, e)),
        }
    }

    /// The names of every object in the folder and below it, in order.
    pub async fn list(&self) -> Result<Vec<String>, LakeError> {
        let mut names: Vec<String> = self
            .store
            .list(None)
            .map_ok(|meta| meta.location.to_string())
            .try_collect()
            .await
            .map_err(|e| self.error("listing", "", e))?;
        names.sort();
        Ok(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn objects_are_written_listed_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().join("parked").to_str().unwrap().to_owned();
        let folder = Folder::open(&uri, &StorageConfig::default()).unwrap();
        assert!(folder.list().await.unwrap().is_empty());
        folder.put("b/2.json", b"two".to_vec()).await.unwrap();
        folder.put("a/1.json", b"one".to_vec()).await.unwrap();
        assert_eq!(folder.list().await.unwrap(), ["a/1.json", "b/2.json"]);
        assert_eq!(folder.get("b/2.json").await.unwrap(), b"two");
        folder.delete("b/2.json").await.unwrap();
        folder.delete("b/2.json").await.unwrap();
        assert_eq!(folder.list().await.unwrap(), ["a/1.json"]);
        assert_eq!(folder.object_uri("a/1.json"), format!("{uri}/a/1.json"));
        let err = folder.get("missing").await.unwrap_err().to_string();
        assert!(err.contains("missing"), "{err}");
    }
}
