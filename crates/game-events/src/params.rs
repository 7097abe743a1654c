//! The typed parameters of `eventParams`, listed once.
//!
//! The table at the end of this file ([`event_params!`]) names each typed parameter: its field,
//! its Rust type, its [`ParamKind`] and its JSON name. Everything that knows the parameters by
//! name follows from that one list:
//!
//! - [`EventParams`], the owned parameters (serde), and their validation, which names every
//!   problem (`eventParams.<name>`);
//! - `BorrowedParams`, the parameters of the one-pass parser, with its matcher and the JSON
//!   writer of a record;
//! - the fields of the `eventParams` column of `game_events` and their append (feature `arrow`);
//! - [`PARAM_FIELDS`].
//!
//! Adding a typed parameter is one line of the table, plus its tests. A parameter of a new kind
//! (neither text, a 32-bit whole number, a number nor a client time) is one more [`ParamKind`].

use std::borrow::Cow;
use std::fmt::Debug;

use serde::de::{self, MapAccess};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::error::FieldProblem;
use crate::json::write_json;
use crate::names::EVENT_PARAMS;
use crate::object::{Object, RawFields};
use crate::span::{Span, text, written_as};
use crate::time::parse_client_time;

/// What a typed parameter is: how it is validated, read by the one-pass parser, written into a
/// record and stored in Arrow.
pub(crate) trait ParamKind {
    /// The parameter as [`EventParams`] holds it.
    type Owned: Clone + Debug + PartialEq;
    /// The parameter as the one-pass parser holds it: borrowed from the body where it can be.
    type Borrowed<'a>: Clone + Debug;

