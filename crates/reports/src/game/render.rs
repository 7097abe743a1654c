//! The game report as text, JSON, charts and HTML pages, and the live page of `lakelog serve`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};

use super::{
    BOOKINGS_CURRENCY, FunnelReport, GameReport, Kpis, MinuteFigures, Revenue, WATERMARK_MINUTES, lifecycle, retention,
    revenue,
};
use crate::chart::{self, Svg, Unit};
use crate::error::ReportError;
use crate::figures;
use crate::html::{HtmlPage, ReportDir};
use crate::text::TextTable;

/// The script of [`live_page`]: fetches `live` (relative to the page) every two seconds and shows
/// its headline and charts.
const LIVE_SCRIPT: &str = r#"const status = document.getElementById('status');
async function refresh() {
  try {
    const answer = await fetch('live', {cache: 'no-store'});
    if (!answer.ok) throw new Error('HTTP ' + answer.status + ': ' + (await answer.text()));
    const live = await answer.json();
    document.getElementById('headline').innerHTML = live.headline;
    document.getElementById('charts').innerHTML = live.charts;
    status.textContent = 'Updated at ' + new Date().toISOString().slice(11, 19) + ' UTC.';
  } catch (error) {
    status.textContent = 'Cannot update: ' + error.message;
  }
}
refresh();
setInterval(refresh, 2000);"#;

/// The page `lakelog serve` shows at `/`: the game KPIs of the events it has committed, refreshed
/// every two seconds from `live` ([`GameReport::live`]).
pub fn live_page() -> String {
    let mut page = HtmlPage::new("Game KPIs, live");
    page.paragraph(
        "The events this lakelog serve has committed to its table, counted as lakelog report game counts them \
         (each eventId once, late events left out), refreshed every two seconds.",
    );
    page.region("status").region("headline").region("charts");
    page.script(LIVE_SCRIPT);
    page.finish()
}

/// A bar chart of revenue by game, item or app version.
fn revenue_bars(title: &str, of: &[revenue::RevenueOf]) -> Result<Svg, ReportError> {
    let bars: Vec<(String, f64)> = of.iter().map(|r| (r.name.clone(), r.revenue)).collect();
    chart::bar_chart(title, Unit::Money("revenue", BOOKINGS_CURRENCY), &bars)
}

/// What the report says of its provisional figures, when it has some.
fn provisional_legend() -> String {
    format!(
        "Rows marked * are provisional: their window ends within the watermark ({WATERMARK_MINUTES} minutes) of now, \
         or after the range, so events may still arrive on time for them; the others are final."
    )
}

/// What a section says when its figures are provisional.
fn provisional_note(provisional: bool) -> &'static str {
    if provisional {
        " (provisional: its window has not closed, events may still arrive on time)"
    } else {
        ""
    }
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// An hour on a chart's time axis: `06-01 13:00`.
fn hour_label(t: DateTime<Utc>) -> String {
    t.format("%m-%d %H:00").to_string()
}

impl Kpis {
    fn to_json(&self) -> Value {
        json!({
            "events_per_hour": self.events_per_hour.iter()
                .map(|h| json!({"window_start": rfc3339(h.window_start), "count": h.count, "provisional": h.provisional}))
                .collect::<Vec<_>>(),
            "bookings_per_hour": self.bookings_per_hour.iter()
                .map(|h| json!({"window_start": rfc3339(h.window_start), "amount": h.amount, "provisional": h.provisional}))
                .collect::<Vec<_>>(),
            "dau": self.dau.iter()
                .map(|d| json!({"date": d.date.to_string(), "users": d.users, "provisional": d.provisional}))
                .collect::<Vec<_>>(),
            "late_events": self.late_events,
        })
    }

    /// Events and bookings side by side, one row per window.
    fn hourly_table(&self) -> TextTable {
        let mut hours: BTreeMap<DateTime<Utc>, (i64, f64, bool)> = BTreeMap::new();
        for h in &self.events_per_hour {
            let hour = hours.entry(h.window_start).or_default();
            hour.0 = h.count;
            hour.2 |= h.provisional;
        }
        for h in &self.bookings_per_hour {
            let hour = hours.entry(h.window_start).or_default();
            hour.1 = h.amount;
            hour.2 |= h.provisional;
        }
        let mut table = TextTable::new(["window_start", "events", "bookings"]);
        for (start, (events, bookings, provisional)) in hours {
            table.push([
                crate::text::marked(rfc3339(start), provisional),
                events.to_string(),
                format!("{bookings:.2}"),
            ]);
        }
        table
    }

