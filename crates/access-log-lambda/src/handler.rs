//! The Lambda handlers: one function, two roles by the event it is handed. A batch of SQS
//! messages carrying S3 notifications is staged ([`handle`]: the messages to retry out); its
//! schedule's tick runs committer passes over the tables ([`commit`]).

use std::collections::HashMap;

use access_log_ingest::notification::{Notification, parse_body};
use access_log_ingest::{IngestError, Ingestor, ObjectRef};
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lake::staging::Next;
use lake::{Retry, StagedCommit};
use lambda_runtime::LambdaEvent;
use tracing::{info, warn};

use crate::metrics;

/// Time kept back from the invocation's deadline to answer with the messages to retry.
const ANSWER_MARGIN: std::time::Duration = std::time::Duration::from_secs(5);

/// Time before the invocation's deadline at which whatever still runs (a read, a commit try
/// past the commits' deadline, a post-commit step, an S3 call that its client retries) is
/// stopped, so that the handler always answers: every message is then retried, and the `txn`
/// of each object keeps a commit that landed all the same from being written twice.
const HARD_MARGIN: std::time::Duration = std::time::Duration::from_secs(2);

/// The handler failed as a whole: Lambda retries the entire batch.
#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    /// A message that must be retried has no message id to report it by.
    #[error("message {index} of the batch failed and has no messageId to report it by")]
    NoMessageId {
        /// The message's index in the batch.
        index: usize,
    },
}

/// Ingests every object the batch's notifications name (staged, with an ingestor
/// [`with_staging`](Ingestor::with_staging), for the committer), and reports as failed exactly the
/// messages with an object that could not be read or written, or with a body that is not a
/// notification (so that it ends in the dead-letter queue). `s3:TestEvent` messages succeed.
/// The invocation's metrics go to standard output in `namespace` ([`crate::metrics`]).
pub async fn handle(
    event: LambdaEvent<SqsEvent>,
    ingestor: &Ingestor,
    namespace: &str,
) -> Result<SqsBatchResponse, HandlerError> {
    let records = event.payload.records;
    let mut wanted: Vec<ObjectRef> = Vec::new();
    let mut per_message: Vec<Result<Vec<ObjectRef>, String>> = Vec::with_capacity(records.len());
    for record in &records {
        let body = record.body.as_deref().unwrap_or("");
        let parsed = match parse_body(body) {
            Ok(Notification::Objects(objects)) => Ok(objects),
            Ok(Notification::Test) => {
                info!(message_id = record.message_id.as_deref(), "skipping s3:TestEvent");
                Ok(Vec::new())
            }
            Err(e) => Err(e.to_string()),
        };
        if let Ok(objects) = &parsed {
            wanted.extend(objects.iter().cloned());
        }
        per_message.push(parsed);
    }

    // Commits keep trying until shortly before the invocation's deadline; what is not committed
    // by then is reported as failed, and SQS delivers it again.
    let retry = Retry::for_invocation(event.context.deadline, ANSWER_MARGIN);
    let commits = metrics::Commits::default();
    let stop = Retry::for_invocation(event.context.deadline, HARD_MARGIN).deadline();
    let outcomes = match tokio::time::timeout_at(stop.into(), ingestor.ingest(&wanted, &retry, &commits)).await {
        Ok(outcomes) => outcomes,
        Err(_) => {
            warn!(
                objects = wanted.len(),
                "the objects were still being ingested at the invocation's hard deadline; every message is retried"
            );
            wanted
                .iter()
                .map(|object| {
                    let error = IngestError::Unfinished { object: object.uri() };
                    (object.clone(), Err(error))
                })
                .collect()
        }
    };
    let failed: HashMap<&ObjectRef, String> = outcomes
        .iter()
        .filter_map(|(object, result)| result.as_ref().err().map(|e| (object, e.to_string())))
        .collect();

    let mut response = SqsBatchResponse::default();
    for (index, (record, parsed)) in records.iter().zip(per_message).enumerate() {
        let problem = match parsed {
            Err(reason) => Some(reason),
            Ok(objects) => objects.iter().find_map(|o| failed.get(o).cloned()),
        };
        let Some(problem) = problem else { continue };
        let id = record.message_id.clone().ok_or(HandlerError::NoMessageId { index })?;
        warn!(message_id = %id, error = %problem, "message will be retried");
        response.add_failure(id);
    }
    let failed_messages = response.batch_item_failures.len();
    metrics::invocation(namespace, &outcomes, &commits, failed_messages, lake::now_micros()).emit();
    Ok(response)
}

impl From<HandlerError> for lambda_runtime::Diagnostic {
    fn from(e: HandlerError) -> Self {
        lambda_runtime::Diagnostic {
            error_type: "AccessLogIngest.NoMessageId".into(),
            error_message: e.to_string(),
        }
    }
}

/// Runs committer passes ([`Ingestor::commit_staged`]) every `interval` for a
/// [`lake::staging::TICK`], or until `ANSWER_MARGIN` before the invocation's deadline if that
/// comes first, or until a pass that reached every table found nothing staged or waiting: an idle
/// deployment then pays a pass a minute, not a tick, and what is staged meanwhile waits for the
/// next tick (S3 delivers access logs minutes to hours after the requests). Each pass's metrics go
/// to standard output in `namespace`. Work a pass could not commit stays staged for the next; two
/// committers at once commit each object once (its `txn`).
pub async fn commit(
    deadline_ms: u64,
    ingestor: &Ingestor,
    namespace: &str,
    interval: std::time::Duration,
) -> lake::staging::CommitSummary {
    let stop = Retry::for_invocation(deadline_ms, ANSWER_MARGIN)
        .deadline()
        .min(std::time::Instant::now() + lake::staging::TICK);
    let hard = Retry::for_invocation(deadline_ms, HARD_MARGIN).deadline();
    let summary = std::cell::RefCell::new(lake::staging::CommitSummary::default());
    let passes = lake::staging::every(interval, stop, || async {
        let started = std::time::Instant::now();
        let Ok(pass) = tokio::time::timeout_at(hard.into(), ingestor.commit_staged(&Retry::until(stop))).await else {
            warn!("a commit pass was still running at the invocation's hard deadline");
            return Next::Again;
        };
        let mut summary = summary.borrow_mut();
        match &pass {
            Ok(tables) => {
                for (table, result) in tables {
                    match result {
                        Ok(done) => summary.add(done),
                        Err(error) => {
                            summary.failed += 1;
                            warn!(table, %error, "commit failed; its work stays staged for the next pass");
                        }
                    }
                }
            }
            Err(error) => {
                summary.failed += 1;
                warn!(%error, "commit pass could not find the tables");
            }
        }
        metrics::commit_pass(namespace, &pass, started.elapsed()).emit();
        // A pass that ended before the tick's end reached every table (tables are left only at
        // the deadline).
        let idle = std::time::Instant::now() < stop
            && pass.as_ref().is_ok_and(|tables| {
                tables
                    .iter()
                    .all(|(_, done)| done.as_ref().is_ok_and(StagedCommit::idle))
            });
        if idle { Next::Idle } else { Next::Again }
    })
    .await;
    // The packings of small files the last commits started end before the function answers.
    if tokio::time::timeout_at(hard.into(), ingestor.settled()).await.is_err() {
        warn!("a packing of small files was still running at the invocation's hard deadline");
    }
    let summary = lake::staging::CommitSummary {
        passes,
        ..summary.into_inner()
    };
    info!(?summary, "committer done");
    summary
}
