//! The function's metrics of one pass, in CloudWatch's embedded metric format: tables maintained
//! and failed, compaction's work, rows past retention, erasures, and how long ago the least
//! recently maintained table was done.

use crate::handler::{Report, TableSummary};

/// The value of the `Function` dimension.
pub const FUNCTION: &str = "maintenance";

impl Report {
    /// The pass in figures, in CloudWatch's embedded metric format: tables maintained and failed,
    /// compaction commits, files compacted away, duplicates removed, files vacuumed, and whether
    /// the deadline stopped the pass.
    pub fn metrics(&self, namespace: &str) -> emf::Metrics {
        use emf::Unit::Count;
        let sum = |field: fn(&TableSummary) -> usize| self.tables.iter().map(field).sum::<usize>() as f64;
        let failed = self.tables.iter().filter(|t| t.error.is_some()).count();
        let mut metrics = emf::Metrics::new(namespace).dimension("Function", FUNCTION);
        metrics
            .put("Tables", self.tables.len() as f64, Count)
            .put("TablesFailed", failed as f64, Count)
            .put("CompactionCommits", sum(|t| t.bins), Count)
            .put(
                "FilesCompacted",
                sum(|t| t.files_before - t.files_after.min(t.files_before)),
                Count,
            )
            .put(
                "DuplicatesRemoved",
                self.tables.iter().map(|t| t.duplicates_removed).sum::<u64>() as f64,
                Count,
            )
            .put("FilesVacuumed", sum(|t| t.files_vacuumed), Count)
            .put(
                "RowsExpired",
                self.tables.iter().map(|t| t.rows_expired).sum::<u64>() as f64,
                Count,
            )
            .put("Erasures", self.erasures.len() as f64, Count)
            .put(
                "ErasuresFailed",
                self.erasures.iter().filter(|e| e.error.is_some()).count() as f64,
                Count,
            )
            .put("StoppedEarly", f64::from(u8::from(self.stopped_early)), Count);
        if let Some(minutes) = self.minutes_since_maintained {
            metrics.put("HoursSinceMaintained", minutes as f64 / 60.0, emf::Unit::None);
        }
        metrics
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_in_figures() {
        let report = Report {
            tables: vec![
                TableSummary {
                    table: "a".into(),
                    files_before: 5,
                    files_after: 1,
                    bins: 1,
                    duplicates_removed: 12,
                    files_vacuumed: 3,
                    ..TableSummary::default()
                },
                TableSummary {
                    table: "b".into(),
                    error: Some("no table".into()),
                    ..TableSummary::default()
                },
            ],
            stopped_early: false,
            minutes_since_maintained: Some(90),
            erasures: Vec::new(),
        };
        let document = report.metrics("ns").document(0);
        for (name, value) in [
            ("Tables", 2.0),
            ("TablesFailed", 1.0),
            ("CompactionCommits", 1.0),
            ("FilesCompacted", 4.0),
            ("DuplicatesRemoved", 12.0),
            ("FilesVacuumed", 3.0),
            ("StoppedEarly", 0.0),
            ("HoursSinceMaintained", 1.5),
        ] {
            assert_eq!(document[name], value, "{name}: {document}");
        }
        assert_eq!(document["Function"], FUNCTION);
    }
}
