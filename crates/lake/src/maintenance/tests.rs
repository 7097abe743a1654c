//! Maintenance on local tables: a table built by 500 small commits, compacted, deduplicated,
//! vacuumed, and read back file by file with the parquet reader.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use arrow::array::{Array, AsArray, Date32Array, Float64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit, TimestampMicrosecondType};
use chrono::{TimeDelta, Utc};
use deltalake::DeltaTable;
use deltalake::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::create::{TableSpec, file_stats, open_or_create, open_table};
use crate::maintenance::{
    CompactOptions, MaintenanceError, MaintenanceOptions, VacuumOptions, checkpoint, compact, discover_tables,
    maintain, plan_compaction, vacuum,
};
use crate::storage::StorageConfig;

const DAY: i32 = 19_000; // 2022-01-08
const MICROS_PER_DAY: i64 = 86_400_000_000;

/// A game_events-like table: events with an id, a name, a time, an amount and a device, by date.
fn spec() -> TableSpec {
    let schema = Arc::new(Schema::new(vec![
        Field::new("eventId", DataType::Utf8, false),
        Field::new("eventName", DataType::Utf8, false),
        Field::new(
            "eventTime",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ),
        Field::new("device_id", DataType::Utf8, true),
        Field::new("amount", DataType::Float64, true),
        Field::new("eventDate", DataType::Date32, false),
    ]));
    TableSpec::new("game_events", schema, &["eventDate"])
}

/// One event; its id decides everything else, so a duplicate is the same row again.
#[derive(Debug, Clone, PartialEq)]
struct Event {
    id: String,
    name: &'static str,
    micros: i64,
    device: String,
    amount: Option<f64>,
    day: i32,
}

fn event(n: u64, day: i32) -> Event {
    let purchase = n.is_multiple_of(7);
    Event {
        id: format!("00000000-0000-4000-8000-{n:012}"),
        name: if purchase { "purchaseEvent" } else { "levelUp" },
        micros: i64::from(day) * MICROS_PER_DAY + (n as i64 % 24) * 3_600_000_000 + n as i64,
        device: format!("device-{}", n % 37),
        amount: purchase.then_some((n % 100) as f64 + 0.99),
        day,
    }
}

fn batch(events: &[Event]) -> RecordBatch {
    RecordBatch::try_new(
        spec().schema,
        vec![
            Arc::new(StringArray::from_iter_values(events.iter().map(|e| e.id.as_str()))),
            Arc::new(StringArray::from_iter_values(events.iter().map(|e| e.name))),
            Arc::new(TimestampMicrosecondArray::from_iter_values(events.iter().map(|e| e.micros)).with_timezone("UTC")),
            Arc::new(StringArray::from_iter(events.iter().map(|e| Some(e.device.as_str())))),
            Arc::new(Float64Array::from_iter(events.iter().map(|e| e.amount))),
            Arc::new(Date32Array::from_iter_values(events.iter().map(|e| e.day))),
        ],
    )
    .unwrap()
}

async fn append(uri: &str, table: &mut DeltaTable, source: &str, events: &[Event]) {
    crate::append::commit_batch(uri, table, source, batch(events)).await;
}

/// The batches of every file of the table's loaded version, each with its file's `eventDate` (the
/// partition value, from the log) as days since the epoch.
fn file_batches(table: &DeltaTable) -> Vec<(i32, RecordBatch)> {
    let root = table.table_url().to_file_path().unwrap();
    let mut out = Vec::new();
    for file in table.snapshot().unwrap().log_data().iter() {
        let day: i32 = {
            let values = file.partition_values_map();
            let date = values["eventDate"].clone().unwrap();
            let date = chrono::NaiveDate::parse_from_str(&date, "%Y-%m-%d").unwrap();
            (date - chrono::NaiveDate::from_ymd_opt(1970, 1, 1).unwrap()).num_days() as i32
        };
        let reader = std::fs::File::open(root.join(file.path().as_ref())).unwrap();
        for batch in ParquetRecordBatchReaderBuilder::try_new(reader)
            .unwrap()
            .build()
            .unwrap()
        {
            out.push((day, batch.unwrap()));
        }
    }
    out
}

/// Every row of the table's loaded version, read file by file (partition value from the log).
fn rows(table: &DeltaTable) -> Vec<Event> {
    let mut out = Vec::new();
    for (day, batch) in file_batches(table) {
        let col = |name: &str| batch.column_by_name(name).unwrap().clone();
        let ids = col("eventId");
        let names = col("eventName");
        let times = col("eventTime");
        let devices = col("device_id");
        let amounts = col("amount");
        let (ids, names, devices) = (
            ids.as_string::<i32>(),
            names.as_string::<i32>(),
            devices.as_string::<i32>(),
        );
        let times = times.as_primitive::<TimestampMicrosecondType>();
        let amounts = amounts.as_primitive::<arrow::datatypes::Float64Type>();
        for i in 0..batch.num_rows() {
            out.push(Event {
                id: ids.value(i).to_owned(),
                name: if names.value(i) == "purchaseEvent" {
                    "purchaseEvent"
                } else {
                    "levelUp"
                },
                micros: times.value(i),
                device: devices.value(i).to_owned(),
                amount: amounts.is_valid(i).then(|| amounts.value(i)),
                day,
            });
        }
    }
    out
}

/// Files of the loaded version that are not on disk.
fn missing_files(table: &DeltaTable) -> usize {
    let root = table.table_url().to_file_path().unwrap();
    let snapshot = table.snapshot().unwrap();
    snapshot
        .log_data()
        .iter()
        .filter(|f| !root.join(f.path().as_ref()).exists())
        .count()
}

