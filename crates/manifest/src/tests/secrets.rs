use super::{assert_warned, field_of};
use crate::{LoadError, parse_apps, parse_clusters, parse_input};

/// `kubectl get secret -n argocd -l argocd.argoproj.io/secret-type=cluster -o yaml`, two
/// clusters: one with everything set, one in-cluster without a uid.
const SECRET_LIST_YAML: &str = r#"
apiVersion: v1
items:
- apiVersion: v1
  data:
    config: eyJ0bHNDbGllbnRDb25maWciOnsiaW5zZWN1cmUiOmZhbHNlfX0=
    name: cHJvZC1ldS0x
    server: aHR0cHM6Ly9wcm9kLWV1LTEuZXhhbXBsZS5jb20v
    shard: Mg==
  kind: Secret
  metadata:
    annotations:
      argocd.argoproj.io/skip-reconcile: "True"
      fleetshard.io/weight: "40"
    creationTimestamp: "2024-05-01T10:00:00Z"
    labels:
      argocd.argoproj.io/secret-type: cluster
      topology.kubernetes.io/zone: eu-west-1a
    name: cluster-prod-eu-1
    namespace: argocd
    resourceVersion: "1234"
    uid: bdd640fb-0667-4ad1-9c80-317fa3b1799d
  type: Opaque
- apiVersion: v1
  kind: Secret
  metadata:
    labels:
      argocd.argoproj.io/secret-type: cluster
    name: in-cluster
    namespace: argocd
  stringData:
    name: in-cluster
    server: https://kubernetes.default.svc
kind: List
metadata:
  resourceVersion: ""
"#;

#[test]
fn secret_list_yaml_maps_every_field() {
    let loaded = parse_clusters(SECRET_LIST_YAML, "secrets.yaml").unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let [a, b] = &loaded.value[..] else {
        panic!("{:?}", loaded.value)
    };
    assert_eq!(a.id, "bdd640fb-0667-4ad1-9c80-317fa3b1799d");
    assert_eq!(a.name, "prod-eu-1");
    assert_eq!(
        a.server, "https://prod-eu-1.example.com",
        "trailing / removed"
    );
    assert_eq!(a.shard, Some(2));
    assert_eq!(a.weight, Some(40));
    assert!(a.skip_reconcile);
    assert_eq!(a.zone(), Some("eu-west-1a"));
    assert!(!a.labels.contains_key(crate::SECRET_TYPE_LABEL));
    assert_eq!(b.id, "", "in-cluster without uid has Argo CD's empty id");
    assert_eq!(b.server, "https://kubernetes.default.svc");
    assert_eq!(b.shard, None);
}

#[test]
fn secret_list_json_and_typed_list_items_without_kind() {
    let json = r#"{
      "apiVersion": "v1", "kind": "SecretList", "metadata": {},
      "items": [{
        "metadata": {"name": "c1", "namespace": "argocd", "uid": "u1",
                     "labels": {"argocd.argoproj.io/secret-type": "cluster"}},
        "data": {"server": "aHR0cHM6Ly9hLmV4YW1wbGU=", "shard": "LTM="}
      }]
    }"#;
    let loaded = parse_clusters(json, "secrets.json").unwrap();
    assert_eq!(loaded.value.len(), 1);
    assert_eq!(loaded.value[0].server, "https://a.example");
    assert_eq!(
        loaded.value[0].shard,
        Some(-3),
        "negative pins are kept, as Argo CD"
    );
}

#[test]
fn single_secret_and_multi_document_yaml() {
    let one = "apiVersion: v1\nkind: Secret\nmetadata: {name: a, uid: u-a, labels: {argocd.argoproj.io/secret-type: cluster}}\nstringData: {server: https://a}\n";
    assert_eq!(parse_clusters(one, "a.yaml").unwrap().value[0].id, "u-a");
    let multi = format!("---\n{one}---\n\n---\n{}", one.replace("u-a", "u-b"));
    let ids: Vec<_> = parse_clusters(&multi, "m.yaml")
        .unwrap()
        .value
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(ids, ["u-a", "u-b"]);
}

