//! A planned season of play: who plays on which days, their sessions and their purchases are
//! decided first, and the events follow from that plan, so that the KPIs a report computes from
//! the events (daily active and paying users, revenue, retention cohorts, sessions and their
//! lengths) are known by construction: [`Season::truth`] counts them from the plan, not from the
//! events.
//!
//! The plan has the texture of a live game:
//!
//! * a player base that grows: 55% of the players were playing before the season began, the
//!   others join one after the other over it and play on the day they join;
//! * regulars, casual players and tourists, who come back on a day with different chances and
//!   leave the game for good at different rates, a little more often on weekends;
//! * sessions at the hours their platform plays (phones around 18:00 UTC, computers around 01:00),
//!   from a minute to two hours long, at least 45 minutes apart, each within one UTC day;
//! * about one player in ten pays, in some of their sessions, at the generator's price points.
//!
//! Events lie on a one-minute grid: a session's first event at its start, its last at its end, one
//! at least every ten minutes between, and the rest of the events asked for spread over the
//! sessions' inner minutes. Clients of the oldest app version send no `sessionStart` or
//! `sessionEnd`, so their sessions are known only from the inactivity between them (more than the
//! report's 30 minutes).

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Datelike, Days, NaiveDate, TimeDelta, Timelike, Utc, Weekday};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;

use super::{Device, PRICES, Synth, SynthConfig, pick, rhythm};
use crate::event::{GameEvent, PURCHASE_EVENT};

/// The app version whose clients send no `sessionStart` or `sessionEnd` events.
pub const UNMARKED_APP_VERSION: &str = "1.2.5";

/// The least time between two sessions of a device, in minutes: more than the report's default
/// inactivity gap, so that sessions without markers are told apart the same way.
pub const MIN_BREAK_MINUTES: i64 = 45;

/// Session lengths in minutes, as `((shortest, longest), weight)`.
const LENGTHS: [((i64, i64), u32); 5] = [
    ((1, 4), 25),
    ((5, 14), 30),
    ((15, 29), 25),
    ((30, 59), 15),
    ((60, 120), 5),
];

/// Events of play between the markers, and their weights.
const PLAY_MIX: [(&str, u32); 3] = [("scoreAdjustment", 50), ("levelUp", 12), ("adImpression", 12)];

/// How players of a kind play: `(share of players, chance to play on a day, chance to leave for
/// good after a day, most sessions on a day)`.
const KINDS: [(u32, f64, f64, u32); 3] = [(15, 0.8, 0.01, 3), (35, 0.4, 0.04, 2), (50, 0.15, 0.15, 1)];

/// Settings of a season.
#[derive(Debug, Clone)]
pub struct SeasonConfig {
    /// Seed of the plan and of the events' details.
    pub seed: u64,
    /// Players (devices); at least one.
    pub players: usize,
    /// The first instant events may have.
    pub start: DateTime<Utc>,
    /// Events are before this instant.
    pub end: DateTime<Utc>,
    /// Events wanted in all: the sessions' own events (markers, one every ten minutes,
    /// purchases) are always sent, and the rest up to this count is play spread over the sessions.
    pub events: u64,
}

/// One planned session.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedSession {
    /// The index of its device in [`Season::devices`].
    pub device: usize,
    /// The time of its first event.
    pub start: DateTime<Utc>,
    /// The time of its last event.
    pub end: DateTime<Utc>,
    /// The amounts of its purchases.
    pub purchases: Vec<f64>,
}

impl PlannedSession {
    /// Its length, in seconds.
    pub fn seconds(&self) -> i64 {
        (self.end - self.start).num_seconds()
    }
}

/// One event of the season and the time it is sent (its server `eventTime`).
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedEvent {
    /// When it reaches the API.
    pub at: DateTime<Utc>,
    /// The event.
    pub event: GameEvent,
}

/// A planned season.
#[derive(Debug, Clone)]
pub struct Season {
    /// The players' devices.
    pub devices: Vec<Device>,
    /// Every session, by start time.
    pub sessions: Vec<PlannedSession>,
    /// Every event, by time.
    pub events: Vec<PlannedEvent>,
}

/// What a season holds on one UTC day.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DayTruth {
    /// Devices with a session.
    pub active: u64,
    /// Devices with a purchase.
    pub paying: u64,
    /// Purchases.
    pub purchases: u64,
    /// Their amounts, in cents.
    pub revenue_cents: u64,
    /// Sessions started.
    pub sessions: u64,
    /// The median of their lengths, in seconds (the mean of the middle two for an even count).
    pub median_seconds: f64,
}

