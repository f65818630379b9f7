//! Kustomize, directory with Jsonnet, plugin, and multi-source with `ref`.

use std::collections::BTreeMap;

use fleetshard_reposerver::{RenderSettings, RepositoryInput, build_request, ref_sources};
use serde_json::json;

use super::{common, creds, inputs, sent};

#[tokio::test]
async fn kustomize_overlay() {
    let source = json!({
        "repoURL": "https://git.example/apps.git",
        "path": "overlays/prod",
        "targetRevision": "v1.2.0",
        "kustomize": {
            "namePrefix": "prod-",
            "nameSuffix": "-eu",
            "images": ["nginx=nginx:1.27", "ghcr.io/x/api:2.0"],
            "commonLabels": {"team": "a", "env": "prod"},
            "commonAnnotations": {"owner": "sre"},
            "forceCommonLabels": true,
            "namespace": "web",
            "replicas": [{"name": "web", "count": 3}, {"name": "api", "count": "5"}],
            "patches": [
                {
                    "patch": "- op: replace\n  path: /spec/replicas\n  value: 2\n",
                    "target": {
                        "group": "apps", "version": "v1", "kind": "Deployment",
                        "name": "web", "namespace": "web", "labelSelector": "tier=front",
                        "annotationSelector": "a=b"
                    },
                    "options": {"allowNameChange": true}
                },
                {"path": "patches/limits.yaml"}
            ],
            "components": ["../../components/monitoring"],
            "ignoreMissingComponents": true,
            "labelWithoutSelector": true,
            "labelIncludeTemplates": true,
            "version": "v5.4.3"
        }
    });
    let mut i = inputs(
        source,
        RepositoryInput::anonymous("https://git.example/apps.git"),
        "v1.2.0",
    );
    let cm: BTreeMap<String, String> = [("kustomize.buildOptions", "--enable-helm")]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    i.settings = RenderSettings::from_argocd_cm(&cm).unwrap();
    let m = sent(&i).await;
    common(&m, &i);
    assert_eq!(
        m.message(13).unwrap().str_or_empty(1),
        "--enable-helm",
        "13.1 buildOptions"
    );
    let k = m.message(10).unwrap().message(8).unwrap();
    assert_eq!(
        k.numbers(),
        [1, 2, 3, 4, 5, 6, 7, 9, 11, 12, 13, 14, 17, 18]
    );
    assert_eq!(k.str_or_empty(1), "prod-");
    assert_eq!(k.str_or_empty(2), "-eu");
    assert_eq!(k.strings(3), ["nginx=nginx:1.27", "ghcr.io/x/api:2.0"]);
    assert_eq!(k.string_map(4)["team"], "a");
    assert_eq!(k.str_or_empty(5), "v5.4.3");
    assert_eq!(k.string_map(6)["owner"], "sre");
    assert!(k.bool(7));
    assert_eq!(k.str_or_empty(9), "web");
    let replicas = k.messages(11);
    assert_eq!(replicas[0].str_or_empty(1), "web");
    let count = replicas[0].message(2).unwrap();
    assert_eq!(
        (count.varint(1), count.varint(2)),
        (0, 3),
        "IntOrString int"
    );
    let count = replicas[1].message(2).unwrap();
    assert_eq!(
        (count.varint(1), count.str_or_empty(3).as_str()),
        (1, "5"),
        "IntOrString string"
    );
    let patches = k.messages(12);
    assert!(patches[0].str_or_empty(2).starts_with("- op: replace"));
    let target = patches[0].message(3).unwrap();
    let res_id = target.message(1).unwrap();
    let gvk = res_id.message(1).unwrap();
    assert_eq!(
        [
            gvk.str_or_empty(1),
            gvk.str_or_empty(2),
            gvk.str_or_empty(3)
        ],
        ["apps", "v1", "Deployment"]
    );
    assert_eq!(
        (res_id.str_or_empty(2), res_id.str_or_empty(3)),
        ("web".into(), "web".into())
    );
    assert_eq!(target.str_or_empty(2), "a=b", "annotationSelector is 2");
    assert_eq!(target.str_or_empty(3), "tier=front", "labelSelector is 3");
    assert!(patches[0].bool_map(4)["allowNameChange"]);
    assert_eq!(patches[1].str_or_empty(1), "patches/limits.yaml");
    assert_eq!(k.strings(13), ["../../components/monitoring"]);
    assert!(k.bool(14) && k.bool(17) && k.bool(18));
}

