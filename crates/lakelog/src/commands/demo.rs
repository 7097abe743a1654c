//! `lakelog demo`: the whole product on one machine, offline.
//!
//! 1. S3 server access logs of a generated data lake (daily snapshots, append-only event datasets,
//!    a model, exports nobody reads, readers with different age habits, lifecycle actions,
//!    malformed lines: [`workload`]) are written as raw log objects and ingested by the access-log
//!    Lambda's code into one Delta table per bucket; the lake's S3 Inventory lists (CSV and
//!    Parquet, with data no request touched) are written beside them for the access report.
//! 2. A planned season of game traffic (players who join, return, pay and leave; sessions) goes through the game-events API Lambda's handler
//!    (as API Gateway proxy events, stamped with simulated request times), into an in-memory
//!    Kinesis stream, and from there through the sink Lambda's code into `game_events`. One request
//!    is sent twice, as a client retrying after a timeout does, and one malformed request is
//!    refused.
//! 3. The maintenance Lambda's pass runs on every table: compaction of closed partitions (with
//!    removal of duplicate events), checkpoint, log cleanup and VACUUM.
//! 4. Both reports are written as HTML with charts (and JSON) under `DIR/reports`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use access_log_ingest::{Ingestor, ObjectReader, TableTemplate};
use anyhow::{Context, bail};
use aws_lambda_events::apigw::ApiGatewayProxyRequest;
use aws_lambda_events::encodings::Body;
use chrono::{DateTime, Days, NaiveDate, TimeDelta, Utc};
use clap::Args;
use fixtures::game::season::{Season, SeasonConfig};
use game_api::{ApiConfig, Game, Games, LocalStream, respond};
use game_events::GameEvent;
use lake::StorageConfig;
use lake::maintenance::{CompactOptions, MaintenanceOptions, TableReport, discover_tables, maintain};
use serde_json::{Value, json};

use fixtures::workload::inventory::{self, InventoryFormat};
use fixtures::workload::{self, MIN_DAYS};
use lakelog_reports::access::{AccessOptions, Inventory, PriceTable};
use lakelog_reports::game::{BOOKINGS_CURRENCY, game_report};
use lakelog_reports::{ReportDir, ReportSession, TimeRange};

/// A file in the demo folder that marks it as one, so that a second run may replace it.
const MARKER: &str = ".lakelog-demo";

/// Events per API request, as game clients batch them.
pub const EVENTS_PER_REQUEST: usize = 100;

/// Records the sink takes from the stream at once (the template's BatchSize).
const SINK_BATCH: usize = 1000;

/// Arguments of `lakelog demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Folder for everything the demo makes: raw logs, Delta tables, reports. A folder of an
    /// earlier demo is replaced; any other folder must be empty or missing.
    #[arg(long, value_name = "DIR", default_value = "lakelog-demo")]
    pub dir: PathBuf,
    /// Days of S3 access logs, ending yesterday.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u32).range(i64::from(MIN_DAYS)..=3650))]
    pub log_days: u32,
    /// Days of game traffic, ending now.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=60))]
    pub game_days: u32,
    /// Game events sent: about this many, and at least each planned session's own (its start and
    /// end, one every ten minutes, its purchases).
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub events: u64,
    /// Players (devices) the game events come from.
    #[arg(long, default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub devices: u64,
    /// Seed of the generators of game events and access logs.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Pretend it is this time (RFC 3339): with the same seed, the demo makes the same tables.
    #[arg(long, value_name = "T", value_parser = parse_now)]
    pub now: Option<DateTime<Utc>>,
}

fn parse_now(text: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| format!("{e}: expected RFC 3339, like 2024-06-01T12:00:00Z"))
}

/// One request of the simulated game traffic.
#[derive(Debug, Clone)]
pub struct PlannedRequest {
    /// When API Gateway receives it: the server `eventTime` of its events.
    pub at: DateTime<Utc>,
    /// Its events.
    pub events: Vec<GameEvent>,
}

/// The simulated game season: `devices` players over the `hours` hours before `end`, with about
/// `events` events (at least each planned session's own). Its plan ([`Season`]) has the texture
/// of a live game: a growing player base, regulars, casual players and tourists who come back or
/// leave, phones and computers playing at their own hours, sessions from a minute to two hours,
/// about one player in ten paying; [`Season::truth`] gives the KPIs the report must find.
///
/// The same arguments give the same season.
pub fn game_season(seed: u64, devices: usize, events: u64, end: DateTime<Utc>, hours: u32) -> Season {
    Season::plan(&SeasonConfig {
        seed,
        players: devices,
        start: end - TimeDelta::hours(i64::from(hours)),
        end,
        events,
    })
}

