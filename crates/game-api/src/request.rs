//! From an API Gateway proxy request to the JSON bytes of its body, and to the envelope its
//! records carry.

use std::borrow::Cow;
use std::io::Read;

use aws_lambda_events::apigw::ApiGatewayProxyRequest;
use aws_lambda_events::http::{self, Method};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use flate2::read::MultiGzDecoder;
use game_events::Envelope;
use serde_json::{Map, Value};

/// An HTTP request to the API as API Gateway's REST proxy integration hands it to the function:
/// method, path, headers (single and multi-valued), the body in base64 as received (the template's
/// binary media types are `*/*`, so API Gateway encodes every body, gzipped or not), and a request
/// context with `request_id`, the receive time `at` (from which events get their `eventTime`) and
/// `stage`. `lakelog serve` converts what it
/// receives with it, and `lakelog demo` the requests of its simulated clients.
pub fn proxy_request(
    parts: http::request::Parts,
    body: &[u8],
    at: chrono::DateTime<chrono::Utc>,
    request_id: String,
    stage: &str,
) -> ApiGatewayProxyRequest {
    let path = parts.uri.path().to_owned();
    let mut proxy = ApiGatewayProxyRequest::default();
    proxy.resource = Some("/events".to_owned());
    proxy.path = Some(path.clone());
    proxy.http_method = parts.method.clone();
    proxy.body = Some(STANDARD.encode(body));
    proxy.is_base64_encoded = true;
    let context = &mut proxy.request_context;
    context.http_method = parts.method;
    context.request_id = Some(request_id);
    context.request_time_epoch = at.timestamp_millis();
    context.request_time = Some(at.format("%d/%b/%Y:%H:%M:%S %z").to_string());
    context.stage = Some(stage.to_owned());
    context.resource_path = Some("/events".to_owned());
    context.path = Some(path);
    context.protocol = Some(format!("{:?}", parts.version));
    context.identity.user_agent = parts
        .headers
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    proxy.headers = parts.headers.clone();
    proxy.multi_value_headers = parts.headers;
    proxy
}

/// The most bytes of a request body once decoded from base64 and decompressed: API Gateway's
/// payload limit.
pub const MAX_BODY_BYTES: usize = 10 << 20;

/// What is wrong with a request before its body is read as events.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// Not a POST.
    #[error("{method} is not allowed: send events with POST")]
    MethodNotAllowed {
        /// The request's method.
        method: String,
    },
    /// A `Content-Type` other than JSON in UTF-8.
    #[error("Content-Type {content_type:?} is not supported: send application/json (UTF-8)")]
    UnsupportedMediaType {
        /// The request's content type.
        content_type: String,
    },
    /// A `Content-Encoding` other than gzip or identity.
    #[error("Content-Encoding {encoding:?} is not supported: send the body as is or with gzip")]
    UnsupportedEncoding {
        /// The request's content encoding.
        encoding: String,
    },
    /// `isBase64Encoded` with a body that is not base64.
    #[error("the body is marked base64 but is not valid base64: {reason}")]
    BadBase64 {
        /// The decoder's description.
        reason: String,
    },
    /// `Content-Encoding: gzip` with a body that is not gzip.
    #[error("the body is marked gzip but cannot be decompressed: {reason}")]
    BadGzip {
        /// The decoder's description.
        reason: String,
    },
    /// A body larger than `MAX_BODY_BYTES` (after decoding and decompression).
    #[error("the body is larger than {limit} bytes{after}: send fewer events per request", after = if *.decompressed { " once decompressed" } else { "" })]
    TooLarge {
        /// The limit.
        limit: usize,
        /// Whether the limit was passed while decompressing.
        decompressed: bool,
    },
}

/// A header of the request, from `headers` or else `multiValueHeaders` (names are
/// case-insensitive).
fn header<'a>(request: &'a ApiGatewayProxyRequest, name: &str) -> Option<&'a http::HeaderValue> {
    request
        .headers
        .get(name)
        .or_else(|| request.multi_value_headers.get(name))
}

