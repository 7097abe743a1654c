//! Which dataset a key belongs to, and the date a key names.
//!
//! A dataset is a bucket plus a key prefix. By default the prefix ends before the key's first
//! partition-like directory (`name=value`, a date such as `2024-01-31`, `20240131` or the
//! `2024/01/31` path form); a key without one is cut after [`DatasetRule::depth`] directories.
//! The file name itself never belongs to the prefix. Users can replace the rule with a regular
//! expression whose match at the start of the key (its first capture group, when it has one) is
//! the prefix.
//!
//! Keys are the decoded keys of the `access_logs` table; a prefix is always a prefix of the key,
//! byte for byte, so it can be used as the `Prefix` of an S3 lifecycle rule. Partition values that
//! writers percent-encode (Spark writes `ts=2024-01-31 10%3A00%3A00`) are still `name=value`.

use chrono::NaiveDate;
use regex::Regex;

/// The default number of directories a key without partitions is cut after: `team/dataset/`.
pub const DEFAULT_DEPTH: usize = 2;

/// How keys are grouped into datasets.
#[derive(Debug, Clone)]
pub struct DatasetRule {
    depth: usize,
    regex: Option<Regex>,
}

impl Default for DatasetRule {
    fn default() -> Self {
        Self {
            depth: DEFAULT_DEPTH,
            regex: None,
        }
    }
}

impl PartialEq for DatasetRule {
    fn eq(&self, other: &Self) -> bool {
        self.depth == other.depth && self.regex.as_ref().map(Regex::as_str) == other.regex.as_ref().map(Regex::as_str)
    }
}

impl Eq for DatasetRule {}

impl std::hash::Hash for DatasetRule {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.depth.hash(state);
        self.regex.as_ref().map(Regex::as_str).hash(state);
    }
}

impl DatasetRule {
    /// The default rule, cutting keys without partitions after `depth` directories.
    pub fn with_depth(depth: usize) -> Self {
        Self { depth, regex: None }
    }

    /// Tries `regex` first: where it matches at the start of a key, its first capture group (or
    /// the whole match) is the dataset; other keys fall back to the default rule.
    pub fn with_regex(mut self, regex: Regex) -> Self {
        self.regex = Some(regex);
        self
    }

    /// Directories kept of a key without partition-like directories.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// The user's regular expression, if any.
    pub fn regex(&self) -> Option<&Regex> {
        self.regex.as_ref()
    }

    /// The dataset prefix of `key`: empty (the bucket's root) or ending with `/`, except where a
    /// user's regex says otherwise.
    pub fn dataset<'k>(&self, key: &'k str) -> &'k str {
        if let Some(regex) = &self.regex
            && let Some(caps) = regex.captures(key)
        {
            let m = caps.get(1).or_else(|| caps.get(0));
            if let Some(m) = m.filter(|m| m.start() == 0) {
                return m.as_str();
            }
        }
        default_dataset(key, self.depth)
    }
}

/// The default rule: cut before the first partition-like directory, else after `depth`
/// directories (never inside the file name).
pub(super) fn default_dataset(key: &str, depth: usize) -> &str {
    let dirs: Vec<(usize, &str)> = directories(key).collect();
    for (i, &(start, segment)) in dirs.iter().enumerate() {
        let next = dirs.get(i + 1).map(|&(_, s)| s).or_else(|| file_name(key));
        if is_partition_like(segment, next) {
            return &key[..start];
        }
    }
    match dirs.get(depth.min(dirs.len()).wrapping_sub(1)) {
        Some(&(start, segment)) if depth > 0 => &key[..start + segment.len() + 1],
        _ => "",
    }
}

/// The directories of a key (every `/`-terminated segment) with their byte offsets.
fn directories(key: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut start = 0;
    std::iter::from_fn(move || {
        let end = start + key.get(start..)?.find('/')?;
        let item = (start, &key[start..end]);
        start = end + 1;
        Some(item)
    })
}

/// The last segment of a key, after its last `/`.
fn file_name(key: &str) -> Option<&str> {
    key.rsplit('/').next()
}

/// Whether a directory looks like a partition: `name=value`, a date (`2024-01-31`, possibly with
/// a time after it, or `20240131`), or a year followed by a month directory (`2024/01/...`).
pub(super) fn is_partition_like(segment: &str, next: Option<&str>) -> bool {
    if let Some((name, value)) = segment.split_once('=')
        && !name.is_empty()
        && !value.is_empty()
    {
        return true;
    }
    if dash_date_at(segment, 0).is_some() || compact_date(segment).is_some() {
        return true;
    }
    year(segment).is_some() && next.and_then(month).is_some()
}

