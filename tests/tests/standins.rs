//! What lakelog relies on from the stand-in S3.
//!
//! Delta commits on S3 take no lock: every writer puts the next `_delta_log/NNN.json` with
//! `If-None-Match: *` (put-if-absent), and the one that loses the race gets `412 Precondition
//! Failed` and retries on a newer version. Tests of concurrent appends are only meaningful if the
//! stand-in honours that condition exactly like S3.

use anyhow::{Result, bail, ensure};
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::operation::put_object::PutObjectError;
use aws_sdk_s3::primitives::ByteStream;
use lakelog_tests::StandIn;

const COMMIT_KEY: &str = "table/_delta_log/00000000000000000000.json";

async fn put_if_absent(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    body: &'static [u8],
) -> Result<(), SdkError<PutObjectError>> {
    s3.put_object()
        .bucket(bucket)
        .key(key)
        .body(ByteStream::from_static(body))
        .if_none_match("*")
        .send()
        .await
        .map(drop)
}

async fn content(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Result<Vec<u8>> {
    let object = s3.get_object().bucket(bucket).key(key).send().await?;
    Ok(object.body.collect().await?.into_bytes().to_vec())
}

/// `Ok` if `err` is S3's answer to a put-if-absent on a key that exists.
fn ensure_precondition_failed(err: &SdkError<PutObjectError>) -> Result<()> {
    let status = err.raw_response().map(|response| response.status().as_u16());
    ensure!(status == Some(412), "expected HTTP 412, got {status:?}: {err:?}");
    ensure!(
        err.code() == Some("PreconditionFailed"),
        "expected error code PreconditionFailed, got {:?}",
        err.code()
    );
    Ok(())
}

#[tokio::test]
async fn put_if_absent_creates_a_new_key() -> Result<()> {
    let standin = StandIn::connect().await?;
    let s3 = standin.s3();
    let bucket = standin.create_bucket("put-if-absent-new").await?;

    put_if_absent(&s3, &bucket, COMMIT_KEY, b"first").await?;

    assert_eq!(content(&s3, &bucket, COMMIT_KEY).await?, b"first");
    Ok(())
}

#[tokio::test]
async fn put_if_absent_on_an_existing_key_fails_with_412_and_keeps_the_first_content() -> Result<()> {
    let standin = StandIn::connect().await?;
    let s3 = standin.s3();
    let bucket = standin.create_bucket("put-if-absent-existing").await?;
    put_if_absent(&s3, &bucket, COMMIT_KEY, b"first").await?;

    match put_if_absent(&s3, &bucket, COMMIT_KEY, b"second").await {
        Ok(()) => bail!("a second put-if-absent on {COMMIT_KEY} succeeded"),
        Err(err) => ensure_precondition_failed(&err)?,
    }

    assert_eq!(content(&s3, &bucket, COMMIT_KEY).await?, b"first");
    Ok(())
}

#[tokio::test]
async fn an_unconditional_put_still_overwrites() -> Result<()> {
    // The 412 above comes from the condition, not from a server that never overwrites.
    let standin = StandIn::connect().await?;
    let s3 = standin.s3();
    let bucket = standin.create_bucket("put-overwrites").await?;
    put_if_absent(&s3, &bucket, COMMIT_KEY, b"first").await?;

    s3.put_object()
        .bucket(&bucket)
        .key(COMMIT_KEY)
        .body(ByteStream::from_static(b"second"))
        .send()
        .await?;

    assert_eq!(content(&s3, &bucket, COMMIT_KEY).await?, b"second");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn of_concurrent_puts_if_absent_on_one_key_exactly_one_wins() -> Result<()> {
    const WRITERS: usize = 8;
    const ROUNDS: usize = 20;
    const BODIES: [&[u8]; WRITERS] = [b"w0", b"w1", b"w2", b"w3", b"w4", b"w5", b"w6", b"w7"];
    let standin = StandIn::connect().await?;
    let s3 = standin.s3();
    let bucket = standin.create_bucket("put-if-absent-race").await?;

    for round in 0..ROUNDS {
        let key = format!("table/_delta_log/{round:020}.json");
        let writers: Vec<_> = BODIES
            .iter()
            .map(|&body| {
                let (s3, bucket, key) = (s3.clone(), bucket.clone(), key.clone());
                tokio::spawn(async move { (body, put_if_absent(&s3, &bucket, &key, body).await) })
            })
            .collect();
        let mut winners = Vec::new();
        for writer in writers {
            let (body, result) = writer.await?;
            match result {
                Ok(()) => winners.push(body),
                Err(err) => ensure_precondition_failed(&err)?,
            }
        }
        ensure!(
            winners.len() == 1,
            "round {round}: {} of {WRITERS} concurrent puts-if-absent succeeded",
            winners.len()
        );
        assert_eq!(content(&s3, &bucket, &key).await?, winners[0]);
    }
    Ok(())
}

/// `scripts/cost --cloudwatch STACK` reads a deployment's rates from the metrics its functions
/// write, in the namespace the stack's parameters give and with the `Function` dimension the
/// functions emit: events, requests and raw-log bytes over the last day, put into the stand-in's
/// CloudWatch beside another stack's metrics in its own namespace (`MetricsNamespace/STACK`).
#[test]
fn cost_reads_a_deployments_rates_from_its_metrics() {
    let standin = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(lakelog_tests::StandIn::connect())
        .unwrap();
    let namespace = lakelog_tests::unique_name("cost");
    let stack = lakelog_tests::unique_name("cost-stack");
    let (api, ingest) = (game_api_lambda::metrics::FUNCTION, access_log_lambda::metrics::FUNCTION);
    let put = format!(
        r#"
import boto3, datetime, json
template = {{"Parameters": {{"MetricsNamespace": {{"Type": "String", "Default": "lakelog"}},
                             "KinesisStreamMode": {{"Type": "String", "Default": "ON_DEMAND"}},
                             "Pipelines": {{"Type": "String", "Default": "all"}}}},
            "Resources": {{"Queue": {{"Type": "AWS::SQS::Queue"}}}}}}
boto3.client("cloudformation").create_stack(StackName="{stack}", TemplateBody=json.dumps(template),
    Parameters=[{{"ParameterKey": "MetricsNamespace", "ParameterValue": "{namespace}"}},
                {{"ParameterKey": "KinesisStreamMode", "ParameterValue": "PROVISIONED"}}])
cw = boto3.client("cloudwatch")
now = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1)
for namespace, scale in [("{namespace}/{stack}", 1.0), ("{namespace}/{stack}-staging", 7.0)]:
    for name, function, value in [("EventsAccepted", "{api}", 86400 * 250.0), ("Requests", "{api}", 86400 * 5.0),
                                  ("BytesRead", "{ingest}", 2e9)]:
        cw.put_metric_data(Namespace=namespace, MetricData=[{{"MetricName": name, "Timestamp": now,
            "Value": value * scale, "Dimensions": [{{"Name": "Function", "Value": function}}]}}])
"#
    );
    let env = [
        ("AWS_ENDPOINT_URL", standin.endpoint()),
        ("AWS_ACCESS_KEY_ID", lakelog_tests::ACCESS_KEY_ID),
        ("AWS_SECRET_ACCESS_KEY", lakelog_tests::SECRET_ACCESS_KEY),
        ("AWS_DEFAULT_REGION", lakelog_tests::REGION),
    ];
    let status = std::process::Command::new(lakelog_tests::python())
        .args(["-c", &put])
        .envs(env)
        .status()
        .unwrap();
    assert!(status.success());
    let cost = |stack: &str| {
        std::process::Command::new(lakelog_tests::python())
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/cost"))
            .args(["--cloudwatch", stack, "--days", "1"])
            .envs(env)
            .output()
            .unwrap()
    };
    let out = cost(&stack);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        text.contains(&format!(
            "{stack} (metrics in {namespace}/{stack}, pipelines: all), last 1 days: 250.0 events/s, 50.0 events a request, \
             2.00 GB of raw logs a day"
        )),
        "{text}"
    );
    // The stack's stream is provisioned: its shards are named, and priced.
    assert!(text.contains("provisioned stream: 1 shards"), "{text}");
    assert!(text.contains("total a month"), "{text}");
    // A stack that does not exist is an error naming it.
    let out = cost("no-such-stack");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && said.contains("stack no-such-stack"), "{said}");
}
