//! Packing a request's records ([`RecordFormat::Packed`]): the events of a request that share a
//! partition key (all of them, with random keys; a device's, with `device_id` keys) go into as few
//! compressed records as Kinesis' record size allows, in their order ([`game_events::packed`]).
//! Each event is answered with the outcome of the record that holds it.

use game_events::MAX_RECORD_BYTES;
use game_events::packed;

use crate::config::{PartitionKey, RecordFormat};
use crate::deliver::Delivery;
use crate::sink::PutEntry;

/// Room kept in a packed record for its version line, gzip's header and trailer, and blocks that
/// do not compress: the one-event records a packed record holds, each with its 4-byte length, sum
/// to at most [`MAX_RECORD_BYTES`] minus this and the partition key.
const PACKING_MARGIN: usize = 4096;

/// The bytes the one-event records of a packed record under `partition_key` may sum to, each
/// with its 4-byte length.
fn room(partition_key: &str) -> usize {
    MAX_RECORD_BYTES.saturating_sub(PACKING_MARGIN + partition_key.len())
}

/// The records of a request as they are written: each one-event record, or packed records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packs {
    /// The records to write.
    pub entries: Vec<PutEntry>,
    /// For each record, the events (their indexes in the request) it holds.
    pub members: Vec<Vec<usize>>,
}

impl Packs {
    /// The records of `events` (one-event records, in request order) in `format`.
    pub fn new(events: &[PutEntry], format: RecordFormat, partition_key: PartitionKey) -> Self {
        if format == RecordFormat::Seed {
            return Self {
                entries: events.to_vec(),
                members: (0..events.len()).map(|i| vec![i]).collect(),
            };
        }
        // The events of each key, in the order the keys first appear; with random keys, one key.
        let mut groups: Vec<Vec<usize>> = Vec::new();
        let mut group_of_key: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        for (index, event) in events.iter().enumerate() {
            let key = match partition_key {
                PartitionKey::Random => "",
                PartitionKey::DeviceId => event.partition_key.as_str(),
            };
            let group = *group_of_key.entry(key).or_insert_with(|| {
                groups.push(Vec::new());
                groups.len() - 1
            });
            groups[group].push(index);
        }
        let mut packs = Self {
            entries: Vec::new(),
            members: Vec::new(),
        };
        for group in groups {
            let first = &events[group[0]];
            let room = room(&first.partition_key);
            let mut pack: Vec<usize> = Vec::new();
            let mut bytes = 0;
            for index in group {
                let size = events[index].data.len() + 4;
                if !pack.is_empty() && bytes + size > room {
                    packs.push(events, std::mem::take(&mut pack));
                    bytes = 0;
                }
                pack.push(index);
                bytes += size;
            }
            packs.push(events, pack);
        }
        packs
    }

    /// Adds the record of `members`: packed, under the first member's partition key and hash key;
    /// a record alone that would not fit packed stays as it is.
    fn push(&mut self, events: &[PutEntry], members: Vec<usize>) {
        let first = &events[members[0]];
        let entry = if members.len() == 1 && first.data.len() + 4 > room(&first.partition_key) {
            first.clone()
        } else {
            PutEntry {
                data: packed::pack(members.iter().map(|&i| events[i].data.as_ref())).into(),
                partition_key: first.partition_key.clone(),
                explicit_hash_key: first.explicit_hash_key,
            }
        };
        self.entries.push(entry);
        self.members.push(members);
    }

    /// `delivery` of these records as a delivery of the `events` events: each with the outcome
    /// of its record.
    pub fn per_event(&self, delivery: Delivery, events: usize) -> Delivery {
        if self.members.iter().all(|m| m.len() == 1) && self.members.len() == events {
            return delivery;
        }
        let mut outcomes = vec![None; events];
        for (members, outcome) in self.members.iter().zip(delivery.outcomes) {
            for &index in members {
                outcomes[index] = Some(outcome.clone());
            }
        }
        Delivery {
            outcomes: outcomes.into_iter().flatten().collect(),
            calls: delivery.calls,
            rounds: delivery.rounds,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deliver::Outcome;
    use crate::sink::{EntryFailure, Written};

    fn entry(data: &str, key: &str) -> PutEntry {
        PutEntry {
            data: data.as_bytes().to_vec().into(),
            partition_key: key.to_owned(),
            explicit_hash_key: Some(key.len() as u128),
        }
    }

    fn unpacked(entry: &PutEntry) -> Vec<String> {
        packed::unpack(&entry.data)
            .unwrap()
            .into_iter()
            .map(|r| String::from_utf8(r).unwrap())
            .collect()
    }

    #[test]
    fn random_keys_pack_a_request_whole_and_device_keys_by_device_in_order() {
        let events = [entry("a1", "A"), entry("b1", "BB"), entry("a2", "A"), entry("c1", "C")];
        let packs = Packs::new(&events, RecordFormat::Packed, PartitionKey::Random);
        assert_eq!(packs.members, [vec![0, 1, 2, 3]]);
        assert_eq!(unpacked(&packs.entries[0]), ["a1", "b1", "a2", "c1"]);
        assert_eq!(packs.entries[0].partition_key, "A");

        let packs = Packs::new(&events, RecordFormat::Packed, PartitionKey::DeviceId);
        assert_eq!(packs.members, [vec![0, 2], vec![1], vec![3]]);
        assert_eq!(unpacked(&packs.entries[0]), ["a1", "a2"]);
        // Each record keeps its events' key and lane.
        assert_eq!(
            (
                packs.entries[1].partition_key.as_str(),
                packs.entries[1].explicit_hash_key
            ),
            ("BB", Some(2))
        );

        let seed = Packs::new(&events, RecordFormat::Seed, PartitionKey::Random);
        assert_eq!(seed.entries, events);
    }

    #[test]
    fn records_stay_within_kinesis_size_and_a_large_one_alone_as_it_is() {
        let big = "x".repeat(400 * 1024);
        let events = [entry(&big, "k"), entry(&big, "k"), entry(&big, "k")];
        let packs = Packs::new(&events, RecordFormat::Packed, PartitionKey::Random);
        assert_eq!(packs.members, [vec![0, 1], vec![2]]);
        assert!(packs.entries.iter().all(|e| e.size() <= MAX_RECORD_BYTES));
        let huge = "y".repeat(MAX_RECORD_BYTES - 100);
        let packs = Packs::new(&[entry(&huge, "k")], RecordFormat::Packed, PartitionKey::Random);
        assert_eq!(packs.entries[0].data.as_ref(), huge.as_bytes());
    }

    #[test]
    fn each_event_is_answered_with_its_records_outcome() {
        let events = [entry("a1", "A"), entry("b1", "B"), entry("a2", "A")];
        let packs = Packs::new(&events, RecordFormat::Packed, PartitionKey::DeviceId);
        let written = Outcome::Written(Written {
            shard_id: "shardId-000000000001".into(),
            sequence_number: "7".into(),
        });
        let failed = Outcome::Failed(EntryFailure {
            code: "InternalFailure".into(),
            message: "try again".into(),
        });
        let delivery = Delivery {
            outcomes: vec![written.clone(), failed.clone()],
            calls: 1,
            rounds: 1,
        };
        let per_event = packs.per_event(delivery, 3);
        assert_eq!(per_event.outcomes, [written.clone(), failed, written]);
        assert_eq!((per_event.written(), per_event.failed()), (2, 1));
    }
}
