//! `lakelog optimize`, `checkpoint` and `vacuum` as a user runs them, on access-log tables built by
//! `lakelog ingest` one object per commit.

use std::process::Command;

use lake::{StorageConfig, Table};

fn lakelog(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lakelog")).args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn stats(uri: &str) -> lake::FileStats {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        Table::open(uri, &StorageConfig::default())
            .await
            .unwrap()
            .file_stats()
            .unwrap()
    })
}

#[test]
fn optimize_checkpoint_and_vacuum_a_table_of_small_commits() {
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("raw");
    let (ok, out, err) = lakelog(&[
        "generate-logs",
        "--out",
        raw.to_str().unwrap(),
        "--bytes",
        "2400000",
        "--object-bytes",
        "200000",
        "--malformed-rate",
        "0",
    ]);
    assert!(ok, "{out}{err}");
    let lake = dir.path().join("lake");
    let template = format!("{}/{{bucket}}", lake.display());
    let (ok, out, err) = lakelog(&[
        "ingest",
        "-q",
        "--objects-per-commit",
        "1",
        "--table",
        &template,
        raw.to_str().unwrap(),
    ]);
    assert!(ok, "{out}{err}");
    let tables: Vec<String> = std::fs::read_dir(&lake)
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .filter(|p| !p.ends_with("_rejects"))
        .collect();
    assert!(!tables.is_empty());
    let table = &tables[0];
    let before = stats(table);
    assert!(before.files >= 4, "{before:?}");

    // The plan, without changes.
    let (ok, plan, err) = lakelog(&["optimize", "--table", table, "--dry-run"]);
    assert!(ok, "{plan}{err}");
    assert!(plan.contains("request_date="), "{plan}");
    assert_eq!(stats(table), before);

    let (ok, out, err) = lakelog(&["optimize", "-q", "--table", table]);
    assert!(ok, "{out}{err}");
    assert!(out.starts_with("compacted "), "{out}");
    let after = stats(table);
    assert_eq!(after.rows, before.rows);
    assert!(after.files < before.files, "{before:?} -> {after:?}");
    assert!(
        out.contains(&format!("{} -> {} files", before.files, after.files)),
        "{out}"
    );

    let (ok, out, err) = lakelog(&["checkpoint", "-q", "--table", table]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("checkpoint written"), "{out}");
    let (ok, out, _) = lakelog(&["checkpoint", "-q", "--table", table]);
    assert!(ok && out.contains("already checkpointed"), "{out}");

    // Less than 7 days of retention needs --force; the default keeps the compacted files.
    let (ok, _, err) = lakelog(&["vacuum", "-q", "--table", table, "--retention-hours", "0"]);
    assert!(!ok);
    assert!(err.contains("below the minimum of 168 hours"), "{err}");
    let (ok, out, err) = lakelog(&["vacuum", "-q", "--table", table]);
    assert!(ok && out.contains("deleted 0 files"), "{out}{err}");
    let (ok, out, err) = lakelog(&[
        "vacuum",
        "-q",
        "--table",
        table,
        "--retention-hours",
        "0",
        "--force",
        "--dry-run",
    ]);
    assert!(ok, "{out}{err}");
    assert!(out.contains(&format!("would delete {} files", before.files)), "{out}");
    assert_eq!(stats(table), after);

    let (ok, _, err) = lakelog(&["optimize", "--table", &format!("{}/missing", dir.path().display())]);
    assert!(!ok);
    assert!(err.contains("missing"), "{err}");
}
