//! A function that cannot start says why, where a person looks: the Lambda Runtime API's
//! `/runtime/init/error` (Lambda then records the init failure with this message, and the log
//! shows it), and standard error, as a sentence rather than a `Debug` dump.

use std::fmt::Display;

use lambda_runtime_api_client::{Client, body::Body};

/// The Runtime API's address, as Lambda gives it to the function.
pub const RUNTIME_API_VAR: &str = "AWS_LAMBDA_RUNTIME_API";

/// The error type recorded with the failure.
const ERROR_TYPE: &str = "Runtime.InitError";

/// Reports `error`, the reason the function cannot start (a missing or bad setting, a table that
/// cannot be opened), to the Runtime API when there is one, prints it, and ends the process with
/// status 1.
pub async fn fail(error: impl Display) -> ! {
    let message = format!("the function cannot start: {error}");
    eprintln!("{message}");
    if let Err(e) = report(&message).await {
        eprintln!("could not report the init error to the Lambda Runtime API: {e}");
    }
    std::process::exit(1)
}

/// A function's settings, read once at cold start by `read` from the process environment; a
/// missing or bad one ends the function at init ([`fail`]), reported in words to the Runtime API.
///
/// ```no_run
/// # async fn example() {
/// let (stream, namespace) = env_config::init::settings(|vars| {
///     Ok((vars.required("STREAM_NAME")?, vars.optional("METRICS_NAMESPACE")))
/// })
/// .await;
/// # }
/// ```
pub async fn settings<T>(
    read: impl FnOnce(&crate::vars::Vars<fn(&str) -> Option<String>>) -> Result<T, crate::vars::ConfigError>,
) -> T {
    match read(&crate::vars::Vars::env()) {
        Ok(settings) => settings,
        Err(e) => fail(e).await,
    }
}

/// Posts `message` to `/runtime/init/error` of the Runtime API named by [`RUNTIME_API_VAR`];
/// nothing to do outside Lambda (the variable is not set).
async fn report(message: &str) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let Some(api) = std::env::var(RUNTIME_API_VAR).ok().filter(|v| !v.trim().is_empty()) else {
        return Ok(());
    };
    let client = Client::builder()
        .with_endpoint(format!("http://{}", api.trim()).parse()?)
        .build()?;
    let body = serde_json::json!({ "errorType": ERROR_TYPE, "errorMessage": message }).to_string();
    let request = lambda_runtime_api_client::build_request()
        .method("POST")
        .uri("/2018-06-01/runtime/init/error")
        .header("lambda-runtime-function-error-type", ERROR_TYPE)
        .header("content-type", "application/json")
        .body(Body::from(body))?;
    let response = client.call(request).await?;
    if !response.status().is_success() {
        return Err(format!("the Runtime API answered {}", response.status()).into());
    }
    Ok(())
}
