//! The ingestion core on local files: routing per bucket, rejects, exactly once, isolation of bad
//! objects, concurrent ingestors.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use access_log_ingest::{IngestError, Ingestor, ObjectReader, ObjectRef, TableTemplate};
use fixtures::log_lines::{SynthConfig, corpus};
use lake::{StorageConfig, Table};
use s3_access_log::{AccessLogRecord, parse_lines};

fn ingestor(lake: &Path) -> Ingestor {
    let template = TableTemplate::parse("table", &format!("{}/access_logs/{{bucket}}", lake.display())).unwrap();
    let rejects = template.default_rejects();
    Ingestor::new(template, rejects, StorageConfig::default(), ObjectReader::local(), 4)
}

/// Expected rows per bucket and rejects, computed with the parser alone.
fn expected(files: &[Vec<u8>]) -> (HashMap<String, u64>, u64) {
    let mut rows = HashMap::new();
    let mut rejects = 0;
    for data in files {
        for (_, _, parsed) in parse_lines(data) {
            match parsed {
                Ok(AccessLogRecord { bucket: Some(b), .. }) => *rows.entry(b.into_owned()).or_insert(0) += 1,
                _ => rejects += 1,
            }
        }
    }
    (rows, rejects)
}

async fn table_rows(uri: &str) -> u64 {
    Table::open(uri, &StorageConfig::default())
        .await
        .unwrap()
        .file_stats()
        .unwrap()
        .rows
}

