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
use std::time::Instant;

use access_log_ingest::{Ingestor, ObjectReader, TableTemplate};
use anyhow::{Context, bail};
use chrono::{DateTime, Days, NaiveDate, Utc};
use clap::Args;
use fixtures::game::demo::{DEMO_GAMES, EVENTS_PER_REQUEST, game_season};
use fixtures::game::season::TUTORIAL_FUNNEL;
use game_api::{Game, Games, LocalStream};
use lake::StorageConfig;
use lake::maintenance::{CompactOptions, MaintenanceOptions, TableReport, discover_tables, maintain};
use local_pipeline::demo::send_season;

use fixtures::workload::inventory::{self, InventoryFormat};
use fixtures::workload::{self, MIN_DAYS};
use lakelog_reports::access::{AccessOptions, Inventory, PriceTable};
use lakelog_reports::game::{BOOKINGS_CURRENCY, Direction, Funnel, GameOptions, PathSpec, game_report_with};
use lakelog_reports::{ReportDir, ReportSession, TimeRange};

/// A file in the demo folder that marks it as one, so that a second run may replace it.
const MARKER: &str = ".lakelog-demo";

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

/// The keys of [`DEMO_GAMES`].
pub fn demo_games() -> anyhow::Result<Games> {
    let games = DEMO_GAMES
        .iter()
        .map(|(game, key)| Ok(((*key).to_owned(), Game::new(game)?)))
        .collect::<Result<Vec<_>, game_api::GameError>>()?;
    Ok(Games::keys(games))
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
    let funnels = write_funnels(&dir)?;
    let game_page = game_report_pages(&game_table, &funnels, &reports.join("game"), &storage).await?;
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
    let sink_config = game_sink::Config::new(table, None)?;
    let sink = game_sink::Sink::open(&sink_config, storage)
        .await
        .with_context(|| format!("cannot open the table {table}"))?;
    let sent = send_season(&season, &demo_games()?, &stream, &sink, now).await?;
    println!("  a malformed request got {}: {}", sent.malformed.0, sent.malformed.1);
    let players = season
        .sessions
        .iter()
        .map(|s| s.device)
        .collect::<std::collections::BTreeSet<_>>();
    println!(
        "  {} requests of up to {EVENTS_PER_REQUEST} events of the games {} and {}, each with its own key \
         ({} events of {} sessions, one request sent twice) over the {} hours to {}, from {} of {} players",
        sent.requests,
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
        "  the stream took {} records; the sink committed them in {} commits: {} rows in {table}, {} \
         rejected, {} repeated eventIds dropped within a batch ({:.1} s)",
        sent.sent,
        sent.commits,
        sent.batches.rows,
        sent.batches.rejected,
        sent.batches.duplicates,
        sent.took.as_secs_f64()
    );
    Ok(())
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

/// Writes the funnels file a studio would keep, with the demo game's tutorial, into `dir` as
/// `funnels.json`; returns its path.
fn write_funnels(dir: &Path) -> anyhow::Result<PathBuf> {
    let path = dir.join("funnels.json");
    let steps: Vec<&str> = TUTORIAL_FUNNEL.split(" > ").collect();
    let file = serde_json::json!({"funnels": [{
        "name": "onboarding",
        "steps": steps,
        "window_hours": lakelog_reports::game::funnel::DEFAULT_WINDOW_HOURS,
        "order": "loose",
    }]});
    std::fs::write(&path, format!("{file:#}\n")).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// Writes the game report (HTML, charts, JSON) with the funnels of the file `funnels` into `out`
/// and prints its headlines.
async fn game_report_pages(
    table: &str,
    funnels: &Path,
    out: &Path,
    storage: &StorageConfig,
) -> anyhow::Result<PathBuf> {
    let session = ReportSession::new();
    session
        .register_tables("game_events", std::slice::from_ref(&table.to_owned()), storage)
        .await?;
    // What leads to a purchase: the template's saved paths query asks the same.
    let options = GameOptions {
        funnels: Funnel::read_file(funnels)?,
        paths: Some(PathSpec::new(
            game_events::PURCHASE_EVENT,
            Direction::Before,
            3,
            "paths",
        )?),
        ..GameOptions::default()
    };
    let report = game_report_with(&session, "game_events", &TimeRange::default(), &options).await?;
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
