//! The request time, `dd/Mon/yyyy:HH:MM:SS ±hhmm`, normalised to UTC.

use chrono::{NaiveDate, NaiveDateTime, NaiveTime};

const MONTHS: [&[u8; 3]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

/// Microseconds since the Unix epoch, UTC, of an access-log time such as `06/Feb/2019:00:00:38 +0000`.
///
/// The format is fixed-width, so it is read by position rather than with a format string, which
/// would cost more than the rest of the line.
pub fn parse_request_time(text: &[u8]) -> Option<i64> {
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
    let month = MONTHS.iter().position(|m| **m == [m1, m2, m3])? as u32 + 1;
    let day = digits(&[d1, d2])?;
    let year = digits(&[y1, y2, y3, y4])?;
    let time = NaiveTime::from_hms_opt(digits(&[h1, h2])?, digits(&[n1, n2])?, digits(&[s1, s2])?)?;
    let date = NaiveDate::from_ymd_opt(year as i32, month, day)?;
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
    let local = NaiveDateTime::new(date, time).and_utc().timestamp();
    Some((local - offset_secs) * 1_000_000)
}

fn digits(bytes: &[u8]) -> Option<u32> {
    bytes.iter().try_fold(0u32, |acc, &b| {
        b.is_ascii_digit().then(|| acc * 10 + u32::from(b - b'0'))
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
    fn date_of_negative_times() {
        assert_eq!(date_of(-1), -1);
        assert_eq!(date_of(0), 0);
        assert_eq!(date_of(86_400_000_000), 1);
    }
}