#[test]
fn string_data_wins_over_data_per_key() {
    let yaml = r#"
kind: Secret
metadata: {name: a, uid: u, labels: {argocd.argoproj.io/secret-type: cluster}}
data: {server: aHR0cHM6Ly9mcm9tLWRhdGE=, name: ZnJvbS1kYXRh}
stringData: {server: "https://from-stringdata"}
"#;
    let c = &parse_clusters(yaml, "s.yaml").unwrap().value[0];
    assert_eq!(c.server, "https://from-stringdata");
    assert_eq!(c.name, "from-data");
}

#[test]
fn secret_data_is_decoded_as_the_api_server_decodes_it() {
    use crate::decode_secret_data;
    let ok = |s: &str| String::from_utf8(decode_secret_data(s).unwrap()).unwrap();
    assert_eq!(ok("aHR0cHM6Ly9h"), "https://a");
    // Line breaks anywhere are skipped (Go's encoding/base64), as in a wrapped value.
    assert_eq!(ok("aHR0\ncHM6\r\nLy9h\n"), "https://a");
    // Anything else is refused: spaces, a missing pad, URL-safe letters.
    for bad in [" aHR0cHM6Ly9h", "aHR0cHM6Ly9h ", "Mg", "a-_b"] {
        assert!(decode_secret_data(bad).is_err(), "{bad:?}");
    }
    // A cluster Secret written by hand with a wrapped value reads.
    let wrapped = SECRET_LIST_YAML.replace(
        "server: aHR0cHM6Ly9wcm9kLWV1LTEuZXhhbXBsZS5jb20v",
        "server: |\n      aHR0cHM6Ly9wcm9kLWV1LTEu\n      ZXhhbXBsZS5jb20v",
    );
    let loaded = parse_clusters(&wrapped, "secrets.yaml").unwrap();
    assert_eq!(loaded.value[0].server, "https://prod-eu-1.example.com");
}

#[test]
fn invalid_base64_names_object_and_field() {
    let yaml = SECRET_LIST_YAML.replace("aHR0cHM6Ly9wcm9kLWV1LTEuZXhhbXBsZS5jb20v", "not*base64");
    let err = parse_clusters(&yaml, "secrets.yaml").unwrap_err();
    assert_eq!(
        field_of(&err),
        (
            "Secret argocd/cluster-prod-eu-1".into(),
            "data.server".into()
        )
    );
    let msg = err.to_string();
    assert!(
        msg.starts_with(
            "secrets.yaml: Secret argocd/cluster-prod-eu-1: data.server: invalid base64"
        ),
        "{msg}"
    );
}

#[test]
fn missing_or_empty_server_is_an_error() {
    let base = "kind: Secret\nmetadata: {name: a, namespace: argocd, uid: u, labels: {argocd.argoproj.io/secret-type: cluster}}\n";
    let err = parse_clusters(&format!("{base}stringData: {{name: a}}\n"), "s").unwrap_err();
    assert_eq!(field_of(&err).1, "data.server");
    let err = parse_clusters(&format!("{base}stringData: {{server: '/'}}\n"), "s").unwrap_err();
    assert_eq!(field_of(&err).1, "stringData.server");
}

#[test]
fn non_numeric_shard_is_a_warning_like_argo() {
    for bad in ["two", " 2", "2.0", "", "+", "99999999999999999999", "1_0"] {
        let yaml = format!(
            "kind: Secret\nmetadata: {{name: a, namespace: argocd, uid: u, labels: {{argocd.argoproj.io/secret-type: cluster}}}}\nstringData: {{server: https://a, shard: {bad:?}}}\n"
        );
        let loaded = parse_clusters(&yaml, "s.yaml").unwrap();
        assert_eq!(loaded.value[0].shard, None, "{bad:?}");
        assert_warned(&loaded.warnings, &["Secret argocd/a: stringData.shard"]);
    }
    let yaml = "kind: Secret\nmetadata: {name: a, uid: u, labels: {argocd.argoproj.io/secret-type: cluster}}\nstringData: {server: https://a, shard: '+7'}\n";
    assert_eq!(parse_clusters(yaml, "s").unwrap().value[0].shard, Some(7));
}

