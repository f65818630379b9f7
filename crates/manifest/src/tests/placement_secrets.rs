//! Cluster Secrets read straight into their clusters (`placement_secret.rs`, YAML through
//! `fast_yaml::de`, JSON through `RawValue`) answer exactly what converting each item's
//! value answers: clusters, credentials, order, warnings, errors.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use crate::document::{Accept, parse_owned as parse, parse_whole};
use crate::error::Ctx;
use crate::stream::Item;
use crate::typed::Typed;

/// What the fast paths type for a clusters file.
const SECRETS: Typed = Typed {
    apps: false,
    secrets: true,
};

fn b64(s: &str) -> String {
    STANDARD.encode(s)
}

/// A plain cluster Secret `name`, its values in `data` as kubectl prints them.
fn plain(name: &str) -> String {
    format!(
        "- apiVersion: v1
  data:
    config: {config}
    name: {n}
    server: {server}
    shard: {shard}
  kind: Secret
  metadata:
    annotations:
      fleetshard.io/weight: \"3\"
    labels:
      argocd.argoproj.io/secret-type: cluster
      topology.kubernetes.io/zone: z1
    name: cluster-{name}
    namespace: argocd
    resourceVersion: \"7\"
    uid: uid-{name}
  type: Opaque
",
        config = b64(r#"{"tlsClientConfig":{"insecure":false}}"#),
        n = b64(name),
        server = b64(&format!("https://{name}.example/")),
        shard = b64("1"),
    )
}

fn list(items: &str) -> String {
    format!("apiVersion: v1\nitems:\n{items}kind: List\nmetadata:\n  resourceVersion: \"\"\n")
}

/// A Secret item named `name` with `body` (lines indented by two) after its kind and
/// metadata name and namespace.
fn secret(name: &str, labels: &str, body: &str) -> String {
    format!(
        "- kind: Secret\n  metadata:\n    name: {name}\n    namespace: argocd\n    uid: u-{name}\n    labels:\n      argocd.argoproj.io/secret-type: cluster\n{labels}{body}"
    )
}

/// Tricky Secrets, each to be read as the generic conversion reads it.
fn tricky() -> Vec<String> {
    let server = format!("    server: {}\n", b64("https://t.example"));
    let data = |extra: &str| format!("  data:\n{server}{extra}");
    let creds =
        r#"{"bearerToken":"s3cr3t-token","tlsClientConfig":{"insecure":true,"caData":"Q0E="}}"#;
    vec![
        // `stringData` wins over `data`, in the clear.
        secret(
            "sd",
            "",
            &format!(
                "{}  stringData:\n    server: https://sd.example/\n    name: sd\n    shard: \"4\"\n",
                data("")
            ),
        ),
        secret("sd-only", "", "  stringData:\n    server: https://o.example\n"),
        // Bad base64 where it is read (an error), and where it is not (ignored).
        secret("b64", "", "  data:\n    server: \"!!notbase64\"\n"),
        secret("b64-other", "", &data("    extra: \"!!notbase64\"\n")),
        // Not UTF-8 once decoded.
        secret("utf8", "", &format!("  data:\n    server: {}\n", STANDARD.encode([0xff, 0xfe]))),
        // No server, an empty one, a server of only slashes.
        secret("noserver", "", "  data:\n    name: eA==\n"),
        secret("noserver2", "", ""),
        secret("empty", "", "  stringData:\n    server: \"\"\n"),
        secret("slash", "", "  stringData:\n    server: /\n"),
        // `config` with credentials, unreadable, unsupported, not an object.
        secret("creds", "", &data(&format!("    config: {}\n", b64(creds)))),
        secret("creds-sd", "", &format!("  stringData:\n    server: https://c.example\n    config: '{creds}'\n")),
        secret("badcfg", "", &data(&format!("    config: {}\n", b64("{not json s3cr3t-token")))),
        secret("arraycfg", "", &data(&format!("    config: {}\n", b64("[1]")))),
        secret(
            "typecfg",
            "",
            &data(&format!("    config: {}\n", b64(r#"{"bearerToken":5}"#))),
        ),
        secret(
            "proxy",
            "",
            &data(&format!("    config: {}\n", b64(r#"{"proxyUrl":"ftp://p","bearerToken":"s3cr3t-token"}"#))),
        ),
        secret(
            "exec",
            "",
            &data(&format!("    config: {}\n", b64(r#"{"execProviderConfig":{"command":"argocd-k8s-auth","args":["aws"],"apiVersion":"client.authentication.k8s.io/v1beta1"}}"#))),
        ),
        // Labels: more of them, of the wrong type, null; another secret type; none.
        secret("labels", "      team: a\n      env: \"010\"\n", &data("")),
        secret("labelnum", "      n: 1\n", &data("")),
        secret("labelnull", "      n:\n", &data("")),
        "- kind: Secret\n  metadata:\n    name: repo\n    labels:\n      argocd.argoproj.io/secret-type: repository\n  stringData:\n    url: https://git.example/r\n    type: git\n".to_owned(),
        "- kind: Secret\n  metadata:\n    name: nolabel\n  stringData:\n    server: https://n.example\n".to_owned(),
        "- kind: Secret\n  metadata:\n    name: nolabels\n    labels:\n  stringData:\n    server: https://n.example\n".to_owned(),
        // The shard: an integer, not one, with a sign, too large.
        secret("shard", "", &data(&format!("    shard: {}\n", b64("-2")))),
        secret("shardbad", "", &data(&format!("    shard: {}\n", b64("two")))),
        secret("shardbig", "", &data(&format!("    shard: {}\n", b64("99999999999999999999")))),
        // Annotations: skip-reconcile, bad and good; a bad weight (an error).
        secret("ann", "", &data("")).replace(
            "    labels:",
            "    annotations:\n      argocd.argoproj.io/skip-reconcile: \"true\"\n    labels:",
        ),
        secret("annbad", "", &data("")).replace(
            "    labels:",
            "    annotations:\n      argocd.argoproj.io/skip-reconcile: maybe\n    labels:",
        ),
        secret("weightbad", "", &data("")).replace(
            "    labels:",
            "    annotations:\n      fleetshard.io/weight: \"-1\"\n    labels:",
        ),
        // Scope: namespaces, clusterResources good and bad, without namespaces.
        secret(
            "scope",
            "",
            &data(&format!("    namespaces: {}\n    clusterResources: {}\n", b64("a,b"), b64("true"))),
        ),
        secret("scopebad", "", &data(&format!("    namespaces: {}\n    clusterResources: {}\n", b64("a"), b64("True")))),
        secret("scopealone", "", &data(&format!("    clusterResources: {}\n", b64("true")))),
        // In-cluster without a uid (id ""), another server without one (a warning).
        "- kind: Secret\n  metadata:\n    name: in\n    labels:\n      argocd.argoproj.io/secret-type: cluster\n  stringData:\n    server: https://kubernetes.default.svc\n".to_owned(),
        "- kind: Secret\n  metadata:\n    name: nouid\n    labels:\n      argocd.argoproj.io/secret-type: cluster\n  stringData:\n    server: https://nouid.example\n".to_owned(),
        "- kind: Secret\n  metadata:\n    labels:\n      argocd.argoproj.io/secret-type: cluster\n  stringData:\n    server: https://noname.example\n".to_owned(),
        // Shapes: data not a mapping, a value not a string, null data, metadata not a mapping.
        secret("datastr", "", "  data: x\n"),
        secret("datanum", "", &data("    name: 5\n")),
        secret("datanull", "", "  data:\n  stringData:\n    server: https://dn.example\n"),
        "- kind: Secret\n  metadata: x\n".to_owned(),
        // A duplicate key: a YAML error.
        secret("dup", "", &data("")).replace("    uid: u-dup\n", "    uid: u-dup\n    uid: again\n"),
        // Kinds: none (the list's), another, not a string; not a mapping.
        secret("nokind", "", &data("")).replacen("- kind: Secret\n  metadata:", "- metadata:", 1),
        secret("app", "", &data("")).replacen("kind: Secret", "kind: Application", 1),
        secret("kindnum", "", &data("")).replacen("kind: Secret", "kind: 5", 1),
        "- - Secret\n".to_owned(),
        // Flow collections and anchors: serde-saphyr reads the item alone.
        "- kind: Secret\n  metadata: {name: f, uid: f, labels: {argocd.argoproj.io/secret-type: cluster}}\n  stringData: {server: https://f.example}\n".to_owned(),
        secret("anchor", "", "  stringData:\n    server: &s https://a.example\n    name: *s\n"),
    ]
}

/// Both readings of `text` as `accept` reads it, as comparable text: the clusters,
/// credentials and warnings, or the error.
fn both(text: &str, file: &str, accept: Accept) -> (String, String) {
    let run = |f: fn(&str, &mut Ctx, Accept) -> _| {
        let mut ctx = Ctx::new(file);
        let r: Result<crate::FleetFile, crate::LoadError> = f(text, &mut ctx, accept);
        match r {
            Ok(file) => format!(
                "{:?}\n{:?}\n{:?}\n{:?}",
                file.fleet.clusters, file.credentials, file.repositories, ctx.warnings
            ),
            Err(e) => format!("error: {e}"),
        }
    };
    (run(parse), run(parse_whole))
}

fn assert_same(text: &str, file: &str) -> String {
    for accept in [
        Accept::CLUSTERS,
        Accept::CLUSTERS_AND_REPOSITORIES,
        Accept::ANY,
    ] {
        let (typed, generic) = both(text, file, accept);
        assert_eq!(typed, generic, "{accept:?}\n{text}");
    }
    both(text, file, Accept::CLUSTERS).0
}

/// How many items of a YAML list the fast path read straight into clusters.
fn typed_yaml(text: &str) -> usize {
    let mut typed = 0;
    crate::fast_yaml::read_list(text, SECRETS, &mut |item| {
        typed += usize::from(matches!(item, Item::Cluster(_)));
    })
    .expect("read by the fast path");
    typed
}

/// The JSON of a YAML list, as serde-saphyr reads it.
fn as_json(yaml: &str) -> Option<String> {
    let value: serde_json::Value =
        serde_saphyr::from_str_with_options(yaml, crate::document::yaml_options(yaml.len()))
            .ok()?;
    Some(serde_json::to_string_pretty(&value).expect("serialisable"))
}

#[test]
fn plain_secrets_are_typed_and_read_the_same() {
    let text = list(&(plain("a") + &plain("b") + &plain("a")));
    assert_eq!(typed_yaml(&text), 3);
    let out = assert_same(&text, "f.yaml");
    assert!(out.contains("https://b.example\""), "{out}");
    let json = as_json(&text).expect("valid");
    let out = assert_same(&json, "f.json");
    assert!(out.contains("uid-b"), "{out}");
}

#[test]
fn tricky_secrets_read_the_same_in_yaml_and_json() {
    let mut compared = 0;
    for (i, item) in tricky().iter().enumerate() {
        let text = list(&format!("{}{item}{}", plain("before"), plain("after")));
        let out = assert_same(&text, "f.yaml");
        assert!(
            out.contains("before") || out.starts_with("error"),
            "{i}: {out}"
        );
        if let Some(json) = as_json(&text) {
            assert_same(&json, "f.json");
            compared += 1;
        }
    }
    // All but the duplicate key, which serde-saphyr refuses.
    assert_eq!(compared, tricky().len() - 1);
}

#[test]
fn only_plain_cluster_secrets_are_typed() {
    let typed: Vec<String> = tricky()
        .iter()
        .filter(|i| !i.contains('{') && !i.contains('&') && !i.contains("uid: again"))
        .filter(|i| typed_yaml(&list(i)) == 1)
        .map(|i| i.lines().nth(2).unwrap_or_default().trim().to_owned())
        .collect();
    let expected = [
        "name: sd",
        "name: sd-only",
        "name: b64-other",
        "name: creds",
        "name: exec",
        "name: labels",
        "name: shard",
        "name: ann",
        "name: scope",
        "name: in",
        "name: datanull",
    ];
    assert_eq!(typed, expected);
}

#[test]
fn json_secrets_are_typed_and_escapes_read_the_same() {
    let typed = |text: &str| matches!(crate::typed::json_item(text, SECRETS), Ok(Item::Cluster(_)));
    let label = r#""labels":{"argocd.argoproj.io/secret-type":"cluster"}"#;
    let plain = format!(
        r#"{{"kind":"Secret","metadata":{{"name":"j","uid":"u",{label}}},"stringData":{{"server":"https:\/\/j.example"}}}}"#
    );
    assert!(typed(&plain));
    assert!(!typed(&plain.replace("\"Secret\"", "\"Application\"")));
    let cases = [
        plain.clone(),
        // Duplicate keys: the last wins in a value (a struct's field: not typed).
        plain.replace(r#""uid":"u""#, r#""uid":"u","uid":"v""#),
        plain.replace(
            r#""cluster"}"#,
            r#""repository","argocd.argoproj.io/secret-type":"cluster"}"#,
        ),
        plain.replace(r#""server":"#, r#""server":"https://x","server":"#),
        plain.replace(r#""kind":"Secret""#, r#""kind":"Secret","kind":"Secret""#),
        // Escapes in keys and values.
        plain.replace(r#""name":"j""#, r#""n\u0061me":"\u006a""#),
        // Null and numbers where strings go.
        plain.replace(r#""uid":"u""#, r#""uid":null"#),
        plain.replace(r#""uid":"u""#, r#""uid":7"#),
        plain.replace(r#""stringData""#, r#""data":null,"stringData""#),
    ];
    for case in cases {
        let text = format!(r#"{{"apiVersion":"v1","kind":"List","items":[{plain},{case}]}}"#);
        assert_same(&text, "f.json");
    }
}

#[test]
fn credentials_are_never_in_debug_or_messages() {
    let token = "s3cr3t-token";
    let config = format!(r#"{{"bearerToken":"{token}","proxyUrl":"ftp://p"}}"#);
    let text = format!(
        r#"{{"kind":"Secret","metadata":{{"name":"c","labels":{{"argocd.argoproj.io/secret-type":"cluster"}}}},"data":{{"config":"{}"}},"stringData":{{"server":"https://c.example","config":{config:?}}}}}"#,
        b64(&config)
    );
    let typed: crate::placement_secret::TypedSecret<'_> =
        serde_json::from_str(&text).expect("a Secret");
    let shown = format!("{typed:?}");
    assert!(
        shown.contains("config") && !shown.contains(token) && !shown.contains(&b64(&config)),
        "{shown}"
    );
    let value: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let object: crate::secret::SecretObject = serde_json::from_value(value).expect("a Secret");
    let shown = format!("{object:?}");
    assert!(
        shown.contains("config") && !shown.contains(token),
        "{shown}"
    );
    // Read as a list: the unreadable config skips it with a warning naming the field only.
    let list = format!(r#"{{"apiVersion":"v1","kind":"List","items":[{text}]}}"#);
    let out = assert_same(&list, "f.json");
    assert!(
        out.contains("stringData.config") && !out.contains(token),
        "{out}"
    );
}