/// The date a key names, if it names one: `year=/month=/day=` directories, the `YYYY/MM/DD`
/// path form, a `YYYY-MM-DD` anywhere in the key (also as a partition value or in the file
/// name), or a directory or partition value `YYYYMMDD`. The leftmost one wins.
pub fn key_date(key: &str) -> Option<NaiveDate> {
    let segments: Vec<&str> = key.split('/').collect();
    let last = segments.len() - 1;
    for (i, &segment) in segments.iter().enumerate() {
        let at = |j: usize| segments.get(j).copied();
        if let Some(date) = hive_date(&segments[i..]) {
            return Some(date);
        }
        if i < last
            && let (Some(y), Some(m), Some(d)) = (year(segment), at(i + 1).and_then(month), at(i + 2).and_then(day))
            && let Some(date) = NaiveDate::from_ymd_opt(y, m, d)
        {
            return Some(date);
        }
        if let Some(date) = find_dash_date(segment) {
            return Some(date);
        }
        let value = segment.split_once('=').map_or(segment, |(_, v)| v);
        if (i < last || value.len() < segment.len())
            && let Some(date) = compact_date(value)
        {
            return Some(date);
        }
    }
    None
}

/// `year=YYYY/month=MM/day=DD` (names in any case) starting at `segments[0]`.
fn hive_date(segments: &[&str]) -> Option<NaiveDate> {
    let value = |i: usize, name: &str| {
        let (n, v) = segments.get(i)?.split_once('=')?;
        n.eq_ignore_ascii_case(name).then_some(v)
    };
    let y = year(value(0, "year")?)?;
    let m = value(1, "month").and_then(|v| v.parse::<u32>().ok().filter(|_| v.len() <= 2))?;
    let d = value(2, "day").and_then(|v| v.parse::<u32>().ok().filter(|_| v.len() <= 2))?;
    NaiveDate::from_ymd_opt(y, m, d)
}

/// The first valid `YYYY-MM-DD` in `text` that is not part of a longer run of digits.
fn find_dash_date(text: &str) -> Option<NaiveDate> {
    let bytes = text.as_bytes();
    (0..bytes.len().saturating_sub(9))
        .filter(|&i| i == 0 || !bytes[i - 1].is_ascii_digit())
        .find_map(|i| dash_date_at(text, i))
}

/// A valid `YYYY-MM-DD` at byte `i` of `text`, not followed by a digit.
fn dash_date_at(text: &str, i: usize) -> Option<NaiveDate> {
    let b = text.as_bytes().get(i..)?;
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' || b.get(10).is_some_and(u8::is_ascii_digit) {
        return None;
    }
    let digits = |r: std::ops::Range<usize>| -> Option<u32> {
        let part = &b[r];
        part.iter()
            .all(u8::is_ascii_digit)
            .then(|| part.iter().fold(0u32, |n, &c| n * 10 + u32::from(c - b'0')))
    };
    let y = digits(0..4).and_then(|y| plausible_year(y as i32))?;
    NaiveDate::from_ymd_opt(y, digits(5..7)?, digits(8..10)?)
}

/// `YYYYMMDD`, exactly eight digits naming a valid date of a plausible year.
fn compact_date(text: &str) -> Option<NaiveDate> {
    if text.len() != 8 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let y = year(&text[..4])?;
    NaiveDate::from_ymd_opt(y, text[4..6].parse().ok()?, text[6..].parse().ok()?)
}

/// A four-digit year between 1970 and 2199.
fn year(text: &str) -> Option<i32> {
    if text.len() != 4 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    plausible_year(text.parse().ok()?)
}

fn plausible_year(y: i32) -> Option<i32> {
    (1970..=2199).contains(&y).then_some(y)
}

/// A two-digit month `01` to `12`.
fn month(text: &str) -> Option<u32> {
    two_digits(text).filter(|m| (1..=12).contains(m))
}

/// A two-digit day `01` to `31`.
fn day(text: &str) -> Option<u32> {
    two_digits(text).filter(|d| (1..=31).contains(d))
}

