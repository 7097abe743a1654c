//! The storage-class advisor: for one dataset, at what age its data can move to S3 Standard-IA,
//! Glacier Instant Retrieval, and then Glacier Flexible Retrieval or Glacier Deep Archive, or
//! whether S3 Intelligent-Tiering does better ([`TieringEstimate`]), and what that saves per
//! month; and whether its old data could expire ([`expiration`]).
//!
//! The inputs are what the access logs show (see [`super`] for the queries):
//!
//! * the objects of the dataset at the end of the report (keys seen in the logs, less those
//!   deleted or expired since their last write), each with its size (the largest `object_size`
//!   logged for the key) and its age (from the date in the key, else from its first write seen);
//!   objects already moved by a lifecycle transition are left out;
//! * the reads of the report's range, by the age of the data they read, with the bytes retrieved
//!   (`bytes_sent`, or the object size for the source of a copy).
//!
//! A plan gives each class an age `T` (days after creation, as lifecycle rules count): objects in
//! `[T, next T)` are in that class. Its monthly saving is, per class, the storage price difference
//! on the objects of that age band, less the Glacier per-object overhead, less what the reads of
//! that band would cost there (retrieval per GB and the difference in GET prices), scaled from
//! the range to 30 days; less the transitions of the objects written per month. Objects under
//! 128 KiB are never moved (S3 Lifecycle's default minimum transition size). A plan must keep to
//! S3's rules: Standard-IA no sooner than 30 days, and each class kept at least its minimum
//! storage duration before the next transition, so no early-deletion charge arises. The archive
//! classes (Glacier Flexible Retrieval, Deep Archive: one of them, last) are only proposed from an
//! age that no read reached in the range, since a GET of an archived object fails until it is
//! restored: it would hurt its users; and never for the files of a table format (Delta Lake,
//! Iceberg, Hudi), whose readers open any of them. Deep Archive is tried only when the price table
//! has it. The Intelligent-Tiering plans are tried after these, when the price table has the
//! class. The advisor proposes the plan that saves the most, if any saves anything.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Value, json};

use super::prices::{ClassPrices, PriceTable};

/// Bytes S3 bills as one GB.
pub(super) const GB: f64 = (1u64 << 30) as f64;

/// S3 Lifecycle does not transition objects smaller than this (its default since September 2024).
pub(super) const MIN_TRANSITION_BYTES: i64 = 128 * 1024;

/// Days of reads scaled to one month.
pub(super) const MONTH_DAYS: f64 = 30.0;

/// The youngest age S3 allows for a transition to Standard-IA (and One Zone-IA).
pub(super) const STANDARD_IA_MIN_DAYS: u32 = 30;

/// Transition ages the advisor tries, in days.
pub(super) const CANDIDATE_DAYS: [u32; 12] = [1, 7, 14, 30, 60, 90, 120, 180, 270, 365, 540, 730];

/// The classes the advisor moves data to, coldest last.
pub(super) const CLASSES: [&str; 4] = ["STANDARD_IA", "GLACIER_IR", "GLACIER", "DEEP_ARCHIVE"];

/// S3's storage classes, as S3 Inventory and lifecycle rules name them.
pub(super) const STORAGE_CLASSES: [&str; 11] = [
    "STANDARD",
    "REDUCED_REDUNDANCY",
    "STANDARD_IA",
    "ONEZONE_IA",
    "INTELLIGENT_TIERING",
    "GLACIER_IR",
    "GLACIER",
    "DEEP_ARCHIVE",
    "OUTPOSTS",
    "SNOW",
    "EXPRESS_ONEZONE",
];

/// `name` as one of [`STORAGE_CLASSES`], if it is one.
pub(super) fn storage_class(name: &str) -> Option<&'static str> {
    STORAGE_CLASSES.into_iter().find(|c| *c == name)
}

/// The classes of [`CLASSES`] whose objects must be restored before a GET.
pub(super) const ARCHIVE_CLASSES: [&str; 2] = ["GLACIER", "DEEP_ARCHIVE"];

/// Reads of one dataset of one age.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ReadsAt {
    /// Age of the data read, in days; `None` when unknown.
    pub age: Option<i64>,
    /// Whether the object read is large enough to be moved (at least 128 KiB, or of unknown size).
    pub movable: bool,
    /// Reads.
    pub reads: u64,
    /// Bytes retrieved by them.
    pub bytes: u64,
}

/// Objects of one dataset of one age at the end of the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredAt {
    /// Age in days; `None` when unknown.
    pub age: Option<i64>,
    /// Whether a lifecycle transition already moved them out of S3 Standard.
    pub moved: bool,
    /// The class they are in, when they are out of S3 Standard and an S3 Inventory names it.
    pub class: Option<&'static str>,
    /// Whether they are large enough to be moved (at least 128 KiB).
    pub movable: bool,
    /// Objects.
    pub objects: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// What the advisor knows of one dataset.
#[derive(Debug, Clone, Default)]
pub(super) struct DatasetFacts {
    /// Reads in the range, by age.
    pub reads: Vec<ReadsAt>,
    /// Objects at the end of the range, by age.
    pub stored: Vec<StoredAt>,
    /// Writes of movable objects in the range.
    pub movable_writes: u64,
    /// Days the range spans (at least 1).
    pub range_days: u32,
    /// The table format whose files are under the prefix (`Delta Lake`, `Apache Iceberg`, `Apache
    /// Hudi`), if any: its readers open any file without warning, so no class that needs a
    /// restore before a read is proposed.
    pub table_format: Option<&'static str>,
    /// Each requester's oldest read, in days of age of the data read (reads of known age only).
    pub oldest_reads: Vec<ReaderAge>,
}

/// The oldest data one requester read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReaderAge {
    /// The requester.
    pub requester: String,
    /// The age of the oldest data it read, in days.
    pub oldest_days: i64,
}

/// A proposal to expire (delete) a dataset's objects from some age on, because no reader of the
/// range read data that old. It is not in the lifecycle files: deleting data is for its owner
/// to decide.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Expiration {
    /// Objects older than this many days would expire.
    pub days: i64,
    /// The oldest data read in the range, in days; `None` when nothing was read.
    pub oldest_read_days: Option<i64>,
    /// Days added to that age: a quarter of it, at least 7 days.
    pub margin_days: i64,
    /// The readers that read the oldest data, oldest first (at most five).
    pub readers: Vec<ReaderAge>,
    /// Objects older than `days` now.
    pub objects: u64,
    /// Their bytes.
    pub bytes: u64,
    /// What storing them costs a month: in the class the recommended transitions put them in, or,
    /// for objects already out of S3 Standard, in their class when an S3 Inventory names it
    /// (else they are not counted).
    pub monthly_saving: f64,
    /// The lifecycle rule that would do it, to merge by hand.
    pub rule: Value,
}

