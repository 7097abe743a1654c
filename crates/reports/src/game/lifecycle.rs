//! Lifecycle of the game report: where each device stands on each day, how devices move between
//! states, and which devices are slipping away.
//!
//! Each ended day with events, each device seen on or before it is in one state, by the days since
//! its last event before that day (its time away):
//!
//! - `new`: the day of its first event in the range;
//! - `active`: an event that day after at most [`DORMANT_AFTER`] days away, or none that day but
//!   one within the last [`DORMANT_AFTER`] days;
//! - `returning`: an event that day after more than [`DORMANT_AFTER`] and at most
//!   [`CHURNED_AFTER`] days away (it was dormant);
//! - `resurrected`: an event that day after more than [`CHURNED_AFTER`] days away (it had
//!   churned);
//! - `dormant`: no event for more than [`DORMANT_AFTER`] and at most [`CHURNED_AFTER`] days;
//! - `churned`: no event for more than [`CHURNED_AFTER`] days.
//!
//! The days are counted for all platforms, then by the platform of each device's first day (the
//! smallest name, if several), as retention counts its cohorts. The transitions count, over the range, the devices in one state on a day and in another (or
//! the same) on the next day with events. The devices at risk are those with an event in the week
//! before the last ended day's week and none in that week (the last ended day and the six
//! before): a list a studio can act on. Days that have not ended (by the end of the range and by
//! now) are left out, as retention leaves them out: a day that has only begun would read as
//! devices going away.

use chrono::NaiveDate;
use serde::Serialize;

use super::events::ACTIVE;
use crate::chart::{self, Series, Svg, Unit};
use crate::error::ReportError;
use crate::figures;
use crate::session::ReportSession;
use crate::text::TextTable;

/// Days away after which an active device is dormant.
pub const DORMANT_AFTER: i64 = 7;
/// Days away after which a dormant device has churned.
pub const CHURNED_AFTER: i64 = 14;
/// The states, in the order of [`LifecycleDay::devices`].
pub const LIFECYCLE_STATES: [&str; 6] = ["new", "active", "returning", "resurrected", "dormant", "churned"];
/// Devices at risk the text report lists (the JSON has them all).
const AT_RISK_SHOWN: usize = 20;
/// The in-memory table of each device's state on each ended day since its first: `device`, `day`,
/// `state`, and `platform` (of its first day); computed once, read by the day counts and the moves.
pub(super) const STATES: &str = "__game_kpi_lifecycle";

/// The devices in each state on one day.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LifecycleDay {
    /// The day.
    #[serde(serialize_with = "super::date_text")]
    pub date: NaiveDate,
    /// The platform of the devices' first day (the smallest name, if several), or `None` for all
    /// platforms together.
    pub platform: Option<String>,
    /// Devices per state, in the order of [`LIFECYCLE_STATES`].
    pub devices: [i64; 6],
    /// Whether events may still arrive on time for the day.
    pub provisional: bool,
}

/// Devices that moved from one state to another between consecutive days.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Transition {
    /// The state on the day before.
    pub from: String,
    /// The state on the day.
    pub to: String,
    /// Device-days that moved so, over the range.
    pub devices: i64,
}

/// A device active in the week before the last and not in the last.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AtRisk {
    /// Its `device_id`.
    pub device: String,
    /// Its platform (the smallest name, if several).
    pub platform: Option<String>,
    /// Its last day with an event.
    #[serde(serialize_with = "super::date_text")]
    pub last_seen: NaiveDate,
    /// Its days with events in the week before the last.
    pub days_active: i64,
}

/// The lifecycle section of the report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Lifecycle {
    /// The states' names, in the order of each day's `devices`.
    pub states: Vec<&'static str>,
    /// Days away after which an active device is dormant, and after which it has churned.
    pub thresholds: [i64; 2],
    /// Each ended day with events, all platforms first, then by platform.
    pub days: Vec<LifecycleDay>,
    /// The moves between states, most first.
    pub transitions: Vec<Transition>,
    /// The last ended day the week of the devices at risk ends on, if there is one.
    #[serde(serialize_with = "optional_date")]
    pub at_risk_week_ending: Option<NaiveDate>,
    /// The devices at risk, most days active first.
    pub at_risk: Vec<AtRisk>,
    /// Whether events may still arrive on time within the range (for the moves and the devices
    /// at risk).
    pub provisional: bool,
}

