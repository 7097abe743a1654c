//! `lakelog serve` as one machine's game pipeline: API handler -> embedded stream -> sink -> a
//! local Delta table, fed by `lakelog send-events`.

use std::process::Command;
use std::time::{Duration, Instant};

use lake::StorageConfig;

mod common;

fn rows(table: &str) -> u64 {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        match lake::open_table(table, &StorageConfig::default()).await {
            Ok(t) => lake::file_stats(&t).map(|s| s.rows).unwrap_or(0),
            Err(_) => 0,
        }
    })
}

#[test]
fn events_sent_to_serve_land_in_the_local_table_within_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let lake_dir = dir.path().join("lake");
    let (server, url) = common::serve(&lake_dir);

    let sent = Command::new(env!("CARGO_BIN_EXE_lakelog"))
        .args([
            "send-events",
            "--url",
            &url,
            "--rate",
            "500",
            "--duration",
            "2",
            "--seed",
            "3",
        ])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&sent.stdout);
    assert!(
        sent.status.success(),
        "{report}\n{}",
        String::from_utf8_lossy(&sent.stderr)
    );
    let written: u64 = report
        .split_once(": ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {report}"));
    assert!(written >= 900, "{report}");

    let table = lake_dir.join("game_events");
    let table = table.to_str().unwrap();
    let started = Instant::now();
    while rows(table) < written && started.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(250));
    }
    assert_eq!(rows(table), written, "rows after {:?}", started.elapsed());
    drop(server);
}
