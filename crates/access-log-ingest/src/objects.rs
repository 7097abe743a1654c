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

    /// The account and region of the bucket whose access log this is, when its key (or path) is in
    /// S3's date-based partitioned format; `None` for the simple format.
    pub fn log_source(&self) -> Option<LogSource> {
        match self {
            ObjectRef::S3 { key, .. } => LogSource::of_key(key),
            ObjectRef::Local(path) => LogSource::of_key(&path.to_string_lossy()),
        }
    }
}

/// The account and region of an observed bucket, as S3's date-based partitioned key format of
/// server access logs (`TargetObjectKeyFormat` `PartitionedPrefix`) names them:
/// `PREFIX` `ACCOUNT/REGION/BUCKET/YYYY/MM/DD/` `YYYY-MM-DD-hh-mm-ss-UNIQUE`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LogSource {
    /// The observed bucket's account (12 digits).
    pub account: String,
    /// The observed bucket's region.
    pub region: String,
}

impl LogSource {
    /// The source named by the last seven segments of `key`, if they are in the partitioned
    /// format.
    pub fn of_key(key: &str) -> Option<Self> {
        let segments: Vec<&str> = key.rsplit('/').take(7).collect();
        let [_name, day, month, year, bucket, region, account] = segments.as_slice() else {
            return None;
        };
        let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
        let region_ok = region.len() >= 4
            && region.contains('-')
            && region.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
            && region
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        (digits(account, 12)
            && region_ok
            && !bucket.is_empty()
            && digits(year, 4)
            && digits(month, 2)
            && digits(day, 2))
        .then(|| Self {
            account: (*account).to_owned(),
            region: (*region).to_owned(),
        })
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
    /// An object of a bucket that none of the expected accounts owns (S3 refused it, or its key
    /// names another account), or that this role may not read: ingestion reads only the raw-logs
    /// buckets it was set up for.
    #[error(
        "{object}: refused: its bucket must belong to {owners} (RAW_LOGS_BUCKET_OWNER) and be readable by this role"
    )]
    NotOwned {
        /// The object.
        object: String,
        /// The accounts expected, in words.
        owners: String,
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
    expected_owners: Vec<String>,
}

impl ObjectReader {
    /// A reader of S3 objects (and local files) with `client`.
    pub fn s3(client: Client) -> Self {
        Self {
            s3: Some(client),
            expected_owners: Vec::new(),
        }
    }

    /// A reader of local files only.
    pub fn local() -> Self {
        Self::default()
    }

    /// The same reader, reading S3 objects only from buckets that one of `owners` owns (none:
    /// any bucket the role may read). S3 checks it (`x-amz-expected-bucket-owner`): for the
    /// account the object's key names ([`LogSource`]), which must be one of them, or for the one
    /// owner given. With several owners, an object whose key names no account is refused.
    pub fn with_expected_owners(mut self, owners: Vec<String>) -> Self {
        self.expected_owners = owners;
        self
    }

    /// The account S3 is to check owns `object`'s bucket; `Err` when none of the expected can.
    fn expected_owner(&self, object: &ObjectRef) -> Result<Option<String>, ReadError> {
        if self.expected_owners.is_empty() {
            return Ok(None);
        }
        let refused = || ReadError::NotOwned {
            object: object.uri(),
            owners: self.owners_in_words(),
        };
        match (object.log_source(), self.expected_owners.as_slice()) {
            (Some(source), owners) if owners.contains(&source.account) => Ok(Some(source.account)),
            (Some(_), _) => Err(refused()),
            (None, [only]) => Ok(Some(only.clone())),
            (None, _) => Err(refused()),
        }
    }

    fn owners_in_words(&self) -> String {
        match self.expected_owners.as_slice() {
            [only] => format!("account {only}"),
            owners => format!(
                "one of the accounts {} (the key in S3's partitioned format names it)",
                owners.join(", ")
            ),
        }
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
                    .set_expected_bucket_owner(self.expected_owner(object)?)
                    .send()
                    .await
                    .map_err(|e| s3_error(object, self, e))?;
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
            .set_expected_bucket_owner(match self.expected_owners.as_slice() {
                [only] => Some(only.clone()),
                _ => None,
            })
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

fn s3_error(object: &ObjectRef, reader: &ObjectReader, e: SdkError<GetObjectError>) -> ReadError {
    if let SdkError::ServiceError(service) = &e {
        if matches!(service.err(), GetObjectError::NoSuchKey(_)) {
            return ReadError::Missing { object: object.uri() };
        }
        if !reader.expected_owners.is_empty() && service.raw().status().as_u16() == 403 {
            return ReadError::NotOwned {
                object: object.uri(),
                owners: reader.owners_in_words(),
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

    #[test]
    fn partitioned_keys_name_the_account_and_region() {
        let s3 = |key: &str| ObjectRef::S3 {
            bucket: "raw".into(),
            key: key.into(),
        };
        let source = |account: &str, region: &str| LogSource {
            account: account.into(),
            region: region.into(),
        };
        assert_eq!(
            s3("logs/123456789012/eu-west-1/web-assets/2024/06/01/2024-06-01-00-00-00-ABCDEF").log_source(),
            Some(source("123456789012", "eu-west-1"))
        );
        assert_eq!(
            s3("111122223333/us-gov-west-1/b/2024/06/01/2024-06-01-00-00-00-X").log_source(),
            Some(source("111122223333", "us-gov-west-1"))
        );
        assert_eq!(
            ObjectRef::Local("/tmp/raw/123456789012/cn-north-1/b/2024/06/01/f".into()).log_source(),
            Some(source("123456789012", "cn-north-1"))
        );
        for simple in [
            "access-logs/2024-06-01-00-00-00-ABCDEF",
            "logs/12345/eu-west-1/b/2024/06/01/f",
            "logs/123456789012/EU/b/2024/06/01/f",
            "logs/123456789012/eu-west-1/b/2024/6/01/f",
            "123456789012/eu-west-1/b/2024/06/01",
        ] {
            assert_eq!(s3(simple).log_source(), None, "{simple}");
        }
    }

    #[test]
    fn the_owner_s3_checks_is_the_one_the_key_names() {
        let reader = |owners: &[&str]| {
            ObjectReader::local().with_expected_owners(owners.iter().map(|o| o.to_string()).collect())
        };
        let partitioned = ObjectRef::S3 {
            bucket: "raw".into(),
            key: "p/111111111111/eu-west-1/b/2024/06/01/f".into(),
        };
        let simple = ObjectRef::S3 {
            bucket: "raw".into(),
            key: "p/2024-06-01-00-00-00-X".into(),
        };
        assert_eq!(reader(&[]).expected_owner(&partitioned).unwrap(), None);
        let two = reader(&["222222222222", "111111111111"]);
        assert_eq!(
            two.expected_owner(&partitioned).unwrap().as_deref(),
            Some("111111111111")
        );
        let refused = two.expected_owner(&simple).unwrap_err().to_string();
        assert!(
            refused.contains("one of the accounts 222222222222, 111111111111"),
            "{refused}"
        );
        let one = reader(&["222222222222"]);
        assert_eq!(one.expected_owner(&simple).unwrap().as_deref(), Some("222222222222"));
        let other = one.expected_owner(&partitioned).unwrap_err().to_string();
        assert!(other.contains("must belong to account 222222222222"), "{other}");
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
