use super::{assert_warned, spec_of};
use crate::{
    AutoSync, DirectoryOptions, LoadError, RefusalKind, SyncResource, parse_apps,
    parse_apps_with_specs,
};

/// `kubectl get applications -A -o yaml`, abridged.
const APP_LIST_YAML: &str = r#"
apiVersion: v1
items:
- apiVersion: argoproj.io/v1alpha1
  kind: Application
  metadata:
    name: guestbook
    namespace: argocd
    uid: 9e1f7c1a-0000-4000-8000-000000000001
  spec:
    destination:
      namespace: guestbook
      server: https://prod-eu-1.example.com/
    project: default
    source:
      path: guestbook
      repoURL: https://github.com/argoproj/argocd-example-apps
      targetRevision: v1.2.0
    syncPolicy:
      automated:
        prune: true
      syncOptions: [CreateNamespace=true]
  status:
    sync: {status: Synced}
- apiVersion: argoproj.io/v1alpha1
  kind: Application
  metadata: {name: by-name, namespace: team-a}
  spec:
    destination: {name: prod-eu-1}
    project: team-a
    source: {repoURL: https://git.example/a, path: a}
    syncPolicy: {automated: {}}
kind: List
metadata:
  resourceVersion: ""
"#;

#[test]
fn application_list_maps_every_field() {
    let loaded = parse_apps_with_specs(APP_LIST_YAML, "apps.yaml").unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let file = &loaded.value;
    let [a, b] = &file.fleet.apps[..] else {
        panic!()
    };
    assert_eq!(file.specs.len(), 2, "one spec per app");
    let (sa, sb) = (spec_of(file, a), spec_of(file, b));
    assert_eq!(
        (a.namespace.as_str(), a.name.as_str(), a.project.as_str()),
        ("argocd", "guestbook", "default")
    );
    assert_eq!(
        sa.source.repo_url,
        "https://github.com/argoproj/argocd-example-apps"
    );
    assert_eq!(sa.source.path, "guestbook");
    assert_eq!(sa.source.target_revision, "v1.2.0");
    assert_eq!(
        a.destination.server.as_deref(),
        Some("https://prod-eu-1.example.com/"),
        "kept raw, as Argo CD compares it"
    );
    assert_eq!(a.destination.namespace.as_deref(), Some("guestbook"));
    assert_eq!(
        sa.auto_sync,
        Some(AutoSync {
            prune: true,
            self_heal: false,
            allow_empty: false,
        })
    );
    assert_eq!(b.destination.name.as_deref(), Some("prod-eu-1"));
    assert_eq!(b.destination.server, None);
    assert_eq!(sb.source.target_revision, "HEAD", "defaults to HEAD");
    assert_eq!(
        sb.auto_sync,
        Some(AutoSync::default()),
        "automated: {{}} is enabled"
    );
    // Without specs, the same applications.
    assert_eq!(
        parse_apps(APP_LIST_YAML, "apps.yaml").unwrap().value,
        file.fleet.apps
    );
}

#[test]
fn json_single_and_disabled_automation() {
    let json = r#"{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
      "metadata": {"name": "x", "namespace": "argocd"},
      "spec": {"project": "p", "destination": {"server": "https://a"},
               "syncPolicy": {"automated": {"enabled": false, "selfHeal": true}}}}"#;
    let file = parse_apps_with_specs(json, "x.json").unwrap().value;
    assert_eq!(
        spec_of(&file, &file.fleet.apps[0]).auto_sync,
        None,
        "enabled: false switches automated sync off"
    );
    let json = json.replace("\"enabled\": false, ", "");
    let file = parse_apps_with_specs(&json, "x.json").unwrap().value;
    assert_eq!(
        spec_of(&file, &file.fleet.apps[0]).auto_sync,
        Some(AutoSync {
            prune: false,
            self_heal: true,
            allow_empty: false,
        })
    );
}