/// An S3 Intelligent-Tiering plan: a lifecycle rule moves the dataset's objects of at least
/// 128 KiB into the class on their first day; S3 then moves each object to its infrequent tier
/// after 30 days without access and to its archive instant tier after 90, and back on a read, for
/// a monitoring fee per object, without retrieval charges. A bucket's Intelligent-Tiering
/// configuration can also turn on one opt-in archive tier for the prefix (`ARCHIVE_ACCESS`,
/// `DEEP_ARCHIVE_ACCESS`) after some days without access; objects there must be restored before a
/// GET (hours), so, like the archive classes, it is only planned from an age no read reached in
/// the range, and never for the files of a table format.
///
/// The figures age each object from its last write (the logs' ages) and count each read of data
/// past the first tier as warming that many bytes back to the frequent tier for a month, at most
/// undoing the tier's whole saving: exact for data read once at most, a bound otherwise.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TieringEstimate {
    /// The opt-in archive tier the plan turns on; `None`: the automatic tiers only.
    pub archive_tier: Option<ArchiveAccess>,
    /// Objects it would monitor (at least 128 KiB; smaller ones are not monitored and not moved).
    pub monitored_objects: u64,
    /// Bytes in each tier as the objects' ages put them: frequent, infrequent, archive instant,
    /// then the archive tier if any.
    pub tier_bytes: Vec<u64>,
    /// The monitoring fee a month.
    pub monthly_monitoring_fee: f64,
    /// What the reads of older data cost by warming it back, a month.
    pub monthly_rewarming_cost: f64,
    /// Transitions into the class of the objects written per month.
    pub monthly_transition_cost: f64,
    /// Net saving a month against S3 Standard.
    pub monthly_saving: f64,
    /// Transitions of the objects there now, once.
    pub one_time_transition_cost: f64,
    /// The Intelligent-Tiering configuration that turns the archive tier on for the prefix, ready
    /// for `aws s3api put-bucket-intelligent-tiering-configuration`; `None` without an archive
    /// tier or for the bucket's root.
    pub configuration: Option<Value>,
}

/// The opt-in archive tier of an Intelligent-Tiering plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArchiveAccess {
    /// The tier, as in an Intelligent-Tiering configuration (`ARCHIVE_ACCESS`, ...).
    pub access_tier: String,
    /// Days without access after which objects move there.
    pub days: u32,
    /// How long a restore takes before a GET can read an object there.
    pub access_time: String,
    /// Its storage price, per GB-month.
    pub storage_gb_month: f64,
}

/// The class name of S3 Intelligent-Tiering in lifecycle rules and price tables.
pub(super) const INTELLIGENT_TIERING: &str = "INTELLIGENT_TIERING";

/// The age at which the lifecycle rule of an Intelligent-Tiering plan moves objects there: its
/// first day (S3 accepts 0 days for this class), so its own tiers do the rest.
pub(super) const INTELLIGENT_TIERING_AFTER_DAYS: u32 = 0;

/// The best Intelligent-Tiering plan for `facts` (automatic tiers only, or with one of the
/// archive tiers after one of [`CANDIDATE_DAYS`] that S3 accepts), with its outcome, when the
/// price table has the class and the dataset has objects of known age to move: the first plan of
/// [`tiering_plans`] that saves the most.
fn best_tiering(dataset: &str, facts: &DatasetFacts, prices: &PriceTable) -> Option<(Outcome, TieringEstimate)> {
    let mut best: Option<(Outcome, TieringEstimate)> = None;
    for archive in tiering_plans(prices) {
        if let Some(found) = evaluate_tiering(archive, dataset, facts, prices)
            && best
                .as_ref()
                .is_none_or(|(b, _)| found.0.monthly_saving > b.monthly_saving + 1e-12)
        {
            best = Some(found);
        }
    }
    best
}

/// Whether data of `from` days and older may go where a GET needs a restore first (an archive
/// class or an Intelligent-Tiering archive tier): not for a table format's files, whose readers
/// open any file without warning, nor when a read (of any size) reached that age, or read data of
/// unknown age (which the move would take too).
fn restores_allowed_from(facts: &DatasetFacts, from: i64) -> bool {
    facts.table_format.is_none()
        && !facts
            .reads
            .iter()
            .any(|r| r.reads > 0 && r.age.is_none_or(|a| a >= from))
}

/// The Intelligent-Tiering plans to try, as the opt-in archive tier of each (index in the class's
/// `archive_tiers`, days without access): none first, then each tier from its fewest days.
fn tiering_plans(prices: &PriceTable) -> Vec<Option<(usize, u32)>> {
    let Some(it) = prices.classes.get(INTELLIGENT_TIERING) else {
        return Vec::new();
    };
    let mut plans = vec![None];
    for (k, tier) in it.archive_tiers.iter().enumerate() {
        plans.extend(
            CANDIDATE_DAYS
                .iter()
                .filter(|&&d| d >= tier.min_days && d <= tier.max_days)
                .map(|&d| Some((k, d))),
        );
    }
    plans
}

/// The slot (frequent, then the automatic tiers in the price table's order, then the archive
/// tier) and the price of an object of Intelligent-Tiering `days` after its last access.
fn tier_of(it: &ClassPrices, archive: Option<&ArchiveAccess>, days: i64) -> (usize, f64) {
    match archive {
        Some(a) if days >= i64::from(a.days) => (it.tiers.len() + 1, a.storage_gb_month),
        _ => it
            .tiers
            .iter()
            .enumerate()
            .filter(|(_, t)| days >= i64::from(t.after_days))
            .max_by_key(|(_, t)| t.after_days)
            .map_or((0, it.storage_gb_month), |(k, t)| (k + 1, t.storage_gb_month)),
    }
}

/// The outcome of the Intelligent-Tiering plan with the opt-in `archive` tier, or `None` when
/// there is nothing to move, or the archive tier would hold data still read (or of unknown age),
/// or a table format's files.
fn evaluate_tiering(
    archive: Option<(usize, u32)>,
    dataset: &str,
    facts: &DatasetFacts,
    prices: &PriceTable,
) -> Option<(Outcome, TieringEstimate)> {
    let it = prices.classes.get(INTELLIGENT_TIERING)?;
    let standard = prices.class("STANDARD");
    let archive_tier = match archive {
        Some((k, days)) => {
            let tier = it.archive_tiers.get(k)?;
            Some(ArchiveAccess {
                access_tier: tier.access_tier.clone(),
                days,
                access_time: tier.access_time.clone(),
                storage_gb_month: tier.storage_gb_month,
            })
        }
        None => None,
    };
    if archive_tier
        .as_ref()
        .is_some_and(|a| !restores_allowed_from(facts, i64::from(a.days)))
    {
        return None;
    }
    let tier = |days: i64| tier_of(it, archive_tier.as_ref(), days);
    let per_month = MONTH_DAYS / f64::from(facts.range_days.max(1));
    let slots = it.tiers.len() + 1 + usize::from(archive_tier.is_some());
    let mut tier_bytes = vec![0u64; slots];
    let mut tier_saving = vec![0.0; slots];
    let mut objects = 0u64;
    for s in facts.stored.iter().filter(|s| !s.moved && s.movable) {
        let Some(age) = s.age else { continue };
        let (k, price) = tier(age);
        tier_bytes[k] += s.bytes;
        objects += s.objects;
        tier_saving[k] += s.bytes as f64 / GB * (standard.storage_gb_month - price);
    }
    if objects == 0 {
        return None;
    }
    // Reads warm data back into the frequent tier: at most all of a tier, whatever the reads.
    let mut tier_rewarming = vec![0.0; slots];
    let mut reads = 0u64;
    for r in facts.reads.iter().filter(|r| r.movable) {
        let Some(age) = r.age else { continue };
        let (k, price) = tier(age);
        tier_rewarming[k] += r.bytes as f64 / GB * (it.storage_gb_month - price) * per_month;
        reads += r.reads;
    }
    let storage: f64 = tier_saving.iter().sum();
    let rewarming: f64 = tier_rewarming
        .iter()
        .zip(&tier_saving)
        .map(|(warm, saved)| warm.min(*saved))
        .sum();
    let requests = reads as f64 / 1000.0 * (it.get_per_1000 - standard.get_per_1000) * per_month;
    let monitoring = objects as f64 / 1000.0 * it.monitoring_per_1000;
    let transitions = facts.movable_writes as f64 * per_month * it.transition_per_1000 / 1000.0;
    let bytes = tier_bytes.iter().sum();
    let monthly_saving = storage - rewarming - requests - monitoring - transitions;
    let one_time = objects as f64 / 1000.0 * it.transition_per_1000;
    let configuration = match &archive_tier {
        Some(a) if !dataset.is_empty() => Some(json!({
            "Id": tiering_id(dataset),
            "Filter": {"Prefix": dataset},
            "Status": "Enabled",
            "Tierings": [{"Days": a.days, "AccessTier": a.access_tier}],
        })),
        _ => None,
    };
    let outcome = Outcome {
        transitions: vec![Transition {
            storage_class: INTELLIGENT_TIERING.to_owned(),
            days: INTELLIGENT_TIERING_AFTER_DAYS,
            objects,
            bytes,
            monthly_storage_saving: storage - monitoring,
            monthly_retrieval_cost: rewarming,
            monthly_request_cost: requests,
        }],
        monthly_transition_cost: transitions,
        one_time_transition_cost: one_time,
        monthly_saving,
    };
    let estimate = TieringEstimate {
        archive_tier,
        monitored_objects: objects,
        tier_bytes,
        monthly_monitoring_fee: monitoring,
        monthly_rewarming_cost: rewarming,
        monthly_transition_cost: transitions,
        monthly_saving,
        one_time_transition_cost: one_time,
        configuration,
    };
    Some((outcome, estimate))
}

