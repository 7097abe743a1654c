//! `lakelog send-events` against `lakelog serve`: what it sends is what its seed generates, every
//! event is acknowledged, and the file it writes says so event by event.

use std::collections::HashSet;
use std::process::Command;

use serde_json::Value;

use crate::common;
use common::serve;

fn send(url: &str, out: &std::path::Path, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_lakelog"))
        .args(["send-events", "--url", url, "--out", out.to_str().unwrap()])
        .args(["--api-key", common::KEY])
        .args(extra)
        .output()
        .unwrap()
}

fn sent(out: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(out)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn every_event_sent_is_acknowledged_and_the_seed_fixes_the_events() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, url) = serve(&dir.path().join("lake"));
    let args = [
        "--rate",
        "1500",
        "--duration",
        "1",
        "--batch",
        "250",
        "--devices",
        "40",
        "--seed",
        "9",
        "--gzip",
    ];
    let first = dir.path().join("first.jsonl");
    let output = send(&url, &first, &args);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("sent 1500 events to"), "{stdout}");
    assert!(stdout.contains("1500 written"), "{stdout}");
    assert!(stdout.contains("6 HTTP exchanges (200: 6)"), "{stdout}");
    assert!(stdout.contains("devices: "), "{stdout}");

    let events = sent(&first);
    assert_eq!(events.len(), 1500);
    let ids: HashSet<&str> = events.iter().map(|e| e["event"]["eventId"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 1500, "every event has its own eventId");
    assert!(events.iter().all(|e| e["status"] == "written"));
    let devices: HashSet<&str> = events
        .iter()
        .map(|e| e["event"]["eventParams"]["device_id"].as_str().unwrap())
        .collect();
    assert!(devices.len() <= 40 && devices.len() > 20, "{}", devices.len());
    let purchases: Vec<f64> = events
        .iter()
        .filter(|e| e["event"]["eventName"] == "purchaseEvent")
        .map(|e| e["event"]["eventParams"]["amount"].as_f64().unwrap())
        .collect();
    assert!(!purchases.is_empty());
    let bookings: f64 = purchases.iter().sum();
    assert!(
        stdout.contains(&format!("purchases: {}, bookings {bookings:.2}", purchases.len())),
        "{stdout}"
    );

    // The same seed sends the same events, eventIds included (so a resent run is recognised
    // downstream as duplicates).
    let second = dir.path().join("second.jsonl");
    assert!(send(&url, &second, &args).status.success());
    let again: Vec<Value> = sent(&second);
    // In the order of the generator (the file is in the order the requests completed).
    let strip = |events: &[Value]| -> Vec<Value> {
        let mut events: Vec<Value> = events
            .iter()
            .map(|e| {
                let mut event = e["event"].clone();
                event["eventParams"]
                    .as_object_mut()
                    .unwrap()
                    .remove("client_event_time");
                event
            })
            .collect();
        events.sort_by_key(|e| e["eventId"].as_str().unwrap().to_owned());
        events
    };
    let (a, b) = (strip(&events), strip(&again));
    assert_eq!(a.len(), b.len());
    let differ = a.iter().zip(&b).filter(|(x, y)| x != y).count();
    assert_eq!(differ, 0, "{differ} events differ between two runs with the same seed");
}

#[test]
fn a_refusing_endpoint_fails_the_run_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, url) = serve(&dir.path().join("lake"));
    let wrong = url.replace("/events", "/nowhere");
    let out = dir.path().join("sent.jsonl");
    let output = send(&wrong, &out, &["--rate", "100", "--duration", "1"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success());
    assert!(stdout.contains("0 written"), "{stdout}");
    assert!(stdout.contains("100 refused"), "{stdout}");
    assert!(stdout.contains("error: HTTP 404: no route /nowhere"), "{stdout}");
    assert!(sent(&out).iter().all(|e| e["status"] == "refused"));
}
