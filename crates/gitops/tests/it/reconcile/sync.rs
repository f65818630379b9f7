//! The reconciler against a fake API server and real local Git repositories: automated
//! sync, self-heal, prune, and the lease check before writes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::support::*;
use fleetshard_controller::{Operated, ReconcileError, Reconciler};
use fleetshard_gitops::reconciler::{MemorySink, StaticInventory};
use fleetshard_manifest::AutoSync;
use fleetshard_testsupport::git::{Git, config_map};
use fleetshard_testsupport::kube_api::FakeApiServer;
use serde_json::json;

const AUTO: Option<AutoSync> = Some(AutoSync {
    prune: false,
    self_heal: false,
    allow_empty: false,
});

struct Env {
    _tmp: tempfile::TempDir,
    git: Git,
    fake: FakeApiServer,
    inventory: Arc<StaticInventory>,
    sink: Arc<MemorySink>,
}

async fn env(files: &[(&str, String)]) -> Env {
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    for (path, text) in files {
        git.write(path, text);
    }
    git.commit("initial");
    Env {
        git,
        fake: FakeApiServer::start().await.unwrap(),
        inventory: Arc::new(StaticInventory::default()),
        sink: MemorySink::new(),
        _tmp: tmp,
    }
}

impl Env {
    fn add_app(&self, name: &str, auto: Option<AutoSync>) {
        let t = target(
            name,
            &self.git.path(),
            "main",
            "app",
            access("c1", &self.fake),
            auto,
        );
        self.inventory.insert(t);
    }

    fn reconciler(&self) -> Arc<fleetshard_gitops::reconciler::GitOpsReconciler> {
        self.reconciler_with(always())
    }

    fn reconciler_with(
        &self,
        lease: Arc<dyn fleetshard_gitops::apply::LeaseCheck>,
    ) -> Arc<fleetshard_gitops::reconciler::GitOpsReconciler> {
        reconciler(
            &self.inventory,
            repos(&self._tmp.path().join("cache")),
            live_options(),
            self.sink.clone(),
            lease,
        )
    }

    /// `data.value` of the live ConfigMap `default/settings`; `None` if it is absent.
    fn settings_value(&self) -> Option<serde_json::Value> {
        self.fake
            .get("v1", "ConfigMap", "default", "settings")
            .map(|cm| cm["data"]["value"].clone())
    }

    fn sync_status(&self, app: &str) -> (String, String) {
        let s = self.sink.get(&key(app)).unwrap().comparison.unwrap();
        (s.sync.status, s.health.status)
    }
}

