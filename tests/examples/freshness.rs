//! Freshness: the time from the API's answer to the committed row, at a rate's settings.
//!
//! ```text
//! eval "$(scripts/standins start)"
//! cargo run --profile local -p lakelog-tests --example freshness -- \
//!     [RATE] [SECONDS] [WINDOW_S] [INTERVAL_S] [LATENCY_MS]
//! ```
//!
//! Clients send requests of 100 events at RATE events a second (default 100) for SECONDS (default
//! 120) through the API's handler (`game_api::answer`, packed records, the default) into an
//! in-memory stream. Beside them run what Lambda runs in a deployment, with the template's
//! settings: the Kinesis event source mapping, which reads the shard once a second and hands the
//! sink a batch when its batching window (WINDOW_S, `SinkBatchingWindowSeconds`, default 10) has
//! passed since its first record or 1,000 records are waiting; the sink's writer, which stages the
//! batch and sends a wake-up; and the commit queue's mapping, which gathers the wake-ups of
//! INTERVAL_S (`SinkCommitIntervalSeconds`, default 5) into one committer pass. The tables are on
//! the S3 stand-in behind a proxy that holds every request LATENCY_MS (default 30), as S3 takes
//! to answer.
//!
//! An event's freshness is the time from its answer to the end of the first pass that started
//! after its batch was staged: that pass commits every link staged before it, which the run checks
//! pass by pass (the links a pass commits are the batches staged before it began). At the end,
//! DuckDB reads the table: every answered event once. Printed: events, batches, passes, and
//! freshness p50, p99 and max. Not in it: Lambda's own delays (an invocation's start, SQS's
//! delivery of a wake-up, tens of milliseconds each when warm, a cold start's 10 ms to 1 s).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_lambda_events::apigw::ApiGatewayProxyRequest;
use aws_lambda_events::encodings::Body;
use aws_lambda_events::event::kinesis::KinesisEventRecord;
use fixtures::game::{Synth, SynthConfig};
use game_api::{ApiConfig, Game, Games, LocalStream, answer};
use game_sink::{Config, Sink};
use lake::Retry;
use lakelog_tests::faults::{FaultProxy, FaultRates};
use lakelog_tests::{StandIn, duckdb, percentile};
use serde_json::{Value, json};
use tokio::sync::{Mutex, mpsc};

const EVENTS_PER_REQUEST: usize = 100;
/// The template's `SinkBatchSize`.
const BATCH_SIZE: usize = 1000;
/// How often the Kinesis event source mapping reads a shard.
const POLL: Duration = Duration::from_secs(1);
const KEY: &str = "EXAMPLEKEYexamplekey0123456789abcdefGHIJ";

/// What the run saw: each request's answer time by its record's sequence number, each batch's
/// records and staging time, and each batch's commit time.
#[derive(Default)]
struct Seen {
    answered: HashMap<String, Instant>,
    staged: Vec<(Instant, Vec<String>)>,
    committed: BTreeMap<usize, Instant>,
    /// Each pass's time.
    passes: Vec<f64>,
}

fn request(template: &ApiGatewayProxyRequest, synth: &mut Synth, i: usize) -> ApiGatewayProxyRequest {
    let events = synth.events(EVENTS_PER_REQUEST, chrono::Utc::now());
    let mut request = template.clone();
    request.body = Some(json!({ "events": events }).to_string());
    request.request_context.request_id = Some(format!("freshness-{i:08}"));
    request.is_base64_encoded = false;
    request
}

