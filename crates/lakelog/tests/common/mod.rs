//! What several CLI tests share: running `lakelog` (on its own, or against the AWS stand-in), and a
//! `lakelog serve` child process.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// Runs `lakelog args` to its end: whether it succeeded, its standard output and its standard error.
pub fn lakelog(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lakelog")).args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `lakelog args` against AWS at `endpoint` (the stand-in, or a proxy in front of it).
pub fn lakelog_against(endpoint: &str, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_lakelog"))
        .args(args)
        .envs(lakelog_tests::runtime_api::Function::standin_vars(endpoint))
        .env("AWS_REGION", lakelog_tests::REGION)
        .output()
        .unwrap()
}

/// Runs `lakelog args` against the stand-in at `endpoint`, checks that it succeeded, and returns
/// the JSON lines it printed.
pub fn lakelog_json(endpoint: &str, args: &[&str]) -> Vec<serde_json::Value> {
    let output = lakelog_against(endpoint, args);
    assert!(
        output.status.success(),
        "lakelog {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A running `lakelog serve`, killed when dropped.
pub struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The API key of the game `space-miners` in the keys file [`serve`] writes.
pub const KEY: &str = "space-miners-test-key-0123456789";

/// The API key of the game `tiny-towns` in the keys file [`serve`] writes.
pub const OTHER_KEY: &str = "tiny-towns-test-key-0123456789";

/// The API key of the reserved probe game in the keys file [`serve`] writes.
pub const PROBE_KEY: &str = "lakelog-probe-test-key-0123456789";

/// Starts `lakelog serve` on a free port of 127.0.0.1 with its tables under `lake` and two games
/// ([`KEY`], [`OTHER_KEY`]) and the probe game ([`PROBE_KEY`]), and returns it with its events URL
/// (from the line it prints first).
pub fn serve(lake: &Path) -> (Server, String) {
    serve_with(lake, &[])
}

/// [`serve`] with `extra` arguments.
pub fn serve_with(lake: &Path, extra: &[&str]) -> (Server, String) {
    let games = lake.with_file_name("games.json");
    let keys = format!(
        r#"{{"games": [{{"game": "space-miners", "key": "{KEY}", "maxAmount": 500}},
                      {{"game": "tiny-towns", "key": "{OTHER_KEY}"}},
                      {{"game": "lakelog-probe", "key": "{PROBE_KEY}"}}]}}"#
    );
    std::fs::write(&games, keys).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_lakelog"))
        .args(["serve", "--port", "0", "--lake", lake.to_str().unwrap()])
        .args(["--games", games.to_str().unwrap()])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let server = Server(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    let url = line
        .split_whitespace()
        .find(|word| word.starts_with("http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_owned();
    (server, url)
}
