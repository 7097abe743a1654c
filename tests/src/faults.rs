//! A fault-injecting S3 stand-in: an HTTP proxy in front of the moto server that fails like a
//! network and like S3 do, from a seed, so that a test can try to break the delivery guarantees.
//!
//! Each request is, with its kind's probability (drawn in this order, at most one fault each):
//!
//! * **slow down**: answered `503 SlowDown` without being forwarded (S3 throttling);
//! * **fail after**: the request is carried out by moto, then answered `500 InternalError` (the
//!   client cannot tell whether a write was carried out, nor what a read found);
//! * **drop after**: the request is carried out, then the connection is closed without an answer;
//! * **delay**: forwarded after a random delay of up to [`FaultRates::max_delay`];
//! * **late write** (only when [`FaultRates::late_write`] is set): a `PUT` is answered by a
//!   dropped connection at once and carried out [`FaultRates::late_write_delay`] later, as S3 may
//!   carry out a request whose client gave up on it.
//!
//! Each request is also sorted by what it is for ([`Target`]: a commit, a checkpoint, a read of
//! the log, a LIST, anything else), which can have rates of its own
//! ([`FaultRates::target_rates`]), so that a test can be sure to exercise the paths it is about.
//! Faults can be limited to requests whose path contains a string ([`FaultRates::only_paths`]),
//! for example `_delta_log/` to fail only commits and checkpoints, and to once per path
//! ([`FaultRates::once_per_path`]). [`FaultProxy::counts`] says how many requests of each kind
//! were faulted, and [`FaultProxy::counts_for`] how many of one target.
//!
//! ```no_run
//! # async fn example() -> anyhow::Result<()> {
//! use lakelog_tests::faults::{FaultProxy, FaultRates};
//! let standin = lakelog_tests::StandIn::connect().await?;
//! let proxy = FaultProxy::start(standin.endpoint(), 7, FaultRates::uniform(0.05)).await?;
//! // Point writers at `proxy.endpoint()`, and independent readers at `standin.endpoint()`.
//! println!("{:?}", proxy.counts());
//! # Ok(())
//! # }
//! ```

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// What a request to the store is for, as far as the delivery guarantees go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// A `PUT` of a version of a Delta log (`_delta_log/NNN.json`): a commit, whose outcome is
    /// unknown to the writer when it fails after being carried out.
    Commit,
    /// A `PUT` of a checkpoint or of `_last_checkpoint`: work after a commit landed.
    Checkpoint,
    /// A `GET` or `HEAD` under `_delta_log/`: loading a table, and the read-back of a commit.
    LogRead,
    /// A `LIST` of a bucket (`GET /bucket?list-type=2`): listing a log or a table's files.
    List,
    /// Anything else: data files, raw log objects, deletes.
    Other,
}

impl Target {
    /// Every target, in order.
    pub const ALL: [Target; 5] = [
        Target::Commit,
        Target::Checkpoint,
        Target::LogRead,
        Target::List,
        Target::Other,
    ];

    /// What a request of `method` to `path` (with `query`) is for.
    pub fn of(method: &Method, path: &str, query: &str) -> Self {
        let in_log = path.contains("/_delta_log/");
        let name = path.rsplit('/').next().unwrap_or_default();
        let is_version = name
            .strip_suffix(".json")
            .is_some_and(|v| v.len() == 20 && v.bytes().all(|b| b.is_ascii_digit()));
        if *method == Method::GET && query.split('&').any(|p| p.starts_with("list-type=")) {
            Target::List
        } else if in_log && *method == Method::PUT && is_version {
            Target::Commit
        } else if in_log && *method == Method::PUT && name.contains("checkpoint") {
            Target::Checkpoint
        } else if in_log && matches!(*method, Method::GET | Method::HEAD) {
            Target::LogRead
        } else {
            Target::Other
        }
    }
}

