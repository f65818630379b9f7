//! A project pattern of `sourceRepos` or `destinations`, compiled once when the project is
//! read: a leading `!` makes it a deny (it matches what its glob does not), and a lone `*`
//! matches everything. A `sourceRepos` pattern ([`RepoPattern`]) is compiled from the
//! repository URL as Argo CD normalises it (`rules.rs` `normalize_repo_url`).

use std::fmt;

use super::rules::normalize_repo_url;
use crate::glob::Glob;

/// One `destinations` pattern, or the compiled form of a [`RepoPattern`] (module docs). Equal, printed and
/// deserialized as written. The default is the empty pattern, which matches only an empty
/// value.
#[derive(Clone)]
pub struct Pattern {
    source: String,
    deny: bool,
    /// The glob without the `!`; `None` for a lone `*`.
    glob: Option<Glob>,
}

impl Pattern {
    /// A `destinations` pattern (server, name or namespace).
    pub fn new(pattern: &str) -> Pattern {
        Self::interpreted(pattern, pattern)
    }

    /// `source` read as `effective`: `!` and `*` are recognised on the effective text.
    fn interpreted(source: &str, effective: &str) -> Pattern {
        let (deny, body) = match effective.strip_prefix('!') {
            Some(denied) => (true, denied),
            None => (false, effective),
        };
        let glob = (deny || effective != "*").then(|| Glob::new(body));
        Pattern {
            source: source.to_owned(),
            deny,
            glob,
        }
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether the pattern is empty (it then matches only an empty value).
    pub fn is_empty(&self) -> bool {
        self.source.is_empty()
    }

    /// Whether the pattern is a deny (`!…`).
    pub fn is_deny(&self) -> bool {
        self.deny
    }

    /// Whether `value` matches: a deny matches what its glob does not; with `separator`,
    /// `*` and `?` stop at it.
    pub fn allows(&self, value: &str, separator: Option<char>) -> bool {
        let Some(glob) = &self.glob else {
            return true;
        };
        let hit = match separator {
            Some(s) => glob.is_match_with_separator(value, s),
            None => glob.is_match(value),
        };
        hit != self.deny
    }
}

impl Default for Pattern {
    fn default() -> Self {
        Pattern::new("")
    }
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for Pattern {}

impl fmt::Debug for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.source, f)
    }
}

impl From<&str> for Pattern {
    fn from(pattern: &str) -> Self {
        Pattern::new(pattern)
    }
}

impl From<String> for Pattern {
    fn from(pattern: String) -> Self {
        Pattern::new(&pattern)
    }
}

impl<'de> serde::Deserialize<'de> for Pattern {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(|s| Pattern::new(&s))
    }
}

/// One `sourceRepos` pattern: a [`Pattern`] over the normalised repository URL (a lone
/// `*`, once normalised, matches every repository). Equal and printed as written.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct RepoPattern(Pattern);

impl RepoPattern {
    /// Compiles a `sourceRepos` entry.
    pub fn new(pattern: &str) -> RepoPattern {
        let effective = match pattern.strip_prefix('!') {
            Some(denied) => format!("!{}", normalize_repo_url(denied)),
            None if pattern == "*" => "*".to_owned(),
            None => normalize_repo_url(pattern),
        };
        RepoPattern(Pattern::interpreted(pattern, &effective))
    }

    /// The compiled pattern.
    pub fn pattern(&self) -> &Pattern {
        &self.0
    }

    /// The entry as written.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

impl fmt::Debug for RepoPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl From<&str> for RepoPattern {
    fn from(pattern: &str) -> Self {
        RepoPattern::new(pattern)
    }
}

impl From<String> for RepoPattern {
    fn from(pattern: String) -> Self {
        RepoPattern::new(&pattern)
    }
}

impl<'de> serde::Deserialize<'de> for RepoPattern {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(|s| RepoPattern::new(&s))
    }
}