/// The requests that send `season`: the events of each minute (sent at that minute, their server
/// `eventTime`), in requests of up to [`EVENTS_PER_REQUEST`], in time order. They are generated as
/// they are read.
pub fn requests(season: &Season) -> impl Iterator<Item = PlannedRequest> + '_ {
    let mut events = season.events().peekable();
    std::iter::from_fn(move || {
        let first = events.next()?;
        let at = first.at;
        let mut request = vec![first.event];
        while request.len() < EVENTS_PER_REQUEST {
            match events.next_if(|e| e.at == at) {
                Some(e) => request.push(e.event),
                None => break,
            }
        }
        Some(PlannedRequest { at, events: request })
    })
}

/// The number of the event (from 0, in time order) whose request the demo sends twice: a fifth
/// into the traffic, so that with the default four days its partition is closed, and compacted, by
/// the end.
pub fn resent_event(season: &Season) -> u64 {
    season.event_count() / 5
}

/// The demo studio's two games and their API keys: each player plays one of them.
pub const DEMO_GAMES: [(&str, &str); 2] = [
    ("space-miners", "demo-key-of-space-miners-0123456789"),
    ("tiny-towns", "demo-key-of-tiny-towns-0123456789"),
];

/// The keys of [`DEMO_GAMES`].
pub fn demo_games() -> anyhow::Result<Games> {
    let games = DEMO_GAMES
        .iter()
        .map(|(game, key)| Ok(((*key).to_owned(), Game::new(game)?)))
        .collect::<Result<Vec<_>, game_api::GameError>>()?;
    Ok(Games::keys(games))
}

