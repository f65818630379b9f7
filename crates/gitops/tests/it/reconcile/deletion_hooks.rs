//! PreDelete and PostDelete hooks, as Argo CD's controller runs them when an Application
//! is deleted: a refresh gives an app with such hooks their finalizers; the deletion runs
//! the PreDelete hooks before anything is deleted (a failed one is deleted, created again
//! and nothing else is deleted meanwhile), then the cascade, then the PostDelete hooks,
//! then deletes the hooks by their policy, and the Application goes.

use super::lifecycle::{delete_application, owner_reporting_to};
use super::support::*;
use fleetshard_controller::Reconciler;
use fleetshard_manifest::AutoSync;
use fleetshard_testsupport::kube_api::{FakeApiServer, Verb};
use serde_json::Value;

const APPS: &str = "argoproj.io/v1alpha1";
const HOOK: &str = "argocd.argoproj.io/hook";

/// The Application `a`'s finalizers on `control` (None once it is gone).
fn finalizers(control: &FakeApiServer) -> Option<Vec<String>> {
    let app = control.get(APPS, "Application", "argocd", "a")?;
    Some(
        app["metadata"]["finalizers"]
            .as_array()
            .map(|f| {
                f.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
    )
}

/// Where in the cluster's write log (its sequence number) the first non-dry-run write of
/// `verb` on a path ending in `/name` under `resource` landed.
fn first(e: &SyncEnv, verb: Verb, resource: &str, name: &str) -> Option<u64> {
    e.fake
        .writes()
        .into_iter()
        .filter(|w| w.verb == verb && w.may_apply())
        .filter(|w| w.path.contains(&format!("/{resource}")))
        .find(|w| {
            w.path.ends_with(&format!("/{name}"))
                || w.object
                    .as_ref()
                    .and_then(|o| o.pointer("/metadata/name"))
                    .is_some_and(|n| n == name)
        })
        .map(|w| w.seq)
}

#[tokio::test]
async fn predelete_hooks_run_before_the_cascade_and_postdelete_hooks_after_it() {
    let files = [
        (
            "app/cm.yaml",
            object("v1", "ConfigMap", "data", &[], "data: {a: b}\n"),
        ),
        ("app/backup.yaml", job("backup", &[(HOOK, "PreDelete")])),
        ("app/goodbye.yaml", job("goodbye", &[(HOOK, "PostDelete")])),
    ];
    let auto = Some(AutoSync {
        prune: true,
        self_heal: false,
        allow_empty: false,
    });
    let e = sync_env(&files, auto).await;
    assert_eq!(e.sync_to(&e.first).await, "Succeeded");
    assert!(e.live("v1", "ConfigMap", "data").is_some());
    for hook in ["backup", "goodbye"] {
        assert!(
            e.live("batch/v1", "Job", hook).is_none(),
            "a deletion hook ran in a sync: {hook}"
        );
    }

    // A refresh gives the Application the hooks' finalizers, as Argo CD's does.
    let control = FakeApiServer::start().await.unwrap();
    control.install_argocd_crds().unwrap();
    let mut app = application("a");
    app["metadata"]["finalizers"] = serde_json::json!(["resources-finalizer.argocd.argoproj.io"]);
    control.insert(app).unwrap();
    let owner = owner_reporting_to(&e, &control);
    e.update(|t| t.spec.lifecycle.finalizers = finalizers(&control).unwrap());
    owner.refresh(&key("a")).await.unwrap();
    let mut after_refresh = finalizers(&control).unwrap();
    after_refresh.sort();
    assert_eq!(
        after_refresh,
        [
            "post-delete-finalizer.argocd.argoproj.io",
            "post-delete-finalizer.argocd.argoproj.io/cleanup",
            "pre-delete-finalizer.argocd.argoproj.io",
            "pre-delete-finalizer.argocd.argoproj.io/cleanup",
            "resources-finalizer.argocd.argoproj.io",
        ]
    );

    delete_application(&control).await;
    let mut steps = 0;
    let mut backup_failed_once = false;
    while let Some(now) = finalizers(&control) {
        steps += 1;
        assert!(steps < 300, "the Application is still there: {now:?}");
        e.update(|t| {
            t.spec.lifecycle.deleting = true;
            t.spec.lifecycle.finalizers = now.clone();
        });
        let _ = owner.operate(&key("a")).await;
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        // The test acts as the Job controller: the backup fails once, then succeeds.
        if let Some(job) = e.live("batch/v1", "Job", "backup")
            && job["status"].is_null()
        {
            assert!(
                e.live("v1", "ConfigMap", "data").is_some(),
                "a resource was deleted while the PreDelete hook ran"
            );
            e.finish_job("backup", backup_failed_once);
            backup_failed_once = true;
        }
        if let Some(job) = e.live("batch/v1", "Job", "goodbye")
            && job["status"].is_null()
        {
            e.finish_job("goodbye", true);
        }
    }

    let created = |name| first(&e, Verb::Create, "jobs", name);
    let backup_creates = e
        .fake
        .writes()
        .iter()
        .filter(|w| w.may_apply() && w.path.contains("/jobs"))
        .filter(|w| matches!(w.verb, Verb::Create | Verb::Patch))
        .filter(|w| {
            w.object
                .as_ref()
                .and_then(|o| o.pointer("/metadata/name"))
                .is_some_and(|n| n == "backup")
        })
        .count();
    assert_eq!(
        backup_creates, 2,
        "the failed PreDelete hook is created again, once"
    );
    let cm_deleted = first(&e, Verb::Delete, "configmaps", "data").expect("the cascade");
    let (backup, goodbye) = (
        created("backup")
            .or_else(|| first(&e, Verb::Patch, "jobs", "backup"))
            .expect("the PreDelete hook ran"),
        created("goodbye")
            .or_else(|| first(&e, Verb::Patch, "jobs", "goodbye"))
            .expect("the PostDelete hook ran"),
    );
    assert!(backup < cm_deleted, "PreDelete before the cascade");
    assert!(cm_deleted < goodbye, "PostDelete after the cascade");
    assert!(
        e.live("batch/v1", "Job", "goodbye").is_none(),
        "a PostDelete hook without a policy is deleted by the cleanup"
    );
    assert!(e.live("v1", "ConfigMap", "data").is_none());
}
