//! What can be wrong with events, request bodies and Kinesis records, each naming where.

use std::fmt;

use serde::Serialize;
use serde_json::Value;

/// A problem with one field of one event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldProblem {
    /// The field, as a path (`eventName`, `eventParams.amount`); `None` when the problem is the
    /// event as a whole (not an object).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// What is wrong.
    pub problem: String,
}

impl FieldProblem {
    /// A problem with `field`.
    pub fn new(field: &str, problem: impl Into<String>) -> Self {
        Self {
            field: Some(field.to_owned()),
            problem: problem.into(),
        }
    }

    /// `field` should have been `expected` and was `found`.
    pub(crate) fn expected(field: &str, expected: &str, found: &Value) -> Self {
        Self::new(field, format!("expected {expected}, found {}", describe(found)))
    }

    /// The event is not an object.
    pub(crate) fn whole_event(found: &Value) -> Self {
        Self {
            field: None,
            problem: format!("expected an event object, found {}", describe(found)),
        }
    }
}

impl fmt::Display for FieldProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.field {
            Some(field) => write!(f, "{field}: {}", self.problem),
            None => f.write_str(&self.problem),
        }
    }
}

/// A problem with one event of a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventProblem {
    /// The event's position in the request (0 for a body with one event).
    pub index: usize,
    /// The field and what is wrong with it.
    #[serde(flatten)]
    pub problem: FieldProblem,
}

impl fmt::Display for EventProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "event {}: {}", self.index, self.problem)
    }
}

/// Why a request body holds no events the API can accept.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BodyError {
    /// The body has no bytes (or only white space).
    #[error("the body is empty: send one event object or {{\"events\": [...]}}")]
    Empty,
    /// The body is not JSON.
    #[error("the body is not valid JSON: {reason}")]
    NotJson {
        /// serde_json's description, with line and column.
        reason: String,
    },
    /// The body is JSON of another shape.
    #[error("expected one event object or {{\"events\": [...]}}, found {found}")]
    Shape {
        /// What the body is instead.
        found: String,
    },
    /// `{"events": ...}` with something else than an array, or with other fields next to it.
    #[error("{0}")]
    Batch(String),
    /// `{"events": []}`.
    #[error("\"events\" is empty: a request carries 1 to {max} events")]
    NoEvents {
        /// The most events a request may carry.
        max: usize,
    },
    /// More events than one request may carry.
    #[error("{count} events in one request: at most {max} are accepted, send the rest in another request")]
    TooManyEvents {
        /// Events in the request.
        count: usize,
        /// The most events a request may carry.
        max: usize,
    },
    /// Some events are invalid; none was accepted.
    #[error(transparent)]
    Invalid(#[from] InvalidEvents),
}

/// Every problem of every invalid event of a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct InvalidEvents {
    /// Events in the request.
    pub events: usize,
    /// Invalid events.
    pub invalid: usize,
    /// The problems, by event index and then in field order.
    pub problems: Vec<EventProblem>,
}

impl fmt::Display for InvalidEvents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} of {} events are invalid", self.invalid, self.events)?;
        for (i, problem) in self.problems.iter().enumerate() {
            f.write_str(if i == 0 { ": " } else { "; " })?;
            write!(f, "{problem}")?;
        }
        Ok(())
    }
}

/// Why a Kinesis record does not hold a stamped game event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// The record's data is not JSON.
    #[error("record data is not JSON: {reason}")]
    NotJson {
        /// serde_json's description, with line and column.
        reason: String,
    },
    /// The record's data is JSON, but not an object.
    #[error("record data is {found}, not a JSON object (the API Gateway request)")]
    NotAnObject {
        /// What it is instead.
        found: String,
    },
    /// The envelope has no `body`.
    #[error("record has no body (the event object)")]
    NoBody,
    /// The `body` is not an event object (nor a JSON string holding one).
    #[error("body: expected the event object, found {found}")]
    BadBody {
        /// What it is instead.
        found: String,
    },
    /// The event has no `eventName`.
    #[error("body.eventName: required")]
    NoEventName,
    /// The event has no `eventTime`.
    #[error("body.eventTime: required (the server's stamp, epoch seconds)")]
    NoEventTime,
    /// Fields with the wrong type or value.
    #[error("{}", join_body_fields(.0))]
    BadFields(Vec<FieldProblem>),
    /// A packed record that cannot be unpacked ([`crate::packed`]): it is kept whole.
    #[error(transparent)]
    Packed(#[from] crate::packed::PackedError),
}

fn join_body_fields(problems: &[FieldProblem]) -> String {
    let parts: Vec<String> = problems.iter().map(|p| format!("body.{p}")).collect();
    parts.join("; ")
}

/// A short description of a JSON value for messages: its kind, and scalars themselves (cut at 64
/// characters).
pub(crate) fn describe(value: &Value) -> String {
    let scalar = |kind: &str, text: String| {
        let cut: String = text.chars().take(64).collect();
        let more = if cut.len() < text.len() { "..." } else { "" };
        format!("{kind} ({cut}{more})")
    };
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => scalar("a number", n.to_string()),
        Value::String(s) => scalar("a string", format!("{s:?}")),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn descriptions_are_short() {
        assert_eq!(describe(&json!(null)), "null");
        assert_eq!(describe(&json!(false)), "false");
        assert_eq!(describe(&json!(1.5)), "a number (1.5)");
        assert_eq!(describe(&json!({"a": 1})), "an object");
        let long = describe(&json!("x".repeat(500)));
        assert!(long.len() < 90 && long.ends_with("...)"), "{long}");
    }

    #[test]
    fn invalid_events_list_every_problem() {
        let invalid = InvalidEvents {
            events: 3,
            invalid: 2,
            problems: vec![
                EventProblem {
                    index: 0,
                    problem: FieldProblem::new("eventName", "required"),
                },
                EventProblem {
                    index: 2,
                    problem: FieldProblem::whole_event(&json!(3)),
                },
            ],
        };
        assert_eq!(
            invalid.to_string(),
            "2 of 3 events are invalid: event 0: eventName: required; event 2: expected an event object, found a number (3)"
        );
        assert_eq!(
            serde_json::to_value(&invalid.problems).unwrap(),
            json!([
                {"index": 0, "field": "eventName", "problem": "required"},
                {"index": 2, "problem": "expected an event object, found a number (3)"}
            ])
        );
    }
}
