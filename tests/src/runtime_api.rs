//! A local Lambda Runtime API, for running a function's real `bootstrap` binary as Lambda runs it.
//!
//! [`RuntimeApi::start`] serves the four routes a custom runtime uses on `127.0.0.1`:
//! `GET /2018-06-01/runtime/invocation/next` (the next queued event, a long poll),
//! `POST .../invocation/{id}/response`, `POST .../invocation/{id}/error` and
//! `POST .../runtime/init/error`. [`Function::start`] starts a binary with `AWS_LAMBDA_RUNTIME_API`
//! pointing at it and only the variables it is given (as Lambda does: nothing of the test's own
//! environment leaks in); [`Function::invoke`] queues an event and waits for its answer.
//!
//! ```no_run
//! use lakelog_tests::runtime_api::{Answer, Function};
//!
//! let bin = std::path::Path::new("target/debug/game-api-lambda");
//! let function = Function::start(bin, &[("GAME_EVENTS_STREAM", "game-events")])?;
//! match function.invoke(br#"{"httpMethod": "POST"}"#, std::time::Duration::from_secs(30))? {
//!     Answer::Response(body) => println!("{body}"),
//!     Answer::Error { error_type, body } => println!("{error_type}: {body}"),
//! }
//! # Ok::<(), anyhow::Error>(())
//! ```

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};

const PREFIX: &str = "/2018-06-01/runtime";

/// What a function answered to one invocation.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// `POST .../response`: the handler's result, as JSON.
    Response(serde_json::Value),
    /// `POST .../error`: the error type header and the error document.
    Error {
        /// `Lambda-Runtime-Function-Error-Type`.
        error_type: String,
        /// The body: `{"errorType": ..., "errorMessage": ...}`.
        body: serde_json::Value,
    },
}

/// An init error a function reported (`POST /runtime/init/error`).
#[derive(Debug, Clone, PartialEq)]
pub struct InitError {
    /// `Lambda-Runtime-Function-Error-Type`.
    pub error_type: String,
    /// The body: `{"errorType": ..., "errorMessage": ...}`.
    pub body: serde_json::Value,
}

#[derive(Default)]
struct State {
    queue: VecDeque<(String, Vec<u8>, u64)>,
    answers: HashMap<String, Answer>,
    init_error: Option<InitError>,
    /// When the function first asked for an event.
    first_next: Option<Instant>,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    stop: AtomicBool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The Runtime API server; it stops when dropped.
pub struct RuntimeApi {
    address: SocketAddr,
    shared: Arc<Shared>,
    next_id: AtomicU64,
    /// The function's timeout: each invocation's deadline is this far after it is queued.
    function_timeout: Duration,
}

/// The longest timeout a function may have, the deadline [`RuntimeApi::start`] gives invocations.
pub const MAX_FUNCTION_TIMEOUT: Duration = Duration::from_secs(900);

impl RuntimeApi {
    /// Serves on a free port of 127.0.0.1, one thread per connection, for a function whose
    /// timeout is `function_timeout`.
    pub fn start(function_timeout: Duration) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").context("binding the Runtime API")?;
        let address = listener.local_addr()?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let accepting = Arc::clone(&shared);
        thread::spawn(move || {
            for stream in listener.incoming() {
                if accepting.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let shared = Arc::clone(&accepting);
                thread::spawn(move || {
                    // A connection that fails mid-request ends; the function reconnects.
                    let _ = serve(stream, &shared);
                });
            }
        });
        Ok(Self {
            address,
            shared,
            next_id: AtomicU64::new(1),
            function_timeout,
        })
    }

    /// `host:port`, the value of `AWS_LAMBDA_RUNTIME_API`.
    pub fn address(&self) -> String {
        self.address.to_string()
    }

