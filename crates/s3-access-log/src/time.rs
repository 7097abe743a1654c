//! The request time, `dd/Mon/yyyy:HH:MM:SS ±hhmm`, normalised to UTC.

use std::cell::Cell;

/// The date, hour and offset of a request time (`06/Feb/2019:00` and ` +0000`), and the time the
/// hour begins, microseconds since the epoch.
type Hour = ([u8; 14], [u8; 6], i64);

thread_local! {
    /// The hour of the last time this thread parsed in full: the lines of a log object are in
    /// order of time, and nearly all share their hour with the line before.
    static LAST_HOUR: Cell<Option<Hour>> = const { Cell::new(None) };
}

/// Microseconds since the Unix epoch, UTC, of an access-log time such as `06/Feb/2019:00:00:38 +0000`.
///
/// The format is fixed-width, so it is read by position rather than with a format string, which
/// would cost more than the rest of the line. When the date, hour and offset are those of the last
/// time parsed on this thread, only the minutes and seconds are read.
pub fn parse_request_time(text: &[u8]) -> Option<i64> {
    let text: &[u8; 26] = text.try_into().ok()?;
    let (hour, minute_second, offset) = (&text[..14], &text[14..20], &text[20..]);
    let [b':', n1, n2, b':', s1, s2] = *minute_second else {
        return None;
    };
    let (minute, second) = (digits(&[n1, n2])?, digits(&[s1, s2])?);
    if minute >= 60 || second >= 60 {
        return None;
    }
    let within_hour = i64::from(minute * 60 + second) * 1_000_000;
    if let Some((last_hour, last_offset, start)) = LAST_HOUR.get()
        && last_hour == hour
        && last_offset == offset
    {
        return Some(start + within_hour);
    }
    let time = parse_in_full(text)?;
    if let (Ok(hour), Ok(offset)) = (hour.try_into(), offset.try_into()) {
        LAST_HOUR.set(Some((hour, offset, time - within_hour)));
    }
    Some(time)
}

fn parse_in_full(text: &[u8; 26]) -> Option<i64> {
    let [
        d1,
        d2,
        b'/',
        m1,
        m2,
        m3,
        b'/',
        y1,
        y2,
        y3,
        y4,
        b':',
        h1,
        h2,
        b':',
        n1,
        n2,
        b':',
        s1,
        s2,
        b' ',
        sign,
        oh1,
        oh2,
        om1,
        om2,
    ] = *text
    else {
        return None;
    };
    let month = match [m1, m2, m3] {
        [b'J', b'a', b'n'] => 1,
        [b'F', b'e', b'b'] => 2,
        [b'M', b'a', b'r'] => 3,
        [b'A', b'p', b'r'] => 4,
        [b'M', b'a', b'y'] => 5,
        [b'J', b'u', b'n'] => 6,
        [b'J', b'u', b'l'] => 7,
        [b'A', b'u', b'g'] => 8,
        [b'S', b'e', b'p'] => 9,
        [b'O', b'c', b't'] => 10,
        [b'N', b'o', b'v'] => 11,
        [b'D', b'e', b'c'] => 12,
        _ => return None,
    };
    let day = digits(&[d1, d2])?;
    let year = digits(&[y1, y2, y3, y4])?;
    let (hour, minute, second) = (digits(&[h1, h2])?, digits(&[n1, n2])?, digits(&[s1, s2])?);
    if day == 0 || day > days_in_month(year, month) || hour >= 24 || minute >= 60 || second >= 60 {
        return None;
    }
    let (oh, om) = (digits(&[oh1, oh2])?, digits(&[om1, om2])?);
    if om >= 60 {
        return None;
    }
    let offset_secs = i64::from(oh * 3600 + om * 60);
    let offset_secs = match sign {
        b'+' => offset_secs,
        b'-' => -offset_secs,
        _ => return None,
    };
    let local = days_from_civil(year, month, day) * 86_400 + i64::from(hour * 3600 + minute * 60 + second);
    Some((local - offset_secs) * 1_000_000)
}

