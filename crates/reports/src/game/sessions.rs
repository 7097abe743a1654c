//! Sessions of the game report: how often and how long people play.
//!
//! A device's events, in `eventTime` order (ties by `gameId/eventId`), are cut into sessions: one
//! starts at the device's first event, at a `sessionStart`, after a `sessionEnd`, and after a gap
//! of more than the inactivity gap (30 minutes unless set) since the device's previous event. A
//! session lasts from its first event to its last, and belongs to the day it starts on. Events
//! without a device or an `eventTime` are in no session (the sink stamps every event's time).
//!
//! The cut is, for each chunk of time, one sort of its events by device and time and one walk
//! over them, carrying each device's open session to the next chunk ([`Cutter`]): as a SQL window
//! over every event it was the report's largest sort. `GameSessionsPerDayQuery` in the template is
//! the same cut in SQL, for Athena.

use std::collections::BTreeMap;

use chrono::{NaiveDate, TimeDelta};
use serde::Serialize;

use super::DAY_MICROS;
use crate::figures;
use crate::session::UNIX_EPOCH_DAYS_FROM_CE;
use crate::text::TextTable;

/// The inactivity after which the next event starts a new session, unless set.
pub(super) const DEFAULT_GAP: TimeDelta = TimeDelta::minutes(30);

/// The session lengths counted, as `(label, up to this many seconds)`; the last has no bound.
pub const SESSION_LENGTHS: [(&str, Option<i64>); 6] = [
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
    /// Whether events may still arrive on time for the day's sessions.
    pub provisional: bool,
}

/// The sessions KPIs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Sessions {
    /// The inactivity gap used, in minutes.
    pub gap_minutes: i64,
    /// Per day.
    pub days: Vec<DaySessions>,
    /// Sessions by length, in the buckets of [`SESSION_LENGTHS`].
    pub lengths: Vec<(String, i64)>,
    /// Whether events may still arrive on time within the range (for the lengths).
    pub provisional: bool,
}

/// What an event's name says about sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mark {
    /// `sessionStart`: a session starts at it.
    Start,
    /// `sessionEnd`: a session starts after it.
    End,
    /// Any other event.
    Play,
}

impl Mark {
    /// The mark of an event named `name`.
    pub(super) fn of(name: &str) -> Self {
        match name {
            "sessionStart" => Self::Start,
            "sessionEnd" => Self::End,
            _ => Self::Play,
        }
    }
}

/// One event of a device, as sessions are cut from it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Play {
    /// The device's number.
    pub device: u32,
    /// The event time, in microseconds since the epoch.
    pub t: i64,
    /// The event's row, in `marks` and in the tie order.
    pub row: u32,
}

/// Puts a chunk's `plays` in each device's order: by device, then time, ties in `tie`'s order of
/// their rows.
pub(super) fn in_order(plays: &mut [Play], tie: impl Fn(usize, usize) -> std::cmp::Ordering) {
    plays.sort_unstable_by(|a, b| {
        (a.device, a.t)
            .cmp(&(b.device, b.t))
            .then_with(|| tie(a.row as usize, b.row as usize))
    });
}

/// Cuts sessions from plays given a chunk of time at a time: each chunk's plays must all be later
/// than those of the chunks before. What it carries from one chunk to the next is each device's
/// open session; what it keeps is a count per day and each session's length, for the medians.
/// Lengths and gaps are taken in seconds as SQL's `date_part('epoch', t)` gives them, so that the
/// saved Athena query finds the same.
#[derive(Debug)]
pub(super) struct Cutter {
    gap_seconds: f64,
    gap: TimeDelta,
    /// Per device number, its session under way and the last day it started one.
    devices: Vec<Device>,
    days: BTreeMap<i64, Day>,
    buckets: [i64; SESSION_LENGTHS.len()],
}

/// What a cutter knows of a device.
#[derive(Debug, Clone, Copy, Default)]
struct Device {
    open: Option<Open>,
    /// The last day a session of the device started on.
    counted: Option<i64>,
}

/// A device's session under way.
#[derive(Debug, Clone, Copy)]
struct Open {
    start: i64,
    last: i64,
    /// The device's last event was a `sessionEnd`.
    ended: bool,
}

/// The sessions that started on one day.
#[derive(Debug, Default)]
struct Day {
    sessions: i64,
    devices: i64,
    lengths: Vec<f64>,
}

fn seconds(t: i64) -> f64 {
    t as f64 / 1e6
}

