//! An app's life beyond one sync: cascade deletion with Argo CD's finalizers (the
//! Application on a control-plane fake with Argo CD's CRD), `status.history` and a
//! rollback to one of its entries, retries of a failing sync that stop at their limit,
//! termination, the sync timeout, and `skip-reconcile`.

use std::sync::Arc;
use std::time::Duration;

use super::support::*;
use fleetshard_controller::{Operated, Reconciler};
use fleetshard_gitops::live::ClusterConnections;
use fleetshard_gitops::reconciler::{
    DELETION_ERROR, GitOpsReconciler, ReconcilerConfig, StatusSink, StatusUpdate,
};
use fleetshard_manifest::{AppSource, AutoSync, InitiatedBy, RetryPolicy, SyncRequest};
use fleetshard_testsupport::git::config_map;
use fleetshard_testsupport::kube_api::{FakeApiServer, Verb};
use kube::api::{Api, DeleteParams, DynamicObject};
use serde_json::json;

const PRUNE: Option<AutoSync> = Some(AutoSync {
    prune: true,
    self_heal: false,
    allow_empty: false,
});

/// Deletes the Application `a` on `control` as `kubectl delete` does (its finalizers
/// keep it, with a `deletionTimestamp`).
pub(super) async fn delete_application(control: &FakeApiServer) {
    let api: Api<DynamicObject> = Api::namespaced_with(
        kube_client(control),
        "argocd",
        &fleetshard_controller::inventory::application_resource(),
    );
    api.delete("a", &DeleteParams::default()).await.unwrap();
}

/// An owner of `e`'s app whose status and finalizers go to the Application on `control`.
pub(super) fn owner_reporting_to(e: &SyncEnv, control: &FakeApiServer) -> Arc<GitOpsReconciler> {
    Arc::new(GitOpsReconciler::new(
        e.inventory.clone(),
        repos(&e.tmp.path().join("cache")),
        ClusterConnections::new(live_options()),
        Arc::new(sink_for(control)),
        always(),
        Arc::new(fleetshard_gitops::reconciler::FixedClock(NOW.into())),
        sync_config(),
    ))
}

#[tokio::test]
async fn a_foreground_cascade_deletes_the_resources_then_the_application() {
    for finalizer in [
        "resources-finalizer.argocd.argoproj.io",
        "resources-finalizer.argocd.argoproj.io/background",
    ] {
        let wave = |name: &str, w: &str| {
            object(
                "v1",
                "ConfigMap",
                name,
                &[("argocd.argoproj.io/sync-wave", w)],
                "data: {a: b}\n",
            )
        };
        let e = sync_env(
            &[
                ("app/a.yaml", wave("first", "0")),
                ("app/b.yaml", wave("second", "1")),
            ],
            PRUNE,
        )
        .await;
        assert_eq!(e.sync_to(&e.first).await, "Succeeded");
        let control = FakeApiServer::start().await.unwrap();
        control.install_argocd_crds().unwrap();
        let mut app = application("a");
        app["metadata"]["finalizers"] = json!([finalizer]);
        control.insert(app).unwrap();
        let owner = owner_reporting_to(&e, &control);
        delete_application(&control).await;
        let live_app = control
            .get("argoproj.io/v1alpha1", "Application", "argocd", "a")
            .unwrap();
        assert!(
            live_app["metadata"]["deletionTimestamp"].is_string(),
            "held by its finalizer"
        );
        // What the inventory shows of it now.
        e.update(|t| {
            t.spec.lifecycle.deleting = true;
            t.spec.lifecycle.finalizers = vec![finalizer.to_owned()];
        });
        let deletes = |e: &SyncEnv| -> Vec<String> {
            e.fake
                .writes()
                .iter()
                .filter(|w| w.verb == Verb::Delete && w.path.contains("/configmaps/"))
                .map(|w| w.path.rsplit('/').next().unwrap_or_default().to_owned())
                .collect()
        };
        let mut steps = 0;
        while control
            .get("argoproj.io/v1alpha1", "Application", "argocd", "a")
            .is_some()
        {
            steps += 1;
            assert!(steps < 200, "{finalizer}: the Application is still there");
            let _ = owner.operate(&key("a")).await;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            e.live("v1", "ConfigMap", "first").is_none()
                && e.live("v1", "ConfigMap", "second").is_none()
        );
        assert_eq!(
            deletes(&e),
            ["second", "first"],
            "{finalizer}: highest wave first"
        );
        let propagation = e
            .fake
            .writes()
            .into_iter()
            .find(|w| w.verb == Verb::Delete)
            .and_then(|w| w.object)
            .map(|b| b["propagationPolicy"].clone())
            .unwrap_or_default();
        let expected = if finalizer.ends_with("/background") {
            "Background"
        } else {
            "Foreground"
        };
        assert_eq!(propagation, expected, "{finalizer}");
    }
}

