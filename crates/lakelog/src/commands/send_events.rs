//! `lakelog send-events`: a generator of realistic game events that posts them to the API in
//! batches at a steady rate, resends what the API could not write, and prints what it sent. For
//! demos and load tests.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::Utc;
use clap::Args;
use fixtures::game::{Synth, SynthConfig};
use flate2::Compression;
use flate2::write::GzEncoder;
use game_events::{GameEvent, PURCHASE_EVENT};
use reqwest::header::{CONTENT_ENCODING, CONTENT_TYPE, RETRY_AFTER};
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// Arguments of `lakelog send-events`.
#[derive(Debug, Args)]
pub struct SendEventsArgs {
    /// The endpoint: http://127.0.0.1:8080/events for `lakelog serve`, or the stack's
    /// GameEventsApiUrl.
    #[arg(long)]
    pub url: String,
    /// Events per second.
    #[arg(long, default_value_t = 100.0)]
    pub rate: f64,
    /// Seconds to send for.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Devices (players) the events come from.
    #[arg(long, default_value_t = 1000)]
    pub devices: usize,
    /// Seed of the generator: the same seed sends the same events, eventIds included.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Events per request (1 to 500).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u16).range(1..=500))]
    pub batch: u16,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub concurrency: u16,
    /// Value of the x-api-key header (the deployed API requires its key).
    #[arg(long)]
    pub api_key: Option<String>,
    /// Gzip the request bodies (Content-Encoding: gzip).
    #[arg(long)]
    pub gzip: bool,
    /// Times to resend the events of a request that the API could not write (503, with their
    /// eventIds, so nothing is counted twice downstream) or that got no answer.
    #[arg(long, default_value_t = 5)]
    pub retries: u32,
    /// Write every event sent, with its final status, as JSON lines to FILE.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// What became of one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    /// The API answered that it reached the stream.
    Written,
    /// The API refused its request (4xx): resending cannot help.
    Refused,
    /// Still not written after every resend.
    Failed,
}

impl Status {
    fn name(self) -> &'static str {
        match self {
            Status::Written => "written",
            Status::Refused => "refused",
            Status::Failed => "failed",
        }
    }
}

/// The result of one batch of events, over all its attempts.
#[derive(Debug, Default)]
struct BatchOutcome {
    events: Vec<(GameEvent, Option<Status>)>,
    exchanges: Vec<f64>,
    resent: u64,
    statuses: BTreeMap<u16, u64>,
    errors: Vec<String>,
}

/// Totals of a run.
#[derive(Debug, Default)]
struct Totals {
    events: u64,
    by_status: BTreeMap<&'static str, u64>,
    latencies_ms: Vec<f64>,
    resent: u64,
    statuses: BTreeMap<u16, u64>,
    errors: Vec<String>,
    names: BTreeMap<String, u64>,
    platforms: BTreeMap<String, u64>,
    devices: HashSet<String>,
    purchases: u64,
    bookings: f64,
}

impl Totals {
    fn add(
        &mut self,
        outcome: BatchOutcome,
        out: Option<&mut std::io::BufWriter<std::fs::File>>,
    ) -> anyhow::Result<()> {
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

    fn count(&self, status: Status) -> u64 {
        self.by_status.get(status.name()).copied().unwrap_or(0)
    }

    fn percentile(&mut self, p: f64) -> f64 {
        if self.latencies_ms.is_empty() {
            return 0.0;
        }
        self.latencies_ms.sort_by(f64::total_cmp);
        let rank = ((p / 100.0) * self.latencies_ms.len() as f64).ceil() as usize;
        self.latencies_ms[rank.clamp(1, self.latencies_ms.len()) - 1]
    }
}

/// Runs `lakelog send-events`.
pub fn run(args: &SendEventsArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        args.rate > 0.0 && args.rate.is_finite(),
        "--rate must be a positive number of events per second"
    );
    anyhow::ensure!(
        args.duration > 0.0 && args.duration.is_finite(),
        "--duration must be a positive number of seconds"
    );
    let runtime = super::runtime()?;
    runtime.block_on(send(args))
}

