use super::{assert_warned, field_of, spec_of};
use crate::{AutoSync, LoadError, parse_apps, parse_clusters, parse_fleet_file, parse_input};
use fleetshard_core::ShardSpec;
use fleetshard_core::model::{REGION_LABEL, ZONE_LABEL};

const FLEET_YAML: &str = r#"
# A hand-written fleet.
clusters:
  - name: prod-eu-1
    id: 6f1c
    server: https://prod-eu-1.example.com/
    zone: eu-west-1a
    region: eu-west-1
    shard: 2
    weight: 40
    apps: 3
    labels: {team: payments}
    skipReconcile: true
  - name: prod-eu-2
    server: https://prod-eu-2.example.com
apps:
  - name: guestbook
    repoURL: https://github.com/argoproj/argocd-example-apps
    path: guestbook
    destination: {server: https://prod-eu-2.example.com}
    autoSync: {selfHeal: true}
shards:
  - zone: eu-west-1a
    capacity: 2
  - {}
"#;

#[test]
fn native_yaml_maps_every_field() {
    let loaded = parse_fleet_file(FLEET_YAML, "fleet.yaml").unwrap();
    assert!(loaded.warnings.is_empty());
    let f = loaded.value;
    let [a, b] = &f.fleet.clusters[..] else {
        panic!()
    };
    assert_eq!((a.id.as_str(), a.name.as_str()), ("6f1c", "prod-eu-1"));
    assert_eq!(a.server, "https://prod-eu-1.example.com");
    assert_eq!(
        a.labels.get(ZONE_LABEL).map(String::as_str),
        Some("eu-west-1a")
    );
    assert_eq!(
        a.labels.get(REGION_LABEL).map(String::as_str),
        Some("eu-west-1")
    );
    assert_eq!(a.labels.get("team").map(String::as_str), Some("payments"));
    assert_eq!(
        (a.shard, a.weight, a.skip_reconcile),
        (Some(2), Some(40), true)
    );
    assert_eq!(b.id, "prod-eu-2", "id defaults to the name");
    let names: Vec<_> = f.fleet.apps.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(
        names,
        ["prod-eu-1-1", "prod-eu-1-2", "prod-eu-1-3", "guestbook"]
    );
    let p = &f.fleet.apps[0];
    assert_eq!(
        (p.namespace.as_str(), p.project.as_str()),
        ("argocd", "default")
    );
    assert_eq!(
        p.destination.server.as_deref(),
        Some("https://prod-eu-1.example.com")
    );
    let ps = spec_of(&f, p);
    assert_eq!(
        (
            ps.source.repo_url.as_str(),
            ps.source.target_revision.as_str()
        ),
        ("", "HEAD"),
        "a placeholder has no repository"
    );
    assert_eq!(ps.auto_sync, None);
    let g = &f.fleet.apps[3];
    let gs = spec_of(&f, g);
    assert_eq!(
        (g.namespace.as_str(), gs.source.target_revision.as_str()),
        ("argocd", "HEAD")
    );
    assert_eq!(
        (gs.source.repo_url.as_str(), gs.source.path.as_str()),
        (
            "https://github.com/argoproj/argocd-example-apps",
            "guestbook"
        )
    );
    assert_eq!(f.specs.len(), 4, "one spec per app");
    assert_eq!(
        gs.auto_sync,
        Some(AutoSync {
            prune: false,
            self_heal: true,
            allow_empty: false,
        })
    );
    assert_eq!(f.fleet.app_counts(), vec![3, 1]);
    assert_eq!(
        f.shards,
        vec![
            ShardSpec {
                zone: Some("eu-west-1a".into()),
                capacity: 2
            },
            ShardSpec {
                zone: None,
                capacity: 1
            }
        ]
    );
}

#[test]
fn native_json_is_sniffed() {
    let json = r#"  {"clusters": [{"name": "a", "server": "https://a", "apps": 2}],
                     "shards": [{"zone": "z", "capacity": 3}]}"#;
    let f = parse_input(json, "fleet.json").unwrap().value;
    assert_eq!(f.fleet.apps.len(), 2);
    assert_eq!(f.shards[0].capacity, 3);
    let err = parse_fleet_file(
        r#"{"clusters": [{"name": "a", "server": "x", "zonee": 1}]}"#,
        "f.json",
    )
    .unwrap_err();
    assert_eq!(field_of(&err), ("clusters[0]".into(), "zonee".into()));
}

