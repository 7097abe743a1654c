//! `lakelog serve`: the game events API on 127.0.0.1, running the Lambda's handler on each request
//! (converted to an API Gateway proxy event), in front of an embedded stream or a Kinesis stream.
//! With the embedded stream, `/` is a live page of the game KPIs of the events committed to the
//! local table (`/live` its figures and charts, as `lakelog report game` computes them).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context;
use aws_lambda_events::apigw::{ApiGatewayProxyRequest, ApiGatewayProxyResponse};
use aws_lambda_events::encodings::Body;
use bytes::Bytes;
use chrono::Utc;
use clap::Args;
use game_api::{
    ApiConfig, Games, KinesisSink, LocalStream, PartitionKey, RecordSink, StreamRef, answer, kinesis_client,
};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::net::TcpListener;

/// The name of the embedded stream.
pub const LOCAL_STREAM: &str = "game-events";

/// The table under `--lake` that the embedded sink appends to.
pub const EVENTS_TABLE: &str = "game_events";

/// Arguments of `lakelog serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Port on 127.0.0.1; 0 picks a free one (printed at start).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// The games and their API keys, a JSON file:
    /// {"games": [{"game": "space-miners", "key": "<20+ characters>", "maxAmount": 500}]}.
    /// A request's x-api-key names its game; other keys get 403.
    #[arg(long, value_name = "FILE")]
    pub games: PathBuf,
    /// Folder of the local Delta tables: the game-events sink, fed by the embedded stream as
    /// Kinesis feeds the Lambda, appends to DIR/game_events (rejects: DIR/game_events_rejects).
    #[arg(long, value_name = "DIR", default_value = "lake")]
    pub lake: PathBuf,
    /// Write to this Kinesis stream (name or ARN) instead of the embedded one. Endpoint, region
    /// and credentials come from the usual AWS environment variables (AWS_ENDPOINT_URL for a
    /// local stand-in).
    #[arg(long, value_name = "NAME", conflicts_with = "lake")]
    pub kinesis_stream: Option<String>,
    /// Partition key of the records: random (the eventId) or device_id.
    #[arg(long, default_value = "random", value_parser = parse_partition_key)]
    pub partition_key: PartitionKey,
    /// Records the embedded stream holds that no consumer took yet; beyond, requests get 503 as
    /// from a throttled stream.
    #[arg(long, default_value_t = game_api::DEFAULT_CAPACITY)]
    pub buffer: usize,
}

fn parse_partition_key(value: &str) -> Result<PartitionKey, String> {
    PartitionKey::parse("--partition-key", value).map_err(|e| e.to_string())
}

/// Counts of what the server answered.
#[derive(Debug, Default)]
struct Counters {
    requests: AtomicU64,
    events_written: AtomicU64,
    refused: AtomicU64,
    unavailable: AtomicU64,
}

/// The live view: the game report over the local table, computed at most once per
/// [`LiveView::FRESH`] however many pages ask.
struct LiveView {
    table: String,
    storage: lake::StorageConfig,
    last: tokio::sync::Mutex<Option<(std::time::Instant, String)>>,
}

impl LiveView {
    /// How long one computation of the figures is shown.
    const FRESH: Duration = Duration::from_secs(1);

    /// The JSON of [`lakelog_reports::game::GameReport::live`] over the table.
    async fn figures(&self) -> Result<String, lakelog_reports::ReportError> {
        let mut last = self.last.lock().await;
        if let Some((at, json)) = last.as_ref()
            && at.elapsed() < Self::FRESH
        {
            return Ok(json.clone());
        }
        let session = lakelog_reports::ReportSession::new();
        session
            .register_tables(EVENTS_TABLE, std::slice::from_ref(&self.table), &self.storage)
            .await?;
        let report = lakelog_reports::game::game_report(&session, EVENTS_TABLE, &Default::default()).await?;
        let json = report.live()?.to_string();
        *last = Some((std::time::Instant::now(), json.clone()));
        Ok(json)
    }
}