    fn dau_table(&self) -> TextTable {
        let mut table = TextTable::new(["date", "users"]);
        for d in &self.dau {
            table.push([
                crate::text::marked(d.date.to_string(), d.provisional),
                d.users.to_string(),
            ]);
        }
        table
    }
}

impl GameReport {
    /// The range for people: `2024-06-01 00:00 to 2024-06-05 13:00 UTC`.
    pub fn range_label(&self) -> String {
        let show =
            |t: Option<DateTime<Utc>>| t.map_or_else(|| "…".to_owned(), |t| t.format("%Y-%m-%d %H:%M").to_string());
        format!("{} to {} UTC", show(self.covered.from), show(self.covered.to))
    }

    /// `{"headline": {...}, "events_per_hour": [...], "bookings_per_hour": [...], "dau": [...],
    /// "late_events": N, "by_platform": {"ios": {the same four}, ...}, "revenue": {"days": [...],
    /// "by_platform": [...], "by_app_version": [...]}, "retention": [{"date", "platform", "devices",
    /// "returned": [day 1, day 7, day 30]}, ...], "sessions": {"gap_minutes", "days": [...],
    /// "lengths": [[label, sessions], ...]}, "lifecycle": {"states", "thresholds", "days": [{"date",
    /// "devices": [per state]}], "transitions": [{"from", "to", "devices"}], "at_risk_week_ending",
    /// "at_risk": [{"device", "platform", "last_seen", "days_active"}]}}`: timestamps RFC 3339 UTC, dates YYYY-MM-DD. The headline has the range (`from`, `to`), `events`, `bookings` (with
    /// its `currency`), `peak_dau` (`date`, `users`) and `late_events`.
    pub fn to_json(&self) -> Value {
        let mut out = self.all.to_json();
        let headline = self.all.headline();
        let headline = json!({
            "from": self.covered.from.map(rfc3339),
            "to": self.covered.to.map(rfc3339),
            "events": headline.events,
            "bookings": headline.bookings,
            "currency": BOOKINGS_CURRENCY,
            "peak_dau": headline.peak_dau.map(|d| json!({"date": d.date.to_string(), "users": d.users})),
            "late_events": headline.late_events,
            "provisional": self.provisional,
        });
        let platforms: serde_json::Map<String, Value> = self
            .by_platform
            .iter()
            .map(|(platform, kpis)| (platform.clone(), kpis.to_json()))
            .collect();
        if let Value::Object(map) = &mut out {
            map.insert("by_platform".to_owned(), Value::Object(platforms));
            map.insert("headline".to_owned(), headline);
            // Plain numbers, dates and strings: these always serialise.
            let value = |v: Result<Value, serde_json::Error>| v.unwrap_or(Value::Null);
            map.insert("revenue".to_owned(), value(serde_json::to_value(&self.revenue)));
            map.insert("retention".to_owned(), value(serde_json::to_value(&self.cohorts)));
            map.insert("sessions".to_owned(), value(serde_json::to_value(&self.sessions)));
            map.insert("lifecycle".to_owned(), value(serde_json::to_value(&self.lifecycle)));
            map.insert("funnels".to_owned(), value(serde_json::to_value(&self.funnels)));
            map.insert("acquisition".to_owned(), value(serde_json::to_value(&self.acquisition)));
            map.insert("experiments".to_owned(), value(serde_json::to_value(&self.experiments)));
            map.insert("paths".to_owned(), value(serde_json::to_value(&self.paths)));
        }
        out
    }