#[tokio::test]
async fn directory_with_jsonnet() {
    let source = json!({
        "repoURL": "https://git.example/apps.git",
        "path": "jsonnet/guestbook",
        "directory": {
            "recurse": true,
            "include": "*.jsonnet",
            "exclude": "vendor/*",
            "jsonnet": {
                "extVars": [
                    {"name": "env", "value": "prod"},
                    {"name": "replicas", "value": "1+2", "code": true}
                ],
                "tlas": [{"name": "tier", "value": "\"front\"", "code": true}],
                "libs": ["vendor", "lib"]
            }
        }
    });
    let i = inputs(
        source,
        RepositoryInput::anonymous("https://git.example/apps.git"),
        "HEAD",
    );
    let m = sent(&i).await;
    common(&m, &i);
    let d = m.message(10).unwrap().message(10).unwrap();
    assert_eq!(d.numbers(), [1, 2, 3, 4]);
    assert!(d.bool(1));
    assert_eq!(
        (d.str_or_empty(3), d.str_or_empty(4)),
        ("vendor/*".into(), "*.jsonnet".into())
    );
    let j = d.message(2).unwrap();
    let ext = j.messages(1);
    assert_eq!(
        (ext[0].str_or_empty(1), ext[0].str_or_empty(2)),
        ("env".into(), "prod".into())
    );
    assert!(!ext[0].bool(3) && ext[1].bool(3), "JsonnetVar.code is 3");
    let tlas = j.messages(2);
    assert_eq!(tlas[0].str_or_empty(2), "\"front\"");
    assert!(tlas[0].bool(3));
    assert_eq!(j.strings(3), ["vendor", "lib"]);

    // A directory without jsonnet still carries the (empty) jsonnet message, as Go does.
    let source =
        json!({"repoURL": "https://git.example/apps.git", "directory": {"recurse": false}});
    let i = inputs(
        source,
        RepositoryInput::anonymous("https://git.example/apps.git"),
        "HEAD",
    );
    let request = build_request(&i).unwrap();
    assert!(
        request
            .application_source
            .unwrap()
            .directory
            .unwrap()
            .jsonnet
            .is_some()
    );
}

#[tokio::test]
async fn plugin_with_env_and_parameters() {
    let source = json!({
        "repoURL": "https://git.example/apps.git",
        "path": "cmp",
        "plugin": {
            "name": "envsubst-v1.0",
            "env": [{"name": "REGION", "value": "eu"}],
            "parameters": [
                {"name": "s", "string": "v"},
                {"name": "m", "map": {"k": "v"}},
                {"name": "a", "array": ["x", "y"]},
                {"name": "empty", "string": ""},
                {"name": "empty-map", "map": {}}
            ]
        }
    });
    let i = inputs(
        source,
        RepositoryInput::anonymous("https://git.example/apps.git"),
        "main",
    );
    let m = sent(&i).await;
    let p = m.message(10).unwrap().message(11).unwrap();
    assert_eq!(p.str_or_empty(1), "envsubst-v1.0");
    let env = p.messages(2);
    assert_eq!(
        (env[0].str_or_empty(1), env[0].str_or_empty(2)),
        ("REGION".into(), "eu".into())
    );
    let params = p.messages(3);
    assert_eq!(params[0].string(5).as_deref(), Some("v"), "string is 5");
    assert_eq!(
        params[1].message(3).unwrap().string_map(1)["k"],
        "v",
        "map is 3"
    );
    assert_eq!(
        params[2].message(4).unwrap().strings(1),
        ["x", "y"],
        "array is 4"
    );
    assert_eq!(
        params[3].string(5).as_deref(),
        Some(""),
        "an empty string is sent"
    );
    assert_eq!(params[3].numbers(), [1, 5]);
    assert_eq!(params[4].numbers(), [1, 3], "an empty map is sent");
}

