//! Splits one access-log line into its fields as borrowed slices.
//!
//! S3 separates fields by spaces, wraps the request time in `[...]` and the request URI, referer and
//! user agent in double quotes, without escaping quotes inside them. A quoted field therefore cannot be
//! closed at the first `"`; each one is closed where the rest of the line has the shape that must follow
//! it:
//!
//! * the request URI (field 9) closes at the first `"` followed by what always follows it: an HTTP
//!   status (three digits or `-`), an error code, four numbers (or `-`) and the start of the referer;
//! * the referer (field 16) closes at the first `"` followed by spaces and the start of the user agent
//!   (a `"` or a lone `-`);
//! * the user agent (field 17) is followed by up to ten named fields that never contain quotes, so it
//!   closes at the first `"` that ends the line or is followed by ten words (or all the rest) free of
//!   quotes. Fields past the 27th may contain quotes; they are beyond that horizon.
//!
//! A referer that itself contains `" "` is ambiguous in the format; the tokenizer then gives the
//! referer the shorter reading, and every other field is still recovered.

use std::borrow::Cow;

use crate::error::ParseError;
use crate::field::Field;

/// The number of fields that have a name; anything after them is kept verbatim.
pub const NAMED_FIELDS: usize = 27;

/// The fewest fields a line may have: everything up to and including the user agent.
pub const MIN_FIELDS: usize = 17;

/// The fields of one line, borrowed from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fields<'a> {
    line: &'a [u8],
    fields: [&'a [u8]; NAMED_FIELDS],
    count: usize,
    extra: Option<&'a [u8]>,
    /// Whether the whole line is UTF-8. Every slice above begins and ends next to an ASCII
    /// delimiter (a space, bracket or quote) or at an end of the line, so at a character boundary:
    /// when the line is UTF-8, so is each of them. (Fields past `count` hold a static `-`.)
    utf8: bool,
}

impl<'a> Fields<'a> {
    /// Splits `line` (without its line terminator) into fields.
    #[inline]
    pub fn split(line: &'a [u8]) -> Result<Self, ParseError> {
        let mut fields = Self::unsplit(line);
        fields.split_in_place()?;
        Ok(fields)
    }

    /// The fields of `line` before it is split: none.
    #[inline(always)]
    pub(crate) fn unsplit(line: &'a [u8]) -> Self {
        Fields {
            line,
            // Fields the line's era lacks read as `-`, as null as a `-` in the line.
            fields: [b"-"; NAMED_FIELDS],
            count: 0,
            extra: None,
            utf8: false,
        }
    }

    /// Splits the line of an [`unsplit`](Self::unsplit) value, in place: the fields are written
    /// where the caller keeps them rather than moved there.
    #[inline(always)]
    pub(crate) fn split_in_place(&mut self) -> Result<(), ParseError> {
        let line = self.line;
        let words = line.len().div_ceil(64);
        if words <= STACK_WORDS {
            let mut spaces = [0; STACK_WORDS];
            let mut quotes = [0; STACK_WORDS];
            let index = Index::new(line, &mut spaces[..words], &mut quotes[..words]);
            self.split_indexed(&index)
        } else {
            let (mut spaces, mut quotes) = (vec![0; words], vec![0; words]);
            self.split_indexed(&Index::new(line, &mut spaces, &mut quotes))
        }
    }

    #[inline(always)]
    fn split_indexed(&mut self, index: &Index<'a, '_>) -> Result<(), ParseError> {
        let line = index.line;
        let mut found = Found {
            index,
            fields: &mut self.fields,
            count: 0,
            words: index.words(0),
        };
        found.split()?;
        let (count, pos) = (found.count, found.words.pos);
        if count < MIN_FIELDS {
            return Err(ParseError::TooFewFields {
                count,
                missing: Field::ALL[count],
            });
        }
        self.count = count;
        self.extra = (pos < line.len()).then(|| trim_end_spaces(&line[pos..]));
        self.utf8 = index.ascii || std::str::from_utf8(line).is_ok();
        Ok(())
    }

    /// How many named fields the line has (17 to 27).
    pub fn count(&self) -> usize {
        self.count
    }

    /// The raw text of `field`, without brackets or quotes; `None` when the line is of an era that
    /// predates the field.
    #[inline]
    pub fn get(&self, field: Field) -> Option<&'a [u8]> {
        let index = field as usize;
        (index < self.count).then(|| self.fields[index])
    }

    /// Everything after the 27th field, verbatim.
    pub fn extra(&self) -> Option<&'a [u8]> {
        self.extra
    }

    /// The text of `field`, `None` if it is `-` or the line's era lacks it. Borrowed from the line
    /// when the line is UTF-8, with replacement characters for the bytes that are not otherwise.
    #[inline(always)]
    pub(crate) fn text(&self, field: Field) -> Option<Cow<'a, str>> {
        // Fields past `count` are `-`: no branch on the line's era.
        let raw = self.fields[field as usize];
        (raw != b"-").then(|| self.text_of(raw))
    }

    /// Whether the whole line is UTF-8.
    #[inline(always)]
    pub(crate) fn is_utf8(&self) -> bool {
        self.utf8
    }

    /// [`text`](Self::text) of a line that is UTF-8.
    ///
    /// # Safety
    /// [`is_utf8`](Self::is_utf8) must be true.
    #[inline(always)]
    pub(crate) unsafe fn utf8_text(&self, field: Field) -> Option<Cow<'a, str>> {
        let raw = self.fields[field as usize];
        debug_assert!(self.utf8);
        // SAFETY: the caller checked that the line is UTF-8; see `text_of`.
        (raw != b"-").then(|| Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(raw) }))
    }

    /// The text of everything after the 27th field.
    pub(crate) fn extra_text(&self) -> Option<Cow<'a, str>> {
        self.extra.map(|raw| self.text_of(raw))
    }

    /// `field` as a non-negative integer of at most 18 digits: `Ok(None)` when it is `-` or the
    /// line's era lacks it, `Err` with its text when it is something else.
    #[inline(always)]
    pub(crate) fn number(&self, field: Field) -> Result<Option<i64>, &'a [u8]> {
        match self.get(field) {
            None | Some(b"-") => Ok(None),
            Some(raw) => unsigned(self.line, raw).map(Some).ok_or(raw),
        }
    }

    /// `raw` is one of the slices this value holds.
    #[inline(always)]
    fn text_of(&self, raw: &'a [u8]) -> Cow<'a, str> {
        if self.utf8 {
            debug_assert!(std::str::from_utf8(raw).is_ok());
            // SAFETY: `raw` is a field or the extra fields of a line that is valid UTF-8, cut at
            // character boundaries (see `utf8`), so it is valid UTF-8 itself.
            Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(raw) })
        } else {
            String::from_utf8_lossy(raw)
        }
    }
}

