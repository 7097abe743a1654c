//! The game events API against a Kinesis stand-in: what reaches the stream, and what is answered,
//! with a healthy stream, with throttled entries, with calls that all fail and with a missing
//! stream. The invariant under every fault: nothing acknowledged is missing from the stream, and
//! nothing missing from the stream is acknowledged.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use aws_lambda_events::apigw::{ApiGatewayProxyRequest, ApiGatewayProxyResponse};
use aws_lambda_events::encodings::Body;
use chrono::{DateTime, Utc};
use fixtures::game::{Synth, SynthConfig};
use game_api::testing::{FailingSink, FlakySink, sample_games};
use game_api::{
    ApiConfig, DeliveryConfig, KinesisSink, PartitionKey, RecordFormat, StreamRef, kinesis_client, respond,
};
use game_events::{GameEvent, decode_record};
use lakelog_tests::{StandIn, StreamRecord, read_stream, unique_name, unpacked};
use serde_json::{Value, json};

async fn create_stream(client: &aws_sdk_kinesis::Client, shards: i32) -> Result<String> {
    let name = unique_name("game-events");
    client
        .create_stream()
        .stream_name(&name)
        .shard_count(shards)
        .send()
        .await
        .with_context(|| format!("creating stream {name} on the stand-in"))?;
    Ok(name)
}

fn sample(name: &str) -> Result<ApiGatewayProxyRequest> {
    let path = format!("{}/../events/{name}", env!("CARGO_MANIFEST_DIR"));
    Ok(serde_json::from_str(
        &std::fs::read_to_string(&path).with_context(|| path.clone())?,
    )?)
}

/// A request of `events` that API Gateway received at `time`.
fn request(events: &[GameEvent], time: DateTime<Utc>) -> Result<ApiGatewayProxyRequest> {
    let mut request = sample("apigw-single-event.json")?;
    request.body = Some(json!({"events": events}).to_string());
    request.request_context.request_time_epoch = time.timestamp_millis();
    request.request_context.request_id = Some(unique_name("request"));
    Ok(request)
}

fn synth_events(seed: u64, n: usize) -> Vec<GameEvent> {
    Synth::new(SynthConfig {
        seed,
        devices: 50,
        ..SynthConfig::default()
    })
    .events(n, Utc::now())
}

fn answer(response: &ApiGatewayProxyResponse) -> Result<Value> {
    match &response.body {
        Some(Body::Text(text)) => Ok(serde_json::from_str(text)?),
        other => anyhow::bail!("not a JSON text body: {other:?}"),
    }
}

/// eventId -> (status, shard, sequence number) of every result of a 200, 429 or 503.
/// One event's answer.
#[derive(Debug, Clone)]
struct Answered {
    status: String,
    shard: Value,
    sequence: Value,
    error_code: Value,
}

fn results(response: &ApiGatewayProxyResponse) -> Result<HashMap<String, Answered>> {
    let answer = answer(response)?;
    let mut out = HashMap::new();
    for result in answer["results"].as_array().context("no results")? {
        let id = result["eventId"].as_str().context("no eventId")?.to_owned();
        let status = result["status"].as_str().context("no status")?.to_owned();
        out.insert(
            id,
            Answered {
                status,
                shard: result["shardId"].clone(),
                sequence: result["sequenceNumber"].clone(),
                error_code: result["errorCode"].clone(),
            },
        );
    }
    Ok(out)
}

/// One event a record: these tests inject faults into records and read each event's own record,
/// key and sequence number back (game_pipeline.rs writes the stream packed).
fn config(budget: Duration) -> ApiConfig {
    ApiConfig {
        delivery: DeliveryConfig {
            budget,
            first_backoff: Duration::from_millis(5),
            max_backoff: Duration::from_millis(50),
            throttled_budget: budget,
        },
        record_format: RecordFormat::Seed,
        ..ApiConfig::default()
    }
}

/// eventId of each stored record (each must decode).
fn stored_ids(stored: &[StreamRecord]) -> Result<Vec<String>> {
    stored
        .iter()
        .map(|s| Ok(decode_record(&s.data)?.event_id.to_string()))
        .collect()
}

