//! `lakelog serve` as one machine's game pipeline: API handler -> embedded stream -> sink -> a
//! local Delta table, fed by `lakelog send-events`; and its live page, looked at in Chromium.

use std::process::Command;
use std::time::{Duration, Instant};

use lake::StorageConfig;

use crate::common;

fn rows(table: &str) -> u64 {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        match lake::Table::open(table, &StorageConfig::default()).await {
            Ok(t) => t.file_stats().map(|s| s.rows).unwrap_or(0),
            Err(_) => 0,
        }
    })
}

/// `lakelog send-events` to `url` at `rate` events a second for `seconds`, from `seed`.
fn send_events(url: &str, rate: u32, seconds: u32, seed: u64) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_lakelog"))
        .args(["send-events", "--url", url])
        .args(["--api-key", common::KEY])
        .args(["--rate", &rate.to_string(), "--duration", &seconds.to_string()])
        .args(["--seed", &seed.to_string()])
        .output()
        .unwrap()
}

#[test]
fn events_sent_to_serve_land_in_the_local_table_within_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let lake_dir = dir.path().join("lake");
    let (server, url) = common::serve(&lake_dir);

    let written = written(&send_events(&url, 500, 2, 3));
    assert!(written >= 900, "{written}");

    let table = lake_dir.join("game_events");
    let table = table.to_str().unwrap();
    assert_eq!(rows_within(table, written, Duration::from_secs(20)), written);
    drop(server);
}

/// The events `lakelog send-events` reports written (answered 200).
fn written(sent: &std::process::Output) -> u64 {
    let report = String::from_utf8_lossy(&sent.stdout);
    assert!(
        sent.status.success(),
        "{report}\n{}",
        String::from_utf8_lossy(&sent.stderr)
    );
    report
        .split_once(": ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {report}"))
}

/// The table's rows once it holds `want` of them, or after `patience`.
fn rows_within(table: &str, want: u64, patience: Duration) -> u64 {
    let started = Instant::now();
    while rows(table) < want && started.elapsed() < patience {
        std::thread::sleep(Duration::from_millis(250));
    }
    rows(table)
}

/// Every event a run of `lakelog serve` answered 200 is a row, however often it was restarted on
/// one `--lake`: each run's embedded stream continues after what the table has committed, so no
/// new record is taken for one already in.
#[test]
fn a_restarted_serve_keeps_every_event_it_answered() {
    let dir = tempfile::tempdir().unwrap();
    let lake_dir = dir.path().join("lake");
    let table = lake_dir.join("game_events");
    let table = table.to_str().unwrap();
    let mut answered = 0;
    for run in 0..3 {
        let (server, url) = common::serve(&lake_dir);
        let sent = written(&send_events(&url, 40, 1, 20 + run));
        assert!(sent > 0, "run {run} sent nothing");
        answered += sent;
        assert_eq!(
            rows_within(table, answered, Duration::from_secs(20)),
            answered,
            "rows after run {run} of serve"
        );
        drop(server);
    }
}

/// The page at `url` after its scripts ran, as headless Chromium (the system package) renders it.
fn rendered(url: &str) -> String {
    let browser = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .expect("no Chromium: install the system package (apt-get install chromium)");
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--virtual-time-budget=4000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(url)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The text of the headline figure `what` on a rendered page.
fn figure(page: &str, what: &str) -> String {
    let at = page
        .find(&format!("<dt>{what}</dt>"))
        .unwrap_or_else(|| panic!("no {what} in {page}"));
    let rest = &page[at..];
    let start = rest.find("<dd>").unwrap() + 4;
    rest[start..start + rest[start..].find("</dd>").unwrap()].to_owned()
}

#[test]
fn the_live_page_shows_the_events_as_they_land() {
    let dir = tempfile::tempdir().unwrap();
    let lake_dir = dir.path().join("lake");
    // A funnel the generated events go through: the live view charts it.
    let funnels = dir.path().join("funnels.json");
    std::fs::write(
        &funnels,
        r#"{"funnels": [{"name": "first purchase", "steps": ["sessionStart", "purchaseEvent"]}]}"#,
    )
    .unwrap();
    let (server, url) = common::serve_with(&lake_dir, &["--funnels", funnels.to_str().unwrap()]);
    let page_url = url.trim_end_matches("events").to_owned();

    // Before any event: the page's script filled in the headline and the (empty) charts.
    let before = rendered(&page_url);
    assert!(before.contains("Updated at"), "{before}");
    assert_eq!(figure(&before, "Events"), "0");
    assert!(before.contains("<svg"), "{before}");

    let sent = send_events(&url, 300, 1, 5);
    assert!(sent.status.success(), "{}", String::from_utf8_lossy(&sent.stderr));
    // Wait until the sink has committed them all (the row count holds for a second).
    let table = lake_dir.join("game_events");
    let started = Instant::now();
    let mut landed = 0;
    loop {
        std::thread::sleep(Duration::from_millis(1000));
        let now = rows(table.to_str().unwrap());
        if (now > 0 && now == landed) || started.elapsed() > Duration::from_secs(30) {
            break;
        }
        landed = now;
    }
    assert!(landed > 0);

    // The same page now counts them, with a bar for their minute (a range this short is charted
    // per minute).
    let after = rendered(&page_url);
    let events: u64 = figure(&after, "Events").replace(',', "").parse().unwrap();
    assert_eq!(events, landed, "each committed event counted once");
    assert!(
        after.matches("<rect").count() > before.matches("<rect").count(),
        "no new bars"
    );
    assert!(
        after.contains("Events per minute (UTC)") && after.contains("Daily active users"),
        "{after}"
    );
    assert!(after.contains("Funnel first purchase"), "{after}");
    drop(server);
}
