//! The fast path against serde-saphyr: every value it gives is the one serde-saphyr gives,
//! or it declines; and it does not decline what kubectl prints.

use proptest::prelude::*;
use serde_json::Value;

use super::block::{Block, Declined, Fast};
use super::{FastRoot, read_list};
use crate::document::yaml_options;
use crate::typed::Typed;

/// serde-saphyr's value of a whole text, as the loader's options give it.
fn saphyr(text: &str) -> Option<Value> {
    serde_saphyr::from_str_with_options(text, yaml_options(text.len())).ok()
}

/// The fast path alone (no item read by serde-saphyr): the root node of `text`.
fn fast(text: &str) -> Fast<Value> {
    let mut block = Block::new(text);
    let (span, next) = block.peek()?.ok_or(Declined)?;
    if span.col != 0 {
        return Err(Declined);
    }
    block.pos = next;
    let value = block.node(span, 0)?;
    match block.peek()? {
        None => Ok(value),
        Some(_) => Err(Declined),
    }
}

/// Asserts the fast path gives serde-saphyr's value or declines; true when it did not
/// decline.
fn check(text: &str) -> bool {
    match fast(text) {
        Ok(value) => {
            assert_eq!(Some(&value), saphyr(text).as_ref(), "fast path on {text:?}");
            true
        }
        Err(Declined) => false,
    }
}

/// The list read with items read alone where needed, as one value (`items` put back).
fn list(text: &str) -> Option<(Value, usize)> {
    let mut items = Vec::new();
    let FastRoot {
        mut rest,
        had_items,
        alone,
    } = read_list(text, Typed::default(), &mut |item| match item {
        crate::stream::Item::Value(value) => items.push(value),
        crate::stream::Item::App(_) | crate::stream::Item::Cluster(_) => unreachable!("not typed"),
    })?;
    if had_items {
        rest.insert("items".to_owned(), Value::Array(items));
    }
    Some((Value::Object(rest), alone))
}

/// Asserts the list reading gives serde-saphyr's value or declines; returns how many
/// items went alone when it did not decline.
fn check_list(text: &str) -> Option<usize> {
    let (value, alone) = list(text)?;
    assert_eq!(
        Some(&value),
        saphyr(text).as_ref(),
        "list reading of {text:?}"
    );
    Some(alone)
}

/// Scalars with a meaning of their own somewhere in YAML.
const TRICKY: &[&str] = &[
    "yes",
    "no",
    "on",
    "off",
    "y",
    "n",
    "Yes",
    "NO",
    "true",
    "True",
    "TRUE",
    "false",
    "False",
    "FALSE",
    "tRue",
    "~",
    "null",
    "Null",
    "NULL",
    "nULL",
    "0x1F",
    "0o17",
    "0b101",
    "0X1f",
    "1e3",
    "1E-3",
    "-1e+3",
    ".inf",
    "-.inf",
    "+.INF",
    ".NaN",
    ".nan",
    "inf",
    "nan",
    "Infinity",
    "-",
    "--",
    "-a",
    "- a",
    "a: b",
    "a:b",
    "a:",
    ":a",
    "#",
    "a #b",
    "a#b",
    "it's",
    "a\"b",
    "'",
    "\"",
    "ünïcödé",
    "日本語",
    "\u{a0}x",
    "\u{85}",
    "\u{2028}",
    "\u{feff}x",
    "010",
    "-010",
    "+010",
    "007",
    "1_000",
    "_1",
    "123",
    "-123",
    "+123",
    "0",
    "-0",
    "+0",
    "00",
    "123456789012345678",
    "-123456789012345678",
    "1234567890123456789",
    "18446744073709551615",
    "99999999999999999999",
    "1.5",
    "1.",
    ".5",
    "-.5",
    "5.",
    "1.2.3",
    "10.0.0.1",
    "2024-01-01",
    "2001-12-14t21:59:43.10-05:00",
    "8f6a70ad-f435-4987",
    "1e",
    "e1",
    "0.0",
    "-0.0",
    ".",
    "..",
    "...",
    "---",
    "---x",
    "1:30",
    "<<",
    "?x",
    "? x",
    "%x",
    "@x",
    "`x",
    "&a",
    "*a",
    "!t",
    "!!str x",
    "|",
    ">",
    "|-",
    "[a]",
    "{a}",
    "a,b",
    "x[1]",
    "a\\b",
    "\\",
    "a  b",
    "https://c1.example:443/x?y=1#z",
    "HEAD",
    "v1",
    "=",
    "a=b",
    "CreateNamespace=true",
    "a\tb",
    "x\r",
    "é:",
    "\u{7f}",
    "",
];