#[tokio::test]
async fn automated_sync_takes_an_app_from_out_of_sync_to_synced() {
    let e = env(&[
        ("app/cm.yaml", config_map("settings", "v1")),
        ("app/web.yaml", deployment("web", "nginx:1.27")),
    ])
    .await;
    e.add_app("a", AUTO);
    let r = e.reconciler();
    r.refresh(&key("a")).await.unwrap();
    let status = e.sink.get(&key("a")).unwrap().comparison.unwrap();
    assert_eq!(status.sync.status, "OutOfSync");
    assert_eq!(status.health.status, "Missing");
    assert_eq!(status.sync.revision.as_deref().map(str::len), Some(40));
    assert_eq!(status.resources.len(), 2);
    assert!(status.resources.iter().all(|r| r.status == "OutOfSync"));

    assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Finished);
    let cm = e
        .fake
        .get("v1", "ConfigMap", "default", "settings")
        .unwrap();
    assert_eq!(cm["data"]["value"], "v1");
    assert_eq!(managers(&cm), vec!["fleetshard".to_owned()]);
    assert_eq!(
        tracking(&cm).as_deref(),
        Some("a:/ConfigMap:default/settings")
    );
    let web = e
        .fake
        .get("apps/v1", "Deployment", "default", "web")
        .unwrap();
    assert_eq!(
        tracking(&web).as_deref(),
        Some("a:apps/Deployment:default/web")
    );
    let op = e.sink.get(&key("a")).unwrap().operation.unwrap();
    assert_eq!(op.phase, "Succeeded");
    let result = op.sync_result.unwrap();
    assert_eq!(result.resources.len(), 2);
    assert!(result.resources.iter().all(|r| r.status == "Synced"));

    // Synced at once (read-your-writes); the Deployment is not ready yet.
    r.refresh(&key("a")).await.unwrap();
    assert_eq!(e.sync_status("a"), ("Synced".into(), "Progressing".into()));
    e.fake.set_deployment_ready("default", "web", 2).unwrap();
    eventually(std::time::Duration::from_secs(10), "Healthy", || async {
        r.refresh(&key("a")).await.unwrap();
        (e.sync_status("a") == ("Synced".into(), "Healthy".into())).then_some(())
    })
    .await;
    assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Idle);

    // A new commit is synced too.
    e.git.write("app/cm.yaml", &config_map("settings", "v2"));
    let commit = e.git.commit("v2");
    r.refresh(&key("a")).await.unwrap();
    let status = e.sink.get(&key("a")).unwrap().comparison.unwrap();
    assert_eq!(status.sync.status, "OutOfSync");
    assert_eq!(status.sync.revision.as_deref(), Some(commit.as_str()));
    assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Finished);
    assert_eq!(e.settings_value(), Some(json!("v2")));
    r.refresh(&key("a")).await.unwrap();
    assert_eq!(e.sync_status("a").0, "Synced");
}

#[tokio::test]
async fn without_automated_sync_nothing_is_written() {
    let e = env(&[("app/cm.yaml", config_map("settings", "v1"))]).await;
    e.add_app("manual", None);
    let r = e.reconciler();
    r.refresh(&key("manual")).await.unwrap();
    assert_eq!(r.operate(&key("manual")).await.unwrap(), Operated::Idle);
    assert_eq!(e.sync_status("manual").0, "OutOfSync");
    assert_eq!(e.fake.write_count(), 0);
}

async fn drift(self_heal: bool) -> (Env, Arc<fleetshard_gitops::reconciler::GitOpsReconciler>) {
    let e = env(&[("app/cm.yaml", config_map("settings", "v1"))]).await;
    e.add_app(
        "a",
        Some(AutoSync {
            prune: false,
            self_heal,
            allow_empty: false,
        }),
    );
    let r = e.reconciler();
    r.refresh(&key("a")).await.unwrap();
    assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Finished);
    r.refresh(&key("a")).await.unwrap();
    assert_eq!(e.sync_status("a").0, "Synced");
    // Someone edits the live object.
    e.fake
        .modify("v1", "ConfigMap", "default", "settings", |cm| {
            cm["data"]["value"] = json!("edited by hand");
        })
        .unwrap();
    eventually(std::time::Duration::from_secs(10), "drift seen", || async {
        r.refresh(&key("a")).await.unwrap();
        (e.sync_status("a").0 == "OutOfSync").then_some(())
    })
    .await;
    (e, r)
}

#[tokio::test]
async fn self_heal_restores_a_drifted_object() {
    let (e, r) = drift(true).await;
    assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Finished);
    assert_eq!(e.settings_value(), Some(json!("v1")));
    r.refresh(&key("a")).await.unwrap();
    assert_eq!(e.sync_status("a").0, "Synced");
}

#[tokio::test]
async fn drift_is_left_without_self_heal() {
    let (e, r) = drift(false).await;
    assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Idle);
    assert_eq!(e.settings_value(), Some(json!("edited by hand")));
    r.refresh(&key("a")).await.unwrap();
    let status = e.sink.get(&key("a")).unwrap().comparison.unwrap();
    assert_eq!(status.sync.status, "OutOfSync");
    let res = &status.resources[0];
    assert_eq!(
        (res.name.as_str(), res.status.as_str()),
        ("settings", "OutOfSync")
    );
}

