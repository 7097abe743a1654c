//! The command line, as clap types.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Land S3 access logs and game events in Delta Lake, and answer the questions they exist for.
#[derive(Debug, Parser)]
#[command(name = "lakelog", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The whole product offline: generated access
    /// logs and game traffic through the Lambdas' code into Delta tables, maintenance, and both
    /// reports with charts.
    ///
    /// Writes raw S3 access logs of a generated data lake (snapshots, append-only event datasets,
    /// readers with different age habits, lifecycle actions, malformed lines) and ingests them;
    /// sends game traffic of several days through the game-events API handler, an in-memory
    /// stream and the sink into game_events; compacts, checkpoints and vacuums every table; writes
    /// the access-pattern and game KPI reports (HTML with charts, and JSON) under DIR/reports.
    /// No AWS account or network is needed.
    Demo(crate::commands::demo::DemoArgs),
    /// Parse S3 server access log files and print one JSON object per line.
    ///
    /// Parsed lines go to standard output with the access_logs column names as keys; lines that
    /// cannot be parsed go to standard error as {"log_object", "log_line", "reason", "line"}.
    /// Files may be plain or gzip (detected by content). The exit status is 0 unless a file cannot
    /// be read.
    Parse(ParseArgs),
    /// Ingest raw S3 access-log objects into Delta tables, each object exactly once.
    ///
    /// The same code path as the access-log-lambda: PATH is a file, a directory (read
    /// recursively) or s3://bucket/prefix. Running it again over the same input adds nothing, so
    /// it is also the backfill command for logs written before the pipeline existed. S3 endpoints
    /// and credentials come from the usual AWS environment variables.
    Ingest(IngestArgs),
    /// Write synthetic S3 access-log objects (every field era, quoting quirks, malformed lines).
    GenerateLogs(GenerateLogsArgs),
    /// Compact the small files of a table's closed partitions (and drop duplicate rows by a key).
    ///
    /// The maintenance Lambda's code: partitions whose date ended longer ago than the grace period
    /// are bin-packed toward the target file size, bin by bin, each bin one commit; appends to open
    /// partitions are never touched. With --dedup-key, a row whose key was already seen in its
    /// partition is dropped (the first is kept).
    Optimize(crate::commands::optimize::OptimizeArgs),
    /// Delete data files removed from a table longer ago than the retention (7 days by default).
    Vacuum(crate::commands::vacuum::VacuumArgs),
    /// Checkpoint a table's current version and delete its expired log files.
    Checkpoint(crate::commands::checkpoint::CheckpointArgs),
    /// Register tables in the AWS Glue Data Catalog for Athena.
    Catalog(crate::commands::catalog::CatalogArgs),
    /// A studio's games: add, list and revoke each game's own API key and throttle.
    ///
    /// Each game is an API Gateway key, tagged with the game (and its purchases' amount range),
    /// in a usage plan of its own; the API stamps the key's game into every event as gameId.
    Games(crate::commands::games::GamesArgs),
    /// Remove what a deployment made outside its stack, before `sam delete`.
    ///
    /// The games' API keys, usage plans and pseudonym keys (the stack's first game's too), the
    /// observed buckets' server access logging into the raw-logs bucket, and that bucket's
    /// notifications to the stack's queue. Says what it would remove unless given --yes.
    Teardown(crate::commands::teardown::TeardownArgs),
    /// Check that a deployment works: probe events through its API become rows, once each.
    ///
    /// Sends probe events of the reserved game lakelog-probe through the public endpoint as a game
    /// client does, waits for their rows in game_events, and says how long that took from the
    /// API's answer and whether each landed exactly once; with --stack, also the stack's alarms
    /// and their states, how far behind the stream its readers are, and when the maintenance
    /// function last went through the tables. The probes are left out of every report and erased
    /// (at once locally; by the next maintenance pass on a stack). Prints the findings as JSON;
    /// exits 1 unless every probe landed once and no alarm fires.
    Check(crate::commands::check::CheckArgs),
    /// Bring the game records the sink parked into their tables, each object exactly once.
    ///
    /// The sink parks the records its tables could not take before the stream would drop them
    /// (the alarm GameEventsParkedAlarm says so); once the tables can be written again, this
    /// commits each parked object's rows with a record of the object, so running it again adds
    /// nothing.
    Replay(crate::commands::replay::ReplayArgs),
    /// Erase players of a game: every row of theirs, and the files that held them.
    ///
    /// Commits what the sink staged, then removes the players' rows (by --id-param, device_id by
    /// default) from game_events and game_events_rejects in commits that coexist with the running
    /// writers, and their parked records; after --reader-grace, deletes from storage every file
    /// out of the current version that still holds them (not waiting for VACUUM's retention) and
    /// scans every Parquet file under the tables' folders for them. Prints an erasure receipt
    /// (JSON; the ids only as SHA-256); exits 1 when a file still holds them.
    Forget(crate::commands::forget::ForgetArgs),
    /// Run the game events API on 127.0.0.1: the game-api-lambda function's handler on each request.
    ///
    /// Requests to /events become API Gateway proxy events for the same handler as the Lambda:
    /// validation, eventTime and eventId stamping, the seed's record envelope, per-event results.
    /// By default the records go to an embedded one-shard stream in place of Kinesis, and the
    /// game-events sink consumes it as the Lambda consumes Kinesis, appending to the local Delta
    /// table --lake/game_events (rows within a second or so of the request); with
    /// --kinesis-stream they go to a real Kinesis stream. Point game clients at it. With the
    /// embedded stream, http://127.0.0.1:PORT/ shows the live KPIs of what the sink committed
    /// (refreshed every two seconds; per minute while the events span up to three hours, times
    /// in UTC), and /live gives them as JSON.
    Serve(crate::commands::serve::ServeArgs),
    /// Post realistic game events to the API at a steady rate, and print what was sent.
    ///
    /// Score adjustments, purchases with amounts, level-ups, sessions and ad impressions, from
    /// --devices devices on several platforms and app versions, in requests of --batch events.
    /// The same --seed sends the same events. Events the API could not write (503) are resent with
    /// their eventId. The exit status is 0 only if every event was written.
    SendEvents(crate::commands::send_events::SendEventsArgs),
    /// Reports over the tables: SQL through DataFusion, text or JSON, and HTML with charts.
    Report(ReportArgs),
}

