//! The Lambda adapter driven by the sample requests in `events/`: `handle` answers what
//! `game_api::respond` answers (its behaviour is tested in `crates/game-api/tests`), and writes
//! the same records.

use aws_lambda_events::apigw::ApiGatewayProxyRequest;
use aws_lambda_events::encodings::Body;
use game_api::testing::sample_games;
use game_api::{ApiConfig, LocalStream, respond};
use game_api_lambda::handler::handle;
use lambda_runtime::{Context, LambdaEvent};
use serde_json::Value;

fn request(name: &str) -> ApiGatewayProxyRequest {
    let path = format!("{}/../../events/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// An answer without what differs between two calls (the `eventId`s the API stamps).
fn statuses(body: Option<&Body>) -> Vec<Value> {
    let Some(Body::Text(text)) = body else {
        panic!("not a text body: {body:?}");
    };
    let body: Value = serde_json::from_str(text).unwrap();
    body["results"]
        .as_array()
        .map(|results| results.iter().map(|r| r["status"].clone()).collect())
        .unwrap_or_else(|| vec![body["message"].clone()])
}

#[tokio::test]
async fn handle_answers_what_respond_answers() {
    for name in ["apigw-single-event.json", "apigw-batch.json", "apigw-gzip-base64.json"] {
        let (by_handle, by_respond) = (LocalStream::new("game-events"), LocalStream::new("game-events"));
        let event = LambdaEvent::new(request(name), Context::default());
        let config = ApiConfig::default();
        let handled = handle(event, &sample_games(), &by_handle, &config, emf::DEFAULT_NAMESPACE)
            .await
            .unwrap();
        let responded = respond(&request(name), &sample_games(), &by_respond, &config).await;
        assert_eq!(handled.status_code, responded.status_code, "{name}");
        assert_eq!(
            statuses(handled.body.as_ref()),
            statuses(responded.body.as_ref()),
            "{name}"
        );
        assert_eq!(by_handle.len(), by_respond.len(), "{name}");
        assert!(!by_handle.is_empty(), "{name} wrote nothing");
    }
}
