//! The demo's game traffic through the pipeline (`lakelog demo`): a season's requests, each
//! game's players with their game's key, through the API's handler into an embedded stream, and
//! the stream's records handed to the sink as a Kinesis event source hands them to the Lambda. One
//! malformed request is refused, and one request is sent again 30 seconds later, as a client that
//! timed out does.

use std::time::{Duration, Instant};

use aws_lambda_events::apigw::ApiGatewayProxyRequest;
use aws_lambda_events::encodings::Body;
use chrono::{DateTime, TimeDelta, Utc};
use fixtures::game::demo::{DEMO_GAMES, demo_game_of, requests, resent_event};
use fixtures::game::season::Season;
use game_api::{ApiConfig, Games, LocalStream, respond};
use game_events::GameEvent;
use serde_json::{Value, json};

/// Records the sink takes from the stream at once (the template's BatchSize).
pub const SINK_BATCH: usize = 1000;

/// Why the demo's traffic did not all reach the table.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// The API refused a planned request.
    #[error("the API answered {status} to request {index}: {message}")]
    Refused {
        /// The request's number, from 0.
        index: usize,
        /// Its answer's status.
        status: i64,
        /// Its answer's message.
        message: String,
    },
    /// Records the sink could not commit after five deliveries.
    #[error("{records} records could not be committed to {table} after 5 deliveries")]
    NotCommitted {
        /// How many.
        records: usize,
        /// The table.
        table: String,
    },
}

/// What sending a season did.
#[derive(Debug, Default)]
pub struct SeasonSent {
    /// The malformed request's answer: its status and message.
    pub malformed: (i64, String),
    /// Requests sent (the one sent twice counted twice).
    pub requests: u64,
    /// Events written to the stream.
    pub sent: u64,
    /// The sink's commits.
    pub commits: u64,
    /// What the sink did, over every batch.
    pub batches: game_sink::BatchReport,
    /// How long it took.
    pub took: Duration,
}

/// Sends `season` at its planned times (the requests' server time) with the keys of
/// [`DEMO_GAMES`] to the API's handler over `games`, into `stream`, and hands the stream's records
/// to `sink`; `now` is the malformed request's time.
pub async fn send_season(
    season: &Season,
    games: &Games,
    stream: &LocalStream,
    sink: &game_sink::Sink,
    now: DateTime<Utc>,
) -> Result<SeasonSent, DemoError> {
    let config = ApiConfig::default();
    let mut sent = SeasonSent::default();

    // A client with a bug: its request is refused whole, and nothing of it is written.
    let mut broken = requests(season).next().map(|r| r.events).unwrap_or_default();
    broken.truncate(3);
    let broken = json!({ "events": broken })
        .to_string()
        .replacen("\"eventName\"", "\"event_name\"", 1);
    let bad = client_request(&broken, now, "demo-bad-request", DEMO_GAMES[0].1);
    let answer = respond(&bad, games, stream, &config).await;
    sent.malformed = (answer.status_code, body_message(answer.body.as_ref()));

    // One request is sent again 30 seconds later, as a client that timed out does; by then the
    // sink has committed the first copy, so the table holds both until compaction.
    let resend = resent_event(season);
    let sending = Instant::now();
    let mut planned = 0u64;
    for (i, request) in requests(season).enumerate() {
        let mut attempts = vec![request.at];
        let first = planned;
        planned += request.events.len() as u64;
        if (first..planned).contains(&resend) {
            attempts.push(request.at + TimeDelta::seconds(30));
        }
        for (attempt, at) in attempts.into_iter().enumerate() {
            if attempt > 0 {
                sent.commits += drain(stream, sink, 1, &mut sent.batches).await?;
            }
            // Each game's players send with their game's key.
            for (game, (_, key)) in DEMO_GAMES.iter().enumerate() {
                let events: Vec<GameEvent> = request
                    .events
                    .iter()
                    .filter(|e| demo_game_of(e) == game)
                    .cloned()
                    .collect();
                if events.is_empty() {
                    continue;
                }
                let body = json!({ "events": events }).to_string();
                let proxy = client_request(&body, at, &format!("demo-{}", sent.requests), key);
                sent.requests += 1;
                let answer = respond(&proxy, games, stream, &config).await;
                if answer.status_code != 200 {
                    return Err(DemoError::Refused {
                        index: i,
                        status: answer.status_code,
                        message: body_message(answer.body.as_ref()),
                    });
                }
                sent.sent += events.len() as u64;
            }
        }
        sent.commits += drain(stream, sink, SINK_BATCH, &mut sent.batches).await?;
    }
    sent.commits += drain(stream, sink, 1, &mut sent.batches).await?;
    sent.took = sending.elapsed();
    Ok(sent)
}

/// The API Gateway proxy event of a game client's POST of `body` at `at`, with its game's key.
fn client_request(body: &str, at: DateTime<Utc>, request_id: &str, key: &str) -> ApiGatewayProxyRequest {
    let mut request = hyper::Request::new(());
    *request.method_mut() = hyper::Method::POST;
    *request.uri_mut() = hyper::Uri::from_static("/events");
    let headers = request.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    if let Ok(key) = hyper::header::HeaderValue::from_str(key) {
        headers.insert(game_api::API_KEY_HEADER, key);
    }
    let (parts, ()) = request.into_parts();
    game_api::proxy_request(parts, body.as_bytes(), at, request_id.to_owned(), "demo")
}

/// Hands the stream's records to the sink in batches of [`SINK_BATCH`] while at least `min` are
/// waiting, as a Kinesis event source does; returns the commits.
async fn drain(
    stream: &LocalStream,
    sink: &game_sink::Sink,
    min: usize,
    totals: &mut game_sink::BatchReport,
) -> Result<u64, DemoError> {
    let mut commits = 0;
    while stream.len() >= min.max(1) {
        totals.add(deliver(sink, stream.take(SINK_BATCH)).await?);
        commits += 1;
    }
    Ok(commits)
}

/// Hands a batch to the sink as Lambda does with ReportBatchItemFailures: what was not committed
/// is delivered again, a few times.
async fn deliver(
    sink: &game_sink::Sink,
    batch: Vec<aws_lambda_events::kinesis::KinesisEventRecord>,
) -> Result<game_sink::BatchReport, DemoError> {
    let (report, rest) = sink
        .process_until_committed(&batch, &lake::Retry::default(), 5, |n| {
            Duration::from_millis(200 * u64::from(n))
        })
        .await;
    if !rest.is_empty() {
        return Err(DemoError::NotCommitted {
            records: rest.len(),
            table: sink.events_uri().to_owned(),
        });
    }
    Ok(report)
}

/// The `message` of an API answer's JSON body.
fn body_message(body: Option<&Body>) -> String {
    let text = match body {
        Some(Body::Text(text)) => text.as_str(),
        _ => return String::new(),
    };
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| v["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| text.to_owned())
}
