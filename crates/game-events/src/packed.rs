//! Packed records: several events of one request in one Kinesis record, compressed.
//!
//! Kinesis bills records (on-demand rounds each up to 1 KB; a shard takes 1,000 a second), and
//! the seed's record repeats the whole API Gateway request beside every event. A packed record
//! holds the seed-form records of consecutive events of one request that share a partition key,
//! each behind its length, gzip-compressed behind a version line:
//!
//! ```text
//! lakelog-packed/1\n<gzip of: (length: u32, little-endian)(record) (length)(record) ...>
//! ```
//!
//! Each record is exactly the one [`crate::Envelope`] writes for one event (lengths, not line
//! breaks, frame them: a client's JSON kept as written may hold line breaks), so a reader unpacks
//! and then reads each as it reads a one-event record ([`crate::decode_record`]). A record that
//! does not start with the version line is a one-event record, read as it is.

use std::io::{Read, Write};

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;

/// The first line of every packed record: its format and version.
pub const PACKED_V1: &[u8] = b"lakelog-packed/1\n";

/// The most bytes a packed record may unpack to: beyond it the record is refused whole rather
/// than read (a small record that unpacks without end costs nothing to refuse).
pub const MAX_UNPACKED_BYTES: usize = 16 * 1024 * 1024;

/// Why a packed record could not be unpacked; the record is then kept whole as a reject.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PackedError {
    /// The bytes after the version line are not gzip, or end early.
    #[error("packed record (lakelog-packed/1): not gzip after the version line: {reason}")]
    NotGzip {
        /// The decoder's description.
        reason: String,
    },
    /// It unpacks to more than [`MAX_UNPACKED_BYTES`].
    #[error("packed record (lakelog-packed/1): unpacks to more than {MAX_UNPACKED_BYTES} bytes")]
    TooLarge,
    /// A packed record read as one event: it is to be unpacked first.
    #[error("packed record (lakelog-packed/1) of {events} events read as one event: unpack it first")]
    NotUnpacked {
        /// The events it holds.
        events: usize,
    },
    /// A record's length passes the end of what it unpacks to.
    #[error("packed record (lakelog-packed/1): record {index} is cut short ({length} bytes announced, {left} left)")]
    CutShort {
        /// The record's place in the packed record, from 0.
        index: usize,
        /// The length announced.
        length: usize,
        /// The bytes that were left.
        left: usize,
    },
}

/// Whether `data` is a packed record.
pub fn is_packed(data: &[u8]) -> bool {
    data.starts_with(PACKED_V1)
}

/// A packed record holding `records` (one-event records, as [`crate::Envelope`] writes them,
/// each under 4 GiB), in order.
pub fn pack<'a>(records: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = PACKED_V1.to_vec();
    let mut gzip = GzEncoder::new(&mut out, Compression::default());
    for record in records {
        let length = u32::try_from(record.len()).unwrap_or(u32::MAX);
        // Writing into a Vec cannot fail.
        let _ = gzip.write_all(&length.to_le_bytes());
        let _ = gzip.write_all(record);
    }
    let _ = gzip.finish();
    out
}

/// The one-event records of `data`: those a packed record holds, in order, or `data` itself
/// when it is a one-event record.
pub fn unpack(data: &[u8]) -> Result<Vec<Vec<u8>>, PackedError> {
    let Some(packed) = data.strip_prefix(PACKED_V1) else {
        return Ok(vec![data.to_vec()]);
    };
    let mut unpacked = Vec::new();
    let limit = u64::try_from(MAX_UNPACKED_BYTES).unwrap_or(u64::MAX) + 1;
    GzDecoder::new(packed)
        .take(limit)
        .read_to_end(&mut unpacked)
        .map_err(|e| PackedError::NotGzip { reason: e.to_string() })?;
    if unpacked.len() > MAX_UNPACKED_BYTES {
        return Err(PackedError::TooLarge);
    }
    let mut records = Vec::new();
    let mut rest = unpacked.as_slice();
    while !rest.is_empty() {
        let cut = |length| PackedError::CutShort {
            index: records.len(),
            length,
            left: rest.len(),
        };
        let (length, after) = rest.split_first_chunk::<4>().ok_or_else(|| cut(4))?;
        let length = usize::try_from(u32::from_le_bytes(*length)).unwrap_or(usize::MAX);
        if after.len() < length {
            return Err(cut(length));
        }
        let (record, after) = after.split_at(length);
        records.push(record.to_vec());
        rest = after;
    }
    Ok(records)
}