/// Checks the invariant: the written results are exactly the stored records (each once, with the
/// sequence number the response gave), and no failed result is stored.
/// Checks the delivery guarantee: every event answered `written` is in the stream, once, with the
/// shard and sequence number answered. An event answered failed may be in the stream only if its
/// call was abandoned at the deadline (`Timeout`): such a call may have written its records, which
/// is why they are answered failed and resent (eventId dedups them downstream). Returns the numbers
/// answered written and failed.
fn check_acknowledged(response: &ApiGatewayProxyResponse, stored: &[StreamRecord]) -> Result<(usize, usize)> {
    let results = results(response)?;
    let ids = stored_ids(stored)?;
    let mut seen = HashSet::new();
    for (record, id) in stored.iter().zip(&ids) {
        ensure!(seen.insert(id.clone()), "{id} is in the stream twice");
        let answered = results
            .get(id)
            .with_context(|| format!("{id} stored but not in the response"))?;
        if answered.status != "written" {
            ensure!(
                answered.error_code == "Timeout",
                "{id} is in the stream but was answered {} ({})",
                answered.status,
                answered.error_code
            );
            continue;
        }
        ensure!(
            answered.shard == json!(record.shard_id),
            "{id}: shard {} answered, {} stored",
            answered.shard,
            record.shard_id
        );
        ensure!(
            answered.sequence == json!(record.sequence_number),
            "{id}: sequence number differs"
        );
    }
    let mut written = 0;
    let mut failed = 0;
    for (id, answered) in &results {
        match answered.status.as_str() {
            "written" => {
                written += 1;
                ensure!(seen.contains(id), "{id} acknowledged but missing from the stream");
            }
            _ => failed += 1,
        }
    }
    Ok((written, failed))
}

#[tokio::test]
async fn events_read_back_from_the_stream_carry_the_seed_envelope() -> Result<()> {
    let standin = StandIn::connect().await?;
    let client = kinesis_client(&standin.sdk_config());
    let stream = create_stream(&client, 2).await?;
    let sink = KinesisSink::new(client.clone(), StreamRef::Name(stream.clone()));
    let config = config(Duration::from_secs(10));

    let received = DateTime::parse_from_rfc3339("2024-06-01T12:00:00.900Z")?.to_utc();
    let synth = synth_events(1, 500);
    let requests = [
        sample("apigw-single-event.json")?,
        sample("apigw-gzip-base64.json")?,
        request(&synth, received)?,
    ];
    let mut all_results = HashMap::new();
    for request in &requests {
        let response = respond(request, &sample_games(), &sink, &config).await;
        ensure!(response.status_code == 200, "{:?}", response.body);
        all_results.extend(results(&response)?);
    }
    ensure!(all_results.len() == 1 + 3 + 500, "{} results", all_results.len());

    let stored = unpacked(read_stream(&client, &stream).await?);
    ensure!(stored.len() == all_results.len(), "{} records stored", stored.len());
    let shards: HashSet<&str> = stored.iter().map(|s| s.shard_id.as_str()).collect();
    ensure!(shards.len() == 2, "random keys spread over both shards: {shards:?}");
    let mut ids = HashSet::new();
    let mut times = BTreeMap::new();
    for record in &stored {
        let envelope: Value = serde_json::from_slice(&record.data)?;
        // The seed's shape: the API Gateway request, the event object as body.
        ensure!(envelope["httpMethod"] == "POST" && envelope["resource"] == "/events");
        ensure!(envelope["isBase64Encoded"] == false);
        ensure!(envelope["requestContext"]["requestId"].is_string());
        ensure!(envelope["body"].is_object(), "{envelope}");
        ensure!(
            envelope["headers"].get("x-api-key").is_none(),
            "the API key reached the stream"
        );
        let event = decode_record(&record.data)?;
        ensure!(ids.insert(event.event_id), "duplicate eventId {}", event.event_id);
        ensure!(record.partition_key == event.event_id.to_string());
        let answered = &all_results[&event.event_id.to_string()];
        ensure!(
            answered.status == "written"
                && answered.shard == json!(record.shard_id)
                && answered.sequence == json!(record.sequence_number)
        );
        *times.entry(event.event_time.timestamp()).or_insert(0) += 1;
    }
    // eventTime is API Gateway's request time to the second: the samples' 1717243200123 ms and the
    // synthetic request's 12:00:00.900.
    ensure!(times == BTreeMap::from([(1_717_243_200, 504)]), "{times:?}");
    // The events are those that were sent, with their client ids and unknown fields.
    for sent in &synth {
        let id = sent.event_id.context("synth events carry ids")?;
        ensure!(ids.contains(&id), "{id} missing");
    }
    let purchase = stored
        .iter()
        .map(|s| decode_record(&s.data))
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .find(|e| e.event_id.to_string() == "0b5e8a52-7d4d-4f4b-9c39-6d9a8a0c1e11")
        .context("the gzip sample's purchase")?;
    ensure!(purchase.booking() == Some(4.99));
    ensure!(purchase.event_params.context("params")?.extra["item_sku"] == "gems_500");
    Ok(())
}

