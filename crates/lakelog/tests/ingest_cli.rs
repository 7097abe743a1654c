//! `lakelog generate-logs` and `lakelog ingest` as a user runs them.

use crate::common::lakelog;

/// The number before `word` in `line`.
fn figure(line: &str, word: &str) -> u64 {
    let words: Vec<&str> = line
        .split([' ', ',', '(', ')', ':'])
        .filter(|w| !w.is_empty())
        .collect();
    let i = words
        .iter()
        .position(|w| *w == word)
        .unwrap_or_else(|| panic!("{word} in {line}"));
    words[i - 1].parse().unwrap_or_else(|_| panic!("{word} in {line}"))
}

#[test]
fn ingest_twice_adds_nothing_the_second_time() {
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("raw");
    let table = format!("{}/lake/access_logs/{{bucket}}", dir.path().display());
    let (ok, generated, _) = lakelog(&[
        "generate-logs",
        "--out",
        raw.to_str().unwrap(),
        "--bytes",
        "3000000",
        "--object-bytes",
        "1000000",
        "--malformed-rate",
        "0.01",
        "--gzip",
    ]);
    assert!(ok, "{generated}");
    let lines = figure(&generated, "lines");
    let malformed = figure(&generated, "malformed");
    assert!(malformed > 0);

    let (ok, first, err) = lakelog(&["ingest", "-q", "--table", &table, raw.to_str().unwrap()]);
    assert!(ok, "{first}{err}");
    assert_eq!(figure(&first, "objects"), 3, "{first}");
    assert_eq!(figure(&first, "rows"), lines - malformed, "{first}");
    assert_eq!(figure(&first, "rejects"), malformed, "{first}");
    assert_eq!(figure(&first, "failed"), 0, "{first}");

    let (ok, second, err) = lakelog(&["ingest", "-q", "--table", &table, raw.to_str().unwrap()]);
    assert!(ok, "{second}{err}");
    assert_eq!(figure(&second, "already"), 3, "{second}");
    assert_eq!(figure(&second, "rows"), 0, "{second}");
    assert!(dir.path().join("lake/access_logs/_rejects/_delta_log").is_dir());
}

#[test]
fn unreadable_input_and_bad_table_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, _, err) = lakelog(&["ingest", "--table", "s3://lake/{oops}", dir.path().to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("--table") && err.contains("{bucket}"), "{err}");
    let missing = dir.path().join("missing.log");
    let table = format!("{}/t", dir.path().display());
    let (ok, out, err) = lakelog(&["ingest", "-q", "--table", &table, missing.to_str().unwrap()]);
    assert!(!ok, "{out}");
    assert!(err.contains("missing.log") && err.contains("no such object"), "{err}");
    assert_eq!(figure(&out, "failed"), 1);
}
