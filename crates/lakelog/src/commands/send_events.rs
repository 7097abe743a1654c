//! `lakelog send-events`: a generator of realistic game events that posts them to the API in
//! batches at a steady rate, resends what the API could not write, and prints what it sent. For
//! demos and load tests.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::Utc;
use clap::Args;
use fixtures::game::{Synth, SynthConfig};
use game_api::client::{RequestSettings, Status, Totals, send_batch};
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
                totals.add(
                    done.context("a request task panicked")?,
                    out.as_mut().map(|o| o as &mut dyn Write),
                )?;
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