#[tokio::test]
async fn a_new_owner_leaves_drift_alone_without_self_heal() {
    // The replica that synced is gone (a restart, or the cluster moved): a new reconciler
    // with no memory learns the synced commit from the recorded operation.
    let (e, _old) = drift(false).await;
    let new_owner = e.reconciler();
    new_owner.refresh(&key("a")).await.unwrap();
    assert_eq!(e.sync_status("a").0, "OutOfSync");
    assert_eq!(new_owner.operate(&key("a")).await.unwrap(), Operated::Idle);
    assert_eq!(e.settings_value(), Some(json!("edited by hand")));
}

#[tokio::test]
async fn an_owner_back_after_a_move_reads_the_recorded_sync_again() {
    let e = env(&[("app/cm.yaml", config_map("settings", "v1"))]).await;
    e.add_app("a", AUTO);
    let a = e.reconciler();
    a.refresh(&key("a")).await.unwrap();
    assert_eq!(a.operate(&key("a")).await.unwrap(), Operated::Finished);
    // The app's last refresh here fails (a path not in Git), then the cluster moves away.
    e.inventory
        .update(&key("a"), |t| t.spec.source.path = "no-such-path".into());
    a.refresh(&key("a")).await.unwrap();
    assert_eq!(e.sync_status("a").0, "Unknown");
    a.stop_cluster("c1");
    // The other owner syncs a new commit; then the live object drifts.
    e.inventory
        .update(&key("a"), |t| t.spec.source.path = "app".into());
    e.git.write("app/cm.yaml", &config_map("settings", "v2"));
    e.git.commit("v2");
    let b = e.reconciler();
    b.refresh(&key("a")).await.unwrap();
    assert_eq!(b.operate(&key("a")).await.unwrap(), Operated::Finished);
    e.fake
        .modify("v1", "ConfigMap", "default", "settings", |cm| {
            cm["data"]["value"] = json!("edited by hand");
        })
        .unwrap();
    // Back on the first owner: the commit was synced (by the other owner), so without
    // selfHeal the drift is left, as the other owner would have left it.
    eventually(std::time::Duration::from_secs(10), "drift seen", || async {
        a.refresh(&key("a")).await.unwrap();
        (e.sync_status("a").0 == "OutOfSync").then_some(())
    })
    .await;
    assert_eq!(a.operate(&key("a")).await.unwrap(), Operated::Idle);
    assert_eq!(e.settings_value(), Some(json!("edited by hand")));
}

#[tokio::test]
async fn a_sync_asked_for_by_hand_runs_once_and_can_roll_back() {
    let e = env(&[("app/cm.yaml", config_map("settings", "v1"))]).await;
    let first = e.git.run(&["rev-parse", "HEAD"]);
    e.add_app("a", None);
    let r = e.reconciler();
    r.refresh(&key("a")).await.unwrap();
    assert_eq!(
        r.operate(&key("a")).await.unwrap(),
        Operated::Idle,
        "no policy"
    );
    assert_eq!(e.settings_value(), None);

    // "Sync" pressed: runs although there is no automated policy, once.
    let request = |revision: Option<&str>| {
        let revision = revision.map(str::to_owned);
        e.inventory.update(&key("a"), |t| {
            t.spec.sync_request = Some(fleetshard_manifest::SyncRequest {
                revision,
                ..Default::default()
            });
        });
    };
    request(None);
    assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Finished);
    assert_eq!(e.settings_value(), Some(json!("v1")));
    let op = e.sink.get(&key("a")).unwrap().operation.unwrap();
    assert_eq!(op.phase, "Succeeded");
    assert_eq!(op.sync_result.unwrap().revision, first);
    assert_eq!(
        r.operate(&key("a")).await.unwrap(),
        Operated::Idle,
        "ran once"
    );

    // A new commit; the request cleared, then a sync back to the first commit.
    e.git.write("app/cm.yaml", &config_map("settings", "v2"));
    e.git.commit("v2");
    e.inventory
        .update(&key("a"), |t| t.spec.sync_request = None);
    assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Idle);
    request(None);
    r.refresh(&key("a")).await.unwrap();
    assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Finished);
    assert_eq!(e.settings_value(), Some(json!("v2")));
    e.inventory
        .update(&key("a"), |t| t.spec.sync_request = None);
    r.operate(&key("a")).await.unwrap();
    request(Some(&first));
    assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Finished);
    assert_eq!(
        e.settings_value(),
        Some(json!("v1")),
        "rolled back to the requested commit"
    );
    let op = e.sink.get(&key("a")).unwrap().operation.unwrap();
    assert_eq!(op.sync_result.unwrap().revision, first);
}

