//! Paths of the game report: what players do right after (or right before) a chosen event.
//!
//! Each time a device does the chosen event, its next N events (or its N events before), within the
//! same session ([`super::sessions`] cuts them), form a path; a session that ends sooner gives a
//! shorter path ending in [`SESSION_END`] (or, before, starting at [`SESSION_START`]). The report
//! counts the paths and gives the most frequent, with their share of all. [`PathSpec::athena_sql`]
//! is the same count in SQL; the template's `GamePathsQuery` is the demo's.
//!
//! The walk goes over each chunk's events in each device's order with the sessions' cut, carrying
//! each device's paths under way (after) or its last N events (before) to the next chunk: what it
//! keeps grows with the devices and the distinct paths, not the events.

use std::collections::HashMap;

use serde::Serialize;

use super::sessions::Play;
use super::texts::Texts;
use crate::error::ReportError;
use crate::figures;
use crate::session::quote_literal;
use crate::text::TextTable;

/// The label of the end of a session in a path after an event.
pub const SESSION_END: &str = "(session end)";
/// The label of the start of a session in a path before an event.
pub const SESSION_START: &str = "(session start)";
/// The paths a report lists, most frequent first.
pub const PATHS_SHOWN: usize = 20;
/// The longest path followed.
pub const MOST_STEPS: usize = 10;

/// Which side of the event the path is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// The events after it.
    After,
    /// The events before it.
    Before,
}

/// The paths to follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathSpec {
    /// The chosen event's name.
    pub event: String,
    /// After or before it.
    pub direction: Direction,
    /// How many events.
    pub steps: usize,
}

impl PathSpec {
    /// The paths of `steps` events `direction` the event `event`; `what` names the argument in
    /// errors.
    pub fn new(event: &str, direction: Direction, steps: usize, what: &str) -> Result<Self, ReportError> {
        if event.is_empty() {
            return Err(ReportError::invalid_argument(what, event, "names no event"));
        }
        if !(1..=MOST_STEPS).contains(&steps) {
            return Err(ReportError::invalid_argument(
                "--path-steps",
                &steps.to_string(),
                format!("a path has 1 to {MOST_STEPS} events"),
            ));
        }
        Ok(Self {
            event: event.to_owned(),
            direction,
            steps,
        })
    }

    /// The paths as Athena SQL over `table` (a quoted name): each path (its events joined by ` > `)
    /// and how many times it was followed, most first, as the report counts them; the first and
    /// last `eventDate` are its two `?` parameters. Sessions are cut as the report cuts them with
    /// a gap of `gap_minutes`.
    pub fn athena_sql(&self, table: &str, gap_minutes: i64) -> String {
        let (function, edge) = match self.direction {
            Direction::After => ("lead", SESSION_END),
            Direction::Before => ("lag", SESSION_START),
        };
        let steps: Vec<String> = (1..=self.steps)
            .map(|k| format!("{function}(name, {k}) OVER (PARTITION BY device, session ORDER BY t, id) AS e{k}"))
            .collect();
        // A path's k-th event, or the session's edge right after its last, or nothing.
        let parts: Vec<String> = (1..=self.steps)
            .map(|k| {
                let before = if k == 1 {
                    "true".to_owned()
                } else {
                    format!("e{} IS NOT NULL", k - 1)
                };
                format!(
                    "CASE WHEN e{k} IS NOT NULL THEN e{k} WHEN {before} THEN {} END",
                    quote_literal(edge)
                )
            })
            .collect();
        let mut parts = parts;
        let path = match self.direction {
            Direction::After => {
                parts.insert(0, "name".to_owned());
                parts
            }
            Direction::Before => {
                parts.reverse();
                parts.push("name".to_owned());
                parts
            }
        };
        format!(
            "WITH copies AS (\n  SELECT eventParams.device_id AS device, eventId AS id, eventTime AS t, eventName AS name,\n         \
             row_number() OVER (\n             PARTITION BY gameId, eventId\n             \
             ORDER BY approximateArrivalTime, shardId, length(sequenceNumber), sequenceNumber) AS copy\n  \
             FROM {table}\n  \
             WHERE gameId IS DISTINCT FROM 'lakelog-probe' AND eventParams.device_id IS NOT NULL\n    \
             AND eventDate BETWEEN CAST(? AS DATE) AND CAST(? AS DATE)\n),\n\
             e AS (\n  SELECT device, id, t, name,\n         \
             lag(t) OVER (PARTITION BY device ORDER BY t, id) AS prev_t,\n         \
             lag(name) OVER (PARTITION BY device ORDER BY t, id) AS prev_name\n  FROM copies WHERE copy = 1\n),\n\
             s AS (\n  SELECT device, id, t, name,\n         \
             sum(CASE WHEN prev_t IS NULL OR name = 'sessionStart' OR prev_name = 'sessionEnd'\n                  \
             OR t - prev_t > INTERVAL '{gap_minutes}' MINUTE THEN 1 ELSE 0 END)\n             \
             OVER (PARTITION BY device ORDER BY t, id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS session\n  FROM e\n),\n\
             p AS (\n  SELECT name, {}\n  FROM s\n)\n\
             SELECT array_join(filter(ARRAY[{}], x -> x IS NOT NULL), ' > ') AS path, count(*) AS times\n\
             FROM p WHERE name = {}\nGROUP BY 1\nORDER BY times DESC, path\n",
            steps.join(",\n         "),
            path.join(",\n    "),
            quote_literal(&self.event)
        )
    }
}

