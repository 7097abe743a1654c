//! The local AWS stand-ins (moto): started once per test process, or reached at
//! `LAKELOG_TEST_ENDPOINT`; SDK configurations, deltalake options and names for them.

use std::collections::HashMap;
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{self, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use aws_config::SdkConfig;
use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region, SharedCredentialsProvider};

/// Environment variable with the endpoint of running stand-ins (`http://127.0.0.1:PORT`).
pub const ENDPOINT_VAR: &str = "LAKELOG_TEST_ENDPOINT";
/// Region that every client of the stand-ins uses.
pub const REGION: &str = "us-east-1";
/// Dummy access key id; moto accepts any credentials.
pub const ACCESS_KEY_ID: &str = "testing";
/// Dummy secret access key.
pub const SECRET_ACCESS_KEY: &str = "testing";

/// The server this test binary started, shared by the [`StandIn`]s alive at the same time.
static OWN_SERVER: Mutex<Weak<MotoServer>> = Mutex::new(Weak::new());

/// Connection to the local AWS stand-ins, for one test.
///
/// Cheap to create once the server runs; create one per test.
#[derive(Debug, Clone)]
pub struct StandIn {
    endpoint: String,
    /// Keeps a server started by this process alive; `None` when it came from [`ENDPOINT_VAR`].
    server: Option<Arc<MotoServer>>,
}

impl StandIn {
    /// Connects to the stand-ins: those at [`ENDPOINT_VAR`] when it is set, otherwise a
    /// `moto_server` started (or already started) by this process.
    ///
    /// Starting a server blocks for a few seconds, so it runs on tokio's blocking pool.
    pub async fn connect() -> Result<Self> {
        tokio::task::spawn_blocking(Self::connect_blocking)
            .await
            .context("the task starting the stand-ins panicked")?
    }

    /// [`StandIn::connect`] for synchronous code.
    pub fn connect_blocking() -> Result<Self> {
        if let Some(endpoint) = env::var(ENDPOINT_VAR).ok().filter(|e| !e.trim().is_empty()) {
            return Ok(Self {
                endpoint: endpoint.trim().trim_end_matches('/').to_owned(),
                server: None,
            });
        }
        let mut own = OWN_SERVER.lock().unwrap_or_else(PoisonError::into_inner);
        let server = match own.upgrade() {
            Some(server) => server,
            None => {
                let server = Arc::new(MotoServer::start()?);
                *own = Arc::downgrade(&server);
                server
            }
        };
        Ok(Self {
            endpoint: server.endpoint.clone(),
            server: Some(server),
        })
    }

    /// Endpoint URL of the stand-ins, `http://127.0.0.1:PORT`, without a trailing slash.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Whether this process started the server (rather than finding [`ENDPOINT_VAR`]).
    pub fn owns_server(&self) -> bool {
        self.server.is_some()
    }

    /// AWS SDK configuration for the stand-ins: their endpoint, [`REGION`] and static dummy
    /// credentials. Nothing is read from the environment or from `~/.aws`, so real credentials
    /// can never be used by a test.
    pub fn sdk_config(&self) -> SdkConfig {
        let credentials = Credentials::new(ACCESS_KEY_ID, SECRET_ACCESS_KEY, None, None, "lakelog-tests");
        SdkConfig::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(REGION))
            .endpoint_url(&self.endpoint)
            .credentials_provider(SharedCredentialsProvider::new(credentials))
            .build()
    }

    /// S3 client for the stand-ins, with path-style addressing (`http://127.0.0.1:PORT/bucket/key`)
    /// since bucket subdomains of `127.0.0.1` do not resolve.
    pub fn s3(&self) -> aws_sdk_s3::Client {
        let config = aws_sdk_s3::config::Builder::from(&self.sdk_config())
            .force_path_style(true)
            .build();
        aws_sdk_s3::Client::from_conf(config)
    }

    /// Creates a bucket with a name of its own, starting with `prefix`, and returns the name.
    pub async fn create_bucket(&self, prefix: &str) -> Result<String> {
        let bucket = unique_name(prefix);
        self.s3()
            .create_bucket()
            .bucket(&bucket)
            .send()
            .await
            .with_context(|| format!("creating bucket {bucket} on the stand-in S3 at {}", self.endpoint))?;
        Ok(bucket)
    }

    /// `s3://bucket/path` (a table URI for deltalake).
    pub fn s3_uri(bucket: &str, path: &str) -> String {
        format!("s3://{bucket}/{}", path.trim_start_matches('/'))
    }

    /// A table's storage settings for the stand-in S3 reached at `endpoint`: the stand-in's own,
    /// or a proxy's before it ([`crate::faults::FaultProxy`]).
    pub fn storage_via(&self, endpoint: &str) -> lake::StorageConfig {
        let mut extra = self.storage_options();
        extra.insert("AWS_ENDPOINT_URL".into(), endpoint.to_owned());
        lake::StorageConfig {
            endpoint: Some(endpoint.to_owned()),
            extra,
        }
    }

    /// Storage options in deltalake's (`object_store`'s) keys that point a table at the stand-in
    /// S3: endpoint, plain HTTP allowed, dummy credentials and region.
    pub fn storage_options(&self) -> HashMap<String, String> {
        [
            ("AWS_ENDPOINT_URL", self.endpoint.as_str()),
            ("AWS_ALLOW_HTTP", "true"),
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID),
            ("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY),
            ("AWS_REGION", REGION),
        ]
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .collect()
    }
}

