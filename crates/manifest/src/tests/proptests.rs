//! Property tests: no input panics a parser, and every writer's output reads back as the
//! model it was written from.

use std::collections::BTreeMap;

use fleetshard_core::{App, Cluster, Destination, Fleet, ShardSpec};
use proptest::collection::{btree_map, vec};
use proptest::prelude::*;

use crate::native::{placeholder, placeholder_spec};
use crate::{
    AppSource, AppSpec, AutoSync, FleetFile, IN_CLUSTER_SERVER, SECRET_TYPE_LABEL, load_apps,
    load_apps_with_specs, load_clusters, load_fleet_file, load_input, parse_apps,
    parse_apps_with_specs, parse_clusters, parse_fleet_file, parse_input, spec_key,
    to_application_list_yaml, to_fleet_json, to_fleet_yaml, to_secret_list_yaml,
};

/// Strings that YAML writers get wrong when they forget to quote, plus arbitrary text.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-z0-9.-]{0,12}",
        1 => prop::sample::select(vec![
            "", "true", "False", "yes", "n", "null", "~", "010", "0x1F", "1_000", "1.5", ".nan",
            "-", "- x", "a: b", "#c", "'", "\"", "\\", "\n", "a\nb", " lead", "trail ",
            "\t", "&anchor", "*alias", "!tag", "%", "@", "`", "{}", "[]", "? k", "---", "...",
            "é ü 中文 🚀", "\u{0}", "\u{7f}", "\u{feff}x", "\r\n",
        ])
        .prop_map(str::to_owned),
        1 => "\\PC{0,16}",
        1 => any::<String>(),
    ]
}

/// A non-empty name.
fn name() -> impl Strategy<Value = String> {
    text().prop_map(|s| if s.is_empty() { "x".to_owned() } else { s })
}

/// A server URL as the model holds it: normalised and non-empty.
fn server() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "https://[a-z0-9-]{1,10}(\\.example)?(:[0-9]{2,4})?(/p)?".prop_map(|s| s),
        1 => Just(IN_CLUSTER_SERVER.to_owned()),
        1 => text().prop_map(|s| format!("https://{s}")),
    ]
    .prop_map(|s| fleetshard_core::model::normalize_server(&s).to_owned())
    .prop_filter("non-empty", |s| !s.is_empty())
}

fn cluster() -> impl Strategy<Value = Cluster> {
    (
        prop_oneof![3 => "[0-9a-f]{8}-[0-9a-f]{4}".prop_map(|s| s), 1 => name(), 1 => Just(String::new())],
        text(),
        server(),
        proptest::option::of(any::<i64>()),
        btree_map(text(), text(), 0..4),
        any::<bool>(),
        proptest::option::of(any::<u64>()),
        proptest::option::of(text()),
    )
        .prop_map(|(id, name, server, shard, mut labels, skip, weight, zone)| {
            labels.remove(SECRET_TYPE_LABEL);
            if let Some(z) = zone {
                labels.insert(fleetshard_core::model::ZONE_LABEL.to_owned(), z);
            }
            Cluster { id, name, server, shard, labels, skip_reconcile: skip, weight }
        })
}

/// An application and its GitOps spec (without `sync_request`: writers do not write an
/// operation).
fn app() -> impl Strategy<Value = (App, AppSpec)> {
    (
        (text(), name(), text()),
        (text(), text(), text()),
        (
            proptest::option::of(text()),
            proptest::option::of(text()),
            proptest::option::of(text()),
        ),
        proptest::option::of((any::<bool>(), any::<bool>())),
    )
        .prop_map(
            |(
                (namespace, name, project),
                (repo_url, target_revision, path),
                (server, dname, dns),
                auto,
            )| {
                let app = App {
                    namespace,
                    name,
                    project,
                    destination: Destination {
                        server,
                        name: dname,
                        namespace: dns,
                    },
                };
                let spec = AppSpec {
                    source: AppSource {
                        repo_url,
                        target_revision,
                        path,
                        directory: Default::default(),
                        raw: Default::default(),
                    }
                    // The source object as the writers write it and the readers keep it.
                    .with_typed_raw(),
                    auto_sync: auto.map(|(prune, self_heal)| AutoSync {
                        prune,
                        self_heal,
                        allow_empty: false,
                    }),
                    sync_request: None,
                    refusals: Vec::new(),
                    refresh: None,
                    sources: Vec::new(),
                    policy: Default::default(),
                    lifecycle: Default::default(),
                };
                (app, spec)
            },
        )
}