/// One path and how often it was followed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PathCount {
    /// Its events, in order (the chosen event first after it, last before it).
    pub events: Vec<String>,
    /// Times it was followed.
    pub times: i64,
}

/// The paths section of the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Paths {
    /// The chosen event.
    pub event: String,
    /// After or before it.
    pub direction: Direction,
    /// Events per path.
    pub steps: usize,
    /// Times the event was done (each a path).
    pub occurrences: i64,
    /// Distinct paths.
    pub distinct: i64,
    /// The most frequent, most first (ties by their events).
    pub top: Vec<PathCount>,
    /// Whether events may still arrive on time within the range.
    pub provisional: bool,
}

/// A device's walk: its paths under way (after) or its last events (before).
#[derive(Debug, Clone, Default)]
struct Trail {
    pending: Vec<Vec<u32>>,
    recent: Vec<u32>,
}

/// Follows the paths as the chunks' plays come, in each device's order.
#[derive(Debug)]
pub(super) struct PathWalker {
    spec: PathSpec,
    /// The chosen event's name number, once seen.
    anchor: Option<u32>,
    trails: HashMap<u32, Trail, foldhash::fast::RandomState>,
    counts: HashMap<Vec<u32>, i64, foldhash::fast::RandomState>,
    /// Names by number; [`EDGE`] stands for the session's edge.
    names: Texts,
}

/// The number of the session's edge in a path.
const EDGE: u32 = u32::MAX;

impl PathWalker {
    pub(super) fn new(spec: PathSpec) -> Self {
        Self {
            spec,
            anchor: None,
            trails: HashMap::default(),
            counts: HashMap::default(),
            names: Texts::default(),
        }
    }

    /// The number of the name `name`.
    pub(super) fn number(&mut self, name: &str) -> u32 {
        let n = self.names.number(name);
        if self.anchor.is_none() && name == self.spec.event {
            self.anchor = Some(n);
        }
        n
    }

    /// Walks one chunk's `plays` in each device's order: `starts[i]` says whether a session
    /// starts at play `i`, `names[row]` is the number of the row's name.
    pub(super) fn add(&mut self, plays: &[Play], starts: &[bool], names: &[u32]) {
        let steps = self.spec.steps;
        for (i, play) in plays.iter().enumerate() {
            let name = names.get(play.row as usize).copied().unwrap_or(EDGE);
            let trail = self.trails.entry(play.device).or_default();
            if starts.get(i).copied().unwrap_or(true) {
                // The session before ended: the paths under way end with it.
                for mut path in trail.pending.drain(..) {
                    path.push(EDGE);
                    *self.counts.entry(path).or_default() += 1;
                }
                trail.recent.clear();
            }
            match self.spec.direction {
                Direction::After => {
                    if !trail.pending.is_empty() {
                        for path in &mut trail.pending {
                            path.push(name);
                        }
                        // Paths start one event apart: only the oldest can be complete.
                        if trail.pending[0].len() > steps {
                            let path = trail.pending.remove(0);
                            *self.counts.entry(path).or_default() += 1;
                        }
                    }
                    if Some(name) == self.anchor {
                        trail.pending.push(vec![name]);
                    }
                }
                Direction::Before => {
                    if Some(name) == self.anchor {
                        let mut path = Vec::with_capacity(steps + 2);
                        if trail.recent.len() < steps {
                            path.push(EDGE);
                        }
                        path.extend(&trail.recent);
                        path.push(name);
                        *self.counts.entry(path).or_default() += 1;
                    }
                    trail.recent.push(name);
                    if trail.recent.len() > steps {
                        trail.recent.remove(0);
                    }
                }
            }
        }
    }