/// The clients: a request of [`EVENTS_PER_REQUEST`] events every `every`, until `until`.
async fn clients(
    stream: Arc<LocalStream>,
    seen: Arc<Mutex<Seen>>,
    every: Duration,
    until: Instant,
) -> anyhow::Result<usize> {
    let path = format!("{}/../events/apigw-batch.json", env!("CARGO_MANIFEST_DIR"));
    let template: ApiGatewayProxyRequest = serde_json::from_slice(&std::fs::read(&path)?)?;
    let games = Games::keys([(KEY.to_owned(), Game::new("space-miners")?)]);
    let config = ApiConfig::default();
    let mut synth = Synth::new(SynthConfig::default());
    let mut ticks = tokio::time::interval(every);
    let mut requests = 0;
    while Instant::now() < until {
        ticks.tick().await;
        let request = request(&template, &mut synth, requests);
        let (response, answered) = answer(&request, &games, stream.as_ref(), &config).await;
        let at = Instant::now();
        anyhow::ensure!(
            answered.status == 200,
            "request {requests} answered {}",
            answered.status
        );
        let Some(Body::Text(text)) = &response.body else {
            anyhow::bail!("request {requests}: an answer without a text body");
        };
        let body: Value = serde_json::from_str(text)?;
        let mut seen = seen.lock().await;
        for result in body["results"].as_array().into_iter().flatten() {
            if let Some(sequence) = result["sequenceNumber"].as_str() {
                seen.answered.entry(sequence.to_owned()).or_insert(at);
            }
        }
        requests += 1;
    }
    Ok(requests)
}

/// The Kinesis event source mapping and the sink's writer: a batch when the window has passed
/// since its first record (or it is full), staged, then a wake-up.
async fn writer(
    stream: Arc<LocalStream>,
    sink: Arc<Sink>,
    seen: Arc<Mutex<Seen>>,
    window: Duration,
    wake: mpsc::UnboundedSender<()>,
    until: Instant,
) -> anyhow::Result<()> {
    let mut waiting: Vec<KinesisEventRecord> = Vec::new();
    let mut first: Option<Instant> = None;
    loop {
        let done = Instant::now() >= until && stream.is_empty();
        let taken = stream.take(BATCH_SIZE - waiting.len());
        if !taken.is_empty() && first.is_none() {
            first = Some(Instant::now());
        }
        waiting.extend(taken);
        let due = first.is_some_and(|f| f.elapsed() >= window)
            || waiting.len() >= BATCH_SIZE
            || (done && !waiting.is_empty());
        if due {
            let batch = std::mem::take(&mut waiting);
            first = None;
            let report = sink.stage(&batch).await;
            anyhow::ensure!(report.retry_from.is_none(), "a batch was not staged: {report:?}");
            let sequences = batch.iter().map(|r| r.kinesis.sequence_number.clone()).collect();
            seen.lock().await.staged.push((Instant::now(), sequences));
            wake.send(())?;
        } else if done {
            return Ok(());
        } else {
            tokio::time::sleep(POLL).await;
        }
    }
}

