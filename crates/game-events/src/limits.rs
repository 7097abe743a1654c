//! What one event of a game may carry: the bounds a key's holder cannot pass, checked once the
//! body is read, with the game's own range of `amount`.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::body::BodyEvent;
use crate::error::{EventProblem, FieldProblem, InvalidEvents};
use crate::json::{MAX_COPIED_WHITESPACE, MAX_DEPTH, measure};
use crate::object::RawFields;

/// How deep an event object sits in its record: the record (the request envelope) holds it as
/// `body`. A field of the event is one level inside it, a parameter two.
const EVENT_DEPTH_IN_RECORD: usize = 2;

/// The bounds of one event. The defaults suit a mobile game; a game's own `amount` range comes
/// from its key's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Parameters in `eventParams` besides the typed ones, and top-level fields besides the
    /// model's, each.
    pub max_extra: usize,
    /// Characters of a parameter's or field's name.
    pub max_name_chars: usize,
    /// Bytes of a parameter's or field's value, as JSON text.
    pub max_value_bytes: usize,
    /// Characters of `eventName` and of each typed text parameter.
    pub max_text_chars: usize,
    /// The least `amount` a purchase may carry.
    pub min_amount: f64,
    /// The most `amount` a purchase may carry.
    pub max_amount: f64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_extra: 50,
            max_name_chars: 64,
            max_value_bytes: 1024,
            max_text_chars: 256,
            min_amount: 0.0,
            max_amount: 10_000.0,
        }
    }
}

/// What [`Limits::check`] reads of an event, whichever path parsed it.
struct Shape<'e> {
    texts: [(&'static str, Option<&'e str>); 7],
    amount: Option<f64>,
    params: Vec<(&'e str, usize, FieldValue<'e>)>,
    fields: Vec<(&'e str, usize, FieldValue<'e>)>,
}

/// A parameter's or field's value as the parse path holds it.
#[derive(Clone, Copy)]
enum FieldValue<'e> {
    /// Its JSON text as written.
    Raw(&'e str),
    /// The value read.
    Parsed(&'e Value),
}

impl FieldValue<'_> {
    /// The deepest nesting of arrays and objects in the value: 0 for a scalar.
    fn depth(self) -> usize {
        fn depth(value: &Value) -> usize {
            match value {
                Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
                Value::Object(fields) => 1 + fields.values().map(depth).max().unwrap_or(0),
                _ => 0,
            }
        }
        match self {
            FieldValue::Raw(text) => measure(text).depth,
            // serde_json read it, so its depth is bounded and the recursion with it.
            FieldValue::Parsed(value) => depth(value),
        }
    }
}

fn raw_sizes<'e>(fields: &'e RawFields<'_>) -> Vec<(&'e str, usize, FieldValue<'e>)> {
    fields
        .iter()
        .map(|(name, value)| (name.as_ref(), value.get().len(), FieldValue::Raw(value.get())))
        .collect()
}

fn value_sizes(fields: &Map<String, Value>) -> Vec<(&str, usize, FieldValue<'_>)> {
    fields
        .iter()
        .map(|(name, value)| {
            (
                name.as_str(),
                serde_json::to_string(value).map_or(usize::MAX, |t| t.len()),
                FieldValue::Parsed(value),
            )
        })
        .collect()
}

fn shape<'e>(event: &'e BodyEvent<'_>) -> Shape<'e> {
    match event {
        BodyEvent::Borrowed(event) => {
            let p = event.params.as_ref();
            let text = |t: Option<&'e Cow<'_, str>>| t.map(AsRef::as_ref);
            Shape {
                texts: [
                    ("eventName", Some(event.name.as_ref())),
                    (
                        "eventParams.game_keyword",
                        text(p.and_then(|p| p.game_keyword.as_ref())),
                    ),
                    ("eventParams.app_name", text(p.and_then(|p| p.app_name.as_ref()))),
                    ("eventParams.platform", text(p.and_then(|p| p.platform.as_ref()))),
                    ("eventParams.app_version", text(p.and_then(|p| p.app_version.as_ref()))),
                    ("eventParams.device_id", text(p.and_then(|p| p.device_id.as_ref()))),
                    (
                        "eventParams.client_event_time",
                        text(p.and_then(|p| p.client_event_time.as_ref())),
                    ),
                ],
                amount: p.and_then(|p| p.amount),
                params: p.map(|p| raw_sizes(&p.extra)).unwrap_or_default(),
                fields: raw_sizes(&event.extra),
            }
        }
        BodyEvent::Owned(event) => {
            let p = event.event_params.as_ref();
            Shape {
                texts: [
                    ("eventName", Some(event.event_name.as_str())),
                    ("eventParams.game_keyword", p.and_then(|p| p.game_keyword.as_deref())),
                    ("eventParams.app_name", p.and_then(|p| p.app_name.as_deref())),
                    ("eventParams.platform", p.and_then(|p| p.platform.as_deref())),
                    ("eventParams.app_version", p.and_then(|p| p.app_version.as_deref())),
                    ("eventParams.device_id", p.and_then(|p| p.device_id.as_deref())),
                    (
                        "eventParams.client_event_time",
                        p.and_then(|p| p.client_event_time.as_deref()),
                    ),
                ],
                amount: p.and_then(|p| p.amount),
                params: p.map(|p| value_sizes(&p.extra)).unwrap_or_default(),
                fields: value_sizes(&event.extra),
            }
        }
    }
}

