//! `lakelog report game`: the game KPIs of the seed's notebook over the `game_events` table.
//!
//! * **Events per hour**: 60-minute tumbling windows on `eventTime`. As with the seed's
//!   `withWatermark("eventTime", "180 minutes")`, an event whose `eventTime` is more than 180
//!   minutes older than the latest `eventTime` that arrived before it from its game and shard (in
//!   Kinesis arrival order: arrival time, shard, sequence number) is late: it is not counted in
//!   its window, and the report says how many late events there were. Each game and shard keeps
//!   its own watermark, as a Kafka Streams task keeps its partition's stream time.
//! * **Bookings per hour**: the sum of `eventParams.amount` of `purchaseEvent`s, same windows, same
//!   watermark.
//! * **Daily active users**: distinct `eventParams.device_id` per UTC day of `eventTime` (every
//!   event counts; lateness only concerns the windows).
//! * The same three by `eventParams.platform`.
//!
//! Every figure counts each event, a game's `eventId`, once: of the copies of an event (a resent
//! request) the first to arrive is the event, and the watermark is computed over those first
//! copies. Lateness depends on what arrived before an event, so it is judged over the whole table;
//! `--from`/`--to` then select the windows and days reported.

use std::collections::BTreeMap;

use chrono::{DateTime, Datelike, NaiveDate, TimeDelta, Utc};

use crate::error::ReportError;
use crate::range::TimeRange;
use crate::session::{ReportSession, quote_ident};
pub use acquisition::{Acquisition, AcquisitionCohort, LTV_DAYS};
pub use experiment::{Experiment, Measure, Variant};
pub use funnel::{Funnel, FunnelDay, FunnelFigures, FunnelReport, FunnelStep, Order};
pub use lifecycle::{AtRisk, CHURNED_AFTER, DORMANT_AFTER, LIFECYCLE_STATES, Lifecycle, LifecycleDay, Transition};
pub use paths::{Direction, PathCount, PathSpec, Paths};
pub use render::live_page;
pub use retention::Cohort;
pub use revenue::Revenue;
pub use sessions::{SESSION_LENGTHS, Sessions};

/// How much older than the latest `eventTime` seen an event may be and still count.
pub const WATERMARK_MINUTES: i64 = 180;

mod acquisition;
mod arrival;
pub mod attribution;
mod events;
pub mod experiment;
pub mod funnel;
mod lifecycle;
pub mod paths;
mod render;
pub use events::CHUNK_ROWS;
use events::{ACTIVE, Minute, Minutes};
mod retention;
mod revenue;
mod sessions;
mod texts;

/// The currency of `amount`: the game's store prices, in US dollars as the seed's purchases are.
pub const BOOKINGS_CURRENCY: &str = "USD";

/// The SQL condition on [`EVENTS`] of a purchase counted in bookings (and revenue): with an
/// amount, not late.
const COUNTED_PURCHASE: &str = "name = 'purchaseEvent' AND amount IS NOT NULL AND NOT late";

/// The name of a purchase.
const PURCHASE: &str = "purchaseEvent";

/// The name of the in-memory table of first copies with their lateness.
const EVENTS: &str = "__game_kpi_events";

/// Microseconds in an hour and in a day.
const HOUR_MICROS: i64 = 3_600_000_000;
const DAY_MICROS: i64 = 86_400_000_000;

/// One window of events per hour.
#[derive(Debug, Clone, PartialEq)]
pub struct HourCount {
    /// The window's start (a whole hour, UTC).
    pub window_start: DateTime<Utc>,
    /// Events in the window (distinct `eventId`, on-time only).
    pub count: i64,
    /// Whether events may still arrive on time for it (see [`Close`]).
    pub provisional: bool,
}

/// One window of bookings per hour.
#[derive(Debug, Clone, PartialEq)]
pub struct HourAmount {
    /// The window's start (a whole hour, UTC).
    pub window_start: DateTime<Utc>,
    /// Sum of `amount` of the window's `purchaseEvent`s.
    pub amount: f64,
    /// Whether events may still arrive on time for it (see [`Close`]).
    pub provisional: bool,
}