async fn removed_from_git(prune: bool) -> Env {
    let e = env(&[
        ("app/keep.yaml", config_map("keep", "1")),
        ("app/gone.yaml", config_map("gone", "1")),
    ])
    .await;
    // An object of another app, and an untracked one, in the same namespace.
    e.fake
        .insert(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "other", "namespace": "default",
                "annotations": {"argocd.argoproj.io/tracking-id": "b:/ConfigMap:default/other"}}}))
        .unwrap();
    e.fake
        .insert(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "untracked", "namespace": "default"}}))
        .unwrap();
    e.add_app(
        "a",
        Some(AutoSync {
            prune,
            self_heal: false,
            allow_empty: false,
        }),
    );
    let r = e.reconciler();
    r.refresh(&key("a")).await.unwrap();
    assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Finished);
    assert!(e.fake.get("v1", "ConfigMap", "default", "gone").is_some());
    e.git.remove("app/gone.yaml");
    e.git.commit("remove gone");
    r.refresh(&key("a")).await.unwrap();
    let status = e.sink.get(&key("a")).unwrap().comparison.unwrap();
    assert_eq!(status.sync.status, "OutOfSync");
    let gone = status.resources.iter().find(|r| r.name == "gone").unwrap();
    assert!(gone.requires_pruning);
    assert_eq!(
        status.resources.len(),
        2,
        "other apps' objects are not listed"
    );
    let outcome = r.operate(&key("a")).await.unwrap();
    assert_eq!(
        outcome,
        if prune {
            Operated::Finished
        } else {
            Operated::Idle
        }
    );
    r.refresh(&key("a")).await.unwrap();
    assert!(e.fake.get("v1", "ConfigMap", "default", "other").is_some());
    assert!(
        e.fake
            .get("v1", "ConfigMap", "default", "untracked")
            .is_some()
    );
    assert!(e.fake.get("v1", "ConfigMap", "default", "keep").is_some());
    e
}

#[tokio::test]
async fn prune_deletes_an_object_removed_from_git() {
    let e = removed_from_git(true).await;
    assert!(e.fake.get("v1", "ConfigMap", "default", "gone").is_none());
    assert_eq!(e.sync_status("a").0, "Synced");
    let op = e.sink.get(&key("a")).unwrap().operation.unwrap();
    let pruned = op.sync_result.unwrap().resources;
    assert!(
        pruned
            .iter()
            .any(|r| r.name == "gone" && r.status == "Pruned")
    );
}

#[tokio::test]
async fn without_prune_an_object_removed_from_git_stays() {
    let e = removed_from_git(false).await;
    assert!(e.fake.get("v1", "ConfigMap", "default", "gone").is_some());
    assert_eq!(e.sync_status("a").0, "OutOfSync");
}

