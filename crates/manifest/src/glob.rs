//! Glob patterns as Argo CD matches them (its glob library's syntax): `?` is one
//! character, `[abc]`, `[a-z]` and `[!abc]` a class, `{a,b}` alternatives (nesting
//! allowed), `\` escapes the next character. A pattern that does not parse (an unclosed
//! `[` or `{`) matches nothing.
//!
//! Two flavours, as Argo CD uses both: [`matches()`] has no path separator, so `*` also
//! matches `/` (`directory.include`/`exclude` against the file's path relative to the
//! app's `path`, `*.yaml` matches `sub/a.yaml`; project destinations, resource kinds, sync
//! window selectors); [`matches_with_separator`] stops `*` and `?` at the separator while
//! `**` crosses it (a project's `sourceRepos`, with `/`).
//!
//! A [`Glob`] is compiled once (braces expanded, each alternative parsed) and then matched
//! without parsing (a non-ASCII text is decoded once per match; the separator flavour
//! keeps two rows of booleans); the free functions compile on each call, for patterns
//! used once.

use std::fmt;

/// A compiled glob (module docs for the syntax). Equal, printed and deserialized as its
/// source text.
#[derive(Clone, Default)]
pub struct Glob {
    source: String,
    compiled: Compiled,
}

#[derive(Clone, Default)]
enum Compiled {
    /// No metacharacter: the text must equal the source.
    #[default]
    Literal,
    /// Brace alternatives, each a token sequence; none when the pattern does not parse.
    Alternatives(Vec<Vec<Token>>),
}

#[derive(Clone, PartialEq, Eq)]
enum Token {
    /// One given character (an escaped metacharacter too).
    Char(char),
    /// `?`.
    One,
    /// `*` (each star its own token: `**` means something with a separator).
    Star,
    /// `[...]`: inclusive ranges (a single character is a range of one).
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

impl Glob {
    /// Compiles `pattern`; one that does not parse (an unclosed `[` or `{`) compiles to a
    /// glob that matches nothing.
    pub fn new(pattern: &str) -> Glob {
        let compiled = if pattern.contains(['*', '?', '[', '{', '\\']) {
            let p: Vec<char> = pattern.chars().collect();
            Compiled::Alternatives(expand(&p).iter().filter_map(|a| tokens(a)).collect())
        } else {
            Compiled::Literal
        };
        Glob {
            source: pattern.to_owned(),
            compiled,
        }
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether the pattern is empty (it then matches only an empty text).
    pub fn is_empty(&self) -> bool {
        self.source.is_empty()
    }

    /// Whether `text` matches, with no separator (`*` matches any run of characters).
    pub fn is_match(&self, text: &str) -> bool {
        self.matches_by(text, simple_match, simple_match)
    }

    /// Whether `text` matches where `*` and `?` never match `separator` and `**` matches
    /// any run of characters, separators included.
    pub fn is_match_with_separator(&self, text: &str, separator: char) -> bool {
        self.matches_by(
            text,
            |alt, t| separated_match(alt, t, separator),
            |alt, t| separated_match(alt, t, separator),
        )
    }

    /// Runs `ascii` (over bytes) or `other` (over decoded characters) on each alternative.
    fn matches_by(
        &self,
        text: &str,
        ascii: impl Fn(&[Token], &[u8]) -> bool,
        other: impl Fn(&[Token], &[char]) -> bool,
    ) -> bool {
        match &self.compiled {
            Compiled::Literal => self.source == text,
            Compiled::Alternatives(alts) if text.is_ascii() => {
                alts.iter().any(|a| ascii(a, text.as_bytes()))
            }
            Compiled::Alternatives(alts) => {
                let t: Vec<char> = text.chars().collect();
                alts.iter().any(|a| other(a, &t))
            }
        }
    }
}

impl PartialEq for Glob {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for Glob {}

impl fmt::Debug for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.source, f)
    }
}

impl fmt::Display for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl From<&str> for Glob {
    fn from(pattern: &str) -> Self {
        Glob::new(pattern)
    }
}

impl From<String> for Glob {
    fn from(pattern: String) -> Self {
        Glob::new(&pattern)
    }
}

impl<'de> serde::Deserialize<'de> for Glob {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(|s| Glob::new(&s))
    }
}

/// Whether `text` matches `pattern` (no separator: `*` matches any run of characters).
pub fn matches(pattern: &str, text: &str) -> bool {
    Glob::new(pattern).is_match(text)
}

