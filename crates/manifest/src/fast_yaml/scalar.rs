//! Single-line scalars: plain ones typed as serde-saphyr types them into an untyped value
//! (with [`yaml_options`](crate::document::yaml_options)), and quoted ones.
//!
//! serde-saphyr's resolution of a plain scalar into `serde_json::Value`, in its order:
//! null (`~`, `null`, `Null`, `NULL`, empty), YAML 1.2 booleans (`true`, `True`, `TRUE` and
//! the three `false`), then strings for anything with an underscore or a redundant leading
//! zero (`010`, `-007`: our options), then integers (decimal, `0x`, `0o`, `0b`, a sign),
//! then floats (Rust's spellings with a leading digit or dot, `.inf`, `.nan`, overflow to
//! infinity), then a string. Here the first three, decimal integers of up to 18 digits and
//! strings that cannot be a number are typed; anything that might be another number
//! declines, so serde-saphyr types it.

use std::borrow::Cow;

use serde_json::Value;

use super::block::{Declined, Fast};

/// Longest implicit key YAML allows is 1024 characters; declining a little earlier keeps
/// the limit serde-saphyr's.
pub(crate) const MAX_KEY: usize = 1000;

/// A scalar that is the whole rest of a line (`s`: trimmed, not empty), as a value.
pub(crate) fn inline(s: &str) -> Fast<Value> {
    match s.as_bytes()[0] {
        b'"' => whole(s, double_quoted),
        b'\'' => whole(s, single_quoted),
        _ => plain(s),
    }
}

/// A quoted scalar that must end where `s` ends.
fn whole(s: &str, quoted: fn(&str) -> Fast<(String, usize)>) -> Fast<Value> {
    let (text, used) = quoted(s)?;
    if used == s.len() {
        Ok(Value::String(text))
    } else {
        Err(Declined)
    }
}

/// A plain scalar's value.
fn plain(s: &str) -> Fast<Value> {
    Ok(match plain_scalar(s)? {
        Plain::Null => Value::Null,
        Plain::Bool(b) => Value::Bool(b),
        Plain::Unsigned(n) => Value::Number(n.into()),
        Plain::Signed(n) => Value::Number(n.into()),
        Plain::Str => Value::String(s.to_owned()),
        Plain::Unsure => return Err(Declined),
    })
}

/// A plain key's text: only keys serde-saphyr reads as the same string.
pub(crate) fn plain_key(s: &str) -> Fast<Cow<'_, str>> {
    if s.len() > MAX_KEY || s == "<<" || !matches!(plain_scalar(s)?, Plain::Str) {
        return Err(Declined);
    }
    Ok(Cow::Borrowed(s))
}

/// A scalar that is the whole rest of a line, as a value a visitor is given: a plain
/// string borrowed from the text, anything else as [`inline`] reads it.
pub(crate) fn visit<'de, V: serde::de::Visitor<'de>, E: serde::de::Error>(
    s: &'de str,
    visitor: V,
) -> Result<V::Value, E> {
    let declined = || E::custom("declined");
    let value = match s.as_bytes()[0] {
        b'"' | b'\'' => inline(s).map_err(|_| declined())?,
        _ => {
            return match plain_scalar(s).map_err(|_| declined())? {
                Plain::Null => visitor.visit_unit(),
                Plain::Bool(b) => visitor.visit_bool(b),
                Plain::Unsigned(n) => visitor.visit_u64(n),
                Plain::Signed(n) => visitor.visit_i64(n),
                Plain::Str => visitor.visit_borrowed_str(s),
                Plain::Unsure => Err(declined()),
            };
        }
    };
    match value {
        Value::String(text) => visitor.visit_string(text),
        _ => Err(declined()),
    }
}

/// Whether a scalar that is the whole rest of a line reads as null.
pub(crate) fn is_null(s: &str) -> bool {
    !matches!(s.as_bytes()[0], b'"' | b'\'') && plain_scalar(s) == Ok(Plain::Null)
}