    /// Queues `event` for the next `/next` (its deadline the function's timeout from now) and
    /// waits up to `timeout` for the function's answer.
    pub fn invoke(&self, event: &[u8], timeout: Duration) -> Result<Answer> {
        let id = format!("request-{}", self.next_id.fetch_add(1, Ordering::SeqCst));
        let now_ms = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as u64;
        let deadline_ms = now_ms + self.function_timeout.as_millis() as u64;
        let mut state = self.shared.lock();
        state.queue.push_back((id.clone(), event.to_vec(), deadline_ms));
        self.shared.changed.notify_all();
        let started = Instant::now();
        loop {
            if let Some(answer) = state.answers.remove(&id) {
                return Ok(answer);
            }
            if let Some(init) = &state.init_error {
                bail!("the function failed at init: {init:?}");
            }
            let left = timeout.checked_sub(started.elapsed()).unwrap_or_default();
            if left.is_zero() {
                bail!("no answer to {id} within {timeout:?}");
            }
            state = self
                .shared
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Waits up to `timeout` for the function's first `/next` (it finished its init) or for an
    /// init error; `Ok(when)` for the first.
    pub fn wait_ready(&self, timeout: Duration) -> std::result::Result<Instant, Option<InitError>> {
        let started = Instant::now();
        let mut state = self.shared.lock();
        loop {
            if let Some(init) = &state.init_error {
                return Err(Some(init.clone()));
            }
            if let Some(at) = state.first_next {
                return Ok(at);
            }
            let left = timeout.checked_sub(started.elapsed()).unwrap_or_default();
            if left.is_zero() {
                return Err(None);
            }
            state = self
                .shared
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

impl Drop for RuntimeApi {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.changed.notify_all();
        // Wakes the accepting thread so that it sees `stop`.
        let _ = TcpStream::connect(self.address);
    }
}

/// One HTTP/1.1 request.
struct Request {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// Reads one request, or `None` at the end of the connection.
fn read_request(reader: &mut BufReader<TcpStream>) -> Result<Option<Request>> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let (Some(method), Some(path)) = (parts.next(), parts.next()) else {
        bail!("not an HTTP request line: {line:?}");
    };
    let (method, path) = (method.to_owned(), path.to_owned());
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header)?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let mut request = Request {
        method,
        path,
        headers,
        body: Vec::new(),
    };
    if request
        .header("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size)?;
            let size = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)?;
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk)?;
            if size == 0 {
                break;
            }
            request.body.extend_from_slice(&chunk[..size]);
        }
    } else if let Some(length) = request.header("content-length") {
        let mut body = vec![0; length.parse()?];
        reader.read_exact(&mut body)?;
        request.body = body;
    }
    Ok(Some(request))
}

fn respond(stream: &mut TcpStream, status: &str, headers: &[(&str, String)], body: &[u8]) -> Result<()> {
    let mut out = format!("HTTP/1.1 {status}\r\ncontent-length: {}\r\n", body.len());
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("\r\n");
    stream.write_all(out.as_bytes())?;
    stream.write_all(body)?;
    Ok(())
}

fn json_body(body: &[u8]) -> serde_json::Value {
    serde_json::from_slice(body)
        .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(body).into_owned()))
}

/// Serves the requests of one connection (keep-alive) until it closes.
fn serve(stream: TcpStream, shared: &Shared) -> Result<()> {
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    while let Some(request) = read_request(&mut reader)? {
        let route = request.path.strip_prefix(PREFIX).unwrap_or(&request.path);
        let error_type = || {
            request
                .header("lambda-runtime-function-error-type")
                .unwrap_or("")
                .to_owned()
        };
        match (request.method.as_str(), route) {
            ("GET", "/invocation/next") => {
                let mut state = shared.lock();
                state.first_next.get_or_insert_with(Instant::now);
                shared.changed.notify_all();
                let (id, event, deadline_ms) = loop {
                    if shared.stop.load(Ordering::SeqCst) {
                        return Ok(());
                    }
                    if let Some(next) = state.queue.pop_front() {
                        break next;
                    }
                    state = shared
                        .changed
                        .wait_timeout(state, Duration::from_millis(200))
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                };
                drop(state);
                let headers = [
                    ("lambda-runtime-aws-request-id", id),
                    ("lambda-runtime-deadline-ms", deadline_ms.to_string()),
                    (
                        "lambda-runtime-invoked-function-arn",
                        "arn:aws:lambda:us-east-1:123456789012:function:lakelog-test".to_owned(),
                    ),
                    (
                        "lambda-runtime-trace-id",
                        "Root=1-00000000-000000000000000000000000".to_owned(),
                    ),
                    ("content-type", "application/json".to_owned()),
                ];
                respond(&mut writer, "200 OK", &headers, &event)?;
            }
            ("POST", "/init/error") => {
                let mut state = shared.lock();
                state.init_error = Some(InitError {
                    error_type: error_type(),
                    body: json_body(&request.body),
                });
                shared.changed.notify_all();
                drop(state);
                respond(&mut writer, "202 Accepted", &[], b"{}")?;
            }
            ("POST", route) if route.starts_with("/invocation/") => {
                let rest = &route["/invocation/".len()..];
                let answer = match rest.rsplit_once('/') {
                    Some((id, "response")) => Some((id, Answer::Response(json_body(&request.body)))),
                    Some((id, "error")) => Some((
                        id,
                        Answer::Error {
                            error_type: error_type(),
                            body: json_body(&request.body),
                        },
                    )),
                    _ => None,
                };
                match answer {
                    Some((id, answer)) => {
                        let mut state = shared.lock();
                        state.answers.insert(id.to_owned(), answer);
                        shared.changed.notify_all();
                        drop(state);
                        respond(&mut writer, "202 Accepted", &[], b"{}")?;
                    }
                    None => respond(&mut writer, "404 Not Found", &[], b"{}")?,
                }
            }
            _ => respond(&mut writer, "404 Not Found", &[], b"{}")?,
        }
    }
    Ok(())
}

