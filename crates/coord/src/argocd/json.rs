//! The little JSON the shard mapping needs, with the semantics of Go's `encoding/json`.
//!
//! Hand-written rather than serde_json because the mapping must be read exactly as Argo CD
//! reads it and written byte for byte as it writes it, and serde_json differs in the corners
//! that matter here: it refuses lone UTF-16 surrogates (Go reads U+FFFD), stops at 128 levels
//! of nesting (Go at 10 000), cannot tell `1` from `1.0` for an `int` field without extra
//! features, and forgets the order of duplicate keys (Go: the last one wins).
//!
//! Reading is two passes, like `json.Unmarshal`: [`validate`] checks the whole text first
//! (a syntax error anywhere wins over any type error), then a [`Reader`] walks the now
//! well-formed text. Both are iterative, so no input can exhaust the stack.

/// Go's `maxNestingDepth`: deeper input is a syntax error.
const MAX_DEPTH: usize = 10_000;

/// A syntax error: where, and what Go's scanner would complain about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    /// Byte offset of the offending character (the length for an early end).
    pub(crate) offset: usize,
    /// What is wrong.
    pub(crate) reason: &'static str,
}

fn fail<T>(offset: usize, reason: &'static str) -> Result<T, SyntaxError> {
    Err(SyntaxError { offset, reason })
}

/// JSON's four whitespace bytes (and only those: Go refuses a form feed or NBSP).
pub(crate) fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

fn skip_space(b: &[u8], mut i: usize) -> usize {
    while b.get(i).copied().is_some_and(is_space) {
        i += 1;
    }
    i
}

/// Checks that `text` is exactly one JSON value, optionally surrounded by whitespace
/// (Go's `checkValid`).
pub(crate) fn validate(text: &str) -> Result<(), SyntaxError> {
    let b = text.as_bytes();
    // Open containers: b'[' or b'{'.
    let mut open: Vec<u8> = Vec::new();
    let mut i = 0;
    'value: loop {
        // A value is expected at `i`.
        i = skip_space(b, i);
        match b.get(i) {
            None => return fail(i, "unexpected end of JSON input"),
            Some(&c @ (b'[' | b'{')) => {
                open.push(c);
                if open.len() > MAX_DEPTH {
                    return fail(i, "exceeded max depth");
                }
                i = skip_space(b, i + 1);
                let close = if c == b'[' { b']' } else { b'}' };
                if b.get(i) == Some(&close) {
                    open.pop();
                    i += 1;
                } else if c == b'{' {
                    i = object_key(b, i)?;
                    continue 'value;
                } else {
                    continue 'value;
                }
            }
            Some(b'"') => i = string_end(b, i)?,
            Some(b't') => i = literal(b, i, b"true")?,
            Some(b'f') => i = literal(b, i, b"false")?,
            Some(b'n') => i = literal(b, i, b"null")?,
            Some(b'-' | b'0'..=b'9') => i = number_end(b, i)?,
            Some(_) => return fail(i, "invalid character looking for beginning of value"),
        }
        // A value ended before `i`: close containers or move to the next element.
        loop {
            i = skip_space(b, i);
            match (open.last(), b.get(i)) {
                (None, None) => return Ok(()),
                (None, Some(_)) => return fail(i, "invalid character after top-level value"),
                (Some(_), None) => return fail(i, "unexpected end of JSON input"),
                (Some(b'['), Some(b']')) | (Some(b'{'), Some(b'}')) => {
                    open.pop();
                    i += 1;
                }
                (Some(b'['), Some(b',')) => {
                    i += 1;
                    continue 'value;
                }
                (Some(_), Some(b',')) => {
                    i = object_key(b, skip_space(b, i + 1))?;
                    continue 'value;
                }
                (Some(b'['), Some(_)) => {
                    return fail(i, "invalid character after array element");
                }
                (Some(_), Some(_)) => {
                    return fail(i, "invalid character after object key:value pair");
                }
            }
        }
    }
}