/// The commit queue's mapping and the committer: the wake-ups of `interval` from the first,
/// then one pass, which must commit every batch staged before it began (and may take those
/// staged while it ran, in their order).
async fn committer(
    sink: Arc<Sink>,
    seen: Arc<Mutex<Seen>>,
    interval: Duration,
    mut wakes: mpsc::UnboundedReceiver<()>,
) -> anyhow::Result<usize> {
    let mut passes = 0;
    while wakes.recv().await.is_some() {
        tokio::time::sleep(interval).await;
        while wakes.try_recv().is_ok() {}
        let started = Instant::now();
        let pass = sink
            .commit_staged(&Retry::until(started + Duration::from_secs(60)))
            .await;
        let ended = Instant::now();
        passes += 1;
        let links = pass.events.map_err(|e| anyhow::anyhow!("pass {passes}: {e}"))?.links;
        let mut seen = seen.lock().await;
        seen.passes.push(ended.duration_since(started).as_secs_f64());
        let waiting: Vec<usize> = (0..seen.staged.len())
            .filter(|b| !seen.committed.contains_key(b))
            .collect();
        let due = waiting.iter().filter(|b| seen.staged[**b].0 <= started).count();
        anyhow::ensure!(
            due <= links && links <= waiting.len(),
            "pass {passes} committed {links} links; {due} batches were staged before it began and {} were waiting",
            waiting.len()
        );
        for b in &waiting[..links] {
            seen.committed.insert(*b, ended);
        }
    }
    Ok(passes)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut arg =
        |default: f64| -> anyhow::Result<f64> { Ok(args.next().map(|a| a.parse()).transpose()?.unwrap_or(default)) };
    let rate = arg(100.0)?;
    let seconds = arg(120.0)?;
    let window = Duration::from_secs_f64(arg(10.0)?);
    let interval = Duration::from_secs_f64(arg(5.0)?);
    let latency = Duration::from_millis(arg(30.0)? as u64);
    anyhow::ensure!(rate > 0.0 && seconds > 0.0, "RATE and SECONDS are above 0");

    let standin = StandIn::connect().await?;
    let proxy = FaultProxy::start(standin.endpoint(), 1, FaultRates::held(latency)).await?;
    let storage = standin.storage_via(proxy.endpoint());
    let bucket = standin.create_bucket("freshness").await?;
    let table = StandIn::s3_uri(&bucket, "game_events");
    let sink = Arc::new(Sink::open(&Config::new(&table, None)?, &storage).await?);
    let stream = Arc::new(LocalStream::with_capacity("freshness", usize::MAX));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let until = Instant::now() + Duration::from_secs_f64(seconds);
    let every = Duration::from_secs_f64(EVENTS_PER_REQUEST as f64 / rate);
    let (wake, wakes) = mpsc::unbounded_channel();

    let committing = tokio::spawn(committer(Arc::clone(&sink), Arc::clone(&seen), interval, wakes));
    let writing = tokio::spawn(writer(
        Arc::clone(&stream),
        Arc::clone(&sink),
        Arc::clone(&seen),
        window,
        wake,
        until,
    ));
    let requests = clients(Arc::clone(&stream), Arc::clone(&seen), every, until).await?;
    writing.await??;
    let passes = committing.await??;
    // A pass that finds nothing staged: what each idle tick of the schedule costs.
    let started = Instant::now();
    let idle = sink
        .commit_staged(&Retry::until(started + Duration::from_secs(60)))
        .await;
    let idle_pass = started.elapsed().as_secs_f64();
    anyhow::ensure!(
        idle.done().all(lake::StagedCommit::idle),
        "the last pass left something staged"
    );

    let seen = seen.lock().await;
    let mut freshness: Vec<f64> = Vec::new();
    for (b, (_, sequences)) in seen.staged.iter().enumerate() {
        let committed = seen
            .committed
            .get(&b)
            .ok_or_else(|| anyhow::anyhow!("batch {b} was never committed"))?;
        for sequence in sequences {
            let answered = seen
                .answered
                .get(sequence)
                .ok_or_else(|| anyhow::anyhow!("record {sequence} was staged but never answered"))?;
            freshness.push(committed.duration_since(*answered).as_secs_f64());
        }
    }
    anyhow::ensure!(
        freshness.len() == requests,
        "{requests} requests answered, {} records staged",
        freshness.len()
    );
    freshness.sort_by(f64::total_cmp);
    let events = requests * EVENTS_PER_REQUEST;
    let rows = duckdb(
        standin.endpoint(),
        &format!("SELECT count(*), count(DISTINCT eventId) FROM delta_scan('{table}')"),
    )?;
    anyhow::ensure!(
        rows == [[json!(events), json!(events)]],
        "the table holds {rows:?} rows and distinct events, not {events} each"
    );
    let mut pass_times = seen.passes.clone();
    pass_times.sort_by(f64::total_cmp);
    println!(
        "{rate} events/s for {seconds} s, window {} s, interval {} s, S3 held {} ms: {events} events in {} batches and \
         {passes} passes (p50 {:.2} s, max {:.2} s; an idle pass {idle_pass:.2} s), each once; answer to committed row \
         p50 {:.1} s, p99 {:.1} s, max {:.1} s",
        window.as_secs_f64(),
        interval.as_secs_f64(),
        latency.as_millis(),
        seen.staged.len(),
        percentile(&pass_times, 0.5).unwrap_or(f64::NAN),
        pass_times.last().copied().unwrap_or(f64::NAN),
        percentile(&freshness, 0.5).unwrap_or(f64::NAN),
        percentile(&freshness, 0.99).unwrap_or(f64::NAN),
        freshness.last().copied().unwrap_or(f64::NAN),
    );
    Ok(())
}