    /// The paths counted; the sessions under way end here.
    pub(super) fn finish(mut self, provisional: bool) -> Paths {
        for (_, trail) in std::mem::take(&mut self.trails) {
            for mut path in trail.pending {
                path.push(EDGE);
                *self.counts.entry(path).or_default() += 1;
            }
        }
        let edge = match self.spec.direction {
            Direction::After => SESSION_END,
            Direction::Before => SESSION_START,
        };
        let names = &self.names;
        let mut top: Vec<PathCount> = self
            .counts
            .iter()
            .map(|(path, times)| PathCount {
                events: path.iter().map(|&n| names.get(n).unwrap_or(edge).to_owned()).collect(),
                times: *times,
            })
            .collect();
        top.sort_by(|a, b| {
            b.times
                .cmp(&a.times)
                .then_with(|| a.events.join(" > ").cmp(&b.events.join(" > ")))
        });
        let occurrences = top.iter().map(|p| p.times).sum();
        let distinct = top.len() as i64;
        top.truncate(PATHS_SHOWN);
        Paths {
            event: self.spec.event,
            direction: self.spec.direction,
            steps: self.spec.steps,
            occurrences,
            distinct,
            top,
            provisional,
        }
    }
}

impl Paths {
    /// What the section is, in a line.
    pub(super) fn title(&self) -> String {
        let side = match self.direction {
            Direction::After => "after",
            Direction::Before => "before",
        };
        format!(
            "Paths: the {} events {side} {} within a session",
            self.steps, self.event
        )
    }

    /// The most frequent paths, for people.
    pub(super) fn table(&self) -> TextTable {
        let mut table = TextTable::new(["path", "times", "share"]);
        for p in &self.top {
            table.push([
                crate::text::marked(p.events.join(" > "), self.provisional),
                figures::count(p.times.max(0) as u64),
                figures::percent((self.occurrences > 0).then(|| p.times as f64 / self.occurrences as f64)),
            ]);
        }
        table
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Walks `events` (device, name, whether a session starts) in one chunk, in order.
    fn walk(spec: PathSpec, events: &[(u32, &str, bool)]) -> Paths {
        let mut walker = PathWalker::new(spec);
        let names: Vec<u32> = events.iter().map(|e| walker.number(e.1)).collect();
        let plays: Vec<Play> = events
            .iter()
            .enumerate()
            .map(|(row, e)| Play {
                device: e.0,
                t: row as i64,
                row: row as u32,
            })
            .collect();
        let starts: Vec<bool> = events.iter().map(|e| e.2).collect();
        walker.add(&plays, &starts, &names);
        walker.finish(false)
    }

    fn paths(p: &Paths) -> Vec<(String, i64)> {
        p.top.iter().map(|c| (c.events.join(" > "), c.times)).collect()
    }

    #[test]
    fn paths_after_an_event_stop_at_their_length_or_the_session_end() {
        let spec = PathSpec::new("buy", Direction::After, 2, "--path-after").unwrap();
        let events = [
            (0, "open", true),
            (0, "buy", false),
            (0, "play", false),
            (0, "buy", false),
            (0, "play", false),
            // A new session: the second buy's path ends with the first.
            (0, "open", true),
            (1, "buy", true),
            (1, "play", false),
            (1, "buy", false),
        ];
        let p = walk(spec, &events);
        assert_eq!(
            paths(&p),
            [
                ("buy > play > buy".to_owned(), 2),
                ("buy > (session end)".to_owned(), 1),
                ("buy > play > (session end)".to_owned(), 1),
            ]
        );
        assert_eq!((p.occurrences, p.distinct), (4, 3));
    }

    #[test]
    fn paths_before_an_event_start_at_the_session_start_when_shorter() {
        let spec = PathSpec::new("buy", Direction::Before, 2, "--path-before").unwrap();
        let events = [
            (0, "open", true),
            (0, "play", false),
            (0, "play", false),
            (0, "buy", false),
            (0, "buy", true),
        ];
        assert_eq!(
            paths(&walk(spec, &events)),
            [
                ("(session start) > buy".to_owned(), 1),
                ("play > play > buy".to_owned(), 1)
            ]
        );
        assert!(PathSpec::new("buy", Direction::After, 0, "--path-after").is_err());
        assert!(PathSpec::new("", Direction::After, 3, "--path-after").is_err());
    }
}
