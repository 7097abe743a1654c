//! `lakelog teardown --stack NAME` against the stand-in: what a deployment made outside its stack
//! (games' keys, plans and pseudonym keys; observed buckets' logging into the raw-logs bucket; that
//! bucket's notification to the stack's queue) is said without --yes and removed with it, and
//! another stack's games, another bucket's logging and another queue's notification stay.

use aws_sdk_s3::types::{BucketLoggingStatus, Event, LoggingEnabled, NotificationConfiguration, QueueConfiguration};
use lakelog_tests::{StandIn, unique_name};
use serde_json::Value;

/// Runs `lakelog ARGS` against the stand-in; its JSON lines, after checking it succeeded.
fn lakelog(standin: &StandIn, args: &[&str]) -> Vec<Value> {
    crate::common::lakelog_json(standin.endpoint(), args)
}

/// A bucket that S3's log delivery may write to, as the stack's raw-logs bucket is.
async fn log_target(s3: &aws_sdk_s3::Client, name: &str) {
    s3.create_bucket().bucket(name).send().await.unwrap();
    let policy = serde_json::json!({
        "Version": "2012-10-17",
        "Statement": [{"Sid": "S3ServerAccessLogDelivery", "Effect": "Allow",
                       "Principal": {"Service": "logging.s3.amazonaws.com"}, "Action": "s3:PutObject",
                       "Resource": format!("arn:aws:s3:::{name}/*")}]
    });
    s3.put_bucket_policy()
        .bucket(name)
        .policy(policy.to_string())
        .send()
        .await
        .unwrap();
}

/// An observed bucket logging into `target`.
async fn logging_into(s3: &aws_sdk_s3::Client, name: &str, target: &str) {
    s3.create_bucket().bucket(name).send().await.unwrap();
    s3.put_bucket_logging()
        .bucket(name)
        .bucket_logging_status(
            BucketLoggingStatus::builder()
                .logging_enabled(
                    LoggingEnabled::builder()
                        .target_bucket(target)
                        .target_prefix("")
                        .build()
                        .unwrap(),
                )
                .build(),
        )
        .send()
        .await
        .unwrap();
}