impl Limits {
    /// The most bytes of JSON an event may take in its record (without the request envelope),
    /// from the bounds above: every text at its longest with every character escaped at its
    /// longest (a character outside the basic plane as two `\u` escapes, 12 bytes), as many
    /// parameters and fields besides the typed ones as accepted, each with the longest name and
    /// value, the numbers, the stamp and the white space copied as written. With the defaults,
    /// 203,392 bytes; an event over it is refused (413) whatever Kinesis would take.
    pub fn max_event_json_bytes(&self) -> usize {
        const PER_CHAR: usize = 12;
        /// A field's key, its quotes, colon and comma.
        const KEY: usize = 32;
        /// A number as a client may write it (`amount`, `scoreAdjustment`), with its key.
        const NUMBER: usize = 64;
        /// `eventTime`, `eventId`, `gameId` and the braces.
        const STAMP: usize = 512;
        let texts = 7 * (self.max_text_chars * PER_CHAR + KEY);
        let extras = 2 * self.max_extra * (self.max_name_chars * PER_CHAR + self.max_value_bytes + 8);
        STAMP + texts + 2 * NUMBER + extras + MAX_COPIED_WHITESPACE
    }

    /// Checks every event of a request against the limits: `Err` lists every problem of every
    /// event over them, by index and field, and then none of them may be written.
    pub fn check(&self, events: &[BodyEvent<'_>]) -> Result<(), InvalidEvents> {
        let mut problems = Vec::new();
        let mut invalid = 0;
        for (index, event) in events.iter().enumerate() {
            let before = problems.len();
            let mut problem = |problem: FieldProblem| problems.push(EventProblem { index, problem });
            let shape = shape(event);
            for (field, text) in shape.texts {
                if let Some(chars) = text.map(|t| t.chars().count()).filter(|c| *c > self.max_text_chars) {
                    problem(FieldProblem::new(
                        field,
                        format!("{chars} characters: at most {} are accepted", self.max_text_chars),
                    ));
                }
            }
            if let Some(amount) = shape.amount
                && !(self.min_amount..=self.max_amount).contains(&amount)
            {
                problem(FieldProblem::new(
                    "eventParams.amount",
                    format!(
                        "{amount} is outside this game's range, {} to {}",
                        self.min_amount, self.max_amount
                    ),
                ));
            }
            for (prefix, fields, what, inside) in [
                (
                    "eventParams.",
                    &shape.params,
                    "parameters in eventParams besides the typed ones",
                    EVENT_DEPTH_IN_RECORD + 1,
                ),
                (
                    "",
                    &shape.fields,
                    "fields besides eventName, eventId and eventParams",
                    EVENT_DEPTH_IN_RECORD,
                ),
            ] {
                if fields.len() > self.max_extra {
                    let field = if prefix.is_empty() { "(event)" } else { "eventParams" };
                    problem(FieldProblem::new(
                        field,
                        format!("{} {what}: at most {} are accepted", fields.len(), self.max_extra),
                    ));
                }
                for (name, bytes, value) in fields.iter().take(self.max_extra + 1) {
                    let chars = name.chars().count();
                    let path: String =
                        format!("{prefix}{}", name.chars().take(self.max_name_chars).collect::<String>());
                    if chars == 0 || chars > self.max_name_chars {
                        problem(FieldProblem::new(
                            &path,
                            format!(
                                "a name of {chars} characters: 1 to {} are accepted",
                                self.max_name_chars
                            ),
                        ));
                    }
                    if *bytes > self.max_value_bytes {
                        problem(FieldProblem::new(
                            &path,
                            format!(
                                "a value of {bytes} bytes of JSON: at most {} are accepted",
                                self.max_value_bytes
                            ),
                        ));
                    } else {
                        // The record holds the value deeper than the body did; the sink reads
                        // records with serde_json, which refuses a document too deep.
                        let depth = value.depth();
                        if depth + inside > MAX_DEPTH {
                            problem(FieldProblem::new(
                                &path,
                                format!(
                                    "arrays and objects nested {depth} deep: at most {} are accepted here",
                                    MAX_DEPTH - inside
                                ),
                            ));
                        }
                    }
                }
            }
            if problems.len() > before {
                invalid += 1;
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(InvalidEvents {
                events: events.len(),
                invalid,
                problems,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_body;

    fn problems(limits: &Limits, body: &str) -> Vec<String> {
        let events = parse_body(body.as_bytes()).unwrap();
        match limits.check(&events) {
            Ok(()) => Vec::new(),
            Err(e) => e.problems.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn values_nested_deeper_than_a_record_can_hold_are_named() {
        let limits = Limits::default();
        let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        // A field of the event: the record holds it two levels deeper than its own nesting.
        let field = |depth: usize| format!(r#"{{"eventName": "e", "deep": {}}}"#, nested(depth));
        assert!(problems(&limits, &field(125)).is_empty());
        assert_eq!(
            problems(&limits, &field(126)),
            ["event 0: deep: arrays and objects nested 126 deep: at most 125 are accepted here"]
        );
        // A parameter: three levels.
        let param = |depth: usize| format!(r#"{{"eventName": "e", "eventParams": {{"deep": {}}}}}"#, nested(depth));
        assert!(problems(&limits, &param(124)).is_empty());
        assert_eq!(
            problems(&limits, &param(125)),
            ["event 0: eventParams.deep: arrays and objects nested 125 deep: at most 124 are accepted here"]
        );
    }

    #[test]
    fn a_client_time_is_a_text_of_bounded_length_as_sent() {
        let limits = Limits::default();
        let body = |time: &str| format!(r#"{{"eventName": "e", "eventParams": {{"client_event_time": "{time}"}}}}"#);
        assert!(problems(&limits, &body("2024-06-01T12:00:00Z")).is_empty());
        let padded = format!("{}2024-06-01T12:00:00Z", " ".repeat(900));
        assert_eq!(
            problems(&limits, &body(&padded)),
            ["event 0: eventParams.client_event_time: 920 characters: at most 256 are accepted"]
        );
    }

    #[test]
    fn the_record_budget_follows_from_the_limits() {
        assert_eq!(Limits::default().max_event_json_bytes(), 203_392);
        let small = Limits {
            max_extra: 1,
            ..Limits::default()
        };
        assert!(small.max_event_json_bytes() < Limits::default().max_event_json_bytes());
    }

    #[test]
    fn events_within_the_limits_pass() {
        let limits = Limits::default();
        let body = r#"{"events": [{"eventName": "purchaseEvent", "eventParams": {"amount": 4.99, "sku": "gem_pack_5", "level": 12}, "sessionId": "s"},
                                  {"eventName": "levelUp"}]}"#;
        assert!(problems(&limits, body).is_empty());
    }

    #[test]
    fn amounts_outside_the_games_range_are_named() {
        let limits = Limits {
            max_amount: 100.0,
            ..Limits::default()
        };
        assert_eq!(
            problems(
                &limits,
                r#"{"events": [{"eventName": "purchaseEvent", "eventParams": {"amount": 4.99}},
                               {"eventName": "purchaseEvent", "eventParams": {"amount": -1}},
                               {"eventName": "purchaseEvent", "eventParams": {"amount": 1e6}}]}"#
            ),
            vec![
                "event 1: eventParams.amount: -1 is outside this game's range, 0 to 100",
                "event 2: eventParams.amount: 1000000 is outside this game's range, 0 to 100",
            ]
        );
    }

    #[test]
    fn too_many_too_long_and_too_large_parameters_are_named() {
        let limits = Limits {
            max_extra: 2,
            max_name_chars: 5,
            max_value_bytes: 10,
            max_text_chars: 8,
            ..Limits::default()
        };
        assert_eq!(
            problems(
                &limits,
                r#"{"eventName": "a_very_long_name", "eventParams": {"a": 1, "b": 2, "c": 3, "device_id": "123456789"}}"#
            ),
            vec![
                "event 0: eventName: 16 characters: at most 8 are accepted",
                "event 0: eventParams.device_id: 9 characters: at most 8 are accepted",
                "event 0: eventParams: 3 parameters in eventParams besides the typed ones: at most 2 are accepted",
            ]
        );
        // The reference path (an escaped name) is held to the same limits.
        assert_eq!(
            problems(
                &limits,
                r#"{"eventName": "x\u0041", "toolong": "a", "big": "0123456789abc"}"#
            ),
            vec![
                "event 0: toolo: a name of 7 characters: 1 to 5 are accepted",
                "event 0: big: a value of 15 bytes of JSON: at most 10 are accepted",
            ]
        );
    }
}
