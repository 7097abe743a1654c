//! `lakelog report`: print a report, and write it with charts when `--out` is given.

use std::process::ExitCode;

use anyhow::Context as _;
use lake::StorageConfig;

use crate::cli::{GameReportArgs, ReportArgs, ReportCommand, ReportOutputArgs};
use crate::report::game::game_report;
use crate::report::{Format, ReportDir, ReportSession, TimeRange};

/// Runs the report named on the command line.
pub fn run(args: &ReportArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    match &args.report {
        ReportCommand::Game(game) => runtime.block_on(game_command(game)),
    }
}

async fn game_command(args: &GameReportArgs) -> anyhow::Result<ExitCode> {
    let range = range(&args.output)?;
    let session = ReportSession::new();
    session
        .register_tables(
            "game_events",
            std::slice::from_ref(&args.table),
            &StorageConfig::from_env(),
        )
        .await?;
    let report = game_report(&session, "game_events", &range).await?;
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

fn range(output: &ReportOutputArgs) -> anyhow::Result<TimeRange> {
    Ok(TimeRange::parse(output.from.as_deref(), output.to.as_deref())?)
}