fn write_logs(dir: &Path, count: usize, malformed_rate: f64) -> (Vec<ObjectRef>, Vec<Vec<u8>>) {
    let mut objects = Vec::new();
    let mut data = Vec::new();
    for i in 0..count {
        let config = SynthConfig {
            seed: i as u64,
            malformed_rate,
            quirk_rate: 0.1,
            ..SynthConfig::default()
        };
        let bytes = corpus(config, 40_000);
        let path = dir.join(format!("2024-06-01-00-00-{i:02}-LOG"));
        std::fs::write(&path, &bytes).unwrap();
        objects.push(ObjectRef::Local(path));
        data.push(bytes);
    }
    (objects, data)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_land_per_bucket_once_and_rejects_are_kept() {
    let raw = tempfile::tempdir().unwrap();
    let lake = tempfile::tempdir().unwrap();
    let (objects, data) = write_logs(raw.path(), 6, 0.02);
    let (rows, rejects) = expected(&data);
    assert_eq!(rows.len(), 3, "the corpus spans three buckets");
    assert!(rejects > 0);

    let ingestor = ingestor(lake.path());
    let outcomes = ingestor.ingest(&objects, &lake::Retry::default(), &()).await;
    assert_eq!(outcomes.len(), 6);
    let total_rows: u64 = outcomes.iter().map(|(_, r)| r.as_ref().unwrap().rows).sum();
    let total_rejects: u64 = outcomes.iter().map(|(_, r)| r.as_ref().unwrap().rejects).sum();
    assert_eq!(total_rows, rows.values().sum::<u64>());
    assert_eq!(total_rejects, rejects);
    for (bucket, n) in &rows {
        assert_eq!(
            table_rows(&format!("{}/access_logs/{bucket}", lake.path().display())).await,
            *n,
            "{bucket}"
        );
    }
    let rejects_uri = format!("{}/access_logs/_rejects", lake.path().display());
    assert_eq!(table_rows(&rejects_uri).await, rejects);

    // Everything delivered again, by the same ingestor and by a fresh one: nothing is added.
    for again in [
        ingestor.ingest(&objects, &lake::Retry::default(), &()).await,
        self::ingestor(lake.path())
            .ingest(&objects, &lake::Retry::default(), &())
            .await,
    ] {
        for (_, result) in &again {
            let report = result.as_ref().unwrap();
            assert!(report.already_ingested(), "{report:?}");
        }
    }
    for (bucket, n) in &rows {
        assert_eq!(
            table_rows(&format!("{}/access_logs/{bucket}", lake.path().display())).await,
            *n
        );
    }
    assert_eq!(table_rows(&rejects_uri).await, rejects);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_object_fails_alone() {
    let raw = tempfile::tempdir().unwrap();
    let lake = tempfile::tempdir().unwrap();
    let (mut objects, data) = write_logs(raw.path(), 3, 0.0);
    // A gzip object corrupted in the middle: lines before the damage must not land either.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&corpus(
        SynthConfig {
            seed: 99,
            ..SynthConfig::default()
        },
        200_000,
    ))
    .unwrap();
    let mut broken = gz.finish().unwrap();
    let mid = broken.len() / 2;
    broken[mid..mid + 16].fill(0xAA);
    let bad = raw.path().join("broken.gz");
    std::fs::write(&bad, broken).unwrap();
    objects.insert(1, ObjectRef::Local(bad));
    objects.push(ObjectRef::Local(raw.path().join("missing")));

    let outcomes = ingestor(lake.path())
        .ingest(&objects, &lake::Retry::default(), &())
        .await;
    let failed: Vec<&ObjectRef> = outcomes.iter().filter(|(_, r)| r.is_err()).map(|(o, _)| o).collect();
    assert_eq!(failed, vec![&objects[1], &objects[4]]);
    assert!(matches!(outcomes[4].1, Err(IngestError::Read(_))));
    let message = outcomes[1].1.as_ref().unwrap_err().to_string();
    assert!(message.contains("broken.gz"), "{message}");
    let (rows, _) = expected(&data);
    let mut landed = 0;
    for bucket in rows.keys() {
        landed += table_rows(&format!("{}/access_logs/{bucket}", lake.path().display())).await;
    }
    assert_eq!(landed, rows.values().sum::<u64>(), "only the good objects' rows");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_ingestors_of_the_same_objects_write_them_once() {
    let raw = tempfile::tempdir().unwrap();
    let lake = tempfile::tempdir().unwrap();
    let (objects, data) = write_logs(raw.path(), 4, 0.01);
    let (rows, rejects) = expected(&data);
    let a = ingestor(lake.path());
    let b = ingestor(lake.path());
    let retry = lake::Retry::default();
    let (ra, rb) = tokio::join!(a.ingest(&objects, &retry, &()), b.ingest(&objects, &retry, &()));
    for (_, r) in ra.iter().chain(&rb) {
        assert!(r.is_ok(), "{r:?}");
    }
    for (bucket, n) in &rows {
        assert_eq!(
            table_rows(&format!("{}/access_logs/{bucket}", lake.path().display())).await,
            *n,
            "{bucket}"
        );
    }
    assert_eq!(
        table_rows(&format!("{}/access_logs/_rejects", lake.path().display())).await,
        rejects
    );
}

#[tokio::test]
async fn overlong_and_bucketless_lines_are_rejected_with_reasons() {
    let raw = tempfile::tempdir().unwrap();
    let lake = tempfile::tempdir().unwrap();
    let good = corpus(SynthConfig::default(), 1_000);
    let mut data = good.clone();
    data.extend(vec![b'x'; access_log_ingest::ingest::MAX_LINE + 10]);
    data.push(b'\n');
    let bucketless = String::from_utf8(good.split(|&b| b == b'\n').next().unwrap().to_vec())
        .unwrap()
        .replacen(" analytics-lake ", " - ", 1)
        .replacen(" ml-features ", " - ", 1)
        .replacen(" web-assets ", " - ", 1);
    data.extend(bucketless.as_bytes());
    data.push(b'\n');
    data.extend(&good);
    let path = raw.path().join("long");
    std::fs::write(&path, &data).unwrap();
    let outcomes = ingestor(lake.path())
        .ingest(&[ObjectRef::Local(path)], &lake::Retry::default(), &())
        .await;
    let report = outcomes[0].1.as_ref().unwrap();
    let good_lines = good.split(|&b| b == b'\n').filter(|l| !l.is_empty()).count() as u64;
    assert_eq!(report.rows, 2 * good_lines);
    assert_eq!(report.rejects, 2);
}

/// A backfill of objects older than the `txn` retention: their ids have expired, and the
/// `log_object` column still keeps them from being written twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_whose_txn_expired_are_not_written_again() {
    let raw = tempfile::tempdir().unwrap();
    let lake = tempfile::tempdir().unwrap();
    let table = format!("{}/access_logs/old-bucket", lake.path().display());
    let mut spec = access_log_ingest::ingest::access_logs_spec();
    spec.properties.insert(
        "delta.setTransactionRetentionDuration".into(),
        "interval 2 seconds".into(),
    );
    lake::Table::open_or_create(&table, &spec, &StorageConfig::default())
        .await
        .unwrap();
    let mut objects = Vec::new();
    for (i, name) in ["2024-06-01-00-00-00-OLD", "2024-06-01-00-00-01-OLD"]
        .iter()
        .enumerate()
    {
        let config = SynthConfig {
            seed: 70 + i as u64,
            malformed_rate: 0.0,
            buckets: vec!["old-bucket".into()],
            ..SynthConfig::default()
        };
        let path = raw.path().join(name);
        std::fs::write(&path, corpus(config, 20_000)).unwrap();
        objects.push(ObjectRef::Local(path));
    }
    let first = ingestor(lake.path())
        .ingest(&objects[..1], &lake::Retry::default(), &())
        .await;
    assert!(first[0].1.as_ref().is_ok_and(|r| r.rows > 0), "{first:?}");
    let rows = table_rows(&table).await;
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let opened = Table::open(&table, &StorageConfig::default()).await.unwrap();
    assert!(
        !opened.is_committed(&objects[0].uri()).await.unwrap(),
        "the txn id has expired"
    );
    // The function does not search the table's history (each instance would scan it): it refuses
    // an object that may be in it, naming the backfill, and writes nothing.
    let refused = ingestor(lake.path())
        .with_old_object_lookup(false)
        .ingest(&objects[..1], &lake::Retry::default(), &())
        .await;
    let message = refused[0].1.as_ref().unwrap_err().to_string();
    assert!(
        matches!(refused[0].1, Err(IngestError::NeedsBackfill { .. })) && message.contains("lakelog ingest"),
        "{message}"
    );
    assert_eq!(table_rows(&table).await, rows);
    // Both objects again, by a new ingestor: the first is found in the rows, the second is new.
    let again = ingestor(lake.path())
        .ingest(&objects, &lake::Retry::default(), &())
        .await;
    assert!(again[0].1.as_ref().is_ok_and(|r| r.already_ingested()), "{again:?}");
    assert!(again[1].1.as_ref().is_ok_and(|r| r.rows > 0), "{again:?}");
    let second_rows = again[1].1.as_ref().map(|r| r.rows).unwrap_or(0);
    assert_eq!(table_rows(&table).await, rows + second_rows);
}

