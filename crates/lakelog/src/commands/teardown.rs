//! `lakelog teardown --stack NAME`: removes what a deployment made outside its stack, so that
//! deleting the stack leaves nothing behind but the data it retains on purpose: the games' keys,
//! usage plans and pseudonym keys, the observed buckets' access logging into the raw-logs bucket,
//! and an existing raw-logs bucket's notification to the stack's queue. Says what it would remove
//! unless given `--yes`.

use std::process::ExitCode;

use access_log_ingest::teardown::{logging_into, queue_arn, remove_notifications_to, stop_logging};
use anyhow::Context;
use clap::Args;
use game_api::ApiStageRef;
use game_api::admin::remove_stage_games;

/// Arguments of `lakelog teardown`.
#[derive(Debug, Args)]
pub struct TeardownArgs {
    /// The stack, before `sam delete` (its outputs name what to remove).
    #[arg(long, value_name = "NAME")]
    pub stack: String,
    /// Remove it; without, only say what would be removed.
    #[arg(long)]
    pub yes: bool,
}

/// Runs `lakelog teardown`.
pub fn run(args: &TeardownArgs) -> anyhow::Result<ExitCode> {
    let runtime = super::runtime()?;
    runtime.block_on(async {
        let sdk = aws_config::load_from_env().await;
        let outputs = super::stack_outputs(&sdk, &args.stack).await?;
        let output = |key: &str| outputs.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
        let dry_run = !args.yes;
        let verb = if dry_run { "would remove" } else { "removed" };

        if let Some(api_id) = output("GameEventsApiId") {
            let stage = ApiStageRef {
                api_id,
                stage: output("GameEventsApiStage").unwrap_or_else(|| "prod".into()),
            };
            let removed = remove_stage_games(
                &aws_sdk_apigateway::Client::new(&sdk),
                &aws_sdk_ssm::Client::new(&sdk),
                &stage,
                dry_run,
            )
            .await
            .context("cannot remove the games")?;
            println!("{}", serde_json::json!({"games": removed, "dryRun": dry_run}));
            eprintln!(
                "lakelog teardown: {verb} {} usage plans, {} API keys and {} pseudonym keys of the API {}",
                removed.usage_plans.len(),
                removed.keys.len(),
                removed.parameters.len(),
                stage.tag()
            );
        }

        if let Some(raw_logs) = output("RawLogsBucketName") {
            let s3 = aws_sdk_s3::Client::new(&sdk);
            let (logging, unread) = logging_into(&s3, &raw_logs).await?;
            for bucket in &logging {
                if !dry_run {
                    stop_logging(&s3, bucket).await?;
                }
            }
            let region = sdk.region().map(|r| r.to_string()).unwrap_or_default();
            let queue = output("RawLogsQueueUrl").and_then(|url| queue_arn(&url, &region));
            let notifications = match &queue {
                Some(arn) => remove_notifications_to(&s3, &raw_logs, arn, dry_run).await?,
                None => 0,
            };
            println!(
                "{}",
                serde_json::json!({"accessLogging": logging, "notifications": notifications, "dryRun": dry_run})
            );
            eprintln!(
                "lakelog teardown: {verb} the access logging of {} buckets into {raw_logs}{}",
                logging.len(),
                if notifications > 0 {
                    format!(", and its {notifications} notifications to the stack's queue")
                } else {
                    String::new()
                }
            );
            for (bucket, reason) in unread {
                eprintln!(
                    "lakelog teardown: could not read the access logging of {bucket} ({reason}): check it by hand"
                );
            }
        }
        if dry_run {
            eprintln!(
                "lakelog teardown: nothing removed; run again with --yes, then sam delete --stack-name {}",
                args.stack
            );
        } else {
            eprintln!(
                "lakelog teardown: now sam delete --stack-name {}; the lake and raw-logs buckets stay with their data \
                 (delete them yourself once you no longer need it)",
                args.stack
            );
        }
        Ok(ExitCode::SUCCESS)
    })
}