/// How often each kind of fault happens, as a share of the requests it applies to.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultRates {
    /// Any request: answered 503 SlowDown, not forwarded.
    pub slow_down: f64,
    /// Any request: carried out, then answered 500.
    pub fail_after: f64,
    /// Any request: carried out, then the connection dropped.
    pub drop_after: f64,
    /// Any request: forwarded after a random delay.
    pub delay: f64,
    /// The shortest delay.
    pub min_delay: Duration,
    /// The longest delay.
    pub max_delay: Duration,
    /// Only requests whose path contains this are faulted (all, when `None`).
    pub only_paths: Option<String>,
    /// Fault each path at most once (a write answered 500 whose retry then goes through).
    pub once_per_path: bool,
    /// Fault only writes (`PUT`, `POST`, `DELETE`): a store that can be read but not written
    /// (throttled writes, a permissions mistake).
    pub only_writes: bool,
    /// `PUT`: the connection dropped at once, the request carried out later.
    pub late_write: f64,
    /// How much later a late write is carried out.
    pub late_write_delay: Duration,
    /// Rates of their own for the requests of some targets: each of slow down, fail after and
    /// drop after at this share, instead of the rates above.
    pub target_rates: Vec<(Target, f64)>,
}

impl FaultRates {
    /// No faults, every request held `latency`: the time S3 takes to answer, on a stand-in that
    /// answers at once.
    pub fn held(latency: Duration) -> Self {
        Self {
            delay: 1.0,
            min_delay: latency,
            max_delay: latency,
            ..Self::none()
        }
    }

    /// No faults: a plain proxy.
    pub fn none() -> Self {
        Self::uniform(0.0)
    }

    /// Every kind at `rate`, delays of up to 200 ms.
    pub fn uniform(rate: f64) -> Self {
        Self {
            slow_down: rate,
            fail_after: rate,
            drop_after: rate,
            delay: rate,
            min_delay: Duration::ZERO,
            max_delay: Duration::from_millis(200),
            only_paths: None,
            once_per_path: false,
            only_writes: false,
            late_write: 0.0,
            late_write_delay: Duration::from_secs(3),
            target_rates: Vec::new(),
        }
    }

    /// No faults, but every write held between `min` and `max` (drawn uniformly): a process
    /// doing writes takes a while at each, so that it can be killed in the middle.
    pub fn delaying_writes(min: Duration, max: Duration) -> Self {
        Self {
            delay: 1.0,
            min_delay: min,
            max_delay: max,
            only_writes: true,
            ..Self::none()
        }
    }

    /// Whether any request can be faulted (delays aside).
    pub fn any(&self) -> bool {
        [self.slow_down, self.fail_after, self.drop_after, self.late_write]
            .into_iter()
            .chain(self.target_rates.iter().map(|(_, r)| *r))
            .any(|r| r > 0.0)
    }

    /// These rates, with the targets the delivery guarantees hinge on faulted more often: a
    /// seventh of commits, half of checkpoints and a twentieth of log reads and LISTs each meet
    /// each kind of fault. None of them when `self` faults nothing.
    pub fn stressing_the_log(mut self) -> Self {
        if self.any() {
            self.target_rates = vec![
                (Target::Commit, 0.15),
                (Target::Checkpoint, 0.5),
                (Target::LogRead, 0.05),
                (Target::List, 0.05),
            ];
        }
        self
    }

    /// Rates from `LAKELOG_FAULT_RATE` (a share, e.g. `0.05`) when it is set, else `default`: the
    /// test suite runs at a low rate, and the documented command at 5%.
    pub fn from_env_or(default: f64) -> Self {
        let rate = std::env::var("LAKELOG_FAULT_RATE")
            .ok()
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|r| (0.0..=1.0).contains(r))
            .unwrap_or(default);
        Self::uniform(rate)
    }
}

/// Requests seen and faulted so far, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// Requests seen.
    pub requests: u64,
    /// Answered 503 SlowDown.
    pub slow_down: u64,
    /// Carried out, then answered 500.
    pub fail_after: u64,
    /// Carried out, then dropped.
    pub drop_after: u64,
    /// Delayed.
    pub delay: u64,
    /// Dropped at once and carried out later.
    pub late_write: u64,
}

impl FaultCounts {
    /// Requests that met a fault other than a delay.
    pub fn failures(&self) -> u64 {
        self.slow_down + self.fail_after + self.drop_after
    }

    /// Requests carried out whose answer was lost (500 or a dropped connection): for a commit,
    /// the writer cannot tell whether it landed.
    pub fn ambiguous(&self) -> u64 {
        self.fail_after + self.drop_after + self.late_write
    }
}

