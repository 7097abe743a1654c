//! A local store that misbehaves as S3 does now and then: requests that fail, writes and deletes
//! that land but answer an error, latency, and slow listings. The simulation registers its
//! table's folder ([`register`]); every other local table of the test binary is passed through
//! untouched.
//!
//! It takes the place of delta-rs's store for `file://` locations, the only way to put a store
//! under the lake crate's real code: every table, folder and link it opens goes through delta-rs's
//! factory.

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use deltalake::logstore::{DeltaIOStorageBackend, ObjectStoreFactory, ObjectStoreRef, StorageConfig};
use futures::StreamExt as _;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions,
    PutOptions, PutPayload, PutResult, RenameOptions,
};
use rand::rngs::SmallRng;
use rand::{Rng as _, SeedableRng as _};

/// What one request meets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// It is served.
    None,
    /// It fails, and nothing is done.
    Before,
    /// It is done, and then answers an error (a write or delete whose answer was lost).
    After,
}

/// The faults of one folder: a rate that the simulation turns up on stormy days, drawn from a
/// seeded generator, and counts of what was injected.
pub struct Faults {
    /// Requests in a million that fail (half before, half after they are done).
    per_million: AtomicU32,
    /// Whether listings are slow (tens of milliseconds before their first entry).
    slow_listings: AtomicU32,
    rng: Mutex<SmallRng>,
    /// Requests that failed or answered an error.
    pub injected: AtomicU64,
}

impl Faults {
    /// Sets the share of requests that fail (0 for none) and whether listings are slow.
    pub fn set(&self, rate: f64, slow_listings: bool) {
        self.per_million
            .store((rate.clamp(0.0, 1.0) * 1e6) as u32, Ordering::Relaxed);
        self.slow_listings.store(u32::from(slow_listings), Ordering::Relaxed);
    }

    fn roll(&self) -> Fault {
        let per_million = self.per_million.load(Ordering::Relaxed);
        if per_million == 0 {
            return Fault::None;
        }
        let Ok(mut rng) = self.rng.lock() else {
            return Fault::None;
        };
        if rng.random_range(0..1_000_000) >= per_million {
            return Fault::None;
        }
        self.injected.fetch_add(1, Ordering::Relaxed);
        if rng.random_bool(0.5) {
            Fault::Before
        } else {
            Fault::After
        }
    }

    /// A short wait, now and then: requests do not answer in the order they were sent.
    async fn latency(&self) {
        let wait = self
            .rng
            .lock()
            .ok()
            .and_then(|mut rng| rng.random_bool(0.02).then(|| rng.random_range(0..3)));
        if let Some(ms) = wait {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
    }

    fn listing_wait(&self) -> Duration {
        if self.slow_listings.load(Ordering::Relaxed) == 0 {
            return Duration::ZERO;
        }
        let ms = self.rng.lock().map(|mut rng| rng.random_range(5..30)).unwrap_or(0);
        Duration::from_millis(ms)
    }
}

fn injected(operation: &str, location: &Path) -> object_store::Error {
    object_store::Error::Generic {
        store: "faulty",
        source: format!("{operation} {location}: injected fault (the simulation's store)").into(),
    }
}

/// Registered folders, by their path in the local store, with their faults.
type Folders = Mutex<Vec<(String, Arc<Faults>)>>;

/// The folders whose requests meet faults.
fn folders() -> &'static Folders {
    static FOLDERS: OnceLock<Folders> = OnceLock::new();
    FOLDERS.get_or_init(Mutex::default)
}

/// Puts the local folder `dir` (absolute) under faults drawn from `seed`, off until
/// [`Faults::set`] turns them on.
pub fn register(dir: &std::path::Path, seed: u64) -> Arc<Faults> {
    static FACTORY: Once = Once::new();
    FACTORY.call_once(|| {
        if let Ok(file) = url::Url::parse("file://") {
            deltalake::logstore::object_store_factories().insert(file, Arc::new(FaultyFactory));
        }
    });
    let faults = Arc::new(Faults {
        per_million: AtomicU32::new(0),
        slow_listings: AtomicU32::new(0),
        rng: Mutex::new(SmallRng::seed_from_u64(seed)),
        injected: AtomicU64::new(0),
    });
    let prefix = dir.to_string_lossy().trim_start_matches('/').to_owned();
    if let Ok(mut folders) = folders().lock() {
        folders.push((prefix, Arc::clone(&faults)));
    }
    faults
}

/// delta-rs's factory of local stores, each wrapped in a [`FaultyStore`].
struct FaultyFactory;

