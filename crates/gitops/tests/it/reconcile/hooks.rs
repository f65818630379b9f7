//! Phases, waves and hooks against a fake cluster and a real Git repository: a chart-like
//! app runs its PreSync migration, its waves in order (each once the previous is
//! healthy) and its PostSync hook, and deletes hooks by their policy; a failing hook runs
//! the SyncFail hooks and applies nothing more; an owner that dies mid-sync leaves the
//! operation to the next, which never runs a hook twice.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::support::*;
use fleetshard_controller::{Operated, Reconciler};
use fleetshard_manifest::AutoSync;
use fleetshard_testsupport::kube_api::Verb;
use serde_json::json;

const HOOK: &str = "argocd.argoproj.io/hook";
const POLICY: &str = "argocd.argoproj.io/hook-delete-policy";
const WAVE: &str = "argocd.argoproj.io/sync-wave";

const AUTO: Option<AutoSync> = Some(AutoSync {
    prune: true,
    self_heal: false,
    allow_empty: false,
});

/// A chart-like app: a PreSync migration Job (deleted once it succeeded), a ConfigMap in
/// wave 0, a Deployment in wave 1, a Service in wave 2, and a PostSync smoke-test Job with
/// only `generateName`.
fn chart() -> Vec<(&'static str, String)> {
    vec![
        (
            "app/migrate.yaml",
            job(
                "migrate",
                &[
                    (HOOK, "PreSync"),
                    (POLICY, "BeforeHookCreation,HookSucceeded"),
                ],
            ),
        ),
        (
            "app/cm.yaml",
            object(
                "v1",
                "ConfigMap",
                "settings",
                &[(WAVE, "0")],
                "data: {a: b}\n",
            ),
        ),
        (
            "app/web.yaml",
            object(
                "apps/v1",
                "Deployment",
                "web",
                &[(WAVE, "1")],
                &deployment_body("web"),
            ),
        ),
        (
            "app/svc.yaml",
            object(
                "v1",
                "Service",
                "web",
                &[(WAVE, "2")],
                "spec:\n  ports:\n  - port: 80\n",
            ),
        ),
        ("app/smoke.yaml", job("smoke-", &[(HOOK, "PostSync")])),
    ]
}

fn deployment_body(name: &str) -> String {
    format!(
        "spec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n    spec:\n      containers:\n      - name: main\n        image: nginx\n"
    )
}

#[tokio::test]
async fn a_chart_like_app_runs_its_hooks_and_waves_in_order() {
    let e = sync_env(&chart(), AUTO).await;
    let r = e.r.clone();
    assert!(matches!(e.step(&r).await, Operated::Wait(_)));
    assert!(
        e.live("batch/v1", "Job", "migrate").is_some(),
        "the PreSync hook runs first"
    );
    assert!(
        e.live("v1", "ConfigMap", "settings").is_none(),
        "wave 0 waits for it"
    );
    assert_eq!(e.phase(), "Running");
    // While the migration runs, nothing else is applied.
    e.step(&r).await;
    assert!(e.live("v1", "ConfigMap", "settings").is_none());
    e.finish_job("migrate", true);
    e.until(&r, "wave 1 applied", |e| {
        e.live("apps/v1", "Deployment", "web").is_some()
    })
    .await;
    assert!(e.live("v1", "ConfigMap", "settings").is_some());
    // The Deployment is not healthy (no controller): wave 2 waits.
    for _ in 0..3 {
        e.step(&r).await;
    }
    assert!(
        e.live("v1", "Service", "web").is_none(),
        "wave 2 before wave 1 was healthy"
    );
    assert!(
        e.op().unwrap().message.contains("apps/Deployment/web"),
        "{:?}",
        e.op()
    );
    e.fake.set_deployment_ready("default", "web", 1).unwrap();
    let smoke = |e: &SyncEnv| {
        e.names("batch/v1", "Job")
            .into_iter()
            .find(|n| n.starts_with("smoke-"))
    };
    e.until(&r, "the PostSync hook", |e| smoke(e).is_some())
        .await;
    assert!(e.live("v1", "Service", "web").is_some());
    let smoke_name = smoke(&e).unwrap();
    let revision = e.op().unwrap().sync_result.unwrap().revision;
    // Argo CD's name: the prefix, the revision's first 7 characters, the phase, and the
    // operation's start (NOW, in Unix seconds).
    assert_eq!(
        smoke_name,
        format!("smoke-{}-postsync-1795255200", &revision[..7])
    );
    e.finish_job(&smoke_name, true);
    e.until(&r, "the sync's end", |e| e.phase() == "Succeeded")
        .await;
    assert!(
        e.live("batch/v1", "Job", "migrate").is_none(),
        "HookSucceeded: deleted"
    );
    assert!(
        e.live("batch/v1", "Job", &smoke_name).is_some(),
        "no policy: kept until the next sync"
    );
    let result = e.op().unwrap().sync_result.unwrap();
    let hook = result
        .resources
        .iter()
        .find(|r| r.name == "migrate")
        .unwrap();
    assert_eq!(
        (
            hook.hook_type.as_str(),
            hook.hook_phase.as_str(),
            hook.sync_phase.as_str()
        ),
        ("PreSync", "Succeeded", "PreSync")
    );
    let order: Vec<&str> = result.resources.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        order[..4],
        ["migrate", "settings", "web", "web"],
        "{order:?}"
    );
    // Hooks are shown, never compared: the app is Synced.
    r.refresh(&key("a")).await.unwrap();
    let status = e.sink.get(&key("a")).unwrap().comparison.unwrap();
    assert_eq!(status.sync.status, "Synced", "{:?}", status.resources);
    assert!(
        status
            .resources
            .iter()
            .any(|r| r.hook && r.name == smoke_name)
    );
}