impl Cutter {
    /// A cutter of sessions after `gap` of inactivity.
    pub(super) fn new(gap: TimeDelta) -> Self {
        Cutter {
            gap_seconds: gap.num_seconds().max(1) as f64,
            gap,
            devices: Vec::new(),
            days: BTreeMap::new(),
            buckets: [0; SESSION_LENGTHS.len()],
        }
    }

    /// Cuts the next chunk's `plays`, [`in_order`]; `marks` is each row's [`Mark`]. Returns, per
    /// play, whether a session starts at it.
    pub(super) fn add(&mut self, plays: &[Play], marks: &[Mark]) -> Vec<bool> {
        let mut started = Vec::with_capacity(plays.len());
        for play in plays {
            let mark = marks.get(play.row as usize).copied().unwrap_or(Mark::Play);
            let device = play.device as usize;
            if self.devices.len() <= device {
                self.devices.resize(device + 1, Device::default());
            }
            let starts = match self.devices[device].open {
                Some(open) => {
                    mark == Mark::Start || open.ended || seconds(play.t) - seconds(open.last) > self.gap_seconds
                }
                None => true,
            };
            started.push(starts);
            if starts {
                if let Some(open) = self.devices[device].open {
                    self.close(open);
                }
                let day_number = play.t.div_euclid(DAY_MICROS);
                let day = self.days.entry(day_number).or_default();
                day.sessions += 1;
                // A device's plays come in time order: its days only move forward.
                if self.devices[device].counted != Some(day_number) {
                    day.devices += 1;
                    self.devices[device].counted = Some(day_number);
                }
                self.devices[device].open = Some(Open {
                    start: play.t,
                    last: play.t,
                    ended: mark == Mark::End,
                });
            } else if let Some(open) = self.devices[device].open.as_mut() {
                open.last = play.t;
                open.ended = mark == Mark::End;
            }
        }
        started
    }

    fn close(&mut self, open: Open) {
        let length = seconds(open.last) - seconds(open.start);
        self.days
            .entry(open.start.div_euclid(DAY_MICROS))
            .or_default()
            .lengths
            .push(length);
        let bucket = SESSION_LENGTHS
            .iter()
            .position(|(_, bound)| bound.is_none_or(|high| length < high as f64))
            .unwrap_or(SESSION_LENGTHS.len() - 1);
        self.buckets[bucket] += 1;
    }

    /// Ends every session under way and gives the KPIs.
    pub(super) fn finish(mut self) -> Sessions {
        for open in std::mem::take(&mut self.devices).into_iter().filter_map(|d| d.open) {
            self.close(open);
        }
        let days = self
            .days
            .into_iter()
            .filter_map(|(day, mut d)| {
                let date = NaiveDate::from_num_days_from_ce_opt(i32::try_from(day).ok()? + UNIX_EPOCH_DAYS_FROM_CE)?;
                d.lengths.sort_unstable_by(f64::total_cmp);
                let middle = d.lengths.len() / 2;
                let median_seconds = match d.lengths.len() {
                    0 => None,
                    n if n % 2 == 1 => Some(d.lengths[middle]),
                    _ => Some((d.lengths[middle - 1] + d.lengths[middle]) / 2.0),
                };
                Some(DaySessions {
                    date,
                    sessions: d.sessions,
                    devices: d.devices,
                    sessions_per_user: (d.devices > 0).then(|| d.sessions as f64 / d.devices as f64),
                    median_seconds,
                    provisional: false,
                })
            })
            .collect();
        Sessions {
            gap_minutes: self.gap.num_minutes(),
            days,
            lengths: SESSION_LENGTHS
                .iter()
                .zip(self.buckets)
                .map(|((label, _), n)| ((*label).to_owned(), n))
                .collect(),
            provisional: false,
        }
    }
}