/// A plain scalar's shape checked ([`plain_shape`]) and its type ([`classify`]), from one
/// pass over its bytes: every plain scalar of an item goes through here, those the item's
/// type skips too (so that one serde-saphyr would type otherwise declines the same).
fn plain_scalar(s: &str) -> Fast<Plain> {
    let scan = Scan::of(s.as_bytes());
    plain_shape(s, &scan)?;
    Ok(classify_scanned(s, &scan))
}

/// What one pass over a plain scalar's bytes finds.
struct Scan {
    /// `" #"` (a comment) or `": "` (a mapping) somewhere.
    comment_or_mapping: bool,
    /// An underscore somewhere.
    underscore: bool,
    /// Every byte after the first is an ASCII digit (true for one byte).
    digits_after_first: bool,
}

impl Scan {
    fn of(b: &[u8]) -> Scan {
        let (mut pairs, mut underscore, mut other) = (false, false, false);
        let mut prev = b.first().copied().unwrap_or(0);
        underscore |= prev == b'_';
        for &c in b.get(1..).unwrap_or_default() {
            pairs |= (prev == b' ' && c == b'#') | (prev == b':' && c == b' ');
            underscore |= c == b'_';
            other |= !c.is_ascii_digit();
            prev = c;
        }
        Scan {
            comment_or_mapping: pairs,
            underscore,
            digits_after_first: !other,
        }
    }
}

/// Declines what a one-line plain scalar in block context cannot be, or what would mean
/// something else here: an indicator first, a comment, a `: ` (a mapping), a document
/// marker.
fn plain_shape(s: &str, scan: &Scan) -> Fast<()> {
    let bytes = s.as_bytes();
    let Some(&first) = bytes.first() else {
        return Err(Declined);
    };
    let dash_indicator = first == b'-' && bytes.get(1).is_none_or(|&b| b == b' ');
    let indicator = matches!(
        first,
        b'?' | b':'
            | b','
            | b'['
            | b']'
            | b'{'
            | b'}'
            | b'#'
            | b'&'
            | b'*'
            | b'!'
            | b'|'
            | b'>'
            | b'\''
            | b'"'
            | b'%'
            | b'@'
            | b'`'
    );
    if indicator
        || dash_indicator
        || s.starts_with("---")
        || s.starts_with("...")
        || s.ends_with(':')
        || scan.comment_or_mapping
    {
        return Err(Declined);
    }
    Ok(())
}

/// How serde-saphyr types a plain scalar.
#[derive(Debug, PartialEq)]
enum Plain {
    Null,
    Bool(bool),
    Unsigned(u64),
    Signed(i64),
    Str,
    /// Perhaps a number this module does not read: serde-saphyr must.
    Unsure,
}

#[cfg(test)]
fn classify(s: &str) -> Plain {
    classify_scanned(s, &Scan::of(s.as_bytes()))
}

/// [`Plain`] of `s`, whose bytes `scan` describes.
fn classify_scanned(s: &str, scan: &Scan) -> Plain {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Plain::Null,
        "true" | "True" | "TRUE" => return Plain::Bool(true),
        "false" | "False" | "FALSE" => return Plain::Bool(false),
        _ => {}
    }
    let first = s.as_bytes()[0];
    let signed = matches!(first, b'+' | b'-');
    let unsigned = if signed { &s[1..] } else { s };
    // Only digits after the sign, and at least one.
    let digits = scan.digits_after_first
        && (if signed {
            s.len() > 1
        } else {
            first.is_ascii_digit()
        });
    // Our options keep these as strings (`underscored_numbers_as_strings`,
    // `leading_zero_numbers_as_strings`).
    if scan.underscore || (digits && unsigned.len() > 1 && unsigned.starts_with('0')) {
        return Plain::Str;
    }
    if digits && unsigned.len() <= 18 && first != b'+' {
        // At most 18 digits: fits either type, no overflow to a float.
        return match unsigned.parse::<i64>() {
            Ok(n) if first == b'-' => Plain::Signed(-n),
            Ok(n) => Plain::Unsigned(n.unsigned_abs()),
            Err(_) => Plain::Unsure,
        };
    }
    if maybe_number(unsigned) {
        Plain::Unsure
    } else {
        Plain::Str
    }
}