    /// The report as plain-text tables.
    pub fn render_text(&self) -> String {
        // The headline's figures after its range, which the title line gives.
        let figures: Vec<String> = self
            .headline_figures()
            .into_iter()
            .skip(1)
            .map(|(what, value)| format!("{what}: {value}"))
            .collect();
        let mut out = format!(
            "Game KPIs, {}\n\n{}.\n{}\nEvents and bookings per hour\n",
            self.range_label(),
            figures.join(". "),
            if self.any_provisional() {
                format!("{}\n", provisional_legend())
            } else {
                String::new()
            }
        );
        out.push_str(&self.all.hourly_table().render());
        out.push_str("\nDaily active users\n");
        out.push_str(&self.all.dau_table().render());
        out.push_str(&format!(
            "\nLate events (more than {WATERMARK_MINUTES} minutes behind the watermark, not counted): {}\n",
            self.all.late_events
        ));
        out.push_str("\nRetention (share of each first-seen day's devices seen again)\n");
        out.push_str(&retention::cohort_table(&self.cohorts).render());
        out.push_str(&format!(
            "\nSessions (cut after {} minutes without an event)\n",
            self.sessions.gap_minutes
        ));
        out.push_str(&self.sessions.days_table().render());
        out.push_str(&format!(
            "\nLifecycle (devices by days since their last event: dormant after {}, churned after {})\n",
            lifecycle::DORMANT_AFTER,
            lifecycle::CHURNED_AFTER
        ));
        out.push_str(&self.lifecycle.days_table().render());
        out.push_str("\nLifecycle moves, day to day\n");
        out.push_str(&self.lifecycle.transitions_table().render());
        out.push_str(&format!("\nAt risk: {}\n", self.lifecycle.at_risk_summary()));
        out.push_str(&self.lifecycle.at_risk_table().render());
        for funnel in &self.funnels {
            out.push_str(&format!(
                "\n{}{}\n",
                funnel.title(),
                provisional_note(funnel.all.provisional)
            ));
            out.push_str(&funnel.steps_table().render());
            out.push_str(&funnel.by_table().render());
        }
        out.push_str(&format!(
            "\nAcquisition and lifetime value (by {} of each device's earliest event with source)\n",
            crate::game::attribution::ACQUISITION_PARAMS.join(", ")
        ));
        out.push_str(&self.acquisition.table(BOOKINGS_CURRENCY).render());
        for experiment in &self.experiments {
            out.push_str(&format!("\nExperiment {}. {}\n", experiment.name, experiment.summary()));
            out.push_str(&experiment.table(BOOKINGS_CURRENCY).render());
            out.push_str(&experiment.platform_table(BOOKINGS_CURRENCY).render());
        }
        if let Some(paths) = &self.paths {
            out.push_str(&format!(
                "\n{} ({} times, {} distinct paths)\n",
                paths.title(),
                paths.occurrences,
                paths.distinct
            ));
            out.push_str(&paths.table().render());
        }
        out.push_str("\nRevenue per day\n");
        out.push_str(&self.revenue.days_table(BOOKINGS_CURRENCY).render());
        out.push_str("\nRevenue by game\n");
        out.push_str(&Revenue::of_table(&self.revenue.by_game, "game", BOOKINGS_CURRENCY).render());
        out.push_str(&format!("\nRevenue by {}\n", revenue::ITEM_PARAM));
        out.push_str(&Revenue::of_table(&self.revenue.by_item, revenue::ITEM_PARAM, BOOKINGS_CURRENCY).render());
        out.push_str("\nRevenue by app version\n");
        out.push_str(&Revenue::of_table(&self.revenue.by_app_version, "app version", BOOKINGS_CURRENCY).render());
        out.push_str("\nBy platform\n");
        let mut table = TextTable::new(["platform", "events", "bookings", "peak DAU", "late events"]);
        for (platform, kpis) in &self.by_platform {
            let events: i64 = kpis.events_per_hour.iter().map(|h| h.count).sum();
            let bookings: f64 = kpis.bookings_per_hour.iter().map(|h| h.amount).sum();
            let peak = kpis.dau.iter().map(|d| d.users).max().unwrap_or(0);
            table.push([
                platform.clone(),
                events.to_string(),
                format!("{bookings:.2}"),
                peak.to_string(),
                kpis.late_events.to_string(),
            ]);
        }
        out.push_str(&table.render());
        out
    }

