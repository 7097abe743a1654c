//! Undoing what a deployment of the access-log pipeline set up outside its stack, so that deleting
//! the stack leaves nothing behind: the observed buckets' server access logging into the raw-logs
//! bucket (which would go on filling the bucket the stack retains), and an existing raw-logs
//! bucket's notification to the stack's queue (which would point at a deleted queue). `lakelog
//! teardown` drives it.

use aws_sdk_s3::types::{BucketLoggingStatus, NotificationConfiguration};

/// Why a step of the teardown failed.
#[derive(Debug, thiserror::Error)]
pub enum TeardownError {
    /// An S3 request about `bucket` failed.
    #[error("{operation} of {bucket}: {reason}")]
    S3 {
        /// The request.
        operation: &'static str,
        /// The bucket it was about.
        bucket: String,
        /// What went wrong.
        reason: String,
    },
}

fn s3_error<E: std::error::Error + Send + Sync + 'static>(
    operation: &'static str,
    bucket: &str,
) -> impl Fn(aws_sdk_s3::error::SdkError<E>) -> TeardownError {
    let bucket = bucket.to_owned();
    move |e| TeardownError::S3 {
        operation,
        bucket: bucket.clone(),
        reason: aws_sdk_s3::error::DisplayErrorContext(e).to_string(),
    }
}

/// The buckets `s3` can see whose server access logging delivers into `raw_logs`, and those whose
/// logging it could not read (another region's, or denied), with why.
pub async fn logging_into(
    s3: &aws_sdk_s3::Client,
    raw_logs: &str,
) -> Result<(Vec<String>, Vec<(String, String)>), TeardownError> {
    let listed = s3
        .list_buckets()
        .send()
        .await
        .map_err(s3_error("ListBuckets", "(every bucket)"))?;
    let (mut logging, mut unread) = (Vec::new(), Vec::new());
    for bucket in listed.buckets().iter().filter_map(|b| b.name()) {
        match s3.get_bucket_logging().bucket(bucket).send().await {
            Ok(status) => {
                if status.logging_enabled().map(|l| l.target_bucket()) == Some(raw_logs) {
                    logging.push(bucket.to_owned());
                }
            }
            Err(e) => unread.push((bucket.to_owned(), aws_sdk_s3::error::DisplayErrorContext(e).to_string())),
        }
    }
    Ok((logging, unread))
}

/// Turns `bucket`'s server access logging off.
pub async fn stop_logging(s3: &aws_sdk_s3::Client, bucket: &str) -> Result<(), TeardownError> {
    s3.put_bucket_logging()
        .bucket(bucket)
        .bucket_logging_status(BucketLoggingStatus::builder().build())
        .send()
        .await
        .map_err(s3_error("PutBucketLogging", bucket))?;
    Ok(())
}

/// Removes from `bucket`'s notification configuration the queue configurations that send to
/// `queue_arn`, keeping every other; how many there were. With `dry_run`, only counts them.
pub async fn remove_notifications_to(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    queue_arn: &str,
    dry_run: bool,
) -> Result<usize, TeardownError> {
    let current = s3
        .get_bucket_notification_configuration()
        .bucket(bucket)
        .send()
        .await
        .map_err(s3_error("GetBucketNotificationConfiguration", bucket))?;
    let (ours, kept): (Vec<_>, Vec<_>) = current
        .queue_configurations()
        .iter()
        .cloned()
        .partition(|q| q.queue_arn() == queue_arn);
    if ours.is_empty() || dry_run {
        return Ok(ours.len());
    }
    let configuration = NotificationConfiguration::builder()
        .set_queue_configurations(Some(kept))
        .set_topic_configurations(current.topic_configurations.clone())
        .set_lambda_function_configurations(current.lambda_function_configurations.clone())
        .set_event_bridge_configuration(current.event_bridge_configuration.clone())
        .build();
    s3.put_bucket_notification_configuration()
        .bucket(bucket)
        .notification_configuration(configuration)
        .send()
        .await
        .map_err(s3_error("PutBucketNotificationConfiguration", bucket))?;
    Ok(ours.len())
}

/// The ARN of the SQS queue at `url` (`https://sqs.REGION.amazonaws.com/ACCOUNT/NAME`), in
/// `region`; `None` when the URL does not end in an account and a name.
pub fn queue_arn(url: &str, region: &str) -> Option<String> {
    let mut parts = url.trim_end_matches('/').rsplit('/');
    let name = parts.next().filter(|n| !n.is_empty())?;
    let account = parts
        .next()
        .filter(|a| a.len() == 12 && a.bytes().all(|b| b.is_ascii_digit()))?;
    let partition = if region.starts_with("cn-") {
        "aws-cn"
    } else if region.starts_with("us-gov-") {
        "aws-us-gov"
    } else {
        "aws"
    };
    Some(format!("arn:{partition}:sqs:{region}:{account}:{name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_url_gives_its_arn() {
        assert_eq!(
            queue_arn(
                "https://sqs.eu-west-1.amazonaws.com/123456789012/lakelog-raw-logs",
                "eu-west-1"
            )
            .as_deref(),
            Some("arn:aws:sqs:eu-west-1:123456789012:lakelog-raw-logs")
        );
        assert_eq!(
            queue_arn("http://127.0.0.1:5000/123456789012/q/", "cn-north-1").as_deref(),
            Some("arn:aws-cn:sqs:cn-north-1:123456789012:q")
        );
        for bad in ["", "https://sqs.us-east-1.amazonaws.com/q", "https://x/12345/q"] {
            assert_eq!(queue_arn(bad, "us-east-1"), None, "{bad}");
        }
    }
}
