//! The game events pipeline on one machine. As `lakelog serve` runs it: HTTP requests turned into
//! the API Gateway proxy events the Lambda's handler takes ([`proxy_request`]), its answers into
//! HTTP responses ([`http_response`]), the routes and their counts ([`accept`]), and the consumer
//! that hands the embedded stream's records to the sink as Lambda's Kinesis event source does
//! ([`consume`]); what the live page shows comes from the caller ([`Live`]). As `lakelog demo`
//! runs it: a season's traffic through the handler, the stream and the sink ([`demo`]).

pub mod demo;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use aws_lambda_events::apigw::{ApiGatewayProxyRequest, ApiGatewayProxyResponse};
use aws_lambda_events::encodings::Body;
use bytes::Bytes;
use chrono::Utc;
use game_api::{ApiConfig, Games, LocalStream, RecordSink, answer};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::net::TcpListener;

/// The live view of what the server's stream committed: its page (`GET /`) and its figures
/// (`GET /live`, JSON).
pub trait Live: Send + Sync + 'static {
    /// The page, HTML.
    fn page(&self) -> String;
    /// The figures, JSON; `Err` with what went wrong.
    fn figures(&self) -> impl std::future::Future<Output = Result<String, String>> + Send;
}

/// Counts of what the server answered.
#[derive(Debug, Default)]
pub struct Counters {
    /// Requests to `/events`.
    pub requests: AtomicU64,
    /// Events written.
    pub events_written: AtomicU64,
    /// Requests refused (4xx).
    pub refused: AtomicU64,
    /// Requests answered 503.
    pub unavailable: AtomicU64,
}

/// Takes the embedded stream's records as a Kinesis event source takes them for the Lambda, in
/// batches of up to 1,000 (waiting at most half a second for a batch to fill), and hands them to
/// the same sink code until `stop` is set and the stream is empty. A batch whose commit fails is
/// handed over again from its first uncommitted record, as Lambda retries with
/// ReportBatchItemFailures. Returns the records taken and the rows written.
pub async fn consume(stream: Arc<LocalStream>, sink: game_sink::Sink, stop: Arc<AtomicBool>) -> (u64, u64) {
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
pub async fn accept<S: RecordSink + 'static, L: Live>(
    listener: TcpListener,
    address: SocketAddr,
    games: Arc<Games>,
    sink: Arc<S>,
    config: ApiConfig,
    live: Option<Arc<L>>,
) {
    let ctrl_c = async {
        // No signal handler: served until the process ends.
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    accept_until(listener, address, games, sink, config, live, ctrl_c).await;
}

/// Serves connections until `shutdown` completes.
pub async fn accept_until<S: RecordSink + 'static, L: Live>(
    listener: TcpListener,
    address: SocketAddr,
    games: Arc<Games>,
    sink: Arc<S>,
    config: ApiConfig,
    live: Option<Arc<L>>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    println!("lakelog serve: POST game events to http://{address}/events (Ctrl-C stops)");
    if live.is_some() {
        eprintln!("lakelog serve: live KPIs at http://{address}/");
    }
    let config = Arc::new(config);
    let counters = Arc::new(Counters::default());
    let mut report = tokio::time::interval(Duration::from_secs(10));
    report.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut reported = 0;
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
}

/// What the server answered so far, in words.
pub fn summary(counters: &Counters) -> String {
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
async fn route<S: RecordSink, L: Live>(
    request: Request<Incoming>,
    peer: SocketAddr,
    games: &Games,
    sink: &S,
    config: &ApiConfig,
    counters: &Counters,
    live: Option<&L>,
) -> Response<Full<Bytes>> {
    let path = request.uri().path().trim_end_matches('/').to_owned();
    if request.method() == hyper::Method::GET && (path.is_empty() || path == "/live") {
        let Some(live) = live else {
            let body = json!({"message": "the live view reads the embedded stream's table: run lakelog serve without --kinesis-stream"});
            return plain(StatusCode::NOT_FOUND, &body);
        };
        if path.is_empty() {
            return typed(StatusCode::OK, "text/html; charset=utf-8", live.page());
        }
        return match live.figures().await {
            Ok(json) => typed(StatusCode::OK, "application/json", json),
            Err(err) => plain(StatusCode::INTERNAL_SERVER_ERROR, &json!({"message": err})),
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
}