impl ObjectStoreFactory for FaultyFactory {
    fn parse_url_opts(&self, url: &url::Url, config: &StorageConfig) -> deltalake::DeltaResult<(ObjectStoreRef, Path)> {
        let (store, path) = object_store::parse_url_opts(url, &config.raw)?;
        let mut store: ObjectStoreRef = Arc::new(FaultyStore {
            inner: Arc::from(store),
        });
        if let Some(runtime) = &config.runtime {
            store = Arc::new(DeltaIOStorageBackend::new(store, runtime.clone()));
        }
        Ok((store, path))
    }
}

/// A local store whose requests under a registered folder meet that folder's [`Faults`].
#[derive(Debug)]
struct FaultyStore {
    inner: Arc<dyn ObjectStore>,
}

impl fmt::Display for FaultyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultyStore({})", self.inner)
    }
}

impl FaultyStore {
    fn faults(location: &Path) -> Option<Arc<Faults>> {
        let location = location.as_ref();
        let folders = folders().lock().ok()?;
        folders
            .iter()
            .find(|(prefix, _)| location.starts_with(prefix.as_str()))
            .map(|(_, faults)| Arc::clone(faults))
    }

    /// The fault `location`'s request meets, after its latency.
    async fn fault(location: &Path) -> Fault {
        match Self::faults(location) {
            Some(faults) => {
                faults.latency().await;
                faults.roll()
            }
            None => Fault::None,
        }
    }
}

#[async_trait]
impl ObjectStore for FaultyStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        match Self::fault(location).await {
            Fault::Before => Err(injected("put", location)),
            Fault::After => {
                self.inner.put_opts(location, payload, opts).await?;
                Err(injected("put (landed)", location))
            }
            Fault::None => self.inner.put_opts(location, payload, opts).await,
        }
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        if Self::fault(location).await == Fault::Before {
            return Err(injected("multipart upload", location));
        }
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> object_store::Result<GetResult> {
        if Self::fault(location).await != Fault::None {
            return Err(injected("get", location));
        }
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> object_store::Result<Vec<Bytes>> {
        if Self::fault(location).await != Fault::None {
            return Err(injected("get ranges", location));
        }
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        // A delete is done, and its answer may be lost: deleting again finds nothing, as on S3.
        self.inner
            .delete_stream(locations)
            .then(|deleted| async move {
                match deleted {
                    Ok(path) if Self::fault(&path).await != Fault::None => Err(injected("delete (landed)", &path)),
                    other => other,
                }
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.listed(prefix, self.inner.list(prefix))
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.listed(prefix, self.inner.list_with_offset(prefix, offset))
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let at = prefix.cloned().unwrap_or_default();
        if let Some(faults) = Self::faults(&at) {
            tokio::time::sleep(faults.listing_wait()).await;
            if faults.roll() != Fault::None {
                return Err(injected("list", &at));
            }
        }
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> object_store::Result<()> {
        match Self::fault(to).await {
            Fault::Before => Err(injected("copy", to)),
            Fault::After => {
                self.inner.copy_opts(from, to, options).await?;
                Err(injected("copy (landed)", to))
            }
            Fault::None => self.inner.copy_opts(from, to, options).await,
        }
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> object_store::Result<()> {
        match Self::fault(to).await {
            Fault::Before => Err(injected("rename", to)),
            Fault::After => {
                self.inner.rename_opts(from, to, options).await?;
                Err(injected("rename (landed)", to))
            }
            Fault::None => self.inner.rename_opts(from, to, options).await,
        }
    }
}

impl FaultyStore {
    /// A listing that may start slowly, and may fail before its first entry or part way.
    fn listed(
        &self,
        prefix: Option<&Path>,
        inner: BoxStream<'static, object_store::Result<ObjectMeta>>,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let at = prefix.cloned().unwrap_or_default();
        let Some(faults) = Self::faults(&at) else {
            return inner;
        };
        let wait = faults.listing_wait();
        let fault = faults.roll();
        let part_way = faults.rng.lock().map(|mut rng| rng.random_range(0..4)).unwrap_or(0);
        futures::stream::once(async move {
            tokio::time::sleep(wait).await;
            match fault {
                Fault::None => inner,
                // Failing at once, or after a few entries (a page that did not come).
                _ => inner
                    .take(part_way)
                    .chain(futures::stream::once(async move { Err(injected("list", &at)) }))
                    .boxed(),
            }
        })
        .flatten()
        .boxed()
    }
}
