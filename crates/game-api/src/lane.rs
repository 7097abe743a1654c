//! Lanes: each game's share of the stream, so that one game's flood cannot crowd out the others.
//!
//! Kinesis puts a record in the shard whose range of 128-bit hash keys holds the record's hash key:
//! the MD5 of its partition key, or an explicit hash key the writer gives. A lane `K/N` is the
//! `K`th of `N` equal parts of that range (0-based). The API writes a game's records with explicit
//! hash keys inside the game's lane, spread over it by the MD5 of their partition key (so that
//! `device_id` keys still keep a device's events in one shard). With `N` equal to the stream's
//! shard count (or a multiple of a divisor of it), each lane is a set of whole shards: a game that
//! sends more than its shards take is throttled there, and only there. Its requests get 429 with
//! `Retry-After`; every other game's records go to other shards, which their sink instances drain
//! at their own pace. A game without a lane shares the whole range with every other such game.

use md5::{Digest, Md5};

/// The most lanes a stream may be cut into.
pub const MAX_LANES: u32 = 1024;

/// The `index`th of `count` equal parts of the stream's hash key range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lane {
    index: u32,
    count: u32,
}

/// A lane that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a lane: expected K/N with 0 <= K < N <= 1024, such as 0/4")]
pub struct LaneError {
    /// The text given.
    pub text: String,
}

impl Lane {
    /// The whole stream: one lane of one.
    pub const WHOLE: Lane = Lane { index: 0, count: 1 };

    /// The `index`th (0-based) of `count` lanes; `None` unless `index < count <= MAX_LANES`.
    pub fn new(index: u32, count: u32) -> Option<Self> {
        (index < count && count <= MAX_LANES).then_some(Self { index, count })
    }

    /// Its index, 0-based.
    pub fn index(self) -> u32 {
        self.index
    }

    /// How many lanes the stream is cut into.
    pub fn count(self) -> u32 {
        self.count
    }

    /// The first and the last hash key of the lane.
    fn range(self) -> (u128, u128) {
        if self.count == 1 {
            return (0, u128::MAX);
        }
        // The range holds 2^128 keys: each lane 2^128 / count of them, rounded up, and the last
        // lane ends at u128::MAX.
        let step = u128::MAX / u128::from(self.count) + 1;
        let start = step * u128::from(self.index);
        let last = if self.index + 1 == self.count {
            u128::MAX
        } else {
            start + (step - 1)
        };
        (start, last)
    }

    /// The explicit hash key of a record with `partition_key` in this lane: inside the lane, spread
    /// over it by the MD5 of the key, as Kinesis spreads keys over the whole range.
    pub fn hash_key(self, partition_key: &str) -> u128 {
        let hash = md5_of(partition_key);
        match self.range() {
            (0, u128::MAX) => hash,
            (start, last) => start + hash % (last - start + 1),
        }
    }

    /// Whether `hash_key` is in this lane.
    pub fn holds(self, hash_key: u128) -> bool {
        let (start, last) = self.range();
        (start..=last).contains(&hash_key)
    }
}

/// Kinesis' hash key of a partition key: its MD5, as a big-endian 128-bit number.
pub fn md5_of(partition_key: &str) -> u128 {
    u128::from_be_bytes(Md5::digest(partition_key.as_bytes()).into())
}

impl std::fmt::Display for Lane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl std::str::FromStr for Lane {
    type Err = LaneError;

    /// `K/N`, such as `0/4`.
    fn from_str(text: &str) -> Result<Self, LaneError> {
        let bad = || LaneError {
            text: text.chars().take(40).collect(),
        };
        let (index, count) = text.trim().split_once('/').ok_or_else(bad)?;
        let index = index.trim().parse().map_err(|_| bad())?;
        let count = count.trim().parse().map_err(|_| bad())?;
        Lane::new(index, count).ok_or_else(bad)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_cut_the_range_into_equal_parts_that_cover_it() {
        for count in [1, 2, 3, 4, 7, 1024] {
            let mut next = Some(0u128);
            for index in 0..count {
                let (start, last) = Lane::new(index, count).unwrap().range();
                assert_eq!(Some(start), next, "{index}/{count}");
                next = last.checked_add(1);
            }
            assert_eq!(next, None, "{count} lanes end at the top of the range");
        }
        // Lanes of four are the four shards a stream of four starts with.
        assert_eq!(Lane::new(1, 4).unwrap().range(), (1 << 126, (2 << 126) - 1));
    }

    #[test]
    fn hash_keys_stay_in_the_lane_and_follow_the_partition_key() {
        let lane: Lane = "2/4".parse().unwrap();
        let keys: Vec<u128> = (0..1000).map(|i| lane.hash_key(&format!("device-{i}"))).collect();
        assert!(keys.iter().all(|&k| lane.holds(k)));
        assert!(!Lane::new(1, 4).unwrap().holds(keys[0]));
        assert_eq!(lane.hash_key("device-7"), keys[7], "one device, one shard");
        // Spread over the lane: both halves of it get keys.
        let middle = (2u128 << 126) + (1 << 125);
        assert!(keys.iter().any(|&k| k < middle) && keys.iter().any(|&k| k >= middle));
        // The whole range is Kinesis' own mapping.
        let whole = Lane::new(0, 1).unwrap();
        assert_eq!(whole.hash_key("abc"), md5_of("abc"));
        assert_eq!(md5_of("abc"), 0x900150983cd24fb0d6963f7d28e17f72);
    }

    #[test]
    fn lanes_are_read_as_k_of_n() {
        assert_eq!("0/4".parse::<Lane>().unwrap().to_string(), "0/4");
        assert_eq!(" 3 / 8 ".parse::<Lane>().unwrap(), Lane::new(3, 8).unwrap());
        for bad in ["4/4", "1", "a/4", "0/0", "0/2000", "-1/4", ""] {
            let err = bad.parse::<Lane>().unwrap_err();
            assert!(err.to_string().contains("is not a lane"), "{bad}: {err}");
        }
    }
}
