//! A player's erasure from the game tables: every row of the given players in `game_events` and
//! `game_events_rejects`, their parked records, and the files on storage that still held them,
//! while the pipeline keeps writing; an [`ErasureReceipt`] says what was done and proves it.
//!
//! `lakelog forget` and the maintenance function (requests dropped in a folder) run [`forget`].

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use lake::{Erasure, ErasureReport, Folder, LakeError, Purge, Retry, StorageConfig, Table};
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use crate::config::Config;
use crate::sink::Parked;

/// Why an erasure could not be done.
#[derive(Debug, thiserror::Error)]
pub enum ErasureError {
    /// The request is not one.
    #[error("erasure request {source_name}: {reason}")]
    Request {
        /// Where the request came from (a file, an object).
        source_name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A table or folder could not be read or written.
    #[error(transparent)]
    Lake(#[from] LakeError),
    /// An object of parked records is not one.
    #[error("{object}: not an object of parked records: {reason}")]
    Parked {
        /// The object.
        object: String,
        /// What is wrong.
        reason: String,
    },
}

fn default_id_param() -> String {
    "device_id".to_owned()
}

/// What to erase: players of one game, by the event parameter that holds their id. As JSON (a
/// request file or object): `{"game": "space-miners", "players": ["id", ...], "idParam":
/// "device_id"}` (`idParam` optional).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ErasureRequest {
    /// The game (its `gameId`; rows written before games had ids count too).
    pub game: String,
    /// The players' ids.
    pub players: Vec<String>,
    /// The event parameter holding a player's id.
    #[serde(default = "default_id_param")]
    pub id_param: String,
    /// The players' pseudonyms, when the game writes `id_param` pseudonymised
    /// ([`ErasureRequest::with_pseudonyms`]): the rows hold these, not the ids.
    #[serde(skip)]
    pub pseudonyms: Vec<String>,
}

impl ErasureRequest {
    /// A request, checked: a game, at least one id (blank ones and repeats dropped), and an
    /// `id_param` that is one parameter's name. `source_name` names it in errors.
    pub fn new(source_name: &str, game: String, players: Vec<String>, id_param: String) -> Result<Self, ErasureError> {
        let bad = |reason: &str| ErasureError::Request {
            source_name: source_name.to_owned(),
            reason: reason.to_owned(),
        };
        let mut players: Vec<String> = players
            .into_iter()
            .map(|p| p.trim().to_owned())
            .filter(|p| !p.is_empty())
            .collect();
        players.sort();
        players.dedup();
        if game.trim().is_empty() {
            return Err(bad("no game"));
        }
        if players.is_empty() {
            return Err(bad("no player ids"));
        }
        if id_param.is_empty() || !id_param.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(bad(
                "idParam must be the name of one event parameter (letters, digits, _)",
            ));
        }
        // A parameter that is no id (`platform`) would erase everyone who shares its value.
        if !id_param.to_ascii_lowercase().ends_with("id") {
            return Err(bad(&format!(
                "idParam {id_param:?} is not a player id parameter (its name must end in \"id\", as device_id)"
            )));
        }
        Ok(Self {
            game,
            players,
            id_param,
            pseudonyms: Vec::new(),
        })
    }

    /// The same request for a game that writes the parameters `params` pseudonymised, each id as
    /// `pseudonym(id)` (its keyed hash, see the API's pseudonymisation): when `params` holds
    /// `id_param`, the rows to erase are those of the pseudonyms, and of the ids as given (rows
    /// written before the game pseudonymised).
    pub fn with_pseudonyms(mut self, params: &[String], pseudonym: impl Fn(&str) -> String) -> Self {
        if params.contains(&self.id_param) {
            self.pseudonyms = self.players.iter().map(|id| pseudonym(id)).collect();
        }
        self
    }

