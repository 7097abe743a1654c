//! `lakelog report`: print a report, and write it with charts when `--out` is given.

use std::process::ExitCode;

use lake::StorageConfig;

use crate::cli::{AccessReportArgs, GameReportArgs, ReportArgs, ReportCommand, ReportOutputArgs};
use lakelog_reports::access::{AccessOptions, DatasetRule, Inventory, PriceTable};
use lakelog_reports::game::{Direction, Funnel, GameOptions, PathSpec, game_report_with};
use lakelog_reports::{Format, ReportDir, ReportError, ReportSession, TimeRange, quote_literal};

/// Runs the report named on the command line.
pub fn run(args: &ReportArgs) -> anyhow::Result<ExitCode> {
    let runtime = super::runtime()?;
    match &args.report {
        ReportCommand::Access(access) => runtime.block_on(access_command(access)),
        ReportCommand::Game(game) => runtime.block_on(game_command(game)),
    }
}

async fn game_command(args: &GameReportArgs) -> anyhow::Result<ExitCode> {
    let range = range(&args.output)?;
    let mut funnels = Vec::new();
    for path in &args.funnels {
        funnels.extend(Funnel::read_file(path)?);
    }
    for (n, steps) in args.funnel.iter().enumerate() {
        let name = format!("{}", n + 1);
        funnels.push(Funnel::parse(
            &name,
            steps,
            args.funnel_window,
            args.funnel_order,
            "--funnel",
        )?);
    }
    let paths = match (&args.path_after, &args.path_before) {
        (Some(event), _) => Some(PathSpec::new(event, Direction::After, args.path_steps, "--path-after")?),
        (None, Some(event)) => Some(PathSpec::new(
            event,
            Direction::Before,
            args.path_steps,
            "--path-before",
        )?),
        (None, None) => None,
    };
    if args.print_sql {
        for funnel in &funnels {
            println!("-- Funnel {}\n{}", funnel.name, funnel.athena_sql("game_events"));
        }
        if let Some(paths) = &paths {
            println!(
                "-- Paths\n{}",
                paths.athena_sql("game_events", i64::from(args.session_gap))
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    let Some(uri) = &args.table else {
        anyhow::bail!("--table is needed unless --print-sql is given");
    };
    let session = ReportSession::new();
    session
        .register_tables("game_events", std::slice::from_ref(uri), &StorageConfig::from_env())
        .await?;
    // One game: a view of its events, which the report reads as it reads the table.
    let table = match &args.game {
        None => "game_events",
        Some(game) => {
            let view = format!(
                "CREATE VIEW game_events_of_one_game AS SELECT * FROM game_events WHERE \"gameId\" = {}",
                quote_literal(game)
            );
            session.context().sql(&view).await?;
            "game_events_of_one_game"
        }
    };
    let options = GameOptions {
        session_gap: chrono::TimeDelta::minutes(i64::from(args.session_gap)),
        chunk_rows: args.chunk_rows,
        funnels,
        conversion: args.experiment_conversion.clone(),
        paths,
    };
    let report = game_report_with(&session, table, &range, &options).await?;
    match args.output.format {
        Format::Table => print!("{}", report.render_text()),
        Format::Json => println!("{}", serde_json::to_string_pretty(&report.to_json())?),
    }
    if let Some(out) = &args.output.out {
        let page = report.write_html(&ReportDir::create(out)?)?;
        eprintln!("report written to {}", page.display());
    }
    Ok(ExitCode::SUCCESS)
}

async fn access_command(args: &AccessReportArgs) -> anyhow::Result<ExitCode> {
    let range = range(&args.output)?;
    let storage = StorageConfig::from_env();
    let mut options = access_options(args)?;
    options.inventories = Inventory::read_all(&args.inventories, &storage, &options.rule).await?;
    if args.unread_days.is_some() && options.inventories.is_empty() {
        return Err(ReportError::invalid_argument(
            "--unread-days",
            &args.unread_days.unwrap_or_default().to_string(),
            "needs --inventory: the objects to list are those the inventories hold",
        )
        .into());
    }
    let report = lakelog_reports::access::run(&args.tables, &storage, &range, &options).await?;
    match args.output.format {
        Format::Table => print!("{}", report.render_text()),
        Format::Json => println!("{}", report.to_json()?),
    }
    if let (Some(dir), Some(objects)) = (&args.manifests, &report.objects) {
        let written = lakelog_reports::access::write_manifests(objects, dir)?;
        eprintln!(
            "{} S3 Batch Operations manifests written to {}",
            written.len(),
            dir.display()
        );
    }
    if let Some(out) = &args.output.out {
        let page = report.write_html(&ReportDir::create(out)?)?;
        eprintln!("report written to {}", page.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// The access report's options from its arguments.
pub fn access_options(args: &AccessReportArgs) -> Result<AccessOptions, ReportError> {
    let prices = match &args.prices {
        Some(path) => PriceTable::load(path)?,
        None => PriceTable::default_table()?,
    };
    let mut rule = DatasetRule::with_depth(args.dataset_depth);
    if let Some(pattern) = &args.dataset_regex {
        let regex = regex::Regex::new(pattern)
            .map_err(|e| ReportError::invalid_argument("--dataset-regex", pattern, e.to_string()))?;
        rule = rule.with_regex(regex);
    }
    if !(0.0..=1.0).contains(&args.rare_share) {
        return Err(ReportError::invalid_argument(
            "--rare-share",
            &args.rare_share.to_string(),
            "a share between 0 and 1",
        ));
    }
    Ok(AccessOptions {
        rule,
        unused_days: args.unused_days,
        prices,
        top: args.top.max(1),
        rare_share: args.rare_share,
        inventories: Vec::new(),
        unread_days: args.unread_days,
    })
}

fn range(output: &ReportOutputArgs) -> anyhow::Result<TimeRange> {
    Ok(TimeRange::parse(output.from.as_deref(), output.to.as_deref())?)
}
