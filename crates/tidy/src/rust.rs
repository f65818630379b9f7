//! What the rules read from Rust sources: the code of a line without its comment, module
//! declarations with their attributes, and which files only tests compile.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::manifest::unquote;
use crate::{read, rust_files};

/// The code of a line of Rust: what precedes a `//` comment outside string literals.
pub fn code(line: &str) -> &str {
    let bytes = line.as_bytes();
    let mut in_string = false;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if in_string => i += 1,
            b'"' => in_string = !in_string,
            // A char literal `'"'` or `'\''`; a lone `'` is a lifetime.
            b'\'' if !in_string && bytes.get(i + 2) == Some(&b'\'') => i += 2,
            b'\'' if !in_string && bytes.get(i + 1) == Some(&b'\\') => i += 3,
            b'/' if !in_string && bytes.get(i + 1) == Some(&b'/') => return &line[..i],
            _ => {}
        }
        i += 1;
    }
    line
}

/// A `mod NAME;` or `mod NAME { .. }` declaration in a Rust file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModDecl {
    /// The module's name.
    pub name: String,
    /// The 1-based line of `mod`.
    pub line: usize,
    /// The outer attributes written above it, each compacted (no whitespace).
    pub attrs: Vec<String>,
    /// `mod NAME;`: the module is another file.
    pub external: bool,
}

impl ModDecl {
    /// Whether a `cfg` attribute limits the module to tests: `#[cfg(test)]`,
    /// `#[cfg(any(test, feature = "test-util"))]` and the like, never `not(test)`.
    pub fn is_test_only(&self) -> bool {
        self.attrs.iter().any(|a| {
            a.starts_with("#[cfg(")
                && !a.contains("not(test")
                && ["(test)", "(test,", ",test)", ",test,", "\"test-util\""]
                    .iter()
                    .any(|t| a.contains(t))
        })
    }

    /// The `#[path = ".."]` this declaration carries.
    fn path_attr(&self) -> Option<String> {
        self.attrs.iter().find_map(|a| {
            let rest = a.strip_prefix("#[path=")?.strip_suffix(']')?;
            Some(unquote(rest))
        })
    }
}

/// The module declarations of a Rust source text, with the attributes above each.
pub fn module_declarations(text: &str) -> Vec<ModDecl> {
    let mut out = Vec::new();
    let mut attrs: Vec<String> = Vec::new();
    let mut open_attr: Option<String> = None;
    for (n, raw) in text.lines().enumerate() {
        let line = code(raw).trim();
        if let Some(mut attr) = open_attr.take() {
            attr.push_str(line);
            finish_attr(attr, &mut attrs, &mut open_attr);
            continue;
        }
        if line.is_empty() {
            continue;
        }
        if line.starts_with("#[") {
            finish_attr(line.to_owned(), &mut attrs, &mut open_attr);
            continue;
        }
        let mut rest = line;
        if let Some(r) = rest.strip_prefix("pub") {
            rest = r.trim_start();
            if rest.starts_with('(') {
                rest = rest.split_once(')').map_or("", |(_, r)| r.trim_start());
            }
        }
        if let Some(r) = rest.strip_prefix("mod ") {
            let name: String = r
                .trim_start()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let after = r.trim_start()[name.len()..].trim_start();
            out.push(ModDecl {
                name,
                line: n + 1,
                attrs: std::mem::take(&mut attrs),
                external: after.starts_with(';'),
            });
        }
        attrs.clear();
    }
    out
}

/// Keeps a complete `#[..]` attribute (compacted), or holds it open for the next line.
fn finish_attr(attr: String, attrs: &mut Vec<String>, open: &mut Option<String>) {
    let compact: String = attr.chars().filter(|c| !c.is_whitespace()).collect();
    if nesting_rust(&compact) > 0 {
        *open = Some(attr);
    } else {
        attrs.push(compact);
    }
}

/// Opened minus closed `[`/`(` in Rust code, ignoring string contents.
fn nesting_rust(s: &str) -> i64 {
    let mut depth = 0;
    let mut in_string = false;
    let mut escaped = false;
    for c in s.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' if in_string => escaped = true,
            '"' => in_string = !in_string,
            '[' | '(' if !in_string => depth += 1,
            ']' | ')' if !in_string => depth -= 1,
            _ => {}
        }
    }
    depth
}

/// The file a `mod NAME;` declared in `file` is read from, if it exists.
pub fn module_file(file: &Path, decl: &ModDecl) -> Option<PathBuf> {
    let dir = file.parent()?;
    if let Some(path) = decl.path_attr() {
        return Some(dir.join(path)).filter(|p| p.is_file());
    }
    let own = submodule_dir(file);
    [
        own.join(format!("{}.rs", decl.name)),
        own.join(&decl.name).join("mod.rs"),
    ]
    .into_iter()
    .find(|p| p.is_file())
}

/// Where the submodules of the module in `file` live: beside a `mod.rs`, `lib.rs` or
/// `main.rs`, in a directory named after any other file.
fn submodule_dir(file: &Path) -> PathBuf {
    let dir = file.parent().unwrap_or(Path::new("."));
    match file.file_stem().and_then(|s| s.to_str()) {
        Some("mod" | "lib" | "main") | None => dir.to_path_buf(),
        Some(stem) => dir.join(stem),
    }
}

/// The files under `src` that only tests compile: modules declared under a test-only `cfg`
/// (see [`ModDecl::is_test_only`]) and every module below them.
pub fn test_only_files(src: &Path) -> BTreeSet<PathBuf> {
    let files = rust_files(src);
    let mut test = BTreeSet::new();
    let mut below = Vec::new();
    for file in &files {
        for decl in module_declarations(&read(file)) {
            if decl.external
                && decl.is_test_only()
                && let Some(child) = module_file(file, &decl)
            {
                below.push(submodule_dir(&child));
                test.insert(child);
            }
        }
    }
    for file in files {
        if below.iter().any(|d| file.starts_with(d)) {
            test.insert(file);
        }
    }
    test
}

#[cfg(test)]
mod tests;