/// Runs `lakelog serve` until Ctrl-C.
pub fn run(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let runtime = super::runtime()?;
    runtime.block_on(serve(args))
}

async fn serve(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let config = ApiConfig {
        partition_key: args.partition_key,
        ..ApiConfig::default()
    };
    let games = Arc::new(Games::from_keys_file(&args.games)?);
    let listener = TcpListener::bind(("127.0.0.1", args.port))
        .await
        .with_context(|| format!("cannot listen on 127.0.0.1:{}", args.port))?;
    let address = listener.local_addr()?;
    if let Some(stream) = &args.kinesis_stream {
        let sdk = aws_config::load_from_env().await;
        let stream = StreamRef::parse(stream);
        eprintln!("lakelog serve: writing to the Kinesis stream {stream}");
        let sink = Arc::new(KinesisSink::new(kinesis_client(&sdk), stream));
        accept(listener, address, games, sink, config, None).await?;
    } else {
        let stream = Arc::new(LocalStream::with_capacity(LOCAL_STREAM, args.buffer.max(1)));
        let table = args.lake.join(EVENTS_TABLE);
        let table = table.to_str().context("the --lake path is not UTF-8")?;
        let sink_config = game_sink::Config::new(table, None)?;
        let sink = game_sink::Sink::open(&sink_config, &lake::StorageConfig::from_env())
            .await
            .with_context(|| format!("cannot open the table {table}"))?;
        // The embedded stream's name and shard are the same in every run: it continues after
        // what an earlier run committed, so that the sink never takes a new record for one it has.
        let committed = sink
            .position(stream.arn(), game_api::LOCAL_SHARD_ID)
            .await
            .with_context(|| format!("cannot read the stream's position in {table}"))?;
        if let Some(committed) = &committed {
            stream.continue_after(committed)?;
        }
        eprintln!(
            "lakelog serve: embedded stream {}{}; the game-events sink appends its records to {}",
            stream.arn(),
            committed.map_or_else(String::new, |c| format!(" (continuing after the committed {c})")),
            sink.events_uri()
        );
        let stop = Arc::new(AtomicBool::new(false));
        let live = Arc::new(LiveView {
            table: sink.events_uri().to_owned(),
            storage: lake::StorageConfig::from_env(),
            last: tokio::sync::Mutex::new(None),
        });
        let consumer = tokio::spawn(consume(Arc::clone(&stream), sink, Arc::clone(&stop)));
        accept(listener, address, games, Arc::clone(&stream), config, Some(live)).await?;
        stop.store(true, Ordering::Release);
        let (records, rows) = consumer.await.context("the stream consumer panicked")?;
        eprintln!("lakelog serve: the sink took {records} records and wrote {rows} rows");
    }
    Ok(ExitCode::SUCCESS)
}