#[tokio::test]
async fn a_failing_presync_hook_runs_the_syncfail_hooks_and_applies_nothing_else() {
    let mut files = chart();
    files.push(("app/notify.yaml", job("notify", &[(HOOK, "SyncFail")])));
    let e = sync_env(&files, AUTO).await;
    // One attempt (an automated sync retries 5 times unless the app says otherwise).
    e.update(|t| t.spec.policy.retry = Some(fleetshard_manifest::RetryPolicy::default()));
    let r = e.r.clone();
    e.step(&r).await;
    assert!(
        e.live("batch/v1", "Job", "notify").is_none(),
        "SyncFail hooks wait for a failure"
    );
    e.finish_job("migrate", false);
    e.until(&r, "the SyncFail hook", |e| {
        e.live("batch/v1", "Job", "notify").is_some()
    })
    .await;
    e.finish_job("notify", true);
    e.until(&r, "the sync's end", |e| e.phase() != "Running")
        .await;
    let op = e.op().unwrap();
    assert_eq!(op.phase, "Failed");
    assert!(
        op.message
            .starts_with("one or more synchronization tasks completed unsuccessfully"),
        "{}",
        op.message
    );
    for (api, kind, name) in [
        ("v1", "ConfigMap", "settings"),
        ("apps/v1", "Deployment", "web"),
        ("v1", "Service", "web"),
    ] {
        assert!(
            e.live(api, kind, name).is_none(),
            "{kind} {name} applied after the failure"
        );
    }
}

/// An owner dies in the middle of a step (its lease lapses after its writes began, as a
/// replica killed or cut off): the next owner resumes from the recorded operation and
/// never creates a hook of the same attempt again.
#[tokio::test]
async fn a_new_owner_resumes_the_operation_and_never_runs_a_hook_twice() {
    // The first owner's lease allows the refresh's status write and then 2 writes (it dies
    // in the dry run) or 6 (the dry run of the five objects and the migration Job's
    // creation: it dies after creating the hook, before recording it).
    for writes_allowed in [3, 7] {
        let e = sync_env(&chart(), AUTO).await;
        let left = Arc::new(AtomicU64::new(writes_allowed));
        let l = left.clone();
        let lease = Arc::new(move || {
            l.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
                .then(|| tokio::time::Instant::now() + std::time::Duration::from_secs(3600))
        });
        let first = e.owner_with(lease);
        first.refresh(&key("a")).await.unwrap();
        let cut = first.operate(&key("a")).await;
        assert!(
            cut.is_err(),
            "{writes_allowed}: the lease lapsed mid-step: {cut:?} {:?}",
            e.op()
        );
        let second = e.owner();
        e.until(&second, "the migration", |e| {
            e.live("batch/v1", "Job", "migrate").is_some()
        })
        .await;
        e.finish_job("migrate", true);
        e.until(&second, "wave 1", |e| {
            e.live("apps/v1", "Deployment", "web").is_some()
        })
        .await;
        let created: Vec<_> = e
            .fake
            .writes()
            .into_iter()
            .filter(|w| w.path.contains("/jobs") && w.may_apply())
            .filter(|w| {
                matches!(w.verb, Verb::Create | Verb::Delete)
                    || w.object
                        .as_ref()
                        .is_some_and(|o| o.pointer("/metadata/name") == Some(&json!("migrate")))
            })
            .map(|w| (w.verb, w.path.clone()))
            .collect();
        let deletes = created.iter().filter(|(v, _)| *v == Verb::Delete).count();
        assert_eq!(
            deletes, 0,
            "{writes_allowed}: the hook was deleted and run again: {created:?}"
        );
        let uid = e.live("batch/v1", "Job", "migrate").unwrap()["metadata"]["uid"].clone();
        e.until(&second, "wave 1 seen", |e| {
            e.op().is_some_and(|o| o.message.contains("Deployment"))
        })
        .await;
        assert_eq!(
            e.live("batch/v1", "Job", "migrate").unwrap()["metadata"]["uid"],
            uid
        );
    }
}
