//! Funnels of the game report: of the devices that did a first step, how many went on to each
//! next step, in order, within a window.
//!
//! A funnel is a list of steps, each an event name with optional conditions on its parameters
//! (`tutorialStep step=2`: a `tutorialStep` whose parameter `step` reads `2`), written on the
//! command line as `tutorialBegin > tutorialStep step=1 > tutorialComplete` or kept in a file
//! ([`Funnel::read_file`]). A parameter is a typed field of `eventParams` (`platform`,
//! `app_version`, `amount`...) or one kept in `extraParams`; its value is compared as text, a
//! string as itself and anything else as its JSON (`2`, `4.99`, `true`).
//!
//! Each device's funnel starts at its first event that is the first step (its entry, once per
//! device and range), and goes on, in the device's event order (`eventTime`, ties by `eventId`),
//! to the earliest event after the previous step that is the next step, no later than the window
//! (24 hours unless set) after the entry:
//!
//! - **loose** order: other events may come between two steps;
//! - **strict** order: each step must be the device's very next event after the step before, or
//!   the funnel ends there.
//!
//! Per step the report gives the devices that reached it, their share of those who entered
//! (conversion) and of those at the step before, those lost since the step before (drop-off),
//! and the median time from the step before; for all devices, by the platform of the entry, and
//! by the day the device was first seen in the range. A figure is provisional while a funnel it
//! counts may still move on: its window has not closed by the report's close (see
//! [`super::Close`]). [`Funnel::athena_sql`] is the same funnel in SQL, for Athena; the
//! template's `GameFunnelQuery` is the demo's.
//!
//! The steps are matched as the events are read ([`Matcher`]), each device's funnel carried from
//! one chunk of time to the next ([`Walker`]): what it keeps grows with the devices, not the
//! events.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use chrono::{NaiveDate, TimeDelta};
use serde::{Deserialize, Serialize};

use super::sessions::Play;
use super::texts::Texts;
use super::{Close, DAY_MICROS};
use crate::chart::{self, Svg, Unit};
use crate::error::ReportError;
use crate::figures;
use crate::session::{UNIX_EPOCH_DAYS_FROM_CE, quote_literal};
use crate::text::TextTable;

/// The window of a funnel, unless set.
pub const DEFAULT_WINDOW_HOURS: u32 = 24;
/// The most steps of all funnels of one report together.
pub const MOST_STEPS: usize = 64;

/// How strictly the steps must follow each other.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// Other events may come between two steps.
    #[default]
    Loose,
    /// Each step is the device's very next event after the step before.
    Strict,
}

impl std::str::FromStr for Order {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "loose" => Ok(Self::Loose),
            "strict" => Ok(Self::Strict),
            other => Err(format!("`{other}` is neither loose nor strict")),
        }
    }
}

impl std::fmt::Display for Order {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Loose => "loose",
            Self::Strict => "strict",
        })
    }
}

/// A condition on a step's parameter: it reads `value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    /// The parameter's name.
    pub param: String,
    /// The text it must read.
    pub value: String,
}

/// One step: an event name and the conditions on its parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The `eventName`.
    pub event: String,
    /// All must hold.
    pub conditions: Vec<Condition>,
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.event)?;
        for c in &self.conditions {
            write!(f, " {}={}", c.param, c.value)?;
        }
        Ok(())
    }
}

/// A funnel to report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Funnel {
    /// Its name.
    pub name: String,
    /// Its steps, at least two.
    pub steps: Vec<Step>,
    /// How long after the entry the last step may come.
    pub window: TimeDelta,
    /// How strictly the steps follow each other.
    pub order: Order,
}

/// A funnel as a file keeps it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FunnelEntry {
    name: String,
    steps: Vec<String>,
    #[serde(default = "default_window")]
    window_hours: u32,
    #[serde(default)]
    order: Order,
}

fn default_window() -> u32 {
    DEFAULT_WINDOW_HOURS
}

/// A file of funnels.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FunnelFile {
    funnels: Vec<FunnelEntry>,
}

