//! The access-log pipeline end to end on the stand-ins: raw log objects put into a bucket whose
//! notifications go to an SQS queue, the messages received from the queue handed to the Lambda
//! handler, and the Delta tables on `s3://` read back by DuckDB.

use std::collections::HashMap;
use std::io::Write;

use access_log_ingest::{Ingestor, ObjectReader, TableTemplate};
use access_log_lambda::handler::handle;
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{Event, NotificationConfiguration, QueueConfiguration};
use aws_sdk_sqs::types::QueueAttributeName;
use emf::DEFAULT_NAMESPACE as NAMESPACE;
use fixtures::log_lines::{SynthConfig, corpus};
use lake::StorageConfig;
use lakelog_tests::{StandIn, duckdb};
use lambda_runtime::{Context, LambdaEvent};
use s3_access_log::{AccessLogRecord, parse_lines};

/// A raw-logs bucket notifying a queue, a lake bucket, and the ingestor of one Lambda instance.
struct Pipeline {
    standin: StandIn,
    raw: String,
    lake: String,
    queue_url: String,
    sqs: aws_sdk_sqs::Client,
}

impl Pipeline {
    async fn new(name: &str) -> Pipeline {
        let standin = StandIn::connect().await.unwrap();
        let raw = standin.create_bucket(&format!("{name}-raw")).await.unwrap();
        let lake = standin.create_bucket(&format!("{name}-lake")).await.unwrap();
        let sqs = aws_sdk_sqs::Client::new(&standin.sdk_config());
        let queue_url = sqs
            .create_queue()
            .queue_name(lakelog_tests::unique_name(name))
            .send()
            .await
            .unwrap()
            .queue_url
            .unwrap();
        let arn = sqs
            .get_queue_attributes()
            .queue_url(&queue_url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await
            .unwrap()
            .attributes
            .unwrap()[&QueueAttributeName::QueueArn]
            .clone();
        let notification = NotificationConfiguration::builder()
            .queue_configurations(
                QueueConfiguration::builder()
                    .queue_arn(arn)
                    .events(Event::S3ObjectCreated)
                    .build()
                    .unwrap(),
            )
            .build();
        standin
            .s3()
            .put_bucket_notification_configuration()
            .bucket(&raw)
            .notification_configuration(notification)
            .send()
            .await
            .unwrap();
        Pipeline {
            standin,
            raw,
            lake,
            queue_url,
            sqs,
        }
    }

    /// A new Lambda instance: its own ingestor and table cache.
    fn instance(&self) -> Ingestor {
        let template = TableTemplate::parse("table", &format!("s3://{}/access_logs/{{bucket}}", self.lake)).unwrap();
        let rejects = template.default_rejects();
        let storage = StorageConfig {
            endpoint: Some(self.standin.endpoint().to_owned()),
            extra: self.standin.storage_options(),
        };
        Ingestor::new(template, rejects, storage, ObjectReader::s3(self.standin.s3()), 4)
    }

    async fn put(&self, key: &str, body: Vec<u8>) {
        self.standin
            .s3()
            .put_object()
            .bucket(&self.raw)
            .key(key)
            .body(ByteStream::from(body))
            .send()
            .await
            .unwrap();
    }

    /// Receives messages from the queue until `count` object notifications are in, as the SQS
    /// event source mapping would hand them to the function (with the `s3:TestEvent` S3 sends
    /// when the notification is configured, if it is still queued).
    async fn receive(&self, count: usize) -> Vec<serde_json::Value> {
        let mut messages: Vec<serde_json::Value> = Vec::new();
        let notifications = |messages: &[serde_json::Value]| {
            messages
                .iter()
                .filter(|m| !m["body"].as_str().unwrap().contains("s3:TestEvent"))
                .count()
        };
        for _ in 0..50 {
            if notifications(&messages) >= count {
                break;
            }
            let received = self
                .sqs
                .receive_message()
                .queue_url(&self.queue_url)
                .max_number_of_messages(10)
                .wait_time_seconds(1)
                .send()
                .await
                .unwrap();
            for m in received.messages() {
                messages.push(serde_json::json!({
                    "messageId": m.message_id(),
                    "receiptHandle": m.receipt_handle(),
                    "body": m.body(),
                    "attributes": {},
                    "messageAttributes": {},
                    "eventSource": "aws:sqs",
                    "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:raw-log-notifications",
                    "awsRegion": "us-east-1",
                }));
            }
        }
        assert_eq!(notifications(&messages), count, "notifications received");
        messages
    }

    fn table(&self, bucket: &str) -> String {
        format!("s3://{}/access_logs/{bucket}", self.lake)
    }

    fn rejects(&self) -> String {
        format!("s3://{}/access_logs/_rejects", self.lake)
    }

    /// Rows per log object of a table, read by DuckDB; a table that does not exist has none.
    fn rows_per_object(&self, table: &str) -> HashMap<String, u64> {
        let sql = format!("SELECT log_object, count(*) FROM delta_scan('{table}') GROUP BY 1");
        match duckdb(self.standin.endpoint(), &sql) {
            Ok(rows) => rows
                .into_iter()
                .map(|r| (r[0].as_str().unwrap().to_owned(), r[1].as_u64().unwrap()))
                .collect(),
            Err(e) if e.to_string().contains("No files in log segment") || e.to_string().contains("not exist") => {
                HashMap::new()
            }
            Err(e) => panic!("{e:#}"),
        }
    }
}

fn event(messages: &[serde_json::Value]) -> LambdaEvent<SqsEvent> {
    let sqs: SqsEvent = serde_json::from_value(serde_json::json!({ "Records": messages })).unwrap();
    LambdaEvent::new(sqs, Context::default())
}

fn failures(response: &SqsBatchResponse) -> Vec<String> {
    response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone())
        .collect()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

/// Lines per bucket that parse, and lines that do not.
fn expected(data: &[u8]) -> (HashMap<String, u64>, u64) {
    let mut rows = HashMap::new();
    let mut rejects = 0;
    for (_, _, parsed) in parse_lines(data) {
        match parsed {
            Ok(AccessLogRecord { bucket: Some(b), .. }) => *rows.entry(b.into_owned()).or_insert(0) += 1,
            _ => rejects += 1,
        }
    }
    (rows, rejects)
}

fn logs(seed: u64, bytes: usize, malformed_rate: f64) -> Vec<u8> {
    corpus(
        SynthConfig {
            seed,
            malformed_rate,
            quirk_rate: 0.2,
            buckets: vec!["web-assets".into()],
            ..SynthConfig::default()
        },
        bytes,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_to_delta_exactly_once() {
    let p = Pipeline::new("e2e-once").await;
    let plain = logs(1, 60_000, 0.02);
    let zipped = logs(2, 60_000, 0.0);
    let odd = logs(3, 20_000, 0.0);
    p.put("access-logs/2024-06-01-00-00-01-PLAIN", plain.clone()).await;
    p.put("access-logs/2024-06-01-00-00-02-ZIPPED.gz", gzip(&zipped)).await;
    let odd_key = "access-logs/with space+plus/café-2024-06-01-00-00-03";
    p.put(odd_key, odd.clone()).await;
    let messages = p.receive(3).await;

    let response = handle(event(&messages), &p.instance(), NAMESPACE).await.unwrap();
    assert_eq!(failures(&response), Vec::<String>::new());

    let rows = p.rows_per_object(&p.table("web-assets"));
    let uri = |key: &str| format!("s3://{}/{key}", p.raw);
    let (plain_rows, plain_rejects) = expected(&plain);
    assert!(plain_rejects > 0, "the plain object has corrupt lines");
    assert_eq!(
        rows[&uri("access-logs/2024-06-01-00-00-01-PLAIN")],
        plain_rows["web-assets"]
    );
    assert_eq!(
        rows[&uri("access-logs/2024-06-01-00-00-02-ZIPPED.gz")],
        expected(&zipped).0["web-assets"]
    );
    assert_eq!(
        rows[&uri(odd_key)],
        expected(&odd).0["web-assets"],
        "the key was decoded: {rows:?}"
    );
    let rejects = p.rows_per_object(&p.rejects());
    assert_eq!(
        rejects,
        HashMap::from([(uri("access-logs/2024-06-01-00-00-01-PLAIN"), plain_rejects)])
    );
    let reasons = duckdb(
        p.standin.endpoint(),
        &format!(
            "SELECT min(log_line), count(DISTINCT reason), bool_and(length(reason) > 10) FROM delta_scan('{}')",
            p.rejects()
        ),
    )
    .unwrap();
    assert!(
        reasons[0][0].as_u64().unwrap() >= 1 && reasons[0][2].as_bool().unwrap(),
        "{reasons:?}"
    );

    // Every message delivered again, to the same instance and to a fresh one: no duplicate row.
    for instance in [p.instance(), p.instance()] {
        let again = handle(event(&messages), &instance, NAMESPACE).await.unwrap();
        assert_eq!(failures(&again), Vec::<String>::new());
    }
    assert_eq!(p.rows_per_object(&p.table("web-assets")), rows);
    assert_eq!(p.rows_per_object(&p.rejects()), rejects);

    // Values survive the trip: a decoded key and a request time in UTC.
    let sample = duckdb(
        p.standin.endpoint(),
        &format!(
            "SELECT count(*) FROM delta_scan('{}') WHERE key LIKE '% %' AND request_time >= TIMESTAMPTZ '2024-06-01 00:00:00+00'",
            p.table("web-assets")
        ),
    )
    .unwrap();
    assert!(sample[0][0].as_u64().unwrap() > 0, "{sample:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_invocations_lose_nothing_and_duplicate_nothing() {
    let p = Pipeline::new("e2e-concurrent").await;
    let mut expected_rows = HashMap::new();
    for i in 0..8u64 {
        let data = logs(100 + i, 30_000, 0.0);
        let key = format!("access-logs/2024-06-01-00-01-{i:02}-CONCURRENT");
        expected_rows.insert(format!("s3://{}/{key}", p.raw), expected(&data).0["web-assets"]);
        p.put(&key, data).await;
    }
    let messages = p.receive(8).await;

    // One instance per message (eight objects, and S3's test event), all at once.
    let instances: Vec<Ingestor> = messages.iter().map(|_| p.instance()).collect();
    let runs = messages
        .iter()
        .zip(&instances)
        .map(|(m, i)| handle(event(std::slice::from_ref(m)), i, NAMESPACE));
    for response in futures::future::join_all(runs).await {
        assert_eq!(failures(&response.unwrap()), Vec::<String>::new());
    }
    assert_eq!(p.rows_per_object(&p.table("web-assets")), expected_rows);

    // Two instances handed the same new object at the same moment: it is written once.
    let data = logs(999, 30_000, 0.0);
    p.put("access-logs/2024-06-01-00-02-00-TWICE", data.clone()).await;
    let twice = p.receive(1).await;
    let (a, b) = (p.instance(), p.instance());
    let (ra, rb) = tokio::join!(
        handle(event(&twice), &a, NAMESPACE),
        handle(event(&twice), &b, NAMESPACE)
    );
    assert_eq!(failures(&ra.unwrap()), Vec::<String>::new());
    assert_eq!(failures(&rb.unwrap()), Vec::<String>::new());
    let rows = p.rows_per_object(&p.table("web-assets"));
    assert_eq!(
        rows[&format!("s3://{}/access-logs/2024-06-01-00-02-00-TWICE", p.raw)],
        expected(&data).0["web-assets"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_object_fails_only_its_message() {
    let p = Pipeline::new("e2e-missing").await;
    p.put("access-logs/2024-06-01-00-03-00-KEPT", logs(5, 10_000, 0.0))
        .await;
    p.put("access-logs/2024-06-01-00-03-01-GONE", logs(6, 10_000, 0.0))
        .await;
    let messages = p.receive(2).await;
    p.standin
        .s3()
        .delete_object()
        .bucket(&p.raw)
        .key("access-logs/2024-06-01-00-03-01-GONE")
        .send()
        .await
        .unwrap();
    let gone_id = messages
        .iter()
        .find(|m| m["body"].as_str().unwrap().contains("GONE"))
        .unwrap()["messageId"]
        .as_str()
        .unwrap()
        .to_owned();
    let response = handle(event(&messages), &p.instance(), NAMESPACE).await.unwrap();
    assert_eq!(failures(&response), vec![gone_id]);
    let rows = p.rows_per_object(&p.table("web-assets"));
    assert_eq!(rows.len(), 1);
    assert!(rows.contains_key(&format!("s3://{}/access-logs/2024-06-01-00-03-00-KEPT", p.raw)));
}

/// The account that owns everything in the stand-in (moto's default).
const STANDIN_ACCOUNT: &str = "123456789012";

/// Ingestion reads only the raw-logs bucket's account: with an expected owner that is not the
/// bucket's, S3 refuses the object, its message fails in words naming the object and the account,
/// and nothing is written; with the bucket's own account, the object goes in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_of_a_bucket_of_another_account_are_refused() {
    let p = Pipeline::new("e2e-owner").await;
    p.put("access-logs/2024-06-01-00-04-00-OWNED", logs(7, 10_000, 0.0))
        .await;
    let messages = p.receive(1).await;
    let ingestor = |owner: &str| {
        let template = TableTemplate::parse("table", &format!("s3://{}/access_logs/{{bucket}}", p.lake)).unwrap();
        let rejects = template.default_rejects();
        let storage = StorageConfig {
            endpoint: Some(p.standin.endpoint().to_owned()),
            extra: p.standin.storage_options(),
        };
        let reader = ObjectReader::s3(p.standin.s3()).with_expected_owners(vec![owner.to_owned()]);
        Ingestor::new(template, rejects, storage, reader, 4)
    };
    let object = format!("s3://{}/access-logs/2024-06-01-00-04-00-OWNED", p.raw);
    let object_ref = access_log_ingest::ObjectRef::S3 {
        bucket: p.raw.clone(),
        key: "access-logs/2024-06-01-00-04-00-OWNED".into(),
    };
    let retry = lake::Retry::within(std::time::Duration::from_secs(5));
    let mut outcome = ingestor("111111111111").ingest(&[object_ref], &retry, &()).await;
    let refused = outcome.remove(0).1.unwrap_err().to_string();
    assert!(
        refused.contains(&object) && refused.contains("must belong to account 111111111111"),
        "{refused}"
    );
    let response = handle(event(&messages), &ingestor("111111111111"), NAMESPACE)
        .await
        .unwrap();
    assert_eq!(failures(&response).len(), 1);
    assert!(p.rows_per_object(&p.table("web-assets")).is_empty());

    // The stand-in's own account owns the bucket: read.
    let response = handle(event(&messages), &ingestor(STANDIN_ACCOUNT), NAMESPACE)
        .await
        .unwrap();
    assert!(failures(&response).is_empty());
    assert_eq!(p.rows_per_object(&p.table("web-assets")).len(), 1);
}

/// Logs of several accounts and regions into one lake: with S3's partitioned key format
/// (`ACCOUNT/REGION/BUCKET/YYYY/MM/DD/`) and `{account}_{region}_{bucket}` in the table location,
/// the logs of two buckets of the same name (here in two regions) go to two tables, each row
/// once; each object is read only from its own account's bucket, and one whose key names an
/// account that does not own the bucket is refused. A simple key cannot be placed, and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_of_several_accounts_and_regions_stay_apart() {
    let p = Pipeline::new("e2e-accounts").await;
    let west = format!("logs/{STANDIN_ACCOUNT}/eu-west-1/web-assets/2024/06/01/2024-06-01-00-05-00-WEST");
    let east = format!("logs/{STANDIN_ACCOUNT}/us-east-1/web-assets/2024/06/01/2024-06-01-00-05-01-EAST");
    let foreign = "logs/111111111111/eu-west-1/web-assets/2024/06/01/2024-06-01-00-05-02-FOREIGN";
    let simple = "logs/2024-06-01-00-05-03-SIMPLE";
    let (west_data, east_data) = (logs(21, 20_000, 0.0), logs(22, 30_000, 0.0));
    p.put(&west, west_data.clone()).await;
    p.put(&east, east_data.clone()).await;
    p.put(foreign, logs(23, 10_000, 0.0)).await;
    p.put(simple, logs(24, 10_000, 0.0)).await;
    let messages = p.receive(4).await;

    let template = TableTemplate::parse(
        "table",
        &format!("s3://{}/access_logs/{{account}}_{{region}}_{{bucket}}", p.lake),
    )
    .unwrap();
    let storage = StorageConfig {
        endpoint: Some(p.standin.endpoint().to_owned()),
        extra: p.standin.storage_options(),
    };
    let owners = vec![STANDIN_ACCOUNT.to_owned(), "111111111111".to_owned()];
    let reader = ObjectReader::s3(p.standin.s3()).with_expected_owners(owners);
    let ingestor = Ingestor::new(template.clone(), template.default_rejects(), storage, reader, 4);
    let response = handle(event(&messages), &ingestor, NAMESPACE).await.unwrap();
    let failed: Vec<String> = failures(&response);
    let key_of = |id: &String| {
        messages
            .iter()
            .find(|m| m["messageId"].as_str() == Some(id.as_str()))
            .map(|m| m["body"].as_str().unwrap().to_owned())
            .unwrap()
    };
    let mut failed_keys: Vec<String> = failed.iter().map(key_of).collect();
    failed_keys.sort();
    assert_eq!(failed_keys.len(), 2, "{failed_keys:?}");
    assert!(failed_keys.iter().any(|b| b.contains("FOREIGN")) && failed_keys.iter().any(|b| b.contains("SIMPLE")));

    let table = |region: &str| format!("s3://{}/access_logs/{STANDIN_ACCOUNT}_{region}_web-assets", p.lake);
    let rows = |region: &str| p.rows_per_object(&table(region));
    assert_eq!(
        rows("eu-west-1"),
        HashMap::from([(format!("s3://{}/{west}", p.raw), expected(&west_data).0["web-assets"])])
    );
    assert_eq!(
        rows("us-east-1"),
        HashMap::from([(format!("s3://{}/{east}", p.raw), expected(&east_data).0["web-assets"])])
    );

    // The refusals, in words.
    let retry = lake::Retry::within(std::time::Duration::from_secs(5));
    let object = |key: &str| access_log_ingest::ObjectRef::S3 {
        bucket: p.raw.clone(),
        key: key.to_owned(),
    };
    let outcomes = ingestor.ingest(&[object(foreign), object(simple)], &retry, &()).await;
    let foreign_error = outcomes[0].1.as_ref().unwrap_err().to_string();
    assert!(
        foreign_error.contains("refused: its bucket must belong to one of the accounts"),
        "{foreign_error}"
    );
    let simple_error = outcomes[1].1.as_ref().unwrap_err().to_string();
    assert!(simple_error.contains("partitioned format"), "{simple_error}");
    // With one owner the simple key is read, and then cannot be placed in a table.
    let one_owner = Ingestor::new(
        template.clone(),
        template.default_rejects(),
        StorageConfig {
            endpoint: Some(p.standin.endpoint().to_owned()),
            extra: p.standin.storage_options(),
        },
        ObjectReader::s3(p.standin.s3()).with_expected_owners(vec![STANDIN_ACCOUNT.to_owned()]),
        4,
    );
    let outcomes = one_owner.ingest(&[object(simple)], &retry, &()).await;
    let unplaced = outcomes[0].1.as_ref().unwrap_err().to_string();
    assert!(
        unplaced.contains("needs the observed bucket's account and region"),
        "{unplaced}"
    );
}

/// With `remote_ip` truncation on, the table holds networks only: every address of the logs,
/// IPv4 and IPv6, reads back as its /24 or /48, and the rows are all there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_addresses_reach_the_table_as_networks_only() {
    let p = Pipeline::new("e2e-truncate").await;
    let data = logs(31, 30_000, 0.0);
    p.put("access-logs/2024-06-01-00-06-00-TRUNCATED", data.clone()).await;
    let messages = p.receive(1).await;
    let ingestor = p.instance().with_truncated_ips(true);
    let response = handle(event(&messages), &ingestor, NAMESPACE).await.unwrap();
    assert!(failures(&response).is_empty());
    let table = p.table("web-assets");
    let rows = duckdb(
        p.standin.endpoint(),
        &format!(
            "SELECT count(*), count(remote_ip), \
                    count(*) FILTER (WHERE remote_ip IS NOT NULL AND remote_ip NOT LIKE '%.0' AND remote_ip NOT LIKE '%::') \
             FROM delta_scan('{table}')"
        ),
    )
    .unwrap();
    let (all, with_ip, whole) = (
        rows[0][0].as_u64().unwrap(),
        rows[0][1].as_u64().unwrap(),
        rows[0][2].as_u64().unwrap(),
    );
    assert_eq!(all, expected(&data).0["web-assets"]);
    assert!(with_ip > 0, "the logs had addresses");
    assert_eq!(whole, 0, "addresses kept whole");
}