/// The fields of a line as the tokenizer finds them, one after the other.
struct Found<'a, 'm, 'i, 'f> {
    index: &'i Index<'a, 'm>,
    fields: &'f mut [&'a [u8]; NAMED_FIELDS],
    count: usize,
    /// The words from the next field on.
    words: Words<'a, 'm, 'i>,
}

impl<'a, 'm, 'i> Found<'a, 'm, 'i, '_> {
    /// Finds the fields in order until the line or the named fields end. Written out field by
    /// field rather than as one loop over a `match`, so that each branch is taken the same way on
    /// nearly every line.
    #[inline(always)]
    fn split(&mut self) -> Result<(), ParseError> {
        const TIME: usize = Field::RequestTime as usize;
        const URI: usize = Field::RequestUri as usize;
        const REFERER: usize = Field::Referer as usize;
        const AGENT: usize = Field::UserAgent as usize;
        let line = self.index.line;
        if !self.plain_until(TIME)
            || !self.delimited(b'[', |index, pos| {
                let (value, next) = close_bracket(line, pos)?;
                Ok((value, index.words(next)))
            })?
            || !self.plain_until(URI)
        {
            return Ok(());
        }
        match line.get(self.words.pos) {
            None => return Ok(()),
            Some(b'"') => {
                let (value, _, after) =
                    self.index
                        .close_quote(self.words.pos, Field::RequestUri, request_uri_closes_at)?;
                self.fields[URI] = value;
                // Checking where the URI closes has split the six fields after it already.
                self.count = URI + 1 + after.fields.len();
                for (slot, range) in self.fields[URI + 1..].iter_mut().zip(after.fields) {
                    *slot = &line[range];
                }
                self.words = after.rest;
            }
            Some(_) => {
                self.plain_until(URI + 1);
            }
        }
        let _ = self.plain_until(REFERER)
            && self.delimited(b'"', |index, pos| {
                let (value, next, ()) = index.close_quote(pos, Field::Referer, referer_closes_at)?;
                Ok((value, index.words(next)))
            })?
            && self.plain_until(AGENT)
            && self.delimited(b'"', |index, pos| {
                let (value, next, ()) = index.close_quote(pos, Field::UserAgent, user_agent_closes_at)?;
                Ok((value, index.words(next)))
            })?
            && self.plain_until(NAMED_FIELDS);
        Ok(())
    }

    /// Takes words as fields until there are `end` fields; false if the line ends first.
    #[inline(always)]
    fn plain_until(&mut self, end: usize) -> bool {
        while self.count < end {
            let Some(word) = self.words.next() else {
                return false;
            };
            self.fields[self.count] = &self.index.line[word];
            self.count += 1;
        }
        true
    }

    /// The next field: when it begins with `open`, `close` finds its end (giving its text and the
    /// words after it); otherwise it is a word. False if the line has ended.
    #[inline(always)]
    fn delimited(
        &mut self,
        open: u8,
        close: impl FnOnce(&'i Index<'a, 'm>, usize) -> Result<(&'a [u8], Words<'a, 'm, 'i>), ParseError>,
    ) -> Result<bool, ParseError> {
        match self.index.line.get(self.words.pos) {
            None => Ok(false),
            Some(&first) if first == open => {
                let (value, words) = close(self.index, self.words.pos)?;
                self.fields[self.count] = value;
                self.count += 1;
                self.words = words;
                Ok(true)
            }
            Some(_) => Ok(self.plain_until(self.count + 1)),
        }
    }
}

/// Lines of up to this many 64-byte blocks (2 KiB) keep their index on the stack; nearly all do.
const STACK_WORDS: usize = 32;

/// Where the spaces and double quotes of a line are, one bit per byte: bit `i % 64` of word `i / 64`
/// stands for byte `i`. Built in one pass over the line (sixteen bytes at a time where the CPU
/// allows), it turns every search of the tokenizer into a few bit operations.
struct Index<'a, 'm> {
    line: &'a [u8],
    spaces: &'m [u64],
    quotes: &'m [u64],
    /// Whether every byte of the line is ASCII.
    ascii: bool,
}

impl<'a, 'm> Index<'a, 'm> {
    /// Indexes `line` into `spaces` and `quotes`, which have `line.len().div_ceil(64)` words.
    #[inline(always)]
    fn new(line: &'a [u8], spaces: &'m mut [u64], quotes: &'m mut [u64]) -> Self {
        let mut high = 0;
        let mut blocks = line.chunks_exact(64);
        let mut words = spaces.iter_mut().zip(quotes.iter_mut());
        for (block, (space, quote)) in blocks.by_ref().zip(words.by_ref()) {
            // `chunks_exact(64)` yields 64-byte blocks only.
            if let Some(block) = block.first_chunk::<64>() {
                let masks = Masks::of(block);
                (*space, *quote) = (masks.spaces, masks.quotes);
                high |= masks.high;
            }
        }
        let rest = blocks.remainder();
        if let Some((space, quote)) = words.next() {
            // The last, partial block, padded with bytes that are neither spaces nor quotes.
            let mut block = [0; 64];
            block[..rest.len()].copy_from_slice(rest);
            let masks = Masks::of(&block);
            (*space, *quote) = (masks.spaces, masks.quotes);
            high |= masks.high;
        }
        Index {
            line,
            spaces,
            quotes,
            ascii: high == 0,
        }
    }

