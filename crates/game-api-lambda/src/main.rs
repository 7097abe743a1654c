//! `game-api-lambda`: API Gateway REST proxy requests -> validated, stamped events -> Kinesis.

use env_config::Vars;
use game_api::{Config, KinesisSink, kinesis_client};
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
    // A missing or bad setting ends the function at init, reported in words to the Runtime API.
    let (config, namespace) = match Config::from_env().and_then(|c| Ok((c, emf::namespace(&Vars::env())?))) {
        Ok(settings) => settings,
        Err(e) => env_config::init::fail(e).await,
    };
    let sdk = aws_config::load_from_env().await;
    let sink = KinesisSink::new(kinesis_client(&sdk), config.stream.clone());
    let (sink, api, namespace) = (&sink, &config.api, namespace.as_str());
    lambda_runtime::run(service_fn(move |event| handler::handle(event, sink, api, namespace))).await
}