fn is_leap(year: u32) -> bool {
    year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400))
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a valid date of the proleptic Gregorian calendar (year 0 to 9999), by
/// arithmetic: a calendar library costs more than the rest of the line.
fn days_from_civil(year: u32, month: u32, day: u32) -> i64 {
    // Years start in March, so that the leap day ends them; 400-year eras from year 0.
    let year = i64::from(year) - i64::from(month <= 2);
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = i64::from((153 * ((month + 9) % 12) + 2) / 5 + day - 1);
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[inline(always)]
fn digits(bytes: &[u8]) -> Option<u32> {
    bytes.iter().try_fold(0u32, |acc, &b| {
        let digit = b.wrapping_sub(b'0');
        (digit < 10).then(|| acc * 10 + u32::from(digit))
    })
}

/// Days since the Unix epoch of the UTC date of `micros`.
pub fn date_of(micros: i64) -> i32 {
    micros.div_euclid(86_400_000_000) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Option<i64> {
        parse_request_time(s.as_bytes())
    }

    #[test]
    fn utc_and_offsets() {
        assert_eq!(at("06/Feb/2019:00:00:38 +0000"), Some(1_549_411_238_000_000));
        assert_eq!(at("06/Feb/2019:02:00:38 +0200"), Some(1_549_411_238_000_000));
        assert_eq!(at("05/Feb/2019:19:30:38 -0430"), Some(1_549_411_238_000_000));
        assert_eq!(at("31/Dec/1969:23:59:59 +0000"), Some(-1_000_000));
    }

    #[test]
    fn times_within_the_last_hour_are_read_like_any_other() {
        // Each check runs twice: parsed in full, then with the hour of the line before.
        let cases = [
            ("06/Feb/2019:00:00:38 +0000", Some(1_549_411_238_000_000)),
            ("06/Feb/2019:00:59:59 +0000", Some(1_549_414_799_000_000)),
            ("06/Feb/2019:00:60:00 +0000", None),
            ("06/Feb/2019:00:00:60 +0000", None),
            ("06/Feb/2019:00:0x:00 +0000", None),
            ("06/Feb/2019:00-00:38 +0000", None),
            ("06/Feb/2019:00:00-38 +0000", None),
            ("06/Feb/2019:00:00:38+0000 ", None),
            (
                "06/Feb/2019:00:00:38 +0100",
                Some(1_549_411_238_000_000 - 3_600_000_000),
            ),
            ("06/Feb/2019:00:00:38 *0000", None),
            ("06/Feb/2019:01:00:00 +0000", Some(1_549_414_800_000_000)),
            ("29/Feb/2019:00:00:00 +0000", None),
            ("06/Feb/2019:00:00:38 +0000 ", None),
        ];
        for (text, expected) in cases {
            assert_eq!(at("06/Feb/2019:00:12:34 +0000"), Some(1_549_411_954_000_000));
            assert_eq!(at(text), expected, "{text} after a time of the same hour");
            assert_eq!(at(text), expected, "{text} again");
        }
        // Other threads have hours of their own.
        std::thread::spawn(|| assert_eq!(at("06/Feb/2019:00:00:38 +0000"), Some(1_549_411_238_000_000)))
            .join()
            .unwrap();
    }

    #[test]
    fn rejects_malformed_times() {
        for bad in [
            "",
            "06/Feb/2019:00:00:38",
            "06/Foo/2019:00:00:38 +0000",
            "31/Feb/2019:00:00:38 +0000",
            "06/Feb/2019:24:00:38 +0000",
            "06/Feb/2019:00:00:38 *0000",
            "06/Feb/2019:00:00:38 +0060",
            "0x/Feb/2019:00:00:38 +0000",
            "06/Feb/2019:00:00:38 +00000",
        ] {
            assert_eq!(at(bad), None, "{bad}");
        }
    }

    #[test]
    fn agrees_with_chrono_on_every_day_and_odd_times() {
        use chrono::{NaiveDate, NaiveDateTime, NaiveTime};
        let months = [
            "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
        ];
        let years = (0..=2500)
            .step_by(7)
            .chain([1600, 1700, 1900, 1970, 2000, 2024, 2100, 9999]);
        let clocks = [
            (0, 0, 0, "+0000"),
            (23, 59, 59, "-0930"),
            (12, 30, 15, "+9959"),
            (0, 0, 1, "-0001"),
        ];
        for year in years {
            for (m, name) in months.iter().enumerate() {
                for day in 0..=32 {
                    let (h, n, s, offset) = clocks[(year as usize + day as usize) % clocks.len()];
                    let text = format!("{day:02}/{name}/{year:04}:{h:02}:{n:02}:{s:02} {offset}");
                    let expected = NaiveDate::from_ymd_opt(year, m as u32 + 1, day).map(|date| {
                        let time = NaiveTime::from_hms_opt(h, n, s).unwrap();
                        let sign = if offset.starts_with('-') { -1 } else { 1 };
                        let offset_secs: i64 =
                            offset[1..3].parse::<i64>().unwrap() * 3600 + offset[3..].parse::<i64>().unwrap() * 60;
                        (NaiveDateTime::new(date, time).and_utc().timestamp() - sign * offset_secs) * 1_000_000
                    });
                    assert_eq!(at(&text), expected, "{text}");
                }
            }
        }
    }

    #[test]
    fn date_of_negative_times() {
        assert_eq!(date_of(-1), -1);
        assert_eq!(date_of(0), 0);
        assert_eq!(date_of(86_400_000_000), 1);
    }
}
