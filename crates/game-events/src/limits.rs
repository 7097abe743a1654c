//! What one event of a game may carry: the bounds a key's holder cannot pass, checked once the
//! body is read, with the game's own range of `amount`.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::body::BodyEvent;
use crate::borrowed::RawFields;
use crate::error::{EventProblem, FieldProblem, InvalidEvents};

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
    texts: [(&'static str, Option<&'e str>); 6],
    amount: Option<f64>,
    params: Vec<(&'e str, usize)>,
    fields: Vec<(&'e str, usize)>,
}

fn raw_sizes<'e>(fields: &'e RawFields<'_>) -> Vec<(&'e str, usize)> {
    fields
        .iter()
        .map(|(name, value)| (name.as_ref(), value.get().len()))
        .collect()
}

fn value_sizes(fields: &Map<String, Value>) -> Vec<(&str, usize)> {
    fields
        .iter()
        .map(|(name, value)| {
            (
                name.as_str(),
                serde_json::to_string(value).map_or(usize::MAX, |t| t.len()),
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
                ],
                amount: p.and_then(|p| p.amount),
                params: p.map(|p| value_sizes(&p.extra)).unwrap_or_default(),
                fields: value_sizes(&event.extra),
            }
        }
    }
}

impl Limits {
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
            for (prefix, fields, what) in [
                (
                    "eventParams.",
                    &shape.params,
                    "parameters in eventParams besides the typed ones",
                ),
                ("", &shape.fields, "fields besides eventName, eventId and eventParams"),
            ] {
                if fields.len() > self.max_extra {
                    let field = if prefix.is_empty() { "(event)" } else { "eventParams" };
                    problem(FieldProblem::new(
                        field,
                        format!("{} {what}: at most {} are accepted", fields.len(), self.max_extra),
                    ));
                }
                for (name, bytes) in fields.iter().take(self.max_extra + 1) {
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
