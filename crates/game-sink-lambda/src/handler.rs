//! The Lambda handlers: one function, two roles by the event it is handed. A Kinesis batch is
//! staged ([`handle`]: the batch item failures out); its schedule's tick runs committer passes
//! until shortly before the invocation's deadline ([`commit`]).

use std::time::{Duration, Instant};

use aws_lambda_events::event::kinesis::KinesisEvent;
use aws_lambda_events::event::streams::KinesisEventResponse;
use game_sink::Sink;
use lake::Retry;
use lake::staging::Next;
use lambda_runtime::{Error, LambdaEvent};

use crate::metrics::Reporter;

/// Time kept back from the invocation's deadline to answer with the record to retry from.
const ANSWER_MARGIN: std::time::Duration = std::time::Duration::from_secs(5);

/// Time before the invocation's deadline at which whatever still runs (a commit try past the
/// commits' deadline, a post-commit step, an S3 call that its client retries) is stopped, so
/// that the handler always answers: the batch is then retried whole, and the positions
/// committed with the rows keep a commit that landed all the same from being written twice.
const HARD_MARGIN: std::time::Duration = std::time::Duration::from_secs(2);

/// Stages the batch and reports the first record that was not staged, if any, so that Lambda
/// (with `ReportBatchItemFailures`) retries from it and not the records before it. The batch's
/// metrics go to standard output ([`crate::metrics`]).
pub async fn handle(
    event: LambdaEvent<KinesisEvent>,
    sink: &Sink,
    metrics: &Reporter,
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
    for document in metrics.batch(&event.payload.records, &report, lake::now_micros() / 1000) {
        document.emit();
    }
    let mut response = KinesisEventResponse::default();
    if let Some(sequence_number) = report.retry_from {
        response.add_failure(sequence_number);
    }
    Ok(response)
}

/// Runs committer passes ([`Sink::commit_staged`]) every `interval` for a [`lake::staging::TICK`],
/// or until `ANSWER_MARGIN` before the invocation's deadline if that comes first. Each pass's
/// metrics go to standard output; a pass that fails leaves its work staged for the next. Two
/// committers at once (a tick that came late) commit nothing twice: the commits are guarded by the
/// positions they start from. The tick runs its passes whether anything is staged or not, so that a
/// batch waits at most a pass.
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
        let started = Instant::now();
        let pass = match tokio::time::timeout_at(hard.into(), sink.commit_staged(&Retry::until(stop))).await {
            Ok(pass) => pass,
            Err(_) => {
                tracing::warn!("a commit pass was still running at the invocation's hard deadline");
                return Next::Again;
            }
        };
        let mut summary = summary.borrow_mut();
        for done in pass.done() {
            summary.add(done);
        }
        for error in pass.failures() {
            summary.failed += 1;
            tracing::warn!(%error, "a table's commit failed; its work stays staged for the next pass");
        }
        metrics.commit(&pass, started.elapsed()).emit();
        // The sink stages a batch every few seconds per shard while players play: a committer
        // that ended its tick when a pass found nothing would leave the next batch waiting for
        // the next tick, a minute at worst.
        Next::Again
    })
    .await;
    // The packing of small files the last commits started ends before the function answers.
    if tokio::time::timeout_at(hard.into(), sink.settled()).await.is_err() {
        tracing::warn!("a packing of small files was still running at the invocation's hard deadline");
    }
    let summary = lake::staging::CommitSummary {
        passes,
        ..summary.into_inner()
    };
    tracing::info!(?summary, "committer done");
    summary
}