/// A function's binary running against its own [`RuntimeApi`]; killed when dropped.
pub struct Function {
    api: RuntimeApi,
    child: Process,
    started: Instant,
    stdout: Output,
    stderr: Output,
}

/// A child process that is killed when dropped.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What a process wrote to one of its pipes, read as it writes (so that it never blocks on a full
/// pipe).
struct Output {
    text: Arc<Mutex<Vec<u8>>>,
    reader: Option<thread::JoinHandle<()>>,
}

impl Output {
    fn drain(pipe: Option<impl Read + Send + 'static>) -> Self {
        let text = Arc::new(Mutex::new(Vec::new()));
        let reader = pipe.map(|mut pipe| {
            let text = Arc::clone(&text);
            thread::spawn(move || {
                let mut buf = [0; 8192];
                while let Ok(n @ 1..) = pipe.read(&mut buf) {
                    text.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .extend_from_slice(&buf[..n]);
                }
            })
        });
        Self { text, reader }
    }

    /// Everything, once the process has exited.
    fn finish(mut self) -> String {
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        let text = self.text.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&text).into_owned()
    }
}

impl Function {
    /// Starts `binary` as Lambda would: an empty environment but for `vars`, the Runtime API's
    /// address, a region, a function name and the handler settings Lambda sets. Invocations get
    /// the deadline of the longest function timeout ([`MAX_FUNCTION_TIMEOUT`]).
    pub fn start(binary: &Path, vars: &[(&str, &str)]) -> Result<Self> {
        Self::start_with_timeout(binary, vars, MAX_FUNCTION_TIMEOUT)
    }

