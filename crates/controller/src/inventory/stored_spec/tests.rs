//! A stored spec gives back exactly the spec it was made from, shares what repeats, and
//! keeps no copy of what the typed fields say.

use std::collections::BTreeMap;

use super::*;

/// Applications as Argo CD exports them, each exercising one way `spec.source` is written.
const APPS: &str = r#"
apiVersion: v1
kind: List
items:
- apiVersion: argoproj.io/v1alpha1
  kind: Application
  metadata: {name: plain, namespace: argocd}
  spec:
    project: default
    source: {repoURL: "https://git.example/apps.git", path: apps/plain, targetRevision: HEAD}
    destination: {server: "https://one.example"}
- apiVersion: argoproj.io/v1alpha1
  kind: Application
  metadata:
    name: labelled
    namespace: argocd
    labels: {team: payments, app.kubernetes.io/part-of: shop}
  spec:
    source: {repoURL: "https://git.example/apps.git", path: apps/labelled, targetRevision: HEAD}
    destination: {server: "https://one.example"}
- apiVersion: argoproj.io/v1alpha1
  kind: Application
  metadata: {name: no-revision, namespace: argocd}
  spec:
    source: {repoURL: "https://git.example/apps.git", path: apps/no-revision}
    destination: {server: "https://one.example"}
- apiVersion: argoproj.io/v1alpha1
  kind: Application
  metadata: {name: directory, namespace: argocd}
  spec:
    source:
      repoURL: "https://git.example/apps.git"
      path: apps/directory
      targetRevision: main
      directory: {recurse: true, include: "*.yaml"}
    destination: {server: "https://one.example"}
- apiVersion: argoproj.io/v1alpha1
  kind: Application
  metadata: {name: empty-directory, namespace: argocd}
  spec:
    source: {repoURL: "https://git.example/apps.git", path: apps/e, targetRevision: HEAD, directory: {}}
    destination: {server: "https://one.example"}
- apiVersion: argoproj.io/v1alpha1
  kind: Application
  metadata: {name: extra-fields, namespace: argocd}
  spec:
    source:
      repoURL: "https://git.example/apps.git"
      path: ""
      targetRevision: v1
      chart: guestbook
      helm: {releaseName: gb, valueFiles: [values.yaml]}
    destination: {server: "https://one.example"}
    syncPolicy: {automated: {prune: true, selfHeal: true}}
  operation:
    sync: {revision: abc, prune: true}
    initiatedBy: {username: alice}
- apiVersion: argoproj.io/v1alpha1
  kind: Application
  metadata: {name: multi, namespace: argocd}
  spec:
    sources:
    - {repoURL: "https://git.example/a.git", path: a, targetRevision: HEAD}
    - {repoURL: "https://git.example/b.git", path: b, targetRevision: main}
    destination: {server: "https://one.example"}
"#;

fn parsed() -> BTreeMap<(String, String), AppSpec> {
    let loaded = fleetshard_manifest::parse_apps_with_specs(APPS, "apps.yaml").unwrap();
    assert_eq!(loaded.value.specs.len(), 7, "{:?}", loaded.warnings);
    loaded.value.specs
}

#[test]
fn every_spec_comes_back_exactly() {
    let mut strings = Interner::default();
    let mut specs: Vec<AppSpec> = parsed().into_values().collect();
    specs.push(AppSpec::default());
    specs.push(AppSpec {
        source: AppSource {
            repo_url: "https://git.example/code.git".into(),
            target_revision: "HEAD".into(),
            path: "built/in/code".into(),
            directory: Default::default(),
            raw: Value::Null,
        },
        ..AppSpec::default()
    });
    for spec in specs {
        let stored = StoredSpec::new(spec.clone(), &mut strings);
        assert_eq!(stored.to_spec(), spec);
    }
}

#[test]
fn what_the_typed_fields_say_is_not_kept_twice() {
    let mut strings = Interner::default();
    let specs = parsed();
    let key = |name: &str| ("argocd".to_owned(), name.to_owned());
    let plain = StoredSpec::new(specs[&key("plain")].clone(), &mut strings);
    assert_eq!(plain.raw_rest, serde_json::json!({}));
    assert_eq!(plain.stripped, 0b0111);
    assert_eq!(plain.rest, None, "nothing but the source: no rest kept");
    // Labels are kept apart: a labelled app keeps no rest either.
    let labelled = StoredSpec::new(specs[&key("labelled")].clone(), &mut strings);
    assert_eq!(labelled.rest, None, "labels are not a rest");
    assert_eq!(labelled.to_spec().labels["team"], "payments");
    // Absent from the Application: not stripped, so not added back.
    let no_revision = StoredSpec::new(specs[&key("no-revision")].clone(), &mut strings);
    assert_eq!(no_revision.stripped, 0b0011);
    // An empty `directory:` is not what the (default) typed options render: kept.
    let empty = StoredSpec::new(specs[&key("empty-directory")].clone(), &mut strings);
    assert_eq!(empty.raw_rest, serde_json::json!({"directory": {}}));
    let extra = StoredSpec::new(specs[&key("extra-fields")].clone(), &mut strings);
    assert_eq!(extra.raw_rest["chart"], "guestbook");
    assert!(extra.raw_rest.get("repoURL").is_none());
}

#[test]
fn repositories_and_revisions_are_shared() {
    let mut strings = Interner::default();
    let specs = parsed();
    let key = |name: &str| ("argocd".to_owned(), name.to_owned());
    let a = StoredSpec::new(specs[&key("plain")].clone(), &mut strings);
    let b = StoredSpec::new(specs[&key("no-revision")].clone(), &mut strings);
    assert!(Arc::ptr_eq(&a.repo_url, &b.repo_url));
    assert!(Arc::ptr_eq(&a.target_revision, &b.target_revision));
}

#[test]
fn equal_rests_are_kept_once_and_unequal_ones_apart() {
    let mut strings = Interner::default();
    let specs = parsed();
    let automated = |path: &str, prune: bool| {
        let mut spec = specs[&("argocd".to_owned(), "plain".to_owned())].clone();
        spec.source.path = path.to_owned();
        spec.auto_sync = Some(fleetshard_manifest::AutoSync {
            prune,
            ..Default::default()
        });
        spec
    };
    let a = StoredSpec::new(automated("a", true), &mut strings);
    let other = StoredSpec::new(automated("c", false), &mut strings);
    // Not the last one converted: found by its hash.
    let b = StoredSpec::new(automated("b", true), &mut strings);
    let (ra, rb, ro) = (
        a.rest.as_ref().unwrap(),
        b.rest.as_ref().unwrap(),
        other.rest.as_ref().unwrap(),
    );
    assert!(Arc::ptr_eq(ra, rb), "equal rests are one");
    assert!(!Arc::ptr_eq(ra, ro), "unequal rests are two");
    assert_eq!(b.to_spec(), automated("b", true));
    assert_eq!(other.to_spec(), automated("c", false));
    assert_eq!(strings.rests.values().map(Vec::len).sum::<usize>(), 2);
}

#[test]
fn stored_specs_are_equal_exactly_when_the_specs_are() {
    let mut strings = Interner::default();
    let specs: Vec<AppSpec> = parsed().into_values().collect();
    for a in &specs {
        for b in &specs {
            let (sa, sb) = (
                StoredSpec::new(a.clone(), &mut strings),
                StoredSpec::new(b.clone(), &mut strings),
            );
            assert_eq!(sa == sb, a == b);
        }
    }
}