/// Whether `u` (a scalar without its sign) might be read as a number: a radix prefix, the
/// YAML spellings of infinity and NaN, or only the characters of a decimal or exponent
/// numeral, starting with a digit or a dot, with a sign only after an exponent mark.
fn maybe_number(u: &str) -> bool {
    let b = u.as_bytes();
    let Some(&first) = b.first() else {
        return false;
    };
    if b.len() >= 2 && first == b'0' && matches!(b[1], b'x' | b'X' | b'o' | b'O' | b'b' | b'B') {
        return true;
    }
    if first == b'.' && (u[1..].eq_ignore_ascii_case("inf") || u[1..].eq_ignore_ascii_case("nan")) {
        return true;
    }
    if !(first.is_ascii_digit() || first == b'.') {
        return false;
    }
    b.iter().enumerate().all(|(i, &c)| match c {
        b'0'..=b'9' | b'.' | b'e' | b'E' => true,
        b'+' | b'-' => i > 0 && matches!(b[i - 1], b'e' | b'E'),
        _ => false,
    })
}

/// A double-quoted scalar at the start of `s`, closed on this line: its text and the bytes
/// it took. Escapes other than `\\ \" \/ \n \t \r \xXX \uXXXX` decline.
pub(crate) fn double_quoted(s: &str) -> Fast<(String, usize)> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.char_indices().skip(1);
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((out, i + 1)),
            '\\' => {
                let (_, e) = chars.next().ok_or(Declined)?;
                let hex = match e {
                    '\\' | '"' | '/' => {
                        out.push(e);
                        continue;
                    }
                    'n' => {
                        out.push('\n');
                        continue;
                    }
                    't' => {
                        out.push('\t');
                        continue;
                    }
                    'r' => {
                        out.push('\r');
                        continue;
                    }
                    'x' => 2,
                    'u' => 4,
                    _ => return Err(Declined),
                };
                let mut code = 0u32;
                for _ in 0..hex {
                    let (_, h) = chars.next().ok_or(Declined)?;
                    code = code * 16 + h.to_digit(16).ok_or(Declined)?;
                }
                out.push(char::from_u32(code).ok_or(Declined)?);
            }
            _ => out.push(c),
        }
    }
    Err(Declined)
}

/// A single-quoted scalar at the start of `s`, closed on this line (`''` is a quote).
pub(crate) fn single_quoted(s: &str) -> Fast<(String, usize)> {
    let mut out = String::with_capacity(s.len());
    let bytes = s.as_bytes();
    let mut start = 1;
    let mut i = 1;
    while i < bytes.len() {
        if bytes[i] == b'\'' {
            out.push_str(&s[start..i]);
            if bytes.get(i + 1) == Some(&b'\'') {
                out.push('\'');
                i += 2;
                start = i;
                continue;
            }
            return Ok((out, i + 1));
        }
        i += 1;
    }
    Err(Declined)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        assert_eq!(classify("~"), Plain::Null);
        assert_eq!(classify("True"), Plain::Bool(true));
        assert_eq!(classify("yes"), Plain::Str);
        assert_eq!(classify("010"), Plain::Str);
        assert_eq!(classify("-010"), Plain::Str);
        assert_eq!(classify("1_000"), Plain::Str);
        assert_eq!(classify("-12"), Plain::Signed(-12));
        assert_eq!(classify("0"), Plain::Unsigned(0));
        assert_eq!(classify("+12"), Plain::Unsure);
        assert_eq!(classify("1234567890123456789"), Plain::Unsure);
        assert_eq!(classify("0x1F"), Plain::Unsure);
        assert_eq!(classify("1e3"), Plain::Unsure);
        assert_eq!(classify(".inf"), Plain::Unsure);
        assert_eq!(classify("-.NaN"), Plain::Unsure);
        assert_eq!(classify("1.5"), Plain::Unsure);
        assert_eq!(classify("8f6a70ad-f435"), Plain::Str);
        assert_eq!(classify("2024-01-01"), Plain::Str);
        assert_eq!(classify("inf"), Plain::Str);
        assert_eq!(classify(".git"), Plain::Str);
    }
}