/// Whether `name` can name a parameter: letters, digits and `_`.
fn is_param_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl Funnel {
    /// A funnel named `name` of `steps` written as `EVENT [PARAM=VALUE ...] > EVENT ...`; `what`
    /// names where the text came from in errors.
    pub fn parse(name: &str, steps: &str, window_hours: u32, order: Order, what: &str) -> Result<Self, ReportError> {
        let invalid = |reason: String| ReportError::invalid_argument(what, steps, reason);
        let mut parsed = Vec::new();
        for (k, text) in steps.split('>').enumerate() {
            let mut words = text.split_whitespace();
            let Some(event) = words.next() else {
                return Err(invalid(format!("step {} is empty", k + 1)));
            };
            let conditions = words
                .map(|word| match word.split_once('=') {
                    Some((param, value)) if is_param_name(param) => Ok(Condition {
                        param: param.to_owned(),
                        value: value.to_owned(),
                    }),
                    _ => Err(invalid(format!(
                        "step {} ({event}): `{word}` is not PARAM=VALUE (a parameter's name is letters, digits and _)",
                        k + 1
                    ))),
                })
                .collect::<Result<_, _>>()?;
            parsed.push(Step {
                event: event.to_owned(),
                conditions,
            });
        }
        if parsed.len() < 2 {
            return Err(invalid("a funnel has at least two steps, separated by `>`".to_owned()));
        }
        if window_hours == 0 {
            return Err(invalid("the window is at least one hour".to_owned()));
        }
        Ok(Self {
            name: name.to_owned(),
            steps: parsed,
            window: TimeDelta::hours(i64::from(window_hours)),
            order,
        })
    }

    /// The funnels of a JSON file: `{"funnels": [{"name": "onboarding", "steps": ["tutorialBegin",
    /// "tutorialStep step=1", ...], "window_hours": 24, "order": "loose"}, ...]}` (`window_hours`
    /// and `order` may be left out).
    pub fn read_file(path: &Path) -> Result<Vec<Self>, ReportError> {
        let what = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ReportError::invalid_argument("--funnels", &what, e.to_string()))?;
        let file: FunnelFile = serde_json::from_str(&text)
            .map_err(|e| ReportError::invalid_argument("--funnels", &what, format!("not a funnels file: {e}")))?;
        file.funnels
            .iter()
            .enumerate()
            .map(|(i, f)| {
                Self::parse(
                    &f.name,
                    &f.steps.join(" > "),
                    f.window_hours,
                    f.order,
                    &format!("{what}: funnel {} ({})", i + 1, f.name),
                )
            })
            .collect()
    }

    /// The funnel as Athena SQL over `table` (a quoted name): per first-seen day and platform of
    /// the entry (and all platforms, a NULL platform), the devices that reached each step and the
    /// median seconds from the step before, as the report counts them; the first and last
    /// `eventDate` are its two `?` parameters.
    pub fn athena_sql(&self, table: &str) -> String {
        let matches = |step: &Step| {
            std::iter::once(format!("e.name = {}", quote_literal(&step.event)))
                .chain(step.conditions.iter().map(|c| {
                    let value = quote_literal(&c.value);
                    if game_events::PARAM_FIELDS.contains(&c.param.as_str()) {
                        format!("CAST(e.params.{} AS VARCHAR) = {value}", c.param)
                    } else {
                        format!("json_extract_scalar(e.extra, '$.{}') = {value}", c.param)
                    }
                }))
                .collect::<Vec<_>>()
                .join(" AND ")
        };
        let next = match self.order {
            Order::Loose => "e.n > p.n",
            Order::Strict => "e.n = p.n + 1",
        };
        let window = self.window.num_hours();
        let mut sql = format!(
            "WITH copies AS (\n  SELECT eventParams.device_id AS device, coalesce(eventParams.platform, 'unknown') AS platform,\n         \
             eventId AS id, eventTime AS t, eventName AS name, eventParams AS params, extraParams AS extra,\n         \
             row_number() OVER (\n             PARTITION BY gameId, eventId\n             \
             ORDER BY approximateArrivalTime, shardId, length(sequenceNumber), sequenceNumber) AS copy\n  \
             FROM {table}\n  \
             WHERE gameId IS DISTINCT FROM 'lakelog-probe' AND eventParams.device_id IS NOT NULL\n    \
             AND eventDate BETWEEN CAST(? AS DATE) AND CAST(? AS DATE)\n),\n\
             e AS (\n  SELECT device, platform, t, name, params, extra,\n         \
             row_number() OVER (PARTITION BY device ORDER BY t, id) AS n\n  FROM copies WHERE copy = 1\n),\n\
             seen AS (SELECT device, CAST(min(t) AS DATE) AS first_seen FROM e GROUP BY device),\n\
             s1 AS (\n  SELECT device, platform, t, n, t AS entry FROM (\n    \
             SELECT e.*, row_number() OVER (PARTITION BY e.device ORDER BY e.n) AS k FROM e WHERE {}\n  ) f WHERE k = 1\n)",
            matches(&self.steps[0])
        );
        for (k, step) in self.steps.iter().enumerate().skip(1) {
            let (this, before) = (k + 1, k);
            sql.push_str(&format!(
                ",\ns{this} AS (\n  SELECT e.device, e.t, e.n, p.entry FROM (\n    \
                 SELECT p.device, min(e.n) AS n FROM s{before} p JOIN e ON e.device = p.device AND {next}\n      \
                 AND e.t <= p.entry + INTERVAL '{window}' HOUR AND {}\n    GROUP BY p.device\n  ) q \
                 JOIN s{before} p ON p.device = q.device JOIN e ON e.device = q.device AND e.n = q.n\n)",
                matches(step)
            ));
        }
        let steps = self.steps.len();
        let joins: String = (2..=steps)
            .map(|k| format!("\n  LEFT JOIN s{k} ON s{k}.device = s1.device"))
            .collect();
        let reached: String = (2..=steps)
            .map(|k| format!(",\n       count(s{k}.device) AS step{k}"))
            .collect();
        let medians: String = (2..=steps)
            .map(|k| {
                format!(
                    ",\n       approx_percentile(to_unixtime(s{k}.t) - to_unixtime(s{}.t), 0.5) AS median_seconds{k}",
                    k - 1
                )
            })
            .collect();
        sql.push_str(&format!(
            "\nSELECT seen.first_seen, s1.platform, count(*) AS step1{reached}{medians}\n\
             FROM s1 JOIN seen ON seen.device = s1.device{joins}\n\
             GROUP BY GROUPING SETS ((seen.first_seen), (seen.first_seen, s1.platform))\n\
             ORDER BY s1.platform NULLS FIRST, seen.first_seen\n"
        ));
        sql
    }
}

