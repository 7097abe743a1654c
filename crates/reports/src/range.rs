//! `--from` / `--to`: the time range of a report, as a SQL filter that prunes partitions.

use chrono::{DateTime, Days, NaiveDate, NaiveTime, SecondsFormat, TimeDelta, Utc};

use crate::error::ReportError;
use crate::session::{quote_ident, quote_literal};

/// A half-open time range `[from, to)`; either end may be open.
///
/// A bound is RFC 3339 (`2024-06-01T12:00:00Z`, any offset) or a date (`2024-06-01`, UTC). A date
/// in `--from` starts at its first instant; a date in `--to` includes that whole day, so
/// `--from 2024-06-01 --to 2024-06-30` is June.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimeRange {
    /// First instant in the range.
    pub from: Option<DateTime<Utc>>,
    /// First instant after the range.
    pub to: Option<DateTime<Utc>>,
}

impl TimeRange {
    /// The range `--from` and `--to` give. Errors name the argument and say what is expected.
    pub fn parse(from: Option<&str>, to: Option<&str>) -> Result<Self, ReportError> {
        let range = Self {
            from: from.map(|text| parse_bound("--from", text, false)).transpose()?,
            to: to.map(|text| parse_bound("--to", text, true)).transpose()?,
        };
        if let (Some(f), Some(t)) = (range.from, range.to)
            && f >= t
        {
            return Err(ReportError::invalid_argument(
                "--to",
                to.unwrap_or_default(),
                format!("the range is empty: it must end after --from ({})", instant(f)),
            ));
        }
        Ok(range)
    }

    /// A range between two instants.
    pub fn between(from: DateTime<Utc>, to: DateTime<Utc>) -> Self {
        Self {
            from: Some(from),
            to: Some(to),
        }
    }

    /// Whether `t` is in the range.
    pub fn contains(&self, t: DateTime<Utc>) -> bool {
        self.from.is_none_or(|f| t >= f) && self.to.is_none_or(|to| t < to)
    }

    /// Whether the instant `micros` microseconds after the epoch is in the range.
    pub fn contains_micros(&self, micros: i64) -> bool {
        self.from.is_none_or(|f| micros >= f.timestamp_micros())
            && self.to.is_none_or(|to| micros < to.timestamp_micros())
    }

    /// The range up to its end only (everything before `to`).
    pub fn until(&self) -> Self {
        Self {
            from: None,
            to: self.to,
        }
    }

    /// A SQL condition selecting the range on a table partitioned by the date `date_column`
    /// (the UTC date of `time_column`): the date condition lets DataFusion skip the partitions
    /// outside the range, the time condition cuts inside the first and last day. `TRUE` when
    /// the range is unbounded.
    pub fn filter(&self, date_column: &str, time_column: &str) -> String {
        let (date, time) = (quote_ident(date_column), quote_ident(time_column));
        let mut conditions = Vec::new();
        if let Some(from) = self.from {
            conditions.push(format!(
                "{date} >= DATE {}",
                quote_literal(&from.date_naive().to_string())
            ));
            conditions.push(format!("{time} >= {}", timestamp_literal(from)));
        }
        if let Some(to) = self.to {
            let last = to - TimeDelta::microseconds(1);
            conditions.push(format!(
                "{date} <= DATE {}",
                quote_literal(&last.date_naive().to_string())
            ));
            conditions.push(format!("{time} < {}", timestamp_literal(to)));
        }
        if conditions.is_empty() {
            "TRUE".to_owned()
        } else {
            conditions.join(" AND ")
        }
    }

    /// `from` to `to` for people: `2024-06-01 to 2024-06-30` for whole days, instants otherwise.
    pub fn describe(&self) -> String {
        let show = |t: Option<DateTime<Utc>>, end: bool| match t {
            None => "…".to_owned(),
            Some(t) if t.time() == NaiveTime::MIN => {
                let day = if end {
                    t.date_naive().pred_opt().unwrap_or(t.date_naive())
                } else {
                    t.date_naive()
                };
                day.to_string()
            }
            Some(t) => instant(t),
        };
        format!("{} to {}", show(self.from, false), show(self.to, true))
    }
}