    /// The charts a person looks at: events per hour (bars), bookings per hour (line), DAU
    /// (bars), day-1 retention by first-seen day (lines), devices by lifecycle state (lines),
    /// session lengths (bars), revenue by app
    /// version (bars) and bookings per hour by platform (lines).
    pub fn charts(&self) -> Result<Vec<(&'static str, Svg)>, ReportError> {
        let hourly_bars: Vec<(String, f64)> = self
            .all
            .events_per_hour
            .iter()
            .map(|h| (hour_label(h.window_start), h.count as f64))
            .collect();
        let bookings = |kpis: &Kpis| -> Vec<(DateTime<Utc>, f64)> {
            kpis.bookings_per_hour
                .iter()
                .map(|h| (h.window_start, h.amount))
                .collect()
        };
        let hour_slots: Vec<i64> = self
            .all
            .events_per_hour
            .iter()
            .map(|h| chart::hour_slot(h.window_start))
            .collect();
        let hour_ticks = chart::ticks(&hour_slots, &chart::HOUR_STEPS, 10);
        let day_slots: Vec<i64> = self.all.dau.iter().map(|d| chart::day_slot(d.date)).collect();
        let day_ticks = chart::ticks(&day_slots, &chart::DAY_STEPS, 14);
        let dau_bars: Vec<(String, f64)> = self
            .all
            .dau
            .iter()
            .map(|d| {
                // The range's last day, when it ends before midnight, is only part of a day.
                let partial = self
                    .covered
                    .to
                    .is_some_and(|to| to.date_naive() == d.date && to.time() != chrono::NaiveTime::MIN);
                let label = if partial {
                    format!("{} (partial)", d.date)
                } else {
                    d.date.to_string()
                };
                (label, d.users as f64)
            })
            .collect();
        let by_platform: Vec<chart::HourlySeries> = self
            .by_platform
            .iter()
            .map(|(platform, kpis)| chart::HourlySeries {
                name: platform.clone(),
                points: bookings(kpis),
            })
            .collect();
        let rates = if self.per_minute.is_empty() {
            [
                (
                    "events_per_hour.svg",
                    chart::series_chart("Events per hour", Unit::Count("events"), &hourly_bars, &hour_ticks)?,
                ),
                (
                    "bookings_per_hour.svg",
                    chart::hourly_line_chart(
                        "Bookings per hour",
                        Unit::Money("bookings", BOOKINGS_CURRENCY),
                        &[chart::HourlySeries {
                            name: "all platforms".to_owned(),
                            points: bookings(&self.all),
                        }],
                    )?,
                ),
            ]
        } else {
            // A short range: per minute, labelled in UTC (the range above says so).
            let minutes: Vec<i64> = self
                .per_minute
                .iter()
                .map(|m| chart::minute_slot(m.window_start))
                .collect();
            let ticks = chart::ticks(&minutes, &chart::MINUTE_STEPS, 10);
            let bars = |value: fn(&MinuteFigures) -> f64| -> Vec<(String, f64)> {
                self.per_minute
                    .iter()
                    .map(|m| (m.window_start.format("%H:%M").to_string(), value(m)))
                    .collect()
            };
            [
                (
                    "events_per_minute.svg",
                    chart::series_chart(
                        "Events per minute (UTC)",
                        Unit::Count("events"),
                        &bars(|m| m.events as f64),
                        &ticks,
                    )?,
                ),
                (
                    "bookings_per_minute.svg",
                    chart::series_chart(
                        "Bookings per minute (UTC)",
                        Unit::Money("bookings", BOOKINGS_CURRENCY),
                        &bars(|m| m.bookings),
                        &ticks,
                    )?,
                ),
            ]
        };
        let mut charts = rates.to_vec();
        charts.extend([
            (
                "dau.svg",
                chart::series_chart("Daily active users", Unit::Count("devices"), &dau_bars, &day_ticks)?,
            ),
            (
                "retention.svg",
                chart::line_chart(
                    "Devices seen again the day after their first",
                    Unit::Count("share of the first day's devices (%)"),
                    &self.retention_series(),
                )?,
            ),
            ("lifecycle.svg", self.lifecycle.chart()?),
            (
                "session_lengths.svg",
                chart::histogram(
                    "Session length",
                    Unit::Count("sessions"),
                    &self
                        .sessions
                        .lengths
                        .iter()
                        .map(|(label, n)| (label.clone(), *n as f64))
                        .collect::<Vec<_>>(),
                )?,
            ),
            (
                "revenue_by_game.svg",
                revenue_bars("Revenue by game", &self.revenue.by_game)?,
            ),
            (
                "revenue_by_item.svg",
                revenue_bars(
                    &format!("Revenue by item (eventParams.{})", revenue::ITEM_PARAM),
                    &self.revenue.by_item[..self.revenue.by_item.len().min(12)],
                )?,
            ),
            (
                "revenue_by_app_version.svg",
                revenue_bars("Revenue by app version", &self.revenue.by_app_version)?,
            ),
            (
                "bookings_per_hour_by_platform.svg",
                chart::hourly_line_chart(
                    "Bookings per hour by platform",
                    Unit::Money("bookings", BOOKINGS_CURRENCY),
                    &by_platform,
                )?,
            ),
        ]);
        Ok(charts)
    }

