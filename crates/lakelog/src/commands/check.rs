//! `lakelog check`: does the deployment work? Probe events of the reserved probe game through the
//! public endpoint, the time from the API's answer to their committed rows, each probe once
//! ([`canary::probe`]); with `--stack`, also the stack's alarms, the stream's age and the last
//! maintenance ([`canary::stack`]). The probes are erased afterwards: at once on a local table, by
//! the next maintenance pass on a stack.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use serde_json::{Value, json};

/// Arguments of `lakelog check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The deployed stack: its endpoint, probe game, table, alarms, stream and maintenance state
    /// come from its outputs.
    #[arg(long, value_name = "NAME", required_unless_present = "endpoint", conflicts_with_all = ["endpoint", "key", "table"])]
    pub stack: Option<String>,
    /// Instead of a stack, an API's /events URL (`lakelog serve`: http://127.0.0.1:8080/events).
    #[arg(long, value_name = "URL", requires_all = ["key", "table"])]
    pub endpoint: Option<String>,
    /// With --endpoint: the key of the game lakelog-probe (in `lakelog serve`'s games file).
    #[arg(long, value_name = "KEY")]
    pub key: Option<String>,
    /// With --endpoint: the game_events table the API's sink writes (`lakelog serve`'s is
    /// LAKE/game_events).
    #[arg(long, value_name = "URI")]
    pub table: Option<String>,
    /// Probe events sent, in one request.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=100))]
    pub probes: u16,
    /// Seconds the rows may take after the API's answer.
    #[arg(long, default_value_t = 120)]
    pub deadline: u64,
    /// Leave the probes' rows in the table (they are left out of every report all the same).
    #[arg(long)]
    pub keep: bool,
}

/// Runs `lakelog check`: prints the findings as one JSON object, and a line of each in words on
/// standard error; exits 1 unless every probe landed exactly once and no alarm fires.
pub fn run(args: &CheckArgs) -> anyhow::Result<ExitCode> {
    let runtime = super::runtime()?;
    runtime.block_on(check(args))
}

async fn check(args: &CheckArgs) -> anyhow::Result<ExitCode> {
    let options = canary::Options {
        probes: usize::from(args.probes),
        deadline: Duration::from_secs(args.deadline),
        ..canary::Options::default()
    };
    let storage = lake::StorageConfig::from_env();
    let client = reqwest::Client::new();
    let mut findings = serde_json::Map::new();
    let mut healthy = true;

    let Some(stack) = &args.stack else {
        let (Some(url), Some(key), Some(table)) = (&args.endpoint, &args.key, &args.table) else {
            anyhow::bail!("give --stack, or --endpoint with --key and --table");
        };
        let target = canary::Target {
            url: url.clone(),
            key: key.clone(),
            table: table.clone(),
            storage: storage.clone(),
        };
        let probe = canary::probe(&client, &target, &options).await?;
        healthy &= said_probe(&probe, &mut findings)?;
        if probe.accepted && !args.keep {
            let targets = game_sink::erasure::ErasureTargets::of(game_sink::Config::new(table, None)?, None);
            let receipt = game_sink::erasure::forget(&targets, &storage, &canary::erasure_request()?, Duration::ZERO)
                .await
                .context("cannot erase the probes")?;
            eprintln!("lakelog check: the probes' {} rows erased", receipt.found);
            findings.insert("probesErased".into(), Value::from(receipt.found));
        }
        println!("{}", Value::Object(findings));
        return Ok(exit(healthy));
    };

    let sdk = aws_config::load_from_env().await;
    let outputs = super::stack_outputs(&sdk, stack).await?;
    let output = |key: &str| {
        outputs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .with_context(|| format!("the stack {stack} has no output {key}: is it deployed from this release, with the game events pipeline?"))
    };
    let key = canary::probe_key(&aws_sdk_apigateway::Client::new(&sdk), &output("CanaryApiKeyId")?)
        .await
        .map_err(anyhow::Error::msg)?;
    let target = canary::Target {
        url: output("GameEventsEndpoint")?,
        key,
        table: output("GameEventsTableUri")?,
        storage: storage.clone(),
    };
    let probe = canary::probe(&client, &target, &options).await?;
    healthy &= said_probe(&probe, &mut findings)?;
    if probe.accepted && !args.keep {
        let request = canary::request_erasure(&output("ErasureRequestsUri")?, &storage).await?;
        eprintln!("lakelog check: the probes' erasure asked for: {request}");
        findings.insert("erasureRequest".into(), Value::from(request));
    }

    let cloudwatch = aws_sdk_cloudwatch::Client::new(&sdk);
    let alarms = canary::stack::alarms(&cloudwatch, stack)
        .await
        .map_err(anyhow::Error::msg)?;
    let firing: Vec<&str> = alarms.iter().filter(|a| a.firing()).map(|a| a.name.as_str()).collect();
    healthy &= firing.is_empty();
    eprintln!(
        "lakelog check: {} alarms, {} firing{}",
        alarms.len(),
        firing.len(),
        if firing.is_empty() {
            String::new()
        } else {
            format!(": {}", firing.join(", "))
        }
    );
    findings.insert("alarms".into(), serde_json::to_value(&alarms)?);

    let stream = output("GameEventsStreamName")?;
    let age = canary::stack::stream_age(&cloudwatch, &stream, Duration::from_secs(600))
        .await
        .map_err(anyhow::Error::msg)?;
    match age {
        Some(seconds) => eprintln!(
            "lakelog check: the stream {stream} was read {seconds:.1} s behind at most in the last 10 minutes"
        ),
        None => eprintln!("lakelog check: Kinesis recorded no read of the stream {stream} in the last 10 minutes"),
    }
    findings.insert("streamAgeSeconds".into(), json!(age));

    let maintenance = canary::stack::maintenance(&output("MaintenanceStateUri")?, &storage)
        .await
        .map_err(anyhow::Error::msg)?;
    match &maintenance {
        Some(m) => eprintln!(
            "lakelog check: maintenance last went through a table at {}; the one longest ago {} hours ago ({} tables)",
            m.last_completed_at.as_deref().unwrap_or("never"),
            m.hours_since_oldest
                .map_or_else(|| "-".to_owned(), |h| format!("{h:.1}")),
            m.tables
        ),
        None => eprintln!("lakelog check: the maintenance function has not run yet"),
    }
    findings.insert("maintenance".into(), serde_json::to_value(&maintenance)?);
    println!("{}", Value::Object(findings));
    Ok(exit(healthy))
}

/// Adds the probe to `findings` and says it in words; whether every probe landed once.
fn said_probe(probe: &canary::Probe, findings: &mut serde_json::Map<String, Value>) -> anyhow::Result<bool> {
    match (&probe.error, probe.accept_to_row_seconds) {
        (None, Some(seconds)) => eprintln!(
            "lakelog check: {} probes accepted in {:.0} ms, each a row exactly once {seconds:.1} s later",
            probe.event_ids.len(),
            probe.answer_ms
        ),
        (error, _) => eprintln!(
            "lakelog check: {}",
            error.as_deref().unwrap_or("the probes did not land")
        ),
    }
    findings.insert("probe".into(), serde_json::to_value(probe)?);
    Ok(probe.landed && probe.once)
}

fn exit(healthy: bool) -> ExitCode {
    if healthy { ExitCode::SUCCESS } else { ExitCode::from(1) }
}