#[derive(Debug, Default)]
struct Counters {
    requests: AtomicU64,
    slow_down: AtomicU64,
    fail_after: AtomicU64,
    drop_after: AtomicU64,
    delay: AtomicU64,
    late_write: AtomicU64,
}

impl Counters {
    fn read(&self) -> FaultCounts {
        FaultCounts {
            requests: self.requests.load(Ordering::Relaxed),
            slow_down: self.slow_down.load(Ordering::Relaxed),
            fail_after: self.fail_after.load(Ordering::Relaxed),
            drop_after: self.drop_after.load(Ordering::Relaxed),
            delay: self.delay.load(Ordering::Relaxed),
            late_write: self.late_write.load(Ordering::Relaxed),
        }
    }
}

/// Requests seen, by how S3 prices them, and of those, the requests for the tables' Iceberg views
/// (a path or a listed prefix under `_iceberg/`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PricedCounts {
    /// PUT, COPY, POST and LIST requests (S3's higher tier).
    pub put: u64,
    /// GET and HEAD requests (the lower tier).
    pub get: u64,
    /// DELETE requests (free).
    pub delete: u64,
    /// Of `put`, those of the views.
    pub view_put: u64,
    /// Of `get`, those of the views.
    pub view_get: u64,
    /// Of `delete`, those of the views.
    pub view_delete: u64,
}

impl PricedCounts {
    /// The requests seen since `earlier`.
    pub fn since(&self, earlier: &PricedCounts) -> PricedCounts {
        PricedCounts {
            put: self.put - earlier.put,
            get: self.get - earlier.get,
            delete: self.delete - earlier.delete,
            view_put: self.view_put - earlier.view_put,
            view_get: self.view_get - earlier.view_get,
            view_delete: self.view_delete - earlier.view_delete,
        }
    }
}

/// The counters of [`PricedCounts`], in its order.
#[derive(Debug, Default)]
struct Priced([AtomicU64; 6]);

impl Priced {
    fn count(&self, method: &Method, path: &str, query: &str) {
        let tier = match *method {
            Method::GET if query.split('&').any(|p| p.starts_with("list-type=")) => 0,
            Method::GET | Method::HEAD => 1,
            Method::DELETE => 2,
            _ => 0,
        };
        self.0[tier].fetch_add(1, Ordering::Relaxed);
        if path.contains("/_iceberg/") || query.contains("_iceberg") {
            self.0[tier + 3].fetch_add(1, Ordering::Relaxed);
        }
    }

    fn read(&self) -> PricedCounts {
        let n = |i: usize| self.0[i].load(Ordering::Relaxed);
        PricedCounts {
            put: n(0),
            get: n(1),
            delete: n(2),
            view_put: n(3),
            view_get: n(4),
            view_delete: n(5),
        }
    }
}

#[derive(Debug)]
struct Shared {
    upstream: String,
    rates: Mutex<FaultRates>,
    rng: Mutex<StdRng>,
    faulted_paths: Mutex<std::collections::HashSet<String>>,
    client: reqwest::Client,
    counters: Counters,
    /// By [`Target`], in the order of [`Target::ALL`].
    target_counters: [Counters; 5],
    priced: Priced,
}

/// What to do with one request.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    None,
    SlowDown,
    FailAfter,
    DropAfter,
    Delay(Duration),
    LateWrite(Duration),
}

/// The proxy failed the request on purpose: hyper closes the connection without an answer.
#[derive(Debug, thiserror::Error)]
#[error("connection dropped by the fault proxy")]
struct Dropped;