    /// The first position at or after `pos` whose bit is set in `bits` (each word XORed with
    /// `flip`), or the length of the line if there is none.
    #[inline(always)]
    fn next_set(&self, bits: &[u64], flip: u64, pos: usize) -> usize {
        let len = self.line.len();
        let mut word = pos / 64;
        let Some(&first) = bits.get(word) else {
            return len;
        };
        let found = (first ^ flip) >> (pos % 64);
        if found != 0 {
            // Padding bits past the end are set when flipped: stop at the end.
            return (pos + found.trailing_zeros() as usize).min(len);
        }
        loop {
            word += 1;
            let Some(&next) = bits.get(word) else {
                return len;
            };
            let found = next ^ flip;
            if found != 0 {
                return (word * 64 + found.trailing_zeros() as usize).min(len);
            }
        }
    }

    /// The position of the first space at or after `pos`, or the length of the line.
    #[cfg(test)]
    fn next_space(&self, pos: usize) -> usize {
        self.next_set(self.spaces, 0, pos)
    }

    /// The position of the first byte other than a space at or after `pos`, or the length of the
    /// line.
    #[inline(always)]
    fn next_non_space(&self, pos: usize) -> usize {
        self.next_set(self.spaces, !0, pos)
    }

    /// The position of the first `"` at or after `pos`, or the length of the line.
    #[inline(always)]
    fn next_quote(&self, pos: usize) -> usize {
        self.next_set(self.quotes, 0, pos)
    }

    /// Where the space-ness of the line changes in word `word`: bit `i` is set when byte
    /// `64 word + i` is a space and the byte before is not, or the other way round. The line is as
    /// if a space preceded it, and the padding after it is not spaces.
    #[inline(always)]
    fn changes(&self, word: usize) -> u64 {
        let spaces = self.spaces.get(word).copied().unwrap_or(0);
        let before = match word.checked_sub(1) {
            Some(previous) => self.spaces.get(previous).map_or(0, |&s| s >> 63),
            None => 1,
        };
        spaces ^ (spaces << 1 | before)
    }

    /// The words of the line (runs of bytes other than spaces) from `pos` on.
    #[inline(always)]
    fn words(&self, pos: usize) -> Words<'a, 'm, '_> {
        let start = self.next_non_space(pos);
        let word = start / 64;
        // The changes after `start`: the end of the word that begins there comes first.
        let changes = self.changes(word) & (!1u64 << (start % 64));
        Words {
            index: self,
            pos: start,
            word,
            changes,
        }
    }

    /// A quoted field opened at `start`, closed at the first `"` for which
    /// `closes_at(self, quote_position)` gives a value. Gives the text between the quotes, the
    /// position after the closing quote and that value.
    #[inline(always)]
    fn close_quote<'i, T>(
        &'i self,
        start: usize,
        field: Field,
        closes_at: impl Fn(&'i Self, usize) -> Option<T>,
    ) -> Result<(&'a [u8], usize, T), ParseError> {
        let line = self.line;
        let body = start + 1;
        let mut quote = self.next_quote(body);
        while quote < line.len() {
            if let Some(found) = closes_at(self, quote) {
                return Ok((&line[body..quote], quote + 1, found));
            }
            quote = self.next_quote(quote + 1);
        }
        Err(ParseError::Unterminated {
            field,
            expected: field.closing_context(),
        })
    }
}

/// The spaces, the quotes and the bytes with their high bit set of one 64-byte block.
struct Masks {
    spaces: u64,
    quotes: u64,
    /// Not zero when a byte is not ASCII.
    high: u64,
}

impl Masks {
    #[inline(always)]
    fn of(block: &[u8; 64]) -> Self {
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
        {
            // SAFETY: the build targets a CPU with SSE2 (every x86-64 CPU has it).
            unsafe { Self::sse2(block) }
        }
        #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
        {
            Self::words(block)
        }
    }

    /// Sixteen bytes at a time with SSE2.
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    #[target_feature(enable = "sse2")]
    fn sse2(block: &[u8; 64]) -> Self {
        use std::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8, _mm_setzero_si128,
        };
        let (space, quote) = (_mm_set1_epi8(b' ' as i8), _mm_set1_epi8(b'"' as i8));
        let (mut spaces, mut quotes, mut high) = (0, 0, _mm_setzero_si128());
        for (i, lane) in block.chunks_exact(16).enumerate() {
            // SAFETY: `lane` is 16 bytes long, and `_mm_loadu_si128` reads 16 bytes at any alignment.
            let v = unsafe { _mm_loadu_si128(lane.as_ptr().cast::<__m128i>()) };
            // `movemask` sets the low 16 bits only: one per byte, from its high bit.
            let bits = |m: __m128i| u64::from(_mm_movemask_epi8(m) as u16) << (16 * i);
            spaces |= bits(_mm_cmpeq_epi8(v, space));
            quotes |= bits(_mm_cmpeq_epi8(v, quote));
            high = _mm_or_si128(high, v);
        }
        Masks {
            spaces,
            quotes,
            high: u64::from(_mm_movemask_epi8(high) as u16),
        }
    }

    /// Eight bytes at a time in a `u64`, on CPUs without a vector unit this code knows.
    #[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
    fn words(block: &[u8; 64]) -> Self {
        let (mut spaces, mut quotes, mut high) = (0, 0, 0);
        for (i, lane) in block.chunks_exact(8).enumerate() {
            let word = lane.first_chunk::<8>().map_or(0, |w| u64::from_le_bytes(*w));
            spaces |= gather(equal_bytes(word, b' ')) << (8 * i);
            quotes |= gather(equal_bytes(word, b'"')) << (8 * i);
            high |= word & HIGHS;
        }
        Masks { spaces, quotes, high }
    }
}

const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
const LOWS: u64 = u64::from_ne_bytes([0x7F; 8]);

/// The high bit of every byte of `word` that equals `byte`, and no other bit.
#[inline(always)]
fn equal_bytes(word: u64, byte: u8) -> u64 {
    let x = word ^ u64::from_ne_bytes([byte; 8]);
    // A byte of `x` is zero exactly when neither its high bit nor, after adding 0x7F to its low
    // seven bits (which cannot carry into the next byte), its high bit is set.
    !(((x & LOWS) + LOWS) | x | LOWS)
}