    /// Every value that marks a player's rows: the ids and their pseudonyms.
    fn ids(&self) -> impl Iterator<Item = String> + '_ {
        self.players.iter().chain(&self.pseudonyms).cloned()
    }

    /// One request for every player of `requests` that share its game and parameter with the
    /// first: waiting requests are erased in one pass over the tables, not one pass each. The
    /// requests it took, by index, come with it; the others are left for another merge.
    pub fn merged(requests: &[&ErasureRequest]) -> Option<(Self, Vec<usize>)> {
        let first = requests.first()?;
        let mut merged = (*first).clone();
        let mut took = vec![0];
        for (i, other) in requests.iter().enumerate().skip(1) {
            if other.game == first.game && other.id_param == first.id_param {
                merged.players.extend(other.players.iter().cloned());
                merged.pseudonyms.extend(other.pseudonyms.iter().cloned());
                took.push(i);
            }
        }
        merged.players.sort();
        merged.players.dedup();
        merged.pseudonyms.sort();
        merged.pseudonyms.dedup();
        Some((merged, took))
    }

    /// The request in the JSON `bytes` of `source_name`.
    pub fn from_json(source_name: &str, bytes: &[u8]) -> Result<Self, ErasureError> {
        let request: Self = serde_json::from_slice(bytes).map_err(|e| ErasureError::Request {
            source_name: source_name.to_owned(),
            reason: e.to_string(),
        })?;
        Self::new(source_name, request.game, request.players, request.id_param)
    }

    /// The rows of `game_events` it erases: of the game (or of none), whose parameter is an id or
    /// whose extra parameters name one.
    fn events(&self) -> Erasure {
        Erasure::new(self.ids())
            .equals(format!("{}.{}", game_events::EVENT_PARAMS, self.id_param))
            .mentions(game_events::batch::EXTRA_PARAMS)
            .within(game_events::GAME_ID, self.game.clone())
    }

    /// The rows of `game_events_rejects` (and parked records) it erases: whose partition key is
    /// an id or whose raw record names one. Rejects have no game column.
    fn records(&self) -> Erasure {
        Erasure::new(self.ids()).equals("partitionKey").mentions("data")
    }
}

/// Where the game's data is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErasureTargets {
    /// The `game_events` table.
    pub events_table: String,
    /// The rejects table, if there is one.
    pub rejects_table: Option<String>,
    /// The folder of parked records, if any.
    pub parked: Option<String>,
}

impl ErasureTargets {
    /// The game tables of `tables` (the rejects table included), and the parked records in
    /// `parked`.
    pub fn of(tables: Config, parked: Option<String>) -> Self {
        Self {
            events_table: tables.events_table,
            rejects_table: Some(tables.rejects_table),
            parked,
        }
    }
}

/// What one table's erasure did.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TableErasure {
    /// Staged links committed first, so that their rows are erased too.
    pub staged_links_committed: usize,
    /// The rows removed and the files rewritten.
    pub erasure: ErasureReport,
    /// The files deleted, those kept (and why), and the scan after.
    pub purge: Purge,
}

/// What the parked records held.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ParkedErasure {
    /// The folder.
    pub folder: String,
    /// Objects read.
    pub objects_read: usize,
    /// Objects written again without the players' records.
    pub objects_rewritten: Vec<String>,
    /// Objects deleted: they held only the players' records.
    pub objects_deleted: Vec<String>,
    /// Records removed.
    pub records_removed: usize,
    /// Objects that still name a player after the erasure (none, unless one was parked meanwhile).
    pub objects_still_naming: Vec<String>,
    /// The ids found in the records removed (never written out).
    #[serde(skip)]
    pub ids_found: BTreeSet<String>,
}

/// The erasure receipt: what was asked, what was done, and the proof. It names the players only
/// by SHA-256: the receipt is kept, the ids are not.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ErasureReceipt {
    /// When it started (RFC 3339, UTC).
    pub started_at: String,
    /// When it ended.
    pub finished_at: String,
    /// The game.
    pub game: String,
    /// The parameter holding the ids.
    pub id_param: String,
    /// SHA-256 of each id, in hex.
    pub players_sha256: Vec<String>,
    /// Per table, by location.
    pub tables: BTreeMap<String, TableErasure>,
    /// The parked records.
    pub parked: Option<ParkedErasure>,
    /// Rows and parked records of the players found (and removed) by this erasure: of every
    /// request it took at once (`mergedRequests`), or 0 when none held this request's ids.
    pub found: u64,
    /// The other requests for the same game erased in the same pass (their players are not
    /// named here).
    pub merged_requests: usize,
    /// No Parquet file under any table's folder holds a row of the players, no parked record
    /// names them, and the erasure found something to remove: an erasure that matched nothing
    /// (ids of another game, of the wrong parameter, or raw ids of a game that pseudonymises
    /// them) proves nothing, and is not verified.
    pub verified: bool,
    /// Why it is not verified, when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unverified_because: Option<String>,
    /// What lakelog cannot erase itself (docs/privacy.md).
    pub not_covered: Vec<&'static str>,
    /// The ids (and pseudonyms) found in what was removed (never written out).
    #[serde(skip)]
    ids_found: BTreeSet<String>,
}