/// The parameter a condition reads.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Param {
    /// A typed field of `eventParams`: the number of its column `p{n}` among [`Matcher::typed`].
    Typed(usize),
    /// A key of `extraParams`.
    Extra(String),
}

/// A step as rows are matched to it: its bit, and its conditions.
#[derive(Debug, Clone)]
struct StepMatch {
    bit: u32,
    conditions: Vec<(Param, String)>,
}

/// Matches rows to the steps of every funnel: each row gets a mask of the steps it is, bit
/// `offset(funnel) + step`.
#[derive(Debug, Clone, Default)]
pub(super) struct Matcher {
    by_name: HashMap<String, Vec<StepMatch>, foldhash::fast::RandomState>,
    /// The typed fields of `eventParams` the conditions read, each a column `p{n}`.
    typed: Vec<String>,
    /// The event names whose `extraParams` the conditions read.
    extra_names: Vec<String>,
}

impl Matcher {
    /// The matcher of `funnels`; more than [`MOST_STEPS`] steps in all is an error.
    pub(super) fn new(funnels: &[Funnel]) -> Result<Self, ReportError> {
        let total: usize = funnels.iter().map(|f| f.steps.len()).sum();
        if total > MOST_STEPS {
            return Err(ReportError::invalid_argument(
                "--funnel",
                &total.to_string(),
                format!("the funnels have {total} steps in all; a report follows at most {MOST_STEPS}"),
            ));
        }
        let mut matcher = Self::default();
        let mut bit = 0;
        for funnel in funnels {
            for step in &funnel.steps {
                let conditions = step
                    .conditions
                    .iter()
                    .map(|c| {
                        let param = if game_events::PARAM_FIELDS.contains(&c.param.as_str()) {
                            let n = match matcher.typed.iter().position(|t| *t == c.param) {
                                Some(n) => n,
                                None => {
                                    matcher.typed.push(c.param.clone());
                                    matcher.typed.len() - 1
                                }
                            };
                            Param::Typed(n)
                        } else {
                            if !matcher.extra_names.contains(&step.event) {
                                matcher.extra_names.push(step.event.clone());
                            }
                            Param::Extra(c.param.clone())
                        };
                        (param, c.value.clone())
                    })
                    .collect();
                matcher
                    .by_name
                    .entry(step.event.clone())
                    .or_default()
                    .push(StepMatch { bit, conditions });
                bit += 1;
            }
        }
        Ok(matcher)
    }

