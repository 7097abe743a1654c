//! `lakelog parse` as a user runs it: files, gzip, standard input, unreadable files.

use std::io::Write;
use std::process::{Command, Stdio};

use fixtures::log_lines::{SynthConfig, corpus};
use flate2::Compression;
use flate2::write::GzEncoder;

fn lakelog() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lakelog"))
}

fn json_lines(bytes: &[u8]) -> Vec<serde_json::Value> {
    bytes
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect()
}

fn count_lines(bytes: &[u8]) -> usize {
    bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()).count()
}

#[test]
fn plain_gzip_and_stdin_give_the_same_rows() {
    let dir = tempfile::tempdir().unwrap();
    let config = SynthConfig {
        malformed_rate: 0.02,
        quirk_rate: 0.2,
        ..SynthConfig::default()
    };
    let logs = corpus(config, 300_000);
    let plain = dir.path().join("2024-06-01-00-00-00-ABCDEF");
    std::fs::write(&plain, &logs).unwrap();
    let gz = dir.path().join("2024-06-01-00-00-00-ABCDEF.gz");
    let mut enc = GzEncoder::new(Vec::new(), Compression::default());
    enc.write_all(&logs).unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();

    let from_plain = lakelog().arg("parse").arg(&plain).output().unwrap();
    let from_gz = lakelog().arg("parse").arg(&gz).output().unwrap();
    assert!(from_plain.status.success() && from_gz.status.success());
    let rows = json_lines(&from_plain.stdout);
    let rejects = json_lines(&from_plain.stderr);
    assert_eq!(rows.len() + rejects.len(), count_lines(&logs));
    assert!(!rejects.is_empty() && rejects.iter().all(|r| r["reason"].is_string() && r["line"].is_string()));
    let strip_object = |mut v: Vec<serde_json::Value>| {
        v.iter_mut().for_each(|r| r["log_object"] = serde_json::Value::Null);
        v
    };
    assert_eq!(strip_object(json_lines(&from_gz.stdout)), strip_object(rows.clone()));
    assert!(rows[0]["log_object"].as_str().unwrap().starts_with("file:///"));

    let mut child = lakelog()
        .arg("parse")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = std::fs::read(&gz).unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let from_stdin = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(from_stdin.status.success());
    assert_eq!(strip_object(json_lines(&from_stdin.stdout)), strip_object(rows));
}

#[test]
fn unreadable_file_fails_but_the_others_are_parsed() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.log");
    std::fs::write(&good, corpus(SynthConfig::default(), 2_000)).unwrap();
    let missing = dir.path().join("missing.log");
    let out = lakelog().arg("parse").arg(&missing).arg(&good).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot open") && stderr.contains("missing.log"),
        "{stderr}"
    );
    assert!(!json_lines(&out.stdout).is_empty());
}

#[test]
fn closed_stdout_is_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.log");
    std::fs::write(&big, corpus(SynthConfig::default(), 2_000_000)).unwrap();
    let mut child = lakelog()
        .arg("parse")
        .arg(&big)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
