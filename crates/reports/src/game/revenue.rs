//! Revenue KPIs of the game report: who pays, and how much per player.
//!
//! Over the same first copies of events as the seed's KPIs, with the same rules: revenue is the
//! sum of `amount` of the `purchaseEvent`s counted in bookings (not late); a paying user is a
//! device with such a purchase; active users are the daily active users (any event).
//!
//! * per day: active users, paying users, revenue, conversion (paying / active), ARPDAU (revenue /
//!   active) and ARPPU (revenue / paying);
//! * over the range, by game (`gameId`), by `platform`, by `app_version` and by the item bought
//!   (the parameter [`ITEM_PARAM`] of `extraParams`) (`unknown` where missing): revenue, purchases
//!   and paying users.

use chrono::NaiveDate;
use serde::Serialize;

use super::events::{ACTIVE, PURCHASES};
use crate::error::ReportError;
use crate::figures;
use crate::session::ReportSession;
use crate::text::TextTable;

/// Revenue of one day.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DayRevenue {
    /// The UTC day.
    #[serde(serialize_with = "super::date_text")]
    pub date: NaiveDate,
    /// Devices with an event that day (the day's DAU).
    pub active_users: i64,
    /// Devices with a counted purchase that day.
    pub paying_users: i64,
    /// Sum of the counted purchases' `amount`.
    pub revenue: f64,
    /// `paying_users / active_users`.
    pub conversion: Option<f64>,
    /// Average revenue per daily active user.
    pub arpdau: Option<f64>,
    /// Average revenue per paying user.
    pub arppu: Option<f64>,
    /// Whether events may still arrive on time for it.
    pub provisional: bool,
}

/// Revenue of one platform or app version over the range.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RevenueOf {
    /// The platform or app version.
    pub name: String,
    /// Sum of the counted purchases' `amount`.
    pub revenue: f64,
    /// Counted purchases.
    pub purchases: i64,
    /// Devices that made them.
    pub paying_users: i64,
}

/// The parameter of a purchase that names what was bought: revenue is also reported by its
/// values (a parameter the table keeps in `extraParams`, as sent).
pub(super) const ITEM_PARAM: &str = "item_sku";

/// The revenue KPIs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Revenue {
    /// Per day, in order.
    pub days: Vec<DayRevenue>,
    /// By game, most revenue first.
    pub by_game: Vec<RevenueOf>,
    /// By the item bought (`extraParams.item_sku`), most revenue first.
    pub by_item: Vec<RevenueOf>,
    /// By platform, most revenue first.
    pub by_platform: Vec<RevenueOf>,
    /// By app version, most revenue first.
    pub by_app_version: Vec<RevenueOf>,
    /// Whether events may still arrive on time within the range (for the figures by game, item,
    /// platform and app version).
    pub provisional: bool,
}

impl Revenue {
    /// The days as a table for people.
    pub fn days_table(&self, currency: &str) -> TextTable {
        let mut table = TextTable::new([
            "date",
            "active users",
            "paying users",
            "conversion",
            "revenue",
            "ARPDAU",
            "ARPPU",
        ]);
        let per = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.4} {currency}"));
        for d in &self.days {
            table.push([
                crate::text::marked(d.date.to_string(), d.provisional),
                figures::count(d.active_users.max(0) as u64),
                figures::count(d.paying_users.max(0) as u64),
                figures::percent(d.conversion),
                format!("{:.2} {currency}", d.revenue),
                per(d.arpdau),
                per(d.arppu),
            ]);
        }
        table
    }

    /// Revenue by platform or app version as a table for people.
    pub fn of_table(of: &[RevenueOf], what: &str, currency: &str) -> TextTable {
        let mut table = TextTable::new([what, "revenue", "purchases", "paying users"]);
        for r in of {
            table.push([
                r.name.clone(),
                format!("{:.2} {currency}", r.revenue),
                figures::count(r.purchases.max(0) as u64),
                figures::count(r.paying_users.max(0) as u64),
            ]);
        }
        table
    }
}

/// `numerator / denominator`, when the denominator is not zero.
fn ratio(numerator: f64, denominator: i64) -> Option<f64> {
    (denominator > 0).then(|| numerator / denominator as f64)
}