impl ErasureReceipt {
    /// The receipt of `request`, one of `merged_requests + 1` erased by the erasure of this
    /// receipt: its players only, and verified only if it held one of them.
    pub fn of_request(&self, request: &ErasureRequest, merged_requests: usize) -> Self {
        let mut receipt = self.clone();
        receipt.players_sha256 = request.players.iter().map(|p| sha256_hex(p)).collect();
        receipt.merged_requests = merged_requests;
        let matched = request.ids().any(|id| self.ids_found.contains(&id));
        if !matched {
            receipt.found = 0;
        }
        if receipt.unverified_because.is_none() && !matched {
            receipt.unverified_because = Some(format!(
                "no row of game {} held these ids in {}: check the game, the parameter, and whether the game \
                 pseudonymises it (then its key is needed)",
                request.game, request.id_param
            ));
        }
        if let Some(why) = &receipt.unverified_because {
            warn!(game = %request.game, why, "erasure not verified");
        }
        receipt.verified = receipt.unverified_because.is_none();
        receipt
    }
}

/// The most committer passes an erasure runs before it erases: enough for a backlog of
/// `MAX_LINKS_PER_COMMIT` links each.
const COMMIT_PASSES: usize = 10;

/// Commits what the writers staged, then erases and purges `erasure`'s rows of the table at
/// `uri`, leaving readers of older versions `grace` first.
async fn forget_in(
    uri: &str,
    storage: &StorageConfig,
    erasure: &Erasure,
    grace: Duration,
) -> Result<TableErasure, ErasureError> {
    let mut table = Table::open(uri, storage).await?;
    let retry = Retry::default();
    let mut staged_links_committed = 0;
    // The running committer may commit the same links first: its commit moves the streams, and
    // this one then stops at its guard and looks again.
    // Bounded: links that wait for one that never comes (a stranded stream) are left, their
    // files kept by the purge, and the receipt is then not verified.
    let mut conflicts = 0;
    for _ in 0..COMMIT_PASSES {
        match table.commit_staged(lake::staging::MAX_LINKS_PER_COMMIT, &retry).await {
            Ok(committed) => {
                staged_links_committed += committed.links;
                if committed.left == 0 || committed.links == 0 {
                    break;
                }
            }
            Err(LakeError::Conflict { .. }) if conflicts < 10 => conflicts += 1,
            Err(e) => return Err(e.into()),
        }
    }
    let report = table.erase(erasure, &retry).await?;
    if !grace.is_zero() && report.version.is_some() {
        info!(
            table = uri,
            rows = report.rows_removed,
            seconds = grace.as_secs(),
            "rows erased; purging after the readers' grace"
        );
        tokio::time::sleep(grace).await;
    }
    let purge = table.purge(erasure).await?;
    Ok(TableErasure {
        staged_links_committed,
        erasure: report,
        purge,
    })
}

/// Whether a Kinesis record is of `erasure`'s players: its data names one, or its partition key
/// is one.
fn names(erasure: &Erasure, record: &aws_lambda_events::event::kinesis::KinesisRecord) -> bool {
    erasure.mentioned_in(&record.data) || erasure.ids().contains(record.partition_key.as_str())
}

/// Reads the object `name` of parked records.
async fn parked(folder: &Folder, name: &str) -> Result<Parked, ErasureError> {
    let bytes = folder.get(name).await?;
    serde_json::from_slice(&bytes).map_err(|e| ErasureError::Parked {
        object: folder.object_uri(name),
        reason: e.to_string(),
    })
}

/// Removes the records of `erasure`'s players from every object of parked records.
async fn forget_parked(folder: &Folder, erasure: &Erasure) -> Result<ParkedErasure, ErasureError> {
    let mut receipt = ParkedErasure {
        folder: folder.uri().to_owned(),
        ..ParkedErasure::default()
    };
    for name in folder.list().await? {
        let mut object = parked(folder, &name).await?;
        receipt.objects_read += 1;
        let before = object.records.len();
        let (removed_records, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut object.records)
            .into_iter()
            .partition(|r| names(erasure, &r.kinesis));
        object.records = kept;
        let removed = before - object.records.len();
        if removed == 0 {
            continue;
        }
        receipt.records_removed += removed;
        for record in removed_records {
            if erasure.ids().contains(record.kinesis.partition_key.as_str()) {
                receipt.ids_found.insert(record.kinesis.partition_key.clone());
            }
            receipt.ids_found.extend(
                erasure
                    .ids_mentioned_in(&record.kinesis.data)
                    .into_iter()
                    .map(str::to_owned),
            );
        }
        if object.records.is_empty() {
            folder.delete(&name).await?;
            receipt.objects_deleted.push(folder.object_uri(&name));
        } else {
            let bytes = serde_json::to_vec(&object).map_err(|e| ErasureError::Parked {
                object: folder.object_uri(&name),
                reason: e.to_string(),
            })?;
            folder.put(&name, bytes).await?;
            receipt.objects_rewritten.push(folder.object_uri(&name));
        }
    }
    for name in folder.list().await? {
        if parked(folder, &name)
            .await?
            .records
            .iter()
            .any(|r| names(erasure, &r.kinesis))
        {
            receipt.objects_still_naming.push(folder.object_uri(&name));
        }
    }
    Ok(receipt)
}