/// The least margin an expiration keeps beyond the oldest data read.
pub(super) const MIN_EXPIRATION_MARGIN_DAYS: i64 = 7;

/// The expiration proposal for a dataset whose transitions are `transitions` (with `tiering`, the
/// Intelligent-Tiering plan, when they are its transition): objects older than the oldest data
/// any reader read, plus a margin, or, when nothing was read in the range, older than the range. None when that would delete nothing, when the age of some reads is unknown,
/// or for the files of a table format (expiring them breaks the table).
pub(super) fn expiration(
    bucket: &str,
    dataset: &str,
    facts: &DatasetFacts,
    transitions: &[Transition],
    tiering: Option<&TieringEstimate>,
    prices: &PriceTable,
) -> Option<Expiration> {
    if facts.table_format.is_some() || facts.reads.iter().any(|r| r.age.is_none()) || dataset.is_empty() {
        return None;
    }
    let mut readers = facts.oldest_reads.clone();
    readers.sort_by(|a, b| b.oldest_days.cmp(&a.oldest_days).then(a.requester.cmp(&b.requester)));
    let oldest = facts.reads.iter().filter_map(|r| r.age).max();
    let (days, margin_days) = match oldest {
        Some(oldest) => {
            let margin = (oldest / 4).max(MIN_EXPIRATION_MARGIN_DAYS);
            (oldest + margin, margin)
        }
        None => (i64::from(facts.range_days.max(1)), 0),
    };
    let (mut objects, mut bytes, mut monthly_saving) = (0u64, 0u64, 0.0);
    for s in facts.stored.iter().filter(|s| s.age.is_some_and(|a| a > days)) {
        objects += s.objects;
        bytes += s.bytes;
        let age = s.age.unwrap_or(0);
        let price = if s.moved {
            // Already in an Intelligent-Tiering tier: at least as cold as its age puts it.
            s.class.and_then(|class| {
                let p = prices.classes.get(class)?;
                Some(match class {
                    INTELLIGENT_TIERING => tier_of(p, None, age).1,
                    _ => p.storage_gb_month,
                })
            })
        } else {
            let class = transitions
                .iter()
                .filter(|t| i64::from(t.days) <= age && s.movable)
                .map(|t| t.storage_class.as_str())
                .next_back()
                .unwrap_or("STANDARD");
            Some(match (class, tiering) {
                (INTELLIGENT_TIERING, Some(it)) => tier_of(prices.class(class), it.archive_tier.as_ref(), age).1,
                _ => prices.class(class).storage_gb_month,
            })
        };
        monthly_saving += s.bytes as f64 / GB * price.unwrap_or(0.0);
    }
    if objects == 0 {
        return None;
    }
    let top = readers.iter().take(5).cloned().collect();
    Some(Expiration {
        days,
        oldest_read_days: oldest,
        margin_days,
        readers: top,
        objects,
        bytes,
        monthly_saving,
        rule: json!({
            "ID": rule_id(&format!("expire-{bucket}"), dataset),
            "Filter": {"Prefix": dataset},
            "Status": "Enabled",
            "Expiration": {"Days": days},
        }),
    })
}

/// Directories that mark the files of a table format, as `(format, directory)`: a key of the
/// dataset with `/directory/` in it (or starting with `directory/`) is such a file.
pub(super) const TABLE_FORMATS: [(&str, &str); 3] = [
    ("Delta Lake", "_delta_log"),
    ("Apache Iceberg", "metadata"),
    ("Apache Hudi", ".hoodie"),
];

/// One recommended transition.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Transition {
    /// Storage class, as in lifecycle rules.
    pub storage_class: String,
    /// Days after creation.
    pub days: u32,
    /// Objects now in the age band this class would hold.
    pub objects: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Storage saved per month on them (price difference, less per-object overhead; for
    /// Intelligent-Tiering, its tiers' prices less its monitoring fee).
    pub monthly_storage_saving: f64,
    /// Retrieval charges per month for the reads observed in the band (for Intelligent-Tiering,
    /// what the reads cost by warming data back to its frequent tier).
    pub monthly_retrieval_cost: f64,
    /// Extra GET charges per month for those reads.
    pub monthly_request_cost: f64,
}

/// The advice for one dataset.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Advice {
    /// The bucket.
    pub bucket: String,
    /// The dataset's key prefix.
    pub dataset: String,
    /// Reads in the range.
    pub reads: u64,
    /// Reads of data whose age is unknown (no date in the key, no write seen before the read).
    pub reads_of_unknown_age: u64,
    /// Age in days from which at most the rare share of reads happen; `None` without reads of
    /// known age.
    pub rare_after_days: Option<i64>,
    /// Objects seen in the logs and still there at the end of the range.
    pub stored_objects: u64,
    /// Their bytes (largest `object_size` logged per key).
    pub stored_bytes: u64,
    /// Bytes of those objects whose age is unknown (not planned for).
    pub stored_bytes_of_unknown_age: u64,
    /// Bytes a lifecycle transition already moved out of S3 Standard (not planned for).
    pub already_moved_bytes: u64,
    /// The recommended transitions, youngest first; empty when none saves money.
    pub transitions: Vec<Transition>,
    /// Transitions of the objects written per month, per month.
    pub monthly_transition_cost: f64,
    /// Net saving per month: storage saved less retrieval, requests and transitions.
    pub monthly_saving: f64,
    /// Transitions of the objects there now, once.
    pub one_time_transition_cost: f64,
    /// The currency of the amounts.
    pub currency: String,
    /// Why this advice.
    pub reason: String,
    /// Where the stored objects' figures come from: an S3 Inventory (exact) or the access logs.
    pub stored_from: String,
    /// Whether to expire old objects: no reader read data that old.
    pub expiration: Option<Expiration>,
    /// What S3 Intelligent-Tiering would save instead of the transitions.
    pub intelligent_tiering: Option<TieringEstimate>,
    /// A lifecycle configuration with this dataset's rule, ready for
    /// `aws s3api put-bucket-lifecycle-configuration`; `None` without transitions.
    pub lifecycle: Option<Value>,
}