    /// [`Function::start`] for a function whose timeout is `function_timeout`.
    pub fn start_with_timeout(binary: &Path, vars: &[(&str, &str)], function_timeout: Duration) -> Result<Self> {
        let api = RuntimeApi::start(function_timeout)?;
        let mut command = Command::new(binary);
        command
            .env_clear()
            .env("AWS_LAMBDA_RUNTIME_API", api.address())
            .env("AWS_REGION", crate::standin::REGION)
            .env("AWS_DEFAULT_REGION", crate::standin::REGION)
            .env("AWS_LAMBDA_FUNCTION_NAME", "lakelog-test")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "1024")
            .env("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/lakelog-test")
            .env("AWS_LAMBDA_LOG_STREAM_NAME", "test")
            .env("RUST_LOG", "warn");
        for (name, value) in vars {
            command.env(name, value);
        }
        let started = Instant::now();
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let stdout = Output::drain(child.stdout.take());
        let stderr = Output::drain(child.stderr.take());
        Ok(Self {
            api,
            child: Process(child),
            started,
            stdout,
            stderr,
        })
    }

    /// The variables that point a function's AWS clients and Delta tables at the stand-in at
    /// `endpoint`, with its dummy credentials.
    pub fn standin_vars(endpoint: &str) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", endpoint.to_owned()),
            ("AWS_ALLOW_HTTP", "true".to_owned()),
            ("AWS_ACCESS_KEY_ID", crate::standin::ACCESS_KEY_ID.to_owned()),
            ("AWS_SECRET_ACCESS_KEY", crate::standin::SECRET_ACCESS_KEY.to_owned()),
        ]
    }

    /// Queues `event` and waits up to `timeout` for the answer.
    pub fn invoke(&self, event: &[u8], timeout: Duration) -> Result<Answer> {
        self.api.invoke(event, timeout)
    }

    /// The time from the process' start to its first `/next` (its init), or the init error it
    /// reported (`Err(None)`: neither within `timeout`).
    pub fn init_time(&self, timeout: Duration) -> std::result::Result<Duration, Option<InitError>> {
        self.api.wait_ready(timeout).map(|at| at.duration_since(self.started))
    }

    /// Starts `binary` with `vars` as [`Function::start`] does, and expects it to fail at init:
    /// a `Runtime.InitError` reported to the Runtime API within `timeout`, then exit status 1,
    /// and no `Debug` dump of the error on stderr. Returns the error's message.
    pub fn expect_init_error(binary: &Path, vars: &[(&str, &str)], timeout: Duration) -> Result<String> {
        let function = Self::start(binary, vars)?;
        let init = match function.init_time(timeout) {
            Err(Some(init)) => init,
            Ok(took) => bail!("{} started (init {took:?}) instead of failing", binary.display()),
            Err(None) => bail!(
                "{}: neither init nor an init error within {timeout:?}",
                binary.display()
            ),
        };
        let exited = function.exit(timeout);
        if init.error_type != "Runtime.InitError" || init.body["errorType"] != "Runtime.InitError" {
            bail!("not a Runtime.InitError: {init:?}");
        }
        if exited.code != Some(1) || exited.stderr.contains("Missing {") {
            bail!("exit {:?}, stderr: {}", exited.code, exited.stderr);
        }
        Ok(init.body["errorMessage"].as_str().unwrap_or_default().to_owned())
    }

    /// The process' peak resident memory so far, in KiB (Linux: `VmHWM`).
    pub fn peak_rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.0.id())).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }

    /// Waits up to `timeout` for the process to exit by itself (it is killed after that); its
    /// exit code (`None` when it was killed) and what it wrote to stdout and stderr.
    pub fn exit(self, timeout: Duration) -> Exited {
        let Self {
            api,
            mut child,
            stdout,
            stderr,
            ..
        } = self;
        let started = Instant::now();
        let code = loop {
            match child.0.try_wait() {
                Ok(Some(status)) => break status.code(),
                Ok(None) if started.elapsed() < timeout => thread::sleep(Duration::from_millis(10)),
                _ => {
                    let _ = child.0.kill();
                    let _ = child.0.wait();
                    break None;
                }
            }
        };
        drop(child);
        drop(api);
        Exited {
            code,
            stdout: stdout.finish(),
            stderr: stderr.finish(),
        }
    }

    /// Stops the process; what it wrote (its logs and metrics).
    pub fn stop(self) -> Exited {
        self.exit(Duration::ZERO)
    }
}

/// A function's process after it ended.
#[derive(Debug)]
pub struct Exited {
    /// The exit code; `None` when it was killed.
    pub code: Option<i32>,
    /// Everything it wrote to stdout.
    pub stdout: String,
    /// Everything it wrote to stderr.
    pub stderr: String,
}

impl Exited {
    /// The CloudWatch embedded metric format documents among the lines of stdout.
    pub fn metrics(&self) -> Vec<serde_json::Value> {
        self.stdout
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter(|document| document.get("_aws").is_some())
            .collect()
    }

    /// The sum of metric `name` over the documents whose dimension values include `dimensions`,
    /// after checking that each such document declares `name` with `unit` in `namespace`.
    pub fn metric_sum(&self, namespace: &str, name: &str, unit: &str, dimensions: &[(&str, &str)]) -> f64 {
        let mut sum = 0.0;
        for document in self.metrics() {
            let Some(value) = document.get(name).and_then(serde_json::Value::as_f64) else {
                continue;
            };
            if !dimensions
                .iter()
                .all(|(k, v)| document.get(*k).and_then(|d| d.as_str()) == Some(*v))
            {
                continue;
            }
            let declared = &document["_aws"]["CloudWatchMetrics"][0];
            // CloudWatch keeps a metric per set of dimensions: a document whose set is not
            // exactly `dimensions` is another metric.
            let sets = declared["Dimensions"].as_array().cloned().unwrap_or_default();
            let exact = sets.iter().any(|set| {
                set.as_array().is_some_and(|names| {
                    names.len() == dimensions.len() && dimensions.iter().all(|(k, _)| names.iter().any(|n| n == *k))
                })
            });
            if !exact {
                continue;
            }
            assert_eq!(declared["Namespace"], namespace, "{document}");
            let metrics = declared["Metrics"].as_array().cloned().unwrap_or_default();
            assert!(
                metrics.iter().any(|m| m["Name"] == name && m["Unit"] == unit),
                "{name} not declared with unit {unit}: {document}"
            );
            sum += value;
        }
        sum
    }
}