/// The high bits of the eight bytes of `word` (and no other bit set) as bits 0 to 7.
#[inline(always)]
fn gather(word: u64) -> u64 {
    // Byte `i`'s bit, moved to bit `8 i`, times a multiplier with bit `56 - 7 i` set lands on
    // bit `56 + i`; no two partial products meet in the top byte, so no carry reaches it.
    (word >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56
}

const ZEROS: u64 = u64::from_ne_bytes([b'0'; 8]);

/// The value of `raw`, a slice of `line`, if it is 1 to 18 ASCII digits. Up to 16 digits are read
/// from one or two eight-byte windows of the line that end where `raw` ends, without a branch on
/// each digit.
#[inline(always)]
fn unsigned(line: &[u8], raw: &[u8]) -> Option<i64> {
    let n = raw.len();
    // Where `raw` is in `line`. The fields always are slices of their line; anything else takes
    // the slow path, which reads `raw` itself.
    let start = (raw.as_ptr() as usize).wrapping_sub(line.as_ptr() as usize);
    let end = start.wrapping_add(n);
    let within = line.get(start..end).is_some_and(|s| s.as_ptr() == raw.as_ptr());
    let fast = match n {
        _ if !within => None,
        1..=8 => window_ending_at(line, end).map(|last| last_digits(last, n)),
        9..=16 => window_ending_at(line, end.wrapping_sub(8))
            .zip(window_ending_at(line, end))
            .map(|(high, low)| Some(last_digits(high, n - 8)? * 100_000_000 + last_digits(low, 8)?)),
        _ => None,
    };
    let value = match fast {
        Some(value) => value,
        None if n == 0 || n > 18 => None,
        None => raw.iter().try_fold(0u64, |acc, &b| {
            b.is_ascii_digit().then(|| acc * 10 + u64::from(b - b'0'))
        }),
    };
    // At most 18 digits: always below `i64::MAX`.
    value.map(|v| v as i64)
}

/// The eight bytes of `line` that end at `end`, as a little-endian word, if the line has them.
#[inline(always)]
fn window_ending_at(line: &[u8], end: usize) -> Option<u64> {
    let window = line.get(end.checked_sub(8)?..end)?;
    window.first_chunk::<8>().map(|w| u64::from_le_bytes(*w))
}

/// The value of the last `n` (1 to 8) bytes of `word` (its highest, in little-endian order) as
/// decimal digits, or `None` if one of them is not an ASCII digit.
#[inline(always)]
fn last_digits(word: u64, n: usize) -> Option<u64> {
    debug_assert!((1..=8).contains(&n));
    // Digit values; the bytes before the digits count as leading zeros.
    let x = (word ^ ZEROS) & (u64::MAX << (8 * (8 - n.clamp(1, 8))));
    // A byte is a digit when its value is below 10, and adding 0x76 then leaves its high bit
    // clear. No carry crosses bytes unless a byte is already 0x80 or more, which fails anyway.
    if (x.wrapping_add(0x7676_7676_7676_7676) | x) & HIGHS != 0 {
        return None;
    }
    // Pairs of digits into bytes, then the pairs into fours and the fours into eight; the first
    // digit is in the lowest byte.
    let x = x.wrapping_mul(10).wrapping_add(x >> 8);
    const LOW_BYTES: u64 = 0x0000_00FF_0000_00FF;
    let x = ((x & LOW_BYTES).wrapping_mul(100 + (1_000_000 << 32)))
        .wrapping_add(((x >> 16) & LOW_BYTES).wrapping_mul(1 + (10_000 << 32)))
        >> 32;
    Some(x & 0xFFFF_FFFF)
}

/// Whether `word`, a word of `line` ending at `end`, is `-` or ASCII digits only.
#[inline(always)]
fn is_number_or_dash(line: &[u8], word: std::ops::Range<usize>) -> bool {
    let n = word.len();
    let end = word.end;
    let text = &line[word];
    if text == b"-" {
        return true;
    }
    match (n, window_ending_at(line, end)) {
        (1..=8, Some(last)) => last_digits(last, n).is_some(),
        _ => text.iter().all(u8::is_ascii_digit),
    }
}

fn trim_end_spaces(mut s: &[u8]) -> &[u8] {
    while let [rest @ .., b' '] = s {
        s = rest;
    }
    s
}

/// A high bit in each byte of `word` that equals `byte`: exact up to the first such byte, which is
/// all [`find_either`] needs.
#[inline(always)]
fn bytes_equal(word: u64, byte: u8) -> u64 {
    let x = word ^ u64::from_ne_bytes([byte; 8]);
    x.wrapping_sub(ONES) & !x & HIGHS
}

/// The position of the first `byte` in `s`, eight bytes at a time.
#[inline]
pub(crate) fn find_byte(s: &[u8], byte: u8) -> Option<usize> {
    find_either(s, byte, byte)
}

/// The position of the first `a` or `b` in `s`, eight bytes at a time. The spans searched are
/// mostly short, and for them `memchr`'s set-up costs more than the search.
#[inline]
pub(crate) fn find_either(s: &[u8], a: u8, b: u8) -> Option<usize> {
    let mut i = 0;
    while let Some(chunk) = s[i..].first_chunk::<8>() {
        let word = u64::from_le_bytes(*chunk);
        // Each mask is exact up to its first match, so the lowest bit of either is the first match.
        let found = bytes_equal(word, a) | bytes_equal(word, b);
        if found != 0 {
            return Some(i + found.trailing_zeros() as usize / 8);
        }
        i += 8;
    }
    s[i..].iter().position(|&c| c == a || c == b).map(|j| i + j)
}

/// `[06/Feb/2019:00:00:38 +0000]`: the text between the brackets.
fn close_bracket(line: &[u8], start: usize) -> Result<(&[u8], usize), ParseError> {
    match find_byte(&line[start + 1..], b']') {
        Some(i) => {
            let end = start + 1 + i;
            Ok((&line[start + 1..end], end + 1))
        }
        None => Err(ParseError::Unterminated {
            field: Field::RequestTime,
            expected: "]",
        }),
    }
}

/// Words of a line, found by walking the changes of space-ness: each word ends at the next
/// change and the next word begins at the one after.
#[derive(Clone)]
struct Words<'a, 'm, 'i> {
    index: &'i Index<'a, 'm>,
    /// Where the next word begins, or the length of the line when there is none.
    pos: usize,
    /// The word of the index that holds the next change.
    word: usize,
    /// The changes after `pos` in that word.
    changes: u64,
}