/// Purchases of a platform or an app version over the season.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpendTruth {
    /// Purchases.
    pub purchases: u64,
    /// Their amounts, in cents.
    pub revenue_cents: u64,
    /// Devices that bought.
    pub payers: u64,
}

/// One retention cohort.
#[derive(Debug, Clone, PartialEq)]
pub struct CohortTruth {
    /// The first day of its devices.
    pub date: NaiveDate,
    /// Their platform, or `None` for all.
    pub platform: Option<&'static str>,
    /// Devices first seen that day.
    pub devices: u64,
    /// Of them, those that play again on day 1, 7 and 30 after (whether or not the season lasts
    /// that long).
    pub returned: [u64; 3],
}

/// The KPIs of a season, counted from its plan.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SeasonTruth {
    /// Per UTC day with sessions.
    pub days: BTreeMap<NaiveDate, DayTruth>,
    /// Cohorts, all platforms first, then by platform, each by day.
    pub cohorts: Vec<CohortTruth>,
    /// Purchases by platform.
    pub by_platform: BTreeMap<&'static str, SpendTruth>,
    /// Purchases by app version.
    pub by_app_version: BTreeMap<&'static str, SpendTruth>,
    /// The length of every session, in seconds.
    pub lengths: Vec<i64>,
}

/// The days after the first one that [`CohortTruth::returned`] counts.
pub const RETURN_DAYS: [u64; 3] = [1, 7, 30];

impl Season {
    /// Plans the season of `config`. The same settings always give the same season.
    pub fn plan(config: &SeasonConfig) -> Self {
        let mut synth = Synth::new(SynthConfig {
            seed: config.seed,
            devices: config.players,
            ..SynthConfig::default()
        });
        let mut rng = StdRng::seed_from_u64(config.seed ^ 0x7365_6173_6f6e);
        let players = synth.devices.len();
        let first_day = config.start.date_naive();
        let days = if config.end > config.start {
            (config.end - TimeDelta::milliseconds(1))
                .date_naive()
                .signed_duration_since(first_day)
                .num_days()
                + 1
        } else {
            0
        };
        let founders = players * 55 / 100;
        let mut sessions = Vec::new();
        for (index, device) in synth.devices.iter().enumerate() {
            // The end of the device's last session, which the next keeps its distance from too.
            let mut last_end: Option<DateTime<Utc>> = None;
            let join = if index < founders || days == 0 {
                0
            } else {
                ((index - founders) as i64 * days) / (players - founders) as i64
            };
            let kind = pick(&mut rng, &KINDS.map(|k| (k, k.0)));
            let (_, chance, leaves, most) = kind;
            let payer = rng.random_bool(if device.platform == "ios" { 0.14 } else { 0.08 });
            let peak = if matches!(device.platform, "windows" | "macos") {
                1
            } else {
                18
            };
            let hours: [(u32, u32); 24] = std::array::from_fn(|h| (h as u32, (rhythm(h as u32, peak) * 100.0) as u32));
            for day in join..days {
                let date = first_day + Days::new(day as u64);
                let weekend = matches!(date.weekday(), Weekday::Sat | Weekday::Sun);
                // A player who joins during the season plays on the day they join; the founders
                // were playing before it began.
                let plays = (day == join && index >= founders)
                    || rng.random_bool((chance * if weekend { 1.25 } else { 1.0 }).min(0.95));
                if plays {
                    let midnight = date.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc();
                    let open = config.start.max(midnight);
                    let close = config.end.min(midnight + TimeDelta::days(1));
                    let count = rng.random_range(1..=most);
                    let mut today: Vec<(DateTime<Utc>, DateTime<Utc>)> = Vec::new();
                    for _ in 0..count {
                        // A time of day; a session outside the season's window is not in it, and
                        // one that would run past midnight or too close to another is drawn again
                        // (a few times at most).
                        for _ in 0..10 {
                            let hour = pick(&mut rng, &hours);
                            let start = midnight + TimeDelta::minutes(i64::from(hour * 60 + rng.random_range(0..60)));
                            let (low, high) = pick(&mut rng, &LENGTHS);
                            let end = start + TimeDelta::minutes(rng.random_range(low..=high));
                            let spaced = today.iter().all(|(s, e)| {
                                start > *e + TimeDelta::minutes(MIN_BREAK_MINUTES)
                                    || end < *s - TimeDelta::minutes(MIN_BREAK_MINUTES)
                            });
                            let after_last = last_end.is_none_or(|e| start > e + TimeDelta::minutes(MIN_BREAK_MINUTES));
                            let day_end = midnight + TimeDelta::days(1);
                            if start < open || start >= close || (end >= close && close < day_end) {
                                break;
                            }
                            if end < close && spaced && after_last {
                                today.push((start, end));
                                break;
                            }
                        }
                    }
                    today.sort();
                    last_end = today.last().map(|(_, e)| *e).or(last_end);
                    for (start, end) in today {
                        let purchases = if payer && end - start >= TimeDelta::minutes(2) && rng.random_bool(0.35) {
                            (0..rng.random_range(1..=2)).map(|_| pick(&mut rng, &PRICES)).collect()
                        } else {
                            Vec::new()
                        };
                        sessions.push(PlannedSession {
                            device: index,
                            start,
                            end,
                            purchases,
                        });
                    }
                }
                if day > join && rng.random_bool(leaves) {
                    break;
                }
            }
        }
        sessions.sort_by_key(|s| (s.start, s.device));
        let events = events_of(&mut synth, &mut rng, &sessions, config.events);
        Self {
            devices: synth.devices,
            sessions,
            events,
        }
    }

