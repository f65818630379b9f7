//! Block mappings and sequences read line by line, by indentation.
//!
//! A node starts on a line (at its indentation) or after `- ` or `key: ` on one; a
//! collection continues on the following lines at its own column. Anything else declines:
//! comments, tabs, carriage returns, characters YAML does not allow unescaped, a line
//! indented where no node can continue, a duplicate key, nesting deeper than
//! [`MAX_DEPTH`].

use std::borrow::Cow;

use serde_json::map::Entry;
use serde_json::{Map, Value};

use super::scalar;

/// The fast path is not sure what serde-saphyr would answer: the caller asks serde-saphyr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Declined;

/// A result of the fast path.
pub(crate) type Fast<T> = Result<T, Declined>;

/// Deepest nesting read here. serde-saphyr's budget refuses documents nested deeper than
/// 64; a list's items sit two levels down, and declining early leaves the limit its own.
pub(crate) const MAX_DEPTH: usize = 48;

/// The content of a line from some column on: `text[start..end]`, trailing spaces
/// trimmed, never empty; `col` is the column of `start`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Span {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) col: usize,
}

/// A reader of block nodes over `text`.
#[derive(Clone)]
pub(crate) struct Block<'a> {
    text: &'a str,
    /// The start of the next line not read.
    pub(crate) pos: usize,
    /// The last line peeked: the position it was peeked from, its span, the next line's
    /// start.
    peeked: Option<(usize, Span, usize)>,
}