#[tokio::test]
async fn device_ids_keep_each_device_in_one_shard() -> Result<()> {
    let standin = StandIn::connect().await?;
    let client = kinesis_client(&standin.sdk_config());
    let stream = create_stream(&client, 4).await?;
    let sink = KinesisSink::new(client.clone(), StreamRef::Name(stream.clone()));
    let config = ApiConfig {
        partition_key: PartitionKey::DeviceId,
        ..config(Duration::from_secs(10))
    };
    let response = respond(
        &request(&synth_events(2, 400), Utc::now())?,
        &sample_games(),
        &sink,
        &config,
    )
    .await;
    ensure!(response.status_code == 200, "{:?}", response.body);
    let stored = unpacked(read_stream(&client, &stream).await?);
    ensure!(stored.len() == 400);
    let mut shard_of: HashMap<String, String> = HashMap::new();
    for record in &stored {
        let event = decode_record(&record.data)?;
        let device = event.device_id().context("synth events have devices")?.to_owned();
        ensure!(record.partition_key == device);
        let shard = shard_of
            .entry(device.clone())
            .or_insert_with(|| record.shard_id.clone());
        ensure!(*shard == record.shard_id, "{device} in two shards");
    }
    ensure!(shard_of.values().collect::<HashSet<_>>().len() > 1);
    Ok(())
}

#[tokio::test]
async fn throttled_entries_are_retried_and_each_event_is_in_the_stream_once() -> Result<()> {
    let standin = StandIn::connect().await?;
    let client = kinesis_client(&standin.sdk_config());
    let stream = create_stream(&client, 2).await?;
    let sink = FlakySink::new(
        KinesisSink::new(client.clone(), StreamRef::Name(stream.clone())),
        0.3,
        5,
    );
    let response = respond(
        &request(&synth_events(3, 500), Utc::now())?,
        &sample_games(),
        &sink,
        &config(Duration::from_secs(20)),
    )
    .await;
    ensure!(response.status_code == 200, "{:?}", response.body);
    ensure!(sink.refused() > 50, "faults were injected: {}", sink.refused());
    let (written, failed) = check_acknowledged(&response, &unpacked(read_stream(&client, &stream).await?))?;
    ensure!((written, failed) == (500, 0), "{written} written, {failed} failed");
    Ok(())
}

#[tokio::test]
async fn what_is_still_throttled_when_the_budget_ends_is_answered_429_and_not_acknowledged() -> Result<()> {
    let standin = StandIn::connect().await?;
    let client = kinesis_client(&standin.sdk_config());
    let stream = create_stream(&client, 2).await?;
    let sink = FlakySink::new(
        KinesisSink::new(client.clone(), StreamRef::Name(stream.clone())),
        0.6,
        9,
    );
    // A few rounds at most (the jittered backoff is drawn up to the whole budget), so with 60% of
    // the entries refused in every round some are still failed at the end. A call still running
    // at the deadline is answered failed with `Timeout` although it may have written its records;
    // `check_acknowledged` allows exactly that.
    let config = ApiConfig {
        delivery: DeliveryConfig {
            budget: Duration::from_secs(5),
            first_backoff: Duration::from_secs(5),
            max_backoff: Duration::from_secs(5),
            throttled_budget: Duration::from_secs(5),
        },
        record_format: RecordFormat::Seed,
        ..ApiConfig::default()
    };
    let response = respond(
        &request(&synth_events(4, 300), Utc::now())?,
        &sample_games(),
        &sink,
        &config,
    )
    .await;
    // 429 when every unwritten event was refused for throughput; 503 when a call was cut off.
    let codes: Vec<Value> = answer(&response)?["results"]
        .as_array()
        .map(|results| {
            results
                .iter()
                .filter(|r| r["status"] == "failed")
                .map(|r| r["errorCode"].clone())
                .collect()
        })
        .unwrap_or_default();
    let throttled_only = codes.iter().all(|c| c == "ProvisionedThroughputExceededException");
    let want = if throttled_only { 429 } else { 503 };
    ensure!(response.status_code == want, "{:?}", response.body);
    ensure!(response.headers.contains_key("retry-after"));
    let (written, failed) = check_acknowledged(&response, &unpacked(read_stream(&client, &stream).await?))?;
    ensure!(
        written + failed == 300 && written > 0 && failed > 0,
        "{written} written, {failed} failed"
    );
    ensure!(answer(&response)?["failed"] == failed);
    Ok(())
}