/// A running fault proxy on `127.0.0.1`; stopped when dropped.
#[derive(Debug)]
pub struct FaultProxy {
    endpoint: String,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl FaultProxy {
    /// Starts a proxy to `upstream` (`http://127.0.0.1:PORT`) on a free port of `127.0.0.1`,
    /// faulting requests at `rates`, its draws made from `seed`.
    pub async fn start(upstream: &str, seed: u64, rates: FaultRates) -> Result<Self> {
        let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .context("binding the fault proxy to 127.0.0.1")?;
        let address = listener.local_addr()?;
        let client = reqwest::Client::builder()
            .no_proxy()
            .pool_idle_timeout(Duration::from_secs(5))
            .build()
            .context("building the fault proxy's HTTP client")?;
        let shared = Arc::new(Shared {
            upstream: upstream.trim_end_matches('/').to_owned(),
            rates: Mutex::new(rates),
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            faulted_paths: Mutex::new(std::collections::HashSet::new()),
            client,
            counters: Counters::default(),
            target_counters: Default::default(),
            priced: Priced::default(),
        });
        let accepting = Arc::clone(&shared);
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let shared = Arc::clone(&accepting);
                tokio::spawn(async move {
                    let service = service_fn(move |request| {
                        let shared = Arc::clone(&shared);
                        async move { handle(&shared, request).await }
                    });
                    // A dropped connection ends here with the `Dropped` error: that is the point.
                    let _ = http1::Builder::new().serve_connection(TokioIo::new(tcp), service).await;
                });
            }
        });
        Ok(Self {
            endpoint: format!("http://{address}"),
            shared,
            task,
        })
    }

    /// The proxy's endpoint, `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Changes the rates from now on (for example to none, once the writers are done).
    pub fn set_rates(&self, rates: FaultRates) {
        *self.shared.rates.lock().unwrap_or_else(PoisonError::into_inner) = rates;
    }

    /// Requests faulted so far, by kind.
    pub fn counts(&self) -> FaultCounts {
        self.shared.counters.read()
    }

    /// Requests of `target` seen and faulted so far, by kind.
    pub fn counts_for(&self, target: Target) -> FaultCounts {
        self.shared.target_counters[target as usize].read()
    }

    /// Requests seen so far, by how S3 prices them.
    pub fn priced(&self) -> PricedCounts {
        self.shared.priced.read()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn draw(shared: &Shared, method: &Method, path: &str, target: Target) -> Fault {
    let mut rates = shared.rates.lock().unwrap_or_else(PoisonError::into_inner).clone();
    if let Some(&(_, rate)) = rates.target_rates.iter().find(|(t, _)| *t == target) {
        (rates.slow_down, rates.fail_after, rates.drop_after) = (rate, rate, rate);
    }
    if rates.only_paths.as_deref().is_some_and(|p| !path.contains(p)) {
        return Fault::None;
    }
    if rates.only_writes && !matches!(*method, Method::PUT | Method::POST | Method::DELETE) {
        return Fault::None;
    }
    let fault = draw_kind(shared, &rates, method);
    if rates.once_per_path
        && fault != Fault::None
        && !shared
            .faulted_paths
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(path.to_owned())
    {
        return Fault::None;
    }
    fault
}

fn draw_kind(shared: &Shared, rates: &FaultRates, method: &Method) -> Fault {
    let mut rng = shared.rng.lock().unwrap_or_else(PoisonError::into_inner);
    if *method == Method::PUT && rng.random_bool(rates.late_write.clamp(0.0, 1.0)) {
        return Fault::LateWrite(rates.late_write_delay);
    }
    if rng.random_bool(rates.slow_down.clamp(0.0, 1.0)) {
        return Fault::SlowDown;
    }
    if rng.random_bool(rates.fail_after.clamp(0.0, 1.0)) {
        return Fault::FailAfter;
    }
    if rng.random_bool(rates.drop_after.clamp(0.0, 1.0)) {
        return Fault::DropAfter;
    }
    if rng.random_bool(rates.delay.clamp(0.0, 1.0)) {
        let max = u64::try_from(rates.max_delay.as_millis()).unwrap_or(u64::MAX).max(1);
        let min = u64::try_from(rates.min_delay.as_millis())
            .unwrap_or(u64::MAX)
            .clamp(1, max);
        return Fault::Delay(Duration::from_millis(rng.random_range(min..=max)));
    }
    Fault::None
}

fn s3_error(status: StatusCode, code: &str, message: &str) -> Response<Full<Bytes>> {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>{message}</Message>\
         <RequestId>FAULTPROXY</RequestId></Error>"
    );
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/xml"),
    );
    response
}