#[test]
fn unknown_field_is_an_error_naming_it() {
    let err = parse_fleet_file(
        "clusters:\n  - name: a\n    server: https://a\n    weigth: 4\n",
        "f.yaml",
    )
    .unwrap_err();
    assert_eq!(field_of(&err), ("clusters[0]".into(), "weigth".into()));
    let msg = err.to_string();
    assert!(
        msg.contains("unknown field") && msg.contains("line 4"),
        "{msg}"
    );
    let err = parse_fleet_file("clusterz: []\n", "f.yaml").unwrap_err();
    assert_eq!(field_of(&err), ("fleet file".into(), "clusterz".into()));
}

#[test]
fn duplicate_key_is_an_error() {
    let err = parse_fleet_file(
        "clusters:\n  - name: a\n    name: b\n    server: https://a\n",
        "f.yaml",
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("duplicate mapping key: name at line 3"),
        "{err}"
    );
}

#[test]
fn bad_values_name_object_and_field() {
    let cases = [
        (
            "clusters:\n  - {name: a, server: https://a, weight: -1}\n",
            "clusters[0]",
            "weight",
        ),
        (
            "clusters:\n  - {name: a, server: https://a, weight: lots}\n",
            "clusters[0]",
            "weight",
        ),
        (
            "clusters:\n  - {name: a, server: https://a}\n  - {name: b, server: '//'}\n",
            "clusters[1]",
            "server",
        ),
        ("clusters:\n  - {name: a}\n", "clusters[0]", "server"),
        (
            "clusters:\n  - {name: a, server: https://a, zone: z1, labels: {topology.kubernetes.io/zone: z2}}\n",
            "clusters[0]",
            "zone",
        ),
        (
            "clusters:\n  - {name: a, server: https://a, apps: 99999999999}\n",
            "clusters[0]",
            "apps",
        ),
        (
            "shards:\n  - {zone: a, capacity: 0}\n",
            "shards[0]",
            "capacity",
        ),
        ("apps:\n  - {name: ''}\n", "apps[0]", "name"),
        (
            "apps:\n  - {name: a, destination: {sever: x}}\n",
            "apps[0]",
            "destination.sever",
        ),
    ];
    for (text, object, field) in cases {
        let err = parse_fleet_file(text, "f.yaml").unwrap_err();
        let (o, f) = match &err {
            LoadError::Field { object, field, .. } => (object.clone(), field.clone()),
            LoadError::Document { object, .. } => (object.clone(), String::new()),
            other => panic!("{text}: {other}"),
        };
        assert_eq!((o.as_str(), f.as_str()), (object, field), "{text}: {err}");
        assert!(err.to_string().starts_with("f.yaml: "), "{err}");
    }
}

#[test]
fn fleet_file_must_be_alone_and_native_only_where_accepted() {
    let err = parse_input("clusters: []\n---\nkind: Secret\n", "f").unwrap_err();
    assert!(matches!(err, LoadError::Document { .. }), "{err}");
    let err = parse_fleet_file("kind: Secret\n", "f").unwrap_err();
    assert!(matches!(err, LoadError::UnknownKind { .. }), "{err}");
}

#[test]
fn narrow_entry_points_warn_about_what_they_drop() {
    let loaded = parse_clusters(FLEET_YAML, "f").unwrap();
    assert_eq!(loaded.value.len(), 2);
    assert_warned(&loaded.warnings, &["4 applications and 2 shards"]);
    let loaded = parse_apps(FLEET_YAML, "f").unwrap();
    assert_eq!(loaded.value.len(), 4);
    assert_warned(&loaded.warnings, &["2 clusters and 2 shards"]);
}