    /// Whether there is nothing to match.
    pub(super) fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// The typed parameters read, as SQL columns `p0`, `p1`... of the copies.
    pub(super) fn typed_columns(&self) -> String {
        self.typed
            .iter()
            .enumerate()
            .map(|(n, param)| format!(r#", CAST("eventParams"['{param}'] AS VARCHAR) AS p{n}"#))
            .collect()
    }

    /// How many typed parameters are read.
    pub(super) fn typed_count(&self) -> usize {
        self.typed.len()
    }

    /// The event names, as SQL literals, whose `extraParams` are read.
    pub(super) fn extra_names(&self) -> impl Iterator<Item = String> + '_ {
        self.extra_names.iter().map(|n| quote_literal(n))
    }

    /// The steps an event named `name` is, given its typed parameters read (in the order of
    /// [`Matcher::typed_columns`]) and its `extraParams` text.
    pub(super) fn mask(&self, name: &str, typed: &[Option<&str>], extra: Option<&str>) -> u64 {
        let Some(steps) = self.by_name.get(name) else {
            return 0;
        };
        let mut parsed: Option<Option<serde_json::Map<String, serde_json::Value>>> = None;
        let mut mask = 0;
        for step in steps {
            let holds = step.conditions.iter().all(|(param, value)| match param {
                Param::Typed(n) => typed.get(*n).copied().flatten() == Some(value.as_str()),
                Param::Extra(key) => {
                    let params = parsed.get_or_insert_with(|| extra.and_then(|text| serde_json::from_str(text).ok()));
                    params
                        .as_ref()
                        .and_then(|p| p.get(key))
                        .is_some_and(|v| super::value_text(v) == *value)
                }
            });
            if holds {
                mask |= 1 << step.bit;
            }
        }
        mask
    }
}

/// A device's way through one funnel.
#[derive(Debug, Clone)]
struct Way {
    /// The time of each step reached, in microseconds.
    times: Vec<i64>,
    /// The platform of the entry.
    platform: u32,
    /// Whether it can go no further.
    over: bool,
}

/// Follows every device through every funnel as the chunks' plays come, in order.
#[derive(Debug)]
pub(super) struct Walker {
    funnels: Vec<Funnel>,
    /// Per device number, the day of its first play (days since the epoch).
    first_day: Vec<i32>,
    /// Per funnel, per device number, its way, once it entered.
    ways: Vec<Vec<Option<Way>>>,
}

/// A device not seen yet.
const UNSEEN: i32 = i32::MIN;

impl Walker {
    pub(super) fn new(funnels: &[Funnel]) -> Self {
        Self {
            funnels: funnels.to_vec(),
            first_day: Vec::new(),
            ways: vec![Vec::new(); funnels.len()],
        }
    }