#[test]
fn bad_weight_is_an_error_naming_the_annotation() {
    let yaml = SECRET_LIST_YAML.replace(
        "fleetshard.io/weight: \"40\"",
        "fleetshard.io/weight: \"-4\"",
    );
    let err = parse_clusters(&yaml, "s.yaml").unwrap_err();
    assert_eq!(
        field_of(&err).1,
        "metadata.annotations[fleetshard.io/weight]"
    );
}

#[test]
fn skip_reconcile_follows_go_parse_bool() {
    for (v, want, warns) in [
        ("t", true, false),
        ("1", true, false),
        ("False", false, false),
        ("yes", false, true),
    ] {
        let yaml = format!(
            "kind: Secret\nmetadata: {{name: a, uid: u, labels: {{argocd.argoproj.io/secret-type: cluster}}, annotations: {{argocd.argoproj.io/skip-reconcile: {v:?}}}}}\nstringData: {{server: https://a}}\n"
        );
        let loaded = parse_clusters(&yaml, "s").unwrap();
        assert_eq!(loaded.value[0].skip_reconcile, want, "{v}");
        assert_eq!(!loaded.warnings.is_empty(), warns, "{v}");
    }
}

#[test]
fn missing_uid_falls_back_to_name_with_a_warning() {
    let yaml = "kind: Secret\nmetadata: {name: cluster-a, namespace: argocd, labels: {argocd.argoproj.io/secret-type: cluster}}\nstringData: {server: https://a}\n";
    let loaded = parse_clusters(yaml, "s").unwrap();
    assert_eq!(loaded.value[0].id, "cluster-a");
    assert_warned(&loaded.warnings, &["metadata.uid"]);
}

#[test]
fn non_cluster_secrets_are_skipped_with_a_warning() {
    let yaml = r#"
kind: List
items:
- kind: Secret
  metadata: {name: repo, namespace: argocd, labels: {argocd.argoproj.io/secret-type: repository}}
  data: {url: "!!! not even base64"}
- kind: Secret
  metadata: {name: plain, namespace: argocd}
"#;
    let loaded = parse_clusters(yaml, "s").unwrap();
    assert!(loaded.value.is_empty());
    assert_warned(
        &loaded.warnings,
        &["Secret argocd/repo", "Secret argocd/plain"],
    );
}

#[test]
fn unknown_or_wrong_kind_names_file_and_document() {
    let yaml = "kind: Secret\nmetadata: {name: a, uid: u, labels: {argocd.argoproj.io/secret-type: cluster}}\nstringData: {server: https://a}\n---\nkind: ConfigMap\nmetadata: {name: x}\n";
    match parse_clusters(yaml, "in.yaml").unwrap_err() {
        LoadError::UnknownKind {
            file, object, kind, ..
        } => {
            assert_eq!(
                (file.as_str(), object.as_str(), kind.as_str()),
                ("in.yaml", "document 2", "ConfigMap")
            );
        }
        other => panic!("{other}"),
    }
    // Applications where clusters are expected: most likely swapped arguments.
    let apps = "kind: List\nitems:\n- kind: Application\n  metadata: {name: a}\n";
    let err = parse_clusters(apps, "apps.yaml").unwrap_err();
    assert!(
        err.to_string()
            .contains("document 1, items[0]: kind \"Application\""),
        "{err}"
    );
    // A typed list with an item of another kind.
    let wrong = "kind: SecretList\nitems:\n- kind: ConfigMap\n";
    assert!(matches!(
        parse_input(wrong, "w").unwrap_err(),
        LoadError::UnknownKind { .. }
    ));
    // Secrets where applications are expected.
    assert!(matches!(
        parse_apps(SECRET_LIST_YAML, "s").unwrap_err(),
        LoadError::UnknownKind { .. }
    ));
}

