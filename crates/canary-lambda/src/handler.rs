//! The Lambda handler: a scheduled EventBridge event in, one probe through the deployed API, its
//! report out, and its figures as metrics.

use std::time::Duration;

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use canary::{Options, Probe, Target};
use lake::StorageConfig;
use lambda_runtime::LambdaEvent;
use serde::Serialize;
use tracing::{error, info, warn};

use crate::config::Config;

/// Time kept back from the invocation's deadline for the report and the erasure request.
const RESERVE: Duration = Duration::from_secs(10);

/// The probe could not be checked: the table could not be read. A probe that did not land is no
/// error (the metric and the alarm on it say so); this is, so that the errors alarm fires too.
#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    /// The table could not be read, or the erasure request written.
    #[error("{0}")]
    Canary(#[from] canary::CanaryError),
}

impl From<HandlerError> for lambda_runtime::Diagnostic {
    fn from(e: HandlerError) -> Self {
        lambda_runtime::Diagnostic {
            error_type: "Canary.CheckFailed".into(),
            error_message: e.to_string(),
        }
    }
}

/// The canary's dependencies, built once per instance.
#[derive(Debug, Clone)]
pub struct Canary {
    client: reqwest::Client,
    target: Target,
    deadline: Duration,
    requests: Option<String>,
    namespace: String,
}

impl Canary {
    /// The canary of `config`, sending probes with the probe game's `key`.
    pub fn new(config: Config, key: String, storage: StorageConfig) -> Self {
        Self {
            client: reqwest::Client::new(),
            target: Target {
                url: config.url,
                key,
                table: config.table,
                storage,
            },
            deadline: config.deadline,
            requests: config.requests,
            namespace: emf::DEFAULT_NAMESPACE.to_owned(),
        }
    }

    /// The canary, writing its metrics in `namespace`.
    pub fn with_metrics_namespace(mut self, namespace: &str) -> Self {
        self.namespace = namespace.to_owned();
        self
    }
}

/// The function's response: the probe, and where its erasure was asked for.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// What the probe found.
    #[serde(flatten)]
    pub probe: Probe,
    /// The erasure request written for the probes, if the canary writes them.
    pub erasure_request: Option<String>,
}

/// Sends one probe and waits for its row, within the configured deadline and the invocation's.
pub async fn handle(event: LambdaEvent<EventBridgeEvent>, canary: &Canary) -> Result<Report, HandlerError> {
    let left = Duration::from_millis(event.context.deadline.saturating_sub(now_ms()));
    let options = Options {
        deadline: canary.deadline.min(left.saturating_sub(RESERVE)),
        ..Options::default()
    };
    let probe = match canary::probe(&canary.client, &canary.target, &options).await {
        Ok(probe) => probe,
        Err(e) => {
            error!(error = %e, "the probe could not be checked");
            crate::metrics::unchecked(&canary.namespace).emit();
            return Err(e.into());
        }
    };
    crate::metrics::of_probe(&canary.namespace, &probe).emit();
    match (&probe.error, probe.accept_to_row_seconds) {
        (None, Some(seconds)) => info!(seconds, rows = probe.rows, "the probe landed"),
        (error, _) => warn!(
            error = error.as_deref().unwrap_or_default(),
            "the probe did not land as it should"
        ),
    }
    // Asked for whenever the probes were accepted: one that landed late is erased all the same.
    let erasure_request = match (&canary.requests, probe.accepted) {
        (Some(requests), true) => Some(canary::request_erasure(requests, &canary.target.storage).await?),
        _ => None,
    };
    Ok(Report { probe, erasure_request })
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
