//! The Lambda handler: a Kinesis batch in, the batch item failures out.

use aws_lambda_events::event::kinesis::KinesisEvent;
use aws_lambda_events::event::streams::KinesisEventResponse;
use game_sink::Sink;
use lake::Retry;
use lambda_runtime::{Error, LambdaEvent};

use crate::metrics::Reporter;

/// Time kept back from the invocation's deadline to answer with the record to retry from.
const ANSWER_MARGIN: std::time::Duration = std::time::Duration::from_secs(5);

/// Time before the invocation's deadline at which whatever still runs (a commit try past the
/// commits' deadline, a post-commit step, an S3 call that its client retries) is stopped, so
/// that the handler always answers: the batch is then retried whole, and the positions
/// committed with the rows keep a commit that landed all the same from being written twice.
const HARD_MARGIN: std::time::Duration = std::time::Duration::from_secs(2);

/// Writes the batch and reports the first record that was not committed, if any, so that Lambda
/// (with `ReportBatchItemFailures`) retries from it and not the records before it. The batch's
/// metrics go to standard output ([`crate::metrics`]).
pub async fn handle(
    event: LambdaEvent<KinesisEvent>,
    sink: &Sink,
    metrics: &Reporter,
) -> Result<KinesisEventResponse, Error> {
    // Commits keep trying until shortly before the invocation's deadline; what is not committed
    // by then is reported, and Kinesis delivers it again.
    let retry = Retry::for_invocation(event.context.deadline, ANSWER_MARGIN);
    let stop = Retry::for_invocation(event.context.deadline, HARD_MARGIN).deadline();
    let records = &event.payload.records;
    let report = match tokio::time::timeout_at(stop.into(), sink.process(records, &retry)).await {
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
