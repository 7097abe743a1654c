//! Where tables live: local paths and `s3://` URIs, and the storage options delta-rs needs for them.

use std::collections::HashMap;

use deltalake::table::builder::ensure_table_uri;
use url::Url;

use crate::error::LakeError;

/// How to reach the object store. Credentials and region come from the usual AWS sources (the
/// Lambda role, environment variables, profiles); only what those cannot say is kept here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StorageConfig {
    /// An S3-compatible endpoint in place of AWS's, for example a local stand-in.
    pub endpoint: Option<String>,
    /// Extra delta-rs / object_store options, passed through as they are.
    pub extra: HashMap<String, String>,
}

impl StorageConfig {
    /// The configuration the AWS environment variables give: `AWS_ENDPOINT_URL_S3` or
    /// `AWS_ENDPOINT_URL` for the endpoint.
    pub fn from_env() -> Self {
        let endpoint = ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"]
            .iter()
            .find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()));
        Self {
            endpoint,
            extra: HashMap::new(),
        }
    }

    /// A configuration for an explicit endpoint (tests, local stand-ins).
    pub fn with_endpoint(endpoint: impl Into<String>) -> Self {
        Self {
            endpoint: Some(endpoint.into()),
            extra: HashMap::new(),
        }
    }

    /// The storage options for a table at `url`. No locking provider is ever set: commits use S3
    /// conditional writes, which are safe with many writers.
    pub fn options_for(&self, url: &Url) -> HashMap<String, String> {
        let mut options = self.extra.clone();
        if matches!(url.scheme(), "s3" | "s3a") {
            if let Some(endpoint) = &self.endpoint {
                options.insert("AWS_ENDPOINT_URL".into(), endpoint.clone());
                if endpoint.starts_with("http://") {
                    options.insert("AWS_ALLOW_HTTP".into(), "true".into());
                }
                // Stand-ins serve buckets by path, not by virtual host.
                options.insert("AWS_VIRTUAL_HOSTED_STYLE_REQUEST".into(), "false".into());
            }
            options.remove("AWS_S3_LOCKING_PROVIDER");
            options.remove("AWS_S3_ALLOW_UNSAFE_RENAME");
        }
        options
    }
}

/// The URL of a table location: `s3://bucket/prefix`, `file:///path`, or a local path (created if
/// missing, made absolute).
pub fn table_url(location: &str) -> Result<Url, LakeError> {
    let trimmed = location.trim();
    if trimmed.is_empty() {
        return Err(LakeError::InvalidLocation {
            uri: location.into(),
            reason: "empty".into(),
        });
    }
    if trimmed.contains('{') || trimmed.contains('}') {
        return Err(LakeError::InvalidLocation {
            uri: location.into(),
            reason: "unresolved placeholder".into(),
        });
    }
    let url = ensure_table_uri(trimmed).map_err(|e| LakeError::InvalidLocation {
        uri: location.into(),
        reason: e.to_string(),
    })?;
    match url.scheme() {
        "file" | "s3" | "s3a" | "memory" => Ok(url),
        other => Err(LakeError::InvalidLocation {
            uri: location.into(),
            reason: format!("unsupported scheme {other:?}: use a local path or s3://bucket/prefix"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_options_for_a_stand_in() {
        let config = StorageConfig::with_endpoint("http://127.0.0.1:5000");
        let url = table_url("s3://lake/access_logs/bkt").unwrap();
        let options = config.options_for(&url);
        assert_eq!(options["AWS_ENDPOINT_URL"], "http://127.0.0.1:5000");
        assert_eq!(options["AWS_ALLOW_HTTP"], "true");
        assert!(!options.contains_key("AWS_S3_LOCKING_PROVIDER"));
    }

    #[test]
    fn locking_providers_are_never_passed_on() {
        let mut config = StorageConfig::default();
        config.extra.insert("AWS_S3_LOCKING_PROVIDER".into(), "dynamodb".into());
        let options = config.options_for(&table_url("s3://lake/t").unwrap());
        assert!(options.is_empty(), "{options:?}");
    }

    #[test]
    fn local_paths_become_file_urls() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new/table");
        let url = table_url(path.to_str().unwrap()).unwrap();
        assert_eq!(url.scheme(), "file");
        assert!(path.is_dir());
        assert!(StorageConfig::with_endpoint("http://x").options_for(&url).is_empty());
    }

    #[test]
    fn bad_locations_are_refused() {
        for bad in ["", "s3://lake/{bucket}", "ftp://host/t"] {
            assert!(table_url(bad).is_err(), "{bad}");
        }
    }
}
