//! The Lambda handler: an API Gateway proxy request in, a JSON response out.

use std::convert::Infallible;

use aws_lambda_events::apigw::{ApiGatewayProxyRequest, ApiGatewayProxyResponse};
use game_api::{ApiConfig, Games, RecordSink, answer};
use lambda_runtime::LambdaEvent;

use crate::metrics;

/// [`game_api::respond()`] to the request, as the game of its key in `games`. It never fails;
/// every problem is a response (the status table of [`game_api::respond`](game_api::respond())).
/// The request's metrics go to standard output in `namespace` ([`crate::metrics`]).
pub async fn handle<S: RecordSink>(
    event: LambdaEvent<ApiGatewayProxyRequest>,
    games: &Games,
    sink: &S,
    config: &ApiConfig,
    namespace: &str,
) -> Result<ApiGatewayProxyResponse, Infallible> {
    let (response, answered) = answer(&event.payload, games, sink, config).await;
    for document in metrics::request(namespace, &answered) {
        document.emit();
    }
    Ok(response)
}
