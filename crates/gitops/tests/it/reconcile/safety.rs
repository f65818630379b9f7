//! The hazards of running on a real Argo CD fleet (the parity map's H1–H7): what fleetshard
//! does not implement is refused with a condition and nothing is written; what it does
//! implement behaves as Argo CD's does.

use std::sync::Arc;

use super::support::*;
use fleetshard_controller::{Operated, Reconciler};
use fleetshard_gitops::reconciler::{GitOpsReconciler, MemorySink, StaticInventory};
use fleetshard_manifest::{AutoSync, InitiatedBy, SyncRequest, SyncResource};
use fleetshard_testsupport::git::{Git, config_map};
use fleetshard_testsupport::kube_api::FakeApiServer;
use serde_json::{Value, json};

const PRUNE: AutoSync = AutoSync {
    prune: true,
    self_heal: false,
    allow_empty: false,
};

struct Env {
    _tmp: tempfile::TempDir,
    git: Git,
    fake: FakeApiServer,
    inventory: Arc<StaticInventory>,
    sink: Arc<MemorySink>,
    r: Arc<GitOpsReconciler>,
}

/// A repository with `files`, app `a` on path `app` with `auto`, and its reconciler.
async fn env(files: &[(&str, String)], auto: Option<AutoSync>) -> Env {
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    for (path, text) in files {
        git.write(path, text);
    }
    git.commit("initial");
    let fake = FakeApiServer::start().await.unwrap();
    let inventory = Arc::new(StaticInventory::default());
    inventory.insert(target(
        "a",
        &git.path(),
        "main",
        "app",
        access("c1", &fake),
        auto,
    ));
    let sink = MemorySink::new();
    let r = reconciler(
        &inventory,
        repos(&tmp.path().join("cache")),
        live_options(),
        sink.clone(),
        always(),
    );
    Env {
        _tmp: tmp,
        git,
        fake,
        inventory,
        sink,
        r,
    }
}

impl Env {
    fn cm(&self, name: &str) -> Option<Value> {
        self.fake.get("v1", "ConfigMap", "default", name)
    }

    fn sync_status(&self) -> String {
        let c = self.sink.get(&key("a")).unwrap().comparison.unwrap();
        c.sync.status
    }

    fn conditions(&self) -> Vec<(String, String)> {
        let c = self.sink.get(&key("a")).unwrap().comparison.unwrap();
        c.conditions
            .into_iter()
            .map(|c| (c.kind, c.message))
            .collect()
    }

    fn request(&self, request: SyncRequest) {
        self.inventory
            .update(&key("a"), |t| t.spec.sync_request = Some(request));
    }

    /// Syncs everything in Git (prune on), as a manual request, and clears the request.
    async fn sync_all(&self) {
        self.r.refresh(&key("a")).await.unwrap();
        self.request(SyncRequest {
            prune: true,
            ..SyncRequest::default()
        });
        assert_eq!(self.r.operate(&key("a")).await.unwrap(), Operated::Finished);
        self.inventory
            .update(&key("a"), |t| t.spec.sync_request = None);
        self.r.operate(&key("a")).await.unwrap();
        self.r.refresh(&key("a")).await.unwrap();
    }

    /// Replaces the app's files by `files` in a new commit.
    fn commit(&self, remove: &[&str], files: &[(&str, String)]) {
        for path in remove {
            self.git.run(&["rm", "-q", path]);
        }
        for (path, text) in files {
            self.git.write(path, text);
        }
        self.git.commit("change");
    }
}

