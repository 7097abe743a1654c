//! Times on the wire: `eventTime` in epoch seconds, and the client's `client_event_time`.

use chrono::{DateTime, NaiveDateTime, Utc};

/// Why a time could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeError {
    /// A `client_event_time` in none of the accepted formats.
    #[error("expected a date and time like 2024-06-01T12:00:00Z or 2024-06-01 12:00:00.123, found {0:?}")]
    Format(String),
    /// Epoch seconds that are not a finite number of a representable date.
    #[error("epoch seconds out of range: {0}")]
    OutOfRange(String),
}

/// The instant `seconds` after the Unix epoch, to the microsecond. Whole and fractional seconds
/// are both accepted, as producers write either.
pub fn from_epoch_seconds(seconds: f64) -> Result<DateTime<Utc>, TimeError> {
    // 1e14 s is far beyond the year 9999; the bound keeps the microsecond count inside i64.
    if !seconds.is_finite() || seconds.abs() > 1e14 {
        return Err(TimeError::OutOfRange(seconds.to_string()));
    }
    let micros = (seconds * 1e6).round() as i64;
    DateTime::from_timestamp_micros(micros).ok_or_else(|| TimeError::OutOfRange(seconds.to_string()))
}

/// The instant `seconds` (whole) after the Unix epoch.
pub fn from_whole_epoch_seconds(seconds: i64) -> Result<DateTime<Utc>, TimeError> {
    DateTime::from_timestamp(seconds, 0).ok_or_else(|| TimeError::OutOfRange(seconds.to_string()))
}

/// `time` truncated to the whole second, as the server stamps `eventTime`.
pub fn whole_second(time: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp(time.timestamp(), 0).unwrap_or(time)
}

/// Reads a client's `client_event_time`: RFC 3339 (`2024-06-01T12:00:00.5+02:00`, `...Z`), the same
/// with a space instead of the `T`, or a date and time without an offset (`2024-06-01 12:00:00.123`,
/// as Python's `str(datetime)` writes it), which is taken as UTC. Fractions of a second are optional.
pub fn parse_client_time(text: &str) -> Result<DateTime<Utc>, TimeError> {
    let trimmed = text.trim();
    // The common case first: a date and time without an offset. No text reads both ways (it would
    // have two offsets once the `Z` is appended), so the order changes no answer, only how many
    // parses the common case takes.
    if let Some(time) = without_offset(trimmed) {
        return Ok(time);
    }
    if let Ok(time) = DateTime::parse_from_rfc3339(trimmed) {
        return Ok(time.with_timezone(&Utc));
    }
    by_formats(trimmed).ok_or_else(|| TimeError::Format(text.chars().take(64).collect()))
}

/// The longest text [`without_offset`] reads (a date and time with nine decimals is 29 bytes).
const WITHOUT_OFFSET_MAX: usize = 47;

/// A date and time without an offset (`2024-06-01 12:00:00.123`, or with a `T`), as most clients
/// write it, read as RFC 3339 once a `Z` is appended: cheaper than chrono's format strings, which
/// are interpreted item by item and tried one after the other in [`by_formats`]. Those accept every
/// text this does and read the same instant from it (a test below compares them). `None` for
/// anything else.
fn without_offset(trimmed: &str) -> Option<DateTime<Utc>> {
    let bytes = trimmed.as_bytes();
    // chrono's RFC 3339 parser also takes a lowercase `t` as separator; the formats do not.
    let separator_ok = matches!(bytes.get(10), Some(b' ' | b'T'));
    if bytes.len() > WITHOUT_OFFSET_MAX || !separator_ok || !bytes.last().is_some_and(u8::is_ascii_digit) {
        return None;
    }
    let mut buffer = [0u8; WITHOUT_OFFSET_MAX + 1];
    buffer[..bytes.len()].copy_from_slice(bytes);
    buffer[bytes.len()] = b'Z';
    let with_z = std::str::from_utf8(&buffer[..=bytes.len()]).ok()?;
    DateTime::parse_from_rfc3339(with_z)
        .ok()
        .map(|time| time.with_timezone(&Utc))
}

/// The formats of [`parse_client_time`] other than RFC 3339: a space for the `T` with an offset,
/// and no offset at all (UTC).
fn by_formats(trimmed: &str) -> Option<DateTime<Utc>> {
    for format in ["%Y-%m-%d %H:%M:%S%.f%:z", "%Y-%m-%d %H:%M:%S%.f%z"] {
        if let Ok(time) = DateTime::parse_from_str(trimmed, format) {
            return Some(time.with_timezone(&Utc));
        }
    }
    for format in ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f"] {
        if let Ok(time) = NaiveDateTime::parse_from_str(trimmed, format) {
            return Some(time.and_utc());
        }
    }
    None
}

/// Serde of `eventTime`: epoch seconds, written as a whole number when the time is a whole second
/// (the server's stamps always are) and with a fraction otherwise; read from either.
pub mod epoch_seconds {
    use chrono::{DateTime, Timelike, Utc};
    use serde::{Deserialize, Deserializer, Serializer, de};

    /// Writes `time` as epoch seconds.
    pub fn serialize<S: Serializer>(time: &DateTime<Utc>, serializer: S) -> Result<S::Ok, S::Error> {
        if time.nanosecond() == 0 {
            serializer.serialize_i64(time.timestamp())
        } else {
            serializer.serialize_f64(time.timestamp_micros() as f64 / 1e6)
        }
    }