fn two_digits(text: &str) -> Option<u32> {
    (text.len() == 2 && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date(y: i32, m: u32, d: u32) -> Option<NaiveDate> {
        NaiveDate::from_ymd_opt(y, m, d)
    }

    #[test]
    fn hive_partitions_end_the_dataset() {
        let rule = DatasetRule::default();
        for (key, dataset) in [
            (
                "events/clicks/dt=2024-06-01/part-00001.snappy.parquet",
                "events/clicks/",
            ),
            (
                "warehouse/sales.db/orders/year=2024/month=06/day=01/part-0.parquet",
                "warehouse/sales.db/orders/",
            ),
            ("lake/t/region=eu/dt=2024-06-01/f.parquet", "lake/t/"),
            ("dt=2024-06-01/part-0.parquet", ""),
            ("a/b/c/d/e/country=FR/x.parquet", "a/b/c/d/e/"),
            // Spark percent-encodes ':' and ' ' in partition values, and the log decodes only once.
            (
                "spark/events/ts=2024-01-31 10%3A00%3A00/part-0.parquet",
                "spark/events/",
            ),
            ("spark/events/city=New%20York/part-0.parquet", "spark/events/"),
            // Delta tables: the log is not a partition, so it is cut at the depth.
            ("tables/orders/_delta_log/00000000000000000010.json", "tables/orders/"),
        ] {
            assert_eq!(rule.dataset(key), dataset, "{key}");
        }
    }

    #[test]
    fn dates_in_paths_end_the_dataset() {
        let rule = DatasetRule::default();
        for (key, dataset) in [
            (
                "snapshots/customers/2024/06/01/customers.csv.gz",
                "snapshots/customers/",
            ),
            ("logs/app/2024/06/app.log", "logs/app/"),
            ("exports/2024-06-01/orders.csv", "exports/"),
            ("exports/2024-06-01T10:00:00Z/orders.csv", "exports/"),
            ("backups/db/20240601/dump.sql.gz", "backups/db/"),
            ("a/b/c/2024-06-01/x", "a/b/c/"),
            // A year without a month after it is not a partition (could be a name).
            ("music/albums/1999/cover.jpg", "music/albums/"),
            // Not dates: an invalid month, a longer number.
            ("a/2024-13-01/b/c/x", "a/2024-13-01/"),
            ("ids/123456789/x/y", "ids/123456789/"),
        ] {
            assert_eq!(rule.dataset(key), dataset, "{key}");
        }
    }

    #[test]
    fn keys_without_partitions_are_cut_at_the_depth() {
        for (key, depth, dataset) in [
            ("models/v3/weights file+7.bin", 2, "models/v3/"),
            ("models/v3/weights file+7.bin", 1, "models/"),
            ("models/v3/weights file+7.bin", 0, ""),
            ("models/v3/weights file+7.bin", 5, "models/v3/"),
            ("raw/café/81234.json", 2, "raw/café/"),
            ("readme.txt", 2, ""),
            ("a//b/c", 2, "a//"),
            ("/leading/slash/x", 2, "/leading/"),
            ("dir/", 2, "dir/"),
            // The file name is never a partition, nor part of the dataset.
            ("reports/q=1.csv", 2, "reports/"),
            ("reports/2024-06-01.csv", 2, "reports/"),
        ] {
            assert_eq!(
                DatasetRule::with_depth(depth).dataset(key),
                dataset,
                "{key} at depth {depth}"
            );
        }
    }

    #[test]
    fn url_encoded_keys_keep_their_bytes() {
        let rule = DatasetRule::default();
        // A key S3 could not decode is kept raw: its prefix is still a byte prefix.
        assert_eq!(rule.dataset("raw%2Fencoded/a%ZZ/x"), "raw%2Fencoded/a%ZZ/");
        // An encoded '=' is not a partition.
        assert_eq!(rule.dataset("a/dt%3D2024/b/x"), "a/dt%3D2024/");
        assert_eq!(rule.dataset("données/é=1/x"), "données/");
    }

    #[test]
    fn a_regex_overrides_the_default() {
        let rule = DatasetRule::default().with_regex(Regex::new(r"^(tenants/[^/]+/[^/]+/)").unwrap());
        assert_eq!(
            rule.dataset("tenants/acme/orders/dt=2024-06-01/x"),
            "tenants/acme/orders/"
        );
        assert_eq!(rule.dataset("tenants/acme"), "tenants/");
        assert_eq!(rule.dataset("other/x/y/z"), "other/x/");
        let whole = DatasetRule::with_depth(1).with_regex(Regex::new(r"^[^/]+/[^/]+/").unwrap());
        assert_eq!(whole.dataset("a/b/c/d"), "a/b/");
        // A match that does not start the key is not a prefix: the default rule applies.
        let inner = DatasetRule::default().with_regex(Regex::new(r"b/").unwrap());
        assert_eq!(inner.dataset("a/b/c/d"), "a/b/");
    }

    #[test]
    fn dates_named_by_keys() {
        for (key, expected) in [
            (
                "events/clicks/dt=2024-06-01/part-00001.snappy.parquet",
                date(2024, 6, 1),
            ),
            ("t/year=2024/month=6/day=9/x.parquet", date(2024, 6, 9)),
            ("t/YEAR=2024/MONTH=06/DAY=30/x.parquet", date(2024, 6, 30)),
            ("snapshots/customers/2024/06/01/customers.csv.gz", date(2024, 6, 1)),
            ("logs/app-2024-02-29.log", date(2024, 2, 29)),
            ("backups/20240131/dump.sql", date(2024, 1, 31)),
            ("t/dt=20240131/x", date(2024, 1, 31)),
            ("spark/ts=2024-01-31 10%3A00%3A00/part-0", date(2024, 1, 31)),
            ("a/2024/06/01/b/2023-01-01/x", date(2024, 6, 1)),
            // No date.
            ("models/v3/weights.bin", None),
            ("t/year=2024/month=06/x", None),
            ("logs/2023-02-29.log", None),
            ("ids/120240131/x", None),
            ("files/20240131.bin", None),
            ("a/1234-56-78/x", None),
        ] {
            assert_eq!(key_date(key), expected, "{key}");
        }
    }
}