/// Logs of today, one object per commit: after every fifth, the tables' open partitions are
/// packed, and every line is still there once, however often an object is delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_files_of_today_are_packed_and_every_row_stays_once() {
    let raw = tempfile::tempdir().unwrap();
    let lake = tempfile::tempdir().unwrap();
    let now_micros = chrono::Utc::now().timestamp_micros();
    let mut objects = Vec::new();
    let mut data = Vec::new();
    for i in 0..12 {
        // An hour of today (UTC) that has begun, so that the lines fall in today's partition.
        let start = now_micros - now_micros.rem_euclid(86_400_000_000);
        let config = SynthConfig {
            seed: 100 + i,
            start_micros: start,
            buckets: vec!["today-bucket".into()],
            ..SynthConfig::default()
        };
        let bytes = corpus(config, 4_000);
        let path = raw.path().join(format!("today-{i:02}"));
        std::fs::write(&path, &bytes).unwrap();
        objects.push(ObjectRef::Local(path));
        data.push(bytes);
    }
    let (rows, _) = expected(&data);
    let ingestor = ingestor(lake.path()).with_settle(Some(lake::maintenance::Settle::after(5)));
    for object in &objects {
        for _delivery in 0..2 {
            let outcome = ingestor
                .ingest(std::slice::from_ref(object), &lake::Retry::default(), &())
                .await;
            assert!(outcome[0].1.is_ok(), "{outcome:?}");
        }
    }
    let uri = format!("{}/access_logs/today-bucket", lake.path().display());
    assert_eq!(table_rows(&uri).await, rows["today-bucket"], "every line once");
    let table = Table::open(&uri, &StorageConfig::default()).await.unwrap();
    let history: Vec<_> = futures::TryStreamExt::try_collect(table.delta().history(None))
        .await
        .unwrap();
    let packings = history.iter().filter(|c| lake::maintenance::is_packing(c)).count();
    assert!(packings >= 2, "{packings} packings in {} versions", history.len());
    let files = table.file_stats().unwrap().files;
    assert!(files < 5, "{files} files left after packing");
    // The objects are still known as ingested: packing kept their txn ids.
    for object in &objects {
        let again = ingestor
            .ingest(std::slice::from_ref(object), &lake::Retry::default(), &())
            .await;
        assert!(again[0].1.as_ref().unwrap().already_ingested(), "{again:?}");
    }
    assert_eq!(table_rows(&uri).await, rows["today-bucket"]);
}