#[test]
fn the_refresh_annotation_asks_for_a_normal_or_a_hard_refresh() {
    let app = |annotations: &str| {
        format!(
            r#"{{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
              "metadata": {{"name": "x", "namespace": "argocd", "annotations": {annotations}}},
              "spec": {{"project": "p", "destination": {{"server": "https://a"}}}}}}"#
        )
    };
    let refresh = |annotations: &str| {
        let file = parse_apps_with_specs(&app(annotations), "x.json")
            .unwrap()
            .value;
        spec_of(&file, &file.fleet.apps[0]).refresh
    };
    use crate::RefreshRequest::{Hard, Normal};
    assert_eq!(
        refresh(r#"{"argocd.argoproj.io/refresh": "hard"}"#),
        Some(Hard)
    );
    assert_eq!(
        refresh(r#"{"argocd.argoproj.io/refresh": "normal"}"#),
        Some(Normal)
    );
    assert_eq!(refresh(r#"{"other": "hard"}"#), None);
    // The app's own links (its summary's external URLs), and nothing else.
    let file = parse_apps_with_specs(
        &app(
            r#"{"link.argocd.argoproj.io/grafana": "https://g.example/d/x",
                 "link.argocd.argoproj.io/docs": "Docs|https://docs.example", "other": "x"}"#,
        ),
        "x.json",
    )
    .unwrap()
    .value;
    assert_eq!(
        spec_of(&file, &file.fleet.apps[0]).links,
        ["Docs|https://docs.example", "https://g.example/d/x"]
    );
}

#[test]
fn multi_source_takes_the_first_and_warns() {
    let yaml = r#"
kind: ApplicationList
items:
- metadata: {name: multi, namespace: argocd}
  spec:
    sources:
    - {repoURL: https://first, path: one}
    - {repoURL: https://second, chart: x}
    destination: {server: https://a}
"#;
    let loaded = parse_apps_with_specs(yaml, "m.yaml").unwrap();
    let file = &loaded.value;
    assert_eq!(
        spec_of(file, &file.fleet.apps[0]).source.repo_url,
        "https://first"
    );
    assert_warned(
        &loaded.warnings,
        &["Application argocd/multi: spec.sources"],
    );
    let refused: Vec<&str> = spec_of(file, &file.fleet.apps[0])
        .refusals
        .iter()
        .map(|r| r.field.as_str())
        .collect();
    assert_eq!(refused, ["spec.sources"]);
}

#[test]
fn a_malformed_application_is_named_and_never_stops_the_others() {
    // Without a name, or with a destination of the wrong shape, an Application cannot be
    // placed: it is skipped with a warning naming the field; the others load.
    let text = "kind: List\nitems:\n\
        - kind: Application\n  metadata: {namespace: argocd}\n\
        - kind: Application\n  metadata: {name: a}\n  spec: {destination: 5}\n\
        - kind: Application\n  metadata: {name: ok, namespace: n}\n  spec: {destination: {server: https://x}}\n";
    let loaded = parse_apps_with_specs(text, "a.yaml").unwrap();
    let names: Vec<&str> = loaded
        .value
        .fleet
        .apps
        .iter()
        .map(|a| a.name.as_str())
        .collect();
    assert_eq!(names, ["ok"]);
    assert_warned(
        &loaded.warnings,
        &["items[0]: metadata.name", "Application a: spec.destination"],
    );
    // A malformed GitOps part (the sync policy, a source, the request) is a refusal on the
    // app itself, naming the field: the app loads and shows its own condition.
    let loaded = parse_apps_with_specs(
        "kind: Application\nmetadata: {name: a, namespace: n}\nspec: {destination: {server: https://x}, \
         syncPolicy: {automated: {prune: [1]}}, source: {repoURL: 5}}\noperation: {sync: {prune: x}}\n",
        "a.yaml",
    )
    .unwrap();
    let file = &loaded.value;
    let spec = spec_of(file, &file.fleet.apps[0]);
    let mut refused: Vec<(&str, RefusalKind)> = spec
        .refusals
        .iter()
        .map(|r| (r.field.as_str(), r.kind))
        .collect();
    refused.sort_by_key(|r| r.0);
    assert_eq!(
        refused,
        [
            ("operation.sync.prune", RefusalKind::Sync),
            ("spec.source.repoURL", RefusalKind::InvalidSpec),
            ("spec.syncPolicy.automated.prune", RefusalKind::InvalidSpec),
        ]
    );
    assert!(
        spec.refusals[0].message.starts_with("malformed ("),
        "{:?}",
        spec.refusals
    );
    assert!(matches!(
        parse_apps("kind: Deployment\n", "d").unwrap_err(),
        LoadError::UnknownKind { .. }
    ));
}

#[test]
fn large_exports_fit_the_parser_budget() {
    // serde-saphyr's default budget is 250k nodes, a million events and 1,024 documents; a large
    // fleet's export has more, and the budget grows with the input.
    let many_events = format!(
        "kind: ApplicationList\nmetadata: {{annotations: {{}}, x: [{}]}}\nitems: []\n",
        "1,".repeat(260_000)
    );
    assert!(
        parse_apps(&many_events, "big.yaml")
            .unwrap()
            .value
            .is_empty()
    );
    let many_docs: String = (0..2_000)
        .map(|i| format!("---\nkind: Application\nmetadata: {{name: a{i}}}\n"))
        .collect();
    assert_eq!(
        parse_apps(&many_docs, "multi.yaml").unwrap().value.len(),
        2_000
    );
}

#[test]
fn yaml_flow_mapping_starting_with_a_brace_is_not_mistaken_for_json() {
    let loaded = parse_apps(
        "{kind: Application, metadata: {name: a, namespace: argocd}}",
        "f.yaml",
    )
    .unwrap();
    assert_eq!(loaded.value[0].name, "a");
}

#[test]
fn a_sync_asked_for_by_hand_is_read_from_operation() {
    let text = r#"{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": "g", "namespace": "argocd"},
        "spec": {"destination": {"server": "https://a"}},
        "operation": {"initiatedBy": {"username": "admin"},
                      "sync": {"revision": "abc123", "prune": true}}}"#;
    let file = parse_apps_with_specs(text, "app.json").unwrap().value;
    let spec = spec_of(&file, &file.fleet.apps[0]);
    let request = spec.sync_request.as_ref().expect("requested");
    assert_eq!(request.revision.as_deref(), Some("abc123"));
    assert!(request.prune);
    let none = text.replace(r#""operation""#, r#""ignored""#);
    let file = parse_apps_with_specs(&none, "app.json").unwrap().value;
    assert_eq!(spec_of(&file, &file.fleet.apps[0]).sync_request, None);
}

#[test]
fn of_applications_that_share_a_key_the_first_ones_spec_counts() {
    let yaml = r#"
kind: ApplicationList
items:
- metadata: {name: dup, namespace: argocd}
  spec: {source: {repoURL: https://first, path: one}, destination: {server: https://a}}
- metadata: {name: dup, namespace: argocd}
  spec: {source: {repoURL: https://second, path: two}, destination: {server: https://b}}
"#;
    let file = parse_apps_with_specs(yaml, "d.yaml").unwrap().value;
    assert_eq!(
        file.fleet.apps.len(),
        2,
        "both apps, as the fleet reports them"
    );
    assert_eq!(file.specs.len(), 1);
    assert_eq!(
        spec_of(&file, &file.fleet.apps[1]).source.repo_url,
        "https://first",
        "the first definition, the one the loads count"
    );
}

#[test]
fn an_app_written_without_a_spec_reads_back_with_the_default_source() {
    let app = fleetshard_core::App::to_server("argocd", "bare", "https://a");
    let text = crate::to_application_list_yaml(std::slice::from_ref(&app), &Default::default());
    assert!(!text.contains("source:"), "{text}");
    let file = parse_apps_with_specs(&text, "bare.yaml").unwrap().value;
    assert_eq!(file.fleet.apps, [app]);
    let spec = spec_of(&file, &file.fleet.apps[0]);
    assert_eq!(
        (
            spec.source.repo_url.as_str(),
            spec.source.target_revision.as_str()
        ),
        ("", "HEAD")
    );
    assert_eq!((spec.auto_sync, &spec.sync_request), (None, &None));
}

#[test]
fn directory_allow_empty_and_request_fields_are_read() {
    let yaml = r#"
kind: Application
metadata: {name: a, namespace: argocd}
spec:
  source:
    repoURL: https://git.example/r
    path: apps
    directory: {recurse: true, include: "*.yaml", exclude: "{x,y}.yaml", jsonnet: {}}
  destination: {server: https://a}
  syncPolicy: {automated: {prune: true, allowEmpty: true}}
operation:
  initiatedBy: {username: alice}
  sync:
    dryRun: true
    prune: true
    resources:
    - {kind: ConfigMap, name: one}
    - {group: apps, kind: Deployment, namespace: web, name: two}
"#;
    let loaded = parse_apps_with_specs(yaml, "a.yaml").unwrap();
    let file = &loaded.value;
    let spec = spec_of(file, &file.fleet.apps[0]);
    assert_eq!(spec.refusals, []);
    assert_eq!(
        spec.source.directory,
        DirectoryOptions {
            recurse: true,
            include: "*.yaml".into(),
            exclude: "{x,y}.yaml".into(),
        }
    );
    assert!(spec.auto_sync.unwrap().allow_empty);
    let request = spec.sync_request.clone().unwrap();
    assert!(request.dry_run && request.prune);
    assert_eq!(request.initiated_by.username, "alice");
    let resources = request.resources.unwrap();
    assert_eq!(resources.len(), 2);
    assert_eq!(
        resources[1],
        SyncResource {
            group: "apps".into(),
            kind: "Deployment".into(),
            namespace: "web".into(),
            name: "two".into(),
        }
    );
}

#[test]
fn ignore_differences_and_respect_ignore_differences_are_read_not_refused() {
    let text = r#"{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
      "metadata": {"name": "x", "namespace": "argocd"},
      "spec": {"project": "p", "destination": {"server": "https://a"},
               "ignoreDifferences": [{"group": "apps", "kind": "Deployment", "jsonPointers": ["/spec/replicas"]},
                                     {"kind": "ConfigMap", "name": "c", "jqPathExpressions": [".data.x"]}],
               "syncPolicy": {"syncOptions": ["RespectIgnoreDifferences=true"]}}}"#;
    let file = parse_apps_with_specs(text, "x.json").unwrap().value;
    let spec = spec_of(&file, &file.fleet.apps[0]);
    assert!(spec.refusals.is_empty(), "{:?}", spec.refusals);
    assert!(spec.respects_ignore_differences());
    assert_eq!(spec.ignore_differences.len(), 2);
    assert_eq!(
        spec.ignore_differences[0].rules.json_pointers,
        ["/spec/replicas"]
    );
    assert_eq!(spec.ignore_differences[1].name, "c");
    let bad = text.replace(
        r#""jsonPointers": ["/spec/replicas"]"#,
        r#""jsonPointers": "/spec/replicas""#,
    );
    // Malformed: a refusal naming the field, on this app alone.
    let file = parse_apps_with_specs(&bad, "x.json").unwrap().value;
    let spec = spec_of(&file, &file.fleet.apps[0]);
    assert!(
        spec.refusals
            .iter()
            .any(|r| r.field.starts_with("spec.ignoreDifferences[0]")),
        "{:?}",
        spec.refusals
    );
}

#[test]
fn sync_policy_request_and_lifecycle_are_read() {
    let text = r#"
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: a
  namespace: argocd
  deletionTimestamp: "2026-11-21T10:00:00Z"
  finalizers: [resources-finalizer.argocd.argoproj.io/background]
  annotations:
    argocd.argoproj.io/skip-reconcile: "True"
    argocd.argoproj.io/deletion-approved: "2026-11-21T10:01:00Z"
spec:
  destination: {server: https://x, namespace: n}
  revisionHistoryLimit: 3
  syncPolicy:
    syncOptions: [CreateNamespace=true, PruneLast=true]
    retry: {limit: -1, backoff: {duration: 10s, factor: 3, maxDuration: 1m}, refresh: true}
    managedNamespaceMetadata: {labels: {team: a}, annotations: {owner: b}}
operation:
  sync:
    revision: abc
    source: {repoURL: https://git.example/r, path: p, targetRevision: abc}
    syncOptions: [Replace=true]
    syncStrategy: {hook: {force: true}}
  retry: {limit: 2}
"#;
    let loaded = parse_apps_with_specs(text, "a.yaml").unwrap();
    let file = &loaded.value;
    let spec = spec_of(file, &file.fleet.apps[0]);
    assert_eq!(spec.refusals, Vec::new());
    let p = &spec.policy;
    assert_eq!(p.sync_options, ["CreateNamespace=true", "PruneLast=true"]);
    let retry = p.retry.as_ref().unwrap();
    assert_eq!(
        (
            retry.limit,
            retry.duration.as_deref(),
            retry.factor,
            retry.max_duration.as_deref(),
            retry.refresh
        ),
        (-1, Some("10s"), Some(3), Some("1m"), true)
    );
    let ns = p.managed_namespace_metadata.as_ref().unwrap();
    assert_eq!(
        (ns.labels["team"].as_str(), ns.annotations["owner"].as_str()),
        ("a", "b")
    );
    let l = &spec.lifecycle;
    assert!(l.deleting && l.skip_reconcile);
    assert_eq!(
        l.finalizers,
        ["resources-finalizer.argocd.argoproj.io/background"]
    );
    assert_eq!(l.deletion_approved.as_deref(), Some("2026-11-21T10:01:00Z"));
    assert_eq!(l.revision_history_limit, Some(3));
    let r = spec.sync_request.as_ref().unwrap();
    assert_eq!(r.sync_options, ["Replace=true"]);
    assert!(!r.strategy.apply && r.strategy.force);
    assert_eq!(r.retry.as_ref().map(|r| r.limit), Some(2));
    let source = r.source.as_ref().unwrap();
    assert_eq!(
        (source.path.as_str(), source.target_revision.as_str()),
        ("p", "abc")
    );
    // The policy is written back as read.
    let written = crate::to_application_list_yaml(&file.fleet.apps, &file.specs);
    let again = parse_apps_with_specs(&written, "b.yaml").unwrap().value;
    let back = spec_of(&again, &again.fleet.apps[0]);
    assert_eq!(back.policy, spec.policy);
    assert_eq!(back.lifecycle.revision_history_limit, Some(3));
}