/// A scalar written plain, single-quoted or double-quoted.
fn render(s: &str, style: u8) -> String {
    match style {
        0 => s.to_owned(),
        1 => format!("'{}'", s.replace('\'', "''")),
        _ => {
            let mut out = String::from("\"");
            for c in s.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\t' => out.push_str("\\t"),
                    c if (c as u32) < 0x20 || c == '\u{85}' => {
                        out.push_str(&format!("\\x{:02x}", c as u32));
                    }
                    c if c == '\u{2028}' || c == '\u{feff}' => {
                        out.push_str(&format!("\\u{:04x}", c as u32));
                    }
                    c => out.push(c),
                }
            }
            out.push('"');
            out
        }
    }
}

#[test]
fn every_tricky_scalar_is_serde_saphyrs_or_declined() {
    let mut read = 0;
    for s in TRICKY {
        for style in 0..3 {
            let r = render(s, style);
            for text in [
                format!("k: {r}\n"),
                format!("- {r}\n"),
                format!("{r}: v\n"),
                format!("a:\n  - {r}\n  - x\nb: 1\n"),
                format!("- a: {r}\n  b: {r}\n"),
                format!("{r}\n"),
            ] {
                read += usize::from(check(&text));
            }
        }
    }
    // Most of them are read (quoted ones all), not declined.
    assert!(read > TRICKY.len() * 9, "only {read} read");
}

#[test]
fn long_keys_are_serde_saphyrs_or_declined() {
    // YAML limits an implicit key to 1024 characters.
    for n in [1000, 1024, 1025, 1100] {
        let k = "k".repeat(n);
        for text in [
            format!("{k}: v\n"),
            format!("\"{k}\": v\n"),
            format!("'{k}': v\n"),
        ] {
            check(&text);
        }
    }
}

#[test]
fn common_scalars_are_typed_not_declined() {
    for (text, value) in [
        ("k: yes\n", Value::from("yes")),
        ("k: 'true'\n", Value::from("true")),
        ("k: true\n", Value::from(true)),
        ("k: ~\n", Value::Null),
        ("k:\n", Value::Null),
        ("k: 42\n", Value::from(42)),
        ("k: -42\n", Value::from(-42)),
        ("k: 010\n", Value::from("010")),
        ("k: \"\"\n", Value::from("")),
        ("k: 8f6a70ad-f435\n", Value::from("8f6a70ad-f435")),
        ("k: \"a\\u00e9\\\"\"\n", Value::from("aé\"")),
        ("k: 'it''s'\n", Value::from("it's")),
    ] {
        let got = fast(text).unwrap_or_else(|_| panic!("declined {text:?}"));
        assert_eq!(got, serde_json::json!({ "k": value }), "{text:?}");
        assert!(check(text));
    }
}

/// What kubectl prints, at several indentations of nested sequences.
const KUBECTL: &str = "apiVersion: v1
items:
- apiVersion: argoproj.io/v1alpha1
  kind: Application
  metadata:
    annotations:
      argocd.argoproj.io/sync-wave: \"1\"
    labels:
      team: a
    name: app-0
    namespace: argocd
  spec:
    destination:
      server: https://c1.example
    source:
      helm:
        parameters:
        - name: replicas
          value: \"3\"
        -   name: x
            value: y
      path: apps/0
      repoURL: https://git.example/a.git
    syncPolicy:
      syncOptions:
        - CreateNamespace=true
        - - nested
          - 2
      retry:
        limit: 5
