//! What the S3 Inventory lists hold, per dataset, beside the requests of the range: the
//! report's storage section and its dark data.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;

use super::{Inventory, OPS, PriceTable, advisor, inventory};
use crate::error::ReportError;
use crate::session::ReportSession;

/// What the inventories hold, per dataset, with the requests of the range.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Storage {
    /// The lists read.
    pub inventories: Vec<InventorySource>,
    /// Every dataset they list, most bytes first.
    pub datasets: Vec<StoredDataset>,
    /// The datasets of `datasets` no request touched in the range, together.
    pub dark: DarkData,
}

/// One inventory list read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InventorySource {
    /// The bucket it lists.
    pub bucket: String,
    /// Its manifest.
    pub manifest: String,
    /// When S3 took it.
    #[serde(serialize_with = "super::rfc3339")]
    pub taken: DateTime<Utc>,
    /// `CSV` or `Parquet`.
    pub format: String,
    /// Object versions listed (delete markers are not objects).
    pub objects: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// The stored objects of one dataset, from an inventory.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredDataset {
    /// The bucket.
    pub bucket: String,
    /// The dataset's key prefix.
    pub dataset: String,
    /// Object versions.
    pub objects: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Objects and bytes by storage class.
    pub by_class: BTreeMap<String, inventory::Count>,
    /// The first day its data is of (the key's date, else its last change).
    pub first_day: Option<NaiveDate>,
    /// The last such day.
    pub last_day: Option<NaiveDate>,
    /// Successful requests of its keys in the range; 0 for dark data.
    pub requests: u64,
    /// What storing it costs a month, at the price table's storage prices.
    pub monthly_storage_cost: f64,
}

/// Data stored and never requested in the range.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DarkData {
    /// Datasets.
    pub datasets: u64,
    /// Their objects.
    pub objects: u64,
    /// Their bytes.
    pub bytes: u64,
    /// What storing them costs a month.
    pub monthly_storage_cost: f64,
    /// Storage classes they use that the price table has no price for (not in the cost).
    pub unpriced_classes: Vec<String>,
}

/// The storage section from `inventories`, with the requests in `window` per dataset.
pub(super) async fn stored_datasets(
    session: &ReportSession,
    window: &str,
    inventories: &[Inventory],
    prices: &PriceTable,
) -> Result<Storage, ReportError> {
    let rows = session
        .query(
            "requests per dataset",
            &format!("SELECT bucket, dataset, COUNT(*) AS requests FROM {OPS} WHERE {window} GROUP BY bucket, dataset"),
        )
        .await?;
    let (buckets, names, counts) = (
        rows.strings("bucket")?,
        rows.strings("dataset")?,
        rows.i64s("requests")?,
    );
    let requests: HashMap<(String, String), u64> = (0..rows.len())
        .filter_map(|i| {
            Some((
                (buckets[i].clone()?, names[i].clone()?),
                counts[i].unwrap_or(0).max(0) as u64,
            ))
        })
        .collect();
    let cost = |by_class: &BTreeMap<String, inventory::Count>| -> f64 {
        by_class
            .iter()
            .map(|(class, n)| n.bytes as f64 / advisor::GB * prices.class(class).storage_gb_month)
            .sum()
    };
    let mut datasets = Vec::new();
    let mut dark = DarkData::default();
    let mut unpriced = std::collections::BTreeSet::new();
    for inventory in inventories {
        for (dataset, stored) in inventory.datasets() {
            let requests = requests
                .get(&(inventory.bucket.clone(), dataset.clone()))
                .copied()
                .unwrap_or(0);
            let monthly_storage_cost = cost(&stored.by_class);
            if requests == 0 {
                dark.datasets += 1;
                dark.objects += stored.total.objects;
                dark.bytes += stored.total.bytes;
                dark.monthly_storage_cost += monthly_storage_cost;
                unpriced.extend(
                    stored
                        .by_class
                        .keys()
                        .filter(|c| !prices.classes.contains_key(*c))
                        .cloned(),
                );
            }
            datasets.push(StoredDataset {
                bucket: inventory.bucket.clone(),
                dataset,
                objects: stored.total.objects,
                bytes: stored.total.bytes,
                by_class: stored.by_class,
                first_day: stored.days.map(|d| d.0),
                last_day: stored.days.map(|d| d.1),
                requests,
                monthly_storage_cost,
            });
        }
    }
    dark.unpriced_classes = unpriced.into_iter().collect();
    datasets.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then_with(|| (&a.bucket, &a.dataset).cmp(&(&b.bucket, &b.dataset)))
    });
    Ok(Storage {
        inventories: inventories
            .iter()
            .map(|i| InventorySource {
                bucket: i.bucket.clone(),
                manifest: i.location.clone(),
                taken: i.taken,
                format: i.format.clone(),
                objects: i.total.objects,
                bytes: i.total.bytes,
            })
            .collect(),
        datasets,
        dark,
    })
}