/// Apps and their specs as the loaders give them: every app has a spec, and of apps that
/// share a key the first one's.
fn with_specs(
    pairs: impl IntoIterator<Item = (App, AppSpec)>,
) -> (Vec<App>, BTreeMap<(String, String), AppSpec>) {
    let mut apps = Vec::new();
    let mut specs = BTreeMap::new();
    for (app, spec) in pairs {
        specs.entry(spec_key(&app)).or_insert(spec);
        apps.push(app);
    }
    (apps, specs)
}

/// A fleet whose app list may start with placeholder apps, so the writer's folding into
/// `apps: N` is exercised.
fn fleet_file() -> impl Strategy<Value = FleetFile> {
    (
        vec((cluster(), 0u64..4), 0..6),
        vec(app(), 0..6),
        vec((proptest::option::of(text()), 1u32..=u32::MAX), 0..4),
    )
        .prop_map(|(clusters, explicit, shards)| {
            let mut pairs = Vec::new();
            for (c, n) in &clusters {
                pairs.extend((1..=*n).map(|k| (placeholder(c, k), placeholder_spec())));
            }
            pairs.extend(explicit);
            let (apps, specs) = with_specs(pairs);
            FleetFile {
                fleet: Fleet {
                    clusters: clusters.into_iter().map(|(c, _)| c).collect(),
                    apps,
                },
                specs,
                shards: shards
                    .into_iter()
                    .map(|(zone, capacity)| ShardSpec { zone, capacity })
                    .collect(),
                credentials: Default::default(),
                projects: Default::default(),
                repositories: Default::default(),
                format: Default::default(),
            }
        })
}

/// Valid inputs of every format, for mutation.
fn seeds() -> Vec<String> {
    let f = FleetFile {
        fleet: Fleet {
            clusters: vec![
                Cluster::new("u1", "https://a"),
                Cluster {
                    shard: Some(1),
                    weight: Some(3),
                    ..Cluster::new("u2", "https://b")
                },
            ],
            apps: vec![App::to_server("argocd", "g", "https://a")],
        },
        specs: [(
            ("argocd".to_owned(), "g".to_owned()),
            AppSpec {
                source: AppSource {
                    repo_url: "https://git.example/a".into(),
                    target_revision: "HEAD".into(),
                    path: "a".into(),
                    directory: Default::default(),
                    raw: Default::default(),
                },
                auto_sync: Some(AutoSync::default()),
                sync_request: None,
                refusals: Vec::new(),
                refresh: None,
                sources: Vec::new(),
                policy: Default::default(),
                lifecycle: Default::default(),
            },
        )]
        .into(),
        shards: vec![ShardSpec::default()],
        credentials: Default::default(),
        projects: Default::default(),
        repositories: Default::default(),
        format: Default::default(),
    };
    vec![
        to_fleet_yaml(&f),
        to_fleet_json(&f),
        to_secret_list_yaml(&f.fleet.clusters),
        to_application_list_yaml(&f.fleet.apps, &f.specs),
    ]
}