/// `"key"` then `:` at `i`; returns where the value starts.
fn object_key(b: &[u8], i: usize) -> Result<usize, SyntaxError> {
    if b.get(i) != Some(&b'"') {
        return fail(
            i,
            "invalid character looking for beginning of object key string",
        );
    }
    let i = skip_space(b, string_end(b, i)?);
    if b.get(i) != Some(&b':') {
        return fail(i, "invalid character after object key");
    }
    Ok(i + 1)
}

fn literal(b: &[u8], i: usize, word: &[u8]) -> Result<usize, SyntaxError> {
    match b.get(i..i + word.len()) {
        Some(found) if found == word => Ok(i + word.len()),
        _ => fail(i, "invalid character in literal"),
    }
}

/// The end of the string literal starting at `b[i] == '"'`.
fn string_end(b: &[u8], mut i: usize) -> Result<usize, SyntaxError> {
    i += 1;
    loop {
        match b.get(i) {
            None => return fail(i, "unexpected end of JSON input"),
            Some(b'"') => return Ok(i + 1),
            Some(b'\\') => match b.get(i + 1) {
                Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => i += 2,
                Some(b'u') => {
                    let hex = b.get(i + 2..i + 6);
                    if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                        return fail(i, "invalid character in \\u hexadecimal character escape");
                    }
                    i += 6;
                }
                _ => return fail(i + 1, "invalid character in string escape code"),
            },
            Some(&c) if c < 0x20 => return fail(i, "invalid character in string literal"),
            Some(_) => i += 1,
        }
    }
}

/// The end of the number literal starting at `i` (RFC 8259 grammar).
fn number_end(b: &[u8], mut i: usize) -> Result<usize, SyntaxError> {
    let digits = |mut i: usize| {
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        (i > start).then_some(i)
    };
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    i = match b.get(i) {
        Some(b'0') => i + 1,
        Some(b'1'..=b'9') => digits(i).unwrap_or(i),
        _ => return fail(i, "invalid character in numeric literal"),
    };
    if b.get(i) == Some(&b'.') {
        i = match digits(i + 1) {
            Some(end) => end,
            None => {
                return fail(
                    i + 1,
                    "invalid character after decimal point in numeric literal",
                );
            }
        };
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        i = match digits(i) {
            Some(end) => end,
            None => return fail(i, "invalid character in exponent of numeric literal"),
        };
    }
    Ok(i)
}

/// What a JSON value is, for type-error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Null => "null",
            Kind::Bool => "bool",
            Kind::Number => "number",
            Kind::String => "string",
            Kind::Array => "array",
            Kind::Object => "object",
        }
    }
}

/// A cursor over text that [`validate`] accepted.
///
/// Because the text is known to be well formed, the methods trust its structure; they still
/// index defensively (`get`), so a misuse yields garbage, never a panic.
pub(crate) struct Reader<'a> {
    text: &'a str,
    i: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of validated `text`.
    pub(crate) fn new(text: &'a str) -> Self {
        Reader { text, i: 0 }
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    /// Skips whitespace and tells what the next value is (`None` at the end).
    pub(crate) fn peek_kind(&mut self) -> Option<Kind> {
        self.i = skip_space(self.bytes(), self.i);
        Some(match self.bytes().get(self.i)? {
            b'n' => Kind::Null,
            b't' | b'f' => Kind::Bool,
            b'"' => Kind::String,
            b'[' => Kind::Array,
            b'{' => Kind::Object,
            _ => Kind::Number,
        })
    }

    /// Skips whitespace and consumes `c` if it is next.
    pub(crate) fn eat(&mut self, c: u8) -> bool {
        self.i = skip_space(self.bytes(), self.i);
        let found = self.bytes().get(self.i) == Some(&c);
        if found {
            self.i += 1;
        }
        found
    }

    /// The raw text of the next value, consumed.
    pub(crate) fn raw_value(&mut self) -> &'a str {
        let b = self.bytes();
        let start = skip_space(b, self.i);
        let mut i = start;
        let mut depth = 0usize;
        loop {
            match b.get(i) {
                None => break,
                Some(b'"') => i = string_end(b, i).unwrap_or(b.len()),
                Some(b'[' | b'{') => {
                    depth += 1;
                    i += 1;
                }
                Some(b']' | b'}') => {
                    depth = depth.saturating_sub(1);
                    i += 1;
                }
                Some(_) => {
                    // A scalar (or a separator inside a container): run to a delimiter.
                    i += 1;
                    while b
                        .get(i)
                        .is_some_and(|&c| !matches!(c, b',' | b']' | b'}' | b'"' | b'[' | b'{'))
                    {
                        i += 1;
                    }
                }
            }
            if depth == 0 {
                break;
            }
        }
        self.i = i;
        self.text
            .get(start..i)
            .unwrap_or("")
            .trim_end_matches(|c: char| c.is_ascii() && is_space(c as u8))
    }

    /// Consumes the next value, which must be a string, and returns it unescaped.
    pub(crate) fn string(&mut self) -> String {
        unquote(self.raw_value())
    }
}