/// Arguments of `lakelog report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Which report.
    #[command(subcommand)]
    pub report: ReportCommand,
}

/// The reports.
#[derive(Debug, Subcommand)]
pub enum ReportCommand {
    /// Access patterns of S3 datasets: most used, age of the data read, unused, storage-class advice.
    ///
    /// A dataset is a bucket and a key prefix: the key up to its first partition-like directory
    /// (name=value, a date such as 2024-01-31, 20240131 or 2024/01/31), else --dataset-depth
    /// directories, or what --dataset-regex matches. Reads are GET, HEAD and the source of copies;
    /// writes are PUT, POST, copies and completed multipart uploads; lifecycle actions are counted
    /// apart; failed requests are not counted. The storage-class advisor tries, per dataset,
    /// lifecycle transitions to STANDARD_IA, GLACIER_IR, GLACIER and DEEP_ARCHIVE (the archive
    /// classes only from an age no read reached), and INTELLIGENT_TIERING (perhaps with an opt-in
    /// archive tier), each class when the price table has it (the built-in one has all five; see
    /// --prices), and prints the plan that saves the most a month with its lifecycle configuration.
    Access(AccessReportArgs),
    /// Game KPIs: events, bookings, DAU, revenue, retention, sessions and lifecycle, by game and
    /// platform.
    ///
    /// Events and bookings (the sum of amount of purchaseEvents, in USD) per hour, in windows that
    /// follow the seed's 180-minute watermark: an event more than 180 minutes older than the latest
    /// eventTime that arrived before it is not counted, and the report says how many such late
    /// events there were. Daily active users (distinct device_id), all and by platform. Revenue:
    /// per day active and paying users, conversion, ARPDAU, ARPPU; revenue by game, by item bought
    /// (extraParams.item_sku), by platform and by app version. Retention: devices by first-seen day
    /// and the share seen again 1, 7 and 30 days later, once that day has ended. Sessions: cut at
    /// sessionStart, after sessionEnd or after --session-gap minutes without an event. Lifecycle:
    /// each ended day, the devices new, active (an event within 7 days), returning (back after 8
    /// to 14 days away), resurrected (after more than 14), dormant or churned, the moves between
    /// states, and the devices at risk (active the week before the last, not in it). Every
    /// figure counts each game's eventId once. --out writes SVG charts, index.html and report.json
    /// (the --format json document).
    Game(GameReportArgs),
}