async fn history(table: &DeltaTable, limit: usize) -> Vec<deltalake::kernel::CommitInfo> {
    use futures::TryStreamExt as _;
    table.history(Some(limit)).try_collect().await.unwrap()
}

/// The game KPIs over distinct events: events per hour, bookings per hour (sum of amount of
/// purchases, in cents), daily active devices.
#[derive(Debug, PartialEq, Eq)]
struct Kpis {
    events_per_hour: BTreeMap<i64, usize>,
    bookings_per_hour: BTreeMap<i64, i64>,
    daily_active_devices: BTreeMap<i32, usize>,
}

fn kpis(rows: &[Event]) -> Kpis {
    let mut distinct: BTreeMap<&str, &Event> = BTreeMap::new();
    for row in rows {
        distinct.entry(&row.id).or_insert(row);
    }
    let mut kpis = Kpis {
        events_per_hour: BTreeMap::new(),
        bookings_per_hour: BTreeMap::new(),
        daily_active_devices: BTreeMap::new(),
    };
    let mut devices: BTreeMap<i32, BTreeSet<&str>> = BTreeMap::new();
    for e in distinct.values() {
        let hour = e.micros / 3_600_000_000;
        *kpis.events_per_hour.entry(hour).or_default() += 1;
        if e.name == "purchaseEvent" {
            *kpis.bookings_per_hour.entry(hour).or_default() += (e.amount.unwrap() * 100.0).round() as i64;
        }
        devices.entry(e.day).or_default().insert(&e.device);
    }
    kpis.daily_active_devices = devices.into_iter().map(|(d, s)| (d, s.len())).collect();
    kpis
}

fn sorted(mut rows: Vec<Event>) -> Vec<Event> {
    rows.sort_by(|a, b| (&a.id, a.day).cmp(&(&b.id, b.day)));
    rows
}

/// A new, empty table of [`spec`] in `dir`, and its URI.
async fn new_table(dir: &tempfile::TempDir) -> (String, DeltaTable) {
    let uri = dir.path().join("t").to_str().unwrap().to_owned();
    let table = open_or_create(&uri, &spec(), &StorageConfig::default()).await.unwrap();
    (uri, table)
}

fn today() -> i32 {
    (Utc::now().date_naive() - chrono::NaiveDate::from_ymd_opt(1970, 1, 1).unwrap()).num_days() as i32
}

