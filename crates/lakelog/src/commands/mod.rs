//! One module per subcommand.

pub mod catalog;
pub mod check;
pub mod checkpoint;
pub mod demo;
pub mod forget;
pub mod games;
pub mod generate;
pub mod ingest;
pub mod optimize;
pub mod parse;
pub mod replay;
pub mod report;
pub mod send_events;
pub mod serve;
pub mod teardown;
pub mod vacuum;

use std::time::Duration;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};

/// The multi-threaded runtime a command runs its async work on.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Runtime::new().context("cannot start the async runtime")
}

/// The outputs of the CloudFormation stack `stack`, by key.
async fn stack_outputs(sdk: &aws_config::SdkConfig, stack: &str) -> anyhow::Result<Vec<(String, String)>> {
    let described = aws_sdk_cloudformation::Client::new(sdk)
        .describe_stacks()
        .stack_name(stack)
        .send()
        .await
        .map_err(|e| {
            let reason = aws_sdk_cloudformation::error::DisplayErrorContext(e);
            anyhow::anyhow!("cannot read the outputs of the stack {stack}: {reason}")
        })?;
    let outputs = described.stacks().iter().flat_map(|s| s.outputs());
    Ok(outputs
        .filter_map(|o| Some((o.output_key()?.to_owned(), o.output_value()?.to_owned())))
        .collect())
}

/// A spinner on standard error showing the elapsed time and `message` while one step of unknown
/// length runs; hidden with `--quiet`. The caller clears it when the step ends.
fn spinner(quiet: bool, message: String) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let spinner = ProgressBar::new_spinner();
    spinner.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    spinner.set_message(message);
    spinner.enable_steady_tick(Duration::from_millis(120));
    spinner
}