/// What every report takes: the time range, the output format and the report directory.
#[derive(Debug, Args)]
pub struct ReportOutputArgs {
    /// Start of the range: RFC 3339 (2024-06-01T12:00:00Z) or a date (its start, UTC).
    #[arg(long, value_name = "T")]
    pub from: Option<String>,
    /// End of the range: an RFC 3339 time, itself not included; or a date, included whole (the
    /// range ends where the next day starts).
    #[arg(long, value_name = "T")]
    pub to: Option<String>,
    /// Also write the charts (SVG) and an index.html report into this directory.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// What to print on standard output.
    #[arg(long, value_enum, default_value_t = lakelog_reports::Format::Table)]
    pub format: lakelog_reports::Format,
}

/// Arguments of `lakelog report access`.
#[derive(Debug, Args)]
pub struct AccessReportArgs {
    /// The access_logs tables (local paths or s3://bucket/prefix), read as one.
    #[arg(long = "table", value_name = "URI", required = true, num_args = 1..)]
    pub tables: Vec<String>,
    /// Directories kept of a key without partition-like directories.
    #[arg(long, value_name = "N", default_value_t = lakelog_reports::access::DEFAULT_DEPTH)]
    pub dataset_depth: usize,
    /// A regular expression matched at the start of keys: its first capture group (or the whole
    /// match) is the dataset; keys it does not match follow the default rule.
    #[arg(long, value_name = "REGEX")]
    pub dataset_regex: Option<String>,
    /// A written dataset is unused when nobody read it for this many days.
    #[arg(long, value_name = "DAYS", default_value_t = 30)]
    pub unused_days: u32,
    /// Reads become rare at the age from which at most this share of the reads happen.
    #[arg(long, value_name = "SHARE", default_value_t = 0.05)]
    pub rare_share: f64,
    /// How many datasets the charts show.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,
    /// A price table in JSON [default: us-east-1, built in; see crates/reports/prices/].
    #[arg(long, value_name = "FILE")]
    pub prices: Option<PathBuf>,
    /// An S3 Inventory's manifest.json (path or s3:// URL; CSV or Parquet lists), one per
    /// bucket, repeatable: its bucket's stored objects (bytes, counts, ages, storage classes,
    /// dark data) are then exact instead of what the logs saw.
    #[arg(long = "inventory", value_name = "MANIFEST")]
    pub inventories: Vec<String>,
    /// With --inventory: list each object not read for this many days of the logs' window, with
    /// the transition or expiration that saves the most net of retrieval, transition, minimum
    /// duration and monitoring charges (in the JSON report, and as --manifests).
    #[arg(long, value_name = "DAYS", value_parser = clap::value_parser!(u32).range(1..))]
    pub unread_days: Option<u32>,
    /// With --unread-days: write S3 Batch Operations manifests (CSV of bucket, key, version) of
    /// those objects into DIR, one per bucket, action and class.
    #[arg(long, value_name = "DIR", requires = "unread_days")]
    pub manifests: Option<PathBuf>,
    /// Range, format and output directory.
    #[command(flatten)]
    pub output: ReportOutputArgs,
}

