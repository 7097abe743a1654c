//! The function's metrics of one batch, in CloudWatch's embedded metric format: the sink's health
//! and the live KPIs (events and bookings by `eventName` and `platform`).

use std::collections::BTreeMap;

use aws_lambda_events::event::kinesis::KinesisEventRecord;
use emf::{Bounded, Metrics, Unit};
use game_sink::{BatchReport, EventCount, SinkCommit};

/// The value of the `Function` dimension.
pub const FUNCTION: &str = "game-sink";

/// The value of the `Function` dimension of the committer's passes.
pub const COMMITTER: &str = "game-sink-committer";

/// The most distinct `eventName` values one instance may report as dimensions; later ones count
/// as `other`.
pub const MAX_EVENT_NAMES: usize = 50;

/// The setting of how many distinct `eventName` values the KPIs are reported by (0 to
/// [`MAX_EVENT_NAMES`]; 0, the default: none, the KPIs by game and platform only). Each name is
/// two custom metrics, which CloudWatch bills by the month: a game of 40 names would pay for 80.
pub const EVENT_NAMES_VAR: &str = "GAME_EVENTS_KPI_EVENT_NAMES";

/// Distinct platforms one instance reports as dimensions; later ones count as `other`.
pub const MAX_PLATFORMS: usize = 10;

/// Distinct games one instance reports as dimensions; later ones count as `other`. Games come
/// from the keys operators create, not from clients, so this bound is only a safeguard.
pub const MAX_GAMES: usize = 100;

/// Writes the metrics of each batch, with the client-given dimensions kept bounded.
#[derive(Debug)]
pub struct Reporter {
    namespace: String,
    /// `None`: no KPI document per event name.
    event_names: Option<Bounded>,
    platforms: Bounded,
    games: Bounded,
}

impl Reporter {
    /// Metrics in `namespace`, the KPIs by at most `event_names` distinct event names (0: not by
    /// event name; more than [`MAX_EVENT_NAMES`] is that many).
    pub fn new(namespace: &str, event_names: usize) -> Self {
        Self {
            namespace: namespace.to_owned(),
            event_names: (event_names > 0).then(|| Bounded::new(event_names.min(MAX_EVENT_NAMES))),
            platforms: Bounded::new(MAX_PLATFORMS),
            games: Bounded::new(MAX_GAMES),
        }
    }

    /// The documents of one batch: its health (records, rows staged, duplicates, rejects, a
    /// failed batch, and the lag, `now_ms` minus the newest record's approximate arrival), then
    /// `Events` and `Bookings` of the events staged: a document per `eventName` (when the
    /// reporter reports them), one per platform and one in total; then one per game.
    pub fn batch(&self, records: &[KinesisEventRecord], report: &BatchReport, now_ms: i64) -> Vec<Metrics> {
        let mut health = Metrics::new(&self.namespace).dimension("Function", FUNCTION);
        // What a healthy batch does not have is counted only when it happens (`put_when_any`).
        health
            .put("Records", report.records as f64, Unit::Count)
            .put("Rows", report.rows as f64, Unit::Count)
            .put_when_any("Duplicates", report.duplicates as f64, Unit::Count)
            .put_when_any("AlreadyCommitted", report.already_committed as f64, Unit::Count)
            .put_when_any("Rejects", report.rejected as f64, Unit::Count)
            .put_when_any("RecordsParked", report.parked as f64, Unit::Count)
            .put_when_any(
                "BatchesFailed",
                f64::from(u8::from(report.retry_from.is_some())),
                Unit::Count,
            );
        let newest = records
            .iter()
            .map(|r| r.kinesis.approximate_arrival_timestamp.0.timestamp_millis())
            .max();
        if let Some(newest) = newest {
            health.put("LagSeconds", (now_ms - newest).max(0) as f64 / 1e3, Unit::Seconds);
        }

        // One document per event name, one per platform and one in total: CloudWatch bills the
        // log by the byte, and a document per name and platform together would be their product.
        let mut by_name: BTreeMap<String, EventCount> = BTreeMap::new();
        let mut by_platform: BTreeMap<String, EventCount> = BTreeMap::new();
        let mut total = EventCount::default();
        for ((name, platform), count) in &report.events {
            if let Some(names) = &self.event_names {
                by_name.entry(names.value(Some(name))).or_default().add(*count);
            }
            by_platform
                .entry(self.platforms.value(platform.as_deref()))
                .or_default()
                .add(*count);
            total.add(*count);
        }
        let mut documents = vec![health];
        let kpi = |dimension: Option<(&'static str, String)>, count: EventCount| {
            let mut kpi = Metrics::new(&self.namespace);
            if let Some((name, value)) = dimension {
                kpi = kpi.dimension(name, value);
            }
            kpi.put("Events", count.events as f64, Unit::Count)
                .put("Bookings", count.bookings, Unit::None);
            kpi
        };
        documents.extend(
            by_name
                .into_iter()
                .map(|(name, count)| kpi(Some(("EventName", name)), count)),
        );
        documents.extend(
            by_platform
                .into_iter()
                .map(|(platform, count)| kpi(Some(("Platform", platform)), count)),
        );
        if !report.events.is_empty() {
            documents.push(kpi(None, total));
        }
        let mut games: BTreeMap<String, EventCount> = BTreeMap::new();
        for (game, count) in &report.by_game {
            games.entry(self.games.value(Some(game))).or_default().add(*count);
        }
        for (game, count) in games {
            let mut kpi = Metrics::new(&self.namespace).dimension("Game", game);
            kpi.put("Events", count.events as f64, Unit::Count)
                .put("Bookings", count.bookings, Unit::None);
            documents.push(kpi);
        }
        documents
    }
}