/// Which of [`DEMO_GAMES`] the player of `event` plays: a stable choice by its device.
pub fn demo_game_of(event: &GameEvent) -> usize {
    let device = event
        .event_params
        .as_ref()
        .and_then(|p| p.device_id.as_deref())
        .unwrap_or("");
    // FNV-1a: stable across runs and platforms, as the demo's figures must be.
    let hash = device.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    usize::from(hash % 3 == 0)
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

/// Runs `lakelog demo`.
pub fn run(args: &DemoArgs) -> anyhow::Result<ExitCode> {
    let runtime = super::runtime()?;
    runtime.block_on(demo(args))
}

async fn demo(args: &DemoArgs) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    prepare_dir(&args.dir)?;
    let dir = std::path::absolute(&args.dir).with_context(|| format!("cannot resolve {}", args.dir.display()))?;
    let lake_dir = dir.join("lake");
    let storage = StorageConfig::default();
    let now = args.now.unwrap_or_else(Utc::now);

    println!("lakelog demo in {}", dir.display());
    let (access_tables, inventories) = access_logs(&dir, args.log_days, args.seed, now.date_naive(), &storage).await?;
    let game_table = uri(&lake_dir.join("game_events"))?;
    game_events(args, &game_table, now, &storage).await?;

    step("Maintenance: compaction of closed partitions, checkpoints, log cleanup, VACUUM");
    let mut tables = discover_tables(&uri(&lake_dir.join("access_logs"))?, &storage).await?;
    tables.extend(discover_tables(&uri(&lake_dir)?, &storage).await?);
    for table in &tables {
        let is_events = table == &game_table;
        let options = MaintenanceOptions::all(CompactOptions {
            dedup_key: is_events.then(|| game_events::batch::DEDUP_KEY.to_owned()),
            now,
            ..CompactOptions::default()
        });
        let report = maintain(table, &storage, &options, &())
            .await
            .with_context(|| format!("maintenance of {table} failed"))?;
        if let Some(failure) = report.failure() {
            anyhow::bail!("maintenance of {table} failed: {failure}");
        }
        println!("  {}", describe_maintenance(&lake_dir, &report));
    }

    step("Reports");
    let reports = dir.join("reports");
    let access_page = access_report(&access_tables, &inventories, &reports.join("access"), &storage).await?;
    let game_page = game_report_pages(&game_table, &reports.join("game"), &storage).await?;
    println!(
        "\nDone in {:.0} s. Open these in a browser:\n  {}\n  {}\nThe tables are under {}; query them with \
         `lakelog report`, DuckDB's delta_scan or Spark.",
        started.elapsed().as_secs_f64(),
        access_page.display(),
        game_page.display(),
        lake_dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn step(title: &str) {
    println!("\n== {title}");
}

/// A table URI for a local folder.
fn uri(path: &Path) -> anyhow::Result<String> {
    path.to_str()
        .map(str::to_owned)
        .with_context(|| format!("the path {} is not UTF-8", path.display()))
}

/// Makes `dir` an empty demo folder: creates it, or replaces an earlier demo's; refuses any other
/// folder with something in it.
fn prepare_dir(dir: &Path) -> anyhow::Result<()> {
    if dir.join(MARKER).is_file() {
        std::fs::remove_dir_all(dir).with_context(|| format!("cannot remove the earlier demo in {}", dir.display()))?;
    } else if dir.exists() {
        let mut entries = std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
        if entries.next().is_some() {
            bail!(
                "{} exists and is not empty (nor an earlier demo's folder): give another --dir",
                dir.display()
            );
        }
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    std::fs::write(
        dir.join(MARKER),
        "made by lakelog demo; the next demo in this folder replaces it\n",
    )
    .with_context(|| format!("cannot write in {}", dir.display()))?;
    Ok(())
}

/// Writes the access-log workload of the `days` days before `today` as raw log objects and ingests
/// them; returns the URIs of the access-log tables (one per bucket).
async fn access_logs(
    dir: &Path,
    days: u32,
    seed: u64,
    today: NaiveDate,
    storage: &StorageConfig,
) -> anyhow::Result<(Vec<String>, Vec<String>)> {
    step("S3 server access logs -> Delta (the access-log-lambda's code)");
    let start = today
        .checked_sub_days(Days::new(u64::from(days)))
        .context("--log-days reaches before the calendar")?;
    let lake = workload::lake::generate(start, days, seed);
    let generated = &lake.workload;
    let raw = dir.join("raw-logs");
    let files = generated
        .write_to(&raw)
        .with_context(|| format!("cannot write the raw logs under {}", raw.display()))?;
    let bytes: usize = generated.objects.iter().map(|o| o.data.len()).sum();
    println!(
        "  wrote {} log objects ({:.1} MB, {} malformed lines) of buckets {} and {} for {} .. {} under {}; \
         the requests in them wrote {:.0} TB",
        files.len(),
        bytes as f64 / 1e6,
        generated.malformed,
        workload::LAKE_BUCKET,
        workload::WEB_BUCKET,
        start,
        generated.last_day(),
        raw.display(),
        lake.written_bytes() as f64 / 1e12
    );
    let template = uri(&dir.join("lake").join("access_logs").join("{bucket}"))?;
    let table = TableTemplate::parse("the access-log table", &template)?;
    let rejects = table.default_rejects();
    let reader = ObjectReader::local();
    let objects = reader
        .list(&uri(&raw)?)
        .await
        .with_context(|| format!("cannot list {}", raw.display()))?;
    // The function's path: the objects are staged, then the committer commits them.
    let ingestor = Ingestor::new(table, rejects.clone(), storage.clone(), reader, 4).with_staging(true);
    let (mut rows, mut rejected) = (0, 0);
    for (object, result) in ingestor.ingest(&objects, &lake::Retry::default(), &()).await {
        let report = result.with_context(|| format!("{object} was not ingested"))?;
        rows += report.rows;
        rejected += report.rejects;
    }
    for (table, result) in ingestor.commit_staged(&lake::Retry::default()).await? {
        result.with_context(|| format!("the access logs staged for {table} were not committed"))?;
    }
    ingestor.settled().await;
    println!(
        "  ingested {} objects: {rows} rows; {rejected} malformed lines kept with their reasons in {}",
        objects.len(),
        rejects
    );
    let tables = [workload::LAKE_BUCKET, workload::WEB_BUCKET]
        .iter()
        .map(|bucket| uri(&dir.join("lake").join("access_logs").join(bucket)))
        .collect::<anyhow::Result<Vec<_>>>()?;

    // What S3 Inventory lists at the end of the range: the lake bucket in CSV, the web bucket in
    // Parquet, as a copy of the inventories' destination bucket.
    let destination = dir.join("inventory");
    let mut manifests = Vec::new();
    for (bucket, format, files) in [
        (workload::LAKE_BUCKET, InventoryFormat::Csv, 4),
        (workload::WEB_BUCKET, InventoryFormat::Parquet, 1),
    ] {
        let objects: Vec<_> = lake.inventory.iter().filter(|o| o.bucket == bucket).collect();
        let manifest = inventory::write(&destination, bucket, &objects, format, lake.inventory_taken, files)
            .with_context(|| format!("cannot write the inventory of {bucket} under {}", destination.display()))?;
        manifests.push(manifest.display().to_string());
    }
    println!(
        "  wrote the S3 Inventory of both buckets ({} object versions, {:.0} TB, as of {}) under {}",
        lake.inventory.iter().filter(|o| !o.is_delete_marker).count(),
        lake.storage.values().map(|t| t.bytes).sum::<u64>() as f64 / 1e12,
        lake.inventory_taken.format("%Y-%m-%d %H:%M UTC"),
        destination.display()
    );
    Ok((tables, manifests))
}

/// Sends the game traffic through the API handler into an in-memory stream, and the stream's
/// records through the sink into `table`.
async fn game_events(args: &DemoArgs, table: &str, now: DateTime<Utc>, storage: &StorageConfig) -> anyhow::Result<()> {
    step("Game events -> API -> stream -> Delta (the game-api-lambda and game-sink-lambda functions' code)");
    let hours = args.game_days * 24;
    let devices = usize::try_from(args.devices).context("--devices is too large for this machine")?;
    let season = game_season(args.seed, devices, args.events, now, hours);
    let stream = LocalStream::with_capacity("game-events", usize::MAX);
    let config = ApiConfig::default();
    let games = demo_games()?;
    let sink_config = game_sink::Config::new(table, None)?;
    let sink = game_sink::Sink::open(&sink_config, storage)
        .await
        .with_context(|| format!("cannot open the table {table}"))?;

    // A client with a bug: its request is refused whole, and nothing of it is written.
    let mut broken = requests(&season).next().map(|r| r.events).unwrap_or_default();
    broken.truncate(3);
    let broken = json!({ "events": broken })
        .to_string()
        .replacen("\"eventName\"", "\"event_name\"", 1);
    let bad = client_request(&broken, now, "demo-bad-request", DEMO_GAMES[0].1);
    let answer = respond(&bad, &games, &stream, &config).await;
    println!(
        "  a malformed request got {}: {}",
        answer.status_code,
        body_message(answer.body.as_ref())
    );

    // One request is sent again 30 seconds later, as a client that timed out does; by then the
    // sink has committed the first copy, so the table holds both until compaction.
    let resend = resent_event(&season);
    let sending = Instant::now();
    let mut totals = game_sink::BatchReport::default();
    let (mut sent, mut commits, mut requests, mut planned) = (0u64, 0u64, 0u64, 0u64);
    for (i, request) in self::requests(&season).enumerate() {
        let mut attempts = vec![request.at];
        let first = planned;
        planned += request.events.len() as u64;
        if (first..planned).contains(&resend) {
            attempts.push(request.at + TimeDelta::seconds(30));
        }
        for (attempt, at) in attempts.into_iter().enumerate() {
            if attempt > 0 {
                commits += drain(&stream, &sink, 1, &mut totals).await?;
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
                let proxy = client_request(&body, at, &format!("demo-{requests}"), key);
                requests += 1;
                let answer = respond(&proxy, &games, &stream, &config).await;
                if answer.status_code != 200 {
                    bail!(
                        "the API answered {} to request {i}: {}",
                        answer.status_code,
                        body_message(answer.body.as_ref())
                    );
                }
                sent += events.len() as u64;
            }
        }
        commits += drain(&stream, &sink, SINK_BATCH, &mut totals).await?;
    }
    commits += drain(&stream, &sink, 1, &mut totals).await?;
    let players = season
        .sessions
        .iter()
        .map(|s| s.device)
        .collect::<std::collections::BTreeSet<_>>();
    println!(
        "  {requests} requests of up to {EVENTS_PER_REQUEST} events of the games {} and {}, each with its own key \
         ({} events of {} sessions, one request sent twice) over the {} hours to {}, from {} of {} players",
        DEMO_GAMES[0].0,
        DEMO_GAMES[1].0,
        season.event_count(),
        season.sessions.len(),
        hours,
        now.format("%Y-%m-%d %H:%M UTC"),
        players.len(),
        args.devices
    );
    println!(
        "  the stream took {sent} records; the sink committed them in {commits} commits: {} rows in {table}, {} \
         rejected, {} repeated eventIds dropped within a batch ({:.1} s)",
        totals.rows,
        totals.rejected,
        totals.duplicates,
        sending.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Hands the stream's records to the sink in batches of [`SINK_BATCH`] while at least `min` are
/// waiting, as a Kinesis event source does; returns the commits.
async fn drain(
    stream: &LocalStream,
    sink: &game_sink::Sink,
    min: usize,
    totals: &mut game_sink::BatchReport,
) -> anyhow::Result<u64> {
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
) -> anyhow::Result<game_sink::BatchReport> {
    let (report, rest) = sink
        .process_until_committed(&batch, &lake::Retry::default(), 5, |n| {
            Duration::from_millis(200 * u64::from(n))
        })
        .await;
    if !rest.is_empty() {
        bail!(
            "{} records could not be committed to {} after 5 deliveries",
            rest.len(),
            sink.events_uri()
        );
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

/// One line on what maintenance did to a table.
fn describe_maintenance(lake_dir: &Path, report: &TableReport) -> String {
    let name = Path::new(&report.uri)
        .strip_prefix(lake_dir)
        .map_or_else(|_| report.uri.clone(), |p| p.display().to_string());
    let mut parts = Vec::new();
    if let Some(c) = &report.compaction {
        let mut text = format!(
            "{} -> {} files ({} commits)",
            c.files_before,
            c.files_after,
            c.bins.len()
        );
        if c.duplicates() > 0 {
            text.push_str(&format!(", {} duplicate rows removed", c.duplicates()));
        }
        parts.push(text);
    }
    if let Some(c) = &report.checkpoint {
        parts.push(format!("checkpoint at version {}", c.version));
    }
    if let Some(v) = &report.vacuum {
        parts.push(format!("VACUUM deleted {} files", v.files.len()));
    }
    format!("{name}: {}", parts.join(", "))
}

/// Writes the access report (HTML, charts, JSON) into `out` and prints its headlines.
async fn access_report(
    tables: &[String],
    inventories: &[String],
    out: &Path,
    storage: &StorageConfig,
) -> anyhow::Result<PathBuf> {
    let mut options = AccessOptions::new(PriceTable::default_table()?);
    options.inventories = Inventory::read_all(inventories, storage, &options.rule).await?;
    options.unread_days = Some(lakelog_reports::access::DEFAULT_UNREAD_DAYS);
    let report = lakelog_reports::access::run(tables, storage, &TimeRange::default(), &options).await?;
    let page = report.write_html(&ReportDir::create(out)?)?;
    println!("  access patterns of {} datasets:", report.datasets.len());
    for dataset in report.datasets.iter().take(3) {
        let age = match dataset.current_day_share() {
            Some(share) => format!("{:.0}% of those of known age read data of that day", share * 100.0),
            None => "the age of the data read is unknown (written before the logs)".to_owned(),
        };
        println!(
            "    {}/{}: {} reads by {} requesters; {age}",
            dataset.bucket, dataset.dataset, dataset.reads, dataset.requesters
        );
    }
    for unused in &report.unused {
        println!(
            "    unused: {}/{}, written by {} and not read for {} days or more",
            unused.bucket,
            unused.dataset,
            unused
                .writers
                .iter()
                .map(|w| w.requester.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            options.unused_days
        );
    }
    if let Some(stored) = &report.storage {
        println!(
            "    dark data: {:.1} TB in {} datasets stored and never requested, {:.2} USD a month",
            stored.dark.bytes as f64 / 1e12,
            stored.dark.datasets,
            stored.dark.monthly_storage_cost
        );
    }
    if let Some(objects) = &report.objects {
        let unread: u64 = objects
            .buckets
            .iter()
            .map(|b| b.unread_before_window.0 + b.unread_inside_window.0)
            .sum();
        let actions: usize = objects.buckets.iter().map(|b| b.actions.len()).sum();
        let saving: f64 = objects.buckets.iter().map(|b| b.net_saving).sum();
        println!(
            "    unread objects (no read in the logs' last {} days): {unread}; {actions} to move or expire, saving \
             {saving:.2} USD over {} months (manifests in the report's manifests/)",
            objects.unread_days_applied, objects.horizon_months
        );
    }
    let savings: f64 = report.advice.iter().map(|a| a.monthly_saving).sum();
    println!(
        "    storage-class advice: {savings:.2} USD a month to save with the lifecycle rules (and Intelligent-Tiering \
         configurations) in the report"
    );
    Ok(page)
}

/// Writes the game report (HTML, charts, JSON) into `out` and prints its headlines.
async fn game_report_pages(table: &str, out: &Path, storage: &StorageConfig) -> anyhow::Result<PathBuf> {
    let session = ReportSession::new();
    session
        .register_tables("game_events", std::slice::from_ref(&table.to_owned()), storage)
        .await?;
    let report = game_report(&session, "game_events", &TimeRange::default()).await?;
    let page = report.write_html(&ReportDir::create(out)?)?;
    let headline = report.all.headline();
    println!(
        "  game KPIs: {} events (each eventId once) in {} hours, {:.2} {BOOKINGS_CURRENCY} in bookings, up to {} daily \
         active users",
        headline.events,
        report.all.events_per_hour.len(),
        headline.bookings,
        headline.peak_dau.map_or(0, |d| d.users)
    );
    Ok(page)
}