/// A name that no other call (in this or another test process) gets: `prefix` reduced to what
/// S3 bucket names allow, then the process id, the time and a counter. At most 63 characters.
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut clean: String = prefix
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| {
            if c.is_ascii_lowercase() || c.is_ascii_digit() {
                c
            } else {
                '-'
            }
        })
        .take(24)
        .collect();
    clean = clean.trim_matches('-').to_owned();
    if clean.is_empty() {
        clean.push_str("lakelog");
    }
    let micros = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{clean}-{:x}-{micros:x}-{n}", process::id())
}

/// A moto server started through `scripts/standins` for this process; stopped (by its process
/// id) when dropped.
#[derive(Debug)]
struct MotoServer {
    endpoint: String,
    pid: u32,
    /// `LAKELOG_STANDINS_DIR` of this server: its pid, endpoint and log.
    state_dir: PathBuf,
}

impl MotoServer {
    fn start() -> Result<Self> {
        static STARTED: AtomicU64 = AtomicU64::new(0);
        let n = STARTED.fetch_add(1, Ordering::Relaxed);
        let state_dir = cache_dir()
            .join("standins")
            .join(format!("cargo-test-{}-{n}", process::id()));
        let output = standins("start", &state_dir)
            .output()
            .with_context(|| format!("running {} start", standins_script().display()))?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        if !output.status.success() {
            bail!(
                "{ENDPOINT_VAR} is not set, and starting the stand-ins with `scripts/standins start` failed \
                 ({}):\n{stderr}",
                output.status
            );
        }
        let stdout = String::from_utf8_lossy(&output.stdout);
        let exported = |name: &str| {
            stdout
                .lines()
                .find_map(|line| line.strip_prefix("export ")?.strip_prefix(name)?.strip_prefix('='))
                .map(str::to_owned)
        };
        let (Some(endpoint), Some(pid)) = (exported(ENDPOINT_VAR), exported("LAKELOG_STANDINS_PID")) else {
            bail!("`scripts/standins start` printed no endpoint and pid:\n{stdout}{stderr}");
        };
        let server = Self {
            endpoint,
            pid: pid
                .parse()
                .with_context(|| format!("pid {pid:?} from scripts/standins"))?,
            state_dir,
        };
        Ok(server)
    }
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        // `stop` kills the pid recorded in the state directory, after checking it is still moto.
        let stopped = standins("stop", &self.state_dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if !stopped {
            let _ = Command::new("kill").arg(self.pid.to_string()).status();
        }
        let _ = fs::remove_dir_all(&self.state_dir);
    }
}

/// The project's `scripts/standins`, which knows how to run moto (see its comments).
fn standins_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("scripts")
        .join("standins")
}

/// `bash scripts/standins COMMAND` for the server kept in `state_dir`. The server exits by itself
/// if this process dies without dropping it.
fn standins(command: &str, state_dir: &Path) -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg(standins_script())
        .arg(command)
        .env("LAKELOG_CACHE", cache_dir())
        .env("LAKELOG_STANDINS_DIR", state_dir)
        .env("LAKELOG_STANDINS_WATCH_PID", process::id().to_string())
        .stdin(Stdio::null());
    cmd
}

/// `$LAKELOG_CACHE`, by default `~/.cache/lakelog`: the build area outside the clone.
fn cache_dir() -> PathBuf {
    if let Some(dir) = env::var_os("LAKELOG_CACHE").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let home = env::var_os("HOME").map_or_else(env::temp_dir, PathBuf::from);
    home.join(".cache").join("lakelog")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_names_are_valid_bucket_names() {
        let long = "A Very_Long Prefix/with.characters that S3 rejects, and more";
        let names: Vec<String> = ["put-if-absent", "", "---", long]
            .iter()
            .map(|p| unique_name(p))
            .collect();
        for name in &names {
            assert!((3..=63).contains(&name.len()), "{name}");
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{name}"
            );
            assert!(name.starts_with(|c: char| c.is_ascii_alphanumeric()), "{name}");
            assert!(name.ends_with(|c: char| c.is_ascii_alphanumeric()), "{name}");
        }
        assert!(names[0].starts_with("put-if-absent-"));
        assert!(names[1].starts_with("lakelog-"));
        assert_ne!(unique_name("same"), unique_name("same"));
    }

    #[test]
    fn storage_options_point_at_the_endpoint() {
        let standin = StandIn {
            endpoint: "http://127.0.0.1:1234".to_owned(),
            server: None,
        };
        let options = standin.storage_options();
        assert_eq!(options["AWS_ENDPOINT_URL"], "http://127.0.0.1:1234");
        assert_eq!(options["AWS_ALLOW_HTTP"], "true");
        assert_eq!(options["AWS_REGION"], REGION);
        assert_eq!(options.len(), 5);
        assert_eq!(StandIn::s3_uri("b", "/t/x"), "s3://b/t/x");
    }
}