/// Whether the client takes a gzip answer: `Accept-Encoding` names `gzip` (or `*`) with a weight
/// above zero. Mobile HTTP stacks send it by default and decompress transparently.
pub fn accepts_gzip(request: &ApiGatewayProxyRequest) -> bool {
    let Some(value) = header(request, "accept-encoding").and_then(|v| v.to_str().ok()) else {
        return false;
    };
    value.split(',').any(|coding| {
        let mut parts = coding.split(';');
        let name = parts.next().unwrap_or("").trim();
        let refused = parts.any(|p| {
            let p = p.trim();
            p.strip_prefix("q=")
                .and_then(|q| q.trim().parse::<f32>().ok())
                .is_some_and(|q| q <= 0.0)
        });
        (name.eq_ignore_ascii_case("gzip") || name == "*") && !refused
    })
}

fn header_text(value: &http::HeaderValue) -> String {
    String::from_utf8_lossy(value.as_bytes()).chars().take(100).collect()
}

/// Whether the request declares a gzip body; `Err` for content types and encodings the API does
/// not read.
fn check_headers(request: &ApiGatewayProxyRequest) -> Result<bool, RequestError> {
    if let Some(value) = header(request, "content-type") {
        let text = header_text(value);
        let mut parts = text.split(';');
        let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let json = media == "application/json" || (media.starts_with("application/") && media.ends_with("+json"));
        let utf8 = parts.all(|param| match param.split_once('=') {
            Some((name, value)) if name.trim().eq_ignore_ascii_case("charset") => {
                let charset = value.trim().trim_matches('"');
                charset.eq_ignore_ascii_case("utf-8") || charset.eq_ignore_ascii_case("utf8")
            }
            _ => true,
        });
        if !json || !utf8 {
            return Err(RequestError::UnsupportedMediaType { content_type: text });
        }
    }
    let mut gzip = false;
    if let Some(value) = header(request, "content-encoding") {
        let text = header_text(value);
        for coding in text.split(',').map(|c| c.trim().to_ascii_lowercase()) {
            match coding.as_str() {
                "" | "identity" => {}
                "gzip" | "x-gzip" if !gzip => gzip = true,
                _ => return Err(RequestError::UnsupportedEncoding { encoding: text }),
            }
        }
    }
    Ok(gzip)
}

/// The JSON bytes of the request's body: the method and headers checked, base64 decoded when
/// `isBase64Encoded`, gzip decompressed when `Content-Encoding: gzip`, at most `max_bytes`.
/// An absent body is empty.
pub fn body_bytes(request: &ApiGatewayProxyRequest, max_bytes: usize) -> Result<Cow<'_, [u8]>, RequestError> {
    if request.http_method != Method::POST {
        return Err(RequestError::MethodNotAllowed {
            method: request.http_method.to_string(),
        });
    }
    let gzip = check_headers(request)?;
    let raw = request.body.as_deref().unwrap_or("");
    let too_large = |decompressed| RequestError::TooLarge {
        limit: max_bytes,
        decompressed,
    };
    let bytes: Cow<'_, [u8]> = if request.is_base64_encoded {
        // Base64 takes 4 characters for 3 bytes: a longer text decodes to more than the limit.
        if raw.len() / 4 * 3 > max_bytes + 3 {
            return Err(too_large(false));
        }
        let cleaned: Cow<'_, str> = if raw.contains(['\r', '\n']) {
            Cow::Owned(raw.chars().filter(|c| *c != '\r' && *c != '\n').collect())
        } else {
            Cow::Borrowed(raw)
        };
        Cow::Owned(
            STANDARD
                .decode(cleaned.as_bytes())
                .map_err(|e| RequestError::BadBase64 { reason: e.to_string() })?,
        )
    } else {
        Cow::Borrowed(raw.as_bytes())
    };
    if bytes.len() > max_bytes {
        return Err(too_large(false));
    }
    if !gzip || bytes.is_empty() {
        return Ok(bytes);
    }
    let mut out = Vec::with_capacity((bytes.len() * 4).min(max_bytes));
    let read = MultiGzDecoder::new(&bytes[..])
        .take(max_bytes as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| RequestError::BadGzip { reason: e.to_string() })?;
    if read > max_bytes {
        return Err(too_large(true));
    }
    Ok(Cow::Owned(out))
}