impl Words<'_, '_, '_> {
    /// The position of the next change, or the length of the line.
    #[inline(always)]
    fn next_change(&mut self) -> usize {
        while self.changes == 0 {
            if self.word + 1 >= self.index.spaces.len() {
                return self.index.line.len();
            }
            self.word += 1;
            self.changes = self.index.changes(self.word);
        }
        let at = self.word * 64 + self.changes.trailing_zeros() as usize;
        self.changes &= self.changes - 1;
        // Padding is not spaces, so a change there can only be where the line ends.
        at.min(self.index.line.len())
    }
}

impl Iterator for Words<'_, '_, '_> {
    type Item = std::ops::Range<usize>;

    /// Where the next word begins and ends.
    #[inline(always)]
    fn next(&mut self) -> Option<std::ops::Range<usize>> {
        let start = self.pos;
        if start >= self.index.line.len() {
            return None;
        }
        let end = self.next_change();
        self.pos = if end < self.index.line.len() {
            self.next_change()
        } else {
            end
        };
        Some(start..end)
    }
}

/// The six fields that follow a request URI, and the words after them.
struct AfterUri<'a, 'm, 'i> {
    fields: [std::ops::Range<usize>; 6],
    rest: Words<'a, 'm, 'i>,
}

/// After the request URI come the HTTP status, the error code, four numbers and the referer.
fn request_uri_closes_at<'a, 'm, 'i>(index: &'i Index<'a, 'm>, quote: usize) -> Option<AfterUri<'a, 'm, 'i>> {
    let line = index.line;
    if line.get(quote + 1) != Some(&b' ') {
        return None;
    }
    let mut rest = index.words(quote + 1);
    let status = rest.next()?;
    if !(&line[status.clone()] == b"-" || (status.len() == 3 && is_number_or_dash(line, status.clone()))) {
        return None;
    }
    let error = rest.next()?;
    let mut numbers = [0, 1, 2, 3].map(|_| 0..0);
    for number in &mut numbers {
        *number = rest.next().filter(|w| is_number_or_dash(line, w.clone()))?;
    }
    let referer = &line[rest.clone().next()?];
    if !(referer.first() == Some(&b'"') || referer == b"-") {
        return None;
    }
    let [n1, n2, n3, n4] = numbers;
    Some(AfterUri {
        fields: [status, error, n1, n2, n3, n4],
        rest,
    })
}

/// After the user agent come fields 18 to 27, none of which contains a quote.
fn user_agent_closes_at(index: &Index<'_, '_>, quote: usize) -> Option<()> {
    let closes = match index.line.get(quote + 1) {
        None => true,
        // The next ten words are free of quotes when the next quote, if any, is in a later word.
        Some(b' ') => {
            let next_quote = index.next_quote(quote + 1);
            next_quote == index.line.len()
                || index
                    .words(quote + 1)
                    .take_while(|word| word.start <= next_quote)
                    .nth(NAMED_FIELDS - Field::UserAgent.number())
                    .is_some()
        }
        Some(_) => false,
    };
    closes.then_some(())
}