#[test]
fn type_errors_name_object_and_field() {
    let json = r#"{"kind": "Secret", "metadata": {"name": "a", "namespace": "argocd", "labels": {"team": 7}}}"#;
    let err = parse_clusters(json, "s.json").unwrap_err();
    assert_eq!(
        field_of(&err),
        ("Secret argocd/a".into(), "metadata.labels.team".into())
    );
}

#[test]
fn mixed_list_loads_clusters_and_apps() {
    let yaml = r#"
apiVersion: v1
kind: List
items:
- kind: Secret
  metadata: {name: a, uid: u, labels: {argocd.argoproj.io/secret-type: cluster}}
  stringData: {server: https://a}
- kind: Application
  metadata: {name: guestbook, namespace: argocd}
  spec: {destination: {server: https://a}}
"#;
    let loaded = parse_input(yaml, "mixed").unwrap();
    assert_eq!(loaded.value.fleet.clusters.len(), 1);
    assert_eq!(loaded.value.fleet.apps.len(), 1);
    assert!(loaded.value.fleet.problems().is_empty());
}

#[test]
fn syntax_errors_and_empty_files() {
    let err = parse_clusters("kind: [unclosed\n", "bad.yaml").unwrap_err();
    assert!(matches!(err, LoadError::Syntax { .. }), "{err}");
    assert!(
        err.to_string().starts_with("bad.yaml: invalid YAML"),
        "{err}"
    );
    let err = parse_clusters("{\"kind\": ", "bad.json").unwrap_err();
    assert!(
        err.to_string().starts_with("bad.json: invalid JSON"),
        "{err}"
    );
    let err = parse_clusters("a: 1\na: 2\n", "dup.yaml").unwrap_err();
    assert!(matches!(err, LoadError::Syntax { .. }), "{err}");
    let err = parse_clusters("- 1\n- 2\n", "seq.yaml").unwrap_err();
    assert!(matches!(err, LoadError::Document { .. }), "{err}");
    let loaded = parse_clusters("# nothing here\n", "empty.yaml").unwrap();
    assert!(loaded.value.is_empty());
    assert_warned(&loaded.warnings, &["no documents"]);
}

/// A cluster Secret whose `stringData.config` is `config`.
fn secret_with_config(config: &str) -> String {
    format!(
        r#"{{"apiVersion": "v1", "kind": "Secret",
            "metadata": {{"name": "c1", "namespace": "argocd", "uid": "u1",
                         "labels": {{"argocd.argoproj.io/secret-type": "cluster"}}}},
            "stringData": {{"server": "https://a.example", "config": {config:?}}}}}"#
    )
}

#[test]
fn config_gives_the_cluster_credentials() {
    let text = secret_with_config(
        r#"{"bearerToken":"tok","tlsClientConfig":{"insecure":true},"awsAuthConfig":{"clusterName":"x","profile":"p"}}"#,
    );
    let loaded = parse_input(&text, "secret.json").unwrap();
    let creds = &loaded.value.credentials["u1"];
    assert_eq!(creds.bearer_token.as_deref(), Some("tok"));
    assert!(creds.insecure);
    assert_warned(
        &loaded.warnings,
        &["stringData.config.awsAuthConfig.profile: AWS profiles"],
    );
    // The exported Secret's default config (verified TLS, no token) adds no entry.
    let loaded = parse_input(SECRET_LIST_YAML, "secrets.yaml").unwrap();
    assert!(loaded.value.credentials.is_empty());
}

#[test]
fn bad_config_in_an_export_skips_the_secret_as_argo_cd_does() {
    // Argo CD's cluster list leaves out a Secret it cannot read; so does an export.
    for (config, field) in [
        (
            r#"{"bearerToken":["not","a","string"]}"#,
            "stringData.config.bearerToken",
        ),
        ("not json", "stringData.config"),
    ] {
        let loaded = parse_input(&secret_with_config(config), "secret.json").unwrap();
        assert!(loaded.value.fleet.clusters.is_empty(), "{config}");
        assert!(loaded.value.credentials.is_empty(), "{config}");
        assert_warned(&loaded.warnings, &[&format!("{field}: ")]);
        assert_warned(&loaded.warnings, &["the Secret is skipped"]);
    }
}

#[test]
fn bad_config_from_a_watcher_names_the_field_inside_it() {
    // A watcher keeps the Secret's last good version, so a bad one is an error.
    let value = |config: &str| -> serde_json::Value {
        serde_json::from_str(&secret_with_config(config)).unwrap()
    };
    let e = crate::cluster_from_value(
        &value(r#"{"bearerToken":["not","a","string"]}"#),
        "kubernetes",
    )
    .unwrap_err();
    assert_eq!(field_of(&e).1, "stringData.config.bearerToken");
    let e = crate::cluster_from_value(&value("not json"), "kubernetes").unwrap_err();
    assert_eq!(field_of(&e).1, "stringData.config");
    assert!(e.to_string().contains("invalid JSON"), "{e}");
}

#[test]
fn bytes_that_are_not_utf8_name_the_source_and_offset() {
    let err = crate::parse_input_bytes(b"kind: \xff\n", "bin.yaml").unwrap_err();
    assert!(
        matches!(err, LoadError::NotUtf8 { ref file, offset: 6 } if file == "bin.yaml"),
        "{err}"
    );
    let loaded = crate::parse_input_bytes(SECRET_LIST_YAML.as_bytes(), "secrets.yaml").unwrap();
    assert_eq!(loaded.value.fleet.clusters.len(), 2);
}

/// A cluster Secret without `config`, with these extra `stringData` keys.
fn secret_with(extra: &str) -> String {
    format!(
        r#"{{"apiVersion": "v1", "kind": "Secret",
            "metadata": {{"name": "c1", "namespace": "argocd", "uid": "u1",
                         "labels": {{"argocd.argoproj.io/secret-type": "cluster"}}}},
            "stringData": {{"server": "https://a.example", {extra}}}}}"#
    )
}