/// H1: `argocd app sync --dry-run` validates only: nothing is created, changed or pruned,
/// and the operation records the request.
#[tokio::test]
async fn a_dry_run_writes_nothing() {
    let e = env(&[("app/old.yaml", config_map("old", "1"))], None).await;
    e.sync_all().await;
    assert!(e.cm("old").is_some());
    e.commit(
        &["app/old.yaml"],
        &[("app/new.yaml", config_map("new", "1"))],
    );
    e.r.refresh(&key("a")).await.unwrap();
    e.request(SyncRequest {
        prune: true,
        dry_run: true,
        initiated_by: InitiatedBy {
            username: "alice".into(),
            automated: false,
        },
        ..SyncRequest::default()
    });
    assert_eq!(e.r.operate(&key("a")).await.unwrap(), Operated::Finished);
    assert!(e.cm("new").is_none(), "a dry run created an object");
    assert!(e.cm("old").is_some(), "a dry run pruned an object");
    let op = e.sink.get(&key("a")).unwrap().operation.unwrap();
    assert_eq!(op.phase, "Succeeded", "{}", op.message);
    assert!(op.message.contains("dry run"), "{}", op.message);
    assert!(op.operation.sync.dry_run && op.operation.sync.prune);
    assert_eq!(op.operation.initiated_by.username, "alice");
    let statuses: Vec<&str> = op
        .sync_result
        .as_ref()
        .unwrap()
        .resources
        .iter()
        .map(|r| r.status.as_str())
        .collect();
    // What a real sync would do, in Argo CD's order: a wave's prunes before its applies.
    assert_eq!(statuses, ["Pruned", "Synced"]);
}

/// H2: selective sync applies only the objects named and prunes no other.
#[tokio::test]
async fn a_selective_sync_touches_only_the_objects_named() {
    let e = env(&[("app/old.yaml", config_map("old", "1"))], None).await;
    e.sync_all().await;
    e.commit(
        &["app/old.yaml"],
        &[
            ("app/one.yaml", config_map("one", "1")),
            ("app/two.yaml", config_map("two", "1")),
        ],
    );
    e.r.refresh(&key("a")).await.unwrap();
    e.request(SyncRequest {
        prune: true,
        resources: Some(vec![SyncResource {
            group: String::new(),
            kind: "ConfigMap".into(),
            namespace: String::new(),
            name: "one".into(),
        }]),
        ..SyncRequest::default()
    });
    assert_eq!(e.r.operate(&key("a")).await.unwrap(), Operated::Finished);
    assert!(e.cm("one").is_some());
    assert!(e.cm("two").is_none(), "an object not named was applied");
    assert!(e.cm("old").is_some(), "an object not named was pruned");
    let op = e.sink.get(&key("a")).unwrap().operation.unwrap();
    assert_eq!(op.operation.sync.resources.len(), 1);
}

/// H3: `Prune=false`, `Delete=false` and Helm's `keep` are never pruned; they show as
/// requiring pruning (OutOfSync), and automated sync does not loop on them.
#[tokio::test]
async fn protected_objects_are_never_pruned() {
    let annotated = |name: &str, key: &str, value: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  annotations:\n    {key}: {value:?}\ndata:\n  value: x\n"
        )
    };
    let e = env(
        &[
            ("app/keep.yaml", config_map("keep", "1")),
            (
                "app/p.yaml",
                annotated("p", "argocd.argoproj.io/sync-options", "Prune=false"),
            ),
            (
                "app/d.yaml",
                annotated(
                    "d",
                    "argocd.argoproj.io/sync-options",
                    "ServerSideApply=true,Delete=false",
                ),
            ),
            (
                "app/h.yaml",
                annotated("h", "helm.sh/resource-policy", "keep"),
            ),
            ("app/gone.yaml", config_map("gone", "1")),
        ],
        Some(PRUNE),
    )
    .await;
    e.r.refresh(&key("a")).await.unwrap();
    assert_eq!(e.r.operate(&key("a")).await.unwrap(), Operated::Finished);
    e.commit(
        &["app/p.yaml", "app/d.yaml", "app/h.yaml", "app/gone.yaml"],
        &[],
    );
    e.r.refresh(&key("a")).await.unwrap();
    assert_eq!(e.r.operate(&key("a")).await.unwrap(), Operated::Finished);
    assert!(e.cm("gone").is_none(), "an unprotected object is pruned");
    for name in ["p", "d", "h"] {
        assert!(e.cm(name).is_some(), "{name} was pruned");
    }
    let op = e.sink.get(&key("a")).unwrap().operation.unwrap();
    let skipped = op
        .sync_result
        .unwrap()
        .resources
        .iter()
        .filter(|r| r.status == "PruneSkipped" && r.message.starts_with("ignored"))
        .count();
    assert_eq!(skipped, 3);
    e.r.refresh(&key("a")).await.unwrap();
    let status = e.sink.get(&key("a")).unwrap().comparison.unwrap();
    assert_eq!(status.sync.status, "OutOfSync");
    let pruning: Vec<&str> = status
        .resources
        .iter()
        .filter(|r| r.requires_pruning)
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(pruning.len(), 3, "{pruning:?}");
    assert_eq!(
        e.r.operate(&key("a")).await.unwrap(),
        Operated::Idle,
        "nothing left to do: no sync loop"
    );
}