-
  apiVersion: argoproj.io/v1alpha1
  kind: Application
  metadata: {}
kind: List
metadata:
  resourceVersion: \"\"
";

#[test]
fn kubectl_output_is_read_fast_except_what_is_not_block_yaml() {
    // The second item's `{}` is a flow mapping: that item alone goes to serde-saphyr.
    assert_eq!(check_list(KUBECTL), Some(1));
    let plain = KUBECTL.replace("  metadata: {}\n", "  metadata:\n    name: b\n");
    assert_eq!(check_list(&plain), Some(0));
    assert!(check(&plain));
}

#[test]
fn items_beyond_the_fast_path_are_read_alone_or_the_text_is_declined() {
    let item = |body: &str| format!("kind: List\nitems:\n- a: 1\n{body}- c: 3\n");
    // Read alone, same value: a block scalar, a folded one, a flow collection, an anchor
    // used in its own item, a comment, a tag, a multi-line plain scalar.
    for body in [
        "- b: |\n    line 1\n    line 2\n",
        "- b: >-\n    folded\n    text\n",
        "- b: [1, {x: y}]\n",
        "- b: &x v\n  c: *x\n",
        "- b: 1 # note\n",
        "- b: !!str 1\n",
        "- b: multi\n    line\n",
        "- b: \"two\n    lines\"\n",
    ] {
        assert_eq!(check_list(&item(body)), Some(1), "{body}");
    }
    // Declined as a whole: an alias to another item's anchor, a duplicate key, an
    // indentation indicator, a flow mapping at the root, a document marker, a comment
    // between items.
    for text in [
        "kind: List\nitems:\n- a: &x 1\n- b: *x\n".to_owned(),
        item("- b: 1\n  b: 2\n"),
        item("- b: |2\n     x\n"),
        "kind: List\nmetadata: {a: b}\nitems:\n- a: 1\n".to_owned(),
        "---\nkind: List\nitems:\n- a: 1\n".to_owned(),
        "kind: List\nitems:\n- a: 1\n# between\n- b: 2\n".to_owned(),
    ] {
        assert_eq!(list(&text), None, "{text}");
    }
}

/// `stream` checks a text for being one document only when the fast path declines it: the
/// fast path must decline every text that is not (a document marker after content, or a
/// directive), wherever the marker or directive is.
#[test]
fn what_is_not_one_document_is_declined() {
    let list = "kind: List\nitems:\n- a: 1\n  b: x\n";
    for tail in [
        "---\nkind: List\n",
        "--- \nitems: []\n",
        "---\n",
        "...\n",
        "... \n",
        "--- a: 1\n",
        "%YAML 1.2\n",
        "%TAG ! x\n",
    ] {
        for text in [format!("{list}{tail}"), format!("{list}{tail}{list}")] {
            assert!(!crate::stream::one_document(&text), "{text}");
            assert!(list_declined(&text), "{text}");
        }
        let text = format!("{tail}{list}");
        if !crate::stream::one_document(&text) {
            assert!(list_declined(&text), "{text}");
        }
    }
}

fn list_declined(text: &str) -> bool {
    read_list(text, Typed::default(), &mut |_| {}).is_none()
}

/// `Block::peek`'s eight-byte test: no byte it must look at is missed.
#[test]
fn a_word_needing_a_look_is_never_missed() {
    let plain = *b"abc: d-e";
    for at in 0..8 {
        for byte in 0..=255u8 {
            let mut word = plain;
            word[at] = byte;
            let look = !(0x20..0x7f).contains(&byte);
            if look {
                assert!(
                    super::block::needs_look(u64::from_le_bytes(word)),
                    "{byte:#x} at {at}"
                );
            }
        }
    }
    assert!(!super::block::needs_look(u64::from_le_bytes(plain)));
    assert!(!super::block::needs_look(u64::from_le_bytes(*b" ~}{x~ !")));
}