/// Runs every parser; only a panic fails the test.
fn parse_all(text: &str) {
    let _ = parse_input(text, "p");
    let _ = parse_clusters(text, "p");
    let _ = parse_apps(text, "p");
    let _ = parse_apps_with_specs(text, "p");
    let _ = parse_fleet_file(text, "p");
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in vec(any::<u8>(), 0..512)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in");
        std::fs::write(&path, &bytes).unwrap();
        let _ = load_input(&path);
        let _ = load_clusters(&path);
        let _ = load_apps(&path);
        let _ = load_apps_with_specs(&path);
        let _ = load_fleet_file(&path);
        parse_all(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn yaml_like_text_never_panics(text in "[a-zA-Z0-9:{}\\[\\],'\"#&*!|>%@ \n\t-]{0,200}") {
        parse_all(&text);
    }

    #[test]
    fn mutated_valid_input_never_panics(
        seed in 0usize..4,
        at in any::<prop::sample::Index>(),
        len in 0usize..20,
        insert in text(),
    ) {
        let base = &seeds()[seed];
        let start = at.index(base.len() + 1);
        let end = (start + len).min(base.len());
        if base.is_char_boundary(start) && base.is_char_boundary(end) {
            parse_all(&format!("{}{}{}", &base[..start], insert, &base[end..]));
        }
    }

    #[test]
    fn fleet_yaml_round_trips(f in fleet_file()) {
        let text = to_fleet_yaml(&f);
        let back = parse_fleet_file(&text, "f.yaml").map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert!(back.warnings.is_empty());
        prop_assert_eq!(back.value, f, "{}", text);
    }

    #[test]
    fn fleet_json_round_trips(f in fleet_file()) {
        let text = to_fleet_json(&f);
        let back = parse_input(&text, "f.json").map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(back.value, f, "{}", text);
    }

    #[test]
    fn secret_list_round_trips(clusters in vec(cluster(), 0..6)) {
        // The one model a Secret cannot carry: an empty id off the in-cluster server (no
        // uid reads back as the Secret's name, with a warning).
        let clusters: Vec<_> = clusters
            .into_iter()
            .filter(|c| !c.id.is_empty() || c.server == IN_CLUSTER_SERVER)
            .collect();
        let text = to_secret_list_yaml(&clusters);
        let back = parse_clusters(&text, "s.yaml").map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert!(back.warnings.is_empty(), "{:?}", back.warnings);
        prop_assert_eq!(back.value, clusters, "{}", text);
    }

    #[test]
    fn application_list_round_trips(pairs in vec(app(), 0..6)) {
        let (apps, specs) = with_specs(pairs);
        let text = to_application_list_yaml(&apps, &specs);
        let back = parse_apps_with_specs(&text, "a.yaml").map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert!(back.warnings.is_empty(), "{:?}", back.warnings);
        prop_assert_eq!(&back.value.fleet.apps, &apps, "{}", text);
        prop_assert_eq!(&back.value.specs, &specs, "{}", text);
        prop_assert!(back.value.fleet.clusters.is_empty());
        let apps_only = parse_apps(&text, "a.yaml").map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(apps_only.value, apps, "{}", text);
    }
}

#[test]
fn writers_produce_readable_examples() {
    let mut labels = BTreeMap::new();
    labels.insert("team".to_owned(), "payments".to_owned());
    let c = Cluster {
        name: "prod-eu-1".into(),
        labels,
        shard: Some(2),
        ..Cluster::new("6f1c", "https://prod-eu-1.example.com")
    };
    let f = FleetFile {
        fleet: Fleet {
            clusters: vec![c.clone()],
            apps: vec![placeholder(&c, 1), placeholder(&c, 2)],
        },
        specs: Default::default(),
        shards: vec![],
        credentials: Default::default(),
        projects: Default::default(),
        repositories: Default::default(),
        format: Default::default(),
    };
    let yaml = to_fleet_yaml(&f);
    assert!(yaml.contains("apps: 2"), "{yaml}");
    let secrets = to_secret_list_yaml(&f.fleet.clusters);
    for needle in [
        "kind: List",
        "name: cluster-prod-eu-1",
        "namespace: argocd",
        "uid: 6f1c",
        "argocd.argoproj.io/secret-type: cluster",
        "server: aHR0cHM6Ly9wcm9kLWV1LTEuZXhhbXBsZS5jb20=",
    ] {
        assert!(secrets.contains(needle), "{needle} missing from\n{secrets}");
    }
}