impl Reporter {
    /// The document of one committer pass: links, rows and versions committed, the longest a
    /// link had waited (committed, or left for a later pass: a link that waits for one that never
    /// comes shows here), links left, stranded or set aside, and the tables whose commit failed.
    pub fn commit(&self, pass: &SinkCommit, took: std::time::Duration) -> Metrics {
        let mut doc = Metrics::new(&self.namespace).dimension("Function", COMMITTER);
        let failed = pass.failures().count();
        doc.put("CommitPassSeconds", took.as_secs_f64(), Unit::Seconds)
            .put("CommitPassesFailed", f64::from(u8::from(failed > 0)), Unit::Count)
            .put("TablesFailed", failed as f64, Unit::Count);
        let tables: Vec<&lake::StagedCommit> = pass.done().collect();
        let sum = |f: fn(&lake::StagedCommit) -> f64| tables.iter().map(|t| f(t)).sum::<f64>();
        doc.put("LinksCommitted", sum(|t| t.links as f64), Unit::Count)
            .put("RowsCommitted", sum(|t| t.rows as f64), Unit::Count)
            .put(
                "Commits",
                sum(|t| f64::from(u8::from(t.version.is_some()))),
                Unit::Count,
            )
            .put("CommitAttempts", sum(|t| f64::from(t.attempts)), Unit::Count)
            .put_when_any(
                "PostCommitFailures",
                sum(|t| f64::from(u8::from(t.post_commit_failed))),
                Unit::Count,
            )
            .put_when_any("LinksLeft", sum(|t| t.left as f64), Unit::Count)
            .put_when_any("LinksStranded", sum(|t| (t.stranded + t.set_aside) as f64), Unit::Count);
        if let Some(wait) = tables
            .iter()
            .flat_map(|t| [t.oldest_wait_ms, t.oldest_left_ms])
            .flatten()
            .max()
        {
            doc.put("StagedWaitSeconds", wait.max(0) as f64 / 1e3, Unit::Seconds);
        }
        doc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_reports_its_health_and_kpis_with_bounded_dimensions() {
        let reporter = Reporter {
            platforms: Bounded::new(1),
            ..Reporter::new("ns", MAX_EVENT_NAMES)
        };
        let mut record = KinesisEventRecord::default();
        record.kinesis.approximate_arrival_timestamp.0 = chrono::DateTime::from_timestamp(100, 0).unwrap();
        let count = |events, bookings| EventCount { events, bookings };
        let report = BatchReport {
            records: 4,
            rows: 4,
            events: BTreeMap::from([
                (("purchaseEvent".into(), Some("ios".into())), count(2, 9.98)),
                (("purchaseEvent".into(), Some("android".into())), count(1, 1.0)),
                (("levelUp".into(), None), count(1, 0.0)),
            ]),
            by_game: BTreeMap::from([("space-miners".into(), count(4, 10.98))]),
            ..BatchReport::default()
        };
        let documents: Vec<_> = reporter
            .batch(&[record], &report, 112_500)
            .iter()
            .map(|m| m.document(0))
            .collect();
        assert_eq!(documents[0]["Function"], FUNCTION);
        assert_eq!(documents[0]["Records"], 4.0);
        assert!(
            documents[0].get("BatchesFailed").is_none(),
            "a count of what did not happen is left out"
        );
        assert_eq!(documents[0]["LagSeconds"], 12.5);
        // By event name, then by platform: the first platform seen (android: the report is in
        // key order) is kept; platforms past the bound count as "other", and so do events
        // without one. Then all events, then by game.
        let kpi = |d: &serde_json::Value, dimension: &str| {
            (
                d.get(dimension).and_then(|v| v.as_str()).unwrap_or("").to_owned(),
                d["Events"].as_f64().unwrap(),
                d["Bookings"].as_f64().unwrap(),
            )
        };
        let names: Vec<_> = documents[1..3].iter().map(|d| kpi(d, "EventName")).collect();
        assert_eq!(
            names,
            [("levelUp".into(), 1.0, 0.0), ("purchaseEvent".into(), 3.0, 10.98)]
        );
        let platforms: Vec<_> = documents[3..5].iter().map(|d| kpi(d, "Platform")).collect();
        assert_eq!(platforms, [("android".into(), 1.0, 1.0), ("other".into(), 3.0, 9.98)]);
        assert_eq!(kpi(&documents[5], "none"), (String::new(), 4.0, 10.98));
        for (document, set) in documents[1..6].iter().zip([
            serde_json::json!([["EventName"]]),
            serde_json::json!([["EventName"]]),
            serde_json::json!([["Platform"]]),
            serde_json::json!([["Platform"]]),
            serde_json::json!([[]]),
        ]) {
            assert_eq!(document["_aws"]["CloudWatchMetrics"][0]["Dimensions"], set);
        }
        assert_eq!(documents.len(), 7);
        assert_eq!(
            (
                &documents[6]["Game"],
                &documents[6]["Events"],
                &documents[6]["Bookings"]
            ),
            (
                &serde_json::json!("space-miners"),
                &serde_json::json!(4.0),
                &serde_json::json!(10.98)
            )
        );
    }

    #[test]
    fn without_event_names_the_kpis_are_by_platform_in_total_and_by_game() {
        let report = BatchReport {
            events: BTreeMap::from([
                (
                    ("purchaseEvent".into(), Some("ios".into())),
                    EventCount {
                        events: 2,
                        bookings: 9.98,
                    },
                ),
                (
                    ("levelUp".into(), Some("ios".into())),
                    EventCount {
                        events: 1,
                        bookings: 0.0,
                    },
                ),
            ]),
            by_game: BTreeMap::from([(
                "space-miners".into(),
                EventCount {
                    events: 3,
                    bookings: 9.98,
                },
            )]),
            ..BatchReport::default()
        };
        let documents: Vec<_> = Reporter::new("ns", 0)
            .batch(&[], &report, 0)
            .iter()
            .map(|m| m.document(0))
            .collect();
        let dimensions: Vec<_> = documents[1..]
            .iter()
            .map(|d| d["_aws"]["CloudWatchMetrics"][0]["Dimensions"].clone())
            .collect();
        assert_eq!(
            dimensions,
            [
                serde_json::json!([["Platform"]]),
                serde_json::json!([[]]),
                serde_json::json!([["Game"]])
            ]
        );
        assert!(documents.iter().all(|d| d.get("EventName").is_none()));
        assert_eq!(documents[1]["Events"], 3.0);
    }

    /// The bytes a batch writes to the function's log (CloudWatch Logs bills them): its health
    /// document, and a KPI document per event name and per platform in it, and one in total. `scripts/cost` bills
    /// these figures (`cargo test -p game-sink-lambda -- --nocapture log_bytes`); the bounds keep
    /// a document from growing unnoticed.
    #[test]
    fn the_log_bytes_of_a_batch() {
        let reporter = Reporter::new("lakelog", MAX_EVENT_NAMES);
        let mut record = KinesisEventRecord::default();
        record.kinesis.approximate_arrival_timestamp.0 = chrono::DateTime::from_timestamp(100, 0).unwrap();
        let report = BatchReport {
            records: 1000,
            rows: 1000,
            events: BTreeMap::from([(
                ("level_completed".into(), Some("android".into())),
                EventCount {
                    events: 1000,
                    bookings: 0.0,
                },
            )]),
            ..BatchReport::default()
        };
        let bytes: Vec<usize> = reporter
            .batch(&[record], &report, 112_500)
            .iter()
            .map(|m| m.document(1_796_560_000_000).to_string().len() + 1)
            .collect();
        let (health, kpi) = (bytes[0], bytes[1]);
        println!("a batch logs {health} bytes of health and {kpi} bytes per KPI document");
        assert!(health <= 700 && kpi <= 400, "{bytes:?}");
    }
}