/// Takes the embedded stream's records as a Kinesis event source takes them for the Lambda, in
/// batches of up to 1,000 (waiting at most half a second for a batch to fill), and hands them to
/// the same sink code until `stop` is set and the stream is empty. A batch whose commit fails is
/// handed over again from its first uncommitted record, as Lambda retries with
/// ReportBatchItemFailures. Returns the records taken and the rows written.
async fn consume(stream: Arc<LocalStream>, sink: game_sink::Sink, stop: Arc<AtomicBool>) -> (u64, u64) {
    const ATTEMPTS_WHEN_STOPPING: u32 = 5;
    let (mut taken, mut rows) = (0, 0);
    let mut pending = Vec::new();
    let mut failures = 0;
    loop {
        if pending.is_empty() {
            let stopping = stop.load(Ordering::Acquire);
            pending = stream.next_batch(1000, Duration::from_millis(500)).await;
            if pending.is_empty() {
                if stopping {
                    break;
                }
                continue;
            }
            taken += pending.len() as u64;
        }
        let (report, rest) = sink
            .process_until_committed(&pending, &lake::Retry::default(), 1, |_| Duration::ZERO)
            .await;
        rows += report.rows;
        if rest.is_empty() {
            pending.clear();
            failures = 0;
        } else if stop.load(Ordering::Acquire) && failures >= ATTEMPTS_WHEN_STOPPING {
            eprintln!(
                "lakelog serve: error: {} records of the stream could not be committed to {}; the stream \
                 had acknowledged them, so they are lost to this table",
                rest.len(),
                sink.events_uri()
            );
            break;
        } else {
            failures += 1;
            pending = rest.to_vec();
            eprintln!("lakelog serve: a batch was not committed; retrying in a second");
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    (taken, rows)
}

/// Serves connections until Ctrl-C.
async fn accept<S: RecordSink + 'static>(
    listener: TcpListener,
    address: SocketAddr,
    games: Arc<Games>,
    sink: Arc<S>,
    config: ApiConfig,
    live: Option<Arc<LiveView>>,
) -> anyhow::Result<()> {
    println!("lakelog serve: POST game events to http://{address}/events (Ctrl-C stops)");
    if live.is_some() {
        eprintln!("lakelog serve: live KPIs at http://{address}/");
    }
    let config = Arc::new(config);
    let counters = Arc::new(Counters::default());
    let mut report = tokio::time::interval(Duration::from_secs(10));
    report.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut reported = 0;
    let shutdown = tokio::signal::ctrl_c();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (tcp, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(err) => {
                        eprintln!("lakelog serve: cannot accept a connection: {err}");
                        continue;
                    }
                };
                let (games, sink, config, counters) =
                    (Arc::clone(&games), Arc::clone(&sink), Arc::clone(&config), Arc::clone(&counters));
                let live = live.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |request| {
                        let (games, sink, config, counters) =
                            (Arc::clone(&games), Arc::clone(&sink), Arc::clone(&config), Arc::clone(&counters));
                        let live = live.clone();
                        async move {
                            let served = route(request, peer, &games, &*sink, &config, &counters, live.as_deref());
                            Ok::<_, Infallible>(served.await)
                        }
                    });
                    if let Err(err) = http1::Builder::new().serve_connection(TokioIo::new(tcp), service).await {
                        tracing::debug!(%peer, error = %err, "connection closed with an error");
                    }
                });
            }
            _ = report.tick() => {
                let requests = counters.requests.load(Ordering::Relaxed);
                if requests != reported {
                    reported = requests;
                    eprintln!("lakelog serve: {}", summary(&counters));
                }
            }
            _ = &mut shutdown => break,
        }
    }
    eprintln!("lakelog serve: stopping; {}", summary(&counters));
    Ok(())
}

fn summary(counters: &Counters) -> String {
    format!(
        "{} requests, {} events written, {} requests refused (4xx), {} answered 503",
        counters.requests.load(Ordering::Relaxed),
        counters.events_written.load(Ordering::Relaxed),
        counters.refused.load(Ordering::Relaxed),
        counters.unavailable.load(Ordering::Relaxed),
    )
}

/// `/events` (also under a stage, `/prod/events`) goes to the handler; `GET /` is the live page
/// and `GET /live` its figures (with the embedded stream); anything else is 404.
async fn route<S: RecordSink>(
    request: Request<Incoming>,
    peer: SocketAddr,
    games: &Games,
    sink: &S,
    config: &ApiConfig,
    counters: &Counters,
    live: Option<&LiveView>,
) -> Response<Full<Bytes>> {
    let path = request.uri().path().trim_end_matches('/').to_owned();
    if request.method() == hyper::Method::GET && (path.is_empty() || path == "/live") {
        let Some(live) = live else {
            let body = json!({"message": "the live view reads the embedded stream's table: run lakelog serve without --kinesis-stream"});
            return plain(StatusCode::NOT_FOUND, &body);
        };
        if path.is_empty() {
            return typed(
                StatusCode::OK,
                "text/html; charset=utf-8",
                lakelog_reports::game::live_page(),
            );
        }
        return match live.figures().await {
            Ok(json) => typed(StatusCode::OK, "application/json", json),
            Err(err) => plain(StatusCode::INTERNAL_SERVER_ERROR, &json!({"message": err.to_string()})),
        };
    }
    if !(path == "/events" || path.ends_with("/events")) {
        let body = json!({"message": format!("no route {path}: POST game events to /events")});
        return plain(StatusCode::NOT_FOUND, &body);
    }
    counters.requests.fetch_add(1, Ordering::Relaxed);
    let proxy = match proxy_request(request, peer, config.max_body_bytes).await {
        Ok(proxy) => proxy,
        Err(response) => {
            counters.refused.fetch_add(1, Ordering::Relaxed);
            return response;
        }
    };
    let (response, answered) = answer(&proxy, games, sink, config).await;
    match response.status_code {
        200 => {
            counters
                .events_written
                .fetch_add(answered.written as u64, Ordering::Relaxed);
        }
        503 => {
            counters.unavailable.fetch_add(1, Ordering::Relaxed);
        }
        _ => {
            counters.refused.fetch_add(1, Ordering::Relaxed);
        }
    }
    http_response(response)
}