/// 500 commits of 12 events over three closed days, every tenth commit resending three events of
/// an earlier one (as retries do), and 5 commits into today's (open) partition.
async fn build_table(uri: &str) -> DeltaTable {
    let mut table = open_or_create(uri, &spec(), &StorageConfig::default()).await.unwrap();
    let mut n = 0u64;
    let mut sent: Vec<Event> = Vec::new();
    for commit in 0..500u64 {
        let mut events: Vec<Event> = (0..12)
            .map(|i| {
                n += 1;
                event(n, DAY + ((commit + i) % 3) as i32)
            })
            .collect();
        sent.extend(events.iter().cloned());
        if commit % 10 == 9 {
            // Retries: events of an earlier commit again, the same rows.
            let earlier = sent.len() - 40;
            events.extend(sent[earlier..earlier + 3].iter().cloned());
        }
        if commit.is_multiple_of(100) {
            events.push(event(1_000_000 + commit, today()));
        }
        append(uri, &mut table, &format!("commit-{commit}"), &events).await;
    }
    table
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_of_500_small_commits_keeps_every_event_once() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("game_events").to_str().unwrap().to_owned();
    let mut table = build_table(&uri).await;
    let before_version = table.version().unwrap();
    let before = rows(&table);
    let before_files = file_stats(&table).unwrap().files;
    assert!(before_files >= 1500, "{before_files} files");
    let distinct_before: BTreeSet<&str> = before.iter().map(|e| e.id.as_str()).collect();
    assert!(
        before.len() > distinct_before.len(),
        "the table has duplicates to remove"
    );

    // Nothing is closed within the grace period.
    let options = CompactOptions {
        grace: TimeDelta::days(365 * 100),
        dedup_key: Some("eventId".into()),
        ..CompactOptions::default()
    };
    let plan = plan_compaction(&uri, &table, &options).unwrap();
    assert!(plan.partitions.is_empty(), "{plan:?}");
    assert_eq!(plan.date_column.as_deref(), Some("eventDate"));

    let options = CompactOptions {
        dedup_key: Some("eventId".into()),
        ..CompactOptions::default()
    };
    let report = compact(&uri, &mut table, &options, &()).await.unwrap();
    assert_eq!(report.partitions_planned, 3, "today's partition is open");
    assert!(report.conflicts.is_empty() && !report.stopped_early, "{report:?}");
    assert_eq!(report.duplicates(), (before.len() - distinct_before.len()) as u64);

    let after = rows(&table);
    let after_files = file_stats(&table).unwrap().files;
    assert!(
        before_files >= 50 * after_files,
        "{before_files} -> {after_files} files"
    );
    assert_eq!(report.files_after as u64, after_files);
    // Every event once: the distinct events are the rows now, and no row is new.
    let distinct_after: BTreeSet<&str> = after.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(after.len(), distinct_after.len(), "duplicates are gone");
    assert_eq!(distinct_after, distinct_before);
    let mut first: HashMap<&str, &Event> = HashMap::new();
    for e in &before {
        first.entry(&e.id).or_insert(e);
    }
    let expected: Vec<Event> = sorted(first.values().map(|e| (*e).clone()).collect());
    assert_eq!(sorted(after.clone()), expected);
    assert_eq!(kpis(&after), kpis(&before));
    // Today's partition was not touched.
    let today_files = table
        .snapshot()
        .unwrap()
        .log_data()
        .iter()
        .filter(|f| f.partition_values_map()["eventDate"].as_deref() != Some("2022-01-08"))
        .filter(|f| !["2022-01-09", "2022-01-10"].contains(&f.partition_values_map()["eventDate"].as_deref().unwrap()))
        .count();
    assert_eq!(today_files, 5);

    // A second run has nothing left to do.
    let again = compact(&uri, &mut table, &options, &()).await.unwrap();
    assert_eq!((again.partitions_planned, again.bins.len()), (0, 0), "{again:?}");

    // VACUUM within the retention keeps the removed files: time travel still works.
    let refused = vacuum(
        &uri,
        &mut table,
        &VacuumOptions {
            retention: TimeDelta::hours(1),
            ..VacuumOptions::default()
        },
    )
    .await
    .unwrap_err();
    assert!(
        matches!(refused, MaintenanceError::RetentionTooShort { hours: 1, .. }),
        "{refused}"
    );
    let vacuumed = vacuum(&uri, &mut table, &VacuumOptions::default()).await.unwrap();
    assert!(vacuumed.files.is_empty(), "{vacuumed:?}");
    let mut old = open_table(&uri, &StorageConfig::default()).await.unwrap();
    old.load_version(before_version).await.unwrap();
    assert_eq!(missing_files(&old), 0);
    assert_eq!(sorted(rows(&old)), sorted(before.clone()));

    // Forced to no retention, VACUUM deletes them: the version before compaction is gone (so the
    // check above would have failed had the files been deleted).
    let forced = vacuum(
        &uri,
        &mut table,
        &VacuumOptions {
            retention: TimeDelta::zero(),
            force: true,
            ..VacuumOptions::default()
        },
    )
    .await
    .unwrap();
    assert!(forced.files.len() as u64 >= before_files - 5, "{}", forced.files.len());
    assert!(
        missing_files(&old) as u64 >= before_files - 5,
        "files of the old version are deleted"
    );
    assert_eq!(sorted(rows(&table)), expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_duplicates_and_a_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, mut table) = new_table(&dir).await;
    for i in 0..6u64 {
        let events: Vec<Event> = (0..5).map(|j| event(i * 5 + j, DAY + (i % 2) as i32)).collect();
        append(&uri, &mut table, &format!("c{i}"), &events).await;
    }
    let options = CompactOptions {
        dedup_key: Some("eventId".into()),
        ..CompactOptions::default()
    };
    // A deadline already passed: nothing starts, nothing changes.
    let stopped = compact(
        &uri,
        &mut table,
        &CompactOptions {
            stop_at: Some(std::time::Instant::now()),
            ..options.clone()
        },
        &(),
    )
    .await
    .unwrap();
    assert!(stopped.stopped_early && stopped.bins.is_empty(), "{stopped:?}");
    assert_eq!(stopped.bins_planned, 2);
    let version = table.version();
    let report = compact(&uri, &mut table, &options, &()).await.unwrap();
    assert_eq!((report.bins.len(), report.duplicates()), (2, 0));
    assert_eq!(table.version().unwrap(), version.unwrap() + 2);
    // Without duplicates, compaction is no data change.
    let commits = history(&table, 2).await;
    assert!(
        commits.iter().all(|c| c.operation.as_deref() == Some("OPTIMIZE")),
        "{commits:?}"
    );
    assert_eq!(file_stats(&table).unwrap().files, 2);

    // A retry lands after compaction: one late file with a duplicate and a new event. The
    // partition is rewritten (the late file is not deduplicated yet), dropping the duplicate.
    append(&uri, &mut table, "late", &[event(0, DAY), event(100, DAY)]).await;
    let late = compact(&uri, &mut table, &options, &()).await.unwrap();
    assert_eq!((late.bins.len(), late.duplicates()), (1, 1), "{late:?}");
    let commits = history(&table, 1).await;
    assert_eq!(
        commits[0].operation.as_deref(),
        Some("DELETE"),
        "rows were removed: a data change"
    );
    let all = rows(&table);
    let ids: BTreeSet<&str> = all.iter().map(|e| e.id.as_str()).collect();
    assert_eq!((all.len(), ids.len()), (31, 31));
    let after = compact(&uri, &mut table, &options, &()).await.unwrap();
    assert_eq!(after.bins_planned, 0, "converged: {after:?}");
}

/// Memory for a few dozen keys: duplicates are found in many passes, and the same ones as in one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicates_found_in_passes_within_a_small_memory() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, mut table) = new_table(&dir).await;
    // 400 events in 8 appends, then a resend of every fifth in a later append.
    for i in 0..8u64 {
        let events: Vec<Event> = (0..50).map(|j| event(i * 50 + j, DAY)).collect();
        append(&uri, &mut table, &format!("a{i}"), &events).await;
    }
    let resent: Vec<Event> = (0..400).step_by(5).map(|n| event(n, DAY)).collect();
    append(&uri, &mut table, "resent", &resent).await;
    let options = CompactOptions {
        dedup_key: Some("eventId".into()),
        dedup_memory: 1 << 10,
        target_file_size: 1 << 30,
        ..CompactOptions::default()
    };
    let report = compact(&uri, &mut table, &options, &()).await.unwrap();
    assert_eq!(report.duplicates(), 80, "{report:?}");
    let ids: BTreeSet<String> = rows(&table).into_iter().map(|e| e.id).collect();
    assert_eq!((rows(&table).len(), ids.len()), (400, 400));

    // A late file into the compacted (tagged) partition: its copies go, its new event stays.
    let late: Vec<Event> = (395..405).map(|n| event(n, DAY)).collect();
    append(&uri, &mut table, "late", &late).await;
    let report = compact(&uri, &mut table, &options, &()).await.unwrap();
    assert_eq!(report.duplicates(), 5, "{report:?}");
    assert_eq!(rows(&table).len(), 405);
}

