//! A game client's side of the API (`lakelog send-events`): a batch of events sent as one request,
//! gzip if asked, and what was not written sent again with the same `eventId`s, waiting as the
//! answer's `Retry-After` says, until every event is written, refused or out of resends
//! (docs/client-api.md is the contract).

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::time::{Duration, Instant};

use flate2::Compression;
use flate2::write::GzEncoder;
use game_events::{GameEvent, PURCHASE_EVENT};
use reqwest::header::{CONTENT_ENCODING, CONTENT_TYPE, RETRY_AFTER};
use serde_json::{Value, json};

/// What became of one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// The API answered that it reached the stream.
    Written,
    /// The API refused its request (4xx): resending cannot help.
    Refused,
    /// Still not written after every resend.
    Failed,
}

impl Status {
    /// `written`, `refused` or `failed`.
    pub fn name(self) -> &'static str {
        match self {
            Status::Written => "written",
            Status::Refused => "refused",
            Status::Failed => "failed",
        }
    }
}

/// The result of one batch of events, over all its attempts.
#[derive(Debug, Default)]
pub struct BatchOutcome {
    /// Each event with what became of it (`None`: never answered for).
    pub events: Vec<(GameEvent, Option<Status>)>,
    /// Each exchange's time, in milliseconds.
    pub exchanges: Vec<f64>,
    /// Events sent again.
    pub resent: u64,
    /// Answers by HTTP status.
    pub statuses: BTreeMap<u16, u64>,
    /// What went wrong, in words.
    pub errors: Vec<String>,
}

/// Totals of a run.
#[derive(Debug, Default)]
pub struct Totals {
    /// Events sent.
    pub events: u64,
    /// Events by [`Status::name`].
    pub by_status: BTreeMap<&'static str, u64>,
    /// Each exchange's time, in milliseconds.
    pub latencies_ms: Vec<f64>,
    /// Events sent again.
    pub resent: u64,
    /// Answers by HTTP status.
    pub statuses: BTreeMap<u16, u64>,
    /// The first few distinct problems, in words.
    pub errors: Vec<String>,
    /// Events by name.
    pub names: BTreeMap<String, u64>,
    /// Events by platform.
    pub platforms: BTreeMap<String, u64>,
    /// The devices that sent.
    pub devices: HashSet<String>,
    /// Purchases sent.
    pub purchases: u64,
    /// Their amounts, summed.
    pub bookings: f64,
}

impl Totals {
    /// Adds `outcome`, and writes each of its events with its status to `out` as a JSON line.
    pub fn add(&mut self, outcome: BatchOutcome, out: Option<&mut dyn Write>) -> std::io::Result<()> {
        self.latencies_ms.extend(outcome.exchanges);
        self.resent += outcome.resent;
        for (status, count) in outcome.statuses {
            *self.statuses.entry(status).or_default() += count;
        }
        for error in outcome.errors {
            if self.errors.len() < 5 && !self.errors.contains(&error) {
                self.errors.push(error);
            }
        }
        let mut out = out;
        for (event, status) in outcome.events {
            let status = status.unwrap_or(Status::Failed);
            self.events += 1;
            *self.by_status.entry(status.name()).or_default() += 1;
            *self.names.entry(event.event_name.clone()).or_default() += 1;
            if let Some(params) = &event.event_params {
                if let Some(platform) = &params.platform {
                    *self.platforms.entry(platform.clone()).or_default() += 1;
                }
                if let Some(device) = &params.device_id {
                    self.devices.insert(device.clone());
                }
                if event.event_name == PURCHASE_EVENT
                    && let Some(amount) = params.amount
                {
                    self.purchases += 1;
                    self.bookings += amount;
                }
            }
            if let Some(out) = out.as_deref_mut() {
                serde_json::to_writer(&mut *out, &json!({"status": status.name(), "event": event}))?;
                out.write_all(b"\n")?;
            }
        }
        Ok(())
    }

    /// The events that ended as `status`.
    pub fn count(&self, status: Status) -> u64 {
        self.by_status.get(status.name()).copied().unwrap_or(0)
    }

    /// The `p`th percentile of the exchanges' times (nearest rank), 0 when there were none.
    pub fn percentile(&mut self, p: f64) -> f64 {
        if self.latencies_ms.is_empty() {
            return 0.0;
        }
        self.latencies_ms.sort_by(f64::total_cmp);
        let rank = ((p / 100.0) * self.latencies_ms.len() as f64).ceil() as usize;
        self.latencies_ms[rank.clamp(1, self.latencies_ms.len()) - 1]
    }
}

/// How to make requests.
#[derive(Debug)]
pub struct RequestSettings {
    /// The HTTP client.
    pub client: reqwest::Client,
    /// The API's `/events` URL.
    pub url: String,
    /// The game's key, sent as `x-api-key`.
    pub api_key: Option<String>,
    /// Whether bodies go gzip (`Content-Encoding: gzip`).
    pub gzip: bool,
    /// How often what was not written is sent again.
    pub retries: u32,
}

