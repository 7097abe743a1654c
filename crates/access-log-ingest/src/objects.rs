//! Raw log objects: where they are, listing them, and reading them as a decompressed byte stream.

use std::fmt;
use std::path::{Path, PathBuf};
use std::pin::Pin;

use async_compression::tokio::bufread::GzipDecoder;
use aws_sdk_s3::Client;
use aws_sdk_s3::error::{DisplayErrorContext, SdkError};
use aws_sdk_s3::operation::get_object::GetObjectError;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// The first two bytes of every gzip member.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Read buffer of the raw stream.
const READ_BUFFER: usize = 1 << 20;

/// One raw log object.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectRef {
    /// An object in S3.
    S3 {
        /// Its bucket.
        bucket: String,
        /// Its key, decoded.
        key: String,
    },
    /// A local file.
    Local(PathBuf),
}

impl ObjectRef {
    /// The object's URI: `s3://bucket/key` or `file:///absolute/path`. It names the object in
    /// the `log_object` column and is the app id of its Delta `txn` action.
    pub fn uri(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ObjectRef::S3 { bucket, key } => write!(f, "s3://{bucket}/{key}"),
            ObjectRef::Local(path) => write!(f, "file://{}", path.display()),
        }
    }
}

/// Why an object could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The object does not exist (any more).
    #[error("{object}: no such object")]
    Missing {
        /// The object.
        object: String,
    },
    /// S3 refused or failed the request.
    #[error("{object}: {message}")]
    S3 {
        /// The object.
        object: String,
        /// S3's error, with its context.
        message: String,
    },
    /// Reading or decompressing failed part way.
    #[error("{object}: {source}")]
    Io {
        /// The object.
        object: String,
        /// The I/O or gzip error.
        #[source]
        source: std::io::Error,
    },
    /// S3 refused to read an object of a bucket that the expected account does not own (or that
    /// this role may not read): ingestion reads only the raw-logs bucket it was set up for.
    #[error(
        "{object}: access denied: its bucket must belong to account {owner} (RAW_LOGS_BUCKET_OWNER) and be readable \
         by this role"
    )]
    NotOwned {
        /// The object.
        object: String,
        /// The account expected to own its bucket.
        owner: String,
    },
    /// An object is referenced for a client that cannot reach it (an S3 object without S3).
    #[error("{object}: no S3 client configured")]
    NoS3Client {
        /// The object.
        object: String,
    },
}

/// A raw log object's content, decompressed.
pub type ObjectStream = Pin<Box<dyn AsyncRead + Send>>;

/// Reads raw log objects from S3 or the local file system.
#[derive(Debug, Clone, Default)]
pub struct ObjectReader {
    s3: Option<Client>,
    expected_owner: Option<String>,
}

impl ObjectReader {
    /// A reader of S3 objects (and local files) with `client`.
    pub fn s3(client: Client) -> Self {
        Self {
            s3: Some(client),
            expected_owner: None,
        }
    }

    /// A reader of local files only.
    pub fn local() -> Self {
        Self::default()
    }

    /// The same reader, reading S3 objects only from buckets that the account `owner` owns
    /// (S3 checks it: `x-amz-expected-bucket-owner`); `None` reads any bucket the role may.
    pub fn with_expected_owner(mut self, owner: Option<String>) -> Self {
        self.expected_owner = owner;
        self
    }

    /// The S3 client, if any.
    pub fn s3_client(&self) -> Option<&Client> {
        self.s3.as_ref()
    }

    /// Opens `object` for reading: a stream of its bytes, gunzipped when the object is gzip
    /// (recognised by its first bytes; concatenated members are read as one stream).
    pub async fn open(&self, object: &ObjectRef) -> Result<ObjectStream, ReadError> {
        let io_error = |source| ReadError::Io {
            object: object.uri(),
            source,
        };
        let raw: Pin<Box<dyn AsyncRead + Send>> = match object {
            ObjectRef::Local(path) => Box::pin(tokio::fs::File::open(path).await.map_err(|source| {
                if source.kind() == std::io::ErrorKind::NotFound {
                    ReadError::Missing { object: object.uri() }
                } else {
                    io_error(source)
                }
            })?),
            ObjectRef::S3 { bucket, key } => {
                let client = self
                    .s3
                    .as_ref()
                    .ok_or_else(|| ReadError::NoS3Client { object: object.uri() })?;
                let output = client
                    .get_object()
                    .bucket(bucket)
                    .key(key)
                    .set_expected_bucket_owner(self.expected_owner.clone())
                    .send()
                    .await
                    .map_err(|e| s3_error(object, self.expected_owner.as_deref(), e))?;
                Box::pin(output.body.into_async_read())
            }
        };
        decompressing(raw).await.map_err(io_error)
    }

