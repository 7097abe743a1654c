//! The Lambda handler: a Kinesis batch in, the batch item failures out.

use aws_lambda_events::event::kinesis::KinesisEvent;
use aws_lambda_events::event::streams::KinesisEventResponse;
use lambda_runtime::{Error, LambdaEvent};

use crate::sink::Sink;

/// Writes the batch and reports the first record that was not committed, if any, so that Lambda
/// (with `ReportBatchItemFailures`) retries from it and not the records before it.
pub async fn handle(event: LambdaEvent<KinesisEvent>, sink: &Sink) -> Result<KinesisEventResponse, Error> {
    let report = sink.process(&event.payload.records).await;
    let mut response = KinesisEventResponse::default();
    if let Some(sequence_number) = report.retry_from {
        response.add_failure(sequence_number);
    }
    Ok(response)
}
