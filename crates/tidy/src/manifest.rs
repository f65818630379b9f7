//! What the rules read from a `Cargo.toml`: the package name and its dependencies, by a
//! line-based reader that knows the forms of TOML manifests use (not a TOML parser).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::{read, relative};

/// The strings of `members = [..]` in the `[workspace]` table of a root manifest.
pub(crate) fn workspace_members(text: &str) -> Vec<String> {
    let mut section = Vec::new();
    let mut lines = text.lines();
    while let Some(raw) = lines.next() {
        let line = strip_comment(raw).trim().to_owned();
        if let Some(header) = table_header(&line) {
            section = header;
            continue;
        }
        let Some((key, value)) = split_key_value(&line) else {
            continue;
        };
        let value = complete_value(value, &mut lines);
        if section == ["workspace"] && split_dotted(key) == ["members"] {
            return quoted_strings(&value);
        }
    }
    Vec::new()
}

/// Which table a dependency is declared in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DepKind {
    /// `[dependencies]` (also `[target.'cfg(..)'.dependencies]`): built into the crate.
    Normal,
    /// `[dev-dependencies]`: tests, examples and benches only.
    Dev,
    /// `[build-dependencies]`: the build script only.
    Build,
}

/// One dependency of a package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dependency {
    /// The package depended on (`package = ".."` when the key renames it).
    pub name: String,
    /// The key it is declared under (the name the code uses).
    pub key: String,
    /// Its table.
    pub kind: DepKind,
    /// The `cfg(..)` or triple of a `[target.X.*dependencies]` table.
    pub target: Option<String>,
}

/// What the rules need from one package's `Cargo.toml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// The package's directory.
    pub dir: PathBuf,
    /// `[package] name`.
    pub package: String,
    /// Every dependency, in declaration order.
    pub dependencies: Vec<Dependency>,
}

/// The table a line of a manifest is in.
enum Table {
    Package,
    /// A dependency table: each key is a dependency.
    Dependencies(DepKind, Option<String>),
    /// `[dependencies.NAME]`: the keys describe dependency number `.0`.
    Dependency(usize),
    Other,
}

impl Manifest {
    /// Reads `dir/Cargo.toml`.
    pub fn read(dir: &Path) -> Manifest {
        Manifest::parse(dir.to_path_buf(), &read(&dir.join("Cargo.toml")))
    }

    /// Reads the manifest text of the package in `dir`.
    ///
    /// Understood: `[package] name`; `[dependencies]`, `[dev-dependencies]`,
    /// `[build-dependencies]` and their `[target.X.…]` forms, with keys written
    /// `name = "1"`, `name = { .. }`, `name.workspace = true` (and other dotted keys), and
    /// tables `[dependencies.name]`; `package = ".."` renames; comments; values continued
    /// over several lines (arrays, multi-line strings). Not understood: anything that needs
    /// a real TOML parser (for example a key quoted with a `.` inside).
    pub fn parse(dir: PathBuf, text: &str) -> Manifest {
        let mut package = String::new();
        let mut dependencies: Vec<Dependency> = Vec::new();
        let mut table = Table::Other;
        let mut lines = text.lines();
        while let Some(raw) = lines.next() {
            let line = strip_comment(raw).trim().to_owned();
            if line.is_empty() {
                continue;
            }
            if line.starts_with("[[") {
                table = Table::Other; // [[bin]], [[bench]], …
                continue;
            }
            if let Some(header) = table_header(&line) {
                table = table_of(&header, &mut dependencies);
                continue;
            }
            let Some((key, value)) = split_key_value(&line) else {
                continue;
            };
            let value = complete_value(value, &mut lines);
            let key = split_dotted(key);
            match table {
                Table::Package if key == ["name"] => package = unquote(&value),
                Table::Dependencies(kind, ref target) => {
                    let renamed = match key.as_slice() {
                        [_] => inline_table_get(&value, "package"),
                        [_, field] if field == "package" => Some(unquote(&value)),
                        _ => None,
                    };
                    let found = dependencies
                        .iter_mut()
                        .find(|d| d.key == key[0] && d.kind == kind && d.target == *target);
                    match found {
                        Some(d) => d.name = renamed.unwrap_or_else(|| d.name.clone()),
                        None => dependencies.push(Dependency {
                            name: renamed.unwrap_or_else(|| key[0].clone()),
                            key: key[0].clone(),
                            kind,
                            target: target.clone(),
                        }),
                    }
                }
                Table::Dependency(i) if key == ["package"] => {
                    dependencies[i].name = unquote(&value);
                }
                _ => {}
            }
        }
        Manifest {
            dir,
            package,
            dependencies,
        }
    }

    /// The package names this one is built with: `[dependencies]`, including
    /// target-specific ones.
    pub fn normal_dependencies(&self) -> impl Iterator<Item = &str> {
        self.dependencies
            .iter()
            .filter(|d| d.kind == DepKind::Normal)
            .map(|d| d.name.as_str())
    }

    /// The manifest's path relative to the workspace root, for messages.
    pub fn path(&self) -> String {
        relative(&self.dir.join("Cargo.toml"))
    }
}

/// The dotted name of a `[table]` header line, or None for any other line.
fn table_header(line: &str) -> Option<Vec<String>> {
    let inner = line.strip_prefix('[')?.strip_suffix(']')?;
    (!inner.starts_with('[')).then(|| split_dotted(inner))
}

