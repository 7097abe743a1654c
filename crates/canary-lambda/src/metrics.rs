//! The canary's figures in CloudWatch's embedded metric format: the accept-to-row time of each
//! probe that landed, and a count of the probes that did not (the alarm's metric).

use canary::Probe;
use emf::{Metrics, Unit};

/// The value of the `Function` dimension.
pub const FUNCTION: &str = "canary";

/// A probe's figures: `ProbesNotLanded` (0 or 1) always, `ProbeAcceptToRowSeconds` when it
/// landed, `ProbeDuplicates` when some landed more than once.
pub fn of_probe(namespace: &str, probe: &Probe) -> Metrics {
    let mut metrics = Metrics::new(namespace).dimension("Function", FUNCTION);
    metrics.put("ProbesNotLanded", f64::from(u8::from(!probe.landed)), Unit::Count);
    if let Some(seconds) = probe.accept_to_row_seconds {
        metrics.put("ProbeAcceptToRowSeconds", seconds, Unit::Seconds);
    }
    let extra = probe.rows.saturating_sub(probe.event_ids.len() as u64);
    metrics.put_when_any("ProbeDuplicates", extra as f64, Unit::Count);
    metrics
}

/// The figures of a probe that could not be checked: not landed, as far as anyone can tell.
pub fn unchecked(namespace: &str) -> Metrics {
    let mut metrics = Metrics::new(namespace).dimension("Function", FUNCTION);
    metrics.put("ProbesNotLanded", 1.0, Unit::Count);
    metrics
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_landed_probe_has_its_time_and_a_lost_one_is_counted() {
        let landed = Probe {
            event_ids: vec!["a".into()],
            landed: true,
            rows: 1,
            accept_to_row_seconds: Some(12.5),
            ..Probe::default()
        };
        let doc = of_probe("lakelog/s", &landed).document(0);
        assert_eq!(doc["ProbesNotLanded"], 0.0);
        assert_eq!(doc["ProbeAcceptToRowSeconds"], 12.5);
        assert!(doc.get("ProbeDuplicates").is_none(), "{doc}");
        let twice = Probe { rows: 2, ..landed };
        assert_eq!(of_probe("lakelog/s", &twice).document(0)["ProbeDuplicates"], 1.0);
        let lost = Probe {
            event_ids: vec!["a".into()],
            ..Probe::default()
        };
        let doc = of_probe("lakelog/s", &lost).document(0);
        assert_eq!(doc["ProbesNotLanded"], 1.0);
        assert!(doc.get("ProbeAcceptToRowSeconds").is_none(), "{doc}");
        assert_eq!(unchecked("lakelog/s").document(0)["ProbesNotLanded"], 1.0);
    }
}