#[tokio::test]
async fn a_failed_deletion_shows_a_deletion_error_until_a_step_succeeds() {
    let cm = object("v1", "ConfigMap", "settings", &[], "data: {a: b}\n");
    let e = sync_env(&[("app/cm.yaml", cm)], PRUNE).await;
    assert_eq!(e.sync_to(&e.first).await, "Succeeded");
    let finalizer = "resources-finalizer.argocd.argoproj.io";
    let control = FakeApiServer::start().await.unwrap();
    control.install_argocd_crds().unwrap();
    let mut app = application("a");
    app["metadata"]["finalizers"] = json!([finalizer]);
    control.insert(app).unwrap();
    let owner = owner_reporting_to(&e, &control);
    owner.refresh(&key("a")).await.unwrap();
    delete_application(&control).await;
    e.update(|t| {
        t.spec.lifecycle.deleting = true;
        t.spec.lifecycle.finalizers = vec![finalizer.to_owned()];
    });
    let deletion_errors = || -> Vec<String> {
        app_status(&control, "a")["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["type"] == DELETION_ERROR)
            .map(|c| c["message"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    let refused = e
        .fake
        .fail_next(1, 500, |r| r.is(Verb::Delete, "configmaps"));
    assert!(owner.operate(&key("a")).await.is_err());
    let errors = deletion_errors();
    assert_eq!(errors.len(), 1, "{:#}", app_status(&control, "a"));
    assert!(
        errors[0].starts_with("deleting /ConfigMap/default/settings: ")
            && errors[0].contains("injected fault: 500"),
        "{errors:?}"
    );
    e.fake.remove_fault(refused);
    // The next step deletes the ConfigMap: the condition goes.
    assert!(matches!(
        owner.operate(&key("a")).await.unwrap(),
        Operated::Wait(_)
    ));
    assert!(e.live("v1", "ConfigMap", "settings").is_none());
    assert!(
        deletion_errors().is_empty(),
        "{:#}",
        app_status(&control, "a")
    );
}

#[tokio::test]
async fn history_records_each_sync_and_a_rollback_restores_an_earlier_revision() {
    let e = sync_env(&[("app/cm.yaml", config_map("settings", "one"))], None).await;
    let request = |revision: Option<String>, source: Option<AppSource>| SyncRequest {
        revision,
        source,
        prune: true,
        initiated_by: InitiatedBy {
            username: "alice".into(),
            automated: false,
        },
        ..SyncRequest::default()
    };
    let mut revisions = vec![e.first.clone()];
    e.request(request(None, None));
    assert_eq!(e.sync_to(&e.first).await, "Succeeded");
    for value in ["two", "three"] {
        e.update(|t| t.spec.sync_request = None);
        e.step(&e.r).await;
        e.git.write("app/cm.yaml", &config_map("settings", value));
        let rev = e.git.commit(value);
        e.request(request(None, None));
        assert_eq!(e.sync_to(&rev).await, "Succeeded");
        revisions.push(rev);
    }
    let history = e.sink.get(&key("a")).unwrap().history;
    let got: Vec<(i64, &str)> = history
        .iter()
        .map(|h| (h.id, h.revision.as_str()))
        .collect();
    let want: Vec<(i64, &str)> = revisions
        .iter()
        .enumerate()
        .map(|(i, r)| (i as i64, r.as_str()))
        .collect();
    assert_eq!(got, want, "ids count up from 0, one per successful sync");
    assert_eq!(history[0].initiated_by.username, "alice");
    // `argocd app rollback a 0`: a request with the entry's revision and source.
    let entry = &history[0];
    e.update(|t| t.spec.sync_request = None);
    e.step(&e.r).await;
    let source = entry.source.as_ref().and_then(AppSource::from_raw);
    e.request(request(Some(entry.revision.clone()), source));
    assert_eq!(e.sync_to(&revisions[0]).await, "Succeeded", "{:?}", e.op());
    assert_eq!(
        e.live("v1", "ConfigMap", "settings").unwrap()["data"]["value"],
        "one"
    );
    assert_eq!(e.sink.get(&key("a")).unwrap().history.len(), 4);
}

#[tokio::test]
async fn retries_back_off_and_stop_at_their_limit() {
    // A ConfigMap in a namespace that does not exist: every attempt fails its dry run.
    let bad = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: nowhere\ndata: {a: b}\n";
    let e = sync_env(&[("app/x.yaml", bad.to_owned())], PRUNE).await;
    e.update(|t| {
        t.spec.policy.retry = Some(RetryPolicy {
            limit: 2,
            duration: Some("100ms".into()),
            factor: Some(2),
            max_duration: None,
            refresh: false,
        })
    });
    let r = e.r.clone();
    e.until(&r, "the first retry", |e| {
        e.op().is_some_and(|o| o.retry_count == 1)
    })
    .await;
    assert!(
        e.op()
            .unwrap()
            .message
            .contains("Retrying attempt #1 in 100ms"),
        "{:?}",
        e.op()
    );
    e.until(&r, "the retries' end", |e| e.phase() == "Failed")
        .await;
    let op = e.op().unwrap();
    assert_eq!(op.retry_count, 2);
    assert!(op.message.ends_with("(retried 2 times)."), "{}", op.message);
    // Argo CD does not sync the same revision again after its retries.
    for _ in 0..3 {
        assert_eq!(e.step(&r).await, Operated::Idle);
    }
    assert_eq!(e.op().unwrap().retry_count, 2);
    let conditions = e
        .sink
        .get(&key("a"))
        .unwrap()
        .comparison
        .unwrap()
        .conditions;
    assert!(
        conditions
            .iter()
            .any(|c| c.kind == "SyncError" && c.message.starts_with("Failed last sync attempt to")),
        "{conditions:?}"
    );
}

#[tokio::test]
async fn a_terminated_operation_deletes_its_running_hook_and_fails() {
    let hook = job("migrate", &[("argocd.argoproj.io/hook", "PreSync")]);
    let e = sync_env(
        &[
            ("app/migrate.yaml", hook),
            ("app/cm.yaml", config_map("settings", "v")),
        ],
        PRUNE,
    )
    .await;
    let r = e.r.clone();
    e.step(&r).await;
    assert!(e.live("batch/v1", "Job", "migrate").is_some());
    // `argocd app terminate-op`: the operation's phase set to Terminating.
    let mut op = e.op().unwrap();
    op.phase = "Terminating".into();
    e.sink
        .write(&key("a"), &StatusUpdate::Operation(Box::new(op)))
        .await
        .unwrap();
    e.update(|t| t.spec.lifecycle.terminating = true);
    e.step(&r).await;
    let op = e.op().unwrap();
    assert_eq!(
        (op.phase.as_str(), op.message.as_str()),
        ("Failed", "Operation terminated")
    );
    assert!(
        e.live("batch/v1", "Job", "migrate").is_none(),
        "the running hook is deleted"
    );
    assert!(e.live("v1", "ConfigMap", "settings").is_none());
}

#[tokio::test]
async fn the_sync_timeout_terminates_a_long_operation() {
    let hook = job("migrate", &[("argocd.argoproj.io/hook", "PreSync")]);
    let e = sync_env(
        &[
            ("app/migrate.yaml", hook),
            ("app/cm.yaml", config_map("settings", "v")),
        ],
        PRUNE,
    )
    .await;
    e.no_retries();
    let config = ReconcilerConfig {
        sync_timeout: Some(Duration::from_millis(300)),
        ..sync_config()
    };
    let r = Arc::new(GitOpsReconciler::new(
        e.inventory.clone(),
        repos(&e.tmp.path().join("cache")),
        ClusterConnections::new(live_options()),
        e.sink.clone(),
        always(),
        Arc::new(fleetshard_gitops::reconciler::FixedClock(NOW.into())),
        config,
    ));
    e.until(&r, "the timeout", |e| e.phase() == "Failed").await;
    let op = e.op().unwrap();
    assert!(
        op.message.ends_with("triggered by controller sync timeout"),
        "{}",
        op.message
    );
}

#[tokio::test]
async fn skip_reconcile_leaves_the_app_alone() {
    let e = sync_env(&[("app/cm.yaml", config_map("settings", "v"))], PRUNE).await;
    e.update(|t| t.spec.lifecycle.skip_reconcile = true);
    assert_eq!(e.step(&e.r).await, Operated::Idle);
    assert!(e.sink.get(&key("a")).is_none(), "no status written");
    assert!(e.live("v1", "ConfigMap", "settings").is_none());
    e.update(|t| t.spec.lifecycle.skip_reconcile = false);
    assert_eq!(e.sync_to(&e.first).await, "Succeeded");
    let _ = e.r.refresh(&key("a")).await;
}

/// A sync asked for by hand that could not start (the lease lapsed before anything was
/// recorded) stays pending and runs once the owner may write again — it was dropped,
/// leaving the request on the Application forever.
#[tokio::test]
async fn a_request_that_could_not_start_runs_once_the_lease_is_back() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let e = sync_env(&[("app/cm.yaml", config_map("cm", "v"))], None).await;
    let valid = Arc::new(AtomicBool::new(true));
    let v = valid.clone();
    let r = e.owner_with(Arc::new(move || {
        v.load(Ordering::SeqCst)
            .then(|| tokio::time::Instant::now() + Duration::from_secs(3600))
    }));
    r.refresh(&key("a")).await.unwrap();
    e.request(SyncRequest::default());
    valid.store(false, Ordering::SeqCst);
    assert!(
        r.operate(&key("a")).await.is_err(),
        "nothing may be written"
    );
    assert_eq!(e.op(), None, "nothing recorded");
    valid.store(true, Ordering::SeqCst);
    e.until(&r, "the requested sync ran", |e| e.phase() == "Succeeded")
        .await;
    assert!(e.live("v1", "ConfigMap", "cm").is_some());
}
