//! The table's files as lakelog reads them: a Parquet file of the object store read by byte
//! ranges ([`StoreFile`]), when a file's rows were first written ([`written_at`]), and a small
//! object of lakelog's own beside the log (a staged link, the position ledger: [`read_object`]).

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use deltalake::kernel::LogicalFileView;
use deltalake::parquet::arrow::arrow_reader::ArrowReaderOptions;
use deltalake::parquet::arrow::async_reader::AsyncFileReader;
use deltalake::parquet::errors::ParquetError;
use deltalake::parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use deltalake::{ObjectStore, Path};
use futures::FutureExt as _;
use futures::future::BoxFuture;
use object_store::ObjectStoreExt as _;

/// Tag of the files compaction writes: when the oldest row they hold was first written
/// (milliseconds since the epoch), the earliest `modificationTime` (or tag) of the files they
/// replace. A rewrite gets a new modification time; this keeps what lookups by age need,
/// such as the backfill's search for sources older than the `txn` retention.
pub const WRITTEN_SINCE_TAG: &str = "lakelog.writtenSince";

/// When the oldest rows of a file were first written: its [`WRITTEN_SINCE_TAG`] if compaction
/// wrote it, else its modification time.
#[allow(deprecated)] // The only accessor of a file's tags; see `LogicalFileView::add_action`.
pub(crate) fn written_at(view: &LogicalFileView) -> i64 {
    view.add_action()
        .tags
        .as_ref()
        .and_then(|tags| tags.get(WRITTEN_SINCE_TAG))
        .and_then(|v| v.as_deref())
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or_else(|| view.modification_time())
}

/// A parquet file of the table's object store, read by byte ranges.
#[derive(Debug, Clone)]
pub(crate) struct StoreFile {
    pub(crate) store: Arc<dyn ObjectStore>,
    pub(crate) path: Path,
    pub(crate) size: u64,
}

fn store_error(e: object_store::Error) -> ParquetError {
    ParquetError::External(Box::new(e))
}

impl AsyncFileReader for StoreFile {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, deltalake::parquet::errors::Result<Bytes>> {
        async move { self.store.get_range(&self.path, range).await.map_err(store_error) }.boxed()
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'_, deltalake::parquet::errors::Result<Vec<Bytes>>> {
        async move { self.store.get_ranges(&self.path, &ranges).await.map_err(store_error) }.boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        _options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, deltalake::parquet::errors::Result<Arc<ParquetMetaData>>> {
        async move {
            let size = self.size;
            let metadata = ParquetMetaDataReader::new().load_and_finish(self, size).await?;
            Ok(Arc::new(metadata))
        }
        .boxed()
    }
}

/// The bytes of the object at `name`; `None` when it is gone.
pub(crate) async fn read_object(
    uri: &str,
    store: &deltalake::logstore::ObjectStoreRef,
    name: &str,
) -> Result<Option<bytes::Bytes>, crate::error::LakeError> {
    let failed = |e: object_store::Error| crate::error::LakeError::Object {
        uri: uri.to_owned(),
        action: "reading",
        object: name.to_owned(),
        reason: e.to_string(),
    };
    match store.get(&Path::from(name)).await {
        Ok(object) => object.bytes().await.map(Some).map_err(failed),
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(failed(e)),
    }
}
