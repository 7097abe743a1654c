//! The view of local tables, read back with the iceberg crate's own readers: after appends, a
//! compaction, an erasure and its purge, a lost view and a view left behind, and many commits.

use std::collections::BTreeSet;

use futures::TryStreamExt;

use super::*;
use crate::append::tests::write_source;
use crate::commit::Retry;
use crate::create::tests::spec;
use crate::erase::Erasure;
use crate::maintenance::CompactOptions;
use crate::storage::StorageConfig;
use crate::table::Table;

async fn table(dir: &tempfile::TempDir) -> Table {
    let uri = dir.path().join("things").to_str().unwrap().to_owned();
    Table::open_or_create(&uri, &spec(), &StorageConfig::default())
        .await
        .unwrap()
}

async fn append(table: &mut Table, source: &str, rows: &[&str]) {
    let files = write_source(table.uri(), table.delta(), source, rows).await;
    table.commit_sources(vec![files], &Retry::default()).await.unwrap();
}

/// The Delta version's data files, as URIs.
fn delta_paths(table: &Table) -> BTreeSet<String> {
    let root = root(table.delta());
    table
        .delta()
        .snapshot()
        .unwrap()
        .log_data()
        .iter()
        .map(|f| format!("{root}/{}", f.path()))
        .collect()
}

/// The view's current metadata and the live files and row count of its current snapshot.
async fn view(table: &Table) -> (TableMetadata, BTreeSet<String>, u64, usize) {
    let (_, _, metadata) = current_metadata(table.uri(), table.delta())
        .await
        .unwrap()
        .expect("a view");
    let Some(current) = metadata.current_snapshot() else {
        return (metadata, BTreeSet::new(), 0, 0);
    };
    let store = table.delta().object_store();
    let (manifests, live) = live_entries(table.uri(), &store, &root(table.delta()), current.manifest_list())
        .await
        .unwrap()
        .expect("the current snapshot's manifests");
    let rows = live.values().map(|e| e.entry.record_count()).sum();
    (metadata, live.into_keys().collect(), rows, manifests.len())
}

async fn folder(table: &Table) -> Vec<String> {
    let store = table.delta().object_store();
    let listed: Vec<_> = store
        .list(Some(&Path::from(METADATA_FOLDER)))
        .try_collect()
        .await
        .unwrap();
    let mut names: Vec<String> = listed.into_iter().map(|o| o.location.to_string()).collect();
    names.sort();
    names
}

fn operation(metadata: &TableMetadata) -> String {
    metadata
        .current_snapshot()
        .unwrap()
        .summary()
        .operation
        .as_str()
        .to_owned()
}

fn delta_version(metadata: &TableMetadata) -> i64 {
    metadata.properties()[DELTA_VERSION].parse().unwrap()
}

#[tokio::test]
async fn every_commit_is_mirrored_with_the_operation_that_matches() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = table(&dir).await;
    append(&mut table, "s1", &["a", "b"]).await;
    append(&mut table, "s2", &["c"]).await;
    assert_eq!(
        table.mirror_iceberg(DEFAULT_HISTORY).await.unwrap(),
        None,
        "each commit mirrored already"
    );
    let (metadata, files, rows, _) = view(&table).await;
    assert_eq!(files, delta_paths(&table));
    assert_eq!(rows, 6, "two days of three rows");
    assert_eq!(operation(&metadata), "append");
    assert_eq!(delta_version(&metadata), table.delta().version().unwrap() as i64);
    // Identity partitions on the date, and a name mapping for files without field ids.
    assert_eq!(metadata.default_partition_spec().fields()[0].name, "day");
    assert!(metadata.properties()["schema.name-mapping.default"].contains("\"names\":[\"at\"]"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("things/_iceberg/metadata/version-hint.text")).unwrap(),
        "2"
    );

    // A compaction keeps the rows: a replace.
    let report = table.compact(&CompactOptions::default(), &()).await.unwrap();
    assert!(report.files_removed() > 0, "{report:?}");
    let (metadata, files, rows, _) = view(&table).await;
    assert_eq!(operation(&metadata), "replace");
    assert_eq!(files, delta_paths(&table));
    assert_eq!(rows, 6);

    // An erasure drops rows: an overwrite; the purge then expires every older snapshot and the
    // files only they named.
    let erasure = Erasure::new(["a"]).equals("id");
    table.erase(&erasure, &Retry::default()).await.unwrap();
    let (metadata, files, rows, _) = view(&table).await;
    assert_eq!(operation(&metadata), "overwrite");
    assert_eq!((files, rows), (delta_paths(&table), 4));
    assert!(metadata.snapshots().len() > 1);
    table.purge(&erasure).await.unwrap();
    let (metadata, files, rows, _) = view(&table).await;
    assert_eq!(
        metadata.snapshots().len(),
        1,
        "only the current snapshot outlives a purge"
    );
    assert_eq!((files, rows), (delta_paths(&table), 4));
    let left = folder(&table).await;
    let lists: Vec<_> = left.iter().filter(|n| n.contains("/snap-")).collect();
    assert_eq!(lists.len(), 1, "{left:?}");
    let metadata_files: Vec<_> = left.iter().filter(|n| n.ends_with(".metadata.json")).collect();
    assert_eq!(metadata_files.len(), 1, "{left:?}");
}