#[tokio::test]
async fn no_write_reaches_the_cluster_once_the_lease_check_says_no() {
    let files: Vec<(String, String)> = (0..4)
        .map(|i| {
            (
                format!("app/cm{i}.yaml"),
                config_map(&format!("cm{i}"), "v"),
            )
        })
        .collect();
    let files: Vec<(&str, String)> = files.iter().map(|(p, t)| (p.as_str(), t.clone())).collect();
    let e = env(&files).await;
    e.add_app("a", AUTO);
    // Valid for the refresh's status write, the dry run of the four objects (every
    // object is validated before the first write) and one apply.
    let allowed = Arc::new(AtomicU64::new(6));
    let valid = Arc::new(AtomicBool::new(true));
    let (a, v) = (allowed.clone(), valid.clone());
    let lease = Arc::new(move || {
        let valid = v.load(Ordering::SeqCst)
            && a.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
        valid.then(|| tokio::time::Instant::now() + std::time::Duration::from_secs(3600))
    });
    let r = e.reconciler_with(lease);
    r.refresh(&key("a")).await.unwrap();
    let err = r.operate(&key("a")).await.unwrap_err();
    assert!(
        matches!(err, ReconcileError::RetryLater(ref m) if m.contains("lease")),
        "{err}"
    );
    let live = e.fake.list("v1", "ConfigMap", Some("default"));
    assert_eq!(live.len(), 1, "one apply before the lapse, none after");
    assert_eq!(e.fake.write_count(), 5, "four dry runs and one apply");

    // Lapsed from the start: nothing at all.
    valid.store(false, Ordering::SeqCst);
    assert!(r.operate(&key("a")).await.is_err());
    assert!(r.refresh(&key("a")).await.is_err());
    assert_eq!(e.fake.write_count(), 5);
}

/// A write still unanswered when the lease is about to end is dropped (with its
/// connection) `WRITE_MARGIN` before the deadline instead of waiting for the call
/// timeout: no apply outlives the lease. The cut is the lease lapsing, not the resource
/// failing: the operation stays in progress (a failure would be retried as a new attempt,
/// running its hooks again), and an owner with a lease finishes it. Under paused time (the
/// fake API server and the repository are in-process), so how long the refresh took
/// cannot move the lease, and the cut is dated exactly.
#[tokio::test(start_paused = true)]
async fn a_write_still_unanswered_at_the_lease_deadline_is_cut() {
    use fleetshard_gitops::apply::WRITE_MARGIN;
    use fleetshard_testsupport::kube_api::{FaultAction, Verb};
    let e = env(&[("app/cm.yaml", config_map("cm", "v"))]).await;
    e.add_app("a", AUTO);
    // The lease ends 1.5 s from now; the call timeout (2 s) would end later.
    let until = tokio::time::Instant::now() + std::time::Duration::from_millis(1500);
    let r = e.reconciler_with(Arc::new(move || Some(until)));
    r.refresh(&key("a")).await.unwrap();
    // The cluster holds every apply until healed.
    e.fake.inject(None, FaultAction::Hang, |req| {
        req.is(Verb::Patch, "configmaps")
    });
    let cut = r.operate(&key("a")).await;
    let ended = tokio::time::Instant::now();
    e.fake.heal();
    // Cut before the deadline (not at it), by the margin.
    assert!(
        ended < until && ended <= until - WRITE_MARGIN,
        "the held apply ended {:?} before the lease's deadline (margin {WRITE_MARGIN:?})",
        until.saturating_duration_since(ended)
    );
    assert!(cut.is_err(), "the lease lapsed during the sync: {cut:?}");
    // Nothing ended: the operation is still in progress, if it was recorded at all.
    if let Some(op) = e.sink.get(&key("a")).and_then(|s| s.operation) {
        assert_eq!(op.phase, "Running", "{op:?}");
        assert!(
            op.sync_result
                .iter()
                .flat_map(|s| &s.resources)
                .all(|r| r.status != "SyncFailed"),
            "a cut write counted as the resource's failure: {op:?}"
        );
    }
    // The next owner (a live lease) finishes it.
    let next = e.reconciler();
    next.refresh(&key("a")).await.unwrap();
    for _ in 0..20 {
        let _ = next.operate(&key("a")).await;
        let phase = e
            .sink
            .get(&key("a"))
            .and_then(|s| s.operation)
            .map(|o| o.phase);
        if phase.is_some_and(|p| p != "Running") {
            break;
        }
    }
    let op = e.sink.get(&key("a")).unwrap().operation.unwrap();
    assert_eq!(
        (op.phase.as_str(), op.retry_count),
        ("Succeeded", 0),
        "{op:?}"
    );
}