fn optional_date<S: serde::Serializer>(date: &Option<NaiveDate>, s: S) -> Result<S::Ok, S::Error> {
    match date {
        Some(date) => s.serialize_str(&date.to_string()),
        None => s.serialize_none(),
    }
}

/// The states of every device on every ended day (before `complete_before`), from [`ACTIVE`]; a
/// device's `device_id` is `devices[n]` for its number `n`.
pub(super) async fn lifecycle(
    session: &ReportSession,
    complete_before: NaiveDate,
    devices: &[Box<str>],
) -> Result<Lifecycle, ReportError> {
    session
        .execute(
            "lifecycle states",
            &format!(
                "CREATE OR REPLACE TABLE {STATES} AS \
                 WITH active AS (SELECT DISTINCT device, day FROM {ACTIVE} WHERE day < DATE '{complete_before}'), \
                 days AS (SELECT DISTINCT day FROM active), \
                 firsts AS (SELECT device, min(day) AS first_day FROM active GROUP BY device), \
                 first_platform AS (SELECT f.device, min(p.platform) AS platform FROM firsts f \
                   JOIN {ACTIVE} p ON p.device = f.device AND p.day = f.first_day GROUP BY f.device), \
                 grid AS (SELECT f.device, d.day, f.first_day, a.device IS NOT NULL AS seen \
                   FROM firsts f JOIN days d ON d.day >= f.first_day \
                   LEFT JOIN active a ON a.device = f.device AND a.day = d.day), \
                 gaps AS (SELECT device, day, first_day, seen, \
                   max(CASE WHEN seen THEN day END) OVER (PARTITION BY device ORDER BY day \
                     ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before FROM grid), \
                 states AS (SELECT device, day, CASE \
                   WHEN day = first_day THEN 'new' \
                   WHEN seen AND before < day - INTERVAL '{CHURNED_AFTER} days' THEN 'resurrected' \
                   WHEN seen AND before < day - INTERVAL '{DORMANT_AFTER} days' THEN 'returning' \
                   WHEN seen THEN 'active' \
                   WHEN before < day - INTERVAL '{CHURNED_AFTER} days' THEN 'churned' \
                   WHEN before < day - INTERVAL '{DORMANT_AFTER} days' THEN 'dormant' \
                   ELSE 'active' END AS state FROM gaps) \
                 SELECT s.device, s.day, s.state, f.platform FROM states s JOIN first_platform f ON f.device = s.device"
            ),
        )
        .await?;
    let rows = session
        .query(
            "lifecycle states per day",
            &format!(
                "SELECT day, platform, state, count(*) AS devices FROM {STATES} \
                 GROUP BY GROUPING SETS ((day, state), (day, platform, state)) \
                 ORDER BY platform NULLS FIRST, day"
            ),
        )
        .await?;
    let (dates, platforms, names, counts) = (
        rows.dates("day")?,
        rows.strings("platform")?,
        rows.strings("state")?,
        rows.i64s("devices")?,
    );
    let mut days: Vec<LifecycleDay> = Vec::new();
    for i in 0..rows.len() {
        let (Some(date), Some(name)) = (dates[i], names[i].as_deref()) else {
            continue;
        };
        let Some(k) = LIFECYCLE_STATES.iter().position(|s| *s == name) else {
            continue;
        };
        let platform = &platforms[i];
        if days.last().is_none_or(|d| d.date != date || &d.platform != platform) {
            days.push(LifecycleDay {
                date,
                platform: platform.clone(),
                devices: [0; 6],
                provisional: false,
            });
        }
        if let Some(day) = days.last_mut() {
            day.devices[k] = counts[i].unwrap_or(0);
        }
    }

    let rows = session
        .query(
            "lifecycle transitions",
            &format!(
                "WITH moves AS (SELECT lag(state) OVER (PARTITION BY device ORDER BY day) AS from_state, \
                 state AS to_state FROM {STATES}) \
                 SELECT from_state, to_state, count(*) AS devices FROM moves WHERE from_state IS NOT NULL \
                 GROUP BY from_state, to_state ORDER BY devices DESC, from_state, to_state"
            ),
        )
        .await?;
    let (from, to, counts) = (
        rows.strings("from_state")?,
        rows.strings("to_state")?,
        rows.i64s("devices")?,
    );
    let transitions = (0..rows.len())
        .filter_map(|i| {
            Some(Transition {
                from: from[i].clone()?,
                to: to[i].clone()?,
                devices: counts[i].unwrap_or(0),
            })
        })
        .collect();

    let rows = session
        .query(
            "devices at risk",
            &format!(
                "WITH active AS (SELECT DISTINCT device, platform, day FROM {ACTIVE} WHERE day < DATE '{complete_before}'), \
                 span AS (SELECT max(day) AS last_day FROM active) \
                 SELECT a.device, min(a.platform) AS platform, max(a.day) AS last_seen, \
                   count(DISTINCT a.day) AS days_active \
                 FROM active a CROSS JOIN span s \
                 WHERE a.day >= s.last_day - INTERVAL '13 days' \
                 GROUP BY a.device, s.last_day \
                 HAVING max(a.day) < s.last_day - INTERVAL '6 days' \
                 ORDER BY days_active DESC, last_seen DESC, a.device"
            ),
        )
        .await?;
    let (numbers, platforms, last_seen, active_days) = (
        rows.i64s("device")?,
        rows.strings("platform")?,
        rows.dates("last_seen")?,
        rows.i64s("days_active")?,
    );
    let at_risk = (0..rows.len())
        .filter_map(|i| {
            let number = usize::try_from(numbers[i]?).ok()?;
            Some(AtRisk {
                device: devices.get(number)?.to_string(),
                platform: platforms[i].clone(),
                last_seen: last_seen[i]?,
                days_active: active_days[i].unwrap_or(0),
            })
        })
        .collect();
    let at_risk_week_ending = days.iter().map(|d| d.date).max();
    Ok(Lifecycle {
        states: LIFECYCLE_STATES.to_vec(),
        thresholds: [DORMANT_AFTER, CHURNED_AFTER],
        days,
        transitions,
        at_risk_week_ending,
        at_risk,
        provisional: false,
    })
}