#[tokio::test]
async fn a_view_lost_or_left_behind_is_brought_up_to_date_in_one_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = table(&dir).await;
    append(&mut table, "s1", &["a"]).await;
    append(&mut table, "s2", &["b"]).await;
    append(&mut table, "s3", &["c"]).await;

    // Left behind: the last metadata file is gone (a crash before it was written).
    let newest = folder(&table)
        .await
        .into_iter()
        .filter(|n| n.ends_with(".metadata.json"))
        .max_by_key(|n| n.len() * 1000 + n.chars().filter(char::is_ascii_digit).count())
        .unwrap();
    std::fs::remove_file(dir.path().join("things").join(&newest)).unwrap();
    let (behind, files, _, _) = view(&table).await;
    assert!(delta_version(&behind) < table.delta().version().unwrap() as i64);
    assert_ne!(files, delta_paths(&table));
    let mirrored = table.mirror_iceberg(DEFAULT_HISTORY).await.unwrap().expect("caught up");
    assert_eq!(mirrored.operation.as_deref(), Some("append"));
    assert_eq!(mirrored.added_files, 2, "the files of the version not mirrored");
    let (metadata, files, rows, _) = view(&table).await;
    assert_eq!((files, rows), (delta_paths(&table), 6));
    assert_eq!(delta_version(&metadata), table.delta().version().unwrap() as i64);
    assert_eq!(table.mirror_iceberg(DEFAULT_HISTORY).await.unwrap(), None, "up to date");
    // What the stopped writer left (its manifest and manifest list) goes; all a reader needs stays.
    let before = folder(&table).await;
    let orphans = remove_orphans(table.uri(), table.delta(), Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(orphans.len(), 2, "{orphans:?}");
    assert!(orphans.iter().any(|o| o.contains("/snap-")), "{orphans:?}");
    assert_eq!(folder(&table).await.len(), before.len() - 2);
    let (_, files, rows, _) = view(&table).await;
    assert_eq!((files, rows), (delta_paths(&table), 6));
    assert!(
        remove_orphans(table.uri(), table.delta(), Duration::ZERO)
            .await
            .unwrap()
            .is_empty()
    );

    // Lost: a table from a release without the view.
    std::fs::remove_dir_all(dir.path().join("things/_iceberg")).unwrap();
    table
        .mirror_iceberg(DEFAULT_HISTORY)
        .await
        .unwrap()
        .expect("a new view");
    let (_, files, rows, _) = view(&table).await;
    assert_eq!((files, rows), (delta_paths(&table), 6));
}

#[tokio::test]
async fn metadata_stays_bounded_as_commits_accumulate() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = table(&dir).await;
    for n in 0..(MAX_MANIFESTS + MAX_SNAPSHOTS + 5) {
        let id = format!("row-{n}");
        append(&mut table, &format!("s{n}"), &[id.as_str()]).await;
    }
    let (metadata, files, rows, manifests) = view(&table).await;
    assert_eq!(files, delta_paths(&table));
    assert_eq!(rows, 2 * (MAX_MANIFESTS + MAX_SNAPSHOTS + 5) as u64);
    assert!(manifests <= MAX_MANIFESTS, "{manifests} manifests");
    assert!(
        metadata.snapshots().len() <= MAX_SNAPSHOTS,
        "{} snapshots",
        metadata.snapshots().len()
    );
    let left = folder(&table).await;
    let metadata_files = left.iter().filter(|n| n.ends_with(".metadata.json")).count();
    assert!(
        metadata_files <= PREVIOUS_VERSIONS_MAX + 1,
        "{metadata_files} metadata files"
    );
    let lists = left.iter().filter(|n| n.contains("/snap-")).count();
    assert!(lists <= MAX_SNAPSHOTS, "{lists} manifest lists");
    // Manifests: those of the snapshots kept (at most MAX_MANIFESTS each, mostly shared).
    let manifest_files = left
        .iter()
        .filter(|n| n.ends_with(".avro") && !n.contains("/snap-"))
        .count();
    assert!(
        manifest_files <= MAX_MANIFESTS + MAX_SNAPSHOTS,
        "{manifest_files} manifests on storage"
    );
}
