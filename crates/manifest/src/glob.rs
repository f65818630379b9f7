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

/// Whether `text` matches `pattern` (no separator: `*` matches any run of characters).
pub fn matches(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    expand(&p)
        .into_iter()
        .any(|alt| simple_match(&alt, &t).unwrap_or(false))
}

/// Whether `text` matches `pattern` where `*` and `?` never match `separator` and `**`
/// matches any run of characters, separators included.
pub fn matches_with_separator(pattern: &str, text: &str, separator: char) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    expand(&p)
        .into_iter()
        .any(|alt| separated_match(&alt, &t, separator).unwrap_or(false))
}

/// A brace-free pattern against `t` with separators: dynamic programming over (pattern
/// position, text position), `None` for an unclosed class. Quadratic in the lengths,
/// which are URLs.
fn separated_match(p: &[char], t: &[char], sep: char) -> Option<bool> {
    // `ok[j]`: the pattern consumed so far matches `t[..j]`.
    let mut ok = vec![false; t.len() + 1];
    ok[0] = true;
    let mut pi = 0;
    while pi < p.len() {
        let mut next = vec![false; t.len() + 1];
        let width;
        match p[pi] {
            '*' => {
                let double = p.get(pi + 1) == Some(&'*');
                width = if double { 2 } else { 1 };
                for j in 0..=t.len() {
                    if !ok[j] {
                        continue;
                    }
                    next[j] = true;
                    let mut k = j;
                    while k < t.len() && (double || t[k] != sep) {
                        k += 1;
                        next[k] = true;
                    }
                }
            }
            '[' => {
                let mut end = None;
                for j in 0..t.len() {
                    let (e, hit) = class(p, pi, t[j])?;
                    end = Some(e);
                    if ok[j] && hit && t[j] != sep {
                        next[j + 1] = true;
                    }
                }
                let end = match end {
                    Some(e) => e,
                    // Validate the class even against an empty text.
                    None => class(p, pi, '\0')?.0,
                };
                width = end - pi + 1;
            }
            c => {
                let (lit, w) = match c {
                    '\\' if pi + 1 < p.len() => (Some(p[pi + 1]), 2),
                    '?' => (None, 1),
                    c => (Some(c), 1),
                };
                width = w;
                for j in 0..t.len() {
                    let hit = match lit {
                        Some(l) => t[j] == l,
                        None => t[j] != sep,
                    };
                    if ok[j] && hit {
                        next[j + 1] = true;
                    }
                }
            }
        }
        ok = next;
        pi += width;
    }
    Some(ok[t.len()])
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

/// Matches a brace-free pattern; `None` for an unclosed class.
fn simple_match(p: &[char], t: &[char]) -> Option<bool> {
    // Iterative with backtracking to the last `*` (linear in practice, no recursion).
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        let step = if pi < p.len() {
            match p[pi] {
                '*' => {
                    while pi < p.len() && p[pi] == '*' {
                        pi += 1;
                    }
                    star = Some((pi, ti));
                    continue;
                }
                '?' => Some(1),
                '[' => {
                    let (end, hit) = class(p, pi, t[ti])?;
                    hit.then_some(end - pi + 1)
                }
                '\\' if pi + 1 < p.len() => (p[pi + 1] == t[ti]).then_some(2),
                c => (c == t[ti]).then_some(1),
            }
        } else {
            None
        };
        match step {
            Some(n) => {
                pi += n;
                ti += 1;
            }
            None => match star {
                Some((sp, st)) => {
                    pi = sp;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return Some(false),
            },
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    Some(pi == p.len())
}

/// The class opening at `open`: its closing `]` and whether `c` is in it.
fn class(p: &[char], open: usize, c: char) -> Option<(usize, bool)> {
    let mut i = open + 1;
    let negated = p.get(i).is_some_and(|x| *x == '!' || *x == '^');
    if negated {
        i += 1;
    }
    let mut hit = false;
    let mut first = true;
    while i < p.len() {
        if p[i] == ']' && !first {
            return Some((i, hit != negated));
        }
        first = false;
        let lo = p[i];
        if i + 2 < p.len() && p[i + 1] == '-' && p[i + 2] != ']' {
            hit |= (lo..=p[i + 2]).contains(&c);
            i += 3;
        } else {
            hit |= lo == c;
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{matches, matches_with_separator};

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
}