#[tokio::test]
async fn multi_source_with_ref() {
    let sources = vec![
        json!({
            "repoURL": "https://charts.example/stable",
            "chart": "web",
            "targetRevision": "2.0.0",
            "helm": {"valueFiles": ["$values/env/prod/values.yaml"]}
        }),
        json!({
            "repoURL": "https://git.example/values.git",
            "targetRevision": "main",
            "ref": "values"
        }),
    ];
    let resolve = |url: &str| RepositoryInput {
        credentials: creds("bot", "values-secret"),
        ..RepositoryInput::anonymous(url)
    };
    let refs = ref_sources(&sources, &[String::new(), "abc123".into()], resolve).unwrap();
    for (index, source) in sources.iter().enumerate() {
        let mut i = inputs(
            source.clone(),
            resolve(source["repoURL"].as_str().unwrap()),
            "x",
        );
        i.source_path = format!("spec.sources[{index}]");
        i.has_multiple_sources = true;
        i.ref_sources = refs.clone();
        let m = sent(&i).await;
        common(&m, &i);
        assert!(m.bool(22), "22 hasMultipleSources");
        let map = m.message_map(23);
        assert_eq!(map.keys().collect::<Vec<_>>(), ["$values"]);
        let target = &map["$values"];
        let repo = target.message(1).unwrap();
        assert_eq!(repo.str_or_empty(1), "https://git.example/values.git");
        assert_eq!(repo.str_or_empty(3), "values-secret");
        assert_eq!(target.str_or_empty(2), "abc123", "the synced revision wins");
        assert_eq!(target.str_or_empty(3), "", "no chart");
        let src = m.message(10).unwrap();
        if index == 1 {
            assert_eq!(src.str_or_empty(13), "values", "13 ref");
        } else {
            assert_eq!(
                src.message(7).unwrap().strings(1),
                ["$values/env/prod/values.yaml"]
            );
        }
    }
}

#[tokio::test]
async fn hard_refresh_and_instance_settings() {
    let source = json!({"repoURL": "https://git.example/apps.git", "path": "plain"});
    let mut i = inputs(
        source,
        RepositoryInput::anonymous("https://git.example/apps.git"),
        "main",
    );
    i.no_cache = true;
    i.no_revision_cache = true;
    i.manifest_generate_paths = ".;../shared".into();
    let cm: BTreeMap<String, String> = [
        ("installationID", "eu-1"),
        ("application.resourceTrackingMethod", "annotation+label"),
        ("helm.enable", "false"),
        ("application.instanceLabelKey", "example.com/app"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    i.settings = RenderSettings::from_argocd_cm(&cm).unwrap();
    let m = sent(&i).await;
    assert!(m.bool(3), "3 noCache");
    assert!(m.bool(18), "18 noRevisionCache");
    assert_eq!(m.str_or_empty(4), "example.com/app");
    assert_eq!(m.str_or_empty(19), "annotation+label");
    assert_eq!(
        m.str_or_empty(26),
        ".;../shared",
        "26 annotationManifestGeneratePaths"
    );
    assert_eq!(m.str_or_empty(27), "eu-1", "27 installationID");
    assert!(
        !m.bool_map(20)["Helm"],
        "20 enabledSourceTypes from argocd-cm"
    );
    assert!(
        !m.numbers().contains(&22),
        "one source: hasMultipleSources not sent"
    );
}