/// Daily active users of one day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DayUsers {
    /// The UTC day.
    pub date: NaiveDate,
    /// Distinct `device_id`s with an event that day.
    pub users: i64,
    /// Whether events may still arrive on time for it (see [`Close`]).
    pub provisional: bool,
}

/// The three KPIs over one set of events.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Kpis {
    /// Events per hour.
    pub events_per_hour: Vec<HourCount>,
    /// Bookings per hour.
    pub bookings_per_hour: Vec<HourAmount>,
    /// Daily active users.
    pub dau: Vec<DayUsers>,
    /// Events not counted in their window because they arrived after the watermark had passed.
    pub late_events: i64,
}

/// The game report: the KPIs of all events, and of each platform.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GameReport {
    /// The range reported: its bounds: those asked for, else the first hour with events and the end of the
    /// last one.
    pub covered: TimeRange,
    /// All platforms together.
    pub all: Kpis,
    /// Per `eventParams.platform` (`unknown` where it is missing), by name.
    pub by_platform: BTreeMap<String, Kpis>,
    /// Who pays, and how much per player.
    pub revenue: Revenue,
    /// Who comes back: all platforms' cohorts by day, then each platform's.
    pub cohorts: Vec<Cohort>,
    /// How often and how long people play.
    pub sessions: Sessions,
    /// Where each device stands each day, and who is slipping away.
    pub lifecycle: Lifecycle,
    /// The funnels asked for.
    pub funnels: Vec<FunnelReport>,
    /// What the devices of each acquisition source, campaign, country and platform are worth.
    pub acquisition: Acquisition,
    /// The experiments the events name, variant by variant.
    pub experiments: Vec<Experiment>,
    /// The paths asked for.
    pub paths: Option<Paths>,
    /// Whether events may still arrive on time within the range: its figures over the whole range
    /// (the headline, revenue by game, item, platform and version, session lengths, lifecycle
    /// moves and devices at risk) may still change.
    pub provisional: bool,
    /// Events and bookings per minute, when the events span at most [`MINUTE_CHART_HOURS`] hours
    /// (a live session, a short range): the charts are then per minute.
    pub per_minute: Vec<MinuteFigures>,
}

/// A range of events at most this many hours long is charted per minute.
pub const MINUTE_CHART_HOURS: usize = 3;

/// The counted events and bookings of one minute.
#[derive(Debug, Clone, PartialEq)]
pub struct MinuteFigures {
    /// The minute's start.
    pub window_start: DateTime<Utc>,
    /// Events counted.
    pub events: i64,
    /// Bookings, in [`BOOKINGS_CURRENCY`].
    pub bookings: f64,
    /// Whether events may still arrive on time for it (see [`Close`]).
    pub provisional: bool,
}

/// The counted events and bookings per minute, all platforms together.
fn per_minute(minutes: &Minutes) -> Vec<MinuteFigures> {
    minutes
        .get(&None)
        .into_iter()
        .flatten()
        .filter_map(|(&start, minute)| {
            Some(MinuteFigures {
                window_start: DateTime::from_timestamp_micros(start)?,
                events: minute.events,
                bookings: minute.bookings.unwrap_or(0.0),
                provisional: false,
            })
        })
        .collect()
}

/// The figures a game report opens with.
#[derive(Debug, Clone, PartialEq)]
pub struct Headline {
    /// Events counted (each `eventId` once, late ones left out).
    pub events: i64,
    /// Bookings: the sum of `amount` of the counted `purchaseEvent`s, in [`BOOKINGS_CURRENCY`].
    pub bookings: f64,
    /// The day with the most active devices, if any.
    pub peak_dau: Option<DayUsers>,
    /// Late events, not counted.
    pub late_events: i64,
}