    /// The season's KPIs, counted from its sessions.
    pub fn truth(&self) -> SeasonTruth {
        let mut truth = SeasonTruth::default();
        let mut played: BTreeMap<usize, BTreeSet<NaiveDate>> = BTreeMap::new();
        let mut day_devices: BTreeMap<NaiveDate, DayPlayers> = BTreeMap::new();
        let mut payers_of: BTreeMap<(bool, &'static str), BTreeSet<usize>> = BTreeMap::new();
        for session in &self.sessions {
            let date = session.start.date_naive();
            let device = &self.devices[session.device];
            played.entry(session.device).or_default().insert(date);
            let players = day_devices.entry(date).or_default();
            players.active.insert(session.device);
            players.lengths.push(session.seconds());
            truth.lengths.push(session.seconds());
            let day = truth.days.entry(date).or_default();
            day.sessions += 1;
            if !session.purchases.is_empty() {
                players.paying.insert(session.device);
            }
            for amount in &session.purchases {
                let cents = (amount * 100.0).round() as u64;
                day.purchases += 1;
                day.revenue_cents += cents;
                for (by_version, name) in [(false, device.platform), (true, device.app_version)] {
                    let spend = if by_version {
                        truth.by_app_version.entry(name).or_default()
                    } else {
                        truth.by_platform.entry(name).or_default()
                    };
                    spend.purchases += 1;
                    spend.revenue_cents += cents;
                    payers_of.entry((by_version, name)).or_default().insert(session.device);
                }
            }
        }
        for ((by_version, name), payers) in payers_of {
            let spend = if by_version {
                truth.by_app_version.get_mut(name)
            } else {
                truth.by_platform.get_mut(name)
            };
            if let Some(spend) = spend {
                spend.payers = payers.len() as u64;
            }
        }
        for (date, mut players) in day_devices {
            let lengths = &mut players.lengths;
            lengths.sort_unstable();
            let day = truth.days.entry(date).or_default();
            day.active = players.active.len() as u64;
            day.paying = players.paying.len() as u64;
            let middle = lengths.len() / 2;
            day.median_seconds = if lengths.len() % 2 == 1 {
                lengths[middle] as f64
            } else {
                (lengths[middle - 1] + lengths[middle]) as f64 / 2.0
            };
        }
        let mut cohorts: BTreeMap<(Option<&'static str>, NaiveDate), CohortTruth> = BTreeMap::new();
        for (device, days) in &played {
            let Some(&first) = days.first() else { continue };
            let returned = RETURN_DAYS.map(|n| u64::from(days.contains(&(first + Days::new(n)))));
            for platform in [None, Some(self.devices[*device].platform)] {
                let cohort = cohorts.entry((platform, first)).or_insert(CohortTruth {
                    date: first,
                    platform,
                    devices: 0,
                    returned: [0; 3],
                });
                cohort.devices += 1;
                for (total, r) in cohort.returned.iter_mut().zip(returned) {
                    *total += r;
                }
            }
        }
        truth.cohorts = cohorts.into_values().collect();
        truth
    }
}

/// The devices of one day, as [`Season::truth`] gathers them.
#[derive(Default)]
struct DayPlayers {
    active: BTreeSet<usize>,
    paying: BTreeSet<usize>,
    lengths: Vec<i64>,
}

/// The events of `sessions`, by time: at least each session's own, and about `wanted` in all.
fn events_of(synth: &mut Synth, rng: &mut StdRng, sessions: &[PlannedSession], wanted: u64) -> Vec<PlannedEvent> {
    let minutes = |s: &PlannedSession| (s.end - s.start).num_minutes();
    let own: u64 = sessions
        .iter()
        .map(|s| 2 + ((minutes(s) - 1) / 10) as u64 + s.purchases.len() as u64)
        .sum();
    let extra = wanted.saturating_sub(own);
    // The extra events go to the sessions' inner minutes in proportion to how many they have.
    let inner: Vec<u64> = sessions.iter().map(|s| (minutes(s) - 1).max(0) as u64).collect();
    let total_inner: u64 = inner.iter().sum();
    let mut events = Vec::new();
    let mut cumulative = 0u64;
    let mut given = 0u64;
    for (session, &inner_minutes) in sessions.iter().zip(&inner) {
        cumulative += inner_minutes;
        let until = if total_inner == 0 {
            0
        } else {
            (u128::from(extra) * u128::from(cumulative) / u128::from(total_inner)) as u64
        };
        let share = until - given;
        given = until;
        let device = &synth.devices[session.device];
        let marked = device.app_version != UNMARKED_APP_VERSION;
        let length = minutes(session);
        let mut planned: Vec<(i64, &str, Option<f64>)> = Vec::new();
        planned.push((0, if marked { "sessionStart" } else { "scoreAdjustment" }, None));
        planned.extend((1..=(length - 1) / 10).map(|k| (10 * k, "scoreAdjustment", None)));
        for amount in &session.purchases {
            planned.push((rng.random_range(1..length), PURCHASE_EVENT, Some(*amount)));
        }
        for _ in 0..share {
            planned.push((rng.random_range(1..length), pick(rng, &PLAY_MIX), None));
        }
        planned.push((length, if marked { "sessionEnd" } else { "scoreAdjustment" }, None));
        for (minute, name, amount) in planned {
            let at = session.start + TimeDelta::minutes(minute);
            let mut event = synth.detailed(session.device, name, at - TimeDelta::seconds(2));
            if let Some(params) = event.event_params.as_mut() {
                if amount.is_some() {
                    params.amount = amount;
                }
                if name == "sessionEnd" {
                    params
                        .extra
                        .insert("session_seconds".into(), Value::from(session.seconds()));
                }
            }
            events.push(PlannedEvent { at, event });
        }
    }
    events.sort_by_key(|e| e.at);
    events
}

/// Whether `at` is on the one-minute grid of a season.
pub fn on_grid(at: DateTime<Utc>) -> bool {
    at.second() == 0 && at.nanosecond() == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(days: i64, players: usize, events: u64) -> SeasonConfig {
        let start = DateTime::parse_from_rfc3339("2024-05-01T00:00:00Z").unwrap().to_utc();
        SeasonConfig {
            seed: 3,
            players,
            start,
            end: start + TimeDelta::days(days),
            events,
        }
    }

    #[test]
    fn the_same_settings_plan_the_same_season() {
        let a = Season::plan(&config(5, 50, 2000));
        let b = Season::plan(&config(5, 50, 2000));
        assert_eq!(a.sessions, b.sessions);
        assert_eq!(a.events, b.events);
        let c = Season::plan(&SeasonConfig {
            seed: 4,
            ..config(5, 50, 2000)
        });
        assert_ne!(a.sessions, c.sessions);
    }

    #[test]
    fn sessions_are_spaced_within_one_day_and_the_window() {
        let config = config(10, 200, 20_000);
        let season = Season::plan(&config);
        assert!(season.sessions.len() > 500, "{}", season.sessions.len());
        let mut by_device: BTreeMap<usize, Vec<&PlannedSession>> = BTreeMap::new();
        for s in &season.sessions {
            assert!(s.start >= config.start && s.end < config.end, "{s:?}");
            assert_eq!(s.start.date_naive(), s.end.date_naive(), "{s:?}");
            assert!(s.seconds() >= 60 && s.seconds() <= 7200, "{s:?}");
            by_device.entry(s.device).or_default().push(s);
        }
        for sessions in by_device.values() {
            for pair in sessions.windows(2) {
                assert!(
                    pair[1].start - pair[0].end > TimeDelta::minutes(MIN_BREAK_MINUTES),
                    "{pair:?}"
                );
            }
        }
    }

    #[test]
    fn events_follow_the_plan() {
        let season = Season::plan(&config(7, 120, 9_000));
        assert_eq!(season.events.len(), 9_000);
        let mut purchases = 0;
        for e in &season.events {
            assert!(on_grid(e.at), "{:?}", e.at);
            let json = serde_json::to_value(&e.event).unwrap();
            assert_eq!(
                GameEvent::from_value(json).unwrap(),
                e.event,
                "every event passes validation"
            );
            purchases += usize::from(e.event.event_name == PURCHASE_EVENT);
        }
        assert!(season.events.windows(2).all(|p| p[0].at <= p[1].at));
        let planned: usize = season.sessions.iter().map(|s| s.purchases.len()).sum();
        assert_eq!(purchases, planned);
        // Each session of a marking client opens with sessionStart and closes with sessionEnd at
        // its planned times; the events of a device never pause longer than ten minutes within one.
        for s in &season.sessions {
            let device = &season.devices[s.device];
            let mine: Vec<&PlannedEvent> = season
                .events
                .iter()
                .filter(|e| {
                    e.event.event_params.as_ref().and_then(|p| p.device_id.as_deref()) == Some(&device.id)
                        && e.at >= s.start
                        && e.at <= s.end
                })
                .collect();
            assert_eq!(mine.first().map(|e| e.at), Some(s.start));
            assert!(mine.windows(2).all(|p| p[1].at - p[0].at <= TimeDelta::minutes(10)));
            let names: Vec<&str> = mine.iter().map(|e| e.event.event_name.as_str()).collect();
            if device.app_version == UNMARKED_APP_VERSION {
                assert!(!names.contains(&"sessionStart") && !names.contains(&"sessionEnd"));
            } else {
                assert_eq!(names.iter().filter(|n| **n == "sessionStart").count(), 1);
                assert_eq!(names.iter().filter(|n| **n == "sessionEnd").count(), 1);
                let end = mine.iter().find(|e| e.event.event_name == "sessionEnd").unwrap();
                assert_eq!(end.at, s.end);
                let params = end.event.event_params.as_ref().unwrap();
                assert_eq!(params.extra["session_seconds"], Value::from(s.seconds()));
            }
        }
    }

    #[test]
    fn few_events_wanted_still_send_every_session() {
        let season = Season::plan(&config(3, 40, 1));
        let own: usize = season
            .sessions
            .iter()
            .map(|s| 2 + ((s.seconds() / 60 - 1) / 10) as usize + s.purchases.len())
            .sum();
        assert_eq!(season.events.len(), own);
        assert!(!season.sessions.is_empty());
    }

    #[test]
    fn the_truth_has_returning_players_payers_and_long_retention() {
        let season = Season::plan(&config(40, 300, 10_000));
        let truth = season.truth();
        assert_eq!(truth.days.len(), 40);
        assert_eq!(truth.lengths.len(), season.sessions.len());
        let all: Vec<&CohortTruth> = truth.cohorts.iter().filter(|c| c.platform.is_none()).collect();
        let devices: u64 = all.iter().map(|c| c.devices).sum();
        let seen: BTreeSet<usize> = season.sessions.iter().map(|s| s.device).collect();
        assert_eq!(devices, seen.len() as u64);
        let by_platform: u64 = truth
            .cohorts
            .iter()
            .filter(|c| c.platform.is_some())
            .map(|c| c.devices)
            .sum();
        assert_eq!(by_platform, devices);
        // Every kind of return happens: next day, a week later and a month later.
        for (k, n) in RETURN_DAYS.iter().enumerate() {
            assert!(all.iter().map(|c| c.returned[k]).sum::<u64>() > 0, "day {n}");
        }
        let day = &truth.days[&NaiveDate::from_ymd_opt(2024, 5, 1).unwrap()];
        assert!(day.active > 0 && day.active < (300 * 55 / 100) as u64, "{day:?}");
        assert!(
            truth
                .days
                .values()
                .all(|d| d.paying <= d.active && d.sessions >= d.active)
        );
        assert!(truth.days.values().map(|d| d.paying).sum::<u64>() > 0);
        let cents: u64 = truth.days.values().map(|d| d.revenue_cents).sum();
        assert_eq!(cents, truth.by_platform.values().map(|s| s.revenue_cents).sum::<u64>());
        assert_eq!(
            cents,
            truth.by_app_version.values().map(|s| s.revenue_cents).sum::<u64>()
        );
    }
}
