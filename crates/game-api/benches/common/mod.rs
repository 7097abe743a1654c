//! Requests of the benchmark and the latency example: 100 synthetic events each, in the sample
//! request of `events/apigw-batch.json` (a real API Gateway envelope: headers, request context).

use aws_lambda_events::apigw::ApiGatewayProxyRequest;
use chrono::{DateTime, Utc};
use fixtures::game::{Synth, SynthConfig};
use game_api::{Game, Games};
use serde_json::json;

/// Events per request.
pub const EVENTS_PER_REQUEST: usize = 100;

/// The key of the sample request (its `x-api-key` header) and its game.
pub fn games() -> Games {
    let game = Game::new("lakelog-legends").unwrap_or_else(|e| panic!("{e}"));
    Games::keys([("EXAMPLEKEYexamplekey0123456789abcdefGHIJ".to_owned(), game)])
}

/// `count` different requests of [`EVENTS_PER_REQUEST`] events, from the generator's seed 42,
/// without client eventIds (as the seed's clients sent them: the server assigns them).
pub fn requests(count: usize) -> Vec<ApiGatewayProxyRequest> {
    let path = format!("{}/../../events/apigw-batch.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let template: ApiGatewayProxyRequest = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut synth = Synth::new(SynthConfig {
        event_ids: false,
        ..SynthConfig::default()
    });
    let start: DateTime<Utc> = DateTime::from_timestamp(1_717_243_200, 0).unwrap_or_default();
    (0..count)
        .map(|i| {
            let events = synth.events(EVENTS_PER_REQUEST, start + chrono::Duration::seconds(i as i64));
            let mut request = template.clone();
            request.body = Some(json!({"events": events}).to_string());
            request.request_context.request_time_epoch = start.timestamp_millis() + i as i64 * 1000;
            request.request_context.request_id = Some(format!("bench-{i:06}"));
            request
        })
        .collect()
}