/// What a game report asks for beyond its range.
#[derive(Debug, Clone)]
pub struct GameOptions {
    /// The inactivity after which a device's next event starts a new session.
    pub session_gap: TimeDelta,
    /// The most rows read and held at once (see [`CHUNK_ROWS`]).
    pub chunk_rows: usize,
    /// The funnels to follow the devices through.
    pub funnels: Vec<Funnel>,
    /// The event an experiment's devices convert by doing.
    pub conversion: String,
    /// The paths to follow, if any.
    pub paths: Option<PathSpec>,
}

impl Default for GameOptions {
    fn default() -> Self {
        Self {
            session_gap: sessions::DEFAULT_GAP,
            chunk_rows: CHUNK_ROWS,
            funnels: Vec::new(),
            conversion: PURCHASE.to_owned(),
            paths: None,
        }
    }
}

/// When figures become final: a figure is provisional while its window ends after the report's
/// close, the end of its range or, if earlier, the watermark ([`WATERMARK_MINUTES`]) before now.
/// Until then an event may still arrive on time for it; after it, only late ones. A figure over
/// the whole range has the range's window: up to its end, or without one, up to the last event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Close {
    /// The close, in microseconds since the epoch.
    micros: i64,
}

impl Close {
    /// The close of a report of `range` made at `now`.
    fn new(range: &TimeRange, now: DateTime<Utc>) -> Self {
        let watermark = (now - TimeDelta::minutes(WATERMARK_MINUTES)).timestamp_micros();
        Self {
            micros: range.to.map_or(watermark, |to| to.timestamp_micros().min(watermark)),
        }
    }

    /// A close at `micros`.
    #[cfg(test)]
    pub(crate) fn at_micros(micros: i64) -> Self {
        Self { micros }
    }

    /// Whether a window ending at `end` (microseconds) is final.
    pub(crate) fn is_final_micros(&self, end: i64) -> bool {
        end <= self.micros
    }

    /// Whether a figure of the UTC day `date` is final: the day ended by the close.
    pub(crate) fn is_final_date_end(&self, date: NaiveDate) -> bool {
        let end = i64::from(date.num_days_from_ce() - crate::session::UNIX_EPOCH_DAYS_FROM_CE + 1) * DAY_MICROS;
        self.is_final_micros(end)
    }
}

/// The text of a parameter's value, as a person reads it and SQL's `json_extract_scalar` gives
/// it: a string as itself, anything else as its JSON.
fn value_text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// Computes the report over the `game_events` table(s) registered in `session` as `table`.
pub async fn game_report(session: &ReportSession, table: &str, range: &TimeRange) -> Result<GameReport, ReportError> {
    game_report_with(session, table, range, &GameOptions::default()).await
}

/// [`game_report`] with `options`.
pub async fn game_report_with(
    session: &ReportSession,
    table: &str,
    range: &TimeRange,
    options: &GameOptions,
) -> Result<GameReport, ReportError> {
    let close = Close::new(range, Utc::now());
    // Every query over what the chunks left, then the tables they left dropped whatever they gave.
    let result = async {
        let loaded = events::load(session, &quote_ident(table), range, options, &close).await?;
        let (all, by_platform) = kpis(session, &loaded.minutes).await?;
        let hours = &all.events_per_hour;
        let span = match (hours.first(), hours.last()) {
            (Some(first), Some(last)) => (last.window_start - first.window_start).num_hours() + 1,
            _ => 0,
        };
        let minutes = if span <= MINUTE_CHART_HOURS as i64 {
            per_minute(&loaded.minutes)
        } else {
            Vec::new()
        };
        let ended = complete_before(range, Utc::now());
        Ok::<_, ReportError>((
            (all, by_platform, minutes),
            revenue::revenue(session).await?,
            retention::cohorts(session, ended).await?,
            lifecycle::lifecycle(session, ended, &loaded.devices).await?,
            loaded.sessions,
            loaded.funnels,
            loaded.paths,
            acquisition::acquisition(session, ended).await?,
            experiments(session, &loaded.attribution, ended, &options.conversion).await?,
        ))
    }
    .await;
    for table in [
        EVENTS,
        events::ACTIVE,
        events::PURCHASES,
        attribution::ACQUISITION,
        attribution::EXPOSURES,
        lifecycle::STATES,
    ] {
        events::deregister(session, table)?;
    }
    let (
        (all, by_platform, per_minute),
        revenue,
        cohorts,
        lifecycle,
        sessions,
        funnels,
        paths,
        acquisition,
        experiments,
    ) = result?;
    // The range the figures cover: the bounds asked for, else the hours the events fall in.
    let hours = || all.events_per_hour.iter().map(|h| h.window_start);
    let covered = TimeRange {
        from: range.from.or_else(|| hours().min()),
        to: range.to.or_else(|| hours().max().map(|h| h + TimeDelta::hours(1))),
    };
    let mut report = GameReport {
        covered,
        all,
        by_platform,
        revenue,
        cohorts,
        sessions,
        lifecycle,
        funnels,
        acquisition,
        experiments,
        paths,
        provisional: false,
        per_minute,
    };
    report.mark_provisional(&close, options.session_gap);
    Ok(report)
}