/// A Secret written with `stringData` comes back from the API server as `data` (base64):
/// compared as written it would never be Synced, and self-heal would rewrite it forever
/// (about 620 writes/s were measured). The comparison normalises `stringData` as the
/// server does.
#[tokio::test]
async fn a_secret_written_with_string_data_is_synced_and_not_rewritten() {
    let secret = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\nstringData:\n  user: admin\ndata:\n  other: b3RoZXI=\n";
    let e = env(&[("app/secret.yaml", secret.to_owned())]).await;
    e.add_app(
        "a",
        Some(AutoSync {
            prune: false,
            self_heal: true,
            allow_empty: false,
        }),
    );
    let r = e.reconciler();
    r.refresh(&key("a")).await.unwrap();
    assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Finished);
    let live = e.fake.get("v1", "Secret", "default", "creds").unwrap();
    assert_eq!(live["data"]["user"], "YWRtaW4=");
    let writes = e.fake.write_count();
    for _ in 0..3 {
        r.refresh(&key("a")).await.unwrap();
        assert_eq!(e.sync_status("a").0, "Synced");
        assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Idle);
    }
    assert_eq!(e.fake.write_count(), writes, "nothing rewritten");
}

/// Drift that keeps coming back (another controller undoing the sync) is healed at once
/// the first time, then with Argo CD's back-off (2 s, ×3, …), not as fast as it is seen.
/// Under paused time (everything is in-process), so the wait left is exact however long
/// seeing the drift again took.
#[tokio::test(start_paused = true)]
async fn self_heal_backs_off_when_drift_keeps_coming_back() {
    use fleetshard_gitops::reconciler::SelfHealBackoff;
    let (e, r) = drift(true).await;
    assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Finished);
    let healed = tokio::time::Instant::now();
    assert_eq!(e.settings_value(), Some(json!("v1")));
    // Undone again at once.
    e.fake
        .modify("v1", "ConfigMap", "default", "settings", |cm| {
            cm["data"]["value"] = json!("edited again");
        })
        .unwrap();
    eventually(
        std::time::Duration::from_secs(10),
        "drift seen again",
        || async {
            r.refresh(&key("a")).await.unwrap();
            (e.sync_status("a").0 == "OutOfSync").then_some(())
        },
    )
    .await;
    let writes = e.fake.write_count();
    // The second consecutive heal waits the back-off's first step, counted from the heal.
    let backoff = SelfHealBackoff::default().delay(1);
    match r.operate(&key("a")).await.unwrap() {
        Operated::Wait(after) => assert_eq!(
            after,
            backoff - healed.elapsed(),
            "{:?} after the heal",
            healed.elapsed()
        ),
        other => panic!("healed again at once: {other:?}"),
    }
    assert_eq!(
        e.fake.write_count(),
        writes,
        "nothing written while backing off"
    );
    assert_eq!(e.settings_value(), Some(json!("edited again")));
}

/// A sink whose first write of each ended operation fails, as a write does when the API
/// server does not answer or another writer keeps getting there first.
struct LosesEachEndOnce {
    inner: Arc<MemorySink>,
    lost: std::sync::Mutex<Vec<String>>,
}