async fn logs_into(s3: &aws_sdk_s3::Client, name: &str) -> Option<String> {
    let status = s3.get_bucket_logging().bucket(name).send().await.unwrap();
    status.logging_enabled().map(|l| l.target_bucket().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_removes_what_the_stack_left_outside_and_nothing_else() {
    let standin = StandIn::connect().await.unwrap();
    let sdk = standin.sdk_config();
    let apigateway = aws_sdk_apigateway::Client::new(&sdk);
    let ssm = aws_sdk_ssm::Client::new(&sdk);
    let s3 = aws_sdk_s3::Client::new(&sdk);
    let api_id = apigateway
        .create_rest_api()
        .name(unique_name("teardown"))
        .send()
        .await
        .unwrap()
        .id
        .unwrap();
    let other_api = apigateway
        .create_rest_api()
        .name(unique_name("kept"))
        .send()
        .await
        .unwrap()
        .id
        .unwrap();
    let (kept_game, revoked) = (unique_name("kept"), unique_name("gone"));
    lakelog(&standin, &["games", "add", &unique_name("miners"), "--api-id", &api_id]);
    lakelog(
        &standin,
        &[
            "games",
            "add",
            &unique_name("towns"),
            "--api-id",
            &api_id,
            "--pseudonymise",
            "device_id",
        ],
    );
    lakelog(&standin, &["games", "add", &revoked, "--api-id", &api_id]);
    lakelog(&standin, &["games", "revoke", &revoked, "--api-id", &api_id]);
    lakelog(&standin, &["games", "add", &kept_game, "--api-id", &other_api]);

    let (raw, elsewhere) = (unique_name("raw-logs"), unique_name("elsewhere"));
    log_target(&s3, &raw).await;
    log_target(&s3, &elsewhere).await;
    let (observed, other_observed) = (unique_name("observed"), unique_name("other-observed"));
    logging_into(&s3, &observed, &raw).await;
    logging_into(&s3, &other_observed, &elsewhere).await;
    let queue = unique_name("raw-logs-queue");
    let queue_arn = format!("arn:aws:sqs:{}:123456789012:{queue}", lakelog_tests::REGION);
    let other_arn = format!(
        "arn:aws:sqs:{}:123456789012:{}",
        lakelog_tests::REGION,
        unique_name("other")
    );
    let to = |arn: &str| {
        QueueConfiguration::builder()
            .queue_arn(arn)
            .events(Event::S3ObjectCreated)
            .build()
            .unwrap()
    };
    s3.put_bucket_notification_configuration()
        .bucket(&raw)
        .notification_configuration(
            NotificationConfiguration::builder()
                .queue_configurations(to(&queue_arn))
                .queue_configurations(to(&other_arn))
                .build(),
        )
        .send()
        .await
        .unwrap();

    let stack = unique_name("lakelog-teardown");
    let template = serde_json::json!({
        "Resources": {"Queue": {"Type": "AWS::SQS::Queue"}},
        "Outputs": {
            "GameEventsApiId": {"Value": api_id},
            "GameEventsApiStage": {"Value": "prod"},
            "RawLogsBucketName": {"Value": raw},
            "RawLogsQueueUrl": {"Value": format!("https://sqs.{}.amazonaws.com/123456789012/{queue}", lakelog_tests::REGION)}
        }
    });
    aws_sdk_cloudformation::Client::new(&sdk)
        .create_stack()
        .stack_name(&stack)
        .template_body(template.to_string())
        .send()
        .await
        .unwrap();

    // Without --yes it says what, and removes nothing.
    let said = lakelog(&standin, &["teardown", "--stack", &stack]);
    assert_eq!(said[0]["games"]["keys"].as_array().unwrap().len(), 3, "{}", said[0]);
    assert_eq!(
        said[0]["games"]["usagePlans"].as_array().unwrap().len(),
        2,
        "{}",
        said[0]
    );
    assert_eq!(
        said[0]["games"]["parameters"].as_array().unwrap().len(),
        1,
        "{}",
        said[0]
    );
    assert_eq!(
        (&said[1]["accessLogging"], &said[1]["notifications"]),
        (&serde_json::json!([observed]), &Value::from(1))
    );
    assert_eq!(lakelog(&standin, &["games", "list", "--api-id", &api_id]).len(), 3);
    assert_eq!(logs_into(&s3, &observed).await.as_deref(), Some(raw.as_str()));

    lakelog(&standin, &["teardown", "--stack", &stack, "--yes"]);
    assert!(lakelog(&standin, &["games", "list", "--api-id", &api_id]).is_empty());
    let left = ssm
        .get_parameters_by_path()
        .path(format!("/lakelog/{api_id}/prod/"))
        .recursive(true)
        .send()
        .await
        .unwrap();
    assert!(left.parameters().is_empty(), "{:?}", left.parameters());
    let kept = lakelog(&standin, &["games", "list", "--api-id", &other_api]);
    assert_eq!(
        (kept.len(), &kept[0]["enabled"]),
        (1, &Value::Bool(true)),
        "another stack's game stays"
    );
    assert_eq!(logs_into(&s3, &observed).await, None);
    assert_eq!(
        logs_into(&s3, &other_observed).await.as_deref(),
        Some(elsewhere.as_str())
    );
    let notifications = s3
        .get_bucket_notification_configuration()
        .bucket(&raw)
        .send()
        .await
        .unwrap();
    let queues: Vec<&str> = notifications
        .queue_configurations()
        .iter()
        .map(|q| q.queue_arn())
        .collect();
    assert_eq!(queues, [other_arn.as_str()]);
}
