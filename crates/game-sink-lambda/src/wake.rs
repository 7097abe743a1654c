//! Commits on demand. A writer that staged something sends a wake-up to the commit queue
//! (`GAME_EVENTS_COMMIT_QUEUE_URL`); the queue's event source mapping gathers the wake-ups of
//! `SinkCommitIntervalSeconds` into one invocation, which runs one committer pass
//! ([`crate::handler::commit_woken`]). A committer thus runs only when there is something to commit,
//! and a staged batch waits about one interval, not a minute's tick. The schedule's tick stays as
//! the net under a wake-up that was never sent: it commits what is staged and ends at its first
//! pass that finds nothing.

use aws_lambda_events::event::sqs::SqsEvent;
use serde_json::Value;

/// The setting naming the commit queue; without it the writers send no wake-ups and only the
/// schedule's tick commits.
pub const QUEUE_VAR: &str = "GAME_EVENTS_COMMIT_QUEUE_URL";

/// The body of a wake-up: the same as the schedule's tick event, so that either, handed to the
/// function by hand, commits.
pub const WAKE_UP: &str = r#"{"lakelog":"commit"}"#;

/// What an invocation of the sink function is for, by its event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A Kinesis batch (`Records` from `aws:kinesis`): stage it.
    Stage,
    /// Wake-ups from the commit queue (`Records` from `aws:sqs`): one committer pass.
    CommitWoken,
    /// Anything else (the schedule's `{"lakelog": "commit"}`): committer passes until one finds
    /// nothing staged.
    Tick,
}

impl Role {
    /// The role of an invocation whose event is `payload`.
    pub fn of(payload: &Value) -> Self {
        let Some(records) = payload.get("Records") else {
            return Role::Tick;
        };
        let source = records
            .get(0)
            .and_then(|r| r.get("eventSource"))
            .and_then(Value::as_str);
        if source == Some("aws:sqs") {
            Role::CommitWoken
        } else {
            Role::Stage
        }
    }
}

/// Why a wake-up was not sent.
#[derive(Debug, thiserror::Error)]
pub enum WakeError {
    /// SQS refused the message or could not be reached; the schedule's tick commits the batch.
    #[error("sending a wake-up to the commit queue {queue} failed: {source}")]
    Send {
        /// The queue's URL.
        queue: String,
        /// SQS's error.
        #[source]
        source: Box<aws_sdk_sqs::error::SdkError<aws_sdk_sqs::operation::send_message::SendMessageError>>,
    },
}

/// The commit queue the writers wake the committer through.
#[derive(Debug, Clone)]
pub struct CommitQueue {
    client: aws_sdk_sqs::Client,
    url: String,
}

impl CommitQueue {
    /// The queue at `url`, sent to with `client`.
    pub fn new(client: aws_sdk_sqs::Client, url: impl Into<String>) -> Self {
        Self {
            client,
            url: url.into(),
        }
    }

    /// The queue at `url` (the value of [`QUEUE_VAR`], if set), with a client from the
    /// environment's AWS configuration.
    pub async fn from_env(url: Option<String>) -> Option<Self> {
        let url = url?;
        let config = aws_config::load_from_env().await;
        Some(Self::new(aws_sdk_sqs::Client::new(&config), url))
    }

    /// Sends one wake-up.
    pub async fn wake(&self) -> Result<(), WakeError> {
        self.client
            .send_message()
            .queue_url(&self.url)
            .message_body(WAKE_UP)
            .send()
            .await
            .map_err(|source| WakeError::Send {
                queue: self.url.clone(),
                source: Box::new(source),
            })?;
        Ok(())
    }
}

/// The message ids of `event`'s wake-ups, to report as failures when the pass they woke did not
/// commit everything: SQS then delivers them again once their visibility timeout passes.
pub fn message_ids(event: &SqsEvent) -> impl Iterator<Item = &str> {
    event.records.iter().filter_map(|r| r.message_id.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_invocation_s_role_is_read_from_its_records_source() {
        let kinesis = json!({"Records": [{"eventSource": "aws:kinesis", "kinesis": {}}]});
        let sqs = json!({"Records": [{"eventSource": "aws:sqs", "body": WAKE_UP}]});
        assert_eq!(Role::of(&kinesis), Role::Stage);
        assert_eq!(Role::of(&sqs), Role::CommitWoken);
        assert_eq!(Role::of(&json!({"lakelog": "commit"})), Role::Tick);
        assert_eq!(Role::of(&json!({})), Role::Tick);
        // An empty batch stages nothing, as a batch.
        assert_eq!(Role::of(&json!({"Records": []})), Role::Stage);
    }

    #[test]
    fn a_wake_up_is_the_ticks_event() {
        let sample = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../events/scheduled-commit.json"
        ))
        .unwrap();
        let sample: Value = serde_json::from_slice(&sample).unwrap();
        assert_eq!(sample, serde_json::from_str::<Value>(WAKE_UP).unwrap());
    }
}
