//! Acquisition and lifetime value of the game report: what the devices of each acquisition
//! source, campaign, country and platform are worth.
//!
//! Each device's cohort is its first-seen day (the day of its first event in the range, as
//! retention has it), and its acquisition parameters are those of [`super::attribution`]; its
//! platform is that of its first day (the smallest name, if several). Per group of devices (all;
//! each `source`; each `source` and `campaign`; each `country`; each platform):
//!
//! - devices, paying devices (with a counted purchase in the range) and payer conversion;
//! - revenue (the counted purchases), ARPU (revenue per device) and ARPPU (per paying device);
//! - lifetime value at day N for N = 1, 7, 30 and 90: the revenue per device of its first day and
//!   the N days after it, over the devices whose day N has ended (by the end of the range and by
//!   now) and is in the range, as retention leaves unfinished days out; `None` while no device's
//!   has.
//!
//! `GameAcquisitionQuery` in the template gives the same figures in SQL, for Athena.

use chrono::NaiveDate;
use serde::Serialize;

use super::attribution::{ACQUISITION, UNKNOWN};
use super::events::{ACTIVE, PURCHASES};
use crate::chart::{self, Svg, Unit};
use crate::error::ReportError;
use crate::figures;
use crate::session::ReportSession;
use crate::text::TextTable;

/// The days after the first one that lifetime value is measured on.
pub const LTV_DAYS: [i64; 4] = [1, 7, 30, 90];

/// The figures of one group of devices.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AcquisitionCohort {
    /// What the group is by: `all`, `source`, `campaign` (within its source), `country` or
    /// `platform`.
    pub by: String,
    /// Its name: the source, `source / campaign`, the country or the platform (empty for `all`).
    pub name: String,
    /// Devices first seen in the range.
    pub devices: i64,
    /// Of them, those with a counted purchase.
    pub payers: i64,
    /// `payers / devices`.
    pub payer_conversion: Option<f64>,
    /// The sum of their counted purchases' `amount`.
    pub revenue: f64,
    /// Revenue per device.
    pub arpu: Option<f64>,
    /// Revenue per paying device.
    pub arppu: Option<f64>,
    /// Lifetime value at day 1, 7, 30 and 90 (revenue per device up to that day after the first),
    /// over the devices whose day has ended; `None` while none has.
    pub ltv: [Option<f64>; 4],
    /// The devices each lifetime value is over.
    pub ltv_devices: [i64; 4],
    /// Whether events may still arrive on time within the range.
    pub provisional: bool,
}

/// The acquisition section of the report.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Acquisition {
    /// The acquisition parameters, taken from each device's earliest event with `source`.
    pub params: Vec<&'static str>,
    /// The days lifetime value is measured on.
    pub ltv_days: Vec<i64>,
    /// All devices, then by source, campaign, country and platform, each most devices first.
    pub cohorts: Vec<AcquisitionCohort>,
}

/// The groups, in the order of the report, with how each names its rows.
const GROUPS: [&str; 5] = ["all", "source", "campaign", "country", "platform"];

