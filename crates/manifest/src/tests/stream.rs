//! The item-by-item reading of one-document lists (`stream.rs`) answers exactly what
//! reading the whole document as values answers: objects, order, warnings, and which error
//! when there are several.

use crate::document::{Accept, parse_owned as parse, parse_whole};
use crate::error::Ctx;
use crate::stream::{self, Streamed};

const SECRET: &str = "- apiVersion: v1
  kind: Secret
  metadata:
    name: c1
    namespace: argocd
    uid: 00000000-0000-4000-8000-000000000001
    labels: {argocd.argoproj.io/secret-type: cluster}
  data: {name: YzE=, server: aHR0cHM6Ly9jMS5leGFtcGxl}
";

/// An Application `name` to `https://c1.example`; `extra` goes under `spec`.
fn app(name: &str, extra: &str) -> String {
    format!(
        "- apiVersion: argoproj.io/v1alpha1
  kind: Application
  metadata: {{name: {name}, namespace: argocd}}
  spec:
    project: default
    destination: {{server: https://c1.example, namespace: n}}
    source: {{repoURL: https://git.example/a, path: a}}
{extra}"
    )
}

fn list(kind: &str, items: &str) -> String {
    format!("apiVersion: v1\nitems:\n{items}kind: {kind}\nmetadata:\n  resourceVersion: \"\"\n")
}

/// Both readings of `text`, as comparable text: the file and warnings, or the error.
fn both(text: &str, accept: Accept) -> (String, String) {
    let run = |f: fn(&str, &mut Ctx, Accept) -> _| {
        let mut ctx = Ctx::new("f.yaml");
        let r: Result<crate::FleetFile, crate::LoadError> = f(text, &mut ctx, accept);
        match r {
            Ok(file) => format!("{file:?}\n{:?}", ctx.warnings),
            Err(e) => format!("error: {e}"),
        }
    };
    (run(parse), run(parse_whole))
}

fn assert_same(text: &str, accept: Accept) -> String {
    let (streamed, whole) = both(text, accept);
    assert_eq!(streamed, whole, "{text}");
    streamed
}

fn is_streamed(text: &str, accept: Accept) -> bool {
    matches!(
        stream::parse(text, &mut Ctx::new("f.yaml"), accept, false),
        Streamed::List(_)
    )
}

#[test]
fn a_list_is_streamed_and_reads_the_same() {
    let items = format!(
        "{SECRET}{}{}{}",
        app("a", ""),
        // A refused field: a warning-free refusal in the spec, and a second `a` (a
        // duplicate the loads report, first definition wins).
        app("b", "    helm: {releaseName: x}\n"),
        app("a", "")
    );
    let text = list("List", &items);
    assert!(is_streamed(&text, Accept::ANY));
    let out = assert_same(&text, Accept::ANY);
    assert!(out.contains("name: \"b\""), "{out}");
}

#[test]
fn typed_lists_without_item_kinds_read_the_same() {
    let bare = |s: String| {
        s.replace("  kind: Application\n", "")
            .replace("  kind: Secret\n", "")
    };
    let apps = list(
        "ApplicationList",
        &bare(format!("{}{}", app("a", ""), app("b", ""))),
    );
    assert!(is_streamed(&apps, Accept::APPS));
    assert!(assert_same(&apps, Accept::APPS).contains("\"b\""));
    let secrets = list("SecretList", &bare(SECRET.to_owned()));
    assert!(assert_same(&secrets, Accept::CLUSTERS).contains("c1.example"));
    // Own kinds first, then implied ones: order kept.
    let mixed = list(
        "ApplicationList",
        &format!("{}{}{}", app("a", ""), bare(app("b", "")), app("c", "")),
    );
    let out = assert_same(&mixed, Accept::APPS);
    let (a, b, c) = (out.find("\"a\""), out.find("\"b\""), out.find("\"c\""));
    assert!(a < b && b < c, "{out}");
}

#[test]
fn errors_are_the_same_and_in_the_same_order() {
    // A cluster Secret's `metadata.name` a sequence: a conversion error (a malformed
    // Application is skipped with a warning instead, below).
    let bad = |name: &str| SECRET.replace("name: c1", &format!("name: {name}"));
    let bad_secret = bad("[1, 2]");
    let cases = [
        // A conversion error before a kind error: the kind error wins.
        list("List", &format!("{bad_secret}- kind: Pod\n")),
        // Two conversion errors: the first.
        list(
            "List",
            &format!("{}{bad_secret}{}", app("a", ""), bad("[3]")),
        ),
        // A conversion error, then a YAML error further down: the YAML error.
        format!("{}  broken: [\n", list("List", &bad_secret)),
        // An item of another kind than its typed list.
        list("SecretList", &app("a", "")),
        // No kind in a plain List.
        list("List", &app("a", "").replace("  kind: Application\n", "")),
        // Not an object; not a sequence.
        list("List", "- 3\n"),
        "apiVersion: v1\nkind: List\nitems: {a: 1}\n".to_owned(),
        "apiVersion: v1\nkind: [List]\nitems: []\n".to_owned(),
        // A kind this input refuses.
        list("List", SECRET),
    ];
    for (i, text) in cases.iter().enumerate() {
        let accept = if i == 8 { Accept::APPS } else { Accept::ANY };
        let out = assert_same(text, accept);
        assert!(out.starts_with("error: "), "case {i}: {out}");
    }
}

#[test]
fn malformed_applications_are_skipped_alike() {
    // Unplaceable (name a sequence, destination a number) Applications are skipped with a
    // warning in both readings, in the same order; the others load.
    let items = format!(
        "{}{}{}",
        app("[1, 2]", ""),
        app("a", ""),
        app("b", "").replace(
            "destination: {server: https://c1.example, namespace: n}",
            "destination: 5"
        ),
    );
    let out = assert_same(&list("List", &items), Accept::ANY);
    assert!(!out.starts_with("error: "), "{out}");
    assert!(out.contains("name: \"a\""), "{out}");
    assert!(out.contains("this Application is skipped"), "{out}");
}

#[test]
fn what_is_not_a_one_document_list_reads_as_before() {
    let single = app("a", "").replacen("- ", "", 1).replace("\n  ", "\n");
    let multi = format!("{single}---\n{single}");
    let native = "clusters:\n- id: x\n  server: https://x\n".to_owned();
    let with_items = format!("{single}items: [1]\n");
    for text in [
        single,
        multi,
        native,
        with_items,
        String::new(),
        "# only\n".to_owned(),
    ] {
        assert_same(&text, Accept::ANY);
    }
    assert!(!stream::one_document("a: 1\n---\nb: 2\n"));
    assert!(!stream::one_document("%YAML 1.2\n---\na: 1\n"));
    assert!(stream::one_document("---\na: 1\n"));
    assert!(stream::one_document("a: |\n  ---x\n"));
}

#[test]
fn json_lists_are_streamed_and_read_the_same() {
    let item = |name: &str| {
        format!(
            r#"{{"apiVersion":"argoproj.io/v1alpha1","kind":"Application","metadata":{{"name":"{name}","namespace":"argocd"}},"spec":{{"project":"default","destination":{{"server":"https://c1.example"}},"source":{{"repoURL":"https://git.example/a","path":"a"}}}}}}"#
        )
    };
    let text = format!(
        r#"{{"apiVersion":"v1","items":[{},{}],"kind":"List","metadata":{{}}}}"#,
        item("a"),
        item("b")
    );
    assert!(matches!(
        stream::parse(&text, &mut Ctx::new("f.json"), Accept::APPS, true),
        Streamed::List(Ok(_))
    ));
    assert!(assert_same(&text, Accept::APPS).contains("\"b\""));
    // A second `items` (JSON keeps the last), invalid JSON, a YAML flow mapping.
    let twice = format!(
        r#"{{"kind":"List","items":[{}],"items":[{}]}}"#,
        item("a"),
        item("b")
    );
    let out = assert_same(&twice, Accept::APPS);
    assert!(
        out.contains("name: \"b\"") && !out.contains("name: \"a\""),
        "{out}"
    );
    assert_same(r#"{"kind":"List","items":[}"#, Accept::APPS);
    assert_same("{clusters: []}", Accept::ANY);
}

/// Above a size (a megabyte; 16 KiB in tests), items are converted on a second thread:
/// same answers, in order.
#[test]
fn large_lists_read_the_same_on_two_threads() {
    let items: String = (0..200)
        .map(|i| app(&format!("app-{i}"), "    helm: {releaseName: x}\n"))
        .collect();
    let text = list("List", &items);
    assert!(text.len() > 1 << 14, "{}", text.len());
    let out = assert_same(&text, Accept::APPS);
    assert!(out.contains("app-199"));
    // A conversion error near the end, a kind error after it.
    let bad = list(
        "List",
        &format!("{items}{}{}- kind: Pod\n", app("[1]", ""), app("z", "")),
    );
    assert!(assert_same(&bad, Accept::APPS).contains("\"Pod\""));
}
