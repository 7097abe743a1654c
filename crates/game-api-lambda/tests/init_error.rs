//! The real `bootstrap` binary, started as Lambda starts it but without its settings, reports why
//! it cannot start to the Runtime API's `/runtime/init/error`, in words, and exits.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::Duration;

/// One request as the Runtime API receives it.
struct Received {
    request_line: String,
    headers: Vec<(String, String)>,
    body: String,
}

/// Accepts one connection on `listener` within 30 s and reads one HTTP/1.1 request, answering
/// 202; `None` when nothing connected.
fn receive_one(listener: &TcpListener) -> Option<Received> {
    listener.set_nonblocking(true).unwrap();
    let started = std::time::Instant::now();
    let stream = loop {
        match listener.accept() {
            Ok((stream, _)) => break stream,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && started.elapsed() < Duration::from_secs(30) => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(_) => return None,
        }
    };
    stream.set_nonblocking(false).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    reader.read_line(&mut request_line).unwrap();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    let mut stream = stream;
    stream
        .write_all(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        .unwrap();
    Some(Received {
        request_line: request_line.trim_end().to_owned(),
        headers,
        body: String::from_utf8(body).unwrap(),
    })
}

#[test]
fn a_missing_setting_is_reported_to_the_runtime_api_in_words() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_game-api-lambda"))
        .env_clear()
        .env("AWS_LAMBDA_RUNTIME_API", address.to_string())
        .env("AWS_REGION", "us-east-1")
        .env("AWS_LAMBDA_FUNCTION_NAME", "game-api-lambda")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let received = receive_one(&listener);
    if received.is_none() {
        let _ = child.kill();
    }
    let output = {
        let status = child.wait().unwrap();
        let mut stderr = String::new();
        child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
        (status, stderr)
    };

    let (status, stderr) = output;
    let received = received.unwrap_or_else(|| panic!("no request to the Runtime API; exit {status}, stderr: {stderr}"));
    assert_eq!(received.request_line, "POST /2018-06-01/runtime/init/error HTTP/1.1");
    assert!(
        received
            .headers
            .iter()
            .any(|(n, v)| n == "lambda-runtime-function-error-type" && v == "Runtime.InitError"),
        "{:?}",
        received.headers
    );
    let body: serde_json::Value = serde_json::from_str(&received.body).unwrap();
    assert_eq!(
        body["errorMessage"], "the function cannot start: GAME_EVENTS_STREAM is not set",
        "{body}"
    );
    assert_eq!(body["errorType"], "Runtime.InitError");
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("GAME_EVENTS_STREAM is not set"), "{stderr}");
    assert!(!stderr.contains("Missing {"), "no Debug dump: {stderr}");
}
