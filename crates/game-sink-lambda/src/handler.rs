//! The Lambda handler: a Kinesis batch in, the batch item failures out.

use aws_lambda_events::event::kinesis::KinesisEvent;
use aws_lambda_events::event::streams::KinesisEventResponse;
use game_sink::Sink;
use lake::Retry;
use lambda_runtime::{Error, LambdaEvent};

use crate::metrics::Reporter;

/// Time kept back from the invocation's deadline to answer with the record to retry from.
const ANSWER_MARGIN: std::time::Duration = std::time::Duration::from_secs(5);

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
    let report = sink.process(&event.payload.records, &retry).await;
    for document in metrics.batch(&event.payload.records, &report, lake::now_micros() / 1000) {
        document.emit();
    }
    let mut response = KinesisEventResponse::default();
    if let Some(sequence_number) = report.retry_from {
        response.add_failure(sequence_number);
    }
    Ok(response)
}