impl Sessions {
    /// The days as a table for people.
    pub fn days_table(&self) -> TextTable {
        let mut table = TextTable::new(["date", "sessions", "devices", "sessions per user", "median length"]);
        for d in &self.days {
            table.push([
                crate::text::marked(d.date.to_string(), d.provisional),
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

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: i64 = 60_000_000;

    /// Cuts `events` (device, minute, name) with a 30-minute gap, ties in row order.
    fn cut_minutes(events: &[(u32, i64, &str)]) -> Sessions {
        cut_in_chunks(events, &[(i64::MIN, i64::MAX)])
    }

    /// [`cut_minutes`], given the events of each chunk of minutes `[from, to)` in turn.
    fn cut_in_chunks(events: &[(u32, i64, &str)], chunks: &[(i64, i64)]) -> Sessions {
        let marks: Vec<Mark> = events.iter().map(|e| Mark::of(e.2)).collect();
        let mut cutter = Cutter::new(DEFAULT_GAP);
        for &(from, to) in chunks {
            let mut plays: Vec<Play> = events
                .iter()
                .enumerate()
                .filter(|(_, e)| (from..to).contains(&e.1))
                .map(|(row, &(device, minute, _))| Play {
                    device,
                    t: minute * MINUTE,
                    row: row as u32,
                })
                .collect();
            in_order(&mut plays, |a, b| a.cmp(&b));
            cutter.add(&plays, &marks);
        }
        cutter.finish()
    }

    fn lengths(sessions: &Sessions) -> Vec<i64> {
        sessions.lengths.iter().map(|(_, n)| *n).collect()
    }

    #[test]
    fn a_gap_of_more_than_thirty_minutes_a_start_or_an_end_cuts_a_session() {
        let sessions = cut_minutes(&[
            // Device 1: 0-10, then 41 (31 minutes later) to 71 (exactly 30 minutes later: same).
            (1, 10, "levelUp"),
            (1, 0, "levelUp"),
            (1, 41, "levelUp"),
            (1, 71, "levelUp"),
            // Device 2: a start, play, an end, then play a minute later is a new session; a start
            // a minute after that is another.
            (2, 100, "sessionStart"),
            (2, 103, "levelUp"),
            (2, 104, "sessionEnd"),
            (2, 105, "levelUp"),
            (2, 106, "sessionStart"),
        ]);
        let day = &sessions.days[0];
        assert_eq!(sessions.days.len(), 1);
        assert_eq!((day.sessions, day.devices), (5, 2));
        // Lengths 10, 30, 4, 0 and 0 minutes.
        assert_eq!(day.median_seconds, Some(240.0));
        assert_eq!(lengths(&sessions), [2, 1, 1, 0, 1, 0]);
        assert_eq!(day.sessions_per_user, Some(2.5));
    }

    #[test]
    fn chunks_of_time_cut_as_one_and_count_a_device_once_a_day() {
        let events = [
            (1, 0, "levelUp"),
            (2, 5, "levelUp"),
            (1, 20, "sessionEnd"),
            (1, 25, "levelUp"),
            (2, 40, "levelUp"),
            (1, 70, "levelUp"),
            (2, 24 * 60 - 5, "levelUp"),
            (2, 24 * 60 + 5, "levelUp"),
        ];
        let whole = cut_minutes(&events);
        // The same events in chunks of time: 0-30, 30-60, 60-1440, 1440 on.
        let chunks = [(0, 30), (30, 60), (60, 24 * 60), (24 * 60, i64::MAX)];
        assert_eq!(cut_in_chunks(&events, &chunks), whole);
        // Device 1: 0-20, 25, 70; device 2: 5, 40, and 23:55-00:05 (the first day's).
        let day = &whole.days[0];
        assert_eq!((whole.days.len(), day.sessions, day.devices), (1, 6, 2));
    }

    #[test]
    fn ties_in_time_follow_the_tie_order_and_a_session_belongs_to_its_first_day() {
        // An end and a play in the same instant: in row order the play follows the end and starts
        // a session; the other way round, the end closes the session the play is in.
        let end_first = cut_minutes(&[(1, 0, "levelUp"), (1, 5, "sessionEnd"), (1, 5, "levelUp")]);
        assert_eq!(end_first.days[0].sessions, 2);
        let play_first = cut_minutes(&[(1, 0, "levelUp"), (1, 5, "levelUp"), (1, 5, "sessionEnd")]);
        assert_eq!(play_first.days[0].sessions, 1);
        // 23:50 to 00:10: one session, on the first day; an even count's median is the middle two's
        // mean.
        let day = 24 * 60;
        let sessions = cut_minutes(&[
            (1, day - 10, "levelUp"),
            (1, day + 10, "levelUp"),
            (2, day + 1, "levelUp"),
        ]);
        let dates: Vec<String> = sessions.days.iter().map(|d| d.date.to_string()).collect();
        assert_eq!(dates, ["1970-01-01", "1970-01-02"]);
        assert_eq!(sessions.days[0].median_seconds, Some(1200.0));
        let both = cut_minutes(&[(1, 0, "levelUp"), (1, 10, "levelUp"), (2, 0, "levelUp")]);
        assert_eq!(both.days[0].median_seconds, Some(300.0));
        assert!(cut_minutes(&[]).days.is_empty());
    }
}
