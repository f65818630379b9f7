//! Glob patterns as Argo CD matches `directory.include` / `directory.exclude`: against the
//! file's path relative to the app's `path`, with no path separator, so `*` also matches
//! `/` (`*.yaml` matches `sub/a.yaml`). `?` is one character, `[abc]`, `[a-z]` and
//! `[!abc]` a class, `{a,b}` alternatives (nesting allowed), `\` escapes the next
//! character. A pattern that does not parse (an unclosed `[` or `{`) matches nothing.

/// Whether `text` matches `pattern`.
pub(crate) fn matches(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    expand(&p)
        .into_iter()
        .any(|alt| simple_match(&alt, &t).unwrap_or(false))
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
    use super::matches;

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
}