impl GameReport {
    /// Marks the figures whose windows have not closed by `close` provisional (the funnels are
    /// marked as they are counted): an hour, a minute or a day after its end; a cohort once the
    /// days its returns are counted on ended; a day's sessions once the gap after it passed (a
    /// session started that day may go on after midnight); the rest with the range.
    fn mark_provisional(&mut self, close: &Close, session_gap: TimeDelta) {
        let open = |end: DateTime<Utc>| !close.is_final_micros(end.timestamp_micros());
        let day_open = |date: NaiveDate| !close.is_final_date_end(date);
        for kpis in std::iter::once(&mut self.all).chain(self.by_platform.values_mut()) {
            for h in &mut kpis.events_per_hour {
                h.provisional = open(h.window_start + TimeDelta::hours(1));
            }
            for h in &mut kpis.bookings_per_hour {
                h.provisional = open(h.window_start + TimeDelta::hours(1));
            }
            for d in &mut kpis.dau {
                d.provisional = day_open(d.date);
            }
        }
        for m in &mut self.per_minute {
            m.provisional = open(m.window_start + TimeDelta::minutes(1));
        }
        for d in &mut self.revenue.days {
            d.provisional = day_open(d.date);
        }
        for c in &mut self.cohorts {
            let last_known = retention::RETENTION_DAYS
                .iter()
                .zip(c.returned)
                .filter(|(_, r)| r.is_some())
                .map(|(n, _)| *n)
                .max()
                .unwrap_or(0);
            c.provisional = c
                .date
                .checked_add_signed(TimeDelta::days(last_known))
                .is_none_or(day_open);
        }
        for d in &mut self.sessions.days {
            let end = d
                .date
                .succ_opt()
                .map(|next| next.and_time(chrono::NaiveTime::MIN).and_utc());
            d.provisional = end.is_none_or(|end| open(end + session_gap));
        }
        for d in &mut self.lifecycle.days {
            d.provisional = day_open(d.date);
        }
        let whole = self.covered.to.is_none_or(open);
        self.provisional = whole;
        self.revenue.provisional = whole;
        self.sessions.provisional = whole;
        self.lifecycle.provisional = whole;
        for c in &mut self.acquisition.cohorts {
            c.provisional = whole;
        }
        for e in &mut self.experiments {
            e.provisional = whole;
        }
        // A funnel may also still move on where a device's window is open; devices first seen on
        // any day may still enter until the range closes.
        for f in &mut self.funnels {
            f.all.provisional |= whole;
            for (_, figures) in &mut f.by_platform {
                figures.provisional |= whole;
            }
            for day in &mut f.by_first_seen {
                day.figures.provisional |= whole;
            }
        }
        if let Some(paths) = self.paths.as_mut() {
            paths.provisional = whole;
        }
    }