/// A candidate plan: the age of each class in [`CLASSES`], or `None` when it is skipped (at most
/// one of the archive classes).
type Plan = [Option<u32>; 4];

/// Evaluated plan.
#[derive(Debug, Clone)]
struct Outcome {
    transitions: Vec<Transition>,
    monthly_transition_cost: f64,
    one_time_transition_cost: f64,
    monthly_saving: f64,
}

/// The smallest age `A` such that reads of data aged `A` days or more are at most `rare_share`
/// of the reads of known age.
pub(super) fn rare_after(reads: &[ReadsAt], rare_share: f64) -> Option<i64> {
    let mut by_age: BTreeMap<i64, u64> = BTreeMap::new();
    for r in reads {
        if let Some(age) = r.age {
            *by_age.entry(age.max(0)).or_default() += r.reads;
        }
    }
    let total: u64 = by_age.values().sum();
    if total == 0 {
        return None;
    }
    let allowed = rare_share * total as f64;
    // The reads of data aged `A` or more only change at the ages seen: walking down from the
    // oldest, the last age whose tail is still rare gives `A` = the next younger age seen + 1.
    let ages: Vec<(i64, u64)> = by_age.into_iter().collect();
    let mut tail = 0u64;
    let mut first_rare = ages.len();
    for (k, &(_, n)) in ages.iter().enumerate().rev() {
        if (tail + n) as f64 > allowed {
            break;
        }
        tail += n;
        first_rare = k;
    }
    Some(match first_rare {
        0 => 0,
        k => ages[k - 1].0 + 1,
    })
}

/// The advice for one dataset.
pub(super) fn advise(
    bucket: &str,
    dataset: &str,
    facts: &DatasetFacts,
    prices: &PriceTable,
    rare_share: f64,
) -> Advice {
    let reads: u64 = facts.reads.iter().map(|r| r.reads).sum();
    let reads_of_unknown_age: u64 = facts.reads.iter().filter(|r| r.age.is_none()).map(|r| r.reads).sum();
    let stored_objects = facts.stored.iter().map(|s| s.objects).sum();
    let stored_bytes = facts.stored.iter().map(|s| s.bytes).sum();
    let stored_bytes_of_unknown_age = facts
        .stored
        .iter()
        .filter(|s| s.age.is_none() && !s.moved)
        .map(|s| s.bytes)
        .sum();
    let already_moved_bytes = facts.stored.iter().filter(|s| s.moved).map(|s| s.bytes).sum();
    let better = |outcome: &Outcome, best: &Option<Outcome>| match best {
        None => outcome.monthly_saving > 0.0,
        Some(b) => outcome.monthly_saving > b.monthly_saving + 1e-12,
    };
    let mut best: Option<Outcome> = None;
    let deep_archive = prices.classes.contains_key("DEEP_ARCHIVE");
    for plan in plans().into_iter().filter(|p| deep_archive || p[3].is_none()) {
        if let Some(outcome) = evaluate(&plan, facts, prices)
            && better(&outcome, &best)
        {
            best = Some(outcome);
        }
    }
    // Intelligent-Tiering is tried after the lifecycle plans: it wins only by saving more.
    let tiering = best_tiering(dataset, facts, prices);
    let mut tiering_chosen = false;
    if let Some((outcome, _)) = &tiering
        && better(outcome, &best)
    {
        best = Some(outcome.clone());
        tiering_chosen = true;
    }
    let intelligent_tiering = tiering.map(|(_, estimate)| estimate);
    let movable_known: u64 = facts
        .stored
        .iter()
        .filter(|s| s.age.is_some() && !s.moved && s.movable)
        .map(|s| s.bytes)
        .sum();
    let currency = prices.currency.clone();
    let (transitions, monthly_transition_cost, monthly_saving, one_time_transition_cost, reason) = match best {
        Some(outcome) => {
            let steps: Vec<String> = outcome
                .transitions
                .iter()
                .map(|t| format!("{} after {} days", t.storage_class, t.days))
                .collect();
            let reason = match intelligent_tiering.as_ref().filter(|_| tiering_chosen) {
                Some(it) => format!(
                    "{}{} saves {:.2} {currency} per month after its monitoring fee, the reads that warm data back and \
                     transition charges",
                    steps.join(", then "),
                    it.archive_tier.as_ref().map_or_else(
                        || " (its automatic tiers only)".to_owned(),
                        |a| format!(
                            ", with its {} tier after {} days without access (a restore takes {})",
                            a.access_tier, a.days, a.access_time
                        )
                    ),
                    outcome.monthly_saving
                ),
                None => format!(
                    "{} saves {:.2} {currency} per month after retrieval and transition charges",
                    steps.join(", then "),
                    outcome.monthly_saving
                ),
            };
            (
                outcome.transitions,
                outcome.monthly_transition_cost,
                outcome.monthly_saving,
                outcome.one_time_transition_cost,
                reason,
            )
        }
        None => {
            let reason = if stored_objects == 0 {
                "no object of this dataset was seen written or read in the logs".to_owned()
            } else if movable_known == 0 && stored_bytes_of_unknown_age > 0 {
                "the age of its objects is unknown: no date in their keys and no write seen in the logs".to_owned()
            } else if movable_known == 0 {
                "no object of at least 128 KiB in S3 Standard: lifecycle rules would not move any".to_owned()
            } else {
                "no transition saves money: the reads of older data would cost more in retrieval than the \
                 storage saved"
                    .to_owned()
            };
            (Vec::new(), 0.0, 0.0, 0.0, reason)
        }
    };
    let reason = match facts.table_format {
        Some(format) => format!(
            "{reason}; the prefix holds {format} files, whose readers open any file without a restore, so no \
             archive class (Glacier Flexible Retrieval, Deep Archive) nor Intelligent-Tiering archive tier is proposed"
        ),
        None => reason,
    };
    let reason = if reads_of_unknown_age > 0 {
        format!(
            "{reason}; {reads_of_unknown_age} reads of data of unknown age are not in the projection (and rule out \
             the archive classes)"
        )
    } else {
        reason
    };
    let lifecycle = lifecycle_configuration(bucket, dataset, &transitions);
    let reason = if lifecycle.is_none() && !transitions.is_empty() {
        format!(
            "{reason}; no lifecycle rule is given for the bucket's root, since a rule for the empty prefix \
             applies to every object of the bucket"
        )
    } else {
        reason
    };
    let chosen_tiering = intelligent_tiering.as_ref().filter(|_| tiering_chosen);
    let expiration = expiration(bucket, dataset, facts, &transitions, chosen_tiering, prices);
    Advice {
        bucket: bucket.to_owned(),
        dataset: dataset.to_owned(),
        reads,
        reads_of_unknown_age,
        rare_after_days: rare_after(&facts.reads, rare_share),
        stored_objects,
        stored_bytes,
        stored_bytes_of_unknown_age,
        already_moved_bytes,
        transitions,
        monthly_transition_cost,
        monthly_saving,
        one_time_transition_cost,
        currency,
        reason,
        stored_from: STORED_FROM_LOGS.to_owned(),
        expiration,
        intelligent_tiering,
        lifecycle,
    }
}