/// H4: automated sync never prunes everything because the source renders nothing, unless
/// `allowEmpty`; a path that renders nothing because of Jsonnet is a condition.
#[tokio::test]
async fn an_empty_render_is_not_pruned_to_unless_allowed() {
    let e = env(&[("app/cm.yaml", config_map("cm", "1"))], Some(PRUNE)).await;
    e.r.refresh(&key("a")).await.unwrap();
    assert_eq!(e.r.operate(&key("a")).await.unwrap(), Operated::Finished);
    e.commit(
        &["app/cm.yaml"],
        &[("app/README.md", "nothing here\n".into())],
    );
    e.r.refresh(&key("a")).await.unwrap();
    assert_eq!(e.r.operate(&key("a")).await.unwrap(), Operated::Idle);
    assert!(e.cm("cm").is_some(), "everything was pruned");
    let conditions = e.conditions();
    assert_eq!(conditions.len(), 1, "{conditions:?}");
    assert_eq!(conditions[0].0, "SyncError");
    assert!(conditions[0].1.contains("allowEmpty"), "{conditions:?}");

    // Jsonnet: Argo CD would render it, so it is refused, not read as empty.
    e.commit(&[], &[("app/main.jsonnet", "{}\n".into())]);
    e.inventory.update(&key("a"), |t| {
        t.spec.auto_sync = Some(AutoSync {
            allow_empty: true,
            ..PRUNE
        });
    });
    e.r.refresh(&key("a")).await.unwrap();
    assert_eq!(e.r.operate(&key("a")).await.unwrap(), Operated::Idle);
    assert!(e.cm("cm").is_some(), "a Jsonnet app was pruned to empty");
    let conditions = e.conditions();
    assert_eq!(conditions[0].0, "ComparisonError");
    assert!(
        conditions[0].1.contains("app/main.jsonnet"),
        "{conditions:?}"
    );

    // Allowed, and truly empty: pruned.
    e.commit(&["app/main.jsonnet"], &[]);
    e.r.refresh(&key("a")).await.unwrap();
    assert_eq!(e.r.operate(&key("a")).await.unwrap(), Operated::Finished);
    assert!(e.cm("cm").is_none());
}

