//! Finding a key seen before among an object's keys in time proportional to their number.
//!
//! A request body is outside input: an object of n distinct keys must cost O(n), not the O(n²)
//! of comparing each key with every earlier one. Objects with few keys (nearly all) are scanned,
//! which is fastest for them; past [`SCAN_LIMIT`] keys a hash index (SipHash, seeded per process,
//! so that colliding keys cannot be chosen in advance) takes over.

use std::borrow::Cow;
use std::collections::HashMap;

/// Keys compared one by one before the index is built.
const SCAN_LIMIT: usize = 16;

/// The position of each distinct key of an object, in the order first seen.
#[derive(Debug, Clone, Default)]
pub(crate) struct KeyIndex<'a> {
    keys: Vec<Cow<'a, str>>,
    index: Option<HashMap<Cow<'a, str>, usize>>,
}

impl<'a> KeyIndex<'a> {
    /// The position of `key` if it was seen; otherwise records it at the next position and
    /// returns `Err` with that position.
    pub(crate) fn find_or_insert(&mut self, key: Cow<'a, str>) -> Result<usize, usize> {
        let found = match &self.index {
            Some(index) => index.get(key.as_ref()).copied(),
            None => self.keys.iter().position(|k| *k == key),
        };
        if let Some(position) = found {
            return Ok(position);
        }
        let position = self.keys.len();
        match &mut self.index {
            Some(index) => {
                index.insert(key.clone(), position);
            }
            None if position >= SCAN_LIMIT => {
                let mut index: HashMap<Cow<'a, str>, usize> = HashMap::with_capacity(position * 2);
                index.extend(self.keys.iter().cloned().zip(0..));
                index.insert(key.clone(), position);
                self.index = Some(index);
            }
            None => {}
        }
        self.keys.push(key);
        Err(position)
    }

    /// Records `key`; false when it was seen before.
    pub(crate) fn insert(&mut self, key: Cow<'a, str>) -> bool {
        self.find_or_insert(key).is_err()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_of_keys_before_and_after_the_index() {
        let mut keys = KeyIndex::default();
        for n in 0..1000 {
            assert_eq!(keys.find_or_insert(Cow::Owned(format!("k{n}"))), Err(n));
        }
        for n in [0, 15, 16, 17, 999] {
            assert_eq!(keys.find_or_insert(Cow::Owned(format!("k{n}"))), Ok(n));
        }
        assert!(keys.insert(Cow::Borrowed("new")));
        assert!(!keys.insert(Cow::Borrowed("new")));
        let mut few = KeyIndex::default();
        assert!(few.insert(Cow::Borrowed("a")) && few.insert(Cow::Borrowed("b")));
        assert!(!few.insert(Cow::Borrowed("a")));
        assert!(few.index.is_none());
    }
}