/// Whether `text` matches `pattern` where `*` and `?` never match `separator` and `**`
/// matches any run of characters, separators included.
pub fn matches_with_separator(pattern: &str, text: &str, separator: char) -> bool {
    Glob::new(pattern).is_match_with_separator(text, separator)
}

/// A brace-free pattern's tokens; `None` for an unclosed class (the pattern then matches
/// nothing, as an invalid pattern in Argo CD).
fn tokens(p: &[char]) -> Option<Vec<Token>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < p.len() {
        match p[i] {
            '*' => out.push(Token::Star),
            '?' => out.push(Token::One),
            '[' => {
                let (end, class) = class(p, i)?;
                out.push(class);
                i = end;
            }
            '\\' if i + 1 < p.len() => {
                out.push(Token::Char(p[i + 1]));
                i += 1;
            }
            c => out.push(Token::Char(c)),
        }
        i += 1;
    }
    Some(out)
}

impl Token {
    /// Whether this one-character token takes `c` (never called on a star).
    fn takes(&self, c: char) -> bool {
        match self {
            Token::Char(l) => *l == c,
            Token::One => true,
            Token::Class { negated, ranges } => {
                ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&c)) != *negated
            }
            Token::Star => false,
        }
    }
}

/// A brace-free pattern against `t` with separators: dynamic programming over (pattern
/// position, text position). Quadratic in the lengths, which are URLs.
fn separated_match<T: Copy + Into<char>>(p: &[Token], t: &[T], sep: char) -> bool {
    // `ok[j]`: the pattern consumed so far matches `t[..j]`.
    let mut ok = vec![false; t.len() + 1];
    let mut next = vec![false; t.len() + 1];
    ok[0] = true;
    let mut pi = 0;
    while pi < p.len() {
        next.fill(false);
        let width;
        if p[pi] == Token::Star {
            let double = p.get(pi + 1) == Some(&Token::Star);
            width = if double { 2 } else { 1 };
            for j in 0..=t.len() {
                if !ok[j] {
                    continue;
                }
                next[j] = true;
                let mut k = j;
                while k < t.len() && (double || t[k].into() != sep) {
                    k += 1;
                    next[k] = true;
                }
            }
        } else {
            width = 1;
            // `?` and classes never take the separator; a given character may.
            let any_char = matches!(p[pi], Token::Char(_));
            for j in 0..t.len() {
                let c: char = t[j].into();
                if ok[j] && p[pi].takes(c) && (any_char || c != sep) {
                    next[j + 1] = true;
                }
            }
        }
        std::mem::swap(&mut ok, &mut next);
        pi += width;
    }
    ok[t.len()]
}

/// The patterns without braces that `p` stands for (`a{b,c}` → `ab`, `ac`).
fn expand(p: &[char]) -> Vec<Vec<char>> {
    let mut i = 0;
    while i < p.len() {
        match p[i] {
            '\\' => i += 2,
            '[' => {
                // A class is not expanded: skip to its end.
                let mut j = i + 1;
                while j < p.len() && p[j] != ']' {
                    j += 1;
                }
                i = j + 1;
            }
            '{' => {
                let Some((end, parts)) = brace(p, i) else {
                    // Unclosed: matches nothing (an invalid pattern in Argo CD).
                    return Vec::new();
                };
                let mut out = Vec::new();
                for part in parts {
                    let mut joined = p[..i].to_vec();
                    joined.extend_from_slice(&part);
                    joined.extend_from_slice(&p[end + 1..]);
                    out.extend(expand(&joined));
                }
                return out;
            }
            _ => i += 1,
        }
    }
    vec![p.to_vec()]
}

/// The closing brace of the group opening at `open`, and its top-level alternatives.
fn brace(p: &[char], open: usize) -> Option<(usize, Vec<Vec<char>>)> {
    let mut depth = 0;
    let mut parts = Vec::new();
    let mut current = Vec::new();
    let mut i = open + 1;
    while i < p.len() {
        match p[i] {
            '\\' if i + 1 < p.len() => {
                current.extend_from_slice(&p[i..i + 2]);
                i += 2;
                continue;
            }
            '{' => depth += 1,
            '}' if depth == 0 => {
                parts.push(current);
                return Some((i, parts));
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut current));
                i += 1;
                continue;
            }
            _ => {}
        }
        current.push(p[i]);
        i += 1;
    }
    None
}

