//! Why a line could not be parsed.

use crate::field::{Field, JsonField};

/// Why one access-log line could not be parsed. The message names the field and what was wrong, and
/// is what lands in the `reason` column of the rejects table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The line ended before the user agent, the last field every era has.
    #[error("line has {count} fields, at least 17 expected ({missing} is missing)")]
    TooFewFields {
        /// How many fields the line has.
        count: usize,
        /// The first field that is missing.
        missing: Field,
    },
    /// A bracketed or quoted field was opened and never closed.
    #[error("{field}: no closing {expected}")]
    Unterminated {
        /// The field that was left open.
        field: Field,
        /// What would have closed it.
        expected: &'static str,
    },
    /// A field has a value outside its domain.
    #[error("{field}: {problem}: {value:?}")]
    Invalid {
        /// The field with the bad value.
        field: Field,
        /// What is wrong with it.
        problem: &'static str,
        /// The value as written in the line (lossily decoded, at most 64 bytes).
        value: String,
    },
    /// A field that every record needs is `-`.
    #[error("{field}: required, found -")]
    Missing {
        /// The required field.
        field: Field,
    },
    /// A record of the JSON form is not a JSON object, or a field of it has the wrong type.
    #[error("{problem}")]
    Json {
        /// What serde_json found wrong, with the field's name when it is about one, and where.
        problem: String,
    },
    /// A field of a JSON record that every record needs is null or absent.
    #[error("{field}: required, found null or nothing")]
    JsonMissing {
        /// The required field.
        field: JsonField,
    },
    /// A field of a JSON record has a value outside its domain.
    #[error("{field}: {problem}: {value:?}")]
    JsonInvalid {
        /// The field with the bad value.
        field: JsonField,
        /// What is wrong with it.
        problem: &'static str,
        /// The value (at most 64 bytes).
        value: String,
    },
}

impl ParseError {
    pub(crate) fn invalid(field: Field, problem: &'static str, value: &[u8]) -> Self {
        let shown = &value[..value.len().min(64)];
        ParseError::Invalid {
            field,
            problem,
            value: String::from_utf8_lossy(shown).into_owned(),
        }
    }

    pub(crate) fn json_invalid(field: JsonField, problem: &'static str, value: &str) -> Self {
        let end = (0..=value.len().min(64))
            .rev()
            .find(|&i| value.is_char_boundary(i))
            .unwrap_or(0);
        ParseError::JsonInvalid {
            field,
            problem,
            value: value[..end].to_owned(),
        }
    }

    /// The field (or the column of the JSON field) the error is about, if it is about one.
    pub fn field(&self) -> Option<Field> {
        match self {
            ParseError::TooFewFields { missing, .. } => Some(*missing),
            ParseError::Unterminated { field, .. }
            | ParseError::Invalid { field, .. }
            | ParseError::Missing { field } => Some(*field),
            ParseError::JsonMissing { field } | ParseError::JsonInvalid { field, .. } => field.field(),
            ParseError::Json { .. } => None,
        }
    }
}