impl<'a> Block<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Block {
            text,
            pos: 0,
            peeked: None,
        }
    }

    pub(crate) fn str(&self, span: Span) -> &'a str {
        &self.text[span.start..span.end]
    }

    /// The next line with content from `pos` (blank lines are skipped), not consumed: its
    /// span and where the line after it starts.
    pub(crate) fn peek(&mut self) -> Fast<Option<(Span, usize)>> {
        if let Some((from, span, next)) = self.peeked
            && from == self.pos
        {
            return Ok(Some((span, next)));
        }
        let bytes = self.text.as_bytes();
        loop {
            let line = self.pos;
            if line >= bytes.len() {
                return Ok(None);
            }
            let mut i = line;
            while i < bytes.len() && bytes[i] == b' ' {
                i += 1;
            }
            let mut j = i;
            while j < bytes.len() {
                // Eight bytes at a time while none ends the line or needs a look.
                if let Some(word) = bytes.get(j..j + 8)
                    && !needs_look(u64::from_le_bytes(word.try_into().expect("eight bytes")))
                {
                    j += 8;
                    continue;
                }
                let b = bytes[j];
                if b == b'\n' {
                    break;
                }
                if b < 0x20 || b >= 0x7f && unusual(&bytes[j..]) {
                    return Err(Declined);
                }
                j += 1;
            }
            let next = (j + 1).min(bytes.len());
            let mut end = j;
            while end > i && bytes[end - 1] == b' ' {
                end -= 1;
            }
            if end == i {
                self.pos = next;
                continue;
            }
            if bytes[i] == b'#' {
                return Err(Declined);
            }
            let span = Span {
                start: i,
                end,
                col: i - line,
            };
            self.peeked = Some((line, span, next));
            return Ok(Some((span, next)));
        }
    }

    /// The next line with content if it is indented more than `col`, consumed; `None`
    /// (nothing consumed) otherwise.
    pub(crate) fn deeper(&mut self, col: usize) -> Fast<Option<Span>> {
        match self.peek()? {
            Some((span, next)) if span.col > col => {
                self.pos = next;
                Ok(Some(span))
            }
            _ => Ok(None),
        }
    }

    /// The node whose first line's content is `span` (consumed).
    pub(crate) fn node(&mut self, span: Span, depth: usize) -> Fast<Value> {
        if depth > MAX_DEPTH {
            return Err(Declined);
        }
        let s = self.str(span);
        if is_dash(s) {
            return self.seq(span, depth);
        }
        if let Some((key, rest)) = self.key(span)? {
            return self.map(span.col, key, rest, depth);
        }
        // A scalar continued on the next lines is declined by the collection around it.
        scalar::inline(s)
    }

    /// A block sequence whose first entry's dash is `first` (consumed).
    pub(crate) fn seq(&mut self, first: Span, depth: usize) -> Fast<Value> {
        let col = first.col;
        let mut items = Vec::new();
        let mut entry = first;
        loop {
            items.push(self.entry(entry, depth)?);
            match self.peek()? {
                Some((span, next)) if span.col == col && is_dash(self.str(span)) => {
                    self.pos = next;
                    entry = span;
                }
                Some((span, _)) if span.col > col => return Err(Declined),
                _ => return Ok(Value::Array(items)),
            }
        }
    }

    /// The value of one sequence entry whose dash is `dash` (consumed).
    pub(crate) fn entry(&mut self, dash: Span, depth: usize) -> Fast<Value> {
        let s = self.str(dash);
        let skipped = s.len() - s[1..].trim_start_matches(' ').len();
        if skipped == s.len() {
            return match self.deeper(dash.col)? {
                Some(span) => self.node(span, depth + 1),
                None => Ok(Value::Null),
            };
        }
        let span = Span {
            start: dash.start + skipped,
            end: dash.end,
            col: dash.col + skipped,
        };
        self.node(span, depth + 1)
    }

    /// A block mapping at column `col` whose first key was read (`rest`: what follows its
    /// colon on the line).
    fn map(&mut self, col: usize, key: String, rest: Option<Span>, depth: usize) -> Fast<Value> {
        let mut map = Map::new();
        let (mut key, mut rest) = (key, rest);
        loop {
            let value = self.value(rest, col, depth)?;
            match map.entry(key) {
                Entry::Vacant(slot) => {
                    slot.insert(value);
                }
                Entry::Occupied(_) => return Err(Declined),
            }
            match self.next_key(col)? {
                Some((k, r)) => (key, rest) = (k, r),
                None => return Ok(Value::Object(map)),
            }
        }
    }

    /// The next key of the mapping at column `col`, consumed, or `None` when the mapping
    /// ends; declines on a line indented more, or one at `col` that is not a key.
    pub(crate) fn next_key(&mut self, col: usize) -> Fast<Option<(String, Option<Span>)>> {
        Ok(self
            .next_key_ref(col)?
            .map(|(key, rest)| (key.into_owned(), rest)))
    }

    /// [`Block::next_key`], the key borrowed from the text when it can be.
    pub(crate) fn next_key_ref(
        &mut self,
        col: usize,
    ) -> Fast<Option<(Cow<'a, str>, Option<Span>)>> {
        match self.peek()? {
            Some((span, next)) if span.col == col => {
                self.pos = next;
                self.key_ref(span)?.map(Some).ok_or(Declined)
            }
            Some((span, _)) if span.col > col => Err(Declined),
            _ => Ok(None),
        }
    }

    /// The value of a mapping entry at column `col` with `rest` after its colon.
    pub(crate) fn value(&mut self, rest: Option<Span>, col: usize, depth: usize) -> Fast<Value> {
        if let Some(span) = rest {
            let s = self.str(span);
            if is_dash(s) || quoted_key(self, span)? {
                return Err(Declined);
            }
            return scalar::inline(s);
        }
        match self.peek()? {
            Some((span, next)) if span.col > col => {
                self.pos = next;
                self.node(span, depth + 1)
            }
            // A sequence may sit at its key's column.
            Some((span, next)) if span.col == col && is_dash(self.str(span)) => {
                self.pos = next;
                if depth + 1 > MAX_DEPTH {
                    return Err(Declined);
                }
                self.seq(span, depth + 1)
            }
            _ => Ok(Value::Null),
        }
    }

    /// When `span` starts with a mapping key: the key and what follows its colon on the
    /// line (`None` when nothing does).
    pub(crate) fn key(&self, span: Span) -> Fast<Option<(String, Option<Span>)>> {
        Ok(self
            .key_ref(span)?
            .map(|(key, rest)| (key.into_owned(), rest)))
    }

    /// [`Block::key`], the key borrowed from the text when it is plain.
    pub(crate) fn key_ref(&self, span: Span) -> Fast<Option<(Cow<'a, str>, Option<Span>)>> {
        let s = self.str(span);
        let (key, after) = match s.as_bytes()[0] {
            q @ (b'"' | b'\'') => {
                let (key, used) = if q == b'"' {
                    scalar::double_quoted(s)?
                } else {
                    scalar::single_quoted(s)?
                };
                if used > scalar::MAX_KEY {
                    return Err(Declined);
                }
                let after = s[used..].trim_start_matches(' ');
                if after.is_empty() {
                    return Ok(None);
                }
                if !is_colon(after.as_bytes(), 0) {
                    return Err(Declined);
                }
                (Cow::Owned(key), s.len() - after.len())
            }
            _ => {
                let bytes = s.as_bytes();
                let Some(colon) = (0..bytes.len()).find(|&i| is_colon(bytes, i)) else {
                    return Ok(None);
                };
                (scalar::plain_key(s[..colon].trim_end_matches(' '))?, colon)
            }
        };
        let value = s[after + 1..].trim_start_matches(' ');
        let rest = (!value.is_empty()).then(|| {
            let skipped = s.len() - value.len();
            Span {
                start: span.start + skipped,
                end: span.end,
                col: span.col + skipped,
            }
        });
        if key.is_empty() {
            return Err(Declined);
        }
        Ok(Some((key, rest)))
    }
}