    /// Whether any figure of the report is provisional.
    pub fn any_provisional(&self) -> bool {
        self.provisional || self.funnels.iter().any(|f| f.all.provisional)
    }
}

/// The experiments of the exposures found; days before `ended` have ended.
async fn experiments(
    session: &ReportSession,
    attribution: &attribution::Attribution,
    ended: NaiveDate,
    conversion: &str,
) -> Result<Vec<Experiment>, ReportError> {
    let (exposures, texts, last) = attribution.exposures();
    if exposures.is_empty() {
        return Ok(Vec::new());
    }
    // Each device's platform: that of its first day (the smallest name, if several), as retention
    // has it.
    let rows = session
        .query(
            "platforms of the first days",
            &format!("SELECT device, platform FROM ({}) firsts", events::first_days()),
        )
        .await?;
    let platforms: std::collections::HashMap<i64, String> = rows
        .i64s("device")?
        .into_iter()
        .zip(rows.strings("platform")?)
        .filter_map(|(device, platform)| Some((device?, platform?)))
        .collect();
    let ended_day = i64::from(ended.num_days_from_ce() - crate::session::UNIX_EPOCH_DAYS_FROM_CE);
    Ok(experiment::experiments(
        exposures,
        texts,
        |device| {
            platforms
                .get(&i64::from(device))
                .cloned()
                .unwrap_or_else(|| "unknown".to_owned())
        },
        last,
        ended_day,
        conversion,
    ))
}

/// The first day that has not ended by the end of `range` or by `now`, whichever is first.
fn complete_before(range: &TimeRange, now: DateTime<Utc>) -> NaiveDate {
    range.to.map_or(now, |to| to.min(now)).date_naive()
}

async fn kpis(session: &ReportSession, minutes: &Minutes) -> Result<(Kpis, BTreeMap<String, Kpis>), ReportError> {
    let mut all = Kpis::default();
    let mut by_platform: BTreeMap<String, Kpis> = BTreeMap::new();
    for (platform, minutes) in minutes {
        // Minutes in order, so hours in order.
        let mut hours: BTreeMap<i64, Minute> = BTreeMap::new();
        let mut late_events = 0;
        for (&start, minute) in minutes {
            let hour = hours.entry(start.div_euclid(HOUR_MICROS) * HOUR_MICROS).or_default();
            hour.events += minute.events;
            if let Some(amount) = minute.bookings {
                *hour.bookings.get_or_insert(0.0) += amount;
            }
            late_events += minute.late;
        }
        let kpis = match platform {
            None => &mut all,
            Some(p) => by_platform.entry(p.clone()).or_default(),
        };
        for (start, hour) in hours {
            let Some(window_start) = DateTime::from_timestamp_micros(start) else {
                continue;
            };
            if hour.events > 0 {
                kpis.events_per_hour.push(HourCount {
                    window_start,
                    count: hour.events,
                    provisional: false,
                });
            }
            if let Some(amount) = hour.bookings {
                kpis.bookings_per_hour.push(HourAmount {
                    window_start,
                    amount,
                    provisional: false,
                });
            }
        }
        kpis.late_events = late_events;
    }

    let rows = session
        .query(
            "daily active users",
            &format!(
                "SELECT day, platform, count(DISTINCT device) AS users FROM {ACTIVE}
                 GROUP BY GROUPING SETS ((day), (day, platform))
                 ORDER BY 1, 2"
            ),
        )
        .await?;
    for ((day, platform), users) in rows
        .dates("day")?
        .into_iter()
        .zip(rows.strings("platform")?)
        .zip(rows.i64s("users")?)
    {
        let (Some(date), Some(users)) = (day, users) else {
            continue;
        };
        let kpis = match platform {
            None => &mut all,
            Some(p) => by_platform.entry(p).or_default(),
        };
        kpis.dau.push(DayUsers {
            date,
            users,
            provisional: false,
        });
    }
    Ok((all, by_platform))
}

/// A date as `YYYY-MM-DD` in JSON.
fn date_text<S: serde::Serializer>(date: &NaiveDate, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(date)
}

