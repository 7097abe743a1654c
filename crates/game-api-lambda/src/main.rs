//! `game-api-lambda`: API Gateway REST proxy requests -> validated, stamped events -> Kinesis.

use game_api::games::ApiGatewayGames;
use game_api::{Config, Games, KinesisSink, kinesis_client};
use game_api_lambda::handler;
use lambda_runtime::{Error, service_fn};

// A request allocates and frees many short-lived buffers (its records, their partition keys, the
// response); mimalloc serves them faster than glibc's allocator. BENCHMARKS.md has the handler's
// figures with it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let (config, namespace) = env_config::init::settings(|vars| Ok((Config::from_env()?, emf::namespace(vars)?))).await;
    let sdk = aws_config::load_from_env().await;
    let sink = KinesisSink::new(kinesis_client(&sdk), config.stream.clone());
    // Each game's key is API Gateway's: the key names its game in its tags.
    let games = Games::ApiGateway(ApiGatewayGames::new(aws_sdk_apigateway::Client::new(&sdk)));
    let (games, sink, api, namespace) = (&games, &sink, &config.api, namespace.as_str());
    lambda_runtime::run(service_fn(move |event| {
        handler::handle(event, games, sink, api, namespace)
    }))
    .await
}