#[tokio::test]
async fn a_stream_that_fails_every_call_gets_nothing_acknowledged() -> Result<()> {
    let standin = StandIn::connect().await?;
    let client = kinesis_client(&standin.sdk_config());
    let stream = create_stream(&client, 1).await?;
    let failing = FailingSink::throttled();
    let response = respond(
        &request(&synth_events(5, 50), Utc::now())?,
        &sample_games(),
        &failing,
        &config(Duration::from_millis(500)),
    )
    .await;
    ensure!(response.status_code == 429, "{:?}", response.body);
    ensure!(failing.calls() > 1, "retried within the budget");
    let (written, failed) = check_acknowledged(&response, &unpacked(read_stream(&client, &stream).await?))?;
    ensure!((written, failed) == (0, 50));
    Ok(())
}

#[tokio::test]
async fn a_missing_stream_is_not_retried_and_nothing_is_acknowledged() -> Result<()> {
    let standin = StandIn::connect().await?;
    let client = kinesis_client(&standin.sdk_config());
    let sink = KinesisSink::new(client, StreamRef::Name(unique_name("no-such-stream")));
    let started = Instant::now();
    let response = respond(
        &request(&synth_events(6, 10), Utc::now())?,
        &sample_games(),
        &sink,
        &config(Duration::from_secs(20)),
    )
    .await;
    ensure!(response.status_code == 503, "{:?}", response.body);
    ensure!(
        started.elapsed() < Duration::from_secs(10),
        "gave up at once: {:?}",
        started.elapsed()
    );
    let answer = answer(&response)?;
    for result in answer["results"].as_array().context("results")? {
        ensure!(result["status"] == "failed");
        ensure!(result["errorCode"] == "ResourceNotFoundException", "{result}");
    }
    Ok(())
}

/// The seed's form (`GameEventsRecordFormat=seed`) is read by the seed's own reader: Spark's
/// `from_json` with the seed's schema over each record's data, as its Structured Streaming job
/// parses the stream (`scripts/seed-reader`, FAILFAST). Every record is one event, and Spark reads
/// from it the event that was sent: its id, name, the server's `eventTime` and the seed's eight
/// parameters.
#[tokio::test]
async fn the_seeds_spark_reader_reads_the_seed_records() -> Result<()> {
    const PARAMS: [&str; 8] = [
        "game_keyword",
        "app_name",
        "scoreAdjustment",
        "platform",
        "app_version",
        "device_id",
        "client_event_time",
        "amount",
    ];
    let standin = StandIn::connect().await?;
    let client = kinesis_client(&standin.sdk_config());
    let stream = create_stream(&client, 1).await?;
    let sink = KinesisSink::new(client.clone(), StreamRef::Name(stream.clone()));
    let received = DateTime::parse_from_rfc3339("2024-06-01T12:00:00.900Z")?.to_utc();
    let sent = synth_events(7, 200);
    let response = respond(
        &request(&sent, received)?,
        &sample_games(),
        &sink,
        &config(Duration::from_secs(10)),
    )
    .await;
    ensure!(response.status_code == 200, "{:?}", response.body);

    // Read as the stream holds them: one event a record, not packed.
    let stored = read_stream(&client, &stream).await?;
    ensure!(
        stored.len() == sent.len(),
        "{} records for {} events",
        stored.len(),
        sent.len()
    );
    let dir = tempfile::tempdir()?;
    let records = dir.path().join("records.jsonl");
    let mut lines = Vec::new();
    for record in &stored {
        ensure!(!record.data.contains(&b'\n'), "a record's data spans lines");
        lines.extend_from_slice(&record.data);
        lines.push(b'\n');
    }
    std::fs::write(&records, lines)?;
    let script = format!("{}/../scripts/seed-reader", env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new(lakelog_tests::python())
        .arg(&script)
        .arg(&records)
        .output()
        .context("running scripts/seed-reader")?;
    ensure!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let read: Vec<Value> = String::from_utf8(out.stdout)?
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    ensure!(read.len() == sent.len(), "Spark read {} records", read.len());

    let by_id: HashMap<String, &Value> = read
        .iter()
        .map(|r| (r["eventId"].as_str().unwrap_or("").to_owned(), r))
        .collect();
    for event in &sent {
        let id = event.event_id.context("synth events carry ids")?.to_string();
        let spark = by_id.get(&id).with_context(|| format!("Spark did not read {id}"))?;
        let sent = serde_json::to_value(event)?;
        ensure!(spark["eventName"] == sent["eventName"], "{id}: {spark} against {sent}");
        ensure!(spark["eventTime"] == json!(received.timestamp()), "{id}: {spark}");
        for param in PARAMS {
            let (theirs, ours) = (&spark["eventParams"][param], &sent["eventParams"][param]);
            let same = match (theirs.as_f64(), ours.as_f64()) {
                (Some(a), Some(b)) => a == b,
                _ => theirs == ours,
            };
            ensure!(same, "{id}: {param} read {theirs}, sent {ours}");
        }
    }
    Ok(())
}
