//! The order tables are maintained in, run after run: the one whose maintenance started longest
//! ago first (never-maintained tables before all), from a small state object beside the tables
//! (`MAINTENANCE_STATE_URI`). A run that stops at its deadline after one table has still moved
//! the rotation on, so with N tables every table is started within N runs whatever the schedule;
//! and the state says how long ago each table was last maintained through, for the alarm.

use std::collections::BTreeMap;

use lake::{Folder, LakeError, StorageConfig};
use serde::{Deserialize, Serialize};
use tracing::warn;

/// The name of the state object in its folder.
pub const STATE_OBJECT: &str = "maintenance-state.json";

/// When each table's maintenance last started and last completed (seconds since the epoch).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// By table location.
    pub tables: BTreeMap<String, TableState>,
}

/// One table's times.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TableState {
    /// When its maintenance last started.
    pub started: i64,
    /// When its maintenance last ran through (no step left for a later run, no error).
    pub completed: Option<i64>,
}

impl State {
    /// Orders `tables` for this run: never-started ones first (in the given order), then by when
    /// each was last started, oldest first.
    pub fn order<T>(&self, tables: &mut [(String, T)]) {
        tables.sort_by_key(|(uri, _)| self.tables.get(uri).map(|t| t.started));
    }

    /// Records that `table`'s maintenance started at `now`.
    pub fn started(&mut self, table: &str, now: i64) {
        self.tables.entry(table.to_owned()).or_default().started = now;
    }

    /// Records that `table`'s maintenance ran through at `now`.
    pub fn completed(&mut self, table: &str, now: i64) {
        self.tables.entry(table.to_owned()).or_default().completed = Some(now);
    }

    /// Hours since the least recently completed of `tables` was last maintained through (a table
    /// never completed counts from when it was first started); `None` when none was ever started.
    pub fn oldest_hours(&self, tables: &[String], now: i64) -> Option<f64> {
        tables
            .iter()
            .filter_map(|uri| self.tables.get(uri))
            .map(|t| t.completed.unwrap_or(t.started))
            .min()
            .map(|oldest| (now - oldest).max(0) as f64 / 3600.0)
    }

    /// Forgets tables that are no longer maintained (not among `tables`).
    pub fn retain(&mut self, tables: &[String]) {
        self.tables.retain(|uri, _| tables.contains(uri));
    }
}

/// The state object in its folder.
#[derive(Debug, Clone)]
pub struct Store {
    folder: Folder,
}

impl Store {
    /// The state in the folder at `uri`.
    pub fn open(uri: &str, storage: &StorageConfig) -> Result<Self, LakeError> {
        Ok(Self {
            folder: Folder::open(uri, storage)?,
        })
    }

    /// The state; an empty one when there is none yet, or when it cannot be read (said in the
    /// log: the rotation then starts afresh, it does not stop maintenance).
    pub async fn load(&self) -> State {
        let bytes = match self.folder.get(STATE_OBJECT).await {
            Ok(bytes) => bytes,
            Err(_) => return State::default(),
        };
        serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            warn!(object = %self.folder.object_uri(STATE_OBJECT), error = %e, "unreadable maintenance state; starting afresh");
            State::default()
        })
    }

    /// Writes the state.
    pub async fn save(&self, state: &State) -> Result<(), LakeError> {
        let bytes = serde_json::to_vec(state).unwrap_or_default();
        self.folder.put(STATE_OBJECT, bytes).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs that each get through one table only: with N tables, every table is started within
    /// N runs, and again within the next N, whatever N and whenever the runs come.
    #[test]
    fn runs_that_stop_after_one_table_reach_every_table() {
        for n in [2, 3, 4, 6] {
            let tables: Vec<String> = (0..n).map(|i| format!("s3://lake/t{i}")).collect();
            let mut state = State::default();
            let mut now = 1_000;
            for round in 0..3 {
                let mut seen = std::collections::BTreeSet::new();
                for _ in 0..n {
                    let mut order: Vec<(String, ())> = tables.iter().map(|t| (t.clone(), ())).collect();
                    state.order(&mut order);
                    let first = order[0].0.clone();
                    state.started(&first, now);
                    seen.insert(first);
                    // Runs every six hours, or twice in one hour: the order does not care.
                    now += if round == 1 { 60 } else { 6 * 3600 };
                }
                assert_eq!(seen.len(), n, "{n} tables, round {round}: {seen:?}");
            }
        }
    }

    #[test]
    fn the_oldest_table_says_how_long_it_waited() {
        let tables = vec!["a".to_owned(), "b".to_owned()];
        let mut state = State::default();
        assert_eq!(state.oldest_hours(&tables, 0), None);
        state.started("a", 0);
        state.completed("a", 3600);
        state.started("b", 7200);
        assert_eq!(state.oldest_hours(&tables, 4 * 3600), Some(3.0));
        state.completed("b", 4 * 3600);
        assert_eq!(state.oldest_hours(&tables, 5 * 3600), Some(4.0));
        state.retain(&["b".to_owned()]);
        assert_eq!(state.tables.len(), 1);
    }
}