async fn handle(shared: &Shared, request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Dropped> {
    let method = request.method().clone();
    let path_and_query = request
        .uri()
        .path_and_query()
        .map_or_else(|| "/".to_owned(), |p| p.as_str().to_owned());
    let target = Target::of(&method, request.uri().path(), request.uri().query().unwrap_or_default());
    let count = |counter: fn(&Counters) -> &AtomicU64| {
        counter(&shared.counters).fetch_add(1, Ordering::Relaxed);
        counter(&shared.target_counters[target as usize]).fetch_add(1, Ordering::Relaxed);
    };
    count(|c| &c.requests);
    shared
        .priced
        .count(&method, request.uri().path(), request.uri().query().unwrap_or_default());
    let fault = draw(shared, &method, request.uri().path(), target);
    match fault {
        Fault::SlowDown => {
            count(|c| &c.slow_down);
            return Ok(s3_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "SlowDown",
                "Please reduce your request rate.",
            ));
        }
        Fault::Delay(delay) => {
            count(|c| &c.delay);
            tokio::time::sleep(delay).await;
        }
        Fault::None | Fault::FailAfter | Fault::DropAfter | Fault::LateWrite(_) => {}
    }
    let (parts, body) = request.into_parts();
    let Ok(body) = body.collect().await.map(http_body_util::Collected::to_bytes) else {
        return Err(Dropped);
    };
    let mut upstream = shared
        .client
        .request(parts.method, format!("{}{path_and_query}", shared.upstream))
        .body(body);
    for (name, value) in &parts.headers {
        if !matches!(
            name.as_str(),
            "host" | "content-length" | "connection" | "transfer-encoding" | "keep-alive"
        ) {
            upstream = upstream.header(name, value);
        }
    }
    if let Fault::LateWrite(delay) = fault {
        count(|c| &c.late_write);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = upstream.send().await;
        });
        return Err(Dropped);
    }
    let answer = match upstream.send().await {
        Ok(answer) => answer,
        Err(e) => {
            return Ok(s3_error(
                StatusCode::BAD_GATEWAY,
                "ProxyError",
                &format!("the stand-in did not answer: {e}"),
            ));
        }
    };
    let status = answer.status();
    let headers = answer.headers().clone();
    let Ok(bytes) = answer.bytes().await else {
        return Err(Dropped);
    };
    match fault {
        Fault::FailAfter => {
            count(|c| &c.fail_after);
            return Ok(s3_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                "We encountered an internal error. Please try again.",
            ));
        }
        Fault::DropAfter => {
            count(|c| &c.drop_after);
            return Err(Dropped);
        }
        Fault::None | Fault::SlowDown | Fault::Delay(_) | Fault::LateWrite(_) => {}
    }
    let mut response = Response::new(Full::new(bytes));
    *response.status_mut() = status;
    // Content-Length stays: the body is passed on whole, and a HEAD answer has none to count.
    for (name, value) in &headers {
        if !matches!(name.as_str(), "connection" | "transfer-encoding" | "keep-alive") {
            response.headers_mut().append(name, value.clone());
        }
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_sorted_by_what_they_are_for() {
        let log = "/lake/game_events/_delta_log";
        for (method, path, query, target) in [
            (
                Method::PUT,
                format!("{log}/00000000000000000012.json"),
                "",
                Target::Commit,
            ),
            (
                Method::GET,
                format!("{log}/00000000000000000012.json"),
                "",
                Target::LogRead,
            ),
            (Method::HEAD, format!("{log}/_last_checkpoint"), "", Target::LogRead),
            (
                Method::PUT,
                format!("{log}/00000000000000000010.checkpoint.parquet"),
                "",
                Target::Checkpoint,
            ),
            (Method::PUT, format!("{log}/_last_checkpoint"), "", Target::Checkpoint),
            (
                Method::GET,
                "/lake".to_owned(),
                "list-type=2&prefix=game_events%2F_delta_log%2F",
                Target::List,
            ),
            (
                Method::PUT,
                "/lake/game_events/eventDate=2026-11-20/part-0.parquet".to_owned(),
                "",
                Target::Other,
            ),
            (Method::PUT, format!("{log}/_commit_tmp.json"), "", Target::Other),
        ] {
            assert_eq!(Target::of(&method, &path, query), target, "{method} {path}?{query}");
        }
    }
}
