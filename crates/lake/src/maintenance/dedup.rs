//! Which rows of a partition's new files are duplicates, found in bounded memory.
//!
//! Files written by a deduplicating compaction (tagged with [`crate::maintenance::DEDUP_TAG`])
//! hold no key twice among themselves: only the rows of the other files, the new ones, can be
//! duplicates. A new row is one when its key is in a reference file (a tagged file of the
//! partition, or any file of the day before) or in an earlier row of the new files; the rows of
//! reference files always stay.
//!
//! Keys are 128-bit fingerprints. The new rows' fingerprints are split into passes by their low
//! bits so that one pass's hash map fits the memory given; each pass reads the key columns of the
//! new files (keeping its share) and then of the reference files (stopping once every key of the
//! pass was found). Memory is the budget plus one bit per new row, whatever the size of the
//! partition; a late file into a large old partition costs a map of its own keys and one read of
//! the partition's key columns.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{Array, AsArray, BooleanArray, StringArray};
use arrow::compute::cast;
use arrow::datatypes::DataType as ArrowType;
use deltalake::ObjectStore;
use deltalake::parquet::arrow::ProjectionMask;
use deltalake::parquet::arrow::async_reader::ParquetRecordBatchStreamBuilder;
use futures::TryStreamExt as _;
use object_store::path::Path;
use tracing::debug;

use super::{MaintenanceError, past};
use crate::files::StoreFile;

/// Rows per batch read from a file's key columns.
const BATCH_ROWS: usize = 8192;

/// Bytes of one entry of a pass's map: a fingerprint (16), the row it was first seen at (8) and
/// the map's control byte.
const ENTRY_BYTES: u64 = 16 + 8 + 1;

/// Separates the values of a key's columns in what is fingerprinted.
const KEY_SEPARATOR: &[u8] = &[0x1f];
/// Stands for a null value of one of a key's columns.
const KEY_NULL: &[u8] = &[0];

/// The columns of a deduplication key: `gameId+eventId` is two.
pub(crate) fn key_columns(key: &str) -> impl Iterator<Item = &str> {
    key.split('+').map(str::trim).filter(|c| !c.is_empty())
}

/// Whether rows unique by the key `tag` (a file's deduplication tag) are unique by `key` too:
/// when every column of `tag` is one of `key`'s. Unique by `eventId` implies unique by
/// `gameId+eventId`.
pub(crate) fn key_implies(tag: &str, key: &str) -> bool {
    let mut columns = key_columns(tag).peekable();
    columns.peek().is_some() && columns.all(|c| key_columns(key).any(|k| k == c))
}

/// A file whose key columns are read.
#[derive(Debug, Clone)]
pub(crate) struct KeyFile {
    /// Path relative to the table, for errors.
    pub path: String,
    /// Where the object store has it.
    pub location: Path,
    /// Bytes.
    pub size: u64,
    /// Rows, when the log says.
    pub rows: Option<u64>,
}

impl KeyFile {
    /// Rows, or a bound on them (a parquet row takes more than 4 bytes) when the log has no
    /// statistics.
    fn rows_at_most(&self) -> u64 {
        self.rows.unwrap_or(self.size / 4)
    }
}

/// The rows to drop from each new file, by the file's index among the new files: one bit per row.
#[derive(Debug, Default)]
pub(crate) struct Drops {
    files: Vec<Vec<u64>>,
    count: u64,
}

impl Drops {
    fn new(files: usize) -> Self {
        Self {
            files: vec![Vec::new(); files],
            count: 0,
        }
    }

    fn insert(&mut self, file: usize, row: u64) {
        let bits = &mut self.files[file];
        let word = usize::try_from(row / 64).unwrap_or(usize::MAX);
        if bits.len() <= word {
            bits.resize(word + 1, 0);
        }
        let mask = 1 << (row % 64);
        if bits[word] & mask == 0 {
            bits[word] |= mask;
            self.count += 1;
        }
    }

    fn contains(&self, file: usize, row: u64) -> bool {
        let word = usize::try_from(row / 64).unwrap_or(usize::MAX);
        self.files[file].get(word).is_some_and(|w| w & (1 << (row % 64)) != 0)
    }

    /// Rows to drop, all files together.
    pub(crate) fn count(&self) -> u64 {
        self.count
    }

