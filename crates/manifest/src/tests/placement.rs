//! Applications read straight into their apps when the specs are dropped
//! (`placement_app.rs`, YAML through `fast_yaml::de`, JSON through `RawValue`) answer
//! exactly what converting each item's value answers: apps, order, warnings, errors.

use crate::document::{Accept, parse_owned as parse, parse_whole};
use crate::error::Ctx;
use crate::stream::Item;
use crate::typed::Typed;

/// What the fast paths type for `plan`'s Applications.
const APPS: Typed = Typed {
    apps: true,
    secrets: false,
};

/// What `plan` and `status` read Applications with.
const PLACEMENT: Accept = Accept {
    specs: false,
    ..Accept::APPS
};

/// A plain Application `name`.
fn plain(name: &str) -> String {
    format!(
        "- apiVersion: argoproj.io/v1alpha1
  kind: Application
  metadata:
    name: {name}
    namespace: argocd
    uid: 7f0e
    labels:
      team: a
    annotations:
      note: x
    resourceVersion: \"12\"
    generation: 3
  spec:
    project: default
    destination:
      server: https://c1.example
      namespace: n
    source:
      repoURL: https://git.example/a
      path: a
  status:
    sync:
      status: Synced
"
    )
}

fn list(items: &str) -> String {
    format!("apiVersion: v1\nitems:\n{items}kind: List\nmetadata:\n  resourceVersion: \"\"\n")
}

/// Unusual items, each to be read as the generic conversion reads it.
const UNUSUAL: &[&str] = &[
    // No name, an empty one, a null one: skipped with a warning.
    "- kind: Application\n  metadata:\n    namespace: argocd\n",
    "- kind: Application\n  metadata:\n    name: \"\"\n",
    "- kind: Application\n  metadata:\n    name: ~\n",
    // Shapes the generic read refuses: skipped with a warning naming the field.
    "- kind: Application\n  metadata:\n    name: l\n    labels:\n      a: 1\n",
    "- kind: Application\n  metadata:\n    name: l\n    labels:\n      a:\n",
    "- kind: Application\n  metadata:\n    name: l\n    annotations:\n      a: true\n",
    "- kind: Application\n  metadata:\n    name: u\n    uid: 5\n",
    "- kind: Application\n  metadata:\n    name: s\n  spec:\n    destination:\n      server: 8\n",
    "- kind: Application\n  metadata:\n    name: s\n  spec: x\n",
    "- kind: Application\n  metadata: x\n",
    // Null parts.
    "- kind: Application\n  metadata:\n    name: n\n  spec:\n",
    "- kind: Application\n  metadata:\n    name: n\n    labels:\n  spec:\n    destination:\n",
    // Scalars typed as strings, quoted, escaped.
    "- kind: Application\n  metadata:\n    name: \"q\\tx\"\n    namespace: '010'\n  spec:\n    project: 010\n",
    "- kind: Application\n  metadata:\n    name: 1_000\n  spec:\n    project: \"a: b\"\n",
    // Several sources: a warning.
    "- kind: Application\n  metadata:\n    name: m\n  spec:\n    sources:\n    - repoURL: a\n    - repoURL: b\n",
    "- kind: Application\n  metadata:\n    name: m\n  spec:\n    sources: []\n",
    // Flow collections and anchors: serde-saphyr reads the item alone.
    "- kind: Application\n  metadata: {name: f, labels: {a: b}}\n",
    "- kind: Application\n  metadata:\n    name: &n anchor\n  spec:\n    project: *n\n",
    // Without a kind: the list's (`List`: refused).
    "- metadata:\n    name: k\n",
    // Another kind: refused.
    "- kind: Secret\n  metadata:\n    name: k\n",
    // Not a mapping: refused (a struct would read a sequence).
    "- - Application\n  - name: a\n",
    // A duplicate key: a YAML error.
    "- kind: Application\n  metadata:\n    name: d\n    name: e\n",
    // Something the fast path declines inside an ignored part.
    "- kind: Application\n  metadata:\n    name: i\n  status:\n    x: 0x1F\n",
];

/// Both readings of `text`, as comparable text: the apps and warnings, or the error.
fn both(text: &str, file: &str) -> (String, String) {
    let run = |f: fn(&str, &mut Ctx, Accept) -> _| {
        let mut ctx = Ctx::new(file);
        let r: Result<crate::FleetFile, crate::LoadError> = f(text, &mut ctx, PLACEMENT);
        match r {
            Ok(file) => format!("{:?}\n{:?}", file.fleet.apps, ctx.warnings),
            Err(e) => format!("error: {e}"),
        }
    };
    (run(parse), run(parse_whole))
}

fn assert_same(text: &str, file: &str) -> String {
    let (typed, generic) = both(text, file);
    assert_eq!(typed, generic, "{text}");
    typed
}