/// The most bytes of a header value a record keeps.
pub const MAX_KEPT_HEADER_BYTES: usize = 256;

/// Headers whose values a record keeps (cut to [`MAX_KEPT_HEADER_BYTES`]): what says which
/// client sent the request and how. Every other header stays out of the stream, so that what a
/// request writes to Kinesis stays in proportion to its body, however many headers it had.
pub const KEPT_HEADERS: [&str; 4] = ["content-type", "content-encoding", "user-agent", "x-forwarded-for"];

/// The envelope of the request's records, in the seed's shape (the API Gateway request as JSON,
/// the event as `body`), with the request's facts only: `resource`, `path`, `httpMethod`, the
/// headers of `KEPT_HEADERS` (each cut to `MAX_KEPT_HEADER_BYTES`), and of `requestContext` the
/// ids, stage, path, method, time, protocol, domain, and of its `identity` the source IP and the
/// key's id. Never the body's other copies, the other headers, or the API key itself (the stream
/// and the tables are read by many). Fields the request does not have are left out.
pub fn envelope(request: &ApiGatewayProxyRequest) -> Envelope {
    Envelope::new(facts(request))
}

/// A text field, when the request has it.
fn put(map: &mut Map<String, Value>, name: &str, value: Option<&str>) {
    if let Some(value) = value {
        map.insert(name.to_owned(), Value::String(value.to_owned()));
    }
}

