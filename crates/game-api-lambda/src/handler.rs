//! The Lambda handler: an API Gateway proxy request in, a JSON response out.

use std::convert::Infallible;

use aws_lambda_events::apigw::{ApiGatewayProxyRequest, ApiGatewayProxyResponse};
use game_api::{ApiConfig, RecordSink, respond};
use lambda_runtime::LambdaEvent;

/// [`respond()`] to the request. It never fails; every problem is a response (the status table of
/// [`game_api::respond`](mod@game_api::respond)).
pub async fn handle<S: RecordSink>(
    event: LambdaEvent<ApiGatewayProxyRequest>,
    sink: &S,
    config: &ApiConfig,
) -> Result<ApiGatewayProxyResponse, Infallible> {
    Ok(respond(&event.payload, sink, config).await)
}
