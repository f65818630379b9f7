use proptest::prelude::*;

use super::*;

const MAX: usize = usize::MAX;

fn yaml(text: &str) -> Result<Vec<Manifest>, ManifestError> {
    parse_file("dir/f.yaml", FileFormat::Yaml, text.as_bytes(), MAX)
}

#[test]
fn multi_document_yaml_gives_objects_in_order_with_document_numbers() {
    let objects = yaml(
        "---\n# only a comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: ns}\n\
         ---\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: b\n",
    )
    .unwrap();
    assert_eq!(objects.len(), 2);
    assert_eq!(
        objects[0].identity,
        ObjectIdentity {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some("ns".into()),
            name: "a".into(),
        }
    );
    assert_eq!(objects[0].location.document, 1);
    assert_eq!(objects[1].identity.group(), "apps");
    assert_eq!(objects[1].identity.namespace, None);
    assert_eq!(objects[1].location.document, 2);
    assert_eq!(objects[1].location.file, "dir/f.yaml");
    assert_eq!(objects[1].object["metadata"]["name"], "b");
}

#[test]
fn lists_are_flattened_and_typed_lists_imply_kind_and_api_version() {
    let objects = yaml(
        "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Service, metadata: {name: s}}\n\
         - {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}\n---\n\
         apiVersion: v1\nkind: ConfigMapList\nitems:\n- metadata: {name: d}\n",
    )
    .unwrap();
    let names: Vec<_> = objects
        .iter()
        .map(|m| {
            (
                m.identity.kind.as_str(),
                m.identity.name.as_str(),
                m.location.item,
            )
        })
        .collect();
    assert_eq!(
        names,
        vec![
            ("Service", "s", Some(0)),
            ("ConfigMap", "c", Some(1)),
            ("ConfigMap", "d", Some(0)),
        ]
    );
    assert_eq!(objects[2].object["apiVersion"], "v1");
    assert_eq!(objects[2].location.document, 2);
}

#[test]
fn json_files_hold_one_object() {
    let objects = parse_file(
        "x.json",
        FileFormat::Json,
        br#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"}}"#,
        MAX,
    )
    .unwrap();
    assert_eq!(objects.len(), 1);
    assert_eq!(objects[0].identity.kind, "Secret");
    let err = parse_file("x.json", FileFormat::Json, b"{\n\"a\": ", MAX).unwrap_err();
    assert!(
        matches!(&err, ManifestError::Syntax { format: "JSON", line: Some(2), at, .. } if at.file == "x.json"),
        "{err:?}"
    );
}

#[test]
fn objects_without_identity_are_named_by_file_document_and_field() {
    let err =
        yaml("apiVersion: v1\nkind: A\nmetadata: {name: a}\n---\nkind: B\nmetadata: {name: b}\n")
            .unwrap_err();
    assert_eq!(
        err.to_string(),
        "dir/f.yaml, document 2: object has no apiVersion"
    );
    let err = yaml("apiVersion: v1\nkind: A\nmetadata: {namespace: x}\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "dir/f.yaml, document 1: object has no metadata.name"
    );
    let err = yaml("apiVersion: v1\nkind: A\nmetadata: {name: [1]}\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "dir/f.yaml, document 1: metadata.name: expected a string, found a sequence"
    );
    let err =
        yaml("apiVersion: v1\nkind: List\nitems:\n- {kind: A, metadata: {name: a}}\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "dir/f.yaml, document 1, items[0]: object has no apiVersion"
    );
    let err = yaml("- a\n- b\n").unwrap_err();
    assert!(err.to_string().contains("found a sequence"), "{err}");
}

#[test]
fn syntax_errors_carry_the_line() {
    let err = yaml("apiVersion: v1\nkind: A\nmetadata:\n  name: a\n  labels: {x: [\n").unwrap_err();
    match err {
        ManifestError::Syntax {
            format: "YAML",
            line: Some(line),
            ..
        } => assert!(line >= 5, "line {line}"),
        other => panic!("expected a YAML syntax error, got {other:?}"),
    }
    let err = parse_file("b.yaml", FileFormat::Yaml, &[0xff, 0xfe, 0x00], MAX).unwrap_err();
    assert!(err.to_string().contains("not UTF-8"), "{err}");
}

#[test]
fn file_formats_by_extension() {
    assert_eq!(FileFormat::of("a.yaml"), Some(FileFormat::Yaml));
    assert_eq!(FileFormat::of("a.yml"), Some(FileFormat::Yaml));
    assert_eq!(FileFormat::of("a.json"), Some(FileFormat::Json));
    assert_eq!(FileFormat::of("a.YAML"), None);
    assert_eq!(FileFormat::of("README.md"), None);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(fleetshard_util::cases::property_cases(ProptestConfig::default().cases, 512)))]

    /// Arbitrary bytes give objects or an error, never a panic, in either format.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse_file("f.yaml", FileFormat::Yaml, &bytes, MAX);
        let _ = parse_file("f.json", FileFormat::Json, &bytes, MAX);
    }

    /// Text assembled from YAML's structural pieces reaches deeper into the parser than
    /// random bytes do; every object it accepts has a complete identity.
    #[test]
    fn yaml_like_text_never_panics_and_accepted_objects_have_identity(
        parts in proptest::collection::vec(
            prop_oneof![
                Just("---\n"), Just("apiVersion: v1\n"), Just("kind: List\n"),
                Just("kind: ConfigMapList\n"), Just("kind: A\n"), Just("items:\n"),
                Just("- "), Just("  "), Just("metadata:\n"), Just("  name: x\n"),
                Just("  namespace: n\n"), Just("name: 1\n"), Just("{"), Just("}"), Just("["),
                Just("]"), Just("&a "), Just("*a\n"), Just("null\n"), Just(": "), Just("\n"),
                Just("'"), Just("\""), Just("items: []\n"), Just("metadata: {name: y}\n"),
            ],
            0..40,
        )
    ) {
        let text: String = parts.concat();
        if let Ok(objects) = parse_file("f.yaml", FileFormat::Yaml, text.as_bytes(), MAX) {
            for m in objects {
                prop_assert!(!m.identity.api_version.is_empty());
                prop_assert!(!m.identity.kind.is_empty());
                prop_assert!(!m.identity.name.is_empty());
                prop_assert!(m.location.document >= 1);
            }
        }
    }
}

#[test]
fn a_file_of_more_objects_than_one_app_may_have_is_refused_while_parsing() {
    let object = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n";
    let many: String = (0..100_000).map(|_| format!("---\n{object}")).collect();
    let err = parse_file("big.yaml", FileFormat::Yaml, many.as_bytes(), 10).unwrap_err();
    assert_eq!(
        err,
        ManifestError::TooManyObjects {
            file: "big.yaml".to_owned(),
            max: 10
        }
    );
    // Empty documents are no objects: ten objects among thirty empty documents pass.
    let sparse: String = (0..10)
        .map(|_| format!("---\n---\n# empty\n---\n{object}"))
        .collect();
    assert_eq!(
        parse_file("sparse.yaml", FileFormat::Yaml, sparse.as_bytes(), 10)
            .unwrap()
            .len(),
        10
    );
    // A list counts its items.
    let list = format!(
        "apiVersion: v1\nkind: List\nitems:\n{}",
        (0..11)
            .map(|i| format!("- {{apiVersion: v1, kind: ConfigMap, metadata: {{name: c{i}}}}}\n"))
            .collect::<String>()
    );
    assert!(matches!(
        parse_file("list.yaml", FileFormat::Yaml, list.as_bytes(), 10),
        Err(ManifestError::TooManyObjects { .. })
    ));
}