#[test]
fn the_loader_reads_fast_and_slow_alike() {
    use crate::document::{Accept, parse_owned, parse_str, parse_whole};
    use crate::error::Ctx;
    let app = |name: &str, extra: &str| {
        format!(
            "- apiVersion: argoproj.io/v1alpha1\n  kind: Application\n  metadata:\n    name: {name}\n    namespace: argocd\n  spec:\n    project: default\n    destination:\n      server: https://c1.example\n      namespace: n\n    source:\n      repoURL: https://git.example/a\n      path: a\n{extra}"
        )
    };
    // A mapping with more keys than the typed reader keeps on the stack (12), each once,
    // and with one repeated beyond them: declined fast, refused slow, the same error.
    let many: String = (0..20).map(|i| format!("    x{i}: {i}\n")).collect();
    let repeated = format!("{many}    x15: again\n");
    for extra in [
        "",
        "      helm:\n        values: |\n          a: 1\n",
        "    ignoreDifferences: [{kind: x}]\n",
        "    info:\n    - name: x\n      value: 5\n",
        "  status: {}\n  spec: {}\n",
        &many,
        &repeated,
    ] {
        let text = format!(
            "apiVersion: v1\nitems:\n{}{}kind: List\n",
            app("a", ""),
            app("b", extra)
        );
        let run = |f: fn(&str, &mut Ctx, Accept) -> _| {
            let mut ctx = Ctx::new("f.yaml");
            let r: Result<crate::FleetFile, crate::LoadError> = f(&text, &mut ctx, Accept::APPS);
            match r {
                Ok(file) => format!("{file:?}\n{:?}", ctx.warnings),
                Err(e) => format!("error: {e}"),
            }
        };
        assert_eq!(run(parse_str), run(parse_whole), "{text}");
        assert_eq!(run(parse_owned), run(parse_whole), "{text}");
    }
}

/// A tree of scalars (from [`TRICKY`] or simple words), mappings and sequences.
#[derive(Debug, Clone)]
enum Node {
    Scalar(String, u8),
    Map(Vec<(String, u8, Node)>),
    Seq(Vec<Node>),
}

fn scalar() -> impl Strategy<Value = (String, u8)> {
    let word = prop_oneof![
        prop::sample::select(TRICKY).prop_map(str::to_owned),
        "[a-z][a-z0-9./-]{0,8}",
        "[0-9]{1,4}",
    ];
    (word, 0u8..3)
}

fn key() -> impl Strategy<Value = (String, u8)> {
    let word = prop_oneof![
        4 => "[a-z][a-zA-Z0-9._/-]{0,10}",
        1 => prop::sample::select(TRICKY).prop_map(str::to_owned),
        1 => Just(".dockerconfigjson".to_owned()),
    ];
    (word, 0u8..3)
}

fn node() -> impl Strategy<Value = Node> {
    let leaf = scalar().prop_map(|(s, q)| Node::Scalar(s, q));
    leaf.prop_recursive(5, 40, 4, |inner| {
        prop_oneof![
            prop::collection::vec((key(), inner.clone()), 1..4)
                .prop_map(|v| Node::Map(v.into_iter().map(|((k, q), n)| (k, q, n)).collect())),
            prop::collection::vec(inner, 1..4).prop_map(Node::Seq),
        ]
    })
}