/// The records of a Kinesis batch with each packed record in place of the one-event records it
/// holds. They keep the packed record's sequence number, partition key and arrival, so a packed
/// record is read, staged and delivered again whole; one that cannot be unpacked stays as it is
/// ([`crate::decode_record`] then says why). A batch without packed records is returned as it is.
#[cfg(feature = "kinesis")]
pub fn unpack_records(
    records: &[aws_lambda_events::event::kinesis::KinesisEventRecord],
) -> std::borrow::Cow<'_, [aws_lambda_events::event::kinesis::KinesisEventRecord]> {
    if !records.iter().any(|r| is_packed(&r.kinesis.data)) {
        return std::borrow::Cow::Borrowed(records);
    }
    let mut out = Vec::with_capacity(records.len());
    for record in records {
        // A one-event record is taken as it is, not copied out of itself first.
        let events = is_packed(&record.kinesis.data).then(|| unpack(&record.kinesis.data));
        match events {
            Some(Ok(events)) => {
                for data in events {
                    let mut one = record.clone();
                    *one.kinesis.data = data;
                    out.push(one);
                }
            }
            _ => out.push(record.clone()),
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_come_back_in_order_and_a_one_event_record_as_it_is() {
        let records: [&[u8]; 3] = [
            br#"{"body":{"a":1}}"#,
            b"{\"body\":\n{\"b\":2}}",
            br#"{"body":{"c":3}}"#,
        ];
        let packed = pack(records);
        assert!(is_packed(&packed));
        assert_eq!(unpack(&packed).unwrap(), records.map(<[u8]>::to_vec));
        assert_eq!(unpack(records[0]).unwrap(), vec![records[0].to_vec()]);
        assert!(!is_packed(records[0]));
    }

    /// A mixed batch: a packed record's events in its place, a one-event record and a packed
    /// record that cannot be unpacked as they are, in order.
    #[cfg(feature = "kinesis")]
    #[test]
    fn a_mixed_batch_unpacks_in_order() {
        use aws_lambda_events::event::kinesis::KinesisEventRecord;
        let record = |data: Vec<u8>| {
            let mut record = KinesisEventRecord::default();
            *record.kinesis.data = data;
            record
        };
        let packed = pack([br#"{"body":{"a":1}}"#.as_slice(), br#"{"body":{"b":2}}"#.as_slice()]);
        let mut broken = packed.clone();
        broken.truncate(broken.len() - 3);
        let batch = [
            record(packed),
            record(br#"{"body":{"c":3}}"#.to_vec()),
            record(broken.clone()),
        ];
        let out: Vec<Vec<u8>> = unpack_records(&batch).iter().map(|r| r.kinesis.data.to_vec()).collect();
        assert_eq!(
            out,
            [
                br#"{"body":{"a":1}}"#.to_vec(),
                br#"{"body":{"b":2}}"#.to_vec(),
                br#"{"body":{"c":3}}"#.to_vec(),
                broken
            ]
        );
        let plain = [record(br#"{"body":{"c":3}}"#.to_vec())];
        assert!(matches!(unpack_records(&plain), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn a_request_repeated_beside_each_event_packs_small() {
        let request = format!(r#"{{"headers":{{"User-Agent":"{}"}},"body":"#, "x".repeat(400));
        let records: Vec<Vec<u8>> = (0..100)
            .map(|i| format!(r#"{request}{{"eventName":"e","eventId":"{i:08}"}}}}"#).into_bytes())
            .collect();
        let one_by_one: usize = records.iter().map(Vec::len).sum();
        let packed = pack(records.iter().map(Vec::as_slice));
        assert!(packed.len() * 10 < one_by_one, "{} of {one_by_one}", packed.len());
    }

    #[test]
    fn a_bad_or_endless_packed_record_is_refused_in_words() {
        let mut bad = PACKED_V1.to_vec();
        bad.extend_from_slice(b"not gzip");
        let error = unpack(&bad).unwrap_err();
        assert!(matches!(error, PackedError::NotGzip { .. }), "{error}");
        let mut cut = pack([b"{}".as_slice(); 3]);
        cut.truncate(cut.len() - 6);
        assert!(matches!(unpack(&cut), Err(PackedError::NotGzip { .. })));
        // A length past the end.
        let mut long = PACKED_V1.to_vec();
        let mut gzip = GzEncoder::new(&mut long, Compression::default());
        gzip.write_all(&[9, 0, 0, 0, b'{', b'}']).unwrap();
        gzip.finish().unwrap();
        assert_eq!(
            unpack(&long),
            Err(PackedError::CutShort {
                index: 0,
                length: 9,
                left: 6
            })
        );
        // Zeros compress a thousandfold: a small record that unpacks past the bound.
        let zeros = vec![b'0'; MAX_UNPACKED_BYTES + 1];
        let bomb = pack([zeros.as_slice()]);
        assert!(bomb.len() < 100_000);
        assert_eq!(unpack(&bomb), Err(PackedError::TooLarge));
    }
}
