//! Sessions of the game report: how often and how long people play.
//!
//! A device's events, in `eventTime` order (ties by `eventId`), are cut into sessions: one starts
//! at the device's first event, at a `sessionStart`, after a `sessionEnd`, and after a gap of more
//! than the inactivity gap (30 minutes unless set) since the device's previous event. A session
//! lasts from its first event to its last, and belongs to the day it starts on.

use chrono::{NaiveDate, TimeDelta};
use serde::Serialize;

use super::EVENTS;
use crate::{ReportError, ReportSession, TextTable, figures};

/// The inactivity after which the next event starts a new session, unless set.
pub const DEFAULT_GAP: TimeDelta = TimeDelta::minutes(30);

/// The session lengths counted, as `(label, up to this many seconds)`; the last has no bound.
pub const LENGTHS: [(&str, Option<i64>); 6] = [
    ("under 1 min", Some(60)),
    ("1-5 min", Some(300)),
    ("5-15 min", Some(900)),
    ("15-30 min", Some(1800)),
    ("30-60 min", Some(3600)),
    ("60 min or more", None),
];

/// Sessions that started on one day.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DaySessions {
    /// The UTC day.
    #[serde(serialize_with = "super::date_text")]
    pub date: NaiveDate,
    /// Sessions.
    pub sessions: i64,
    /// Devices that had them.
    pub devices: i64,
    /// `sessions / devices`.
    pub sessions_per_user: Option<f64>,
    /// Their median length, in seconds.
    pub median_seconds: Option<f64>,
}

/// The sessions KPIs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Sessions {
    /// The inactivity gap used, in minutes.
    pub gap_minutes: i64,
    /// Per day.
    pub days: Vec<DaySessions>,
    /// Sessions by length, in the buckets of [`LENGTHS`].
    pub lengths: Vec<(String, i64)>,
}

/// The sessions of the events in `within` (a filter on `day` and `t`), cut by `gap`.
pub async fn sessions(session: &ReportSession, within: &str, gap: TimeDelta) -> Result<Sessions, ReportError> {
    let gap_seconds = gap.num_seconds().max(1);
    let buckets = LENGTHS
        .iter()
        .enumerate()
        .map(|(k, (_, bound))| {
            let low = k.checked_sub(1).and_then(|p| LENGTHS[p].1).unwrap_or(i64::MIN);
            match bound {
                Some(high) => format!("sum(CASE WHEN len >= {low} AND len < {high} THEN 1 ELSE 0 END) AS l{k}"),
                None => format!("sum(CASE WHEN len >= {low} THEN 1 ELSE 0 END) AS l{k}"),
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    let cut = format!(
        "WITH e AS (SELECT device, id, t, name, \
           lag(t) OVER (PARTITION BY device ORDER BY t, id) AS prev_t, \
           lag(name) OVER (PARTITION BY device ORDER BY t, id) AS prev_name \
           FROM {EVENTS} WHERE device IS NOT NULL AND {within}), \
         s AS (SELECT device, id, t, CASE WHEN prev_t IS NULL OR name = 'sessionStart' OR prev_name = 'sessionEnd' \
           OR date_part('epoch', t) - date_part('epoch', prev_t) > {gap_seconds} THEN 1 ELSE 0 END AS starts FROM e), \
         n AS (SELECT device, t, sum(starts) OVER (PARTITION BY device ORDER BY t, id \
           ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS session FROM s), \
         sessions AS (SELECT device, session, min(t) AS started, \
           CAST(date_part('epoch', max(t)) - date_part('epoch', min(t)) AS DOUBLE) AS len FROM n GROUP BY device, session)"
    );
    let rows = session
        .query(
            "sessions per day",
            &format!(
                "{cut} SELECT CAST(started AS DATE) AS day, count(*) AS sessions, count(DISTINCT device) AS devices, \
                 median(len) AS median_len, {buckets} FROM sessions GROUP BY 1 ORDER BY 1"
            ),
        )
        .await?;
    let (dates, counts, devices, medians) = (
        rows.dates("day")?,
        rows.i64s("sessions")?,
        rows.i64s("devices")?,
        rows.f64s("median_len")?,
    );
    let days = (0..rows.len())
        .filter_map(|i| {
            let (sessions, devices) = (counts[i].unwrap_or(0), devices[i].unwrap_or(0));
            Some(DaySessions {
                date: dates[i]?,
                sessions,
                devices,
                sessions_per_user: (devices > 0).then(|| sessions as f64 / devices as f64),
                median_seconds: medians[i],
            })
        })
        .collect();
    // The lengths over the range: each day's buckets added up (the sessions are cut once).
    let mut lengths = Vec::with_capacity(LENGTHS.len());
    for (k, (label, _)) in LENGTHS.iter().enumerate() {
        let n = rows.i64s(&format!("l{k}"))?.iter().flatten().sum();
        lengths.push(((*label).to_owned(), n));
    }
    Ok(Sessions {
        gap_minutes: gap.num_minutes(),
        days,
        lengths,
    })
}

impl Sessions {
    /// The days as a table for people.
    pub fn days_table(&self) -> TextTable {
        let mut table = TextTable::new(["date", "sessions", "devices", "sessions per user", "median length"]);
        for d in &self.days {
            table.push([
                d.date.to_string(),
                figures::count(d.sessions.max(0) as u64),
                figures::count(d.devices.max(0) as u64),
                d.sessions_per_user
                    .map_or_else(|| "-".to_owned(), |v| format!("{v:.2}")),
                d.median_seconds
                    .map_or_else(|| "-".to_owned(), |s| format!("{:.1} min", s / 60.0)),
            ]);
        }
        table
    }
}