impl Kpis {
    /// The headline figures of these KPIs.
    pub fn headline(&self) -> Headline {
        Headline {
            events: self.events_per_hour.iter().map(|h| h.count).sum(),
            bookings: self.bookings_per_hour.iter().map(|h| h.amount).sum(),
            peak_dau: self
                .dau
                .iter()
                .max_by(|a, b| a.users.cmp(&b.users).then(b.date.cmp(&a.date)))
                .cloned(),
            late_events: self.late_events,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_provisional_until_the_watermark_passed_their_window() {
        let at = |t: &str| DateTime::parse_from_rfc3339(t).unwrap().with_timezone(&Utc);
        let day = |d| NaiveDate::from_ymd_opt(2026, 12, d).unwrap();
        let hour = |t: &str| HourCount {
            window_start: at(t),
            count: 1,
            provisional: true,
        };
        let mut report = GameReport {
            covered: TimeRange::between(at("2026-12-02T00:00:00Z"), at("2026-12-03T06:00:00Z")),
            all: Kpis {
                events_per_hour: vec![hour("2026-12-03T01:00:00Z"), hour("2026-12-03T02:00:00Z")],
                dau: [2, 3]
                    .map(|d| DayUsers {
                        date: day(d),
                        users: 1,
                        provisional: true,
                    })
                    .to_vec(),
                ..Kpis::default()
            },
            cohorts: vec![Cohort {
                date: day(1),
                platform: None,
                devices: 3,
                returned: [Some(1), None, None],
                provisional: false,
            }],
            ..GameReport::default()
        };
        // Made at 05:30: the watermark is at 02:30, so the hour ending at 02:00 is final and the
        // one ending at 03:00 is not; 2 December ended before it, 3 December did not; the cohort
        // of 1 December counted its day 1 on 2 December: final.
        report.mark_provisional(
            &Close::new(&TimeRange::default(), at("2026-12-03T05:30:00Z")),
            TimeDelta::minutes(30),
        );
        let flags = |r: &GameReport| {
            (
                r.all.events_per_hour.iter().map(|h| h.provisional).collect::<Vec<_>>(),
                r.all.dau.iter().map(|d| d.provisional).collect::<Vec<_>>(),
                r.cohorts[0].provisional,
                r.provisional,
            )
        };
        assert_eq!(flags(&report), (vec![false, true], vec![false, true], false, true));
        // A day later, everything is final.
        report.mark_provisional(
            &Close::new(&TimeRange::default(), at("2026-12-04T05:30:00Z")),
            TimeDelta::minutes(30),
        );
        assert_eq!(flags(&report), (vec![false, false], vec![false, false], false, false));
        // A range that ends before the watermark closes its figures at its end.
        let range = TimeRange::between(at("2026-12-02T00:00:00Z"), at("2026-12-03T02:00:00Z"));
        report.mark_provisional(&Close::new(&range, at("2026-12-03T05:30:00Z")), TimeDelta::minutes(30));
        assert_eq!(flags(&report).0, vec![false, true]);
    }

    #[test]
    fn a_day_is_complete_once_it_ended_by_the_range_and_by_now() {
        let at = |t: &str| DateTime::parse_from_rfc3339(t).unwrap().with_timezone(&Utc);
        let day = |d| NaiveDate::from_ymd_opt(2026, 12, d).unwrap();
        let now = at("2026-12-03T05:46:00Z");
        // Today has only begun: yesterday is the last complete day.
        assert_eq!(complete_before(&TimeRange::default(), now), day(3));
        assert_eq!(
            complete_before(
                &TimeRange::between(at("2026-11-20T00:00:00Z"), at("2026-12-02T00:00:00Z")),
                now
            ),
            day(2)
        );
        assert_eq!(
            complete_before(
                &TimeRange::between(at("2026-11-20T00:00:00Z"), at("2026-12-09T00:00:00Z")),
                now
            ),
            day(3)
        );
    }
}