    /// Reads a value that is not `null`, recording a problem at `path` if it has not this kind.
    fn from_value(value: Value, path: &'static str, problems: &mut Vec<FieldProblem>) -> Option<Self::Owned>;

    /// The owned form of a borrowed value.
    fn into_owned(value: Self::Borrowed<'_>) -> Self::Owned;

    /// Appends the value's JSON, as serde writes [`Self::Owned`].
    fn write(value: &Self::Borrowed<'_>, out: &mut Vec<u8>) -> serde_json::Result<()>;

    /// Reads the next value of `map` in the one-pass parser (`null` is absent), telling `span`
    /// whether the record may copy its text as it is; an error for any value the reference path
    /// would refuse.
    fn read<'de, A: MapAccess<'de>>(map: &mut A, span: &mut Span<'de>)
    -> Result<Option<Self::Borrowed<'de>>, A::Error>;

    /// The Arrow type of its field in the `eventParams` column.
    #[cfg(feature = "arrow")]
    fn data_type() -> arrow::datatypes::DataType;

    /// Appends `value` to field `index` of the `eventParams` builder; false when the value could
    /// not be read, and was stored as null.
    #[cfg(feature = "arrow")]
    fn append(builder: &mut arrow::array::StructBuilder, index: usize, value: Option<&Self::Owned>) -> bool;
}

/// A string.
pub(crate) enum Text {}

/// A whole number from -2^31 to 2^31 - 1.
pub(crate) enum Int32 {}

/// A finite number.
pub(crate) enum Float {}

/// A client's date and time ([`parse_client_time`]): [`Text`] that must read as a time, kept as sent
/// and stored as a timestamp.
pub(crate) enum ClientTime {}

/// A number of the one-pass parser, read from its text, which the record keeps when it is the one
/// serde_json writes for the number (`null` the record leaves out).
fn read_number<'de, A, T>(
    map: &mut A,
    span: &mut Span<'de>,
    written: impl Fn(&T, &str) -> bool,
) -> Result<Option<T>, A::Error>
where
    A: MapAccess<'de>,
    T: Deserialize<'de>,
{
    let raw: &RawValue = map.next_value()?;
    let value: Option<T> = serde_json::from_str(raw.get()).map_err(de::Error::custom)?;
    span.raw(raw);
    span.copyable &= value.as_ref().is_some_and(|v| written(v, raw.get()));
    Ok(value)
}

impl ParamKind for Text {
    type Owned = String;
    type Borrowed<'a> = Cow<'a, str>;

    fn from_value(value: Value, path: &'static str, problems: &mut Vec<FieldProblem>) -> Option<String> {
        match value {
            Value::String(s) => Some(s),
            other => {
                problems.push(FieldProblem::expected(path, "a string", &other));
                None
            }
        }
    }

    fn into_owned(value: Cow<'_, str>) -> String {
        value.into_owned()
    }

    fn write(value: &Cow<'_, str>, out: &mut Vec<u8>) -> serde_json::Result<()> {
        crate::json::write_str(out, value);
        Ok(())
    }

    fn read<'de, A: MapAccess<'de>>(map: &mut A, span: &mut Span<'de>) -> Result<Option<Cow<'de, str>>, A::Error> {
        let value = text(map)?;
        span.text(&value);
        Ok(value)
    }

    #[cfg(feature = "arrow")]
    fn data_type() -> arrow::datatypes::DataType {
        arrow::datatypes::DataType::Utf8
    }

    #[cfg(feature = "arrow")]
    fn append(builder: &mut arrow::array::StructBuilder, index: usize, value: Option<&String>) -> bool {
        if let Some(field) = builder.field_builder::<arrow::array::StringBuilder>(index) {
            field.append_option(value);
        }
        true
    }
}

impl ParamKind for Int32 {
    type Owned = i32;
    type Borrowed<'a> = i32;

    fn from_value(value: Value, path: &'static str, problems: &mut Vec<FieldProblem>) -> Option<i32> {
        let whole = match &value {
            Value::Number(n) => n.as_i64().and_then(|n| i32::try_from(n).ok()),
            _ => None,
        };
        if whole.is_none() {
            problems.push(FieldProblem::expected(
                path,
                "a whole number from -2147483648 to 2147483647",
                &value,
            ));
        }
        whole
    }

    fn into_owned(value: i32) -> i32 {
        value
    }

    fn write(value: &i32, out: &mut Vec<u8>) -> serde_json::Result<()> {
        write_json(out, value)
    }

    fn read<'de, A: MapAccess<'de>>(map: &mut A, span: &mut Span<'de>) -> Result<Option<i32>, A::Error> {
        // A number read as an `i32` is a whole number without sign, fraction or exponent to spare
        // (serde_json reads `-0`, `1.0` and `1e2` as floats), which is how serde_json writes it.
        read_number(map, span, |_, _| true)
    }

    #[cfg(feature = "arrow")]
    fn data_type() -> arrow::datatypes::DataType {
        arrow::datatypes::DataType::Int32
    }

    #[cfg(feature = "arrow")]
    fn append(builder: &mut arrow::array::StructBuilder, index: usize, value: Option<&i32>) -> bool {
        if let Some(field) = builder.field_builder::<arrow::array::Int32Builder>(index) {
            field.append_option(value.copied());
        }
        true
    }
}

impl ParamKind for Float {
    type Owned = f64;
    type Borrowed<'a> = f64;

    fn from_value(value: Value, path: &'static str, problems: &mut Vec<FieldProblem>) -> Option<f64> {
        match value {
            Value::Number(n) => n.as_f64().filter(|f| f.is_finite()),
            other => {
                problems.push(FieldProblem::expected(path, "a number", &other));
                None
            }
        }
    }

    fn into_owned(value: f64) -> f64 {
        value
    }

    fn write(value: &f64, out: &mut Vec<u8>) -> serde_json::Result<()> {
        write_json(out, value)
    }

    fn read<'de, A: MapAccess<'de>>(map: &mut A, span: &mut Span<'de>) -> Result<Option<f64>, A::Error> {
        read_number(map, span, |n: &f64, text| written_as(*n, text))
    }

    #[cfg(feature = "arrow")]
    fn data_type() -> arrow::datatypes::DataType {
        arrow::datatypes::DataType::Float64
    }

    #[cfg(feature = "arrow")]
    fn append(builder: &mut arrow::array::StructBuilder, index: usize, value: Option<&f64>) -> bool {
        if let Some(field) = builder.field_builder::<arrow::array::Float64Builder>(index) {
            field.append_option(value.copied());
        }
        true
    }
}

impl ParamKind for ClientTime {
    type Owned = String;
    type Borrowed<'a> = Cow<'a, str>;

    fn from_value(value: Value, path: &'static str, problems: &mut Vec<FieldProblem>) -> Option<String> {
        let text = Text::from_value(value, path, problems)?;
        match parse_client_time(&text) {
            Ok(_) => Some(text),
            Err(err) => {
                problems.push(FieldProblem::new(path, err.to_string()));
                None
            }
        }
    }

    fn into_owned(value: Cow<'_, str>) -> String {
        Text::into_owned(value)
    }

    fn write(value: &Cow<'_, str>, out: &mut Vec<u8>) -> serde_json::Result<()> {
        Text::write(value, out)
    }

    fn read<'de, A: MapAccess<'de>>(map: &mut A, span: &mut Span<'de>) -> Result<Option<Cow<'de, str>>, A::Error> {
        let value = Text::read(map, span)?;
        if let Some(text) = &value
            && parse_client_time(text).is_err()
        {
            return Err(de::Error::custom("a client time"));
        }
        Ok(value)
    }

    #[cfg(feature = "arrow")]
    fn data_type() -> arrow::datatypes::DataType {
        arrow::datatypes::DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, Some("UTC".into()))
    }

    #[cfg(feature = "arrow")]
    fn append(builder: &mut arrow::array::StructBuilder, index: usize, value: Option<&String>) -> bool {
        let time = value.map(|text| parse_client_time(text));
        if let Some(field) = builder.field_builder::<arrow::array::TimestampMicrosecondBuilder>(index) {
            field.append_option(
                time.as_ref()
                    .and_then(|t| t.as_ref().ok())
                    .map(|t| t.timestamp_micros()),
            );
        }
        !matches!(time, Some(Err(_)))
    }
}

/// Defines everything that follows from the list of typed parameters (see the module's doc).
macro_rules! event_params {
    ($( $(#[$doc:meta])* $field:ident: $type:ty as $kind:ty = $name:literal, )*) => {
        /// `eventParams`: the typed parameters, and any other parameter as sent.
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
        pub struct EventParams {
            $(
                $(#[$doc])*
                #[serde(rename = $name, default, skip_serializing_if = "Option::is_none")]
                pub $field: Option<$type>,
            )*
            /// Every other parameter, as sent.
            #[serde(flatten)]
            pub extra: Map<String, Value>,
        }

        /// Names of the parameters the model reads itself (none of them is ever in `extra`), in
        /// the order of the `eventParams` column's fields.
        pub const PARAM_FIELDS: &[&str] = &[$($name),*];

        /// The position of each typed parameter: its bit in the parser's set of keys seen, and
        /// its field in the Arrow struct.
        #[allow(non_camel_case_types, reason = "one variant per parameter, named as its field")]
        #[derive(Clone, Copy)]
        enum Param {
            $($field),*
        }

        impl EventParams {
            /// Reads parameters from a JSON value, recording every problem (field names prefixed
            /// with `eventParams.`) instead of stopping at the first.
            pub(crate) fn from_value(value: Value, problems: &mut Vec<FieldProblem>) -> Option<Self> {
                let mut map = match value {
                    Value::Null => return None,
                    Value::Object(map) => map,
                    other => {
                        problems.push(FieldProblem::expected(EVENT_PARAMS, "an object", &other));
                        return None;
                    }
                };
                Some(Self {
                    $(
                        $field: match map.remove($name) {
                            None | Some(Value::Null) => None,
                            Some(value) => <$kind as ParamKind>::from_value(
                                value,
                                concat!("eventParams.", $name),
                                problems,
                            ),
                        },
                    )*
                    extra: map,
                })
            }

            /// Appends `params` as one row of the `eventParams` struct column; false when a value
            /// could not be read, and was stored as null.
            #[cfg(feature = "arrow")]
            pub(crate) fn append_arrow(params: Option<&Self>, builder: &mut arrow::array::StructBuilder) -> bool {
                let mut readable = true;
                $(
                    readable &= <$kind as ParamKind>::append(
                        builder,
                        Param::$field as usize,
                        params.and_then(|p| p.$field.as_ref()),
                    );
                )*
                builder.append(params.is_some());
                readable
            }
        }

        /// The fields of the `eventParams` struct column.
        #[cfg(feature = "arrow")]
        pub(crate) fn arrow_fields() -> arrow::datatypes::Fields {
            arrow::datatypes::Fields::from(vec![
                $(arrow::datatypes::Field::new($name, <$kind as ParamKind>::data_type(), true)),*
            ])
        }

        /// `eventParams` of a [`crate::BorrowedEvent`].
        #[derive(Debug, Clone, Default)]
        pub(crate) struct BorrowedParams<'a> {
            $(pub(crate) $field: Option<<$kind as ParamKind>::Borrowed<'a>>,)*
            pub(crate) extra: RawFields<'a>,
        }

        impl<'a> BorrowedParams<'a> {
            /// The same parameters as [`EventParams`]; `None` only if a field's JSON text no
            /// longer reads as a `serde_json::Value`.
            pub(crate) fn into_owned(self) -> Option<EventParams> {
                Some(EventParams {
                    $($field: self.$field.map(<$kind as ParamKind>::into_owned),)*
                    extra: self.extra.into_map()?,
                })
            }

            /// Appends the parameters' JSON object, the fields in the order [`EventParams`]
            /// serialises them.
            pub(crate) fn write(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
                let mut object = Object::start(out);
                $(
                    if let Some(value) = &self.$field {
                        object.key(concat!("\"", $name, "\":"));
                        <$kind as ParamKind>::write(value, object.out)?;
                    }
                )*
                object.raw_fields(&self.extra)?;
                object.end();
                Ok(())
            }

            /// Reads the value of `key` when it is a typed parameter (true), else leaves it unread
            /// (false).
            pub(crate) fn read_typed<A: MapAccess<'a>>(
                &mut self,
                key: &str,
                map: &mut A,
                span: &mut Span<'a>,
            ) -> Result<bool, A::Error> {
                match key {
                    $(
                        $name => {
                            span.known(Param::$field as u32);
                            self.$field = <$kind as ParamKind>::read(map, span)?;
                        }
                    )*
                    _ => return Ok(false),
                }
                Ok(true)
            }
        }

        const _: () = assert!(PARAM_FIELDS.len() <= 64, "the parser keeps one bit per parameter in a u64");
    };
}

event_params! {
    /// The game mode or keyword, e.g. `league`.
    game_keyword: String as Text = "game_keyword",
    /// The game's name.
    app_name: String as Text = "app_name",
    /// Points won or lost.
    score_adjustment: i32 as Int32 = "scoreAdjustment",
    /// `ios`, `android`...
    platform: String as Text = "platform",
    /// The client's version.
    app_version: String as Text = "app_version",
    /// The device (or player); daily active users count these.
    device_id: String as Text = "device_id",
    /// The client's clock when the event happened, as it sent it; see [`EventParams::client_time`].
    client_event_time: String as ClientTime = "client_event_time",
    /// The price of a purchase.
    amount: f64 as Float = "amount",
}

impl EventParams {
    /// `client_event_time` as an instant (see [`parse_client_time`] for the formats); `None` when
    /// the client sent none.
    pub fn client_time(&self) -> Result<Option<chrono::DateTime<chrono::Utc>>, crate::time::TimeError> {
        self.client_event_time.as_deref().map(parse_client_time).transpose()
    }
}
