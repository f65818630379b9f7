use super::*;

fn deps(text: &str) -> Vec<(String, DepKind, Option<String>)> {
    Manifest::parse(PathBuf::from("x"), text)
        .dependencies
        .into_iter()
        .map(|d| (d.name, d.kind, d.target))
        .collect()
}

fn normal(names: &[&str]) -> Vec<(String, DepKind, Option<String>)> {
    names
        .iter()
        .map(|n| (n.to_string(), DepKind::Normal, None))
        .collect()
}

#[test]
fn reads_every_way_of_writing_a_dependency() {
    let text = r#"
[package]
name = "fleetshard-x" # a comment
description = "has [dependencies] and # inside"

[dependencies]
a.workspace = true
b = "1"
c = { workspace = true, features = ["x", "y"] }
"d" = { version = "1", optional = true } # comment with = and [
e = { workspace = true, features = [
  "one",   # spans lines
  "two",
] }
renamed = { package = "real-name", version = "1" }
f.workspace = true
f.features = ["g"]

[dependencies.h]
version = "1"

[dependencies.alias]
package = "aliased"

[target.'cfg(unix)'.dependencies]
i = "1"

[dev-dependencies]
j.workspace = true

[build-dependencies]
k = "1"

[[bench]]
name = "not-a-dependency"

[workspace.dependencies]
l = "1"

[features]
m = ["dep:c"]
"#;
    let m = Manifest::parse(PathBuf::from("x"), text);
    assert_eq!(m.package, "fleetshard-x");
    let mut want = normal(&["a", "b", "c", "d", "e", "real-name", "f", "h", "aliased"]);
    want.push(("i".into(), DepKind::Normal, Some("cfg(unix)".into())));
    want.push(("j".into(), DepKind::Dev, None));
    want.push(("k".into(), DepKind::Build, None));
    assert_eq!(deps(text), want);
    assert_eq!(
        m.normal_dependencies().collect::<Vec<_>>(),
        [
            "a",
            "b",
            "c",
            "d",
            "e",
            "real-name",
            "f",
            "h",
            "aliased",
            "i"
        ]
    );
}

#[test]
fn a_multi_line_string_is_not_read_as_tables() {
    let text = "[package]\nname = \"p\"\ndescription = \"\"\"\n[dependencies]\nfake = 1\n\"\"\"\n\n[dependencies]\nreal = \"1\"\n";
    assert_eq!(deps(text), normal(&["real"]));
}

#[test]
fn finds_workspace_members() {
    let text = "[workspace]\nresolver = \"3\"\nmembers = [\n  \"crates/*\", # all\n  'tools/x',\n]\n[workspace.dependencies]\nmembers = \"1\"\n";
    assert_eq!(workspace_members(text), ["crates/*", "tools/x"]);
}