    /// Every object under `location`: a local file, a directory (recursively, in name order) or
    /// `s3://bucket/prefix` (listed page by page).
    pub async fn list(&self, location: &str) -> Result<Vec<ObjectRef>, ReadError> {
        if let Some(rest) = location.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            return self.list_s3(bucket, prefix).await;
        }
        let path = Path::new(location.strip_prefix("file://").unwrap_or(location));
        let path = std::path::absolute(path).map_err(|source| ReadError::Io {
            object: location.to_owned(),
            source,
        })?;
        let mut out = Vec::new();
        walk(&path, &mut out).map_err(|source| ReadError::Io {
            object: path.display().to_string(),
            source,
        })?;
        out.sort();
        Ok(out.into_iter().map(ObjectRef::Local).collect())
    }

    async fn list_s3(&self, bucket: &str, prefix: &str) -> Result<Vec<ObjectRef>, ReadError> {
        let location = format!("s3://{bucket}/{prefix}");
        let client = self.s3.as_ref().ok_or_else(|| ReadError::NoS3Client {
            object: location.clone(),
        })?;
        let mut pages = client
            .list_objects_v2()
            .bucket(bucket)
            .prefix(prefix)
            .set_expected_bucket_owner(self.expected_owner.clone())
            .into_paginator()
            .send();
        let mut out = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| ReadError::S3 {
                object: location.clone(),
                message: DisplayErrorContext(&e).to_string(),
            })?;
            for object in page.contents() {
                if let Some(key) = object.key().filter(|k| !k.ends_with('/')) {
                    out.push(ObjectRef::S3 {
                        bucket: bucket.to_owned(),
                        key: key.to_owned(),
                    });
                }
            }
        }
        Ok(out)
    }
}

/// `raw` as a stream of its bytes, gunzipped when it is gzip (recognised by its first bytes;
/// concatenated members are read as one stream). Every reader of log objects goes through it:
/// ingestion ([`ObjectReader::open`]) and `lakelog parse` (files and standard input).
pub async fn decompressing(raw: Pin<Box<dyn AsyncRead + Send>>) -> std::io::Result<ObjectStream> {
    let mut reader = BufReader::with_capacity(READ_BUFFER, raw);
    let head = reader.fill_buf().await?;
    if head.starts_with(&GZIP_MAGIC) {
        let mut decoder = GzipDecoder::new(reader);
        decoder.multiple_members(true);
        Ok(Box::pin(decoder))
    } else {
        Ok(Box::pin(reader))
    }
}

fn walk(path: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if path.is_dir() {
        for entry in std::fs::read_dir(path)? {
            walk(&entry?.path(), out)?;
        }
    } else {
        // Opening reports a missing file with its name; listing keeps it.
        out.push(path.to_path_buf());
    }
    Ok(())
}

fn s3_error(object: &ObjectRef, expected_owner: Option<&str>, e: SdkError<GetObjectError>) -> ReadError {
    if let SdkError::ServiceError(service) = &e {
        if matches!(service.err(), GetObjectError::NoSuchKey(_)) {
            return ReadError::Missing { object: object.uri() };
        }
        if let Some(owner) = expected_owner
            && service.raw().status().as_u16() == 403
        {
            return ReadError::NotOwned {
                object: object.uri(),
                owner: owner.to_owned(),
            };
        }
    }
    ReadError::S3 {
        object: object.uri(),
        message: DisplayErrorContext(&e).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use tokio::io::AsyncReadExt;

    use super::*;

    async fn read(reader: &ObjectReader, object: &ObjectRef) -> Result<Vec<u8>, ReadError> {
        let mut stream = reader.open(object).await?;
        let mut out = Vec::new();
        stream.read_to_end(&mut out).await.map_err(|source| ReadError::Io {
            object: object.uri(),
            source,
        })?;
        Ok(out)
    }

    #[tokio::test]
    async fn local_plain_gzip_and_listing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("a.log"), b"one\ntwo\n").unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(b"three\n").unwrap();
        let mut data = gz.finish().unwrap();
        let mut second = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        second.write_all(b"four\n").unwrap();
        data.extend(second.finish().unwrap());
        std::fs::write(dir.path().join("sub/b.log.gz"), data).unwrap();

        let reader = ObjectReader::local();
        let objects = reader.list(dir.path().to_str().unwrap()).await.unwrap();
        assert_eq!(objects.len(), 2);
        assert!(objects[0].uri().ends_with("/a.log") && objects[0].uri().starts_with("file:///"));
        assert_eq!(read(&reader, &objects[0]).await.unwrap(), b"one\ntwo\n");
        assert_eq!(read(&reader, &objects[1]).await.unwrap(), b"three\nfour\n");

        let missing = ObjectRef::Local(dir.path().join("nope"));
        assert!(matches!(read(&reader, &missing).await, Err(ReadError::Missing { .. })));
        let s3 = ObjectRef::S3 {
            bucket: "b".into(),
            key: "k".into(),
        };
        assert!(matches!(read(&reader, &s3).await, Err(ReadError::NoS3Client { .. })));
        assert_eq!(s3.uri(), "s3://b/k");
    }

    #[tokio::test]
    async fn corrupt_gzip_fails_while_reading() {
        let dir = tempfile::tempdir().unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&b"some log line\n".repeat(1000)).unwrap();
        let mut data = gz.finish().unwrap();
        let mid = data.len() / 2;
        data[mid] ^= 0x55;
        let path = dir.path().join("bad.gz");
        std::fs::write(&path, data).unwrap();
        let err = read(&ObjectReader::local(), &ObjectRef::Local(path)).await.unwrap_err();
        assert!(matches!(err, ReadError::Io { .. }), "{err}");
    }
}