/// The backfill's lookup of sources older than the `txn` retention goes by when rows were first
/// written: compaction rewrites files with a new modification time, and its files must still
/// count as old.
#[tokio::test]
async fn compacted_files_keep_when_their_rows_were_first_written() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, mut table) = new_table(&dir).await;
    append(&uri, &mut table, "a", &[event(1, DAY), event(2, DAY)]).await;
    append(&uri, &mut table, "b", &[event(3, DAY)]).await;
    let written = chrono::Utc::now().timestamp_millis() + 500;
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    let report = compact(&uri, &mut table, &CompactOptions::default(), &())
        .await
        .unwrap();
    assert_eq!(report.files_added(), 1, "{report:?}");
    let ids = crate::sources::column_values_in_files_before(&uri, &table, "eventId", written)
        .await
        .unwrap();
    let want: std::collections::HashSet<String> = [1, 2, 3].iter().map(|n| event(*n, DAY).id).collect();
    assert_eq!(ids, want, "the compacted file's rows were written before the cutoff");
    // Nothing was written before the table existed.
    let none = crate::sources::column_values_in_files_before(&uri, &table, "eventId", 0)
        .await
        .unwrap();
    assert!(none.is_empty());
}

#[tokio::test]
async fn a_copy_sent_again_after_midnight_goes_with_the_day_before() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, mut table) = new_table(&dir).await;
    // An event late on one day, and the client's resend of it after midnight (a later time, so
    // the next day's partition), beside an event of that day and one two days later.
    let first = Event {
        micros: i64::from(DAY + 1) * MICROS_PER_DAY - 1_000_000,
        ..event(1, DAY)
    };
    let resent = Event {
        micros: i64::from(DAY + 1) * MICROS_PER_DAY + 1_000_000,
        day: DAY + 1,
        ..first.clone()
    };
    let late = Event {
        day: DAY + 3,
        micros: i64::from(DAY + 3) * MICROS_PER_DAY,
        ..first.clone()
    };
    append(&uri, &mut table, "a", std::slice::from_ref(&first)).await;
    append(&uri, &mut table, "b", &[resent, event(2, DAY + 1)]).await;
    append(&uri, &mut table, "c", std::slice::from_ref(&late)).await;
    let options = CompactOptions {
        dedup_key: Some("eventId".into()),
        ..CompactOptions::default()
    };
    let report = compact(&uri, &mut table, &options, &()).await.unwrap();
    assert_eq!(report.duplicates(), 1, "{report:?}");
    let ids_by_day: BTreeSet<(i32, String)> = rows(&table).into_iter().map(|e| (e.day, e.id)).collect();
    assert_eq!(
        ids_by_day,
        BTreeSet::from([
            (DAY, first.id.clone()),
            (DAY + 1, event(2, DAY + 1).id),
            // Two days later is not the day after: kept (the window is the day before).
            (DAY + 3, first.id.clone()),
        ])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_compactions_and_appends_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, mut table) = new_table(&dir).await;
    for i in 0..40u64 {
        let events: Vec<Event> = (0..3).map(|j| event(i * 3 + j, DAY)).collect();
        append(&uri, &mut table, &format!("c{i}"), &events).await;
    }
    let expected = sorted(rows(&table));
    // Two maintenance runs and an appender at once, on the same partition.
    let runs: Vec<_> = (0..2)
        .map(|_| {
            let uri = uri.clone();
            tokio::spawn(async move {
                let mut table = open_table(&uri, &StorageConfig::default()).await.unwrap();
                compact(&uri, &mut table, &CompactOptions::default(), &()).await
            })
        })
        .collect();
    let appender = {
        let uri = uri.clone();
        tokio::spawn(async move {
            let mut table = open_table(&uri, &StorageConfig::default()).await.unwrap();
            for i in 0..5u64 {
                append(&uri, &mut table, &format!("late-{i}"), &[event(1000 + i, DAY)]).await;
            }
        })
    };
    let mut committed = 0;
    for run in runs {
        let report = run.await.unwrap().unwrap();
        committed += report.bins.len();
    }
    appender.await.unwrap();
    assert!(committed >= 1);
    let mut table = open_table(&uri, &StorageConfig::default()).await.unwrap();
    let mut want = expected.clone();
    want.extend((0..5).map(|i| event(1000 + i, DAY)));
    assert_eq!(sorted(rows(&table)), sorted(want.clone()), "every row exactly once");
    // What is left is picked up by the next run.
    compact(&uri, &mut table, &CompactOptions::default(), &())
        .await
        .unwrap();
    assert_eq!(file_stats(&table).unwrap().files, 1);
    assert_eq!(sorted(rows(&table)), sorted(want));
}