/// The acquisition figures of the devices active (`__game_kpi_active`), their acquisitions and
/// their counted purchases; days before `complete_before` have ended.
pub(super) async fn acquisition(
    session: &ReportSession,
    complete_before: NaiveDate,
) -> Result<Acquisition, ReportError> {
    let ltv = LTV_DAYS
        .iter()
        .map(|n| {
            let known = format!(
                "d.first_day + INTERVAL '{n} days' <= s.last_day AND d.first_day + INTERVAL '{n} days' < DATE '{complete_before}'"
            );
            format!(
                "count(*) FILTER (WHERE {known}) AS devices{n}, \
                 sum(coalesce(r.r{n}, 0)) FILTER (WHERE {known}) AS revenue{n}"
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    let by_day = LTV_DAYS
        .iter()
        .map(|n| format!("sum(CASE WHEN p.day <= d.first_day + INTERVAL '{n} days' THEN p.amount END) AS r{n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let first_days = super::events::first_days();
    let rows = session
        .query(
            "acquisition and lifetime value",
            &format!(
                "WITH span AS (SELECT max(day) AS last_day FROM {ACTIVE}), \
                 d AS ({first_days}), \
                 q AS (SELECT d.device, d.first_day, d.platform, \
                   coalesce(q.source, '{UNKNOWN}') AS source, coalesce(q.campaign, '{UNKNOWN}') AS campaign, \
                   coalesce(q.country, '{UNKNOWN}') AS country \
                   FROM d LEFT JOIN {ACQUISITION} q ON q.device = d.device), \
                 r AS (SELECT d.device, sum(p.amount) AS revenue, {by_day} FROM d \
                   JOIN {PURCHASES} p ON p.device = d.device GROUP BY d.device) \
                 SELECT d.source, d.campaign, d.country, d.platform, \
                   CASE WHEN d.campaign IS NOT NULL THEN 'campaign' WHEN d.source IS NOT NULL THEN 'source' \
                        WHEN d.country IS NOT NULL THEN 'country' WHEN d.platform IS NOT NULL THEN 'platform' \
                        ELSE 'all' END AS grouped_by, \
                   count(*) AS devices, count(r.device) AS payers, coalesce(sum(r.revenue), 0) AS revenue, {ltv} \
                 FROM q d LEFT JOIN r ON r.device = d.device CROSS JOIN span s \
                 GROUP BY GROUPING SETS ((), (d.source), (d.source, d.campaign), (d.country), (d.platform)) \
                 ORDER BY devices DESC"
            ),
        )
        .await?;
    let (sources, campaigns, countries, platforms, by) = (
        rows.strings("source")?,
        rows.strings("campaign")?,
        rows.strings("country")?,
        rows.strings("platform")?,
        rows.strings("grouped_by")?,
    );
    let (devices, payers, revenue) = (rows.i64s("devices")?, rows.i64s("payers")?, rows.f64s("revenue")?);
    let ltv_devices: Vec<Vec<Option<i64>>> = LTV_DAYS
        .iter()
        .map(|n| rows.i64s(&format!("devices{n}")))
        .collect::<Result<_, _>>()?;
    let ltv_revenue: Vec<Vec<Option<f64>>> = LTV_DAYS
        .iter()
        .map(|n| rows.f64s(&format!("revenue{n}")))
        .collect::<Result<_, _>>()?;
    let mut cohorts: Vec<AcquisitionCohort> = (0..rows.len())
        .filter_map(|i| {
            let by = by[i].clone()?;
            let text = |v: &Option<String>| v.clone().unwrap_or_default();
            let name = match by.as_str() {
                "source" => text(&sources[i]),
                "campaign" => format!("{} / {}", text(&sources[i]), text(&campaigns[i])),
                "country" => text(&countries[i]),
                "platform" => text(&platforms[i]),
                _ => String::new(),
            };
            let (devices, payers, revenue) = (
                devices[i].unwrap_or(0),
                payers[i].unwrap_or(0),
                revenue[i].unwrap_or(0.0),
            );
            let ltv_devices: [i64; 4] = std::array::from_fn(|k| ltv_devices[k][i].unwrap_or(0));
            Some(AcquisitionCohort {
                by,
                name,
                devices,
                payers,
                payer_conversion: ratio(payers as f64, devices),
                revenue,
                arpu: ratio(revenue, devices),
                arppu: ratio(revenue, payers),
                ltv: std::array::from_fn(|k| ratio(ltv_revenue[k][i].unwrap_or(0.0), ltv_devices[k])),
                ltv_devices,
                provisional: false,
            })
        })
        .collect();
    cohorts.sort_by(|a, b| {
        let group = |c: &AcquisitionCohort| GROUPS.iter().position(|g| *g == c.by).unwrap_or(GROUPS.len());
        group(a)
            .cmp(&group(b))
            .then(b.devices.cmp(&a.devices))
            .then_with(|| a.name.cmp(&b.name))
    });
    Ok(Acquisition {
        params: super::attribution::ACQUISITION_PARAMS.to_vec(),
        ltv_days: LTV_DAYS.to_vec(),
        cohorts,
    })
}

fn ratio(numerator: f64, denominator: i64) -> Option<f64> {
    (denominator > 0).then(|| numerator / denominator as f64)
}

impl Acquisition {
    /// The groups as a table for people; a provisional row is marked `*`.
    pub(super) fn table(&self, currency: &str) -> TextTable {
        let mut table = TextTable::new(
            ["devices by", "devices", "payers", "payer conversion", "ARPU", "ARPPU"]
                .into_iter()
                .map(str::to_owned)
                .chain(LTV_DAYS.iter().map(|n| format!("LTV day {n}"))),
        );
        let money = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.2} {currency}"));
        for c in &self.cohorts {
            let label = if c.by == "all" {
                "all devices".to_owned()
            } else {
                format!("{} {}", c.by, c.name)
            };
            table.push(
                [
                    crate::text::marked(label, c.provisional),
                    figures::count(c.devices.max(0) as u64),
                    figures::count(c.payers.max(0) as u64),
                    figures::percent(c.payer_conversion),
                    money(c.arpu),
                    money(c.arppu),
                ]
                .into_iter()
                .chain(c.ltv.iter().map(|v| money(*v))),
            );
        }
        table
    }

    /// Lifetime value by source at the longest day known for all of them, as bars.
    pub(super) fn chart(&self, currency: &str) -> Result<Svg, ReportError> {
        let sources: Vec<&AcquisitionCohort> = self.cohorts.iter().filter(|c| c.by == "source").collect();
        let k = (0..LTV_DAYS.len())
            .rev()
            .find(|&k| !sources.is_empty() && sources.iter().all(|c| c.ltv[k].is_some()))
            .unwrap_or(0);
        let bars: Vec<(String, f64)> = sources
            .iter()
            .map(|c| (c.name.clone(), c.ltv[k].unwrap_or(0.0)))
            .collect();
        chart::bar_chart(
            &format!("Lifetime value at day {} by source", LTV_DAYS[k]),
            Unit::Money("revenue per device", currency),
            &bars,
        )
    }
}
