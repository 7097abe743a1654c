//! `game-api-lambda`: API Gateway proxy requests (the REST API's, or the HTTP API front's in
//! payload format 1.0) -> validated, stamped events -> Kinesis.

use game_api::ApiGatewayGames;
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
    let sdk = lambda_sdk_config().await;
    let sink = KinesisSink::new(kinesis_client(&sdk), config.stream.clone());
    // Each game's key is API Gateway's: the key's usage plan names its game in its tags; a game
    // that pseudonymises its ids has its key in Parameter Store. Behind the HTTP API front, the
    // function checks the keys of the REST stage itself.
    let mut games =
        ApiGatewayGames::new(aws_sdk_apigateway::Client::new(&sdk)).with_ssm(aws_sdk_ssm::Client::new(&sdk));
    if let Some(stage) = config.keys_stage.clone() {
        games = games.with_front_stage(stage);
    }
    let games = Games::ApiGateway(games);
    let (games, sink, api, namespace) = (&games, &sink, &config.api, namespace.as_str());
    lambda_runtime::run(service_fn(move |event| {
        handler::handle(event, games, sink, api, namespace)
    }))
    .await
}

/// The SDK's configuration from what Lambda sets in the environment: the role's credentials
/// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`), `AWS_REGION`, and
/// `AWS_ENDPOINT_URL` when one is given. `aws_config::load_from_env` would find the same, but it
/// links every other source of credentials (profiles, SSO, web identity, ECS, IMDS) into the
/// binary, which none of the API's starts reads.
async fn lambda_sdk_config() -> aws_config::SdkConfig {
    use aws_config::environment::{EnvironmentVariableCredentialsProvider, EnvironmentVariableRegionProvider};
    use aws_config::meta::region::ProvideRegion;
    use aws_sdk_apigateway::config::SharedCredentialsProvider;

    let mut sdk = aws_config::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .credentials_provider(SharedCredentialsProvider::new(
            EnvironmentVariableCredentialsProvider::new(),
        ));
    if let Some(region) = EnvironmentVariableRegionProvider::new().region().await {
        sdk = sdk.region(region);
    }
    if let Ok(url) = std::env::var("AWS_ENDPOINT_URL") {
        sdk = sdk.endpoint_url(url);
    }
    sdk.build()
}