/// Matches a brace-free pattern without separator.
fn simple_match<T: Copy + Into<char>>(p: &[Token], t: &[T]) -> bool {
    // Iterative with backtracking to the last `*` (linear in practice, no recursion).
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == Token::Star {
            while pi < p.len() && p[pi] == Token::Star {
                pi += 1;
            }
            star = Some((pi, ti));
            continue;
        }
        if pi < p.len() && p[pi].takes(t[ti].into()) {
            pi += 1;
            ti += 1;
            continue;
        }
        match star {
            Some((sp, st)) => {
                pi = sp;
                ti = st + 1;
                star = Some((sp, st + 1));
            }
            None => return false,
        }
    }
    while pi < p.len() && p[pi] == Token::Star {
        pi += 1;
    }
    pi == p.len()
}

/// The class opening at `open`: its closing `]` and the class. `None` when it is not
/// closed.
fn class(p: &[char], open: usize) -> Option<(usize, Token)> {
    let mut i = open + 1;
    let negated = p.get(i).is_some_and(|x| *x == '!' || *x == '^');
    if negated {
        i += 1;
    }
    let mut ranges = Vec::new();
    let mut first = true;
    while i < p.len() {
        if p[i] == ']' && !first {
            return Some((i, Token::Class { negated, ranges }));
        }
        first = false;
        let lo = p[i];
        if i + 2 < p.len() && p[i + 1] == '-' && p[i + 2] != ']' {
            ranges.push((lo, p[i + 2]));
            i += 3;
        } else {
            ranges.push((lo, lo));
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{Glob, matches, matches_with_separator};

    #[test]
    fn argo_cd_glob_cases() {
        assert!(matches("*.yaml", "a.yaml"));
        assert!(matches("*.yaml", "sub/a.yaml"), "no separator: * crosses /");
        assert!(!matches("*.yaml", "a.json"));
        assert!(matches("some-directory/*", "some-directory/x/y.yaml"));
        assert!(matches("{config.json,deployment.yaml}", "config.json"));
        assert!(matches("{config.json,deployment.yaml}", "deployment.yaml"));
        assert!(!matches("{config.json,deployment.yaml}", "service.yaml"));
        assert!(matches("{a,b{c,d}}.yaml", "bd.yaml"));
        assert!(matches("file-?.yaml", "file-1.yaml"));
        assert!(matches("[a-c]*.yaml", "b.yaml"));
        assert!(!matches("[!a-c]*.yaml", "b.yaml"));
        assert!(matches("config.json", "config.json"));
        assert!(!matches("config.json", "sub/config.json"));
        assert!(!matches("{a,b", "a"), "an invalid pattern matches nothing");
        assert!(!matches("[ab", "a"));
        assert!(matches("a\\*b", "a*b"));
        assert!(!matches("a\\*b", "axb"));
    }

    #[test]
    fn with_a_separator_star_stays_within_a_segment() {
        let m = |p, t| matches_with_separator(p, t, '/');
        assert!(m("https://github.com/org/*", "https://github.com/org/repo"));
        assert!(!m("https://github.com/org/*", "https://github.com/org/a/b"));
        assert!(m("https://github.com/org/**", "https://github.com/org/a/b"));
        assert!(m("https://github.com/*/repo", "https://github.com/x/repo"));
        assert!(!m("https://github.com/?", "https://github.com//"));
        assert!(m("https://git.example/{a,b}", "https://git.example/b"));
        assert!(m("https://git.example/[ab]x", "https://git.example/ax"));
        assert!(!m("https://git.example/[ab", "https://git.example/a"));
        assert!(m("", ""));
        assert!(!m("", "x"));
        assert!(m("a\\*", "a*"));
    }

    #[test]
    fn a_compiled_glob_matches_as_often_as_asked_and_counts_characters_not_bytes() {
        let g = Glob::new("{team-?,é*}-[a-c]");
        for _ in 0..3 {
            assert!(g.is_match("team-1-a"));
            assert!(g.is_match("éé-b"), "a non-ASCII text");
            assert!(!g.is_match("team-12-a"));
        }
        assert!(Glob::new("?").is_match("é"), "? is one character");
        assert!(Glob::new("[à-é]").is_match("è"));
        assert!(Glob::new("a/?/b").is_match_with_separator("a/é/b", '/'));
        assert!(!Glob::new("a/*").is_match_with_separator("a/é/b", '/'));
        assert!(Glob::new("a/**").is_match_with_separator("a/é/b", '/'));
        assert_eq!(Glob::new("x*").as_str(), "x*");
        assert!(
            Glob::default().is_match(""),
            "the empty pattern matches the empty text"
        );
        assert!(!Glob::default().is_match("x"));
        assert!(!Glob::new("{a,b").is_match("a"), "invalid: matches nothing");
    }
}
