//! A studio's games: each key writes as its own game, never as one a client names; a key of no
//! game is refused; what one key can write is bounded, each violation named by event and field.

use aws_lambda_events::apigw::{ApiGatewayProxyRequest, ApiGatewayProxyResponse};
use aws_lambda_events::encodings::Body;
use aws_lambda_events::http::HeaderValue;
use game_api::{ApiConfig, Game, Games, LocalStream, respond};
use game_events::decode_record;
use game_events::packed::unpack_records;
use serde_json::{Value, json};

const MINERS_KEY: &str = "space-miners-key-0123456789";
const TOWNS_KEY: &str = "tiny-towns-key-0123456789";

fn games() -> Games {
    Games::keys([
        (
            MINERS_KEY.to_owned(),
            Game::new("space-miners").unwrap().with_amounts(0.5, 100.0).unwrap(),
        ),
        (TOWNS_KEY.to_owned(), Game::new("tiny-towns").unwrap()),
    ])
}

fn request(key: Option<&str>, body: &Value) -> ApiGatewayProxyRequest {
    let mut request = ApiGatewayProxyRequest::default();
    request.http_method = aws_lambda_events::http::Method::POST;
    request.body = Some(body.to_string());
    if let Some(key) = key {
        request.headers.insert("x-api-key", HeaderValue::from_str(key).unwrap());
    }
    request
}

fn answer(response: &ApiGatewayProxyResponse) -> Value {
    match &response.body {
        Some(Body::Text(text)) => serde_json::from_str(text).unwrap(),
        other => panic!("not a text body: {other:?}"),
    }
}

#[tokio::test]
async fn each_key_writes_as_its_own_game_with_every_parameter() {
    let (games, stream) = (games(), LocalStream::new("game-events"));
    let purchase = json!({"eventName": "purchaseEvent",
                         "eventParams": {"amount": 4.99, "sku": "gem_pack_5", "level": 12, "currency": "EUR"}});
    for key in [MINERS_KEY, TOWNS_KEY] {
        let response = respond(&request(Some(key), &purchase), &games, &stream, &ApiConfig::default()).await;
        assert_eq!(response.status_code, 200, "{:?}", response.body);
    }
    let records = unpack_records(&stream.drain()).into_owned();
    let events: Vec<_> = records
        .iter()
        .map(|r| decode_record(&r.kinesis.data).unwrap())
        .collect();
    let stamped: Vec<_> = events.iter().map(|e| e.game_id.as_deref()).collect();
    assert_eq!(stamped, [Some("space-miners"), Some("tiny-towns")]);
    let params = &events[0].event_params.as_ref().unwrap().extra;
    assert_eq!(params["sku"], "gem_pack_5");
    assert_eq!(params["level"], 12);
    assert_eq!(params["currency"], "EUR");
    // The key itself never reaches the stream.
    let data = String::from_utf8(records[0].kinesis.data.to_vec()).unwrap();
    assert!(!data.contains(MINERS_KEY), "{data}");
}

#[tokio::test]
async fn no_key_or_a_key_of_no_game_is_refused_and_nothing_is_written() {
    let (games, stream) = (games(), LocalStream::new("game-events"));
    let event = json!({"eventName": "levelUp"});
    for (key, message) in [
        (None, "no API key: send your game's key in the x-api-key header"),
        (
            Some("a-key-nobody-was-given-000"),
            "the API key belongs to no game of this API",
        ),
    ] {
        let response = respond(&request(key, &event), &games, &stream, &ApiConfig::default()).await;
        assert_eq!(response.status_code, 403);
        assert_eq!(answer(&response)["message"], message);
    }
    assert_eq!(stream.received(), 0);
}

#[tokio::test]
async fn a_client_cannot_name_its_game_nor_pass_the_bounds_of_its_key() {
    let (games, stream) = (games(), LocalStream::new("game-events"));
    let named = |response: &ApiGatewayProxyResponse| -> Vec<(u64, String)> {
        answer(response)["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["index"].as_u64().unwrap(), e["field"].as_str().unwrap().to_owned()))
            .collect()
    };
    // What no event may say, whatever its game.
    let body = json!({"events": [
        {"eventName": "levelUp", "gameId": "tiny-towns"},
        {"eventName": "levelUp"},
        {"eventName": "levelUp", "eventId": "00000000-0000-0000-0000-000000000000"}
    ]});
    let response = respond(
        &request(Some(MINERS_KEY), &body),
        &games,
        &stream,
        &ApiConfig::default(),
    )
    .await;
    assert_eq!(response.status_code, 400, "{:?}", response.body);
    assert_eq!(named(&response), [(0, "gameId".to_owned()), (2, "eventId".to_owned())]);
    // The bounds of this game's key.
    let body = json!({"events": [
        {"eventName": "purchaseEvent", "eventParams": {"amount": -5}},
        {"eventName": "purchaseEvent", "eventParams": {"amount": 250}},
        {"eventName": "purchaseEvent", "eventParams": {"amount": 0.1}},
        {"eventName": "levelUp", "eventParams": {"device_id": "d".repeat(300)}},
        {"eventName": "purchaseEvent", "eventParams": {"amount": 99.99}}
    ]});
    let response = respond(
        &request(Some(MINERS_KEY), &body),
        &games,
        &stream,
        &ApiConfig::default(),
    )
    .await;
    assert_eq!(response.status_code, 400, "{:?}", response.body);
    assert_eq!(
        named(&response),
        [
            (0, "eventParams.amount".to_owned()),
            (1, "eventParams.amount".to_owned()),
            (2, "eventParams.amount".to_owned()),
            (3, "eventParams.device_id".to_owned()),
        ]
    );
    assert_eq!(
        answer(&response)["errors"][0]["problem"],
        "-5 is outside this game's range, 0.5 to 100"
    );
    assert_eq!(stream.received(), 0, "nothing of a refused request is written");
    // The other game's key has its own range.
    let big = json!({"eventName": "purchaseEvent", "eventParams": {"amount": 250}});
    let response = respond(&request(Some(TOWNS_KEY), &big), &games, &stream, &ApiConfig::default()).await;
    assert_eq!(response.status_code, 200);
}