    /// Which of the rows `first..first + len` of new file `file` stay; `None` when all do.
    pub(crate) fn keep(&self, file: usize, first: u64, len: usize) -> Option<BooleanArray> {
        let rows = first..first + len as u64;
        if !rows.clone().any(|row| self.contains(file, row)) {
            return None;
        }
        Some(rows.map(|row| Some(!self.contains(file, row))).collect())
    }
}

/// Hashes a fingerprint (already uniformly random) by taking its high bits.
#[derive(Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u128(&mut self, n: u128) {
        self.0 = (n >> 64) as u64;
    }
}

type FirstSeen = HashMap<u128, u64, BuildHasherDefault<Prehashed>>;

/// Fingerprints of keys: two independently keyed SipHash values. Two different keys share one
/// with probability 2^-128 per pair, far below any hardware error rate even for billions of rows.
struct Fingerprints {
    first: RandomState,
    second: RandomState,
}

impl Fingerprints {
    fn new() -> Self {
        Self {
            first: RandomState::new(),
            second: RandomState::new(),
        }
    }

    /// The fingerprint of row `row` of the key `columns`; `None` when they are all null (such
    /// rows are all kept).
    fn of(&self, columns: &[StringArray], row: usize) -> Option<u128> {
        if columns.iter().all(|c| c.is_null(row)) {
            return None;
        }
        let (mut a, mut b) = (self.first.build_hasher(), self.second.build_hasher());
        for (i, column) in columns.iter().enumerate() {
            let bytes = if column.is_null(row) {
                KEY_NULL
            } else {
                column.value(row).as_bytes()
            };
            if i > 0 {
                a.write(KEY_SEPARATOR);
                b.write(KEY_SEPARATOR);
            }
            a.write(bytes);
            b.write(bytes);
        }
        Some((u128::from(a.finish()) << 64) | u128::from(b.finish()))
    }
}

/// Finds the duplicate rows of `new` (in their order) against `reference` and each other, with
/// one pass's map within `memory` bytes. `None` when `stop_at` passed first.
pub(crate) async fn find_duplicates(
    uri: &str,
    store: &Arc<dyn ObjectStore>,
    key: &str,
    new: &[KeyFile],
    reference: &[KeyFile],
    memory: u64,
    stop_at: Option<Instant>,
) -> Result<Option<Drops>, MaintenanceError> {
    let reader = KeyReader {
        uri,
        store,
        key,
        fingerprints: Fingerprints::new(),
    };
    let new_rows: u64 = new.iter().map(KeyFile::rows_at_most).sum();
    let per_pass = entries_within(memory);
    // 10% above the mean: a pass's share of random fingerprints varies far less than that.
    let passes = (new_rows + new_rows / 10).div_ceil(per_pass).max(1);
    let capacity = usize::try_from(((new_rows / passes) + (new_rows / passes) / 10).min(per_pass)).unwrap_or(0);
    let mut drops = Drops::new(new.len());
    let mut first_seen = FirstSeen::with_capacity_and_hasher(capacity, BuildHasherDefault::default());
    for pass in 0..passes {
        let in_pass = |fingerprint: u128| (fingerprint as u64) % passes == pass;
        first_seen.clear();
        for (index, file) in new.iter().enumerate() {
            if past(stop_at) {
                return Ok(None);
            }
            reader
                .each_key(file, |row, fingerprint| {
                    let Some(fingerprint) = fingerprint.filter(|f| in_pass(*f)) else {
                        return;
                    };
                    match first_seen.entry(fingerprint) {
                        Entry::Occupied(_) => drops.insert(index, row),
                        Entry::Vacant(slot) => {
                            slot.insert(((index as u64) << 32) | row);
                        }
                    }
                })
                .await?;
        }
        for file in reference {
            if first_seen.is_empty() {
                break;
            }
            if past(stop_at) {
                return Ok(None);
            }
            reader
                .each_key(file, |_, fingerprint| {
                    if let Some(at) = fingerprint.filter(|f| in_pass(*f)).and_then(|f| first_seen.remove(&f)) {
                        drops.insert((at >> 32) as usize, at & u64::from(u32::MAX));
                    }
                })
                .await?;
        }
    }
    debug!(
        table = uri,
        passes,
        new_files = new.len(),
        reference_files = reference.len(),
        duplicates = drops.count(),
        "duplicates found"
    );
    Ok(Some(drops))
}

/// How many entries a pass's map holds within `memory` bytes: the map's table has a power of two
/// of slots, at most 7/8 full.
fn entries_within(memory: u64) -> u64 {
    let slots = (memory / ENTRY_BYTES).max(16);
    let slots = if slots.is_power_of_two() {
        slots
    } else {
        slots.next_power_of_two() / 2
    };
    slots / 8 * 7
}