#[tokio::test]
async fn unpartitioned_tables_go_by_file_age_and_checkpoints_discovery() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let uri = lake.join("rejects").to_str().unwrap().to_owned();
    let mut spec = spec();
    spec.partition_columns.clear();
    let mut table = open_or_create(&uri, &spec, &StorageConfig::default()).await.unwrap();
    for i in 0..4u64 {
        append(&uri, &mut table, &format!("c{i}"), &[event(i, DAY)]).await;
    }
    // Young files stay; with no grace they are all closed.
    let young = compact(&uri, &mut table, &CompactOptions::default(), &())
        .await
        .unwrap();
    assert_eq!(young.partitions_planned, 0);
    let options = CompactOptions {
        grace: TimeDelta::zero(),
        target_file_size: 1 << 20,
        ..CompactOptions::default()
    };
    let plan = plan_compaction(&uri, &table, &options).unwrap();
    assert_eq!(
        (plan.date_column.clone(), plan.partitions[0].label.as_str()),
        (None, "(unpartitioned)")
    );
    let report = compact(&uri, &mut table, &options, &()).await.unwrap();
    assert_eq!((report.files_before, report.files_after), (4, 1));

    // A checkpoint of the current version, once.
    let first = checkpoint(&uri, &mut table, true).await.unwrap();
    assert!(first.created);
    assert_eq!(first.version, table.version().unwrap());
    let second = checkpoint(&uri, &mut table, true).await.unwrap();
    assert!(!second.created);

    // The dedup key must be a data column.
    let bad = plan_compaction(
        &uri,
        &table,
        &CompactOptions {
            dedup_key: Some("nope".into()),
            ..CompactOptions::default()
        },
    )
    .unwrap_err();
    assert!(
        bad.to_string().contains("deduplication key \"nope\": no such column"),
        "{bad}"
    );

    // Every table under a prefix, and nothing else.
    open_or_create(
        lake.join("b-table").to_str().unwrap(),
        &self::spec(),
        &StorageConfig::default(),
    )
    .await
    .unwrap();
    std::fs::create_dir_all(lake.join("not-a-table/x")).unwrap();
    let found = discover_tables(lake.to_str().unwrap(), &StorageConfig::default())
        .await
        .unwrap();
    let lake = lake.to_str().unwrap();
    assert_eq!(found, vec![format!("{lake}/b-table"), format!("{lake}/rejects")]);

    // One pass of everything.
    let report = maintain(&uri, &StorageConfig::default(), &MaintenanceOptions::all(options), &())
        .await
        .unwrap();
    assert!(report.skipped.is_empty() && report.checkpoint.is_some() && report.vacuum.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settling_packs_the_small_files_writers_left_and_keeps_every_row() {
    use crate::maintenance::{DEDUP_TAG, Settle, WRITTEN_SINCE_TAG, is_packing};
    let dir = tempfile::tempdir().unwrap();
    let (uri, mut delta) = new_table(&dir).await;
    // 30 small commits into today's partition, every fifth resending an event (a duplicate row),
    // and 10 late ones into a closed day.
    for i in 0..30u64 {
        let mut events = vec![event(i, today())];
        if i % 5 == 4 {
            events.push(event(i - 1, today()));
        }
        append(&uri, &mut delta, &format!("open-{i}"), &events).await;
    }
    for i in 0..10u64 {
        append(&uri, &mut delta, &format!("late-{i}"), &[event(100 + i, DAY)]).await;
    }
    let before = sorted(rows(&delta));
    let mut table = crate::table::Table::open(&uri, &StorageConfig::default())
        .await
        .unwrap();

    // Once the grace is over, every partition is closed and every file the maintenance pass's.
    let later = CompactOptions {
        now: Utc::now() + TimeDelta::days(3),
        ..Settle::after(2).options(None)
    };
    assert_eq!(table.plan_compaction(&later).unwrap().files(), 0);

    // Fewer small files than the threshold: nothing to do.
    assert!(table.settle(&Settle::after(41), None).await.unwrap().is_none());
    assert_eq!(table.file_stats().unwrap().files, 40);

    // The open partition's files and the late ones of the closed day, one file each.
    let report = table.settle(&Settle::after(40), None).await.unwrap().expect("packed");
    assert_eq!((report.files_removed(), report.files_added()), (40, 2), "{report:?}");
    assert_eq!(report.duplicates(), 0, "a packing does not deduplicate");
    assert_eq!(file_stats(table.delta()).unwrap().files, 2);
    assert_eq!(
        sorted(rows(table.delta())),
        before,
        "the same rows, duplicates included"
    );
    let last = history(table.delta(), 2).await;
    assert!(
        last.iter()
            .all(|c| c.operation.as_deref() == Some("OPTIMIZE") && is_packing(c)),
        "{last:?}"
    );
    let version = table.delta().version().unwrap();
    let files: Vec<serde_json::Value> = [version - 1, version]
        .iter()
        .flat_map(|v| {
            let log = dir.path().join(format!("t/_delta_log/{v:020}.json"));
            std::fs::read_to_string(log)
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .map(|l| serde_json::from_str::<serde_json::Value>(&l).unwrap())
        .filter_map(|a| a.get("add").or_else(|| a.get("remove")).cloned())
        .collect();
    assert_eq!(files.len(), 42);
    assert!(
        files.iter().all(|f| f["dataChange"] == false),
        "packing changes no row: {files:?}"
    );
    #[allow(deprecated)] // The only accessor of a file's tags.
    let tags: Vec<_> = table
        .delta()
        .snapshot()
        .unwrap()
        .log_data()
        .iter()
        .map(|f| f.add_action().tags.clone().unwrap_or_default())
        .collect();
    for tags in &tags {
        assert!(tags.contains_key(WRITTEN_SINCE_TAG), "{tags:?}");
        assert!(
            !tags.contains_key(DEDUP_TAG),
            "a packed file is not deduplicated: {tags:?}"
        );
    }

    // One file per partition now: nothing more to pack.
    assert!(table.settle(&Settle::after(2), None).await.unwrap().is_none());

    // Maintenance compacts the closed day into a deduplicated file: small and new, but packing
    // leaves it alone and packs only the later files beside it.
    let dedup = CompactOptions {
        dedup_key: Some("eventId".into()),
        ..CompactOptions::default()
    };
    let closed = table.compact(&dedup, &()).await.unwrap();
    assert_eq!((closed.files_removed(), closed.files_added()), (1, 1), "{closed:?}");
    let deduplicated = table_paths(table.delta());
    delta.update_incremental(None).await.unwrap();
    for i in 0..2u64 {
        append(&uri, &mut delta, &format!("later-{i}"), &[event(200 + i, DAY)]).await;
    }
    table.refresh().await.unwrap();
    let report = table.settle(&Settle::after(2), None).await.unwrap().expect("packed");
    assert_eq!((report.files_removed(), report.files_added()), (2, 1), "{report:?}");
    let now = table_paths(table.delta());
    assert_eq!(now.len(), 3);
    assert!(deduplicated.is_subset(&now), "{deduplicated:?} {now:?}");

    // Once today has closed, maintenance removes its duplicates from the packed file.
    let options = CompactOptions {
        now: Utc::now() + TimeDelta::days(3),
        ..dedup
    };
    let closed = table.compact(&options, &()).await.unwrap();
    assert_eq!(closed.duplicates(), 6, "{closed:?}");
    let after = rows(table.delta());
    let distinct: BTreeSet<&str> = after.iter().map(|e| e.id.as_str()).collect();
    let expected = before.len() + 2 - 6;
    assert_eq!((after.len(), distinct.len()), (expected, expected));
}

/// The paths of the active files of the table's loaded version.
fn table_paths(table: &DeltaTable) -> BTreeSet<String> {
    table
        .snapshot()
        .unwrap()
        .log_data()
        .iter()
        .map(|f| f.path().into_owned())
        .collect()
}

/// The schema of [`grown_spec`] before it grew: events with a struct of parameters.
fn params_spec(grown: bool) -> TableSpec {
    use arrow::datatypes::Fields;
    let mut params = vec![Field::new("device_id", DataType::Utf8, true)];
    let mut fields = vec![Field::new("eventId", DataType::Utf8, false)];
    if grown {
        // A typed parameter added at the end of the struct, and a column added to the table.
        params.push(Field::new("level", DataType::Int32, true));
        fields.push(Field::new("gameId", DataType::Utf8, true));
    }
    fields.push(Field::new("eventParams", DataType::Struct(Fields::from(params)), true));
    fields.push(Field::new("eventDate", DataType::Date32, false));
    TableSpec::new("game_events", Arc::new(Schema::new(fields)), &["eventDate"])
}

/// Rows `(eventId, gameId)` of `spec`'s schema in the closed day [`DAY`].
fn params_batch(spec: &TableSpec, rows: &[(&str, Option<&str>)]) -> RecordBatch {
    use arrow::array::{ArrayRef, Int32Array, StructArray};
    let DataType::Struct(params) = spec.schema.field_with_name("eventParams").unwrap().data_type().clone() else {
        unreachable!()
    };
    let mut struct_columns: Vec<ArrayRef> = vec![Arc::new(StringArray::from_iter(
        rows.iter().map(|(id, _)| Some(format!("device-{id}"))),
    ))];
    if params.len() > 1 {
        struct_columns.push(Arc::new(Int32Array::from_iter_values(rows.iter().map(|_| 7))));
    }
    let mut columns: Vec<ArrayRef> = vec![Arc::new(StringArray::from_iter_values(rows.iter().map(|(id, _)| *id)))];
    if spec.schema.field_with_name("gameId").is_ok() {
        columns.push(Arc::new(StringArray::from_iter(rows.iter().map(|(_, game)| *game))));
    }
    columns.push(Arc::new(StructArray::new(params, struct_columns, None)));
    columns.push(Arc::new(Date32Array::from_iter_values(rows.iter().map(|_| DAY))));
    RecordBatch::try_new(Arc::clone(&spec.schema), columns).unwrap()
}

/// A table that grew a column and a struct field after files were written (what a release that
/// adds a typed parameter does, and what `ALTER TABLE ... ADD COLUMNS` does): compaction with
/// deduplication reads the older files into the current schema, with the new column and field
/// null; files deduplicated by `eventId` count as deduplicated by `gameId+eventId`, and a key
/// column a file lacks reads as null.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_reads_files_from_before_the_schema_grew() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("t").to_str().unwrap().to_owned();
    let storage = StorageConfig::default();
    let old = params_spec(false);
    let mut delta = open_or_create(&uri, &old, &storage).await.unwrap();
    // Before the change: a file deduplicated by `eventId` (its duplicate removed), then two
    // small files of new events.
    crate::append::commit_batch(&uri, &mut delta, "a", params_batch(&old, &[("e1", None), ("e2", None)])).await;
    crate::append::commit_batch(&uri, &mut delta, "b", params_batch(&old, &[("e2", None), ("e3", None)])).await;
    let by_event_id = CompactOptions {
        grace: TimeDelta::zero(),
        dedup_key: Some("eventId".into()),
        ..CompactOptions::default()
    };
    let first = compact(&uri, &mut delta, &by_event_id, &()).await.unwrap();
    assert_eq!(first.duplicates(), 1);
    crate::append::commit_batch(&uri, &mut delta, "c", params_batch(&old, &[("e4", None)])).await;

    // The change: the writers' spec grew.
    let grown = params_spec(true);
    let mut delta = open_or_create(&uri, &grown, &storage).await.unwrap();
    crate::append::commit_batch(
        &uri,
        &mut delta,
        "d",
        params_batch(&grown, &[("e5", Some("g")), ("e6", Some("g"))]),
    )
    .await;
    crate::append::commit_batch(&uri, &mut delta, "e", params_batch(&grown, &[("e5", Some("g"))])).await;

    let by_game_and_event = CompactOptions {
        grace: TimeDelta::zero(),
        dedup_key: Some("gameId+eventId".into()),
        ..CompactOptions::default()
    };
    let report = maintain(&uri, &storage, &MaintenanceOptions::all(by_game_and_event), &())
        .await
        .unwrap();
    assert!(report.failed.is_empty(), "{:?}", report.failure());
    let compaction = report.compaction.unwrap();
    assert_eq!(compaction.duplicates(), 1, "the second e5 of game g");
    assert_eq!(compaction.files_after, 1);

    // Every event once, in the grown schema, the new column and field null where they were not
    // written.
    delta.update_incremental(None).await.unwrap();
    let mut seen = BTreeMap::new();
    for (_, batch) in file_batches(&delta) {
        let ids = batch.column_by_name("eventId").unwrap().as_string::<i32>().clone();
        let games = batch.column_by_name("gameId").unwrap().as_string::<i32>().clone();
        let params = batch.column_by_name("eventParams").unwrap().as_struct().clone();
        let levels = params.column_by_name("level").unwrap().clone();
        for i in 0..batch.num_rows() {
            let game = games.is_valid(i).then(|| games.value(i).to_owned());
            let level = levels.is_valid(i);
            *seen.entry((ids.value(i).to_owned(), game, level)).or_insert(0) += 1;
        }
    }
    let want: BTreeMap<_, _> = [
        ("e1", None, false),
        ("e2", None, false),
        ("e3", None, false),
        ("e4", None, false),
        ("e5", Some("g"), true),
        ("e6", Some("g"), true),
    ]
    .into_iter()
    .map(|(id, game, level)| ((id.to_owned(), game.map(str::to_owned), level), 1))
    .collect();
    assert_eq!(seen, want);
}

/// A step that fails does not keep the others from running: a compaction that cannot run (a
/// deduplication key naming no column) still leaves the table checkpointed and vacuumed, and the
/// report names the step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_compaction_leaves_checkpoint_and_vacuum_to_run() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, mut delta) = new_table(&dir).await;
    for i in 0..3u64 {
        append(&uri, &mut delta, &format!("s{i}"), &[event(i, DAY)]).await;
    }
    let report = maintain(
        &uri,
        &StorageConfig::default(),
        &MaintenanceOptions::all(CompactOptions {
            grace: TimeDelta::zero(),
            dedup_key: Some("nope".into()),
            ..CompactOptions::default()
        }),
        &(),
    )
    .await
    .unwrap();
    assert_eq!(report.failed.len(), 1, "{:?}", report.failed);
    assert_eq!(report.failed[0].0, "compaction");
    assert!(report.failure().unwrap().contains("nope"), "{:?}", report.failure());
    assert!(report.compaction.is_none());
    assert_eq!(report.checkpoint.map(|c| c.version), Some(3));
    assert!(report.vacuum.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erasure_with_appends_and_a_compaction_at_once_removes_only_its_ids() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, mut table) = new_table(&dir).await;
    for i in 0..30u64 {
        let events: Vec<Event> = (0..10).map(|j| event(i * 10 + j, DAY + (i % 3) as i32)).collect();
        append(&uri, &mut table, &format!("c{i}"), &events).await;
    }
    let before = sorted(rows(&table));
    let forgotten = ["device-3", "device-17", "device-36"];
    let erasure = crate::erase::Erasure::new(forgotten).equals("device_id");
    let eraser = {
        let (uri, erasure) = (uri.clone(), erasure.clone());
        tokio::spawn(async move {
            let mut table = crate::table::Table::open(&uri, &StorageConfig::default())
                .await
                .unwrap();
            table.erase(&erasure, &crate::commit::Retry::default()).await
        })
    };
    let compaction = {
        let uri = uri.clone();
        tokio::spawn(async move {
            let mut table = open_table(&uri, &StorageConfig::default()).await.unwrap();
            compact(&uri, &mut table, &CompactOptions::default(), &()).await
        })
    };
    let appender = {
        let uri = uri.clone();
        tokio::spawn(async move {
            let mut table = open_table(&uri, &StorageConfig::default()).await.unwrap();
            // Events of other devices only: device-{n % 37} for n = 1000 + 37k + 1.
            for i in 0..5u64 {
                append(&uri, &mut table, &format!("late-{i}"), &[event(1001 + 37 * i, DAY)]).await;
            }
        })
    };
    let report = eraser.await.unwrap().unwrap();
    compaction.await.unwrap().unwrap();
    appender.await.unwrap();

    let mut want: Vec<Event> = before
        .iter()
        .filter(|e| !forgotten.contains(&e.device.as_str()))
        .cloned()
        .collect();
    want.extend((0..5).map(|i| event(1001 + 37 * i, DAY)));
    let mut table = crate::table::Table::open(&uri, &StorageConfig::default())
        .await
        .unwrap();
    assert_eq!(
        sorted(rows(table.delta())),
        sorted(want),
        "every other row once, none of theirs"
    );
    let removed = (before.len()
        - before
            .iter()
            .filter(|e| !forgotten.contains(&e.device.as_str()))
            .count()) as u64;
    assert_eq!(report.rows_removed, removed);
    assert!(
        report.files.len() < report.files_scanned,
        "only files holding them are rewritten"
    );

    // Until purged, the rewritten files still hold the rows on storage; then nothing does.
    let scan = table.scan_folder(&erasure).await.unwrap();
    assert!(!scan.holding.is_empty());
    let purge = table.purge(&erasure).await.unwrap();
    assert!(purge.deleted.len() >= report.files.len());
    assert!(purge.kept.is_empty(), "{:?}", purge.kept);
    assert!(purge.after.holding.is_empty(), "{:?}", purge.after.holding);
    assert_eq!(sorted(rows(table.delta())).len(), before.len() - removed as usize + 5);
    // Erasing again finds nothing.
    let again = table.erase(&erasure, &crate::commit::Retry::default()).await.unwrap();
    assert_eq!((again.rows_removed, again.version), (0, None));
}

#[tokio::test]
async fn retention_drops_the_partitions_past_it_and_deletes_their_files() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, mut table) = new_table(&dir).await;
    let today = today();
    // Ten days up to today, two commits each.
    for day in (today - 9)..=today {
        for c in 0..2u64 {
            let events: Vec<Event> = (0..5)
                .map(|j| event(u64::try_from(day).unwrap() * 10 + c * 5 + j, day))
                .collect();
            append(&uri, &mut table, &format!("d{day}-{c}"), &events).await;
        }
    }
    let before = rows(&table);
    let old_files: Vec<std::path::PathBuf> = table
        .snapshot()
        .unwrap()
        .log_data()
        .iter()
        .map(|v| dir.path().join("t").join(v.path().as_ref()))
        .collect();
    let options = MaintenanceOptions {
        retain_days: Some(7),
        compact: None,
        checkpoint: false,
        cleanup_logs: false,
        vacuum: None,
        stop_at: None,
    };
    let report = maintain(&uri, &StorageConfig::default(), &options, &()).await.unwrap();
    let retention = report.retention.unwrap();
    // Seven days before today is the oldest kept: the two days before it go.
    assert_eq!(retention.partitions.len(), 2, "{retention:?}");
    assert_eq!(retention.rows, 20);
    assert_eq!(retention.purged, 4);
    let table = open_table(&uri, &StorageConfig::default()).await.unwrap();
    let want: Vec<Event> = before.into_iter().filter(|e| e.day >= today - 7).collect();
    assert_eq!(want.len(), 80);
    assert_eq!(sorted(rows(&table)), sorted(want), "the newer days intact");
    let gone = old_files.iter().filter(|f| !f.exists()).count();
    assert_eq!(gone, 4, "the dropped partitions' files are deleted at once");
    // Again: nothing more to drop.
    let again = maintain(&uri, &StorageConfig::default(), &options, &()).await.unwrap();
    assert_eq!(again.retention.unwrap().files, 0);
}

