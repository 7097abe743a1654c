//! Retention cohorts of the game report: do players come back?
//!
//! A device's cohort is the UTC day of its first event in the range (and the platform of that
//! first day's events, the smallest name if several). A cohort's day-N retention is the share of
//! its devices with an event on day N after that first day, for N = 1, 7 and 30 (classic
//! retention); it is unknown (null) while the range's last day is before the cohort's day N, and
//! until that day has ended (by the end of the range and by now): a day that has only begun would
//! read as a fall of retention.

use chrono::NaiveDate;
use serde::Serialize;

use super::events::ACTIVE;
use crate::error::ReportError;
use crate::figures;
use crate::session::ReportSession;
use crate::text::TextTable;

/// The days after the first one that retention is measured on.
pub(super) const RETENTION_DAYS: [i64; 3] = [1, 7, 30];

/// One cohort.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cohort {
    /// The first-seen day.
    #[serde(serialize_with = "super::date_text")]
    pub date: NaiveDate,
    /// The platform, or `None` for all platforms together.
    pub platform: Option<String>,
    /// Devices first seen that day.
    pub devices: i64,
    /// Of them, those seen again on day 1, 7 and 30 after (`None` when that day has not ended
    /// within the range).
    pub returned: [Option<i64>; 3],
    /// Whether events may still arrive on time for the cohort's first day or a day its returns
    /// are counted on.
    pub provisional: bool,
}

impl Cohort {
    /// The share of the cohort seen again on day `RETENTION_DAYS[k]`.
    pub fn retention(&self, k: usize) -> Option<f64> {
        let returned = self.returned.get(k).copied().flatten()?;
        (self.devices > 0).then(|| returned as f64 / self.devices as f64)
    }
}

/// The cohorts of the devices active (`__game_kpi_active`): all platforms first, then by
/// platform, each by day. Days before `complete_before` have ended: a cohort's day N counts only if
/// it is one of them and has events.
pub(super) async fn cohorts(session: &ReportSession, complete_before: NaiveDate) -> Result<Vec<Cohort>, ReportError> {
    let returned = RETENTION_DAYS
        .iter()
        .map(|n| {
            format!(
                "CASE WHEN f.cohort + INTERVAL '{n} days' <= s.last_day \
                 AND f.cohort + INTERVAL '{n} days' < DATE '{complete_before}' \
                 THEN count(DISTINCT CASE WHEN a.day = f.cohort + INTERVAL '{n} days' THEN f.device END) END AS d{n}"
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    let first_days = super::events::first_days();
    let rows = session
        .query(
            "retention cohorts",
            &format!(
                "WITH active AS (SELECT DISTINCT device, platform, day FROM {ACTIVE}), \
                 span AS (SELECT max(day) AS last_day FROM active), \
                 f AS (SELECT device, first_day AS cohort, platform FROM ({first_days}) firsts) \
                 SELECT f.cohort, f.platform, count(DISTINCT f.device) AS devices, {returned} \
                 FROM f CROSS JOIN span s LEFT JOIN active a ON a.device = f.device \
                 GROUP BY GROUPING SETS ((f.cohort, s.last_day), (f.cohort, f.platform, s.last_day)) \
                 ORDER BY f.platform NULLS FIRST, f.cohort"
            ),
        )
        .await?;
    let (dates, platforms, devices) = (rows.dates("cohort")?, rows.strings("platform")?, rows.i64s("devices")?);
    let returned: Vec<Vec<Option<i64>>> = RETENTION_DAYS
        .iter()
        .map(|n| rows.i64s(&format!("d{n}")))
        .collect::<Result<_, _>>()?;
    Ok((0..rows.len())
        .filter_map(|i| {
            Some(Cohort {
                date: dates[i]?,
                platform: platforms[i].clone(),
                devices: devices[i].unwrap_or(0),
                returned: [returned[0][i], returned[1][i], returned[2][i]],
                provisional: false,
            })
        })
        .collect())
}

/// The cohorts of all platforms as a table for people.
pub(super) fn cohort_table(cohorts: &[Cohort]) -> TextTable {
    let mut table = TextTable::new(
        ["first seen", "devices"]
            .into_iter()
            .map(str::to_owned)
            .chain(RETENTION_DAYS.iter().map(|n| format!("day {n}"))),
    );
    for c in cohorts.iter().filter(|c| c.platform.is_none()) {
        table.push(
            [
                crate::text::marked(c.date.to_string(), c.provisional),
                figures::count(c.devices.max(0) as u64),
            ]
            .into_iter()
            .chain((0..RETENTION_DAYS.len()).map(|k| figures::percent(c.retention(k)))),
        );
    }
    table
}