/// The value of a validated string literal (quotes included), unescaped as Go does: an
/// invalid or lone UTF-16 surrogate escape becomes U+FFFD.
pub(crate) fn unquote(literal: &str) -> String {
    let inner = literal
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(literal);
    let mut out = String::with_capacity(inner.len());
    let mut rest = inner;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let (c, used) = unescape_one(rest);
        out.push(c);
        rest = rest.get(used..).unwrap_or("");
    }
    out.push_str(rest);
    out
}

/// One escape at the start of `s` (which starts with `\`): the character and the bytes used.
fn unescape_one(s: &str) -> (char, usize) {
    let simple = match s.as_bytes().get(1) {
        Some(b'b') => '\u{8}',
        Some(b'f') => '\u{c}',
        Some(b'n') => '\n',
        Some(b'r') => '\r',
        Some(b't') => '\t',
        Some(b'u') => return unescape_u(s),
        Some(&c) if c.is_ascii() => char::from(c),
        _ => return ('\\', 1),
    };
    (simple, 2)
}

/// `\uXXXX`, possibly followed by a second one completing a surrogate pair.
fn unescape_u(s: &str) -> (char, usize) {
    let Some(first) = hex4(s) else {
        return ('\\', 1);
    };
    if !(0xD800..0xE000).contains(&first) {
        return (char::from_u32(first).unwrap_or('\u{FFFD}'), 6);
    }
    // Go: a valid high+low pair is one character; anything else gives U+FFFD for the first
    // escape only, and the next escape is read on its own.
    if (0xD800..0xDC00).contains(&first)
        && let Some(second) = s.get(6..).and_then(hex4)
        && (0xDC00..0xE000).contains(&second)
    {
        let c = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
        return (char::from_u32(c).unwrap_or('\u{FFFD}'), 12);
    }
    ('\u{FFFD}', 6)
}

/// The value of `\uXXXX` at the start of `s`.
fn hex4(s: &str) -> Option<u32> {
    let digits = s.strip_prefix("\\u")?.get(..4)?;
    if !digits.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(digits, 16).ok()
}

/// Appends `s` as a JSON string the way Go's `json.Marshal` writes it (HTML-safe):
/// `"` and `\` escaped, `\b \f \n \r \t` short, other control bytes and `<`, `>`, `&` as
/// `\u00XX` (lowercase hex), U+2028 and U+2029 as `\u2028` and `\u2029`, DEL and all other
/// characters as they are. (`\b` and `\f` are short since Go 1.22; Argo CD builds with
/// newer Go.)
pub(crate) fn push_go_string(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{0}'..='\u{1f}' | '<' | '>' | '&' => {
                let b = c as u8;
                out.push_str("\\u00");
                out.push(char::from(HEX[usize::from(b >> 4)]));
                out.push(char::from(HEX[usize::from(b & 0xF)]));
            }
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            _ => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests;