    /// Day-1 retention by first-seen day, one line for all platforms and one per platform, in
    /// percent.
    fn retention_series(&self) -> Vec<chart::Series> {
        let mut series: Vec<chart::Series> = Vec::new();
        for c in &self.cohorts {
            let name = c.platform.clone().unwrap_or_else(|| "all platforms".to_owned());
            let Some(share) = c.retention(0) else { continue };
            match series.iter_mut().find(|s| s.name == name) {
                Some(s) => s.points.push((c.date, share * 100.0)),
                None => series.push(chart::Series {
                    name,
                    points: vec![(c.date, share * 100.0)],
                }),
            }
        }
        series
    }

    /// The headline as `(what, value)` for people.
    fn headline_figures(&self) -> Vec<(&'static str, String)> {
        let headline = self.all.headline();
        vec![
            ("Range", self.range_label()),
            ("Events", figures::count(headline.events.max(0) as u64)),
            ("Bookings", figures::money(headline.bookings, BOOKINGS_CURRENCY)),
            (
                "Peak daily active users",
                headline.peak_dau.map_or_else(
                    || "-".to_owned(),
                    |d| format!("{} on {}", figures::count(d.users.max(0) as u64), d.date),
                ),
            ),
            ("Late events", figures::count(headline.late_events.max(0) as u64)),
        ]
    }

    /// What the live page ([`live_page`]) shows, as JSON: `{"headline": HTML, "charts": HTML,
    /// "events": N}`, the headline and the charts of the page `write_html` writes.
    pub fn live(&self) -> Result<Value, ReportError> {
        let mut headline = HtmlPage::fragment();
        headline.headline(&self.headline_figures());
        let mut charts = HtmlPage::fragment();
        for (_, svg) in self.charts()? {
            charts.chart(&svg);
        }
        for svg in self.section_charts()? {
            charts.chart(&svg);
        }
        Ok(json!({
            "headline": headline.markup(),
            "charts": charts.markup(),
            "events": self.all.headline().events,
        }))
    }

    /// The charts the page shows within their sections: each funnel's steps, and the lifetime
    /// value by source when the devices have sources.
    fn section_charts(&self) -> Result<Vec<Svg>, ReportError> {
        let mut charts = self
            .funnels
            .iter()
            .map(FunnelReport::chart)
            .collect::<Result<Vec<_>, _>>()?;
        if self.acquisition.cohorts.iter().any(|c| c.by == "source") {
            charts.push(self.acquisition.chart(BOOKINGS_CURRENCY)?);
        }
        Ok(charts)
    }