impl Advice {
    /// The Intelligent-Tiering archive tier the recommended plan turns on, if its transition is
    /// into Intelligent-Tiering.
    pub fn chosen_archive_tier(&self) -> Option<&ArchiveAccess> {
        self.chosen_tiering()?.archive_tier.as_ref()
    }

    /// The Intelligent-Tiering configuration to apply with the lifecycle rule, when the
    /// recommended plan turns on one of its archive tiers.
    pub fn intelligent_tiering_configuration(&self) -> Option<&Value> {
        self.chosen_tiering()?.configuration.as_ref()
    }

    fn chosen_tiering(&self) -> Option<&TieringEstimate> {
        let chosen = self.transitions.iter().any(|t| t.storage_class == INTELLIGENT_TIERING);
        self.intelligent_tiering.as_ref().filter(|_| chosen)
    }
}

/// [`Advice::stored_from`] when the figures come from the access logs.
pub(super) const STORED_FROM_LOGS: &str = "access logs (objects requests touched; a lower bound)";

/// Every plan, skipped classes included, in a fixed order (fewer transitions first).
fn plans() -> Vec<Plan> {
    let options = |class: usize| {
        let mut days: Vec<Option<u32>> = vec![None];
        days.extend(
            CANDIDATE_DAYS
                .iter()
                .filter(|&&d| class != 0 || d >= STANDARD_IA_MIN_DAYS)
                .map(|&d| Some(d)),
        );
        days
    };
    let mut plans = Vec::new();
    for ia in options(0) {
        for ir in options(1) {
            // The archive: none, Glacier Flexible Retrieval at some age, or Deep Archive.
            for glacier in options(2) {
                plans.push([ia, ir, glacier, None]);
            }
            for deep in options(3).into_iter().flatten() {
                plans.push([ia, ir, None, Some(deep)]);
            }
        }
    }
    plans.sort_by_key(|p| p.iter().filter(|d| d.is_some()).count());
    plans
}

/// The outcome of `plan`, or `None` if it breaks S3's rules or would archive data still read.
fn evaluate(plan: &Plan, facts: &DatasetFacts, prices: &PriceTable) -> Option<Outcome> {
    let steps: Vec<(usize, u32)> = plan.iter().enumerate().filter_map(|(i, d)| Some((i, (*d)?))).collect();
    if steps.is_empty() {
        return None;
    }
    for pair in steps.windows(2) {
        let ((a, da), (_, db)) = (pair[0], pair[1]);
        if db < da + prices.class(CLASSES[a]).minimum_days.max(1) {
            return None;
        }
    }
    let standard = prices.class("STANDARD");
    let per_month = MONTH_DAYS / f64::from(facts.range_days.max(1));
    let mut transitions = Vec::new();
    let mut monthly_saving = 0.0;
    let mut one_time = 0.0;
    let mut per_object_transition = 0.0;
    for (k, &(class, from)) in steps.iter().enumerate() {
        let until = steps.get(k + 1).map(|&(_, d)| i64::from(d));
        let in_band = |age: Option<i64>| age.is_some_and(|a| a >= i64::from(from) && until.is_none_or(|u| a < u));
        let p = prices.class(CLASSES[class]);
        let (mut objects, mut bytes) = (0u64, 0u64);
        for s in facts.stored.iter().filter(|s| !s.moved && s.movable && in_band(s.age)) {
            objects += s.objects;
            bytes += s.bytes;
        }
        let (mut reads, mut read_bytes) = (0u64, 0u64);
        for r in facts.reads.iter().filter(|r| r.movable && in_band(r.age)) {
            reads += r.reads;
            read_bytes += r.bytes;
        }
        // The archive class is the plan's last step: its band is every age from `from` on.
        if ARCHIVE_CLASSES.contains(&CLASSES[class]) && !restores_allowed_from(facts, i64::from(from)) {
            return None;
        }
        let storage = bytes as f64 / GB * (standard.storage_gb_month - p.storage_gb_month)
            - objects as f64
                * (p.overhead_bytes_in_class as f64 / GB * p.storage_gb_month
                    + p.overhead_bytes_in_standard as f64 / GB * standard.storage_gb_month);
        let retrieval = read_bytes as f64 / GB * p.retrieval_gb * per_month;
        let requests = reads as f64 / 1000.0 * (p.get_per_1000 - standard.get_per_1000) * per_month;
        monthly_saving += storage - retrieval - requests;
        one_time += objects as f64 / 1000.0 * p.transition_per_1000;
        per_object_transition += p.transition_per_1000 / 1000.0;
        transitions.push(Transition {
            storage_class: CLASSES[class].to_owned(),
            days: from,
            objects,
            bytes,
            monthly_storage_saving: storage,
            monthly_retrieval_cost: retrieval,
            monthly_request_cost: requests,
        });
    }
    let monthly_transition_cost = facts.movable_writes as f64 * per_month * per_object_transition;
    Some(Outcome {
        transitions,
        monthly_transition_cost,
        one_time_transition_cost: one_time,
        monthly_saving: monthly_saving - monthly_transition_cost,
    })
}

/// A lifecycle configuration with one rule moving the dataset's objects, or `None` without
/// transitions or for the bucket's root (a rule for the empty prefix covers the whole bucket).
pub(super) fn lifecycle_configuration(bucket: &str, dataset: &str, transitions: &[Transition]) -> Option<Value> {
    if transitions.is_empty() || dataset.is_empty() {
        return None;
    }
    Some(json!({ "Rules": [lifecycle_rule(bucket, dataset, transitions)] }))
}

/// One lifecycle rule for the dataset's prefix.
pub(super) fn lifecycle_rule(bucket: &str, dataset: &str, transitions: &[Transition]) -> Value {
    let steps: Vec<Value> = transitions
        .iter()
        .map(|t| json!({ "Days": t.days, "StorageClass": t.storage_class }))
        .collect();
    json!({
        "ID": rule_id(bucket, dataset),
        "Filter": { "Prefix": dataset },
        "Status": "Enabled",
        "Transitions": steps,
    })
}

/// A rule ID (at most 255 characters) naming the dataset.
fn rule_id(bucket: &str, dataset: &str) -> String {
    let id = format!("lakelog-{bucket}-{}", id_name(dataset));
    id.chars().take(255).collect()
}

/// The Id of a dataset's Intelligent-Tiering configuration (unique within its bucket; S3 takes at
/// most 64 characters).
fn tiering_id(dataset: &str) -> String {
    let id = format!("lakelog-{}", id_name(dataset));
    id.chars().take(64).collect()
}

