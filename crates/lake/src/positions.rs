//! Positions in ordered streams (a Kinesis shard's sequence numbers), committed in the same Delta
//! version as the rows they cover, so that a writer that is handed records again can tell which
//! of them the table already has.
//!
//! A Delta `txn` action holds an application id and a 64-bit version; a Kinesis sequence number
//! is a decimal number of up to 129 digits (56 in practice). So a position is stored as a few
//! `txn` actions of one stream: `lakelog.position:<stream>:n` holds its number of digits and
//! `lakelog.position:<stream>:<i>` its `i`th group of 18 digits (counted from the left of the
//! number padded with zeros to whole groups). Every commit that advances a stream writes all of
//! them, so the snapshot holds a fixed handful of ids per stream, however many commits there were,
//! and any Delta reader or writer (Spark, DuckDB, Athena) accepts the actions.
//!
//! Positions are compared as numbers ([`compare`]): a longer number is larger, numbers of one
//! length compare by their digits.

use std::cmp::Ordering;

use deltalake::DeltaTable;
use deltalake::kernel::Transaction;

use crate::error::LakeError;
use crate::txns::Txns;

/// The prefix of the `txn` application ids of every stream position.
pub const POSITION_APP_ID: &str = "lakelog.position:";

/// Digits in one `txn` version: 10^18 - 1 fits an `i64`.
const GROUP: usize = 18;

/// The most digits of a position: Kinesis' longest sequence number (`0|([1-9]\d{0,128})`).
pub const MAX_POSITION_DIGITS: usize = 129;

/// A stream's position to commit with the rows of a version: the stream moves from `from` (what
/// the writer read; `None` for a stream the table has no position of) to `to`. The commit is
/// refused if another writer moved the stream in between.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Advance {
    /// The stream, for example `kinesis:<stream ARN>/shardId-000000000000`.
    pub stream: String,
    /// The position the writer read before it chose its rows.
    pub from: Option<String>,
    /// The position of the last record the commit covers: a decimal number.
    pub to: String,
}

/// Why a position cannot be stored.
fn invalid(uri: &str, stream: &str, position: &str) -> LakeError {
    LakeError::InvalidPosition {
        uri: uri.to_owned(),
        stream: stream.to_owned(),
        position: position.chars().take(160).collect(),
    }
}

/// Whether `position` is a decimal number that a position can hold.
pub fn is_position(position: &str) -> bool {
    !position.is_empty() && position.len() <= MAX_POSITION_DIGITS && position.bytes().all(|b| b.is_ascii_digit())
}

/// Orders two decimal numbers (leading zeros ignored).
pub fn compare(a: &str, b: &str) -> Ordering {
    let a = a.trim_start_matches('0');
    let b = b.trim_start_matches('0');
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

fn length_id(stream: &str) -> String {
    format!("{POSITION_APP_ID}{stream}:n")
}

fn group_id(stream: &str, group: usize) -> String {
    format!("{POSITION_APP_ID}{stream}:{group}")
}

/// The `txn` actions that record `position` as `stream`'s.
pub(crate) fn transactions(
    uri: &str,
    stream: &str,
    position: &str,
    now_ms: i64,
) -> Result<Vec<Transaction>, LakeError> {
    if !is_position(position) {
        return Err(invalid(uri, stream, position));
    }
    let digits = position.trim_start_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    let padded = format!("{digits:0>width$}", width = digits.len().div_ceil(GROUP) * GROUP);
    let mut actions = vec![Transaction::new_with_last_update(
        length_id(stream),
        digits.len() as i64,
        Some(now_ms),
    )];
    for (i, group) in padded.as_bytes().chunks(GROUP).enumerate() {
        // ASCII digits, at most 18 of them: always an i64.
        let value = std::str::from_utf8(group)
            .ok()
            .and_then(|g| g.parse::<i64>().ok())
            .ok_or_else(|| invalid(uri, stream, position))?;
        actions.push(Transaction::new_with_last_update(
            group_id(stream, i),
            value,
            Some(now_ms),
        ));
    }
    Ok(actions)
}

/// The position of `stream` in `table`'s loaded version; `None` when no commit recorded one.
pub(crate) async fn position(
    uri: &str,
    table: &DeltaTable,
    txns: &Txns,
    stream: &str,
) -> Result<Option<String>, LakeError> {
    let Some(length) = txns.version(uri, table, &length_id(stream)).await? else {
        return Ok(None);
    };
    let corrupt = || LakeError::InvalidPosition {
        uri: uri.to_owned(),
        stream: stream.to_owned(),
        position: format!("a recorded length of {length} digits with missing or bad groups"),
    };
    let length = usize::try_from(length)
        .ok()
        .filter(|l| (1..=MAX_POSITION_DIGITS).contains(l))
        .ok_or_else(corrupt)?;
    let groups = length.div_ceil(GROUP);
    let mut padded = String::with_capacity(groups * GROUP);
    for i in 0..groups {
        let value = txns
            .version(uri, table, &group_id(stream, i))
            .await?
            .filter(|v| (0..10i64.pow(GROUP as u32)).contains(v))
            .ok_or_else(corrupt)?;
        padded.push_str(&format!("{value:018}"));
    }
    Ok(Some(padded[padded.len() - length..].to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_compare_by_value() {
        assert_eq!(compare("9", "10"), Ordering::Less);
        assert_eq!(compare("0010", "10"), Ordering::Equal);
        assert_eq!(
            compare(
                "49590338271490256608559692540925702759324208523137515618",
                "49590338271490256608559692538361571095921575989136588898"
            ),
            Ordering::Greater
        );
        assert!(is_position("0"));
        assert!(!is_position(""));
        assert!(!is_position("12a"));
        assert!(!is_position(&"1".repeat(130)));
    }

    #[test]
    fn positions_become_groups_of_eighteen_digits() {
        let seq = "49590338271490256608559692538361571095921575989136588898";
        let actions = transactions("t", "s", seq, 1).unwrap();
        let versions: Vec<(String, i64)> = actions.iter().map(|t| (t.app_id.clone(), t.version)).collect();
        assert_eq!(
            versions,
            vec![
                ("lakelog.position:s:n".to_owned(), 56),
                ("lakelog.position:s:0".to_owned(), 49),
                ("lakelog.position:s:1".to_owned(), 590338271490256608),
                ("lakelog.position:s:2".to_owned(), 559692538361571095),
                ("lakelog.position:s:3".to_owned(), 921575989136588898),
            ]
        );
        assert!(transactions("t", "s", "x1", 1).is_err());
        assert_eq!(transactions("t", "s", "000", 1).unwrap()[0].version, 1);
    }
}