/// A timestamp literal DataFusion compares with a `timestamp` (µs, UTC) column.
pub(crate) fn timestamp_literal(t: DateTime<Utc>) -> String {
    format!(
        "arrow_cast({}, 'Timestamp(Microsecond, Some(\"UTC\"))')",
        quote_literal(&instant(t))
    )
}

fn instant(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// One bound: RFC 3339, or a date (its start; with `end`, the start of the next day).
pub(crate) fn parse_bound(argument: &str, text: &str, end: bool) -> Result<DateTime<Utc>, ReportError> {
    let trimmed = text.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(trimmed) {
        return Ok(t.with_timezone(&Utc));
    }
    match NaiveDate::parse_from_str(trimmed, "%Y-%m-%d") {
        Ok(day) => {
            let day = if end {
                day.checked_add_days(Days::new(1))
            } else {
                Some(day)
            };
            day.map(|d| d.and_time(NaiveTime::MIN).and_utc())
                .ok_or_else(|| ReportError::invalid_argument(argument, text, "the date is out of range"))
        }
        Err(_) => Err(ReportError::invalid_argument(
            argument,
            text,
            "expected a date (2024-06-01) or an RFC 3339 time (2024-06-01T12:00:00Z)",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn dates_and_instants() {
        let range = TimeRange::parse(Some("2024-06-01"), Some("2024-06-30")).unwrap();
        assert_eq!(range.from, Some(at("2024-06-01T00:00:00Z")));
        assert_eq!(range.to, Some(at("2024-07-01T00:00:00Z")));
        assert_eq!(range.describe(), "2024-06-01 to 2024-06-30");
        assert!(range.contains(at("2024-06-30T23:59:59Z")));
        assert!(!range.contains(at("2024-07-01T00:00:00Z")));
        let range = TimeRange::parse(Some("2024-06-01T12:00:00+02:00"), None).unwrap();
        assert_eq!(range.from, Some(at("2024-06-01T10:00:00Z")));
        assert_eq!(range.describe(), "2024-06-01T10:00:00Z to …");
        assert_eq!(TimeRange::default().filter("d", "t"), "TRUE");
    }

    #[test]
    fn the_filter_prunes_by_date_and_cuts_by_time() {
        let range = TimeRange::parse(Some("2024-06-01T10:00:00Z"), Some("2024-06-03")).unwrap();
        assert_eq!(
            range.filter("request_date", "request_time"),
            "\"request_date\" >= DATE '2024-06-01' AND \"request_time\" >= arrow_cast('2024-06-01T10:00:00Z', \
             'Timestamp(Microsecond, Some(\"UTC\"))') AND \"request_date\" <= DATE '2024-06-03' AND \"request_time\" < \
             arrow_cast('2024-06-04T00:00:00Z', 'Timestamp(Microsecond, Some(\"UTC\"))')"
        );
        assert_eq!(
            range.until().filter("eventDate", "eventTime"),
            "\"eventDate\" <= DATE '2024-06-03' AND \"eventTime\" < arrow_cast('2024-06-04T00:00:00Z', \
             'Timestamp(Microsecond, Some(\"UTC\"))')"
        );
    }

    #[test]
    fn bad_bounds_name_the_argument() {
        let err = TimeRange::parse(Some("yesterday"), None).unwrap_err().to_string();
        assert!(
            err.starts_with("--from \"yesterday\"") && err.contains("RFC 3339"),
            "{err}"
        );
        let err = TimeRange::parse(Some("2024-06-02"), Some("2024-06-01"))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("--to") && err.contains("empty"), "{err}");
        assert!(TimeRange::parse(None, Some("2024-02-30")).is_err());
    }
}