    /// Writes the charts and an `index.html` with them and the tables into `dir`; returns the
    /// page's path.
    pub fn write_html(&self, dir: &ReportDir) -> Result<PathBuf, ReportError> {
        let charts = self.charts()?;
        let mut page = HtmlPage::new("Game KPIs");
        page.headline(&self.headline_figures());
        page.paragraph(&format!(
            "Every figure counts each game's eventId once. Events more than {WATERMARK_MINUTES} minutes behind the latest \
             eventTime that arrived before them are late and not counted in their window. Bookings are the sum of \
             amount of purchaseEvent, in {BOOKINGS_CURRENCY}.{}",
            if self.any_provisional() {
                format!(" {}", provisional_legend())
            } else {
                String::new()
            }
        ));
        for (name, svg) in &charts {
            dir.write_chart(name, svg)?;
            page.chart(svg);
        }
        page.heading("Events and bookings per hour");
        page.table(&self.all.hourly_table());
        page.heading("Daily active users");
        page.table(&self.all.dau_table());
        page.heading("Retention");
        page.paragraph(
            "Devices by the day of their first event in the range, and the share of them with an event again 1, 7 \
             and 30 days later (- until that day has ended within the range).",
        );
        page.table(&retention::cohort_table(&self.cohorts));
        page.heading("Sessions");
        page.paragraph(&format!(
            "A session starts at a device's first event, at a sessionStart, after a sessionEnd, or after more than {} \
             minutes without an event; it lasts from its first event to its last.",
            self.sessions.gap_minutes
        ));
        page.table(&self.sessions.days_table());
        page.heading("Lifecycle");
        page.paragraph(&format!(
            "Each ended day, each device seen by then is new (its first day), active (an event within the last {d} \
             days), returning (back after {d1} to {c} days away), resurrected (back after more than {c}), dormant \
             ({d1} to {c} days without an event) or churned (more than {c}).",
            d = lifecycle::DORMANT_AFTER,
            d1 = lifecycle::DORMANT_AFTER + 1,
            c = lifecycle::CHURNED_AFTER
        ));
        page.table(&self.lifecycle.days_table());
        page.table(&self.lifecycle.transitions_table());
        page.paragraph(&format!("At risk: {}.", self.lifecycle.at_risk_summary()));
        page.table(&self.lifecycle.at_risk_table());
        for (k, funnel) in self.funnels.iter().enumerate() {
            page.heading(&funnel.title());
            page.paragraph(&format!(
                "Each device's first {} and, after it in its events' order, the earliest next step within {} hours{}. \
                 Conversion is the share of the devices that entered; rows marked * may still change.{}",
                funnel.steps.first().map_or("", String::as_str),
                funnel.window_hours,
                if funnel.order == crate::game::Order::Strict {
                    ", with no other event between two steps"
                } else {
                    ""
                },
                provisional_note(funnel.all.provisional)
            ));
            let svg = funnel.chart()?;
            dir.write_chart(&format!("funnel_{}.svg", k + 1), &svg)?;
            page.chart(&svg);
            page.table(&funnel.steps_table());
            page.table(&funnel.by_table());
        }
        page.heading("Acquisition and lifetime value");
        page.paragraph(&format!(
            "Devices by the {} of their earliest event with source (unknown without one), and by the platform of \
             their first day. Payer conversion is the share with a counted purchase; ARPU is revenue per device, ARPPU \
             per paying device; lifetime value at day N is revenue per device from its first day to N days after, over \
             the devices whose day N has ended (- while none has); in {BOOKINGS_CURRENCY}.",
            crate::game::attribution::ACQUISITION_PARAMS.join(", ")
        ));
        if self.acquisition.cohorts.iter().any(|c| c.by == "source") {
            let svg = self.acquisition.chart(BOOKINGS_CURRENCY)?;
            dir.write_chart("lifetime_value.svg", &svg)?;
            page.chart(&svg);
        }
        page.table(&self.acquisition.table(BOOKINGS_CURRENCY));
        for experiment in &self.experiments {
            page.heading(&format!("Experiment {}", experiment.name));
            page.paragraph(&experiment.summary());
            page.table(&experiment.table(BOOKINGS_CURRENCY));
            page.table(&experiment.platform_table(BOOKINGS_CURRENCY));
        }
        if let Some(paths) = &self.paths {
            page.heading(&paths.title());
            page.paragraph(&format!(
                "Each time a device did {}, its events {} it within the session, most frequent first: {} times, {} \
                 distinct paths.",
                paths.event,
                match paths.direction {
                    crate::game::Direction::After => "after",
                    crate::game::Direction::Before => "before",
                },
                figures::count(paths.occurrences.max(0) as u64),
                figures::count(paths.distinct.max(0) as u64)
            ));
            page.table(&paths.table());
        }
        page.heading("Revenue");
        page.paragraph(&format!(
            "Revenue is bookings per day; a paying user is a device with a counted purchase that day; conversion is \
             paying / active users; ARPDAU is revenue per daily active user, ARPPU per paying user; in \
             {BOOKINGS_CURRENCY}."
        ));
        page.table(&self.revenue.days_table(BOOKINGS_CURRENCY));
        page.table(&Revenue::of_table(&self.revenue.by_game, "game", BOOKINGS_CURRENCY));
        page.table(&Revenue::of_table(
            &self.revenue.by_item,
            revenue::ITEM_PARAM,
            BOOKINGS_CURRENCY,
        ));
        page.table(&Revenue::of_table(
            &self.revenue.by_platform,
            "platform",
            BOOKINGS_CURRENCY,
        ));
        page.table(&Revenue::of_table(
            &self.revenue.by_app_version,
            "app version",
            BOOKINGS_CURRENCY,
        ));
        for (platform, kpis) in &self.by_platform {
            page.heading(&format!("Platform {platform}"));
            page.table(&kpis.hourly_table());
            page.table(&kpis.dau_table());
        }
        // A `Value` always serialises.
        dir.write("report.json", &format!("{:#}", self.to_json()))?;
        dir.write("index.html", &page.finish())
    }
}