/// H6 and every field not implemented: an Application that sets one shows a condition
/// naming it, and nothing is applied or pruned, automatically or by request.
#[tokio::test]
async fn an_app_setting_what_is_not_implemented_is_refused() {
    let e = env(&[("app/cm.yaml", config_map("cm", "1"))], Some(PRUNE)).await;
    e.r.refresh(&key("a")).await.unwrap();
    assert_eq!(e.r.operate(&key("a")).await.unwrap(), Operated::Finished);
    // The app becomes multi-source (as read from the Application by the loader).
    let app = json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": "a", "namespace": "argocd"},
        "spec": {
            "sources": [{"repoURL": e.git.path(), "path": "app"},
                        {"repoURL": e.git.path(), "path": "other"}],
            "syncPolicy": {"automated": {"prune": true}},
        },
        "operation": {"sync": {"prune": true, "manifests": ["kind: ConfigMap"]}},
    });
    let loaded = fleetshard_manifest::parse_apps_with_specs(&app.to_string(), "apps.json").unwrap();
    let spec = loaded.value.specs.values().next().unwrap().clone();
    e.inventory
        .update(&key("a"), |t| t.spec.refusals = spec.refusals.clone());
    e.commit(
        &["app/cm.yaml"],
        &[("app/other.yaml", config_map("other", "1"))],
    );
    let writes = e.fake.write_count();
    e.r.refresh(&key("a")).await.unwrap();
    assert_eq!(e.r.operate(&key("a")).await.unwrap(), Operated::Idle);
    let conditions = e.conditions();
    assert_eq!(conditions[0].0, "InvalidSpecError", "{conditions:?}");
    assert!(conditions[0].1.contains("spec.sources"), "{conditions:?}");
    assert_eq!(e.sync_status(), "Unknown");

    // A request is refused too, naming its own field; it is ended (cleared), not retried.
    e.request(SyncRequest {
        prune: true,
        ..SyncRequest::default()
    });
    assert_eq!(e.r.operate(&key("a")).await.unwrap(), Operated::Finished);
    let op = e.sink.get(&key("a")).unwrap().operation.unwrap();
    assert_eq!(op.phase, "Error");
    assert!(
        op.message.contains("operation.sync.manifests"),
        "{}",
        op.message
    );
    assert!(op.message.contains("spec.sources"), "{}", op.message);
    e.r.refresh(&key("a")).await.unwrap();
    assert!(
        e.conditions().iter().any(|(t, _)| t == "SyncError"),
        "{:?}",
        e.conditions()
    );
    assert_eq!(e.fake.write_count(), writes, "something was written");
    assert!(e.cm("cm").is_some() && e.cm("other").is_none());
}

/// H7: objects last applied with client-side `kubectl apply`, or by Argo CD's own
/// server-side apply, are taken over: a field removed from Git is removed live.
#[tokio::test]
async fn fields_of_earlier_appliers_removed_from_git_are_removed_live() {
    let e = env(
        &[
            ("app/csa.yaml", config_map("csa", "1")),
            ("app/ssa.yaml", config_map("ssa", "1")),
        ],
        Some(PRUNE),
    )
    .await;
    e.fake
        .insert(applied_by_kubectl(
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "csa", "namespace": "default", "labels": {"team": "x"}},
            "data": {"value": "1", "extra": "old"}}),
        ))
        .unwrap();
    e.fake
        .insert(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "ssa", "namespace": "default",
                "annotations": {"argocd.argoproj.io/tracking-id": "a:/ConfigMap:default/ssa"},
                "managedFields": [{"manager": "argocd-controller", "operation": "Apply",
                    "apiVersion": "v1", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:data": {"f:value": {}, "f:extra": {}},
                                 "f:metadata": {"f:annotations": {
                                     "f:argocd.argoproj.io/tracking-id": {}}}}}]},
            "data": {"value": "1", "extra": "old"}}))
        .unwrap();
    e.r.refresh(&key("a")).await.unwrap();
    assert_eq!(e.sync_status(), "OutOfSync");
    assert_eq!(e.r.operate(&key("a")).await.unwrap(), Operated::Finished);
    let csa = e.cm("csa").unwrap();
    assert_eq!(csa["data"], json!({"value": "1"}), "{csa}");
    assert_eq!(csa.pointer("/metadata/labels/team"), None, "{csa}");
    let ssa = e.cm("ssa").unwrap();
    assert_eq!(ssa["data"], json!({"value": "1"}), "{ssa}");
    assert_eq!(managers(&ssa), ["fleetshard"]);
    e.r.refresh(&key("a")).await.unwrap();
    assert_eq!(e.sync_status(), "Synced");
    assert_eq!(e.r.operate(&key("a")).await.unwrap(), Operated::Idle);
}

