//! The real `bootstrap` binary, run as Lambda runs it: a local Runtime API feeds it
//! `events/scheduled-maintenance.json` over local tables and gets its report back; a missing
//! setting ends its init with a message a person reads.

use std::path::Path;
use std::time::Duration;

use lake::StorageConfig;
use lakelog_tests::maintenance::{SCHEDULED_EVENT, table};
use lakelog_tests::runtime_api::{Answer, Function};

const BINARY: &str = env!("CARGO_BIN_EXE_maintenance-lambda");
/// The timeout template.yaml gives the maintenance function.
const TIMEOUT: Duration = Duration::from_secs(900);
const WAIT: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_event_is_answered_with_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().display();
    let game = format!("{root}/game_events");
    table(&game, &StorageConfig::default(), "eventDate", 4, &[1, 2]).await;
    let tables = format!("{game}#dedup=eventId");

    let function = Function::start_with_timeout(Path::new(BINARY), &[("LAKE_TABLES", &tables)], TIMEOUT).unwrap();
    let event = std::fs::read(SCHEDULED_EVENT).unwrap();
    let answer = tokio::task::block_in_place(|| function.invoke(&event, WAIT)).unwrap();
    let Answer::Response(report) = answer else {
        panic!("the function failed: {answer:?}");
    };
    assert_eq!(report["stoppedEarly"], false, "{report}");
    let summary = &report["tables"][0];
    assert_eq!(summary["table"], game, "{report}");
    assert_eq!(summary["filesBefore"], 4, "{report}");
    assert_eq!(summary["filesAfter"], 1, "{report}");
    assert_eq!(summary["duplicatesRemoved"], 6, "{report}");
    assert!(summary["checkpointVersion"].as_u64().is_some(), "{report}");
    let exited = function.stop();
    let sum = |name: &str| exited.metric_sum("lakelog", name, "Count", &[("Function", "maintenance")]);
    assert_eq!(
        (sum("Tables"), sum("TablesFailed"), sum("DuplicatesRemoved")),
        (1.0, 0.0, 6.0)
    );
    assert_eq!(sum("FilesCompacted"), 3.0);
}

#[test]
fn a_missing_setting_ends_init_in_words() {
    let message = Function::expect_init_error(Path::new(BINARY), &[], WAIT).unwrap();
    assert_eq!(message, "the function cannot start: LAKE_TABLES is not set");
}
