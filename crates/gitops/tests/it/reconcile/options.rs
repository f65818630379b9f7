//! Sync options against a fake cluster: `CreateNamespace` with managed metadata,
//! `PruneLast`, `Replace`, prune propagation, `ApplyOutOfSyncOnly`, `Prune=confirm`,
//! `FailOnSharedResource`, a CRD and its objects in one app; and, where fleetshard's
//! server-side apply differs from Argo CD's default client-side apply, that the user sees
//! what `kubectl apply` gives.

use super::support::*;
use fleetshard_manifest::{AutoSync, ManagedNamespaceMetadata};
use fleetshard_testsupport::git::config_map;
use fleetshard_testsupport::kube_api::Verb;
use serde_json::{Value, json};

const PRUNE: Option<AutoSync> = Some(AutoSync {
    prune: true,
    self_heal: false,
    allow_empty: false,
});

fn options(e: &SyncEnv, opts: &[&str]) {
    e.update(|t| t.spec.policy.sync_options = opts.iter().map(|o| (*o).to_owned()).collect());
}

#[tokio::test]
async fn create_namespace_creates_the_destination_with_its_managed_metadata() {
    let e = sync_env(&[("app/cm.yaml", config_map("settings", "v1"))], PRUNE).await;
    e.update(|t| {
        t.app.destination.namespace = Some("team-a".into());
        t.spec.policy.managed_namespace_metadata = Some(ManagedNamespaceMetadata {
            labels: [("team".to_owned(), "a".to_owned())].into(),
            annotations: [("owner".to_owned(), "alice".to_owned())].into(),
        });
    });
    e.no_retries();
    // Without the option: the namespace is missing, and the dry run fails the sync
    // before anything is written.
    assert_eq!(e.sync_to(&e.first).await, "Failed");
    assert!(e.fake.get("v1", "Namespace", "", "team-a").is_none());
    options(&e, &["CreateNamespace=true"]);
    // A new revision: the automated sync tries again.
    e.git.write("app/other.yaml", &config_map("other", "v1"));
    let next = e.git.commit("another");
    assert_eq!(e.sync_to(&next).await, "Succeeded", "{:?}", e.op());
    let ns = e
        .fake
        .get("v1", "Namespace", "", "team-a")
        .expect("created");
    assert_eq!(ns["metadata"]["labels"]["team"], "a");
    assert_eq!(ns["metadata"]["annotations"]["owner"], "alice");
    assert!(
        ns.pointer("/metadata/annotations/argocd.argoproj.io~1tracking-id")
            .is_none(),
        "not tracked: never compared or pruned"
    );
    assert!(
        e.fake
            .get("v1", "ConfigMap", "team-a", "settings")
            .is_some()
    );
}