/// Issue 24: taking over an object first created by `kubectl apply` keeps every field the
/// manifest does not set unless the old last-applied configuration set it, as `kubectl
/// apply`'s three-way merge (and so Argo CD's client-side apply) does. Here label `keep`
/// was owned by kubectl's manager but is not in the last-applied configuration (a cluster
/// Secret's type label added later, say): it survives a manifest that sets only `team`;
/// `owner` and `extra`, which the old last-applied set and the manifest drops, go.
#[tokio::test]
async fn taking_over_from_kubectl_apply_keeps_what_its_last_applied_configuration_did_not_set() {
    let manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: csa, labels: {team: x}}\ndata: {value: '1'}\n";
    let e = env(&[("app/csa.yaml", manifest.to_owned())], Some(PRUNE)).await;
    let mut live = applied_by_kubectl(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "csa", "namespace": "default",
            "labels": {"team": "x", "owner": "ops"}},
        "data": {"value": "1", "extra": "old"}}));
    live["metadata"]["labels"]["keep"] = json!("me");
    live["metadata"]["managedFields"] = json!([{
        "manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": {
            "f:data": {".": {}, "f:value": {}, "f:extra": {}},
            "f:metadata": {
                "f:annotations": {".": {},
                    "f:kubectl.kubernetes.io/last-applied-configuration": {}},
                "f:labels": {".": {}, "f:team": {}, "f:owner": {}, "f:keep": {}}}}}]);
    e.fake.insert(live).unwrap();
    e.r.refresh(&key("a")).await.unwrap();
    assert_eq!(e.r.operate(&key("a")).await.unwrap(), Operated::Finished);
    let csa = e.cm("csa").unwrap();
    assert_eq!(
        csa["metadata"]["labels"],
        json!({"team": "x", "keep": "me"}),
        "{csa}"
    );
    assert_eq!(csa["data"], json!({"value": "1"}), "{csa}");
}

/// A dry run hands no field over: the merge patch that takes `kubectl apply`'s fields is a
/// real write, so it is made only by a sync that writes (the object keeps its
/// last-applied annotation and its fields after `argocd app sync --dry-run`).
#[tokio::test]
async fn a_dry_run_takes_over_no_fields_of_earlier_appliers() {
    let e = env(&[("app/csa.yaml", config_map("csa", "1"))], None).await;
    e.fake
        .insert(applied_by_kubectl(
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "csa", "namespace": "default"},
            "data": {"value": "1", "extra": "old"}}),
        ))
        .unwrap();
    let before = e.cm("csa").unwrap();
    e.r.refresh(&key("a")).await.unwrap();
    e.request(SyncRequest {
        dry_run: true,
        ..SyncRequest::default()
    });
    assert_eq!(e.r.operate(&key("a")).await.unwrap(), Operated::Finished);
    let op = e.sink.get(&key("a")).unwrap().operation.unwrap();
    assert_eq!(op.phase, "Succeeded", "{}", op.message);
    let after = e.cm("csa").unwrap();
    assert_eq!(
        after["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"],
        "the dry run changed the object: {after}"
    );
    assert!(
        after
            .pointer("/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration")
            .is_some(),
        "{after}"
    );
    assert_eq!(after["data"]["extra"], "old");
}

/// `applied` as client-side `kubectl apply` leaves it (its last-applied annotation), and
/// tracked as app `a`'s ConfigMap `csa`.
fn applied_by_kubectl(applied: Value) -> Value {
    let mut live = applied.clone();
    live["metadata"]["annotations"] = json!({
        "kubectl.kubernetes.io/last-applied-configuration": applied.to_string(),
        "argocd.argoproj.io/tracking-id": "a:/ConfigMap:default/csa",
    });
    live
}