impl Lifecycle {
    /// The devices in each state per day, all platforms, for people.
    pub(super) fn days_table(&self) -> TextTable {
        let mut table = TextTable::new(std::iter::once("day").chain(LIFECYCLE_STATES).map(str::to_owned));
        for day in self.days.iter().filter(|d| d.platform.is_none()) {
            table.push(
                std::iter::once(crate::text::marked(day.date.to_string(), day.provisional))
                    .chain(day.devices.iter().map(|n| figures::count((*n).max(0) as u64))),
            );
        }
        table
    }

    /// The moves between states, for people.
    pub(super) fn transitions_table(&self) -> TextTable {
        let mut table = TextTable::new(["from", "to", "device-days"]);
        for t in &self.transitions {
            table.push([t.from.clone(), t.to.clone(), figures::count(t.devices.max(0) as u64)]);
        }
        table
    }

    /// The first devices at risk, for people.
    pub(super) fn at_risk_table(&self) -> TextTable {
        let mut table = TextTable::new(["device", "platform", "last seen", "days active the week before"]);
        for d in self.at_risk.iter().take(AT_RISK_SHOWN) {
            table.push([
                d.device.clone(),
                d.platform.clone().unwrap_or_else(|| "-".to_owned()),
                d.last_seen.to_string(),
                d.days_active.to_string(),
            ]);
        }
        table
    }

    /// What the section says about the devices at risk.
    pub(super) fn at_risk_summary(&self) -> String {
        match self.at_risk_week_ending {
            Some(end) => format!(
                "{} devices had events in the week before the week ending {end} and none in it{}",
                figures::count(self.at_risk.len() as u64),
                if self.at_risk.len() > AT_RISK_SHOWN {
                    format!(" (the first {AT_RISK_SHOWN} below; the JSON report lists them all)")
                } else {
                    String::new()
                }
            ),
            None => "No day has ended in the range: no devices at risk yet".to_owned(),
        }
    }

    /// The devices in each state per day, all platforms, one line per state.
    pub(super) fn chart(&self) -> Result<Svg, ReportError> {
        let series: Vec<Series> = LIFECYCLE_STATES
            .iter()
            .enumerate()
            .map(|(k, name)| Series {
                name: (*name).to_owned(),
                points: self
                    .days
                    .iter()
                    .filter(|d| d.platform.is_none())
                    .map(|d| (d.date, d.devices[k] as f64))
                    .collect(),
            })
            .collect();
        chart::line_chart("Devices by lifecycle state", Unit::Count("devices"), &series)
    }
}