/// The answer to one HTTP exchange.
enum Answer {
    /// Every event written.
    AllWritten,
    /// 503: the eventIds not written, and how long to wait.
    SomeFailed(HashSet<String>, Duration),
    /// Refused: resending the same request cannot help.
    Refused(String),
    /// No usable answer (connection error, time-out, 5xx other than 503).
    Unanswered(String),
}

/// Sends `events`, and resends those not written, up to `retries` times.
pub async fn send_batch(settings: &RequestSettings, events: Vec<GameEvent>) -> BatchOutcome {
    let mut outcome = BatchOutcome {
        events: events.into_iter().map(|e| (e, None)).collect(),
        ..BatchOutcome::default()
    };
    let mut pending: Vec<usize> = (0..outcome.events.len()).collect();
    for attempt in 0..=settings.retries {
        if attempt > 0 {
            outcome.resent += pending.len() as u64;
        }
        let body = json!({"events": pending.iter().map(|&i| &outcome.events[i].0).collect::<Vec<_>>()});
        let started = Instant::now();
        let answer = exchange(settings, &body, &mut outcome.statuses).await;
        outcome.exchanges.push(started.elapsed().as_secs_f64() * 1e3);
        let wait = match answer {
            Answer::AllWritten => {
                for &i in &pending {
                    outcome.events[i].1 = Some(Status::Written);
                }
                return outcome;
            }
            Answer::Refused(message) => {
                for &i in &pending {
                    outcome.events[i].1 = Some(Status::Refused);
                }
                outcome.errors.push(message);
                return outcome;
            }
            Answer::SomeFailed(failed, wait) => {
                pending.retain(|&i| {
                    let id = outcome.events[i]
                        .0
                        .event_id
                        .map(|id| id.to_string())
                        .unwrap_or_default();
                    let still = failed.contains(&id);
                    if !still {
                        outcome.events[i].1 = Some(Status::Written);
                    }
                    still
                });
                wait
            }
            Answer::Unanswered(message) => {
                outcome.errors.push(message);
                Duration::from_millis(500 << attempt.min(5))
            }
        };
        if pending.is_empty() {
            return outcome;
        }
        if attempt < settings.retries {
            tokio::time::sleep(wait).await;
        }
    }
    for &i in &pending {
        outcome.events[i].1 = Some(Status::Failed);
    }
    outcome
}

async fn exchange(settings: &RequestSettings, body: &Value, statuses: &mut BTreeMap<u16, u64>) -> Answer {
    let json = body.to_string().into_bytes();
    let mut request = settings
        .client
        .post(&settings.url)
        .header(CONTENT_TYPE, "application/json");
    if let Some(key) = &settings.api_key {
        request = request.header("x-api-key", key);
    }
    request = if settings.gzip {
        let mut encoder = GzEncoder::new(Vec::with_capacity(json.len() / 4), Compression::fast());
        if let Err(err) = encoder.write_all(&json) {
            return Answer::Unanswered(format!("cannot gzip the body: {err}"));
        }
        match encoder.finish() {
            Ok(compressed) => request.header(CONTENT_ENCODING, "gzip").body(compressed),
            Err(err) => return Answer::Unanswered(format!("cannot gzip the body: {err}")),
        }
    } else {
        request.body(json)
    };
    let response = match request.send().await {
        Ok(response) => response,
        Err(err) => return Answer::Unanswered(format!("no answer from {}: {err}", settings.url)),
    };
    let status = response.status().as_u16();
    *statuses.entry(status).or_default() += 1;
    let retry_after = response
        .headers()
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(Duration::from_secs(1), Duration::from_secs);
    let text = response.text().await.unwrap_or_default();
    let parsed: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let message = parsed["message"]
        .as_str()
        .map_or_else(|| text.chars().take(300).collect(), str::to_owned);
    match status {
        200 => Answer::AllWritten,
        503 if parsed["results"].is_array() => {
            let failed = parsed["results"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|r| r["status"] != "written")
                .filter_map(|r| r["eventId"].as_str().map(str::to_owned))
                .collect();
            Answer::SomeFailed(failed, retry_after)
        }
        429 | 500..=599 => Answer::Unanswered(format!("HTTP {status}: {message}")),
        _ => Answer::Refused(format!("HTTP {status}: {message}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_latencies() {
        let mut totals = Totals {
            latencies_ms: (1..=100).rev().map(f64::from).collect(),
            ..Totals::default()
        };
        assert_eq!(totals.percentile(50.0), 50.0);
        assert_eq!(totals.percentile(99.0), 99.0);
        assert_eq!(totals.percentile(100.0), 100.0);
        assert_eq!(Totals::default().percentile(99.0), 0.0);
    }
}