#[tokio::test]
async fn prune_last_prunes_after_every_wave() {
    let e = sync_env(
        &[
            ("app/a.yaml", config_map("a", "1")),
            ("app/old.yaml", config_map("old", "1")),
        ],
        PRUNE,
    )
    .await;
    assert_eq!(e.sync_to(&e.first).await, "Succeeded");
    options(&e, &["PruneLast=true"]);
    e.git.remove("app/old.yaml");
    e.git.write("app/b.yaml", &config_map("b", "2"));
    e.fake.clear_writes();
    let next = e.git.commit("replace old with b");
    assert_eq!(e.sync_to(&next).await, "Succeeded", "{:?}", e.op());
    let writes: Vec<(Verb, String)> = e
        .fake
        .writes()
        .into_iter()
        .filter(|w| w.may_apply())
        .filter(|w| matches!(w.verb, Verb::Patch | Verb::Delete))
        .filter(|w| w.path.contains("/configmaps/"))
        .map(|w| {
            (
                w.verb,
                w.path.rsplit('/').next().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let at = |v: Verb, n: &str| {
        writes
            .iter()
            .position(|(vv, p)| *vv == v && p.starts_with(n))
    };
    let (applied, pruned) = (at(Verb::Patch, "b"), at(Verb::Delete, "old"));
    assert!(applied.is_some() && pruned.is_some(), "{writes:?}");
    assert!(
        pruned > applied,
        "PruneLast: the prune comes after the applies: {writes:?}"
    );
    // Argo CD's default propagation for prunes: foreground.
    let body = e
        .fake
        .writes()
        .into_iter()
        .find(|w| w.verb == Verb::Delete && w.path.ends_with("/old"))
        .and_then(|w| w.object)
        .unwrap_or_default();
    assert_eq!(body["propagationPolicy"], "Foreground", "{body}");
}

/// Server-side apply as `kubectl apply` does it: a field removed from Git is removed live,
/// a field another controller owns is kept; `Replace=true` replaces the object whole.
#[tokio::test]
async fn apply_keeps_other_owners_fields_and_replace_does_not() {
    let cm = |extra: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: s\n  labels:\n    app: s\n{extra}data:\n  a: \"1\"\n"
        )
    };
    let e = sync_env(&[("app/s.yaml", cm("    tier: web\n"))], PRUNE).await;
    assert_eq!(e.sync_to(&e.first).await, "Succeeded");
    // Another controller adds a label of its own.
    e.fake
        .modify("v1", "ConfigMap", "default", "s", |o| {
            o["metadata"]["labels"]["other"] = json!("x");
        })
        .unwrap();
    e.git.write("app/s.yaml", &cm(""));
    let next = e.git.commit("drop tier");
    assert_eq!(e.sync_to(&next).await, "Succeeded", "{:?}", e.op());
    let labels = e.live("v1", "ConfigMap", "s").unwrap()["metadata"]["labels"].clone();
    assert_eq!(
        labels,
        json!({"app": "s", "other": "x"}),
        "tier removed, other kept"
    );
    options(&e, &["Replace=true"]);
    e.git.write("app/s.yaml", &cm("    tier: api\n"));
    let next = e.git.commit("tier api");
    assert_eq!(e.sync_to(&next).await, "Succeeded", "{:?}", e.op());
    let labels = e.live("v1", "ConfigMap", "s").unwrap()["metadata"]["labels"].clone();
    assert_eq!(labels, json!({"app": "s", "tier": "api"}), "replaced whole");
    assert!(
        e.fake
            .writes()
            .iter()
            .any(|w| w.verb == Verb::Update && w.path.ends_with("/configmaps/s"))
    );
}

#[tokio::test]
async fn apply_out_of_sync_only_leaves_what_matches() {
    let e = sync_env(
        &[
            ("app/a.yaml", config_map("a", "1")),
            ("app/b.yaml", config_map("b", "1")),
        ],
        PRUNE,
    )
    .await;
    assert_eq!(e.sync_to(&e.first).await, "Succeeded");
    options(&e, &["ApplyOutOfSyncOnly=true"]);
    e.git.write("app/b.yaml", &config_map("b", "2"));
    e.fake.clear_writes();
    let next = e.git.commit("b changes");
    assert_eq!(e.sync_to(&next).await, "Succeeded", "{:?}", e.op());
    let patched: Vec<String> = e
        .fake
        .writes()
        .iter()
        .filter(|w| w.verb == Verb::Patch && w.may_apply() && w.path.contains("/configmaps/"))
        .map(|w| {
            w.path
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .split('?')
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert!(patched.iter().all(|p| p == "b"), "{patched:?}");
    assert!(!patched.is_empty());
}

#[tokio::test]
async fn a_prune_waits_for_its_confirmation() {
    let old = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: old\n  annotations:\n    argocd.argoproj.io/sync-options: Prune=confirm\ndata: {a: b}\n";
    let e = sync_env(
        &[
            ("app/a.yaml", config_map("a", "1")),
            ("app/old.yaml", old.to_owned()),
        ],
        PRUNE,
    )
    .await;
    assert_eq!(e.sync_to(&e.first).await, "Succeeded");
    e.git.remove("app/old.yaml");
    let next = e.git.commit("old goes");
    let r = e.r.clone();
    e.until(&r, "the confirmation wait", |e| {
        e.op()
            .is_some_and(|o| o.message.contains("pruning confirmation of /ConfigMap/old"))
    })
    .await;
    assert!(e.live("v1", "ConfigMap", "old").is_some());
    // Argo CD's UI sets the approval on the Application.
    e.update(|t| t.spec.lifecycle.deletion_approved = Some("2026-11-21T10:00:01Z".into()));
    assert_eq!(e.sync_to(&next).await, "Succeeded", "{:?}", e.op());
    assert!(e.live("v1", "ConfigMap", "old").is_none());
}

#[tokio::test]
async fn fail_on_shared_resource_fails_a_sync_of_another_apps_object() {
    let e = sync_env(&[("app/a.yaml", config_map("a", "1"))], PRUNE).await;
    // Another app's object of the same name, already live.
    e.fake
        .insert(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "default", "annotations": {
                "argocd.argoproj.io/tracking-id": "other:/ConfigMap:default/a"}},
            "data": {"a": "0"}}))
        .unwrap();
    options(&e, &["FailOnSharedResource=true"]);
    e.no_retries();
    assert_eq!(e.sync_to(&e.first).await, "Failed");
    let op = e.op().unwrap();
    assert!(
        op.message
            .starts_with("Shared resource found: ConfigMap/default a"),
        "{}",
        op.message
    );
    assert_eq!(
        e.live("v1", "ConfigMap", "a").unwrap()["data"]["a"],
        "0",
        "not applied"
    );
    let status = e.sink.get(&key("a")).unwrap().comparison.unwrap();
    assert!(
        status
            .conditions
            .iter()
            .any(|c| c.kind == "SharedResourceWarning")
    );
}

#[tokio::test]
async fn a_crd_and_its_objects_sync_together() {
    let crd = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"#;
    let widget =
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\nspec: {size: 3}\n";
    let e = sync_env(
        &[
            ("app/crd.yaml", crd.to_owned()),
            ("app/w.yaml", widget.to_owned()),
        ],
        PRUNE,
    )
    .await;
    assert_eq!(e.sync_to(&e.first).await, "Succeeded", "{:?}", e.op());
    let w: Value = e
        .fake
        .get("example.com/v1", "Widget", "default", "w")
        .expect("created");
    assert_eq!(w["spec"]["size"], 3);
    let r = e.r.clone();
    e.until(&r, "the app Synced", |e| {
        e.sink
            .get(&key("a"))
            .and_then(|s| s.comparison)
            .is_some_and(|c| c.sync.status == "Synced")
    })
    .await;
}
