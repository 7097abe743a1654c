//! Kinesis bytes per request: what `prepare` writes for 500 small events whose request carries
//! 10 KB of headers, beside what copying the whole request into each record (the envelope of
//! releases before 0.2) wrote, and the bar of at most twice the body plus 1 KB per event.
//!
//! ```sh
//! cargo run --release -p game-api --example record_bytes
//! ```

use aws_lambda_events::apigw::ApiGatewayProxyRequest;
use aws_lambda_events::http::{HeaderName, HeaderValue, Method};
use game_api::{ApiConfig, Game, prepare};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let events: Vec<String> = (0..500)
        .map(|i| format!(r#"{{"eventName":"levelUp","eventParams":{{"device_id":"d-{i}","level":{i}}}}}"#))
        .collect();
    let body = format!(r#"{{"events":[{}]}}"#, events.join(","));
    let mut request = ApiGatewayProxyRequest::default();
    request.http_method = Method::POST;
    request.body = Some(body.clone());
    request
        .headers
        .insert("content-type", HeaderValue::from_static("application/json"));
    request
        .headers
        .insert("user-agent", HeaderValue::from_str(&"u".repeat(1000))?);
    for i in 0..9 {
        request.headers.insert(
            HeaderName::from_bytes(format!("x-trace-{i}").as_bytes())?,
            HeaderValue::from_str(&"t".repeat(1000))?,
        );
    }
    let headers: usize = request.headers.iter().map(|(k, v)| k.as_str().len() + v.len()).sum();
    let game = Game::new("bench")?;
    let prepared = prepare(&request, &game, &ApiConfig::default(), chrono::Utc::now())?;
    let written: usize = prepared
        .entries
        .iter()
        .map(|e| e.data.len() + e.partition_key.len())
        .sum();
    // The whole request (without its body) in every record, as the envelope was before.
    let mut whole = request.clone();
    whole.body = None;
    let serde_json::Value::Object(map) = serde_json::to_value(&whole)? else {
        return Err("a request serialises as an object".into());
    };
    let (old, new) = (
        game_events::Envelope::new(map).overhead(),
        game_api::envelope(&request).overhead(),
    );
    let before = written - prepared.entries.len() * new + prepared.entries.len() * old;
    let bar = 2 * body.len() + 1024 * prepared.entries.len();
    println!(
        "{} events, body {} bytes, headers {headers} bytes: records {written} bytes ({:.2}x the body); \
         with the whole request in each record {before} bytes ({:.1}x); bar {bar} bytes",
        prepared.entries.len(),
        body.len(),
        written as f64 / body.len() as f64,
        before as f64 / body.len() as f64,
    );
    if written > bar {
        return Err(format!("{written} bytes of records exceed the bar of {bar}").into());
    }
    Ok(())
}