/// How many items of a YAML list the fast path read straight into apps.
fn typed_yaml(text: &str) -> usize {
    let mut typed = 0;
    crate::fast_yaml::read_list(text, APPS, &mut |item| {
        typed += usize::from(matches!(item, Item::App(_)));
    })
    .expect("read by the fast path");
    typed
}

#[test]
fn plain_applications_are_typed_and_read_the_same() {
    let text = list(&(plain("a") + &plain("b") + &plain("a")));
    assert_eq!(typed_yaml(&text), 3);
    let out = assert_same(&text, "f.yaml");
    assert!(out.contains("name: \"b\""), "{out}");
}

#[test]
fn unusual_applications_read_the_same_in_yaml() {
    for (i, item) in UNUSUAL.iter().enumerate() {
        let text = list(&format!("{}{item}{}", plain("before"), plain("after")));
        let out = assert_same(&text, "f.yaml");
        assert!(
            out.contains("before") || out.starts_with("error"),
            "{i}: {out}"
        );
    }
}

#[test]
fn unusual_applications_are_not_typed() {
    // Those the fast path reads at all; each must go to the generic conversion.
    for item in UNUSUAL
        .iter()
        .filter(|i| !i.contains('{') && !i.contains('&'))
    {
        let text = list(item);
        let mut typed = 0;
        crate::fast_yaml::read_list(&text, APPS, &mut |item| {
            typed += usize::from(matches!(item, Item::App(_)));
        });
        let expected = usize::from(
            item.contains("name: n\n") || item.contains("name: \"q") || item.contains("1_000"),
        );
        assert_eq!(typed, expected, "{item}");
    }
}

/// The JSON of a YAML list of plain and unusual items, as serde-saphyr reads it.
fn as_json(yaml: &str) -> Option<String> {
    let value: serde_json::Value =
        serde_saphyr::from_str_with_options(yaml, crate::document::yaml_options(yaml.len()))
            .ok()?;
    Some(serde_json::to_string_pretty(&value).expect("serialisable"))
}

#[test]
fn unusual_applications_read_the_same_in_json() {
    let mut compared = 0;
    for item in UNUSUAL {
        let yaml = list(&format!("{}{item}{}", plain("before"), plain("after")));
        if let Some(json) = as_json(&yaml) {
            assert_same(&json, "f.json");
            compared += 1;
        }
    }
    assert!(compared >= UNUSUAL.len() - 1, "{compared}");
}

#[test]
fn json_texts_the_typed_read_declines_read_the_same() {
    let item = |body: &str| {
        format!(
            "{{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[\
             {{\"kind\":\"Application\",\"metadata\":{{\"name\":\"x\"}}}},{body}]}}"
        )
    };
    let cases = [
        // Escapes in keys and values.
        r#"{"kind":"Application","metadata":{"n\u0061me":"a\u0062","namespace":"n\"s"}}"#,
        // Duplicate keys: the last wins in a value.
        r#"{"kind":"Application","metadata":{"name":"a","name":"b"}}"#,
        r#"{"kind":"Application","kind":"Application","metadata":{"name":"a"}}"#,
        // Numbers and nulls where strings go.
        r#"{"kind":"Application","metadata":{"name":"a","labels":{"x":1}}}"#,
        r#"{"kind":"Application","metadata":{"name":"a","labels":{"x":null}}}"#,
        r#"{"kind":"Application","metadata":{"name":"a"},"spec":{"project":7}}"#,
        r#"{"kind":"Application","metadata":{"name":"a"},"spec":{"sources":[{},{}]}}"#,
        r#"{"kind":null,"metadata":{"name":"a"}}"#,
        r#"{"kind":5,"metadata":{"name":"a"}}"#,
        r#"[1]"#,
        r#"["Application",{"name":"a"}]"#,
    ];
    for case in cases {
        assert_same(&item(case), "f.json");
    }
    // Invalid JSON that is YAML (a trailing comma), and neither (a bad escape): the
    // generic path's reading or error.
    let yaml = item(r#"{"kind":"Application","metadata":{"name":"a",}}"#);
    assert!(assert_same(&yaml, "f.json").contains("\"a\""));
    let broken = item(r#"{"kind":"Application","metadata":{"name":"a\q"}}"#);
    let out = assert_same(&broken, "f.json");
    assert!(out.starts_with("error"), "{out}");
}

#[test]
fn json_applications_are_typed() {
    let typed = |text: &str| matches!(crate::typed::json_item(text, APPS), Ok(Item::App(_)));
    assert!(typed(
        r#"{"kind":"Application","metadata":{"name":"a","labels":{"x":"y"}},"spec":{"destination":{"server":"s"}},"status":{"a":[1,2]}}"#
    ));
    assert!(!typed(
        r#"{"kind":"Application","metadata":{"name":"a","labels":{"x":1}}}"#
    ));
    assert!(!typed(r#"{"kind":"Secret","metadata":{"name":"a"}}"#));
}