/// After the referer comes the user agent: a quoted field or a lone `-`.
fn referer_closes_at(index: &Index<'_, '_>, quote: usize) -> Option<()> {
    let line = index.line;
    if line.get(quote + 1) != Some(&b' ') {
        return None;
    }
    let next = index.next_non_space(quote + 1);
    let closes = match line.get(next) {
        Some(b'"') => true,
        Some(b'-') => line.get(next + 1).is_none_or(|&b| b == b' '),
        _ => false,
    };
    closes.then_some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(line: &str) -> Fields<'_> {
        Fields::split(line.as_bytes()).unwrap()
    }

    fn text<'a>(f: &Fields<'a>, field: Field) -> Option<&'a str> {
        f.get(field).map(|b| std::str::from_utf8(b).unwrap())
    }

    const HEAD: &str = "owner bucket [06/Feb/2019:00:00:38 +0000] 192.0.2.3 requester REQID REST.GET.OBJECT key";

    #[test]
    fn plain_17_field_line() {
        let line = format!("{HEAD} \"GET /bucket/key HTTP/1.1\" 200 - 113 1000 7 6 \"-\" \"S3Console/0.4\"");
        let f = split(&line);
        assert_eq!(f.count(), 17);
        assert_eq!(text(&f, Field::RequestTime), Some("06/Feb/2019:00:00:38 +0000"));
        assert_eq!(text(&f, Field::RequestUri), Some("GET /bucket/key HTTP/1.1"));
        assert_eq!(text(&f, Field::HttpStatus), Some("200"));
        assert_eq!(text(&f, Field::Referer), Some("-"));
        assert_eq!(text(&f, Field::UserAgent), Some("S3Console/0.4"));
        assert_eq!(text(&f, Field::VersionId), None);
        assert_eq!(f.extra(), None);
    }

    #[test]
    fn quotes_inside_request_uri_referer_and_user_agent() {
        let line = format!(
            "{HEAD} \"GET /b/k?response-content-disposition=attachment;filename=\"x y.csv\" HTTP/1.1\" 200 - 1 1 1 1 \
             \"http://e.com/?q=\"a\"\" \"\"Mozilla\" \"evil\" (x)\" - hostid SigV4"
        );
        let f = split(&line);
        assert_eq!(
            text(&f, Field::RequestUri),
            Some("GET /b/k?response-content-disposition=attachment;filename=\"x y.csv\" HTTP/1.1")
        );
        assert_eq!(text(&f, Field::Referer), Some("http://e.com/?q=\"a\""));
        assert_eq!(text(&f, Field::UserAgent), Some("\"Mozilla\" \"evil\" (x)"));
        assert_eq!(text(&f, Field::HostId), Some("hostid"));
        assert_eq!(f.count(), 20);
    }

    #[test]
    fn user_agent_beginning_with_two_quotes() {
        let line = format!("{HEAD} \"-\" - - - - - - \"-\" \"\"\" - -");
        let f = split(&line);
        assert_eq!(text(&f, Field::RequestUri), Some("-"));
        assert_eq!(text(&f, Field::HttpStatus), Some("-"));
        assert_eq!(text(&f, Field::UserAgent), Some("\""));
        assert_eq!(f.count(), 19);
    }

    #[test]
    fn unquoted_dashes_and_runs_of_spaces() {
        let line = format!("{HEAD}  -   -  - 0 - -  - - -");
        let f = split(&line);
        assert_eq!(f.count(), 17);
        assert_eq!(text(&f, Field::RequestUri), Some("-"));
        assert_eq!(text(&f, Field::Referer), Some("-"));
        assert_eq!(text(&f, Field::UserAgent), Some("-"));
    }

    #[test]
    fn extra_fields_are_kept_verbatim() {
        let tail = "v h SigV4 c AuthHeader host TLSv1.2 arn Yes eu-west-1";
        let line = format!("{HEAD} - 200 - 1 1 1 1 - - {tail} future  fields \"q\"  ");
        let f = split(&line);
        assert_eq!(f.count(), 27);
        assert_eq!(text(&f, Field::SourceRegion), Some("eu-west-1"));
        assert_eq!(f.extra(), Some(&b"future  fields \"q\""[..]));
    }

    #[test]
    fn numbers_of_every_length_and_position() {
        let naive = |raw: &[u8]| -> Option<i64> {
            (!raw.is_empty() && raw.len() <= 18 && raw.iter().all(u8::is_ascii_digit))
                .then(|| std::str::from_utf8(raw).unwrap().parse().unwrap())
        };
        let mut seed = 3;
        for len in 0..=21 {
            for round in 0..200 {
                let mut raw: Vec<u8> = (0..len).map(|_| b'0' + (pseudo_random(&mut seed) % 10) as u8).collect();
                if round % 4 == 1 && len > 0 {
                    // One byte that is not a digit, anywhere: neighbours of '0' and '9', and worse.
                    let at = pseudo_random(&mut seed) as usize % len;
                    raw[at] = [b'/', b':', b'-', b' ', 0x00, 0x7F, 0x80, 0xB0, 0xFF][round % 9];
                }
                // At the start of a line, where the windows do not fit, and later in it.
                for prefix in [0, 3, 9, 20] {
                    let mut line = vec![b'x'; prefix];
                    line.extend_from_slice(&raw);
                    line.extend_from_slice(b" tail");
                    let field = &line[prefix..prefix + len];
                    assert_eq!(
                        unsigned(&line, field),
                        naive(field),
                        "{:?} at {prefix}",
                        String::from_utf8_lossy(field)
                    );
                    let word = prefix..prefix + len;
                    let dash_or_digits = field == b"-" || field.iter().all(u8::is_ascii_digit);
                    assert_eq!(is_number_or_dash(&line, word), dash_or_digits, "{field:?}");
                }
            }
        }
        assert_eq!(
            unsigned(b"x 12345678 x", b"87654321"),
            Some(87_654_321),
            "not a slice of the line: read as is"
        );
        assert_eq!(
            unsigned(b"999999999999999999", b"999999999999999999"),
            Some(999_999_999_999_999_999)
        );
    }

    /// Bytes that steer the tokenizer, and bytes that trip naive bit tricks.
    const ALPHABET: [u8; 12] = [b' ', b'"', b'[', b']', b'-', b'x', b'2', 0x00, 0x21, 0x7F, 0x80, 0xE9];

    fn pseudo_random(seed: &mut u64) -> u64 {
        *seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        *seed >> 33
    }

    #[test]
    fn masks_of_every_block_implementation_agree_with_bytes() {
        let mut seed = 7;
        for round in 0..2000 {
            let mut block = [0u8; 64];
            for b in &mut block {
                *b = ALPHABET[pseudo_random(&mut seed) as usize % ALPHABET.len()];
            }
            if round % 3 == 0 {
                // Mostly ASCII, as lines are.
                block.iter_mut().for_each(|b| *b &= 0x7F);
            }
            let expected = |byte: u8| (0..64).filter(|&i| block[i] == byte).fold(0u64, |m, i| m | 1 << i);
            let ascii = block.is_ascii();
            let words = Masks::words(&block);
            assert_eq!(words.spaces, expected(b' '), "{block:?}");
            assert_eq!(words.quotes, expected(b'"'), "{block:?}");
            assert_eq!(words.high == 0, ascii, "{block:?}");
            let masks = Masks::of(&block);
            assert_eq!(masks.spaces, expected(b' '), "{block:?}");
            assert_eq!(masks.quotes, expected(b'"'), "{block:?}");
            assert_eq!(masks.high == 0, ascii, "{block:?}");
        }
    }

    #[test]
    fn index_searches_agree_with_bytes_at_every_position() {
        let mut seed = 11;
        // Around the block size, and past the lines whose index lives on the stack.
        let lengths = (0usize..200).chain([2047, 2048, 2049, 4100]);
        for len in lengths {
            for _ in 0..3 {
                let line: Vec<u8> = (0..len)
                    .map(|_| ALPHABET[pseudo_random(&mut seed) as usize % ALPHABET.len()])
                    .collect();
                let words = len.div_ceil(64);
                let (mut spaces, mut quotes) = (vec![0; words], vec![0; words]);
                let index = Index::new(&line, &mut spaces, &mut quotes);
                assert_eq!(index.ascii, line.is_ascii());
                let first = |from: usize, hit: &dyn Fn(u8) -> bool| {
                    line[from..].iter().position(|&b| hit(b)).map_or(len, |i| from + i)
                };
                for pos in 0..=len {
                    assert_eq!(index.next_space(pos), first(pos, &|b| b == b' '), "{len} {pos}");
                    assert_eq!(index.next_non_space(pos), first(pos, &|b| b != b' '), "{len} {pos}");
                    assert_eq!(index.next_quote(pos), first(pos, &|b| b == b'"'), "{len} {pos}");
                }
            }
        }
    }

    #[test]
    fn long_lines_split_like_short_ones() {
        // A user agent long enough to put the line past the index kept on the stack.
        let agent = "a \"b\" ".repeat(400);
        let line = format!("{HEAD} \"GET /x HTTP/1.1\" 200 - 1 1 1 1 \"-\" \"{agent}\" - host SigV4");
        assert!(line.len() > 64 * STACK_WORDS);
        let f = split(&line);
        assert_eq!(text(&f, Field::UserAgent), Some(agent.as_str()));
        assert_eq!(text(&f, Field::SignatureVersion), Some("SigV4"));
        assert_eq!(f.count(), 20);
    }

    #[test]
    fn utf8_is_known_once_for_the_whole_line() {
        let line = format!("{HEAD} \"GET /caf\u{e9} HTTP/1.1\" 200 - 1 1 1 1 \"-\" \"\u{1F980}\"");
        let f = split(&line);
        assert!(f.utf8);
        assert_eq!(f.text(Field::UserAgent).as_deref(), Some("\u{1F980}"));
        assert!(matches!(
            f.text(Field::RequestUri),
            Some(Cow::Borrowed("GET /caf\u{e9} HTTP/1.1"))
        ));
        assert_eq!(f.text(Field::Referer), None);
        let mut bytes = line.into_bytes();
        let last = bytes.len() - 2;
        bytes[last] = 0xFF;
        let f = Fields::split(&bytes).unwrap();
        assert!(!f.utf8);
        assert_eq!(f.text(Field::UserAgent).as_deref(), Some("\u{FFFD}\u{FFFD}"));
        assert!(matches!(f.text(Field::Bucket), Some(Cow::Borrowed("bucket"))));
    }

    #[test]
    fn find_either_in_every_position() {
        for len in 0..40 {
            let mut s: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8 | 0x80).collect();
            let expected = |s: &[u8]| s.iter().position(|&c| c == b'%' || c == b'+');
            assert_eq!(find_either(&s, b'%', b'+'), expected(&s));
            for at in 0..len {
                s[at] = if at % 2 == 0 { b'%' } else { b'+' };
                assert_eq!(find_either(&s, b'%', b'+'), expected(&s), "{len} {at}");
                assert_eq!(find_byte(&s, s[at]), s.iter().position(|&c| c == s[at]), "{len} {at}");
            }
        }
    }

    #[test]
    fn user_agent_closes_before_ten_words_free_of_quotes() {
        let ten = "a b c d e f g h i j";
        // The inner quote is followed by ten words free of quotes, so the agent ends there.
        let line = format!("{HEAD} - 200 - 1 1 1 1 \"-\" \"x\" {ten} \"y\"");
        let f = split(&line);
        assert_eq!(text(&f, Field::UserAgent), Some("x"));
        assert_eq!(f.count(), 27);
        // With nine, the tenth word has a quote: the agent runs on.
        let line = format!("{HEAD} - 200 - 1 1 1 1 \"-\" \"x\" {}\"", &ten[..17]);
        let f = split(&line);
        assert_eq!(text(&f, Field::UserAgent), Some(&format!("x\" {}", &ten[..17])[..]));
        assert_eq!(f.count(), 17);
        let line = format!("{HEAD} - 200 - 1 1 1 1 \"-\" \"x\"   y  \"");
        let f = split(&line);
        assert_eq!(text(&f, Field::UserAgent), Some("x\"   y  "));
    }

    #[test]
    fn errors_name_the_field() {
        let err = Fields::split(b"owner bucket [06/Feb/2019:00:00:38").unwrap_err();
        assert_eq!(err.to_string(), "request_time: no closing ]");
        let err = Fields::split(format!("{HEAD} \"GET / HTTP/1.1 200").as_bytes()).unwrap_err();
        assert!(err.to_string().starts_with("request_uri: no closing quote"), "{err}");
        let err = Fields::split(b"a b").unwrap_err();
        assert_eq!(
            err.to_string(),
            "line has 2 fields, at least 17 expected (request_time is missing)"
        );
        let err = Fields::split(format!("{HEAD} - 200 - 1 1 1 1 \"-\" \"Moz").as_bytes()).unwrap_err();
        assert!(err.to_string().starts_with("user_agent: no closing quote"), "{err}");
    }

    /// The tokenizer as it was before the index, searching the line byte by byte: the index must
    /// not change what any line splits into.
    mod reference {
        use super::super::{Field, MIN_FIELDS, NAMED_FIELDS, ParseError};

        pub type Split<'a> = Result<(Vec<&'a [u8]>, Option<&'a [u8]>), ParseError>;

        pub fn split(line: &[u8]) -> Split<'_> {
            const TIME: usize = Field::RequestTime as usize;
            const URI: usize = Field::RequestUri as usize;
            const REFERER: usize = Field::Referer as usize;
            const AGENT: usize = Field::UserAgent as usize;
            let mut fields = Vec::new();
            let mut pos = skip_spaces(line, 0);
            let len = line.len();
            while fields.len() < NAMED_FIELDS && pos < len {
                let (value, next) = match (fields.len(), line[pos]) {
                    (TIME, b'[') => match line[pos + 1..].iter().position(|&b| b == b']') {
                        Some(i) => (&line[pos + 1..pos + 1 + i], pos + 2 + i),
                        None => {
                            return Err(ParseError::Unterminated {
                                field: Field::RequestTime,
                                expected: "]",
                            });
                        }
                    },
                    (URI, b'"') => close_quote(line, pos, Field::RequestUri, uri_closes_at)?,
                    (REFERER, b'"') => close_quote(line, pos, Field::Referer, referer_closes_at)?,
                    (AGENT, b'"') => close_quote(line, pos, Field::UserAgent, agent_closes_at)?,
                    _ => token(line, pos),
                };
                fields.push(value);
                pos = match line.get(next) {
                    Some(b' ') => skip_spaces(line, next + 1),
                    _ => next,
                };
            }
            if fields.len() < MIN_FIELDS {
                return Err(ParseError::TooFewFields {
                    count: fields.len(),
                    missing: Field::ALL[fields.len()],
                });
            }
            let rest = skip_spaces(line, pos);
            let mut extra = (rest < len).then(|| &line[rest..]);
            while let Some([rest @ .., b' ']) = extra {
                extra = Some(rest);
            }
            Ok((fields, extra))
        }

        fn skip_spaces(line: &[u8], mut pos: usize) -> usize {
            while pos < line.len() && line[pos] == b' ' {
                pos += 1;
            }
            pos
        }

        fn token(line: &[u8], start: usize) -> (&[u8], usize) {
            match line[start..].iter().position(|&b| b == b' ') {
                Some(i) => (&line[start..start + i], start + i),
                None => (&line[start..], line.len()),
            }
        }

        fn close_quote(
            line: &[u8],
            start: usize,
            field: Field,
            closes_at: fn(&[u8], usize) -> bool,
        ) -> Result<(&[u8], usize), ParseError> {
            let body = start + 1;
            let mut from = body;
            while let Some(i) = line[from..].iter().position(|&b| b == b'"') {
                let quote = from + i;
                if closes_at(line, quote) {
                    return Ok((&line[body..quote], quote + 1));
                }
                from = quote + 1;
            }
            Err(ParseError::Unterminated {
                field,
                expected: field.closing_context(),
            })
        }

        fn words(line: &[u8], mut pos: usize) -> impl Iterator<Item = &[u8]> {
            std::iter::from_fn(move || {
                let start = skip_spaces(line, pos);
                if start >= line.len() {
                    pos = start;
                    return None;
                }
                let (word, end) = token(line, start);
                pos = end;
                Some(word)
            })
        }

        fn is_number_or_dash(word: &[u8]) -> bool {
            word == b"-" || word.iter().all(u8::is_ascii_digit)
        }

        fn uri_closes_at(line: &[u8], quote: usize) -> bool {
            if line.get(quote + 1) != Some(&b' ') {
                return false;
            }
            let mut rest = words(line, quote + 1);
            let status_ok = rest
                .next()
                .is_some_and(|s| s == b"-" || (s.len() == 3 && s.iter().all(u8::is_ascii_digit)));
            if !status_ok || rest.next().is_none() {
                return false;
            }
            for _ in 0..4 {
                if !rest.next().is_some_and(is_number_or_dash) {
                    return false;
                }
            }
            rest.next().is_some_and(|w| w[0] == b'"' || w == b"-")
        }

        fn agent_closes_at(line: &[u8], quote: usize) -> bool {
            match line.get(quote + 1) {
                None => true,
                Some(b' ') => match line[quote + 1..].iter().position(|&b| b == b'"') {
                    None => true,
                    Some(i) => words_started(&line[quote + 1..=quote + 1 + i]) > 10,
                },
                Some(_) => false,
            }
        }

        fn words_started(s: &[u8]) -> usize {
            let first = usize::from(s.first().is_some_and(|&b| b != b' '));
            first + s.windows(2).filter(|w| w[0] == b' ' && w[1] != b' ').count()
        }

        fn referer_closes_at(line: &[u8], quote: usize) -> bool {
            if line.get(quote + 1) != Some(&b' ') {
                return false;
            }
            let next = skip_spaces(line, quote + 1);
            match line.get(next) {
                Some(b'"') => true,
                Some(b'-') => line.get(next + 1).is_none_or(|&b| b == b' '),
                _ => false,
            }
        }
    }

    use proptest::strategy::Strategy;

    fn same_as_reference(line: &[u8]) -> Result<(), proptest::test_runner::TestCaseError> {
        let ours = Fields::split(line).map(|f| {
            let fields: Vec<&[u8]> = Field::ALL.iter().map_while(|&field| f.get(field)).collect();
            (fields, f.extra())
        });
        proptest::prop_assert_eq!(ours, reference::split(line), "{:?}", String::from_utf8_lossy(line));
        Ok(())
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(4000))]

        /// Lines made of words and of the bytes that steer the tokenizer, at any length.
        #[test]
        fn splits_like_the_reference(
            pieces in proptest::collection::vec(
                proptest::prop_oneof![
                    4 => proptest::sample::select(vec![
                        " ", "  ", "\"", "\" ", " \"", "-", " - ", "[", "]", "200", "1", "x",
                        "\"\"", " 200 - 1 2 3 4 ", "\"-\"", "\u{e9}",
                    ]).prop_map(|s| s.as_bytes().to_vec()),
                    1 => proptest::collection::vec(proptest::num::u8::ANY, 0..80),
                ],
                0..120,
            )
        ) {
            same_as_reference(&pieces.concat())?;
        }

        /// Real lines of every era and quirk, cut and spliced.
        #[test]
        fn splits_generated_lines_like_the_reference(seed in 0u64..1_000, cut in 0usize..700, splice in 0usize..700) {
            let line = sample_line(seed);
            same_as_reference(&line)?;
            let cut = cut.min(line.len());
            same_as_reference(&line[..cut])?;
            let mut spliced = line[..cut].to_vec();
            spliced.extend_from_slice(&line[splice.min(line.len())..]);
            same_as_reference(&spliced)?;
        }
    }

    /// A line in the shape of the generated corpora, varied by `seed`.
    fn sample_line(seed: u64) -> Vec<u8> {
        let mut seed = seed;
        let mut pick = |choices: &[&str]| choices[pseudo_random(&mut seed) as usize % choices.len()].to_owned();
        let uri = pick(&[
            "\"GET /b/k HTTP/1.1\"",
            "\"GET /b/k?response-content-disposition=attachment;filename=\"x y.csv\" HTTP/1.1\"",
            "\"GET /\"><script>alert(1)</script> HTTP/1.1\"",
            "-",
            "\"-\"",
        ]);
        let status = pick(&["200", "-", "404", "020"]);
        let referer = pick(&["\"-\"", "-", "\"https://e.com/?q=\"a b\"\"", "\"x\" \"y\""]);
        let agent = pick(&["\"curl/8\"", "\"\"Mozilla\" (x)\"", "-", "\"a \"b\" c\"", "\"\""]);
        let tail = pick(&[
            "",
            " -",
            " - host SigV4 c AuthHeader h TLSv1.2",
            " - host SigV4 c AuthHeader h TLSv1.2 - Yes eu-west-1",
            " - host SigV4 c AuthHeader h TLSv1.2 - - eu-west-1 extra \"quoted\"  ",
        ]);
        format!(
            "owner  bkt [06/Feb/2019:00:00:38 +0000] 192.0.2.3 req ID REST.GET.OBJECT k%20y {uri} {status} - 1 2 3 - {referer} {agent}{tail}"
        )
        .into_bytes()
    }
}