impl fleetshard_gitops::reconciler::StatusSink for LosesEachEndOnce {
    fn write<'a>(
        &'a self,
        app: &'a fleetshard_controller::AppKey,
        update: &'a fleetshard_gitops::reconciler::StatusUpdate,
    ) -> futures::future::BoxFuture<'a, Result<(), fleetshard_gitops::reconciler::SinkError>> {
        use fleetshard_gitops::reconciler::{SinkError, StatusUpdate};
        if let StatusUpdate::Operation(o) = update
            && o.phase != "Running"
        {
            let id = format!("{} {}", o.started_at, o.phase);
            let mut lost = self.lost.lock().unwrap();
            if !lost.contains(&id) {
                lost.push(id);
                return Box::pin(async move {
                    Err(SinkError::Unavailable {
                        app: app.to_string(),
                        message: "no answer".into(),
                    })
                });
            }
        }
        self.inner.write(app, update)
    }

    fn last_operation<'a>(
        &'a self,
        app: &'a fleetshard_controller::AppKey,
    ) -> futures::future::BoxFuture<
        'a,
        Result<
            Option<fleetshard_gitops::reconciler::OperationState>,
            fleetshard_gitops::reconciler::SinkError,
        >,
    > {
        self.inner.last_operation(app)
    }
}

/// An operation whose end could not be recorded is not left Running: its end is written
/// first by the app's next refresh (the demo's apps stayed Running for minutes, across
/// hand-overs: the end's write failed, a refresh then saw the app synced, and nothing ran
/// or recorded the operation again). The sync itself is not run twice.
#[tokio::test]
async fn an_operation_whose_end_was_not_recorded_does_not_stay_running() {
    let e = env(&[("app/cm.yaml", config_map("settings", "v1"))]).await;
    e.add_app("a", AUTO);
    let sink = Arc::new(LosesEachEndOnce {
        inner: e.sink.clone(),
        lost: Default::default(),
    });
    let r = reconciler(
        &e.inventory,
        repos(&e._tmp.path().join("cache")),
        live_options(),
        sink.clone(),
        always(),
    );
    r.refresh(&key("a")).await.unwrap();
    let _ = r.operate(&key("a")).await;
    assert_eq!(e.settings_value(), Some(json!("v1")), "the sync ran");
    assert_eq!(sink.lost.lock().unwrap().len(), 1, "its end was lost");
    let writes = e.fake.write_count();
    r.refresh(&key("a")).await.unwrap();
    let _ = r.operate(&key("a")).await;
    let op = e.sink.get(&key("a")).unwrap().operation.unwrap();
    assert_eq!(op.phase, "Succeeded", "{op:?}");
    assert!(op.finished_at.is_some());
    assert_eq!(e.fake.write_count(), writes, "the sync was not run again");
    assert_eq!(e.sync_status("a").0, "Synced");
}

/// argocd-cm's settings, as the inventory hands them to every app of the instance.
fn with_argocd_cm(e: &Env, app: &str, pairs: &[(&str, &str)]) {
    let cm: std::collections::BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    e.inventory
        .update(&key(app), |t| t.argocd_cm = Arc::new(cm));
}

/// An Argo CD with `installationID`: its repo-server stamps every rendered object with it
/// (here Git does, as a repo-server's render would), the sync stamps it too, the app stays
/// Synced and Healthy, and an object stamped by another installation under the app's own
/// tracking id is not the app's: neither listed nor pruned.
#[tokio::test]
async fn an_installation_id_keeps_apps_synced_and_other_installations_objects_alone() {
    let stamped = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  annotations:\n    argocd.argoproj.io/installation-id: eu-1\n    argocd.argoproj.io/tracking-id: a:/ConfigMap:default/settings\ndata:\n  value: v1\n";
    let e = env(&[("app/cm.yaml", stamped.to_owned())]).await;
    e.fake
        .insert(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "theirs", "namespace": "default", "annotations": {
                "argocd.argoproj.io/tracking-id": "a:/ConfigMap:default/theirs",
                "argocd.argoproj.io/installation-id": "us-1"}}}))
        .unwrap();
    e.add_app(
        "a",
        Some(AutoSync {
            prune: true,
            self_heal: true,
            allow_empty: false,
        }),
    );
    with_argocd_cm(&e, "a", &[("installationID", "eu-1")]);
    let r = e.reconciler();
    r.refresh(&key("a")).await.unwrap();
    let status = e.sink.get(&key("a")).unwrap().comparison.unwrap();
    assert!(status.conditions.is_empty(), "{:?}", status.conditions);
    assert_eq!(status.resources.len(), 1, "{:?}", status.resources);
    assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Finished);
    let cm = e
        .fake
        .get("v1", "ConfigMap", "default", "settings")
        .unwrap();
    assert_eq!(
        cm["metadata"]["annotations"]["argocd.argoproj.io/installation-id"],
        "eu-1"
    );
    r.refresh(&key("a")).await.unwrap();
    assert_eq!(e.sync_status("a"), ("Synced".into(), "Healthy".into()));
    assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Idle);
    assert!(e.fake.get("v1", "ConfigMap", "default", "theirs").is_some());
}