fn sha256_hex(text: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Erases `request`'s players from `targets` (see the module's documentation), leaving readers
/// of the older versions of `game_events` `reader_grace` before its files are deleted.
pub async fn forget(
    targets: &ErasureTargets,
    storage: &StorageConfig,
    request: &ErasureRequest,
    reader_grace: Duration,
) -> Result<ErasureReceipt, ErasureError> {
    Ok(forget_merged(targets, storage, request, reader_grace)
        .await?
        .of_request(request, 0))
}

/// [`forget`] of a request [`ErasureRequest::merged`] from several: its receipt names every
/// player, and is verified only as far as no file holds one; [`ErasureReceipt::of_request`] gives
/// each request's, verified only if its own ids were found.
pub async fn forget_merged(
    targets: &ErasureTargets,
    storage: &StorageConfig,
    request: &ErasureRequest,
    reader_grace: Duration,
) -> Result<ErasureReceipt, ErasureError> {
    let started_at = chrono::Utc::now();
    let mut tables = BTreeMap::new();
    tables.insert(
        targets.events_table.clone(),
        forget_in(&targets.events_table, storage, &request.events(), reader_grace).await?,
    );
    if let Some(uri) = &targets.rejects_table {
        // No rejects table yet: no record was ever rejected.
        match forget_in(uri, storage, &request.records(), Duration::ZERO).await {
            Ok(done) => {
                tables.insert(uri.clone(), done);
            }
            Err(ErasureError::Lake(e)) if e.is_not_a_table() => {}
            Err(e) => return Err(e),
        }
    }
    let parked = match &targets.parked {
        Some(uri) => Some(forget_parked(&Folder::open(uri, storage)?, &request.records()).await?),
        None => None,
    };
    let found = tables.values().map(|t| t.erasure.rows_removed).sum::<u64>()
        + parked.as_ref().map_or(0, |p| p.records_removed as u64);
    let ids_found: BTreeSet<String> = tables
        .values()
        .flat_map(|t| t.erasure.ids_found.iter().chain(&t.purge.ids_found))
        .chain(parked.iter().flat_map(|p| p.ids_found.iter()))
        .cloned()
        .collect();
    let holding = tables.values().all(|t| t.purge.after.holding.is_empty())
        && parked.as_ref().is_none_or(|p| p.objects_still_naming.is_empty());
    // Whether it found anything of each request's players is [`ErasureReceipt::of_request`]'s.
    let unverified_because =
        (!holding).then(|| "files or parked records still hold the players: run the erasure again".to_owned());
    let verified = unverified_because.is_none();
    Ok(ErasureReceipt {
        started_at: started_at.to_rfc3339(),
        finished_at: chrono::Utc::now().to_rfc3339(),
        game: request.game.clone(),
        id_param: request.id_param.clone(),
        players_sha256: request.players.iter().map(|p| sha256_hex(p)).collect(),
        tables,
        parked,
        found,
        merged_requests: 0,
        verified,
        unverified_because,
        not_covered: vec![
            "records still in the Kinesis stream, until its retention (GameEventsRetentionHours) ends",
            "the tables' logs (_delta_log): each file's smallest and largest id, until log cleanup (30 days)",
            "the functions' CloudWatch logs, until their retention ends",
            "copies outside the tables' folders (exports, Athena query results)",
        ],
        ids_found,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_checked_and_name_where_they_came_from() {
        let ok = ErasureRequest::from_json("r.json", br#"{"game":"g","players":[" b","a","a",""]}"#).unwrap();
        assert_eq!(
            (ok.players.as_slice(), ok.id_param.as_str()),
            (["a".to_owned(), "b".to_owned()].as_slice(), "device_id")
        );
        for (json, says) in [
            (r#"{"game":"g","players":[]}"#, "no player ids"),
            (r#"{"game":"","players":["a"]}"#, "no game"),
            (r#"{"game":"g","players":["a"],"idParam":"a.b"}"#, "idParam"),
            (r#"{"game":"g","players":["a"],"other":1}"#, "unknown field"),
        ] {
            let e = ErasureRequest::from_json("requests/r.json", json.as_bytes())
                .unwrap_err()
                .to_string();
            assert!(e.contains("requests/r.json") && e.contains(says), "{e}");
        }
    }

    #[test]
    fn receipts_name_ids_by_hash() {
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