/// Reads the key columns of files.
struct KeyReader<'a> {
    uri: &'a str,
    store: &'a Arc<dyn ObjectStore>,
    key: &'a str,
    fingerprints: Fingerprints,
}

impl KeyReader<'_> {
    fn error(&self, file: &KeyFile, reason: impl ToString) -> MaintenanceError {
        MaintenanceError::ReadFile {
            uri: self.uri.to_owned(),
            file: file.path.clone(),
            reason: reason.to_string(),
        }
    }

    /// Calls `f` with each row's number in the file and fingerprint, reading only the key columns.
    async fn each_key(&self, file: &KeyFile, mut f: impl FnMut(u64, Option<u128>)) -> Result<(), MaintenanceError> {
        let reader = StoreFile {
            store: Arc::clone(self.store),
            path: file.location.clone(),
            size: file.size,
        };
        let builder = ParquetRecordBatchStreamBuilder::new(reader)
            .await
            .map_err(|e| self.error(file, e))?;
        let names: Vec<&str> = key_columns(self.key).collect();
        // A key column a file lacks (written before the column was added) reads as null.
        let indices: Vec<usize> = names
            .iter()
            .filter_map(|column| builder.schema().index_of(column).ok())
            .collect();
        if indices.is_empty() {
            // Every row's key is null: none of them is anyone's duplicate.
            return Ok(());
        }
        let mask = ProjectionMask::roots(builder.parquet_schema(), indices);
        let mut stream = builder
            .with_projection(mask)
            .with_batch_size(BATCH_ROWS)
            .build()
            .map_err(|e| self.error(file, e))?;
        let mut row = 0u64;
        while let Some(batch) = stream.try_next().await.map_err(|e| self.error(file, e))? {
            let columns = names
                .iter()
                .map(|name| {
                    let Some(column) = batch.column_by_name(name) else {
                        return Ok(StringArray::new_null(batch.num_rows()));
                    };
                    let strings =
                        cast(column, &ArrowType::Utf8).map_err(|e| self.error(file, format!("key column: {e}")))?;
                    Ok(strings.as_string::<i32>().clone())
                })
                .collect::<Result<Vec<_>, MaintenanceError>>()?;
            for i in 0..batch.num_rows() {
                f(row, self.fingerprints.of(&columns, i));
                row += 1;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_implies_every_key_that_holds_its_columns() {
        assert!(key_implies("eventId", "gameId+eventId"));
        assert!(key_implies("gameId + eventId", "eventId+gameId"));
        assert!(key_implies("eventId", "eventId"));
        assert!(!key_implies("gameId+eventId", "eventId"));
        assert!(!key_implies("request_id", "eventId"));
        assert!(!key_implies("", "eventId"));
    }

    #[test]
    fn a_pass_holds_what_its_memory_allows() {
        // 1 MiB: 41,943 entries of 25 bytes; the largest power of two of slots within is 32,768.
        assert_eq!(entries_within(1 << 20), 28_672);
        assert!(entries_within(512 << 20) * ENTRY_BYTES * 8 / 7 <= 512 << 20);
        assert_eq!(entries_within(0), 14);
    }

    #[test]
    fn drops_are_bits_by_file_and_row() {
        let mut drops = Drops::new(2);
        drops.insert(1, 70);
        drops.insert(1, 70);
        drops.insert(0, 3);
        assert_eq!(drops.count(), 2);
        assert!(drops.keep(1, 0, 64).is_none());
        let keep = drops.keep(1, 64, 10).unwrap();
        assert_eq!(keep.false_count(), 1);
        assert!(!keep.value(6));
        assert!(drops.keep(0, 0, 3).is_none());
        assert_eq!(drops.keep(0, 0, 4).unwrap().false_count(), 1);
    }

    #[test]
    fn fingerprints_tell_columns_apart() {
        let prints = Fingerprints::new();
        let a = [
            StringArray::from(vec![Some("ab"), Some("a"), None]),
            StringArray::from(vec![Some("c"), Some("bc"), None]),
        ];
        assert_ne!(prints.of(&a, 0), prints.of(&a, 1), "ab|c is not a|bc");
        assert_eq!(prints.of(&a, 2), None, "a key of nulls only is none");
        let b = [StringArray::from(vec![Some("ab")]), StringArray::from(vec![Some("c")])];
        assert_eq!(prints.of(&a, 0), prints.of(&b, 0));
    }
}
