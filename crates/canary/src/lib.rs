//! The end-to-end check of a deployment, or of `lakelog serve`: probe events of the reserved
//! [`PROBE_GAME`] sent through the public API as a game client sends its events, the time from
//! the API's answer until their rows are committed to `game_events`, and whether each probe
//! landed exactly once.
//!
//! The stack's canary function runs [`probe`] on a schedule and asks the maintenance function to
//! erase the probes ([`request_erasure`]); `lakelog check` runs it once and reads the rest of a
//! stack's health beside it. A probe's row is found by reading, of the table's active files, only
//! those of the probe's date written since it was sent, each once however often the table is read
//! while waiting, and of those only `eventId`: the check costs the same on a table of a day as on
//! one of a year.
//!
//! Probes are rows only until erased: the sink's live KPIs and the game report leave
//! [`PROBE_GAME`] out.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use game_api::client::{RequestSettings, Status, send_batch};
use game_events::batch::EVENT_DATE;
use game_events::{EVENT_ID, GameEvent, PROBE_EVENT};
use game_sink::erasure::ErasureRequest;
use lake::{Erasure, Folder, LakeError, Scanned, StorageConfig, Table};
use serde::Serialize;
use serde_json::json;
use uuid::Uuid;

pub use game_events::PROBE_GAME;

#[cfg(feature = "stack")]
pub mod stack;

/// The `eventParams.device_id` of every probe: one device, so one erasure request covers every
/// probe ever sent, late ones included.
pub const PROBE_DEVICE: &str = "lakelog-probe";

/// The name of the erasure request [`request_erasure`] writes: one object, written again by each
/// probe, so that requests do not pile up between maintenance passes.
pub const ERASURE_REQUEST: &str = "lakelog-probes.json";

/// How far the clock of whoever wrote a data file may be behind the prober's: files written this
/// long before the probe was sent are read too.
const CLOCK_SKEW: TimeDelta = TimeDelta::minutes(5);

/// Why a check could not be made (a probe that did not land is not an error: see
/// [`Probe::landed`]).
#[derive(Debug, thiserror::Error)]
pub enum CanaryError {
    /// The table could not be read.
    #[error(transparent)]
    Lake(#[from] LakeError),
    /// The erasure request could not be made.
    #[error("the probes' erasure request: {0}")]
    Erasure(String),
}

/// Where the probes go and where their rows land.
#[derive(Debug, Clone)]
pub struct Target {
    /// The API's `/events` URL, as game clients use it.
    pub url: String,
    /// The key of the probe game, sent as `x-api-key`.
    pub key: String,
    /// The `game_events` table.
    pub table: String,
    /// How to reach the table.
    pub storage: StorageConfig,
}

/// How a probe is made.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Probe events sent, in one request.
    pub probes: usize,
    /// How long after the API's answer the rows may take before the probe counts as not landed.
    pub deadline: Duration,
    /// How often the table is read while waiting.
    pub poll: Duration,
    /// How often events the API did not write are sent again.
    pub resends: u32,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            probes: 1,
            deadline: Duration::from_secs(120),
            poll: Duration::from_secs(1),
            resends: 3,
        }
    }
}

/// What one probe found.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Probe {
    /// The probe events' `eventId`s.
    pub event_ids: Vec<String>,
    /// When they were sent (RFC 3339, UTC).
    pub sent_at: String,
    /// Whether the API answered that every probe reached the stream.
    pub accepted: bool,
    /// How long the API took to answer, in milliseconds (every exchange, resends included).
    pub answer_ms: f64,
    /// Seconds from the API's answer until every probe's row was committed and read back.
    pub accept_to_row_seconds: Option<f64>,
    /// Whether every probe has its row.
    pub landed: bool,
    /// Rows found holding a probe's `eventId` (more than the probes: some landed twice).
    pub rows: u64,
    /// Whether every probe landed exactly once.
    pub once: bool,
    /// What went wrong: the API's refusal, or the rows not found within the deadline.
    pub error: Option<String>,
}