    /// Reads epoch seconds, whole or fractional.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<DateTime<Utc>, D::Error> {
        let value = serde_json::Number::deserialize(deserializer)?;
        super::from_number(&value).map_err(de::Error::custom)
    }
}

/// The instant of a JSON number of epoch seconds.
pub(crate) fn from_number(number: &serde_json::Number) -> Result<DateTime<Utc>, TimeError> {
    let time = match number.as_i64() {
        Some(whole) => from_whole_epoch_seconds(whole),
        None => from_epoch_seconds(number.as_f64().unwrap_or(f64::NAN)),
    };
    // The number as written (`1e300`), not expanded to its 300 digits.
    time.map_err(|_| TimeError::OutOfRange(number.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn client_times_in_every_accepted_format() {
        let cases = [
            ("2024-06-01T12:00:00Z", "2024-06-01T12:00:00Z"),
            ("2024-06-01T14:00:00.5+02:00", "2024-06-01T12:00:00.5Z"),
            ("2024-06-01 12:00:00", "2024-06-01T12:00:00Z"),
            ("2024-06-01 12:00:00.123456", "2024-06-01T12:00:00.123456Z"),
            ("2024-06-01T12:00:00.123", "2024-06-01T12:00:00.123Z"),
            ("2024-06-01 13:00:00+01:00", "2024-06-01T12:00:00Z"),
            ("2024-06-01 13:00:00.25+0100", "2024-06-01T12:00:00.25Z"),
            ("  2024-06-01T12:00:00Z ", "2024-06-01T12:00:00Z"),
        ];
        for (text, want) in cases {
            assert_eq!(parse_client_time(text).unwrap(), utc(want), "{text}");
        }
    }

    #[test]
    fn the_shortcut_without_offset_reads_what_the_formats_read() {
        let texts = [
            "2024-06-01 12:00:00",
            "2024-06-01T12:00:00",
            "2024-06-01t12:00:00",
            "2024-06-01 12:00:00.5",
            "2024-06-01 12:00:00.123456789",
            "2024-06-01 12:00:00.1234567891234",
            "2024-06-01 12:00:00.",
            "2024-06-01 23:59:60",
            "2024-06-01 23:59:60.5",
            "2024-06-01 24:00:00",
            "2024-02-30 12:00:00",
            "2024-02-29 12:00:00",
            "2023-02-29 12:00:00",
            "2024-6-1 12:00:00",
            "2024-06-01 12:0:00",
            "2024-06-01 12:00:00+02",
            "2024-06-01 12:00:00+0200",
            "2024-06-01 12:00:00-00:00",
            "0000-01-01 00:00:00",
            "9999-12-31 23:59:59.999999999",
            "+2024-06-01 12:00:00",
            "2024-06-01  12:00:00",
            "2024-06-01_12:00:00",
            "2024-06-01 12:00:00.1234567890123456789012345678",
        ];
        for text in texts {
            if let Some(time) = without_offset(text) {
                assert_eq!(by_formats(text), Some(time), "{text}");
            }
        }
        assert!(without_offset("2024-06-01 12:00:00.123").is_some());
        assert!(without_offset("2024-06-01t12:00:00").is_none());
        assert!(parse_client_time("2024-06-01t12:00:00").is_err());
    }

    #[test]
    fn bad_client_times_say_what_is_expected() {
        for bad in [
            "",
            "yesterday",
            "2024-06-01",
            "2024-13-01 00:00:00",
            "1717243200",
            "12:00:00",
        ] {
            let err = parse_client_time(bad).unwrap_err();
            assert!(err.to_string().starts_with("expected a date and time"), "{bad}: {err}");
        }
        let long = "x".repeat(1000);
        assert!(parse_client_time(&long).unwrap_err().to_string().len() < 200);
    }

    #[test]
    fn epoch_seconds_whole_and_fractional() {
        assert_eq!(
            from_whole_epoch_seconds(1_717_243_200).unwrap(),
            utc("2024-06-01T12:00:00Z")
        );
        assert_eq!(
            from_epoch_seconds(1_717_243_200.25).unwrap(),
            utc("2024-06-01T12:00:00.25Z")
        );
        assert!(from_epoch_seconds(f64::NAN).is_err());
        assert!(from_epoch_seconds(1e300).is_err());
        assert!(from_whole_epoch_seconds(i64::MAX).is_err());
        assert_eq!(
            whole_second(utc("2024-06-01T12:00:00.999Z")),
            utc("2024-06-01T12:00:00Z")
        );
    }

    #[test]
    fn epoch_seconds_serde_round_trip() {
        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
        struct T {
            #[serde(with = "epoch_seconds")]
            t: DateTime<Utc>,
        }
        let whole = T {
            t: utc("2024-06-01T12:00:00Z"),
        };
        assert_eq!(serde_json::to_string(&whole).unwrap(), r#"{"t":1717243200}"#);
        let frac = T {
            t: utc("2024-06-01T12:00:00.5Z"),
        };
        assert_eq!(serde_json::to_string(&frac).unwrap(), r#"{"t":1717243200.5}"#);
        for t in [whole, frac] {
            let json = serde_json::to_string(&t).unwrap();
            assert_eq!(serde_json::from_str::<T>(&json).unwrap(), t);
        }
        assert!(serde_json::from_str::<T>(r#"{"t":"1717243200"}"#).is_err());
    }
}