/// The table a `[header]` opens; `[dependencies.NAME]` also records NAME.
fn table_of(header: &[String], dependencies: &mut Vec<Dependency>) -> Table {
    let (target, rest) = match header {
        [t, target, rest @ ..] if t == "target" => (Some(target.clone()), rest),
        _ => (None, header),
    };
    let kind = match rest.first().map(String::as_str) {
        Some("dependencies") => DepKind::Normal,
        Some("dev-dependencies" | "dev_dependencies") => DepKind::Dev,
        Some("build-dependencies" | "build_dependencies") => DepKind::Build,
        Some("package") if target.is_none() && rest.len() == 1 => return Table::Package,
        _ => return Table::Other,
    };
    match rest {
        [_] => Table::Dependencies(kind, target),
        [_, name] => {
            dependencies.push(Dependency {
                name: name.clone(),
                key: name.clone(),
                kind,
                target,
            });
            Table::Dependency(dependencies.len() - 1)
        }
        _ => Table::Other,
    }
}

/// The byte offsets and characters of `s` that are outside TOML string literals (`".."`
/// with escapes, `'..'` without).
fn outside_strings(s: &str) -> Vec<(usize, char)> {
    let mut out = Vec::new();
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match quote {
            Some('"') if escaped => escaped = false,
            Some('"') if c == '\\' => escaped = true,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None => out.push((i, c)),
        }
    }
    out
}

/// A manifest line without its `#` comment.
fn strip_comment(line: &str) -> &str {
    match outside_strings(line).iter().find(|(_, c)| *c == '#') {
        Some(&(i, _)) => &line[..i],
        None => line,
    }
}

/// `key = value` split at the first `=` outside strings.
fn split_key_value(line: &str) -> Option<(&str, &str)> {
    let &(i, _) = outside_strings(line).iter().find(|(_, c)| *c == '=')?;
    Some((line[..i].trim(), line[i + 1..].trim()))
}

/// `a."b.c".d` → `[a, b.c, d]`.
fn split_dotted(key: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut start = 0;
    for (i, c) in outside_strings(key) {
        if c == '.' {
            parts.push(unquote(&key[start..i]));
            start = i + 1;
        }
    }
    parts.push(unquote(&key[start..]));
    parts
}

/// A value without its quotes (escapes are kept as written).
pub(crate) fn unquote(s: &str) -> String {
    let s = s.trim();
    for q in ["\"\"\"", "'''", "\"", "'"] {
        if s.len() >= 2 * q.len() && s.starts_with(q) && s.ends_with(q) {
            return s[q.len()..s.len() - q.len()].to_owned();
        }
    }
    s.to_owned()
}

/// The value starting with `first`, with the lines it continues over (an array or inline
/// table left open, a multi-line string left unterminated) taken from `rest`.
fn complete_value<'a>(first: &str, rest: &mut impl Iterator<Item = &'a str>) -> String {
    let mut value = first.to_owned();
    for q in ["\"\"\"", "'''"] {
        if value.starts_with(q) && !value[q.len()..].contains(q) {
            for line in rest.by_ref() {
                value.push('\n');
                value.push_str(line);
                if line.contains(q) {
                    break;
                }
            }
            return value;
        }
    }
    let mut depth = nesting(&value);
    while depth > 0 {
        let Some(line) = rest.next() else { break };
        let line = strip_comment(line);
        depth += nesting(line);
        value.push('\n');
        value.push_str(line);
    }
    value
}

/// Opened minus closed `[`/`{` outside strings.
fn nesting(s: &str) -> i64 {
    outside_strings(s)
        .iter()
        .map(|(_, c)| match c {
            '[' | '{' => 1,
            ']' | '}' => -1,
            _ => 0,
        })
        .sum()
}

/// The value of `key` in an inline table `{ a = .., key = "x" }`, unquoted.
fn inline_table_get(value: &str, key: &str) -> Option<String> {
    let inner = value.trim().strip_prefix('{')?.strip_suffix('}')?;
    let mut depth = 0;
    let mut start = 0;
    let mut fields = Vec::new();
    for (i, c) in outside_strings(inner) {
        match c {
            '[' | '{' => depth += 1,
            ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                fields.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    fields.push(&inner[start..]);
    fields.into_iter().find_map(|field| {
        let (k, v) = split_key_value(field)?;
        (split_dotted(k) == [key]).then(|| unquote(v))
    })
}

/// The contents of every `".."` or `'..'` string in `s`, in order.
fn quoted_strings(s: &str) -> Vec<String> {
    let outside: BTreeSet<usize> = outside_strings(s).iter().map(|&(i, _)| i).collect();
    let mut out = Vec::new();
    let mut current: Option<(char, usize)> = None;
    for (i, c) in s.char_indices() {
        match current {
            None if (c == '"' || c == '\'') && !outside.contains(&i) => current = Some((c, i + 1)),
            Some((q, start)) if c == q && !outside.contains(&i) => {
                // The closing quote: the next character is outside again (or the end).
                let next = i + c.len_utf8();
                if next == s.len() || outside.contains(&next) || !s[next..].starts_with(q) {
                    out.push(s[start..i].to_owned());
                    current = None;
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests;
