//! Erasure of a game that pseudonymises its players' ids: the rows hold pseudonyms, so the request's
//! ids are mapped through the game's pseudonym before the rows are searched; an erasure that finds
//! nothing is never verified.

use aws_lambda_events::event::kinesis::KinesisEventRecord;
use aws_lambda_events::kinesis::KinesisRecord;
use chrono::{TimeZone, Utc};
use fixtures::game::{Synth, SynthConfig};
use game_events::Envelope;
use game_sink::erasure::{ErasureRequest, ErasureTargets, forget};
use game_sink::{Config, Sink};
use lake::{Retry, StorageConfig};

const GAME: &str = "alpha";

/// The game's pseudonym of an id (the API's is a keyed hash; any one-to-one mapping shows the path).
fn pseudonym(id: &str) -> String {
    format!("{:0>64}", id.bytes().map(|b| format!("{b:02x}")).collect::<String>())
}

/// 10 events of each device, written as the API writes a pseudonymising game's: under pseudonyms.
fn records(devices: &[&str]) -> Vec<KinesisEventRecord> {
    let mut synth = Synth::new(SynthConfig {
        seed: 5,
        devices: 4,
        ..SynthConfig::default()
    });
    let envelope = Envelope::new(serde_json::Map::new());
    let time = Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap();
    let mut out = Vec::new();
    for (d, device) in devices.iter().enumerate() {
        for i in 0..10 {
            let n = d * 10 + i;
            let mut event = synth.event(time).stamp(time + chrono::Duration::seconds(n as i64));
            if let Some(params) = event.event_params.as_mut() {
                params.device_id = Some(pseudonym(device));
            }
            let mut kinesis = KinesisRecord::default();
            *kinesis.data = envelope.record(&event.with_game(GAME)).unwrap();
            kinesis.sequence_number = format!("4959{n:050}");
            kinesis.partition_key = pseudonym(device);
            let mut record = KinesisEventRecord::default();
            record.event_id = Some(format!("shardId-000000000000:{}", kinesis.sequence_number));
            record.event_source_arn = Some("arn:aws:kinesis:us-east-1:1:stream/game-events".to_owned());
            record.kinesis = kinesis;
            out.push(record);
        }
    }
    out
}

async fn rows(uri: &str) -> u64 {
    let table = lake::Table::open(uri, &StorageConfig::default()).await.unwrap();
    table.file_stats().unwrap().rows
}

#[tokio::test]
async fn a_pseudonymising_games_player_is_erased_by_pseudonym_and_a_no_op_is_not_verified() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("game_events").to_str().unwrap().to_owned();
    let sink = Sink::open(&Config::new(&events, None).unwrap(), &StorageConfig::default())
        .await
        .unwrap();
    let report = sink.process(&records(&["X", "Y"]), &Retry::default()).await;
    assert_eq!(report.rows, 20, "{report:?}");
    let targets = ErasureTargets {
        events_table: events.clone(),
        rejects_table: None,
        parked: None,
    };
    let storage = StorageConfig::default();
    let request =
        || ErasureRequest::new("test", GAME.to_owned(), vec!["X".to_owned()], "device_id".to_owned()).unwrap();

    // The raw id matches nothing: not verified, and nothing removed.
    let raw = forget(&targets, &storage, &request(), std::time::Duration::ZERO)
        .await
        .unwrap();
    assert!(!raw.verified, "an erasure that found nothing is not verified");
    assert_eq!(raw.found, 0);
    assert!(raw.unverified_because.unwrap().contains("pseudonymises"));
    assert_eq!(rows(&events).await, 20);

    // Through the game's pseudonym: X's 10 rows go, Y's stay.
    let mapped = request().with_pseudonyms(&["device_id".to_owned()], pseudonym);
    let receipt = forget(&targets, &storage, &mapped, std::time::Duration::ZERO)
        .await
        .unwrap();
    assert!(receipt.verified, "{:?}", receipt.unverified_because);
    assert_eq!(receipt.found, 10);
    assert_eq!(rows(&events).await, 10);
}

#[test]
fn a_parameter_that_is_no_id_is_refused() {
    let e = ErasureRequest::new("r.json", GAME.to_owned(), vec!["ios".to_owned()], "platform".to_owned())
        .unwrap_err()
        .to_string();
    assert!(e.contains("r.json") && e.contains("platform"), "{e}");
}