async fn send(args: &SendEventsArgs) -> anyhow::Result<ExitCode> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(35))
        .build()
        .context("cannot build the HTTP client")?;
    let total = (args.rate * args.duration).round().max(1.0) as u64;
    let batch = u64::from(args.batch);
    let period = Duration::from_secs_f64(batch as f64 / args.rate);
    let mut synth = Synth::new(SynthConfig {
        seed: args.seed,
        devices: args.devices.max(1),
        ..SynthConfig::default()
    });
    let mut out = match &args.out {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
        )),
        None => None,
    };
    eprintln!(
        "sending {total} events to {} in requests of {batch}, {} events/s for {} s",
        args.url, args.rate, args.duration
    );
    let slots = Arc::new(Semaphore::new(usize::from(args.concurrency)));
    let request = Arc::new(RequestSettings {
        client,
        url: args.url.clone(),
        api_key: args.api_key.clone(),
        gzip: args.gzip,
        retries: args.retries,
    });
    let mut tasks = JoinSet::new();
    let mut totals = Totals::default();
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut progress = tokio::time::interval(Duration::from_secs(1));
    progress.tick().await;
    let started = Instant::now();
    let mut generated = 0;
    while generated < total || !tasks.is_empty() {
        tokio::select! {
            _ = ticker.tick(), if generated < total => {
                let n = batch.min(total - generated);
                generated += n;
                let events = synth.events(n as usize, Utc::now());
                let permit = Arc::clone(&slots).acquire_owned().await.context("the request slots closed")?;
                let request = Arc::clone(&request);
                tasks.spawn(async move {
                    let outcome = send_batch(&request, events).await;
                    drop(permit);
                    outcome
                });
            }
            Some(done) = tasks.join_next(), if !tasks.is_empty() => {
                totals.add(done.context("a request task panicked")?, out.as_mut())?;
            }
            _ = progress.tick() => {
                let seconds = started.elapsed().as_secs_f64();
                eprintln!(
                    "  {:6.1} s: {} events sent, {} written, {:.0} events/s",
                    seconds,
                    generated,
                    totals.count(Status::Written),
                    totals.count(Status::Written) as f64 / seconds.max(1e-9)
                );
            }
        }
    }
    if let Some(out) = out.as_mut() {
        out.flush()?;
    }
    let seconds = started.elapsed().as_secs_f64();
    print_summary(args, &mut totals, seconds);
    let all_written = totals.count(Status::Written) == totals.events;
    Ok(if all_written {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn print_summary(args: &SendEventsArgs, totals: &mut Totals, seconds: f64) {
    let written = totals.count(Status::Written);
    println!(
        "sent {} events to {} in {:.1} s: {} written ({:.0} events/s), {} refused, {} not written",
        totals.events,
        args.url,
        seconds,
        written,
        written as f64 / seconds.max(1e-9),
        totals.count(Status::Refused),
        totals.count(Status::Failed),
    );
    let statuses: Vec<String> = totals.statuses.iter().map(|(s, n)| format!("{s}: {n}")).collect();
    let (p50, p99, max) = (
        totals.percentile(50.0),
        totals.percentile(99.0),
        totals.percentile(100.0),
    );
    println!(
        "  {} HTTP exchanges ({}), {} events resent; latency p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        totals.latencies_ms.len(),
        if statuses.is_empty() {
            "none answered".to_owned()
        } else {
            statuses.join(", ")
        },
        totals.resent,
        p50,
        p99,
        max,
    );
    for error in &totals.errors {
        println!("  error: {error}");
    }
    let names: Vec<String> = totals.names.iter().map(|(n, c)| format!("{n} {c}")).collect();
    println!("  events: {}", names.join(", "));
    println!(
        "  purchases: {}, bookings {:.2} (sum of amount)",
        totals.purchases, totals.bookings
    );
    let platforms: Vec<String> = totals.platforms.iter().map(|(p, c)| format!("{p} {c}")).collect();
    println!(
        "  devices: {} distinct (of {}); platforms: {}",
        totals.devices.len(),
        args.devices,
        platforms.join(", ")
    );
    if let Some(out) = &args.out {
        println!("  every event and its status: {}", out.display());
    }
}

/// How to make requests.
#[derive(Debug)]
struct RequestSettings {
    client: reqwest::Client,
    url: String,
    api_key: Option<String>,
    gzip: bool,
    retries: u32,
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
async fn send_batch(settings: &RequestSettings, events: Vec<GameEvent>) -> BatchOutcome {
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
