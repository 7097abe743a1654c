//! A local file store that lists `_delta_log` as S3 does.
//!
//! Every commit lists the log from the version it knows (`list_with_offset`). S3 answers that
//! from the offset on (`start-after`), so the cost does not grow with the log; object_store's
//! local file store walks and stats the whole directory on every listing, so on a local disk a
//! day of commits measures the directory, not the commit. [`install`] makes `file://` tables of
//! this process use [`SortedLog`]: the local store, with each `_delta_log` directory's entries
//! kept in an ordered index (read once, then kept up to date by this store's own writes) that
//! answers listings from the offset on. Only a single process writing the table may use it.

use std::collections::{BTreeMap, HashSet};
use std::ops::Bound;
use std::sync::{Arc, Mutex};

use deltalake::logstore::object_store_factories;
use deltalake::logstore::{ObjectStoreFactory, ObjectStoreRef, StorageConfig};
use deltalake::{DeltaResult, Path};
use futures::stream::{BoxStream, StreamExt as _, TryStreamExt as _};
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, ObjectStoreExt as _,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result, UploadPart,
};
use url::Url;

/// Makes this process's `file://` tables list their logs as S3 does.
pub fn install() -> Result<(), url::ParseError> {
    object_store_factories().insert(Url::parse("file://")?, Arc::new(Factory));
    Ok(())
}

#[derive(Debug)]
struct Factory;

impl ObjectStoreFactory for Factory {
    fn parse_url_opts(&self, url: &Url, config: &StorageConfig) -> DeltaResult<(ObjectStoreRef, Path)> {
        let (store, path) = object_store::parse_url_opts(url, &config.raw)?;
        Ok((Arc::new(SortedLog::new(Arc::from(store))), path))
    }
}

/// The `_delta_log` directory `location` is in, if it is in one.
fn log_dir(location: &Path) -> Option<Path> {
    let text = location.as_ref();
    let end = text.find("_delta_log/")? + "_delta_log".len();
    Some(Path::from(&text[..end]))
}

/// The log entries a [`SortedLog`] knows.
#[derive(Debug, Default)]
struct Index {
    /// The entries of the `_delta_log` directories read so far, by path.
    entries: BTreeMap<Path, ObjectMeta>,
    /// The directories read into `entries`.
    read: HashSet<Path>,
}

/// A store whose listings of `_delta_log` directories start at their offset.
#[derive(Debug)]
struct SortedLog(Arc<Shared>);

/// The local store and the log entries known.
#[derive(Debug)]
struct Shared {
    inner: Arc<dyn ObjectStore>,
    index: Mutex<Index>,
}

impl std::fmt::Display for SortedLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SortedLog({})", self.0.inner)
    }
}

impl SortedLog {
    fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Self(Arc::new(Shared {
            inner,
            index: Mutex::default(),
        }))
    }
}

impl Shared {
    /// Records what is at `location` now, if it is a log entry of a directory already read.
    async fn written(&self, location: &Path) -> Result<()> {
        let Some(dir) = log_dir(location) else {
            return Ok(());
        };
        if !self.index.lock().map_err(poisoned)?.read.contains(&dir) {
            return Ok(());
        }
        let meta = self.inner.head(location).await?;
        self.index
            .lock()
            .map_err(poisoned)?
            .entries
            .insert(location.clone(), meta);
        Ok(())
    }
}

/// An upload that enters its object in the index when it completes (checkpoints are uploaded
/// in parts).
#[derive(Debug)]
struct Upload {
    inner: Box<dyn MultipartUpload>,
    shared: Arc<Shared>,
    location: Path,
}

#[async_trait::async_trait]
impl MultipartUpload for Upload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        self.inner.put_part(data)
    }

    async fn complete(&mut self) -> Result<PutResult> {
        let result = self.inner.complete().await?;
        self.shared.written(&self.location).await?;
        Ok(result)
    }

    async fn abort(&mut self) -> Result<()> {
        self.inner.abort().await
    }
}

fn poisoned<T>(_: std::sync::PoisonError<T>) -> object_store::Error {
    object_store::Error::Generic {
        store: "SortedLog",
        source: "a lock was poisoned".into(),
    }
}

#[async_trait::async_trait]
impl ObjectStore for SortedLog {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
        let result = self.0.inner.put_opts(location, payload, opts).await?;
        self.0.written(location).await?;
        Ok(result)
    }

    async fn put_multipart_opts(&self, location: &Path, opts: PutMultipartOptions) -> Result<Box<dyn MultipartUpload>> {
        let inner = self.0.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(Upload {
            inner,
            shared: Arc::clone(&self.0),
            location: location.clone(),
        }))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.0.inner.get_opts(location, options).await
    }

    fn delete_stream(&self, locations: BoxStream<'static, Result<Path>>) -> BoxStream<'static, Result<Path>> {
        // Deleted log entries stay in the index until they are found gone: the benchmark deletes
        // data files only (uncommitted ones), never log entries.
        self.0.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.0.inner.list(prefix)
    }

    fn list_with_offset(&self, prefix: Option<&Path>, offset: &Path) -> BoxStream<'static, Result<ObjectMeta>> {
        let Some(dir) = prefix.filter(|p| p.as_ref().ends_with("_delta_log")).cloned() else {
            return self.0.inner.list_with_offset(prefix, offset);
        };
        let (shared, offset) = (Arc::clone(&self.0), offset.clone());
        futures::stream::once(async move {
            // The first listing of a directory reads it whole; later ones only the index.
            if !shared.index.lock().map_err(poisoned)?.read.contains(&dir) {
                let all: Vec<ObjectMeta> = shared.inner.list(Some(&dir)).try_collect().await?;
                let mut index = shared.index.lock().map_err(poisoned)?;
                index.entries.extend(all.into_iter().map(|m| (m.location.clone(), m)));
                index.read.insert(dir.clone());
            }
            let in_dir = format!("{dir}/");
            let index = shared.index.lock().map_err(poisoned)?;
            Ok::<_, object_store::Error>(
                index
                    .entries
                    .range((Bound::Excluded(offset), Bound::Unbounded))
                    .skip_while(|(path, _)| !path.as_ref().starts_with(&in_dir))
                    .take_while(|(path, _)| path.as_ref().starts_with(&in_dir))
                    .map(|(_, meta)| Ok(meta.clone()))
                    .collect::<Vec<_>>(),
            )
        })
        .map_ok(futures::stream::iter)
        .try_flatten()
        .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.0.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.0.inner.copy_opts(from, to, options).await?;
        self.0.written(to).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.0.inner.rename_opts(from, to, options).await?;
        self.0.index.lock().map_err(poisoned)?.entries.remove(from);
        self.0.written(to).await
    }
}