/// A dataset's prefix as the name part of an Id: `/` and anything unusual made `-`.
fn id_name(dataset: &str) -> String {
    dataset
        .trim_end_matches('/')
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: u64 = 1 << 20;

    fn prices() -> PriceTable {
        PriceTable::default_table().unwrap()
    }

    /// A dataset written daily for `days` days, one object of `size` bytes a day, read in full
    /// `(age, reads per day)`.
    fn daily(days: i64, size: u64, reads: &[(i64, u64)]) -> DatasetFacts {
        DatasetFacts {
            stored: (0..days)
                .map(|age| StoredAt {
                    age: Some(age),
                    moved: false,
                    class: None,
                    movable: true,
                    objects: 1,
                    bytes: size,
                })
                .collect(),
            reads: reads
                .iter()
                .map(|&(age, per_day)| ReadsAt {
                    age: Some(age),
                    movable: true,
                    reads: per_day * days as u64,
                    bytes: per_day * days as u64 * size,
                })
                .collect(),
            movable_writes: days as u64,
            range_days: days as u32,
            table_format: None,
            oldest_reads: Vec::new(),
        }
    }

    /// `facts` with one more read, of data of unknown age.
    fn with_a_read_of_unknown_age(facts: &DatasetFacts) -> DatasetFacts {
        let mut unknown = facts.clone();
        unknown.reads.push(ReadsAt {
            age: None,
            movable: true,
            reads: 1,
            bytes: 1,
        });
        unknown
    }

    /// The default prices without Glacier Deep Archive, as a price table of an older shape.
    fn prices_without_deep_archive() -> PriceTable {
        let mut table = prices();
        table.classes.remove("DEEP_ARCHIVE");
        table
    }

    #[test]
    fn data_never_read_goes_to_deep_archive_early() {
        let facts = daily(365, 1024 * MB, &[]);
        let advice = advise("b", "exports/", &facts, &prices(), 0.05);
        let t = &advice.transitions[0];
        assert_eq!(
            (advice.transitions.len(), t.storage_class.as_str(), t.days),
            (1, "DEEP_ARCHIVE", 1)
        );
        // 364 GB at (0.023 - 0.00099), less 40 KB of overhead per object; 30 transitions a
        // month at 0.05 per 1000.
        let overhead = 364.0 * (32768.0 / GB * 0.00099 + 8192.0 / GB * 0.023);
        assert!((t.monthly_storage_saving - (364.0 * (0.023 - 0.00099) - overhead)).abs() < 1e-9);
        assert!((advice.monthly_transition_cost - 30.0 * 0.05 / 1000.0).abs() < 1e-12);
        assert!((advice.monthly_saving - (t.monthly_storage_saving - advice.monthly_transition_cost)).abs() < 1e-9);
        assert!((advice.one_time_transition_cost - 364.0 * 0.05 / 1000.0).abs() < 1e-12);
        let rule = &advice.lifecycle.as_ref().unwrap()["Rules"][0];
        assert_eq!(
            rule["Transitions"],
            json!([{ "Days": 1, "StorageClass": "DEEP_ARCHIVE" }])
        );
    }

    #[test]
    fn data_never_read_goes_to_glacier_early_without_deep_archive_prices() {
        let facts = daily(365, 1024 * MB, &[]);
        let advice = advise("b", "exports/", &facts, &prices_without_deep_archive(), 0.05);
        assert_eq!(advice.reads, 0);
        assert_eq!(advice.rare_after_days, None);
        let classes: Vec<(&str, u32)> = advice
            .transitions
            .iter()
            .map(|t| (t.storage_class.as_str(), t.days))
            .collect();
        assert_eq!(classes, [("GLACIER", 1)]);
        let t = &advice.transitions[0];
        assert_eq!(t.objects, 364);
        // 364 GB at (0.023 - 0.0036), less 40 KB of overhead per object.
        let overhead = 364.0 * (32768.0 / GB * 0.0036 + 8192.0 / GB * 0.023);
        assert!((t.monthly_storage_saving - (364.0 * (0.023 - 0.0036) - overhead)).abs() < 1e-9);
        // One object written a day: 30 transitions a month at 0.03 per 1000.
        assert!((advice.monthly_transition_cost - 30.0 * 0.03 / 1000.0).abs() < 1e-12);
        assert!((advice.monthly_saving - (t.monthly_storage_saving - advice.monthly_transition_cost)).abs() < 1e-9);
        assert!((advice.one_time_transition_cost - 364.0 * 0.03 / 1000.0).abs() < 1e-12);
        let rule = &advice.lifecycle.as_ref().unwrap()["Rules"][0];
        assert_eq!(rule["Filter"]["Prefix"], "exports/");
        assert_eq!(rule["Transitions"], json!([{ "Days": 1, "StorageClass": "GLACIER" }]));
        assert_eq!(rule["ID"], "lakelog-b-exports");
    }

    #[test]
    fn expiration_keeps_a_margin_beyond_the_oldest_read_and_names_its_readers() {
        // 365 daily objects of 1 GiB; analysts read data up to 20 days old, an auditor 40.
        let mut facts = daily(365, 1024 * MB, &[(0, 20), (20, 1), (40, 1)]);
        facts.oldest_reads = vec![
            ReaderAge {
                requester: "analyst".into(),
                oldest_days: 20,
            },
            ReaderAge {
                requester: "auditor".into(),
                oldest_days: 40,
            },
        ];
        let advice = advise("b", "events/", &facts, &prices(), 0.05);
        let e = advice.expiration.as_ref().unwrap();
        // 40 days plus a quarter of that: objects older than 50 days, 51..=364, expire.
        assert_eq!((e.days, e.margin_days, e.oldest_read_days), (50, 10, Some(40)));
        assert_eq!(e.readers[0].requester, "auditor");
        assert_eq!((e.objects, e.bytes), (314, 314 * 1024 * MB));
        // Their storage, each in the class the transitions give it at its age, to the cent.
        let mut expected = 0.0;
        for age in 51..365 {
            let class = advice
                .transitions
                .iter()
                .filter(|t| i64::from(t.days) <= age)
                .map(|t| t.storage_class.as_str())
                .next_back()
                .unwrap_or("STANDARD");
            expected += prices().class(class).storage_gb_month;
        }
        assert!(
            (e.monthly_saving - expected).abs() < 0.005,
            "{} vs {expected}",
            e.monthly_saving
        );
        assert_eq!(e.rule["Expiration"]["Days"], 50);
        assert_eq!(e.rule["Filter"]["Prefix"], "events/");
        assert_eq!(e.rule["ID"], "lakelog-expire-b-events");

        // Never read: everything older than the range would expire.
        let facts = daily(365, 1024 * MB, &[]);
        let mut short = facts.clone();
        short.range_days = 30;
        let e = advise("b", "tmp/", &short, &prices(), 0.05).expiration.unwrap();
        assert_eq!((e.days, e.margin_days, e.oldest_read_days), (30, 0, None));
        assert_eq!(e.objects, 334);
        assert!(e.readers.is_empty());

        // Never for a table's files, nor with reads of unknown age, nor with nothing to expire.
        let mut table = facts.clone();
        table.table_format = Some("Delta Lake");
        assert_eq!(advise("b", "t/", &table, &prices(), 0.05).expiration, None);
        let unknown = with_a_read_of_unknown_age(&facts);
        assert_eq!(advise("b", "u/", &unknown, &prices(), 0.05).expiration, None);
        // Objects already out of S3 Standard count at their class's price when it is known.
        let mut archived = facts.clone();
        archived.range_days = 30;
        for s in archived.stored.iter_mut().filter(|s| s.age.is_some_and(|a| a >= 300)) {
            s.moved = true;
            s.class = Some("DEEP_ARCHIVE");
        }
        let e = expiration("b", "a/", &archived, &[], None, &prices()).unwrap();
        // Ages 31-299 in S3 Standard, 300-364 in Deep Archive.
        let expected = 269.0 * 0.023 + 65.0 * 0.00099;
        assert!((e.monthly_saving - expected).abs() < 1e-9, "{}", e.monthly_saving);
        archived.stored.iter_mut().for_each(|s| s.class = None);
        let e = expiration("b", "a/", &archived, &[], None, &prices()).unwrap();
        assert!(
            (e.monthly_saving - 269.0 * 0.023).abs() < 1e-9,
            "unknown class: not counted"
        );
        assert_eq!(storage_class("GLACIER"), Some("GLACIER"));
        assert_eq!(storage_class("glacier"), None);
        let young = daily(20, 1024 * MB, &[]);
        assert_eq!(advise("b", "y/", &young, &prices(), 0.05).expiration, None);
    }

    /// The default prices without Intelligent-Tiering's opt-in archive tiers.
    fn prices_without_archive_tiers() -> PriceTable {
        let mut table = prices();
        if let Some(it) = table.classes.get_mut(INTELLIGENT_TIERING) {
            it.archive_tiers.clear();
        }
        table
    }

    /// The best Intelligent-Tiering plan the advice of `facts` carries.
    fn tiering(dataset: &str, facts: &DatasetFacts, prices: &PriceTable) -> Option<TieringEstimate> {
        advise("b", dataset, facts, prices, 0.05).intelligent_tiering
    }

    #[test]
    fn intelligent_tiering_charges_monitoring_and_warms_read_data_back() {
        // 365 daily objects of 1 GiB, never read: 30 in the frequent tier, 60 in the infrequent
        // one (30-89 days), 275 in archive instant access; 365 monitored objects; one written a
        // day, so 30 transitions a month.
        let facts = daily(365, 1024 * MB, &[]);
        let automatic = prices_without_archive_tiers();
        let it = tiering("p/", &facts, &automatic).unwrap();
        assert_eq!(it.archive_tier, None);
        assert_eq!(it.configuration, None);
        assert_eq!(it.monitored_objects, 365);
        assert_eq!(it.tier_bytes, [30 * 1024 * MB, 60 * 1024 * MB, 275 * 1024 * MB]);
        let storage = 60.0 * (0.023 - 0.0125) + 275.0 * (0.023 - 0.004);
        let (monitoring, transitions) = (365.0 * 0.0025 / 1000.0, 30.0 * 0.01 / 1000.0);
        assert!((it.monthly_monitoring_fee - monitoring).abs() < 1e-12);
        assert!((it.monthly_transition_cost - transitions).abs() < 1e-12);
        assert!((it.monthly_saving - (storage - monitoring - transitions)).abs() < 1e-9);
        assert!((it.one_time_transition_cost - 365.0 * 0.01 / 1000.0).abs() < 1e-12);

        // Data of 100 days read in full once a day warms one object a day back: 1 GiB a day for a
        // month at the archive instant tier's difference.
        let read = daily(365, 1024 * MB, &[(100, 1)]);
        let warmed = tiering("p/", &read, &automatic).unwrap();
        assert!((warmed.monthly_rewarming_cost - 30.0 * (0.023 - 0.004)).abs() < 1e-9);
        assert!(warmed.monthly_saving < it.monthly_saving);
        // Read far more than it holds: warming undoes at most the tier's saving.
        let hammered = daily(365, 1024 * MB, &[(100, 1000)]);
        let hot = tiering("p/", &hammered, &automatic).unwrap();
        assert!((hot.monthly_rewarming_cost - 275.0 * (0.023 - 0.004)).abs() < 1e-9);

        // Small objects are not monitored: nothing to estimate; nor without the class's prices.
        let mut small = daily(30, 1024, &[]);
        small.stored.iter_mut().for_each(|s| s.movable = false);
        assert_eq!(tiering("p/", &small, &prices()), None);
        let mut table = prices();
        table.classes.remove(INTELLIGENT_TIERING);
        assert_eq!(tiering("p/", &facts, &table), None);
    }

    #[test]
    fn intelligent_tiering_archives_only_what_no_one_reads() {
        // Never read: the Deep Archive Access tier from its fewest days, 180, beats Archive
        // Access (0.0036 from 90 days) on these ages: 30 frequent, 60 infrequent, 90 archive
        // instant (90-179), 185 in Deep Archive Access.
        let facts = daily(365, 1024 * MB, &[]);
        let it = tiering("exports/", &facts, &prices()).unwrap();
        let tier = it.archive_tier.as_ref().unwrap();
        assert_eq!((tier.access_tier.as_str(), tier.days), ("DEEP_ARCHIVE_ACCESS", 180));
        assert_eq!(tier.access_time, "up to 12 hours");
        let gib = 1024 * MB;
        assert_eq!(it.tier_bytes, [30 * gib, 60 * gib, 90 * gib, 185 * gib]);
        let storage = 60.0 * (0.023 - 0.0125) + 90.0 * (0.023 - 0.004) + 185.0 * (0.023 - 0.00099);
        let expected = storage - 365.0 * 0.0025 / 1000.0 - 30.0 * 0.01 / 1000.0;
        assert!((it.monthly_saving - expected).abs() < 1e-9, "{}", it.monthly_saving);
        assert_eq!(
            it.configuration,
            Some(json!({
                "Id": "lakelog-exports",
                "Filter": {"Prefix": "exports/"},
                "Status": "Enabled",
                "Tierings": [{"Days": 180, "AccessTier": "DEEP_ARCHIVE_ACCESS"}],
            }))
        );

        // Data of 200 days still read: no archive tier before 201 days without access, so
        // Archive Access after 270 days or Deep Archive Access after 270, whichever saves more.
        let read = daily(365, 1024 * MB, &[(200, 1)]);
        let it = tiering("exports/", &read, &prices()).unwrap();
        assert!(it.archive_tier.as_ref().is_some_and(|a| a.days > 200), "{it:?}");
        assert!((it.monthly_rewarming_cost - 30.0 * (0.023 - 0.004)).abs() < 1e-9);
        // Reads of unknown age or a table format's files: the automatic tiers only.
        let unknown = with_a_read_of_unknown_age(&facts);
        assert_eq!(tiering("u/", &unknown, &prices()).unwrap().archive_tier, None);
        let mut table = facts.clone();
        table.table_format = Some("Apache Iceberg");
        let it = tiering("t/", &table, &prices()).unwrap();
        assert_eq!((it.archive_tier, it.configuration), (None, None));
    }

    #[test]
    fn intelligent_tiering_is_chosen_where_reads_of_old_data_would_cost_more_in_retrieval() {
        // 365 daily objects of 1 GiB; data of 100, 150, 200, 250 and 300 days each read once a
        // day: 150 GiB of old data a month. Glacier Instant Retrieval from day 1 would save
        // 364 x 0.019 but pay 0.03 a GB read; Intelligent-Tiering pays 0.019 a GB read (a month
        // in the frequent tier) and saves less on the young data.
        let facts = daily(365, 1024 * MB, &[(100, 1), (150, 1), (200, 1), (250, 1), (300, 1)]);
        let advice = advise("b", "events/", &facts, &prices(), 0.05);
        assert_eq!(advice.transitions.len(), 1, "{advice:?}");
        let t = &advice.transitions[0];
        assert_eq!((t.storage_class.as_str(), t.days), (INTELLIGENT_TIERING, 0));
        let storage = 60.0 * (0.023 - 0.0125) + 275.0 * (0.023 - 0.004);
        let (monitoring, transitions) = (365.0 * 0.0025 / 1000.0, 30.0 * 0.01 / 1000.0);
        let rewarming = 150.0 * (0.023 - 0.004);
        let expected = storage - rewarming - monitoring - transitions;
        assert!(
            (advice.monthly_saving - expected).abs() < 1e-9,
            "{}",
            advice.monthly_saving
        );
        assert!((t.monthly_storage_saving - (storage - monitoring)).abs() < 1e-9);
        assert!((t.monthly_retrieval_cost - rewarming).abs() < 1e-9);
        let it = advice.intelligent_tiering.as_ref().unwrap();
        assert_eq!(
            (it.archive_tier.as_ref(), it.monthly_saving),
            (None, advice.monthly_saving)
        );
        assert!(advice.reason.contains("automatic tiers only"), "{}", advice.reason);
        let rule = &advice.lifecycle.as_ref().unwrap()["Rules"][0];
        assert_eq!(
            rule["Transitions"],
            json!([{ "Days": 0, "StorageClass": INTELLIGENT_TIERING }])
        );

        // Without the class in the price table, the rules' best: Glacier Instant Retrieval from
        // day 1, 364 x 0.019 less 150 GB of retrieval at 0.03 and 150 GETs at 0.0096 per 1,000.
        let mut table = prices();
        table.classes.remove(INTELLIGENT_TIERING);
        let rules = advise("b", "events/", &facts, &table, 0.05);
        assert_eq!(
            (rules.transitions[0].storage_class.as_str(), rules.transitions[0].days),
            ("GLACIER_IR", 1)
        );
        let ir = 364.0 * (0.023 - 0.004) - 150.0 * 0.03 - 0.15 * (0.01 - 0.0004) - 30.0 * 0.02 / 1000.0;
        assert!((rules.monthly_saving - ir).abs() < 1e-9, "{}", rules.monthly_saving);
        assert!(rules.monthly_saving < advice.monthly_saving);
        assert_eq!(rules.intelligent_tiering, None);
    }

    #[test]
    fn the_files_of_a_table_format_never_need_a_restore() {
        let mut facts = daily(365, 1024 * MB, &[]);
        facts.table_format = Some("Delta Lake");
        let advice = advise("b", "warehouse/orders/", &facts, &prices(), 0.05);
        assert!(!advice.transitions.is_empty(), "{}", advice.reason);
        assert!(
            advice
                .transitions
                .iter()
                .all(|t| !ARCHIVE_CLASSES.contains(&t.storage_class.as_str())),
            "{:?}",
            advice.transitions
        );
        assert!(advice.reason.contains("Delta Lake files"), "{}", advice.reason);
        // The same data as plain files goes to an archive class.
        facts.table_format = None;
        let plain = advise("b", "exports/", &facts, &prices(), 0.05);
        assert!(
            plain
                .transitions
                .iter()
                .any(|t| ARCHIVE_CLASSES.contains(&t.storage_class.as_str()))
        );
        assert!(plain.monthly_saving > advice.monthly_saving);
    }

    #[test]
    fn data_read_while_young_moves_after_the_reads_and_never_to_glacier_while_read() {
        // Read at age 0 thirty times a day, at 3 days five times, at 40 days once: reads of data
        // older than 3 days are rare (1 in 36), and Glacier must wait until after 40 days.
        let facts = daily(365, 1024 * MB, &[(0, 30), (3, 5), (40, 1)]);
        let advice = advise("b", "events/", &facts, &prices(), 0.05);
        assert_eq!(advice.rare_after_days, Some(4));
        let archive = advice
            .transitions
            .iter()
            .find(|t| ARCHIVE_CLASSES.contains(&t.storage_class.as_str()));
        assert!(archive.is_none_or(|g| g.days > 40), "{advice:?}");
        assert!(advice.monthly_saving > 0.0);
        for pair in advice.transitions.windows(2) {
            assert!(pair[1].days >= pair[0].days + 30, "{advice:?}");
        }
        // Every class chosen pays for itself.
        for t in &advice.transitions {
            assert!(
                t.monthly_storage_saving > t.monthly_retrieval_cost + t.monthly_request_cost,
                "{t:?}"
            );
        }
    }

    #[test]
    fn hot_data_stays_in_standard() {
        // Every object read 100 times a day in full: retrieval would cost more than storage.
        let mut facts = daily(90, 10 * MB, &[]);
        facts.reads = (0..90)
            .map(|age| ReadsAt {
                age: Some(age),
                movable: true,
                reads: 100 * 90,
                bytes: 100 * 90 * 10 * MB,
            })
            .collect();
        let advice = advise("b", "hot/", &facts, &prices(), 0.05);
        assert!(advice.transitions.is_empty(), "{advice:?}");
        assert!(advice.reason.contains("no transition saves money"), "{}", advice.reason);
        assert_eq!(advice.lifecycle, None);
        assert_eq!(advice.rare_after_days, Some(86));
    }

    #[test]
    fn unknown_ages_small_and_moved_objects_are_not_planned() {
        let stored = |age, moved, movable| StoredAt {
            age,
            moved,
            class: None,
            movable,
            objects: 10,
            bytes: 10 * MB,
        };
        let facts = DatasetFacts {
            stored: vec![stored(None, false, true), stored(Some(400), true, true)],
            reads: vec![ReadsAt {
                age: None,
                movable: true,
                reads: 5,
                bytes: 5,
            }],
            movable_writes: 0,
            range_days: 30,
            table_format: None,
            oldest_reads: Vec::new(),
        };
        let advice = advise("b", "raw/", &facts, &prices(), 0.05);
        assert!(advice.transitions.is_empty());
        assert_eq!(advice.reads_of_unknown_age, 5);
        assert_eq!(advice.stored_bytes_of_unknown_age, 10 * MB);
        assert_eq!(advice.already_moved_bytes, 10 * MB);
        assert!(
            advice.reason.contains("age of its objects is unknown"),
            "{}",
            advice.reason
        );
        let small = DatasetFacts {
            stored: vec![stored(Some(100), false, false)],
            ..DatasetFacts::default()
        };
        let advice = advise("b", "tiny/", &small, &prices(), 0.05);
        assert!(advice.reason.contains("128 KiB"), "{}", advice.reason);
    }

    #[test]
    fn the_bucket_root_gets_no_rule() {
        let facts = daily(100, 1024 * MB, &[]);
        let advice = advise("b", "", &facts, &prices(), 0.05);
        assert!(!advice.transitions.is_empty());
        assert_eq!(advice.lifecycle, None);
        assert!(advice.reason.contains("root"), "{}", advice.reason);
    }

    #[test]
    fn rare_after_counts_from_the_oldest_reads() {
        let at = |age, reads| ReadsAt {
            age: Some(age),
            movable: true,
            reads,
            bytes: 0,
        };
        // 5 of 100 reads are of data aged 11 days or more.
        assert_eq!(rare_after(&[at(0, 90), at(10, 5), at(20, 5)], 0.05), Some(11));
        assert_eq!(rare_after(&[at(0, 90), at(10, 5), at(20, 5)], 0.10), Some(1));
        assert_eq!(rare_after(&[at(0, 100)], 0.05), Some(1));
        assert_eq!(rare_after(&[at(5, 1), at(0, 99)], 0.05), Some(1));
        assert_eq!(rare_after(&[], 0.05), None);
        assert_eq!(rare_after(&[at(3, 1), at(3, 1)], 0.0), Some(4));
        assert_eq!(rare_after(&[at(3, 1)], 1.0), Some(0));
    }

    #[test]
    fn rule_ids_are_safe_and_bounded() {
        assert_eq!(rule_id("bkt", "raw/café data/"), "lakelog-bkt-raw-caf--data");
        assert_eq!(rule_id("b", &"x/".repeat(300)).chars().count(), 255);
        assert_eq!(tiering_id("raw/café data/"), "lakelog-raw-caf--data");
        assert_eq!(tiering_id(&"x/".repeat(300)).chars().count(), 64);
    }
}