#[test]
fn compaction_leaves_a_quarter_of_the_pass_to_the_other_steps() {
    use std::time::{Duration, Instant};

    use super::compaction_stop_at;

    let now = Instant::now();
    let pass = now + Duration::from_secs(400);
    assert_eq!(
        compaction_stop_at(None, Some(pass), now),
        Some(now + Duration::from_secs(300))
    );
    let own = now + Duration::from_secs(100);
    assert_eq!(compaction_stop_at(Some(own), Some(pass), now), Some(own));
    assert_eq!(compaction_stop_at(Some(own), None, now), Some(own));
    assert_eq!(compaction_stop_at(None, None, now), None);
    // A pass already over leaves compaction no time either.
    assert_eq!(compaction_stop_at(None, Some(now), now), Some(now));
}

/// Looking for records as they land: each call reads only the files added since the last, and a
/// packing that rewrote the files it read counts their rows once, not twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_present_reads_each_new_file_once_and_follows_a_packing() {
    use crate::erase::Scanned;
    use crate::maintenance::Settle;
    let dir = tempfile::tempdir().unwrap();
    let (uri, mut delta) = new_table(&dir).await;
    for i in 0..10u64 {
        append(&uri, &mut delta, &format!("open-{i}"), &[event(i, today())]).await;
    }
    let mut table = crate::table::Table::open(&uri, &StorageConfig::default())
        .await
        .unwrap();
    let wanted = [event(3, today()).id, event(12, today()).id];
    let erasure = crate::Erasure::new(wanted.clone()).equals("eventId");
    let today_only = |values: &std::collections::HashMap<String, String>, _: i64| {
        values
            .get("eventDate")
            .is_some_and(|date| *date == Utc::now().date_naive().to_string())
    };
    let mut scanned = Scanned::default();
    let present = table.rows_present(&erasure, today_only, &mut scanned).await.unwrap();
    assert_eq!((present.rows, present.ids.len()), (1, 1));

    // The second record lands, with a resend of the first; then everything is packed into one file.
    append(&uri, &mut delta, "open-12", &[event(12, today()), event(3, today())]).await;
    table.refresh().await.unwrap();
    let present = table.rows_present(&erasure, today_only, &mut scanned).await.unwrap();
    assert_eq!((present.rows, present.ids.len()), (3, 2));
    table.settle(&Settle::after(2), None).await.unwrap().expect("packed");
    assert_eq!(table.file_stats().unwrap().files, 1);
    let present = table.rows_present(&erasure, today_only, &mut scanned).await.unwrap();
    assert_eq!(
        (present.rows, present.ids.len()),
        (3, 2),
        "the packed file, counted once"
    );

    // Files a filter leaves out are not read: a day with no file finds nothing.
    let mut fresh = Scanned::default();
    let none = table
        .rows_present(
            &erasure,
            |_, written| written > Utc::now().timestamp_millis() + 60_000,
            &mut fresh,
        )
        .await
        .unwrap();
    assert_eq!(none, crate::Present::default());
}
