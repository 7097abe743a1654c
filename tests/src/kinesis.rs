//! Reading back what a Kinesis stream on the stand-in holds.

use anyhow::{Context, Result};
use aws_lambda_events::encodings::SecondTimestamp;
use aws_lambda_events::event::kinesis::{KinesisEventRecord, KinesisRecord};
use aws_sdk_kinesis::types::ShardIteratorType;
use chrono::{DateTime, Utc};

/// A record as the stream stores it.
#[derive(Debug, Clone)]
pub struct StreamRecord {
    /// The shard it is in.
    pub shard_id: String,
    /// Its sequence number.
    pub sequence_number: String,
    /// Its partition key.
    pub partition_key: String,
    /// Its data.
    pub data: Vec<u8>,
    /// When the stream received it.
    pub arrival: DateTime<Utc>,
}

impl StreamRecord {
    /// The record as a Kinesis event source hands it to a Lambda function.
    pub fn to_lambda(&self) -> KinesisEventRecord {
        let mut kinesis = KinesisRecord::default();
        kinesis.approximate_arrival_timestamp = SecondTimestamp(self.arrival);
        *kinesis.data = self.data.clone();
        kinesis.partition_key = self.partition_key.clone();
        kinesis.sequence_number = self.sequence_number.clone();
        let mut record = KinesisEventRecord::default();
        record.event_id = Some(format!("{}:{}", self.shard_id, self.sequence_number));
        record.kinesis = kinesis;
        record
    }
}

/// One `level_up` event of `game` per device of `devices`, sent at `time`, as the API writes
/// them and a Kinesis event source hands them to the sink: one shard, sequence numbers from
/// `first`, each device its partition key.
pub fn level_ups(game: &str, devices: &[String], first: u64, time: DateTime<Utc>) -> Vec<KinesisEventRecord> {
    let envelope = game_events::Envelope::new(serde_json::Map::new());
    devices
        .iter()
        .zip(first..)
        .map(|(device, sequence)| {
            let event: game_events::GameEvent = serde_json::from_value(serde_json::json!({
                "eventName": "level_up",
                "eventParams": {"device_id": device},
            }))
            .expect("a level_up event");
            StreamRecord {
                shard_id: "shardId-000000000000".into(),
                sequence_number: sequence.to_string(),
                partition_key: device.clone(),
                data: envelope
                    .record(&event.stamp(time).with_game(game))
                    .expect("an event serialises"),
                arrival: time,
            }
            .to_lambda()
        })
        .collect()
}

/// `records` with each packed record ([`game_events::packed`]) in place of the one-event records
/// it holds, each with the packed record's shard, sequence number, partition key and arrival: what
/// the sink reads. A record that cannot be unpacked stays as it is.
pub fn unpacked(records: Vec<StreamRecord>) -> Vec<StreamRecord> {
    let mut out = Vec::with_capacity(records.len());
    for record in records {
        let events = game_events::packed::is_packed(&record.data).then(|| game_events::packed::unpack(&record.data));
        match events {
            Some(Ok(events)) => {
                out.extend(events.into_iter().map(|data| StreamRecord { data, ..record.clone() }));
            }
            _ => out.push(record),
        }
    }
    out
}

/// Every record of every shard of `stream`, oldest first per shard.
pub async fn read_stream(client: &aws_sdk_kinesis::Client, stream: &str) -> Result<Vec<StreamRecord>> {
    let shards = client.list_shards().stream_name(stream).send().await?;
    let mut out = Vec::new();
    for shard in shards.shards() {
        let mut iterator = client
            .get_shard_iterator()
            .stream_name(stream)
            .shard_id(shard.shard_id())
            .shard_iterator_type(ShardIteratorType::TrimHorizon)
            .send()
            .await?
            .shard_iterator;
        while let Some(it) = iterator {
            let page = client.get_records().shard_iterator(it).limit(1000).send().await?;
            if page.records().is_empty() {
                break;
            }
            for record in page.records() {
                let arrival = record
                    .approximate_arrival_timestamp()
                    .and_then(|t| DateTime::from_timestamp(t.secs(), t.subsec_nanos()))
                    .with_context(|| format!("record {} has no arrival time", record.sequence_number()))?;
                out.push(StreamRecord {
                    shard_id: shard.shard_id().to_owned(),
                    sequence_number: record.sequence_number().to_owned(),
                    partition_key: record.partition_key().unwrap_or_default().to_owned(),
                    data: record.data().as_ref().to_vec(),
                    arrival,
                });
            }
            iterator = page.next_shard_iterator;
        }
    }
    Ok(out)
}