/// Whether `s` starts a sequence entry: a dash alone or followed by a space.
pub(crate) fn is_dash(s: &str) -> bool {
    s == "-" || s.starts_with("- ")
}

/// Whether `bytes[i]` is a colon that ends a key: followed by a space or the line's end.
fn is_colon(bytes: &[u8], i: usize) -> bool {
    bytes[i] == b':' && bytes.get(i + 1).is_none_or(|&b| b == b' ')
}

/// Whether one of the eight bytes of `word` is a control character (a line feed among
/// them), DEL or not ASCII: what [`Block::peek`] looks at byte by byte.
pub(crate) fn needs_look(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // A byte below 0x20 (exact for bytes below 0x80; the others are caught by `HIGH`).
    let below_space = word.wrapping_sub(0x20 * ONES) & !word;
    let del = word ^ (0x7f * ONES);
    let is_del = del.wrapping_sub(ONES) & !del;
    (below_space | is_del | word) & HIGH != 0
}

/// Whether the character starting at `b[0]` (DEL or a non-ASCII byte) is one YAML does not
/// allow unescaped or reads as a line break in some version: DEL, C1 controls (NEL among
/// them), the byte-order mark, U+2028, U+2029, U+FFFE and U+FFFF.
fn unusual(b: &[u8]) -> bool {
    match b {
        [0x7f, ..] => true,
        [0xc2, c, ..] => (0x80..=0x9f).contains(c),
        [0xe2, 0x80, c, ..] => matches!(c, 0xa8 | 0xa9),
        [0xef, 0xbb, 0xbf, ..] | [0xef, 0xbf, 0xbe | 0xbf, ..] => true,
        _ => false,
    }
}

/// Whether a scalar after a key's colon (`span`) is a quoted key, a mapping that may not
/// start there. A plain one is not checked here: a plain scalar is always read through
/// `scalar::plain_shape`, which declines a `: ` or a final colon, as a key would.
pub(crate) fn quoted_key(block: &Block<'_>, span: Span) -> Fast<bool> {
    if !matches!(block.str(span).as_bytes()[0], b'"' | b'\'') {
        return Ok(false);
    }
    Ok(block.key_ref(span)?.is_some())
}
