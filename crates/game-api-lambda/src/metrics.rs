//! The function's metrics of one request, in CloudWatch's embedded metric format.

use emf::{Metrics, Unit};
use game_api::Answered;

/// The value of the `Function` dimension.
pub const FUNCTION: &str = "game-api";

/// The documents of one request: requests, events accepted and left unwritten, answers by class
/// (`Answered2xx`, `Answered4xx`, `Answered5xx`, `Answered429`, `Answered503`) and the latency;
/// for a refused request, a document counting it by `Reason`; for a request of a known game, its
/// requests and events accepted and left unwritten by `Game` (a game over its lane: unwritten).
pub fn request(namespace: &str, answered: &Answered) -> Vec<Metrics> {
    let mut metrics = Metrics::new(namespace).dimension("Function", FUNCTION);
    let class = |low: u16| f64::from(u8::from((low..low + 100).contains(&answered.status)));
    // What a healthy API does not do is counted only when it happens (`put_when_any`).
    metrics
        .put("Requests", 1.0, Unit::Count)
        .put("EventsAccepted", answered.written as f64, Unit::Count)
        .put_when_any("EventsUnwritten", answered.failed as f64, Unit::Count)
        .put("Answered2xx", class(200), Unit::Count)
        .put_when_any("Answered4xx", class(400), Unit::Count)
        .put_when_any("Answered5xx", class(500), Unit::Count)
        .put_when_any("Answered429", f64::from(u8::from(answered.status == 429)), Unit::Count)
        .put_when_any("Answered503", f64::from(u8::from(answered.status == 503)), Unit::Count)
        .put("Latency", answered.elapsed.as_secs_f64() * 1e3, Unit::Milliseconds);
    let mut documents = vec![metrics];
    if let Some(reason) = answered.refused {
        let mut refused = Metrics::new(namespace)
            .dimension("Function", FUNCTION)
            .dimension("Reason", reason);
        refused.put("RequestsRefused", 1.0, Unit::Count);
        documents.push(refused);
    }
    // Per game: games are created by their operators, so the dimension's values are few.
    if let Some(game) = &answered.game {
        let mut per_game = Metrics::new(namespace)
            .dimension("Function", FUNCTION)
            .dimension("Game", game);
        per_game
            .put("Requests", 1.0, Unit::Count)
            .put("EventsAccepted", answered.written as f64, Unit::Count)
            .put_when_any("EventsUnwritten", answered.failed as f64, Unit::Count);
        documents.push(per_game);
    }
    documents
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn requests_are_counted_by_outcome() {
        let written = Answered {
            game: None,
            status: 200,
            written: 3,
            failed: 0,
            refused: None,
            elapsed: Duration::from_millis(12),
        };
        let documents = request("ns", &written);
        assert_eq!(documents.len(), 1);
        let document = documents[0].document(0);
        assert_eq!(document["Function"], FUNCTION);
        assert_eq!(document["EventsAccepted"], 3.0);
        assert_eq!(document["Answered2xx"], 1.0);
        // What did not happen is left out: CloudWatch bills a metric for the hours it has data.
        for absent in [
            "Answered4xx",
            "Answered5xx",
            "Answered429",
            "Answered503",
            "EventsUnwritten",
        ] {
            assert!(document.get(absent).is_none(), "{absent}: {document}");
        }
        assert_eq!(document["Latency"], 12.0);

        let unwritten = Answered {
            status: 503,
            written: 1,
            failed: 2,
            ..written.clone()
        };
        let document = request("ns", &unwritten)[0].document(0);
        assert_eq!(
            (document["Answered503"].as_f64(), document["EventsUnwritten"].as_f64()),
            (Some(1.0), Some(2.0))
        );

        let refused = Answered {
            status: 400,
            written: 0,
            failed: 0,
            refused: Some("InvalidEvents"),
            ..written.clone()
        };
        let documents: Vec<_> = request("ns", &refused).iter().map(|m| m.document(0)).collect();
        assert_eq!(documents[0]["Answered4xx"], 1.0);
        assert_eq!(documents[1]["Reason"], "InvalidEvents");
        assert_eq!(documents[1]["RequestsRefused"], 1.0);
        assert_eq!(
            documents[1]["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            serde_json::json!([["Function", "Reason"]])
        );

        // A game's requests are counted for it too.
        let game = Answered {
            game: Some("space-miners".into()),
            ..written
        };
        let documents: Vec<_> = request("ns", &game).iter().map(|m| m.document(0)).collect();
        assert_eq!(documents.len(), 2);
        assert_eq!(documents[1]["Game"], "space-miners");
        assert_eq!(documents[1]["EventsAccepted"], 3.0);
    }
}