fn plain(status: StatusCode, body: &serde_json::Value) -> Response<Full<Bytes>> {
    typed(status, "application/json", body.to_string())
}

/// A response of `body` as `content_type`, never cached.
fn typed(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    headers.insert(
        hyper::header::CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("no-store"),
    );
    response
}

/// The API Gateway REST proxy event of an HTTP request ([`game_api::proxy_request`]), or
/// the answer to a body that is too large or cannot be read.
pub async fn proxy_request(
    request: Request<Incoming>,
    peer: SocketAddr,
    max_body_bytes: usize,
) -> Result<ApiGatewayProxyRequest, Response<Full<Bytes>>> {
    let (parts, body) = request.into_parts();
    let body = match Limited::new(body, max_body_bytes + 1).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(err) => {
            let status = if err.is::<http_body_util::LengthLimitError>() {
                StatusCode::PAYLOAD_TOO_LARGE
            } else {
                StatusCode::BAD_REQUEST
            };
            let message = if status == StatusCode::PAYLOAD_TOO_LARGE {
                format!("the body is larger than {max_body_bytes} bytes: send fewer events per request")
            } else {
                format!("the body could not be read: {err}")
            };
            return Err(plain(status, &json!({"message": message})));
        }
    };
    let mut proxy = game_api::proxy_request(parts, &body, Utc::now(), uuid::Uuid::new_v4().to_string(), "local");
    proxy.request_context.identity.source_ip = Some(peer.ip().to_string());
    Ok(proxy)
}

/// The HTTP response of an API Gateway proxy response.
pub fn http_response(response: ApiGatewayProxyResponse) -> Response<Full<Bytes>> {
    let body = match response.body {
        Some(Body::Text(text)) => Bytes::from(text),
        Some(Body::Binary(bytes)) => Bytes::from(bytes),
        Some(Body::Empty) | None => Bytes::new(),
        Some(_) => Bytes::new(),
    };
    let mut http = Response::new(Full::new(body));
    *http.status_mut() = StatusCode::from_u16(u16::try_from(response.status_code).unwrap_or(500))
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    *http.headers_mut() = response.headers;
    http
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gateway_responses_become_http_responses() {
        let mut proxy = ApiGatewayProxyResponse::default();
        proxy.status_code = 503;
        proxy
            .headers
            .insert("retry-after", hyper::header::HeaderValue::from_static("2"));
        proxy.body = Some(Body::Text("{\"failed\": 1}".into()));
        let http = http_response(proxy);
        assert_eq!(http.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(http.headers()["retry-after"], "2");
        let mut odd = ApiGatewayProxyResponse::default();
        odd.status_code = 99_999;
        assert_eq!(http_response(odd).status(), StatusCode::INTERNAL_SERVER_ERROR);
    }

    #[test]
    fn partition_keys_from_the_command_line() {
        assert_eq!(parse_partition_key("device_id"), Ok(PartitionKey::DeviceId));
        assert!(
            parse_partition_key("user")
                .unwrap_err()
                .contains("expected random or device_id")
        );
    }
}