#[cfg(test)]
mod tests {
    use chrono::{NaiveDate, TimeDelta};

    use super::*;
    use crate::chart::{bars_of, texts};
    use crate::game::{DayUsers, HourAmount, HourCount, Sessions};
    use crate::range::TimeRange;

    /// Four days of hours with a rhythm, two platforms, a peak day.
    fn report() -> GameReport {
        let start = DateTime::parse_from_rfc3339("2024-06-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let kpis = |scale: i64| Kpis {
            events_per_hour: (0..96)
                .map(|h| HourCount {
                    window_start: start + TimeDelta::hours(h),
                    count: scale * (10 + (h % 24 - 12).abs()),
                    provisional: false,
                })
                .collect(),
            bookings_per_hour: (0..96)
                .map(|h| HourAmount {
                    window_start: start + TimeDelta::hours(h),
                    amount: scale as f64 * 1.99 * (h % 5) as f64,
                    provisional: false,
                })
                .collect(),
            dau: (0..4)
                .map(|d| DayUsers {
                    date: NaiveDate::from_ymd_opt(2024, 6, 1 + d).unwrap(),
                    users: scale * [120, 180, 150, 90][d as usize],
                    provisional: false,
                })
                .collect(),
            late_events: scale,
        };
        GameReport {
            covered: TimeRange {
                from: Some(start),
                to: Some(start + TimeDelta::hours(96)),
            },
            all: kpis(3),
            by_platform: BTreeMap::from([("android".to_owned(), kpis(2)), ("ios".to_owned(), kpis(1))]),
            revenue: Revenue::default(),
            cohorts: Vec::new(),
            lifecycle: crate::game::Lifecycle::default(),
            funnels: Vec::new(),
            acquisition: crate::game::Acquisition::default(),
            experiments: Vec::new(),
            paths: None,
            sessions: Sessions::default(),
            provisional: false,
            per_minute: Vec::new(),
        }
    }

    /// The `(width, height)` an SVG document declares.
    fn size(svg: &Svg) -> (u32, u32) {
        let attr = |name: &str| -> u32 {
            let head = &svg.markup()[..svg.markup().find('>').unwrap()];
            head.split(&format!("{name}=\""))
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
                .parse()
                .unwrap()
        };
        (attr("width"), attr("height"))
    }

    #[test]
    fn the_page_opens_with_the_range_and_the_headline() {
        let report = report();
        let json = report.to_json();
        let headline = &json["headline"];
        assert_eq!(headline["from"], "2024-06-01T00:00:00Z");
        assert_eq!(headline["to"], "2024-06-05T00:00:00Z");
        let events: i64 = json["events_per_hour"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["count"].as_i64().unwrap())
            .sum();
        assert_eq!(headline["events"], events);
        assert_eq!(headline["peak_dau"], json!({"date": "2024-06-02", "users": 540}));
        assert_eq!(headline["late_events"], 3);
        assert_eq!(headline["currency"], "USD");

        let dir = tempfile::tempdir().unwrap();
        let out = ReportDir::create(dir.path()).unwrap();
        let html = std::fs::read_to_string(report.write_html(&out).unwrap()).unwrap();
        let first_chart = html.find("<svg").unwrap();
        for shown in [
            "2024-06-01 00:00 to 2024-06-05 00:00 UTC".to_owned(),
            figures::count(events as u64),
            figures::money(headline["bookings"].as_f64().unwrap(), "USD"),
            "540 on 2024-06-02".to_owned(),
        ] {
            let at = html
                .find(&format!("<dd>{shown}</dd>"))
                .unwrap_or_else(|| panic!("{shown}: {html}"));
            assert!(at < first_chart, "{shown} comes after the charts");
        }
        assert!(!html.contains("Range: "), "{html}");
        assert!(
            report
                .render_text()
                .starts_with("Game KPIs, 2024-06-01 00:00 to 2024-06-05 00:00 UTC")
        );
        // The 96-row hourly tables are folded; the DAU ones are open.
        assert_eq!(html.matches("<summary>96 rows (show)</summary>").count(), 3, "{html}");
    }