/// Writes `node` as block YAML; `layout` picks, per collection, the indentation step (1–3),
/// whether a sequence under a key sits at the key's column, and whether a collection in a
/// sequence entry starts on the dash's line.
fn write(node: &Node, col: usize, layout: &mut impl Iterator<Item = u8>, out: &mut String) {
    let pad = " ".repeat(col);
    match node {
        Node::Scalar(s, q) => {
            out.push_str(&format!("{pad}{}\n", render(s, *q)));
        }
        Node::Map(entries) => {
            for (k, q, value) in entries {
                out.push_str(&format!("{pad}{}:", render(k, *q)));
                let l = layout.next().unwrap_or(0);
                match value {
                    Node::Scalar(s, q) => out.push_str(&format!(" {}\n", render(s, *q))),
                    Node::Seq(_) if l & 4 != 0 => {
                        out.push('\n');
                        write(value, col, layout, out);
                    }
                    _ => {
                        out.push('\n');
                        write(value, col + 1 + usize::from(l % 3), layout, out);
                    }
                }
            }
        }
        Node::Seq(items) => {
            for item in items {
                let l = layout.next().unwrap_or(0);
                if l & 8 != 0 || matches!(item, Node::Scalar(..)) {
                    // On the dash's line: write at column col + 2, then put the dash in.
                    let mut inner = String::new();
                    write(item, col + 2, layout, &mut inner);
                    out.push_str(&pad);
                    out.push_str("- ");
                    out.push_str(&inner[col + 2..]);
                } else {
                    out.push_str(&format!("{pad}-\n"));
                    write(item, col + 1 + usize::from(l % 3), layout, out);
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(fleetshard_util::cases::property_cases(ProptestConfig::default().cases, 512)))]

    #[test]
    fn generated_block_yaml_is_serde_saphyrs_or_declined(
        root in prop::collection::vec((key(), node()), 1..5),
        layout in prop::collection::vec(0u8..16, 64),
        items in prop::collection::vec(node(), 0..4),
    ) {
        let mut layout = layout.into_iter().cycle();
        let mut text = String::new();
        let root = Node::Map(root.into_iter().map(|((k, q), n)| (k, q, n)).collect());
        write(&root, 0, &mut layout, &mut text);
        check(&text);
        if !items.is_empty() {
            text.push_str("items:\n");
            write(&Node::Seq(items), 0, &mut layout, &mut text);
        }
        check(&text);
        check_list(&text);
    }

    #[test]
    fn mangled_block_yaml_is_serde_saphyrs_or_declined(
        node in node(),
        layout in prop::collection::vec(0u8..16, 64),
        cut in any::<prop::sample::Index>(),
        insert in prop::sample::select(&[
            " ", "\n", "  ", "- ", ": ", "#", "\t", "'", "\"", "x", "-", ":", "\n  ", "\n-",
        ][..]),
    ) {
        let mut layout = layout.into_iter().cycle();
        let mut text = String::from("items:\n");
        write(&Node::Seq(vec![node]), 0, &mut layout, &mut text);
        let mut at = cut.index(text.len());
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        text.insert_str(at, insert);
        check(&text);
        check_list(&text);
    }
}

/// Throughput on an export, against serde-saphyr's (both into values):
/// `FLEETSHARD_YAML=f10k/apps.yaml cargo test --release -p fleetshard-manifest --lib
/// fast_yaml::tests::throughput -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement; needs FLEETSHARD_YAML"]
#[allow(
    clippy::disallowed_types,
    reason = "a measurement of wall time, not a timed test"
)]
fn throughput() {
    let path = std::env::var("FLEETSHARD_YAML").expect("FLEETSHARD_YAML: a YAML list");
    let text = std::fs::read_to_string(path).expect("readable");
    let mb = text.len() as f64 / 1e6;
    for _ in 0..2 {
        let start = std::time::Instant::now();
        let mut n = 0usize;
        let root = read_list(&text, Typed::default(), &mut |_| n += 1).expect("read fast");
        let s = start.elapsed().as_secs_f64();
        eprintln!(
            "fast path: {n} items ({} alone) in {s:.2} s, {:.0} MB/s",
            root.alone,
            mb / s
        );
        let start = std::time::Instant::now();
        let slow = saphyr(&text).expect("serde-saphyr reads it");
        let s = start.elapsed().as_secs_f64();
        drop(slow);
        eprintln!("serde-saphyr: {s:.2} s, {:.0} MB/s", mb / s);
    }
}