    /// Walks one chunk's `plays`, in each device's order (every play later than those of the
    /// chunks before): `masks[row]` are the steps the row is, `platforms[row]` its platform.
    pub(super) fn add(&mut self, plays: &[Play], masks: &[u64], platforms: &[u32]) {
        if self.funnels.is_empty() {
            return;
        }
        for play in plays {
            let device = play.device as usize;
            if self.first_day.len() <= device {
                self.first_day.resize(device + 1, UNSEEN);
            }
            if self.first_day[device] == UNSEEN {
                self.first_day[device] = play.t.div_euclid(DAY_MICROS) as i32;
            }
            let mask = masks.get(play.row as usize).copied().unwrap_or(0);
            let mut offset = 0;
            for (f, funnel) in self.funnels.iter().enumerate() {
                let steps = funnel.steps.len();
                let is = |k: usize| mask & (1 << (offset + k)) != 0;
                let ways = &mut self.ways[f];
                if ways.len() <= device {
                    ways.resize(device + 1, None);
                }
                match &mut ways[device] {
                    None => {
                        if is(0) {
                            ways[device] = Some(Way {
                                times: vec![play.t],
                                platform: platforms.get(play.row as usize).copied().unwrap_or(0),
                                over: steps == 1,
                            });
                        }
                    }
                    Some(way) if !way.over => {
                        let entry = way.times[0];
                        let next = way.times.len();
                        if play.t - entry > funnel.window.num_microseconds().unwrap_or(i64::MAX) {
                            way.over = true;
                        } else if is(next) {
                            way.times.push(play.t);
                            way.over = way.times.len() == steps;
                        } else if funnel.order == Order::Strict {
                            way.over = true;
                        }
                    }
                    Some(_) => {}
                }
                offset += steps;
            }
        }
    }

    /// The funnels' figures; `platforms` names each platform number; a way whose window ends
    /// after `close` is still open (the range's own close is marked with the report's other
    /// whole-range figures, [`super::GameReport`]'s `mark_provisional`).
    pub(super) fn finish(self, platforms: &Texts, close: &Close) -> Vec<FunnelReport> {
        let day_date = |day: i32| NaiveDate::from_num_days_from_ce_opt(day.checked_add(UNIX_EPOCH_DAYS_FROM_CE)?);
        let mut reports = Vec::new();
        for (funnel, ways) in self.funnels.iter().zip(self.ways) {
            let steps = funnel.steps.len();
            let window = funnel.window.num_microseconds().unwrap_or(i64::MAX);
            let mut all = Tally::new(steps);
            let mut by_platform: BTreeMap<String, Tally> = BTreeMap::new();
            let mut by_day: BTreeMap<i32, Tally> = BTreeMap::new();
            for (device, way) in ways.into_iter().enumerate() {
                let Some(way) = way else { continue };
                let open = way.times.len() < steps && !close.is_final_micros(way.times[0].saturating_add(window));
                let platform = platforms.get(way.platform).unwrap_or_default().to_owned();
                let day = self.first_day.get(device).copied().unwrap_or(UNSEEN);
                for tally in [
                    &mut all,
                    by_platform.entry(platform).or_insert_with(|| Tally::new(steps)),
                    by_day.entry(day).or_insert_with(|| Tally::new(steps)),
                ] {
                    tally.add(&way.times, open);
                }
            }
            let by_first_seen = by_day
                .into_iter()
                .filter_map(|(day, tally)| {
                    Some(FunnelDay {
                        date: day_date(day)?,
                        figures: tally.figures(),
                    })
                })
                .collect();
            reports.push(FunnelReport {
                name: funnel.name.clone(),
                steps: funnel.steps.iter().map(ToString::to_string).collect(),
                order: funnel.order,
                window_hours: funnel.window.num_hours(),
                all: all.figures(),
                by_platform: by_platform
                    .into_iter()
                    .map(|(platform, tally)| (platform, tally.figures()))
                    .collect(),
                by_first_seen,
            });
        }
        reports
    }
}

/// The devices and times of a set of ways.
#[derive(Debug, Clone)]
struct Tally {
    reached: Vec<i64>,
    /// Per step after the first, the seconds from the step before.
    seconds: Vec<Vec<f64>>,
    open: bool,
}

impl Tally {
    fn new(steps: usize) -> Self {
        Self {
            reached: vec![0; steps],
            seconds: vec![Vec::new(); steps],
            open: false,
        }
    }

    fn add(&mut self, times: &[i64], open: bool) {
        for (k, t) in times.iter().enumerate() {
            self.reached[k] += 1;
            if k > 0 {
                // As SQL's `to_unixtime` gives them: seconds as a double.
                self.seconds[k].push(*t as f64 / 1e6 - times[k - 1] as f64 / 1e6);
            }
        }
        self.open |= open;
    }

