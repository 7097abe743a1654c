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

use memchr::memchr;

use crate::error::ParseError;
use crate::field::Field;

/// The number of fields that have a name; anything after them is kept verbatim.
pub const NAMED_FIELDS: usize = 27;

/// The fewest fields a line may have: everything up to and including the user agent.
pub const MIN_FIELDS: usize = 17;

/// The fields of one line, borrowed from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fields<'a> {
    fields: [&'a [u8]; NAMED_FIELDS],
    count: usize,
    extra: Option<&'a [u8]>,
}

impl<'a> Fields<'a> {
    /// Splits `line` (without its line terminator) into fields.
    #[inline]
    pub fn split(line: &'a [u8]) -> Result<Self, ParseError> {
        const TIME: usize = Field::RequestTime as usize;
        const URI: usize = Field::RequestUri as usize;
        const REFERER: usize = Field::Referer as usize;
        const AGENT: usize = Field::UserAgent as usize;
        let mut fields: [&'a [u8]; NAMED_FIELDS] = [&[]; NAMED_FIELDS];
        let mut count = 0;
        let mut pos = skip_spaces(line, 0);
        let len = line.len();
        while count < NAMED_FIELDS && pos < len {
            let (value, next) = match (count, line[pos]) {
                (TIME, b'[') => close_bracket(line, pos)?,
                (URI, b'"') => close_quote(line, pos, Field::RequestUri, request_uri_closes_at)?,
                (REFERER, b'"') => close_quote(line, pos, Field::Referer, referer_closes_at)?,
                (AGENT, b'"') => close_quote(line, pos, Field::UserAgent, user_agent_closes_at)?,
                _ => token(line, pos),
            };
            fields[count] = value;
            count += 1;
            // Fields are separated by one space, seldom more.
            pos = match line.get(next) {
                Some(b' ') => skip_spaces(line, next + 1),
                _ => next,
            };
        }
        if count < MIN_FIELDS {
            return Err(ParseError::TooFewFields {
                count,
                missing: Field::ALL[count],
            });
        }
        let rest = skip_spaces(line, pos);
        let extra = (rest < len).then(|| trim_end_spaces(&line[rest..]));
        Ok(Fields { fields, count, extra })
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
}

#[inline]
fn skip_spaces(line: &[u8], mut pos: usize) -> usize {
    while pos < line.len() && line[pos] == b' ' {
        pos += 1;
    }
    pos
}

fn trim_end_spaces(mut s: &[u8]) -> &[u8] {
    while let [rest @ .., b' '] = s {
        s = rest;
    }
    s
}

/// A field that runs to the next space.
#[inline]
fn token(line: &[u8], start: usize) -> (&[u8], usize) {
    match find_space(&line[start..]) {
        Some(i) => (&line[start..start + i], start + i),
        None => (&line[start..], line.len()),
    }
}

const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);

/// A high bit in each byte of `word` that equals `byte`: exact up to the first such byte, which is
/// all [`find_byte`] needs.
#[inline(always)]
fn bytes_equal(word: u64, byte: u8) -> u64 {
    let x = word ^ u64::from_ne_bytes([byte; 8]);
    x.wrapping_sub(ONES) & !x & HIGHS
}

/// The position of the first space in `s`.
#[inline]
fn find_space(s: &[u8]) -> Option<usize> {
    find_byte(s, b' ')
}

/// The position of the first `byte` in `s`, eight bytes at a time. The fields and quoted values
/// searched are mostly short, and for them `memchr`'s set-up costs more than the search.
#[inline]
pub(crate) fn find_byte(s: &[u8], byte: u8) -> Option<usize> {
    find_either(s, byte, byte)
}

/// The position of the first `a` or `b` in `s`, eight bytes at a time.
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

/// A quoted field closed at the first `"` for which `closes_at(line, quote_position)` holds.
fn close_quote(
    line: &[u8],
    start: usize,
    field: Field,
    closes_at: impl Fn(&[u8], usize) -> bool,
) -> Result<(&[u8], usize), ParseError> {
    let body = start + 1;
    let mut from = body;
    while let Some(i) = find_byte(&line[from..], b'"') {
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

/// Words of `line` from `pos` on, separated by runs of spaces.
fn words(line: &[u8], pos: usize) -> Words<'_> {
    Words { line, pos }
}

struct Words<'a> {
    line: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for Words<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        let start = skip_spaces(self.line, self.pos);
        if start >= self.line.len() {
            self.pos = start;
            return None;
        }
        let (word, end) = token(self.line, start);
        self.pos = end;
        Some(word)
    }
}

fn is_number_or_dash(word: &[u8]) -> bool {
    word == b"-" || word.iter().all(u8::is_ascii_digit)
}

/// After the request URI come the HTTP status, the error code, four numbers and the referer.
fn request_uri_closes_at(line: &[u8], quote: usize) -> bool {
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

/// After the user agent come fields 18 to 27, none of which contains a quote.
fn user_agent_closes_at(line: &[u8], quote: usize) -> bool {
    match line.get(quote + 1) {
        None => true,
        // The next ten words are free of quotes when the next quote, if any, is in a later word.
        Some(b' ') => match memchr(b'"', &line[quote + 1..]) {
            None => true,
            Some(i) => words_started(&line[quote + 1..=quote + 1 + i]) > NAMED_FIELDS - Field::UserAgent.number(),
        },
        Some(_) => false,
    }
}

/// How many words (runs of bytes other than spaces) begin in `s`.
fn words_started(s: &[u8]) -> usize {
    let first = usize::from(s.first().is_some_and(|&b| b != b' '));
    first + s.windows(2).filter(|w| w[0] == b' ' && w[1] != b' ').count()
}

/// After the referer comes the user agent: a quoted field or a lone `-`.
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
    fn find_space_in_every_position() {
        for len in 0..40 {
            let mut s = vec![b'x'; len];
            assert_eq!(find_space(&s), None);
            for at in 0..len {
                s[at] = b' ';
                assert_eq!(find_space(&s), Some(at), "{len} {at}");
                // Bytes that trip naive zero-byte tricks, before and after the space.
                s[..at].fill(0x80);
                s[at + 1..].fill(0x21);
                assert_eq!(find_space(&s), Some(at), "{len} {at}");
                s.fill(b'x');
            }
        }
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
}