/// Sends `options.probes` probe events through `target`'s API and waits, reading the table every
/// `options.poll`, until every one has its row or `options.deadline` has passed since the API
/// answered. `Err` only when the table cannot be read; a refused or lost probe is in the
/// [`Probe`].
pub async fn probe(client: &reqwest::Client, target: &Target, options: &Options) -> Result<Probe, CanaryError> {
    // The table's state is loaded before the probes are sent, so that waiting reads only what
    // is new. A table not made yet (a new stack) is waited for like the rows.
    let mut table = open(target).await?;
    let ids: Vec<Uuid> = (0..options.probes.max(1)).map(|_| Uuid::new_v4()).collect();
    let sent = Utc::now();
    let mut found = Probe {
        event_ids: ids.iter().map(Uuid::to_string).collect(),
        sent_at: sent.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        ..Probe::default()
    };
    let settings = RequestSettings {
        client: client.clone(),
        url: target.url.clone(),
        api_key: Some(target.key.clone()),
        gzip: false,
        retries: options.resends,
    };
    let outcome = send_batch(&settings, ids.iter().map(|&id| probe_event(id)).collect()).await;
    let answered = Instant::now();
    found.answer_ms = outcome.exchanges.iter().sum();
    found.accepted = outcome
        .events
        .iter()
        .all(|(_, status)| *status == Some(Status::Written));
    if !found.accepted {
        let statuses: Vec<String> = outcome
            .statuses
            .iter()
            .map(|(status, n)| format!("{n}x HTTP {status}"))
            .collect();
        found.error = Some(format!(
            "the API did not accept the probes ({}): {}",
            statuses.join(", "),
            outcome.errors.join("; ")
        ));
        return Ok(found);
    }

    let dates = probe_dates(sent, Utc::now());
    let since = (sent - CLOCK_SKEW).timestamp_millis();
    let erasure = Erasure::new(found.event_ids.iter().cloned()).equals(EVENT_ID);
    let mut scanned = Scanned::default();
    // Probes with at least one row (`found.rows` counts a probe that landed twice twice).
    let mut landed = 0;
    loop {
        if table.is_none() {
            table = open(target).await?;
        }
        if let Some(table) = table.as_mut() {
            table.refresh().await?;
            let present = table
                .rows_present(
                    &erasure,
                    |values, written| {
                        written >= since && values.get(EVENT_DATE).is_none_or(|date| dates.contains(date))
                    },
                    &mut scanned,
                )
                .await?;
            found.rows = present.rows;
            landed = present.ids.len();
            if landed == ids.len() {
                found.landed = true;
                found.accept_to_row_seconds = Some(answered.elapsed().as_secs_f64());
                found.once = present.rows == ids.len() as u64;
                if !found.once {
                    found.error = Some(format!(
                        "{} rows hold the {} probes: some landed more than once",
                        present.rows,
                        ids.len()
                    ));
                }
                return Ok(found);
            }
        }
        if answered.elapsed() >= options.deadline {
            found.error = Some(format!(
                "{} of {} probes had no row {} s after the API accepted them",
                ids.len() - landed,
                ids.len(),
                options.deadline.as_secs()
            ));
            return Ok(found);
        }
        tokio::time::sleep(options.poll).await;
    }
}

/// The table, or `None` when none is there yet.
async fn open(target: &Target) -> Result<Option<Table>, LakeError> {
    match Table::open(&target.table, &target.storage).await {
        Ok(table) => Ok(Some(table)),
        Err(e) if e.is_not_a_table() => Ok(None),
        Err(e) => Err(e),
    }
}

/// One probe event, as a game client sends it.
pub fn probe_event(id: Uuid) -> GameEvent {
    GameEvent {
        event_name: PROBE_EVENT.to_owned(),
        event_id: Some(id),
        event_params: serde_json::from_value(json!({"device_id": PROBE_DEVICE, "platform": "probe"})).ok(),
        extra: serde_json::Map::new(),
    }
}