/// The revenue KPIs of the devices active and the purchases counted (`__game_kpi_active`,
/// `__game_kpi_purchases`).
pub(super) async fn revenue(session: &ReportSession) -> Result<Revenue, ReportError> {
    // The days with an active device; paying devices and revenue of purchases with a device.
    let rows = session
        .query(
            "revenue per day",
            &format!(
                "WITH a AS (SELECT day, count(DISTINCT device) AS active FROM {ACTIVE} GROUP BY day), \
                 p AS (SELECT day, count(DISTINCT device) AS paying, sum(amount) AS revenue FROM {PURCHASES} \
                   WHERE device IS NOT NULL GROUP BY day) \
                 SELECT a.day, a.active, coalesce(p.paying, 0) AS paying, coalesce(p.revenue, 0) AS revenue \
                 FROM a LEFT JOIN p ON a.day = p.day ORDER BY a.day"
            ),
        )
        .await?;
    let (days, active, paying, revenue) = (
        rows.dates("day")?,
        rows.i64s("active")?,
        rows.i64s("paying")?,
        rows.f64s("revenue")?,
    );
    let days = (0..rows.len())
        .filter_map(|i| {
            let (active, paying, revenue) = (
                active[i].unwrap_or(0),
                paying[i].unwrap_or(0),
                revenue[i].unwrap_or(0.0),
            );
            Some(DayRevenue {
                date: days[i]?,
                active_users: active,
                paying_users: paying,
                revenue,
                conversion: ratio(paying as f64, active),
                arpdau: ratio(revenue, active),
                arppu: ratio(revenue, paying),
                provisional: false,
            })
        })
        .collect();
    let by = |column: &'static str| async move {
        let rows = session
            .query(
                "revenue by platform and app version",
                &format!(
                    "SELECT {column} AS name, sum(amount) AS revenue, count(*) AS purchases, \
                       count(DISTINCT device) AS paying FROM {PURCHASES} \
                     GROUP BY 1 ORDER BY revenue DESC, name"
                ),
            )
            .await?;
        let (names, revenue, purchases, paying) = (
            rows.strings("name")?,
            rows.f64s("revenue")?,
            rows.i64s("purchases")?,
            rows.i64s("paying")?,
        );
        Ok::<_, ReportError>(
            (0..rows.len())
                .map(|i| RevenueOf {
                    name: names[i].clone().unwrap_or_else(|| "unknown".to_owned()),
                    revenue: revenue[i].unwrap_or(0.0),
                    purchases: purchases[i].unwrap_or(0),
                    paying_users: paying[i].unwrap_or(0),
                })
                .collect::<Vec<_>>(),
        )
    };
    Ok(Revenue {
        days,
        by_game: by("game").await?,
        by_item: by_item(session).await?,
        by_platform: by("platform").await?,
        by_app_version: by("coalesce(version, 'unknown')").await?,
        provisional: false,
    })
}

/// Revenue by the item bought: [`ITEM_PARAM`] of each counted purchase's `extraParams`, read in
/// one pass over the purchases.
async fn by_item(session: &ReportSession) -> Result<Vec<RevenueOf>, ReportError> {
    let rows = session
        .query(
            "revenue by item",
            &format!("SELECT extra, amount, device FROM {PURCHASES}"),
        )
        .await?;
    let (extra, amount, device) = (rows.strings("extra")?, rows.f64s("amount")?, rows.i64s("device")?);
    let mut items: std::collections::HashMap<String, (f64, i64, std::collections::HashSet<i64>)> =
        std::collections::HashMap::new();
    for i in 0..rows.len() {
        let item = extra[i]
            .as_deref()
            .and_then(|text| serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(text).ok())
            .and_then(|params| params.get(ITEM_PARAM).map(super::value_text))
            .unwrap_or_else(|| "unknown".to_owned());
        let entry = items.entry(item).or_default();
        entry.0 += amount[i].unwrap_or(0.0);
        entry.1 += 1;
        if let Some(device) = device[i] {
            entry.2.insert(device);
        }
    }
    let mut by: Vec<RevenueOf> = items
        .into_iter()
        .map(|(name, (revenue, purchases, paying))| RevenueOf {
            name,
            revenue,
            purchases,
            paying_users: paying.len() as i64,
        })
        .collect();
    by.sort_by(|a, b| b.revenue.total_cmp(&a.revenue).then_with(|| a.name.cmp(&b.name)));
    Ok(by)
}