/// `application.resourceTrackingMethod: label` (the default before Argo CD 3.0): objects
/// are stamped with the instance label of argocd-cm's key, not the annotation, and a live
/// object carrying the label that Git no longer has is the app's, and pruned.
#[tokio::test]
async fn label_tracking_stamps_and_prunes_by_the_instance_label() {
    let e = env(&[("app/cm.yaml", config_map("settings", "v1"))]).await;
    e.fake
        .insert(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "old", "namespace": "default",
                "labels": {"example.com/instance": "a"}}}))
        .unwrap();
    e.add_app(
        "a",
        Some(AutoSync {
            prune: true,
            self_heal: false,
            allow_empty: false,
        }),
    );
    with_argocd_cm(
        &e,
        "a",
        &[
            ("application.resourceTrackingMethod", "label"),
            ("application.instanceLabelKey", "example.com/instance"),
        ],
    );
    let r = e.reconciler();
    r.refresh(&key("a")).await.unwrap();
    let status = e.sink.get(&key("a")).unwrap().comparison.unwrap();
    let old = status.resources.iter().find(|r| r.name == "old");
    assert!(old.is_some_and(|o| o.requires_pruning), "{status:?}");
    assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Finished);
    let cm = e
        .fake
        .get("v1", "ConfigMap", "default", "settings")
        .unwrap();
    assert_eq!(cm["metadata"]["labels"]["example.com/instance"], "a");
    assert_eq!(tracking(&cm), None, "label tracking writes no annotation");
    assert!(e.fake.get("v1", "ConfigMap", "default", "old").is_none());
    r.refresh(&key("a")).await.unwrap();
    assert_eq!(e.sync_status("a").0, "Synced");
}

/// A sync applies what its comparison rendered, at the commit the comparison resolved: a
/// commit pushed between the two is not applied by that sync (Argo CD renders the sync at
/// the comparison's revision), but by the next one, after a comparison that sees it.
#[tokio::test]
async fn a_commit_pushed_between_compare_and_sync_waits_for_the_next_comparison() {
    let e = env(&[("app/cm.yaml", config_map("settings", "v1"))]).await;
    e.add_app("a", AUTO);
    let r = e.reconciler();
    r.refresh(&key("a")).await.unwrap();
    let compared = e
        .sink
        .get(&key("a"))
        .unwrap()
        .comparison
        .unwrap()
        .sync
        .revision;
    e.git.write("app/cm.yaml", &config_map("settings", "v2"));
    let pushed = e.git.commit("v2");
    assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Finished);
    assert_eq!(e.settings_value(), Some(json!("v1")), "the compared commit");
    let op = e.sink.get(&key("a")).unwrap().operation.unwrap();
    assert_eq!(Some(op.sync_result.unwrap().revision), compared);
    r.refresh(&key("a")).await.unwrap();
    assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Finished);
    assert_eq!(e.settings_value(), Some(json!("v2")));
    let op = e.sink.get(&key("a")).unwrap().operation.unwrap();
    assert_eq!(op.sync_result.unwrap().revision, pushed);
}