#[test]
fn namespaces_and_cluster_resources_scope_the_credentials() {
    let loaded = parse_input(
        &secret_with(r#""namespaces": "team-a, team-b", "clusterResources": "true""#),
        "secret.json",
    )
    .unwrap();
    // No `config`: the scope alone makes the entry (anonymous, but namespace-scoped).
    let scope = &loaded.value.credentials["u1"].scope;
    assert_eq!(scope.namespaces, ["team-a", "team-b"]);
    assert!(scope.cluster_resources);
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);

    let loaded = parse_input(&secret_with(r#""namespaces": "team-a""#), "s.json").unwrap();
    assert!(!loaded.value.credentials["u1"].scope.cluster_resources);
    // Without namespaces, clusterResources changes nothing (and is said to).
    let loaded = parse_input(&secret_with(r#""clusterResources": "true""#), "s.json").unwrap();
    assert!(loaded.value.credentials.is_empty());
    assert_warned(&loaded.warnings, &["clusterResources: means nothing"]);
}

#[test]
fn cluster_resources_is_true_only_when_it_says_true_as_argo_cd_compares_it() {
    for (value, granted, warned) in [
        ("true", true, false),
        ("false", false, false),
        ("True", false, true),
        ("1", false, true),
    ] {
        let text = secret_with(&format!(
            r#""namespaces": "a", "clusterResources": "{value}""#
        ));
        let loaded = parse_input(&text, "secret.json").unwrap();
        assert_eq!(loaded.value.fleet.clusters.len(), 1, "{value}");
        let scope = &loaded.value.credentials["u1"].scope;
        assert_eq!(scope.cluster_resources, granted, "{value}");
        assert_eq!(
            !loaded.warnings.is_empty(),
            warned,
            "{value}: {:?}",
            loaded.warnings
        );
        // A watcher reads it the same way (no error).
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let (_, credentials) = crate::cluster_from_value(&value, "kubernetes")
            .unwrap()
            .value
            .unwrap();
        assert_eq!(credentials.unwrap().scope.cluster_resources, granted);
    }
}
