//! The Lambda handlers: one function, its roles by the event it is handed ([`Role`]). A Kinesis
//! batch is staged ([`handle`]: the batch item failures out) and wakes the committer; the commit
//! queue's wake-ups run one committer pass ([`commit_woken`]); the schedule's tick runs passes
//! until one finds nothing staged ([`commit`]).
//!
//! [`Role`]: crate::wake::Role

use std::time::{Duration, Instant};

use aws_lambda_events::event::kinesis::KinesisEvent;
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use aws_lambda_events::event::streams::KinesisEventResponse;
use game_sink::{Sink, SinkCommit};
use lake::staging::Next;
use lake::{Retry, StagedCommit};
use lambda_runtime::{Error, LambdaEvent};

use crate::metrics::Reporter;
use crate::wake::{self, CommitQueue};

/// Time kept back from the invocation's deadline to answer with the record to retry from.
const ANSWER_MARGIN: std::time::Duration = std::time::Duration::from_secs(5);

/// Time before the invocation's deadline at which whatever still runs (a commit try past the
/// commits' deadline, a post-commit step, an S3 call that its client retries) is stopped, so
/// that the handler always answers: the batch is then retried whole, and the positions
/// committed with the rows keep a commit that landed all the same from being written twice.
const HARD_MARGIN: std::time::Duration = std::time::Duration::from_secs(2);

/// Stages the batch and reports the first record that was not staged, if any, so that Lambda
/// (with `ReportBatchItemFailures`) retries from it and not the records before it. A batch that
/// staged rows wakes the committer through `queue` ([`crate::wake`]); a wake-up that fails is a
/// warning, and the schedule's tick commits the batch. The batch's metrics go to standard output
/// ([`crate::metrics`]).
pub async fn handle(
    event: LambdaEvent<KinesisEvent>,
    sink: &Sink,
    metrics: &Reporter,
    queue: Option<&CommitQueue>,
) -> Result<KinesisEventResponse, Error> {
    // What is not staged by shortly before the invocation's deadline is reported, and Kinesis
    // delivers it again.
    let stop = Retry::for_invocation(event.context.deadline, HARD_MARGIN).deadline();
    let records = &event.payload.records;
    let report = match tokio::time::timeout_at(stop.into(), sink.stage(records)).await {
        Ok(report) => report,
        Err(_) => {
            tracing::warn!(
                records = records.len(),
                "the batch was still being written at the invocation's hard deadline; it is retried whole"
            );
            game_sink::BatchReport {
                records: records.len(),
                retry_from: records.first().map(|r| r.kinesis.sequence_number.clone()),
                ..game_sink::BatchReport::default()
            }
        }
    };
    if let Some(queue) = queue
        && report.rows + report.rejected as u64 > 0
    {
        match tokio::time::timeout_at(stop.into(), queue.wake()).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                tracing::warn!(%error, "the committer was not woken; the schedule's tick commits the batch");
            }
            Err(_) => tracing::warn!(
                "the wake-up was still being sent at the invocation's hard deadline; the schedule's tick commits the batch"
            ),
        }
    }
    for document in metrics.batch(&event.payload.records, &report, lake::now_micros() / 1000) {
        document.emit();
    }
    let mut response = KinesisEventResponse::default();
    if let Some(sequence_number) = report.retry_from {
        response.add_failure(sequence_number);
    }
    Ok(response)
}

/// One committer pass ([`Sink::commit_staged`]) that stops at `stop` and is abandoned at `hard`,
/// its metrics on standard output; `None` when it was abandoned. A pass that fails a table
/// leaves that table's work staged for the next.
async fn pass(sink: &Sink, metrics: &Reporter, stop: Instant, hard: Instant) -> Option<SinkCommit> {
    let started = Instant::now();
    let Ok(pass) = tokio::time::timeout_at(hard.into(), sink.commit_staged(&Retry::until(stop))).await else {
        tracing::warn!("a commit pass was still running at the invocation's hard deadline");
        return None;
    };
    for error in pass.failures() {
        tracing::warn!(%error, "a table's commit failed; its work stays staged for the next pass");
    }
    metrics.commit(&pass, started.elapsed()).emit();
    Some(pass)
}

/// Adds a pass's outcome to `summary`: an abandoned pass (`None`) counts as a failure.
fn tally(summary: &mut lake::staging::CommitSummary, pass: Option<&SinkCommit>) {
    let Some(pass) = pass else {
        summary.failed += 1;
        return;
    };
    for done in pass.done() {
        summary.add(done);
    }
    summary.failed += u32::try_from(pass.failures().count()).unwrap_or(u32::MAX);
}

/// Waits, until `hard`, for the packing of small files the last commits started, so that it ends
/// before the function answers.
async fn settle(sink: &Sink, hard: Instant) {
    if tokio::time::timeout_at(hard.into(), sink.settled()).await.is_err() {
        tracing::warn!("a packing of small files was still running at the invocation's hard deadline");
    }
}

/// The commit queue's wake-ups ([`crate::wake`]): one committer pass, which commits every link
/// staged before it started, so every link whose wake-up is in `event`. When a table's commit
/// failed (or the pass ran out of time), every wake-up is reported as a failure: SQS delivers
/// them again after the queue's visibility timeout, and the schedule's tick tries meanwhile.
pub async fn commit_woken(event: LambdaEvent<SqsEvent>, sink: &Sink, metrics: &Reporter) -> SqsBatchResponse {
    let deadline_ms = event.context.deadline;
    let stop = Retry::for_invocation(deadline_ms, ANSWER_MARGIN).deadline();
    let hard = Retry::for_invocation(deadline_ms, HARD_MARGIN).deadline();
    let mut summary = lake::staging::CommitSummary::default();
    tally(&mut summary, pass(sink, metrics, stop, hard).await.as_ref());
    settle(sink, hard).await;
    summary.passes = 1;
    tracing::debug!(?summary, wake_ups = event.payload.records.len(), "woken committer done");
    let mut response = SqsBatchResponse::default();
    if summary.failed > 0 {
        for id in wake::message_ids(&event.payload) {
            response.add_failure(id.to_owned());
        }
    }
    response
}

/// The schedule's tick, the net under a wake-up that was never sent: committer passes every
/// `interval` until one finds nothing staged, for at most a [`lake::staging::TICK`] and until
/// `ANSWER_MARGIN` before the invocation's deadline. An idle tick is one short pass. Two committers
/// at once (a tick beside a woken pass) commit nothing twice: the commits are guarded by the
/// positions they start from.
pub async fn commit(
    deadline_ms: u64,
    sink: &Sink,
    metrics: &Reporter,
    interval: Duration,
) -> lake::staging::CommitSummary {
    let stop = Retry::for_invocation(deadline_ms, ANSWER_MARGIN)
        .deadline()
        .min(Instant::now() + lake::staging::TICK);
    let hard = Retry::for_invocation(deadline_ms, HARD_MARGIN).deadline();
    let summary = std::cell::RefCell::new(lake::staging::CommitSummary::default());
    let passes = lake::staging::every(interval, stop, || async {
        let pass = pass(sink, metrics, stop, hard).await;
        tally(&mut summary.borrow_mut(), pass.as_ref());
        match pass {
            Some(pass) if pass.failures().next().is_none() && pass.done().all(StagedCommit::idle) => Next::Idle,
            _ => Next::Again,
        }
    })
    .await;
    settle(sink, hard).await;
    let summary = lake::staging::CommitSummary {
        passes,
        ..summary.into_inner()
    };
    tracing::info!(?summary, "committer done");
    summary
}