/// The request's facts as a JSON object (see [`envelope`]).
fn facts(request: &ApiGatewayProxyRequest) -> Map<String, Value> {
    let mut out = Map::new();
    put(&mut out, "resource", request.resource.as_deref());
    put(&mut out, "path", request.path.as_deref());
    put(&mut out, "httpMethod", Some(request.http_method.as_str()));
    let mut headers = Map::new();
    for name in KEPT_HEADERS {
        if let Some(value) = header(request, name) {
            let text = String::from_utf8_lossy(value.as_bytes());
            let mut end = text.len().min(MAX_KEPT_HEADER_BYTES);
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            headers.insert(name.to_owned(), Value::String(text[..end].to_owned()));
        }
    }
    out.insert("headers".to_owned(), Value::Object(headers));
    let from = &request.request_context;
    let mut context = Map::new();
    put(&mut context, "accountId", from.account_id.as_deref());
    put(&mut context, "apiId", from.apiid.as_deref());
    put(&mut context, "resourceId", from.resource_id.as_deref());
    put(&mut context, "resourcePath", from.resource_path.as_deref());
    put(&mut context, "stage", from.stage.as_deref());
    put(&mut context, "domainName", from.domain_name.as_deref());
    put(&mut context, "requestId", from.request_id.as_deref());
    put(&mut context, "protocol", from.protocol.as_deref());
    put(&mut context, "path", from.path.as_deref());
    put(&mut context, "httpMethod", Some(from.http_method.as_str()));
    put(&mut context, "requestTime", from.request_time.as_deref());
    if from.request_time_epoch > 0 {
        context.insert("requestTimeEpoch".to_owned(), Value::from(from.request_time_epoch));
    }
    let mut identity = Map::new();
    put(&mut identity, "sourceIp", from.identity.source_ip.as_deref());
    put(&mut identity, "apiKeyId", from.identity.api_key_id.as_deref());
    context.insert("identity".to_owned(), Value::Object(identity));
    out.insert("requestContext".to_owned(), Value::Object(context));
    out
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use aws_lambda_events::http::HeaderValue;
    use flate2::Compression;
    use flate2::write::GzEncoder;

    use super::*;

    #[test]
    fn an_http_request_becomes_the_proxy_event_api_gateway_sends() {
        let mut gzipped = GzEncoder::new(Vec::new(), Compression::fast());
        gzipped.write_all(br#"{"eventName": "levelUp"}"#).unwrap();
        let gzipped = gzipped.finish().unwrap();
        let at = chrono::DateTime::from_timestamp(1_717_243_200, 250_000_000).unwrap();
        for (body, encoding) in [(br#"{"eventName": "levelUp"}"#.to_vec(), None), (gzipped, Some("gzip"))] {
            let mut http = http::Request::new(());
            *http.method_mut() = Method::POST;
            *http.uri_mut() = http::Uri::from_static("/events?x=1");
            let headers = http.headers_mut();
            headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            headers.insert(http::header::USER_AGENT, HeaderValue::from_static("game/1.0"));
            if let Some(encoding) = encoding {
                headers.insert(http::header::CONTENT_ENCODING, HeaderValue::from_static(encoding));
            }
            let (parts, ()) = http.into_parts();
            let proxy = proxy_request(parts, &body, at, "r-1".into(), "local");
            assert!(proxy.is_base64_encoded, "every body is binary media");
            assert_eq!(proxy.path.as_deref(), Some("/events"));
            assert_eq!(proxy.request_context.request_time_epoch, 1_717_243_200_250);
            assert_eq!(proxy.request_context.request_id.as_deref(), Some("r-1"));
            assert_eq!(proxy.request_context.stage.as_deref(), Some("local"));
            assert_eq!(proxy.request_context.identity.user_agent.as_deref(), Some("game/1.0"));
            assert_eq!(proxy.multi_value_headers.len(), proxy.headers.len());
            let read = body_bytes(&proxy, MAX_BODY_BYTES).unwrap();
            assert_eq!(&*read, br#"{"eventName": "levelUp"}"#);
        }
    }

    fn post(body: &str) -> ApiGatewayProxyRequest {
        let mut request = ApiGatewayProxyRequest::default();
        request.http_method = Method::POST;
        request.body = Some(body.to_owned());
        request
    }

    fn with_header(mut request: ApiGatewayProxyRequest, name: &'static str, value: &str) -> ApiGatewayProxyRequest {
        request.headers.insert(name, HeaderValue::from_str(value).unwrap());
        request
    }

    #[test]
    fn a_gzip_answer_is_taken_when_accept_encoding_weighs_it_above_zero() {
        let accepts = |value: &str| accepts_gzip(&with_header(post("{}"), "accept-encoding", value));
        assert!(!accepts_gzip(&post("{}")), "no header");
        for taken in [
            "gzip",
            "GZIP",
            "deflate, gzip;q=1.0, br",
            "br;q=1, *;q=0.5",
            "gzip; q=0.001",
        ] {
            assert!(accepts(taken), "{taken}");
        }
        for refused in ["identity", "br, deflate", "gzip;q=0", "gzip; q=0.0", "x-gzip", ""] {
            assert!(!accepts(refused), "{refused}");
        }
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
        enc.write_all(data).unwrap();
        enc.finish().unwrap()
    }

    fn err(request: &ApiGatewayProxyRequest) -> String {
        body_bytes(request, 1000).unwrap_err().to_string()
    }

    #[test]
    fn plain_base64_and_gzip_bodies() {
        assert_eq!(&*body_bytes(&post("{}"), 1000).unwrap(), b"{}");
        let mut b64 = post(&STANDARD.encode(b"{\"a\":1}"));
        b64.is_base64_encoded = true;
        assert_eq!(&*body_bytes(&b64, 1000).unwrap(), b"{\"a\":1}");
        let mut gz = with_header(post(&STANDARD.encode(gzip(b"{\"g\":1}"))), "content-encoding", "gzip");
        gz.is_base64_encoded = true;
        assert_eq!(&*body_bytes(&gz, 1000).unwrap(), b"{\"g\":1}");
        // Line breaks in base64 (as some encoders write it) are ignored.
        let mut wrapped = post("eyJhIjox\r\nfQ==");
        wrapped.is_base64_encoded = true;
        assert_eq!(&*body_bytes(&wrapped, 1000).unwrap(), b"{\"a\":1}");
        let mut none = post("");
        none.body = None;
        assert!(body_bytes(&none, 1000).unwrap().is_empty());
    }

    #[test]
    fn content_types_and_encodings() {
        for ok in [
            "application/json",
            "Application/JSON; charset=UTF-8",
            "application/json;charset=\"utf-8\"",
            "application/vnd.game+json",
        ] {
            assert!(
                body_bytes(&with_header(post("{}"), "content-type", ok), 1000).is_ok(),
                "{ok}"
            );
        }
        assert_eq!(
            err(&with_header(post("{}"), "content-type", "text/plain")),
            "Content-Type \"text/plain\" is not supported: send application/json (UTF-8)"
        );
        assert!(
            err(&with_header(
                post("{}"),
                "content-type",
                "application/json; charset=latin1"
            ))
            .contains("latin1")
        );
        assert_eq!(
            err(&with_header(post("{}"), "content-encoding", "br")),
            "Content-Encoding \"br\" is not supported: send the body as is or with gzip"
        );
        assert!(err(&with_header(post("{}"), "content-encoding", "gzip, gzip")).contains("not supported"));
        assert!(body_bytes(&with_header(post("{}"), "content-encoding", "identity"), 1000).is_ok());
        let mut multi = post("{}");
        multi
            .multi_value_headers
            .insert("Content-Type", HeaderValue::from_static("text/csv"));
        assert!(err(&multi).contains("text/csv"));
    }

    #[test]
    fn methods_garbage_and_sizes() {
        let mut get = post("{}");
        get.http_method = Method::GET;
        assert_eq!(err(&get), "GET is not allowed: send events with POST");
        let mut bad64 = post("not base64!");
        bad64.is_base64_encoded = true;
        assert!(
            err(&bad64).starts_with("the body is marked base64 but is not valid base64: Invalid"),
            "{}",
            err(&bad64)
        );
        let garbage = with_header(post("this is not gzip"), "content-encoding", "gzip");
        assert!(err(&garbage).starts_with("the body is marked gzip but cannot be decompressed: "));
        let mut truncated = gzip(&[b'x'; 500]);
        truncated.truncate(truncated.len() - 6);
        let mut truncated = with_header(post(&STANDARD.encode(truncated)), "content-encoding", "gzip");
        truncated.is_base64_encoded = true;
        assert!(err(&truncated).starts_with("the body is marked gzip but cannot be decompressed"));
        assert_eq!(
            err(&post(&"x".repeat(1001))),
            "the body is larger than 1000 bytes: send fewer events per request"
        );
        // A small gzip body that inflates past the limit is stopped while decompressing.
        let mut bomb = with_header(
            post(&STANDARD.encode(gzip(&[b' '; 100_000]))),
            "content-encoding",
            "gzip",
        );
        bomb.is_base64_encoded = true;
        assert_eq!(
            err(&bomb),
            "the body is larger than 1000 bytes once decompressed: send fewer events per request"
        );
        let mut long64 = post(&"A".repeat(2000));
        long64.is_base64_encoded = true;
        assert!(err(&long64).starts_with("the body is larger than 1000 bytes"));
    }

    #[test]
    fn envelopes_carry_no_credentials_and_no_body() {
        let mut request = with_header(post("{\"secret\": 1}"), "x-api-key", "KEY123");
        request = with_header(request, "authorization", "Bearer TOKEN");
        request = with_header(request, "user-agent", "UnityPlayer/2022.3");
        request
            .multi_value_headers
            .insert("x-api-key", HeaderValue::from_static("KEY123"));
        request.request_context.identity.api_key = Some("KEY123".into());
        request.request_context.identity.api_key_id = Some("key-id".into());
        let envelope = envelope(&request);
        let event = game_events::GameEvent::from_value(serde_json::json!({"eventName": "x"}))
            .unwrap()
            .stamp(chrono::Utc::now());
        let record = String::from_utf8(envelope.record(&event).unwrap()).unwrap();
        for secret in ["KEY123", "TOKEN", "secret"] {
            assert!(!record.contains(secret), "{secret} in {record}");
        }
        let value: Value = serde_json::from_str(&record).unwrap();
        assert_eq!(value["headers"]["user-agent"], "UnityPlayer/2022.3");
        assert_eq!(value["requestContext"]["identity"]["apiKeyId"], "key-id");
        assert_eq!(value["httpMethod"], "POST");
        assert_eq!(value["body"]["eventName"], "x");
        assert!(value["headers"].get("x-api-key").is_none() && value["multiValueHeaders"].get("x-api-key").is_none());
        assert!(value["requestContext"]["identity"]["apiKey"].is_null());
    }

    #[test]
    fn envelopes_keep_the_sample_requests_facts_without_body_or_credentials() {
        for name in [
            "apigw-batch.json",
            "apigw-single-event.json",
            "apigw-gzip-base64.json",
            "apigw-http-front.json",
        ] {
            let path = format!("{}/../../events/{name}", env!("CARGO_MANIFEST_DIR"));
            let mut request: ApiGatewayProxyRequest =
                serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
            request.request_context.identity.api_key = Some("KEY123".into());
            let event = game_events::GameEvent::from_value(serde_json::json!({"eventName": "x"}))
                .unwrap()
                .stamp(chrono::Utc::now());
            let record: Value = serde_json::from_slice(&envelope(&request).record(&event).unwrap()).unwrap();
            assert_eq!(record["body"], serde_json::to_value(&event).unwrap(), "{name}");
            assert_eq!(record["isBase64Encoded"], false);
            assert_eq!(record["httpMethod"], "POST");
            assert_eq!(
                record["requestContext"]["requestId"],
                serde_json::json!(request.request_context.request_id)
            );
            assert_eq!(
                record["requestContext"]["requestTimeEpoch"],
                request.request_context.request_time_epoch
            );
            assert!(record["requestContext"]["identity"]["apiKey"].is_null(), "{name}");
            for (header, _) in record["headers"].as_object().unwrap() {
                assert!(KEPT_HEADERS.contains(&header.as_str()), "{name}: {header}");
            }
            assert_eq!(
                record["requestContext"]["identity"]["sourceIp"], "203.0.113.7",
                "{name}"
            );
            // The key's id as API Gateway's REST API names it; the HTTP API front names none.
            assert_eq!(
                record["requestContext"]["identity"]["apiKeyId"],
                serde_json::json!(request.request_context.identity.api_key_id),
                "{name}"
            );
        }
    }

    /// What a request writes to Kinesis stays in proportion to its body: 500 small events with
    /// 10 KB of headers write at most twice the body and 1 KB per event.
    #[test]
    fn records_stay_in_proportion_to_the_body_whatever_the_headers() {
        let events: Vec<String> = (0..500)
            .map(|i| format!(r#"{{"eventName":"levelUp","eventParams":{{"device_id":"d-{i}","level":{i}}}}}"#))
            .collect();
        let body = format!(r#"{{"events":[{}]}}"#, events.join(","));
        let mut request = with_header(post(&body), "user-agent", &"u".repeat(5000));
        for i in 0..10 {
            let name = http::HeaderName::from_bytes(format!("x-trace-{i}").as_bytes()).unwrap();
            request
                .headers
                .insert(name, HeaderValue::from_str(&"t".repeat(1000)).unwrap());
        }
        let envelope = envelope(&request);
        let parsed = game_events::parse_body(body.as_bytes()).unwrap();
        let mut out = Vec::new();
        for event in &parsed {
            envelope
                .write_body_event(event, chrono::Utc::now(), uuid::Uuid::new_v4(), Some("g"), &mut out)
                .unwrap();
        }
        // With the partition keys (eventIds, 36 bytes each), as Kinesis counts a record.
        let written = out.len() + 500 * 36;
        let bar = 2 * body.len() + 500 * 1024;
        assert!(
            written <= bar,
            "{written} bytes of records for a body of {}",
            body.len()
        );
    }

    #[test]
    fn a_credential_header_that_is_not_utf8_is_removed_all_the_same() {
        let mut request = with_header(post("{}"), "user-agent", "UnityPlayer");
        request
            .headers
            .insert("cookie", HeaderValue::from_bytes(b"id=\xff").unwrap());
        let envelope = envelope(&request);
        let event = game_events::GameEvent::from_value(serde_json::json!({"eventName": "x"}))
            .unwrap()
            .stamp(chrono::Utc::now());
        let value: Value = serde_json::from_slice(&envelope.record(&event).unwrap()).unwrap();
        assert_eq!(value["headers"], serde_json::json!({"user-agent": "UnityPlayer"}));
        assert_eq!(value["body"]["eventName"], "x");
    }
}
