//! `lakelog serve`: the game events API on 127.0.0.1, running the Lambda's handler on each request
//! (converted to an API Gateway proxy event), in front of an embedded stream or a Kinesis stream.
//! With the embedded stream, `/` is a live page of the game KPIs of the events committed to the
//! local table (`/live` its figures and charts, as `lakelog report game` computes them).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use game_api::{ApiConfig, Games, KinesisSink, LocalStream, PartitionKey, StreamRef, kinesis_client};
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
    /// A JSON file of funnels (as `lakelog report game --funnels` takes it) the live view charts.
    #[arg(long, value_name = "FILE")]
    pub funnels: Option<PathBuf>,
}

fn parse_partition_key(value: &str) -> Result<PartitionKey, String> {
    PartitionKey::parse("--partition-key", value).map_err(|e| e.to_string())
}

/// The live view: the game report over the local table, computed at most once per
/// [`LiveView::FRESH`] however many pages ask.
struct LiveView {
    table: String,
    storage: lake::StorageConfig,
    /// What the report asks beyond the KPIs: the funnels of `--funnels`.
    options: lakelog_reports::game::GameOptions,
    last: tokio::sync::Mutex<Option<(std::time::Instant, String)>>,
}

impl LiveView {
    /// How long one computation of the figures is shown.
    const FRESH: Duration = Duration::from_secs(1);

    /// The JSON of [`lakelog_reports::game::GameReport::live`] over the table.
    async fn compute(&self) -> Result<String, lakelog_reports::ReportError> {
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
        let report =
            lakelog_reports::game::game_report_with(&session, EVENTS_TABLE, &Default::default(), &self.options).await?;
        let json = report.live()?.to_string();
        *last = Some((std::time::Instant::now(), json.clone()));
        Ok(json)
    }
}

impl local_pipeline::Live for LiveView {
    fn page(&self) -> String {
        lakelog_reports::game::live_page()
    }

    async fn figures(&self) -> Result<String, String> {
        self.compute().await.map_err(|e| e.to_string())
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
        local_pipeline::accept::<_, LiveView>(listener, address, games, sink, config, None).await;
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
            options: lakelog_reports::game::GameOptions {
                funnels: match &args.funnels {
                    Some(path) => lakelog_reports::game::Funnel::read_file(path)?,
                    None => Vec::new(),
                },
                ..Default::default()
            },
            last: tokio::sync::Mutex::new(None),
        });
        let consumer = tokio::spawn(local_pipeline::consume(Arc::clone(&stream), sink, Arc::clone(&stop)));
        local_pipeline::accept(listener, address, games, Arc::clone(&stream), config, Some(live)).await;
        stop.store(true, Ordering::Release);
        let (records, rows) = consumer.await.context("the stream consumer panicked")?;
        eprintln!("lakelog serve: the sink took {records} records and wrote {rows} rows");
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

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