/// With a read deadline (the function's), an object that cannot be read in time fails alone and
/// the others of its batch commit: here a pipe that trickles a log line a second, as a stalled or
/// huge object would.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_not_read_in_time_fails_alone() {
    let raw = tempfile::tempdir().unwrap();
    let lake = tempfile::tempdir().unwrap();
    let (mut objects, data) = write_logs(raw.path(), 3, 0.0);
    let pipe = raw.path().join("2024-06-01-00-00-59-SLOW");
    let made = std::process::Command::new("mkfifo").arg(&pipe).status().unwrap();
    assert!(made.success());
    let line = data[0].split_inclusive(|b| *b == b'\n').next().unwrap().to_vec();
    let writer = {
        let pipe = pipe.clone();
        std::thread::spawn(move || {
            let mut file = std::fs::OpenOptions::new().write(true).open(&pipe).unwrap();
            for _ in 0..20 {
                // The reader gave up: the pipe is closed.
                if file.write_all(&line).and_then(|()| file.flush()).is_err() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
        })
    };
    objects.insert(1, ObjectRef::Local(pipe));

    let outcomes = ingestor(lake.path())
        .with_read_deadline(true)
        .ingest(&objects, &lake::Retry::within(std::time::Duration::from_secs(6)), &())
        .await;
    let failed: Vec<&ObjectRef> = outcomes.iter().filter(|(_, r)| r.is_err()).map(|(o, _)| o).collect();
    assert_eq!(failed, vec![&objects[1]]);
    let message = outcomes[1].1.as_ref().unwrap_err().to_string();
    assert!(
        matches!(outcomes[1].1, Err(IngestError::TooSlow { .. })) && message.contains("SLOW"),
        "{message}"
    );
    let (rows, _) = expected(&data);
    let mut landed = 0;
    for bucket in rows.keys() {
        landed += table_rows(&format!("{}/access_logs/{bucket}", lake.path().display())).await;
    }
    assert_eq!(landed, rows.values().sum::<u64>(), "every other object's rows");
    writer.join().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passes_that_run_out_of_time_reach_every_table_in_turn() {
    let raw = tempfile::tempdir().unwrap();
    let lake = tempfile::tempdir().unwrap();
    let (objects, data) = write_logs(raw.path(), 3, 0.02);
    let (rows, _) = expected(&data);
    let ingestor = ingestor(lake.path()).with_staging(true);
    for (object, outcome) in ingestor.ingest(&objects, &lake::Retry::default(), &()).await {
        outcome.unwrap_or_else(|e| panic!("{object}: {e}"));
    }
    // Three buckets and the rejects table wait. A pass whose deadline has passed commits the
    // first table it reaches and starts no other; the next starts where it stopped.
    let mut committed = Vec::new();
    for _ in 0..4 {
        let pass = ingestor
            .commit_staged(&lake::Retry::within(std::time::Duration::ZERO))
            .await
            .unwrap();
        assert_eq!(pass.len(), 1, "{pass:?}");
        let (uri, result) = pass.into_iter().next().unwrap();
        assert!(result.unwrap().version.is_some(), "{uri} had links waiting");
        committed.push(uri);
    }
    committed.sort();
    committed.dedup();
    assert_eq!(committed.len(), 4, "every table was reached once: {committed:?}");
    for (bucket, n) in &rows {
        assert_eq!(
            table_rows(&format!("{}/access_logs/{bucket}", lake.path().display())).await,
            *n
        );
    }
}