/// Arguments of `lakelog report game`.
#[derive(Debug, Args)]
pub struct GameReportArgs {
    /// The game_events table: a local path or s3://bucket/prefix.
    #[arg(long, value_name = "URI", required_unless_present = "print_sql")]
    pub table: Option<String>,
    /// Minutes without an event after which a device's next event starts a new session.
    #[arg(long, value_name = "MINUTES", default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..=10080))]
    pub session_gap: u32,
    /// Only the events of this game (its gameId); every game by default.
    #[arg(long, value_name = "GAME")]
    pub game: Option<String>,
    /// The most rows read and held at once (whole hours are never split): the report's memory
    /// grows with it.
    #[arg(long, value_name = "ROWS", default_value_t = lakelog_reports::game::CHUNK_ROWS,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub chunk_rows: usize,
    /// A funnel to follow the devices through: steps separated by `>`, each an eventName and
    /// optional PARAM=VALUE conditions, e.g. "tutorialBegin > tutorialStep step=1 >
    /// tutorialComplete". May be given more than once.
    #[arg(long, value_name = "STEPS")]
    pub funnel: Vec<String>,
    /// The hours after a device's first step within which its last step must come, for --funnel.
    #[arg(long, value_name = "HOURS", default_value_t = lakelog_reports::game::funnel::DEFAULT_WINDOW_HOURS,
          value_parser = clap::value_parser!(u32).range(1..=8760))]
    pub funnel_window: u32,
    /// loose: other events may come between two steps; strict: each step is the device's very
    /// next event after the one before. For --funnel.
    #[arg(long, value_name = "ORDER", default_value = "loose")]
    pub funnel_order: lakelog_reports::game::Order,
    /// A JSON file of funnels a studio keeps: {"funnels": [{"name", "steps": ["EVENT PARAM=VALUE",
    /// ...], "window_hours", "order"}]}. May be given more than once.
    #[arg(long, value_name = "FILE")]
    pub funnels: Vec<PathBuf>,
    /// The event an experiment's devices convert by doing, at or after their exposure.
    #[arg(long, value_name = "EVENT", default_value = "purchaseEvent")]
    pub experiment_conversion: String,
    /// Follow the paths after this event: the --path-steps events each time a device did it, within
    /// the session.
    #[arg(long, value_name = "EVENT", conflicts_with = "path_before")]
    pub path_after: Option<String>,
    /// Follow the paths before this event: the --path-steps events before each time a device did
    /// it, within the session.
    #[arg(long, value_name = "EVENT")]
    pub path_before: Option<String>,
    /// Events per path, for --path-after and --path-before.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub path_steps: usize,
    /// Print each funnel as Athena SQL (date-scoped: the first and last eventDate are its two
    /// parameters) instead of the report.
    #[arg(long)]
    pub print_sql: bool,
    /// Range, format and output directory.
    #[command(flatten)]
    pub output: ReportOutputArgs,
}

/// Arguments of `lakelog parse`.
#[derive(Debug, Args)]
pub struct ParseArgs {
    /// Log files to parse; `-` (the default) reads standard input.
    #[arg(value_name = "FILE|-", default_value = "-")]
    pub files: Vec<PathBuf>,
}

/// Arguments of `lakelog ingest`.
#[derive(Debug, Args)]
pub struct IngestArgs {
    /// The access-log table: a local path or s3://bucket/prefix; `{bucket}` in it gives one table per
    /// observed bucket.
    #[arg(long, value_name = "URI")]
    pub table: String,
    /// The rejects table [default: the table URI with `_rejects` appended to its last segment,
    /// and `{bucket}` dropped: `access_logs/{bucket}` gives `access_logs/_rejects`].
    #[arg(long, value_name = "URI")]
    pub rejects_table: Option<String>,
    /// Objects read at once.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub concurrency: u16,
    /// Objects per commit (each commit checks and records this many txn ids).
    #[arg(long, default_value_t = 64)]
    pub objects_per_commit: usize,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
    /// Add the columns of this release that existing tables lack. Without it, tables of an older
    /// release are refused: their schema is the deployed functions' to change.
    #[arg(long)]
    pub evolve_schema: bool,
    /// Raw log files, directories or s3://bucket/prefix locations.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<String>,
}

/// Arguments of `lakelog generate-logs`.
#[derive(Debug, Args)]
pub struct GenerateLogsArgs {
    /// Folder to write the objects into.
    #[arg(long)]
    pub out: PathBuf,
    /// Total uncompressed bytes.
    #[arg(long, default_value_t = 100_000_000)]
    pub bytes: u64,
    /// Uncompressed bytes per object.
    #[arg(long, default_value_t = 10_000_000)]
    pub object_bytes: u64,
    /// Seed of the generator.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Share of malformed lines.
    #[arg(long, default_value_t = 0.001)]
    pub malformed_rate: f64,
    /// Gzip the objects.
    #[arg(long)]
    pub gzip: bool,
    /// Write S3's JSON form (as delivered through CloudWatch Logs: one JSON object per line) of
    /// the same records; --object-bytes then counts the text form they were made from.
    #[arg(long)]
    pub json: bool,
}