    #[test]
    fn a_short_range_is_charted_per_minute_in_utc_with_round_ticks() {
        let start = DateTime::parse_from_rfc3339("2024-06-01T10:07:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let mut short = report();
        short.per_minute = (0..100)
            .map(|m| MinuteFigures {
                window_start: start + TimeDelta::minutes(m),
                events: 10 + m % 7,
                bookings: (m % 3) as f64,
                provisional: false,
            })
            .collect();
        let charts = short.charts().unwrap();
        assert_eq!(charts[0].0, "events_per_minute.svg");
        assert_eq!(charts[1].0, "bookings_per_minute.svg");
        assert_eq!(bars_of(&charts[0].1).len(), 100, "a bar a minute");
        let labels: Vec<String> = texts(&charts[0].1).into_iter().filter(|t| t.contains(':')).collect();
        assert_eq!(
            labels,
            [
                "10:10", "10:20", "10:30", "10:40", "10:50", "11:00", "11:10", "11:20", "11:30", "11:40"
            ]
        );
    }

    #[test]
    fn every_chart_shows_what_the_json_says() {
        let report = report();
        let json = report.to_json();
        let charts: BTreeMap<&str, Svg> = report.charts().unwrap().into_iter().collect();

        // Events per hour: a bar per hour along a time axis, each as tall as its count, labels
        // only of hours the JSON has, none twice.
        let svg = &charts["events_per_hour.svg"];
        let (width, height) = size(svg);
        assert!(width > height, "{width}x{height}");
        let counts: Vec<f64> = json["events_per_hour"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["count"].as_f64().unwrap())
            .collect();
        let hours: Vec<String> = json["events_per_hour"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["window_start"].as_str().unwrap()[5..16].replacen('T', " ", 1))
            .collect();
        assert_bars_match(svg, &counts, &hours);
        assert!(texts(svg).contains(&"events".to_owned()));

        // Daily active users: a bar per day.
        let svg = &charts["dau.svg"];
        let (width, height) = size(svg);
        assert!(width > height, "{width}x{height}");
        let users: Vec<f64> = json["dau"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["users"].as_f64().unwrap())
            .collect();
        let days: Vec<String> = json["dau"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["date"].as_str().unwrap().to_owned())
            .collect();
        assert_bars_match(svg, &users, &days);
        assert!(texts(svg).contains(&"devices".to_owned()));

        // Bookings: lines along the time axis, in the currency.
        for name in ["bookings_per_hour.svg", "bookings_per_hour_by_platform.svg"] {
            let svg = &charts[name];
            let (width, height) = size(svg);
            assert!(width > height, "{name}: {width}x{height}");
            assert!(texts(svg).contains(&"bookings (USD)".to_owned()), "{name}");
        }
        let legend = texts(&charts["bookings_per_hour_by_platform.svg"]);
        for platform in json["by_platform"].as_object().unwrap().keys() {
            assert_eq!(
                legend.iter().filter(|t| *t == platform).count(),
                1,
                "{platform}: {legend:?}"
            );
        }
    }

    /// The chart's bars, left to right, are as tall as `values` say (one scale for all), and its
    /// axis labels are `labels` (some of them), each once.
    fn assert_bars_match(svg: &Svg, values: &[f64], labels: &[String]) {
        let mut bars = bars_of(svg);
        bars.sort_by(|a, b| a.0.total_cmp(&b.0));
        assert_eq!(bars.len(), values.len(), "a bar per value");
        let max = values.iter().copied().fold(0.0, f64::max);
        let tallest = bars.iter().map(|b| b.3).fold(0.0, f64::max);
        for (bar, value) in bars.iter().zip(values) {
            // Pixels are whole: within one of the value's share of the tallest bar.
            assert!((bar.3 - value / max * tallest).abs() <= 1.0, "{bar:?} for {value}");
        }
        let shown: Vec<String> = texts(svg).into_iter().filter(|t| labels.contains(t)).collect();
        assert!(shown.len() >= 2, "{shown:?} of {labels:?} in {:?}", texts(svg));
        let mut unique = shown.clone();
        unique.dedup();
        assert_eq!(shown, unique, "a label repeats");
    }
}