/// The `eventDate`s a probe sent at `sent` and answered by `answered` can have: the API stamps
/// `eventTime` between the two.
fn probe_dates(sent: DateTime<Utc>, answered: DateTime<Utc>) -> BTreeSet<String> {
    [sent, answered]
        .iter()
        .map(|t| t.date_naive().format("%Y-%m-%d").to_string())
        .collect()
}

/// The erasure request of every probe: the probe device of [`PROBE_GAME`].
pub fn erasure_request() -> Result<ErasureRequest, CanaryError> {
    ErasureRequest::new(
        ERASURE_REQUEST,
        PROBE_GAME.to_owned(),
        vec![PROBE_DEVICE.to_owned()],
        "device_id".to_owned(),
    )
    .map_err(|e| CanaryError::Erasure(e.to_string()))
}

/// Writes the request to erase every probe into `requests`, the folder the maintenance function
/// takes erasure requests from (as [`ERASURE_REQUEST`], replacing the one a probe before wrote);
/// the object's URI.
pub async fn request_erasure(requests: &str, storage: &StorageConfig) -> Result<String, CanaryError> {
    let body = serde_json::to_vec(&erasure_request()?).map_err(|e| CanaryError::Erasure(e.to_string()))?;
    let folder = Folder::open(requests, storage)?;
    folder.put(ERASURE_REQUEST, body).await?;
    Ok(folder.object_uri(ERASURE_REQUEST))
}

/// The value of the probe game's API key `key_id`, read from API Gateway.
pub async fn probe_key(client: &aws_sdk_apigateway::Client, key_id: &str) -> Result<String, String> {
    let key = client
        .get_api_key()
        .api_key(key_id)
        .include_value(true)
        .send()
        .await
        .map_err(|e| {
            let reason = aws_sdk_apigateway::error::DisplayErrorContext(e);
            format!("cannot read the probe game's API key {key_id}: {reason}")
        })?;
    key.value()
        .map(str::to_owned)
        .ok_or_else(|| format!("the API key {key_id} has no value"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_is_an_event_of_the_probe_device() {
        let id = Uuid::new_v4();
        let event = probe_event(id);
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json["eventName"], PROBE_EVENT);
        assert_eq!(json["eventId"], id.to_string());
        assert_eq!(json["eventParams"]["device_id"], PROBE_DEVICE);
    }

    #[test]
    fn a_probe_sent_before_midnight_is_looked_for_on_both_days() {
        let sent = DateTime::parse_from_rfc3339("2026-12-06T23:59:59.5Z").unwrap().to_utc();
        let answered = sent + TimeDelta::seconds(1);
        assert_eq!(
            probe_dates(sent, answered).into_iter().collect::<Vec<_>>(),
            ["2026-12-06", "2026-12-07"]
        );
        assert_eq!(probe_dates(sent, sent).len(), 1);
    }

    #[test]
    fn the_erasure_request_is_one_the_maintenance_function_reads() {
        let request = erasure_request().unwrap();
        let body = json!({"game": PROBE_GAME, "players": [PROBE_DEVICE], "idParam": "device_id"});
        let read = ErasureRequest::from_json("x", body.to_string().as_bytes()).unwrap();
        assert_eq!(read, request);
    }

    #[tokio::test]
    async fn the_request_lands_in_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("requests");
        let uri = folder.display().to_string();
        let object = request_erasure(&uri, &StorageConfig::default()).await.unwrap();
        assert!(object.ends_with(ERASURE_REQUEST), "{object}");
        let bytes = std::fs::read(folder.join(ERASURE_REQUEST)).unwrap();
        assert_eq!(
            ErasureRequest::from_json("x", &bytes).unwrap(),
            erasure_request().unwrap()
        );
    }
}
