//! Texts numbered once: the short texts the game report's walks carry per row (platforms,
//! event names, acquisition parameters, variants) are held as numbers, each text kept once.

use std::collections::HashMap;

/// Each text read, once, by its number (from 0, in the order first read).
#[derive(Debug, Default)]
pub(super) struct Texts {
    texts: Vec<Box<str>>,
    numbers: HashMap<Box<str>, u32, foldhash::fast::RandomState>,
}

impl Texts {
    /// The number of `text`, given it now if it has none.
    pub(super) fn number(&mut self, text: &str) -> u32 {
        if let Some(&n) = self.numbers.get(text) {
            return n;
        }
        let n = self.texts.len() as u32;
        self.texts.push(text.into());
        self.numbers.insert(text.into(), n);
        n
    }

    /// The text of number `n`.
    pub(super) fn get(&self, n: u32) -> Option<&str> {
        self.texts.get(n as usize).map(|t| &**t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_keeps_its_number() {
        let mut texts = Texts::default();
        assert_eq!(
            (texts.number("ios"), texts.number("android"), texts.number("ios")),
            (0, 1, 0)
        );
        assert_eq!((texts.get(1), texts.get(2)), (Some("android"), None));
    }
}