    fn figures(self) -> FunnelFigures {
        let entered = self.reached.first().copied().unwrap_or(0);
        let steps = self
            .reached
            .iter()
            .zip(self.seconds)
            .enumerate()
            .map(|(k, (&reached, mut seconds))| {
                let before = if k == 0 { reached } else { self.reached[k - 1] };
                seconds.sort_unstable_by(f64::total_cmp);
                FunnelStep {
                    reached,
                    conversion: ratio(reached, entered),
                    from_previous: ratio(reached, before),
                    dropped: before - reached,
                    median_seconds: median(&seconds),
                }
            })
            .collect();
        FunnelFigures {
            steps,
            provisional: self.open,
        }
    }
}

fn ratio(part: i64, whole: i64) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

/// The median of sorted values: the mean of the middle two for an even count.
fn median(sorted: &[f64]) -> Option<f64> {
    let middle = sorted.len() / 2;
    match sorted.len() {
        0 => None,
        n if n % 2 == 1 => Some(sorted[middle]),
        _ => Some((sorted[middle - 1] + sorted[middle]) / 2.0),
    }
}

/// One step's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunnelStep {
    /// Devices that reached it.
    pub reached: i64,
    /// Their share of the devices that entered.
    pub conversion: Option<f64>,
    /// Their share of the devices at the step before.
    pub from_previous: Option<f64>,
    /// Devices at the step before that did not reach it (0 for the first step).
    pub dropped: i64,
    /// The median seconds from the step before (none for the first step).
    pub median_seconds: Option<f64>,
}

/// A funnel's figures over a set of devices.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunnelFigures {
    /// Per step.
    pub steps: Vec<FunnelStep>,
    /// Whether a funnel counted may still move on (its window has not closed), or more devices
    /// may still enter.
    pub provisional: bool,
}

/// A funnel's figures of the devices first seen on one day.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunnelDay {
    /// The day the devices were first seen in the range.
    #[serde(serialize_with = "super::date_text")]
    pub date: NaiveDate,
    /// Their figures.
    #[serde(flatten)]
    pub figures: FunnelFigures,
}

/// One funnel of the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunnelReport {
    /// Its name.
    pub name: String,
    /// Its steps, as written.
    pub steps: Vec<String>,
    /// How strictly the steps follow each other.
    pub order: Order,
    /// Its window.
    pub window_hours: i64,
    /// All devices that entered.
    pub all: FunnelFigures,
    /// By the platform of the entry.
    pub by_platform: Vec<(String, FunnelFigures)>,
    /// By the day the devices were first seen.
    pub by_first_seen: Vec<FunnelDay>,
}

impl FunnelReport {
    /// What the funnel is, in a line.
    pub(super) fn title(&self) -> String {
        format!(
            "Funnel {}: {} ({} order, within {} h)",
            self.name,
            self.steps.join(" > "),
            self.order,
            self.window_hours
        )
    }

    /// The steps of all devices, for people.
    pub(super) fn steps_table(&self) -> TextTable {
        let mut table = TextTable::new([
            "step",
            "devices",
            "conversion",
            "from previous",
            "dropped",
            "median time",
        ]);
        for (step, figures) in self.steps.iter().zip(&self.all.steps) {
            table.push([
                step.clone(),
                figures::count(figures.reached.max(0) as u64),
                figures::percent(figures.conversion),
                figures::percent(figures.from_previous),
                figures::count(figures.dropped.max(0) as u64),
                figures
                    .median_seconds
                    .map_or_else(|| "-".to_owned(), |s| format!("{:.1} min", s / 60.0)),
            ]);
        }
        table
    }

    /// The conversion to each step by platform, then by first-seen day, for people; a
    /// provisional row is marked `*`.
    pub(super) fn by_table(&self) -> TextTable {
        let mut table = TextTable::new(
            ["devices by", "entered"]
                .into_iter()
                .map(str::to_owned)
                .chain(self.steps.iter().skip(1).map(|s| format!("to {s}"))),
        );
        let mark = |figures: &FunnelFigures| if figures.provisional { " *" } else { "" };
        let rows = self
            .by_platform
            .iter()
            .map(|(p, f)| (format!("platform {p}{}", mark(f)), f))
            .chain(
                self.by_first_seen
                    .iter()
                    .map(|d| (format!("first seen {}{}", d.date, mark(&d.figures)), &d.figures)),
            );
        for (label, figures) in rows {
            table.push(
                [
                    label,
                    figures::count(figures.steps.first().map_or(0, |s| s.reached).max(0) as u64),
                ]
                .into_iter()
                .chain(figures.steps.iter().skip(1).map(|s| figures::percent(s.conversion))),
            );
        }
        table
    }

    /// The devices at each step, as bars.
    pub(super) fn chart(&self) -> Result<Svg, ReportError> {
        let bars: Vec<(String, f64)> = self
            .steps
            .iter()
            .zip(&self.all.steps)
            .map(|(step, figures)| (step.clone(), figures.reached as f64))
            .collect();
        chart::bar_chart(&format!("Funnel {}", self.name), Unit::Count("devices"), &bars)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: i64 = 60_000_000;

    fn funnel(steps: &str, order: Order) -> Funnel {
        Funnel::parse("f", steps, 1, order, "--funnel").unwrap()
    }

    /// Walks `events` (device, minute, mask) in one chunk; every device on platform 0.
    fn walk(funnels: &[Funnel], events: &[(u32, i64, u64)], close: &Close) -> Vec<FunnelReport> {
        let mut walker = Walker::new(funnels);
        let mut plays: Vec<Play> = events
            .iter()
            .enumerate()
            .map(|(row, &(device, minute, _))| Play {
                device,
                t: minute * MINUTE,
                row: row as u32,
            })
            .collect();
        plays.sort_by_key(|p| (p.device, p.t, p.row));
        let masks: Vec<u64> = events.iter().map(|e| e.2).collect();
        walker.add(&plays, &masks, &vec![0; events.len()]);
        let mut platforms = Texts::default();
        platforms.number("ios");
        walker.finish(&platforms, close)
    }

    fn reached(report: &FunnelReport) -> Vec<i64> {
        report.all.steps.iter().map(|s| s.reached).collect()
    }

    #[test]
    fn steps_are_parsed_with_their_conditions_and_bad_ones_named() {
        let f = Funnel::parse(
            "onboarding",
            "tutorialBegin > tutorialStep step=1 > tutorialComplete",
            24,
            Order::Loose,
            "--funnel",
        )
        .unwrap();
        assert_eq!(f.steps.len(), 3);
        assert_eq!(
            f.steps[1].conditions,
            [Condition {
                param: "step".into(),
                value: "1".into()
            }]
        );
        assert_eq!(f.steps[1].to_string(), "tutorialStep step=1");
        for (bad, says) in [
            ("a", "at least two steps"),
            ("a > > b", "step 2 is empty"),
            ("a > b step", "`step` is not PARAM=VALUE"),
            ("a > b bad-name=1", "`bad-name=1` is not PARAM=VALUE"),
        ] {
            let error = Funnel::parse("f", bad, 24, Order::Loose, "--funnel")
                .unwrap_err()
                .to_string();
            assert!(error.contains(says) && error.contains("--funnel"), "{bad}: {error}");
        }
        assert!("sideways".parse::<Order>().is_err());
    }

    #[test]
    fn a_row_is_every_step_it_matches_typed_and_extra_parameters_alike() {
        let funnels = [
            funnel("tutorialStep step=1 > tutorialStep step=2", Order::Loose),
            funnel("purchaseEvent platform=ios > levelUp", Order::Loose),
        ];
        let matcher = Matcher::new(&funnels).unwrap();
        assert_eq!(
            matcher.typed_columns(),
            r#", CAST("eventParams"['platform'] AS VARCHAR) AS p0"#
        );
        assert_eq!(matcher.extra_names().collect::<Vec<_>>(), ["'tutorialStep'"]);
        assert_eq!(matcher.mask("tutorialStep", &[None], Some(r#"{"step":1}"#)), 0b1);
        assert_eq!(matcher.mask("tutorialStep", &[None], Some(r#"{"step":"2"}"#)), 0b10);
        assert_eq!(matcher.mask("tutorialStep", &[None], Some("not json")), 0);
        assert_eq!(matcher.mask("tutorialStep", &[None], None), 0);
        assert_eq!(matcher.mask("purchaseEvent", &[Some("ios")], None), 0b100);
        assert_eq!(matcher.mask("purchaseEvent", &[Some("android")], None), 0);
        assert_eq!(matcher.mask("levelUp", &[None], None), 0b1000);
        let many: Vec<Funnel> = (0..33).map(|_| funnel("a > b", Order::Loose)).collect();
        assert!(Matcher::new(&many).unwrap_err().to_string().contains("at most 64"));
    }

    #[test]
    fn loose_funnels_take_the_first_entry_and_the_earliest_next_steps_within_the_window() {
        let f = funnel("a > b > c", Order::Loose);
        let (a, b, c, other) = (0b1, 0b10, 0b100, 0);
        let report = &walk(
            &[f],
            &[
                // Device 0: a, other, b, c: all three; 2 and 5 minutes between.
                (0, 0, a),
                (0, 1, other),
                (0, 2, b),
                (0, 7, c),
                // Device 1: b before a does not count; a later entry does not restart.
                (1, 0, b),
                (1, 1, a),
                (1, 2, c),
                (1, 3, a),
                (1, 4, b),
                // Device 2: c comes after the one-hour window.
                (2, 0, a),
                (2, 30, b),
                (2, 61, c),
                // Device 3 never enters.
                (3, 0, b),
            ],
            &Close::at_micros(i64::MAX),
        )[0];
        assert_eq!(reached(report), [3, 3, 1]);
        assert_eq!(report.all.steps[1].median_seconds, Some(180.0));
        assert_eq!(report.all.steps[2].median_seconds, Some(300.0));
        assert_eq!(report.all.steps[2].dropped, 2);
        assert_eq!(report.all.steps[2].conversion, Some(1.0 / 3.0));
        assert!(!report.all.provisional);
    }

    #[test]
    fn strict_funnels_end_at_any_other_event() {
        let (a, b, c, other) = (0b1, 0b10, 0b100, 0);
        let events = [
            (0, 0, a),
            (0, 1, b),
            (0, 2, c),
            (1, 0, a),
            (1, 1, other),
            (1, 2, b),
            (2, 0, a),
            (2, 1, b),
            (2, 2, a),
        ];
        let strict = &walk(
            &[funnel("a > b > c", Order::Strict)],
            &events,
            &Close::at_micros(i64::MAX),
        )[0];
        assert_eq!(reached(strict), [3, 2, 1]);
        let loose = &walk(
            &[funnel("a > b > c", Order::Loose)],
            &events,
            &Close::at_micros(i64::MAX),
        )[0];
        assert_eq!(reached(loose), [3, 3, 1]);
    }

    #[test]
    fn a_funnel_whose_window_has_not_closed_is_provisional() {
        let f = funnel("a > b", Order::Loose);
        // Entered at minute 0 with a one-hour window: open until minute 60.
        let open = &walk(std::slice::from_ref(&f), &[(0, 0, 1)], &Close::at_micros(30 * MINUTE))[0];
        assert!(open.all.provisional && open.by_first_seen[0].figures.provisional);
        let closed = &walk(&[f], &[(0, 0, 1)], &Close::at_micros(DAY_MICROS))[0];
        assert!(!closed.all.provisional && !closed.by_first_seen[0].figures.provisional);
    }

    #[test]
    fn the_athena_query_follows_the_steps_and_the_order() {
        let sql = Funnel::parse(
            "f",
            "tutorialBegin > tutorialStep step=1 > purchaseEvent platform=ios",
            24,
            Order::Strict,
            "--funnel",
        )
        .unwrap()
        .athena_sql("\"db\".\"game_events\"");
        assert!(sql.contains("json_extract_scalar(e.extra, '$.step') = '1'"), "{sql}");
        assert!(sql.contains("CAST(e.params.platform AS VARCHAR) = 'ios'"), "{sql}");
        assert!(
            sql.contains("e.n = p.n + 1") && sql.contains("INTERVAL '24' HOUR"),
            "{sql}"
        );
        assert!(sql.contains("AS step3") && sql.contains("AS median_seconds3"), "{sql}");
    }
}
