//! Kubernetes Events on Applications, end to end on fake API servers: what Argo CD's
//! controller records for an automated sync (its transitions, the operation's start and
//! end, word for word, from `argocd-application-controller`), nothing for a refresh that
//! changes nothing, a flood rate limited and aggregated, an API server refusing events
//! without effect on the sync, and nothing from a replica that does not own the app.

use std::sync::Arc;
use std::time::Duration;

use super::support::*;
use fleetshard_controller::{AppKey, Operated, Reconciler};
use fleetshard_gitops::apply::LeaseCheck;
use fleetshard_gitops::events::{
    AppEvent, AppEvents, CorrelatorConfig, EventLabelKeys, EventSettings, EventType,
};
use fleetshard_gitops::live::ClusterConnections;
use fleetshard_gitops::reconciler::{FixedClock, GitOpsReconciler, StaticInventory};
use fleetshard_manifest::AutoSync;
use fleetshard_testsupport::git::Git;
use fleetshard_testsupport::kube_api::{FakeApiServer, Verb};
use serde_json::{Value, json};

/// A repository with one Deployment, a destination, a control plane with the
/// Application `web` (labelled), and its target syncing automatically.
struct Env {
    _tmp: tempfile::TempDir,
    git: Git,
    commit: String,
    cluster: FakeApiServer,
    control: FakeApiServer,
    inventory: Arc<StaticInventory>,
}

async fn env() -> Env {
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    git.write("app/web.yaml", &deployment("web", "nginx:1.27"));
    let commit = git.commit("web");
    let cluster = FakeApiServer::start().await.unwrap();
    let control = FakeApiServer::start().await.unwrap();
    control.install_argocd_crds().unwrap();
    control.create_namespace("argocd").ok();
    let mut app = application("web");
    app["metadata"]["labels"] = json!({"team": "shop", "tier": "front"});
    app["spec"]["destination"] = json!({"server": cluster.url(), "namespace": "default"});
    control.insert(app).unwrap();
    let inventory = Arc::new(StaticInventory::default());
    let auto = Some(AutoSync {
        prune: true,
        self_heal: false,
        allow_empty: false,
    });
    let mut t = target(
        "web",
        &git.path(),
        "main",
        "app",
        access("c1", &cluster),
        auto,
    );
    t.argocd_cm = Arc::new(
        [(
            "resource.includeEventLabelKeys".to_owned(),
            "team".to_owned(),
        )]
        .into(),
    );
    inventory.insert(t);
    Env {
        git,
        commit,
        _tmp: tmp,
        cluster,
        control,
        inventory,
    }
}

impl Env {
    fn events(&self, lease: Arc<dyn LeaseCheck>, settings: EventSettings) -> Arc<AppEvents> {
        AppEvents::start(
            kube_client(&self.control),
            settings,
            lease,
            Arc::new(FixedClock(NOW.into())),
        )
    }

    fn reconciler(
        &self,
        lease: Arc<dyn LeaseCheck>,
        events: Arc<AppEvents>,
    ) -> Arc<GitOpsReconciler> {
        Arc::new(
            GitOpsReconciler::new(
                self.inventory.clone(),
                repos(&self._tmp.path().join("cache")),
                ClusterConnections::new(live_options()),
                Arc::new(sink_for(&self.control)),
                lease,
                Arc::new(FixedClock(NOW.into())),
                sync_config(),
            )
            .with_events(events),
        )
    }

    /// The events on the control plane, oldest name first.
    fn listed(&self) -> Vec<Value> {
        let mut events = self.control.list("v1", "Event", Some("argocd"));
        events.sort_by_key(|e| {
            e["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        });
        events
    }

    /// Waits until `events` wrote, refused or dropped `n` events in all.
    async fn settled(&self, events: &AppEvents, n: u64) {
        eventually(Duration::from_secs(10), "the events written", || async {
            let c = events.counts();
            let done = c.created
                + c.aggregated
                + c.refused
                + c.dropped_rate_limited
                + c.dropped_not_owner
                + c.dropped_queue_full;
            (done >= n).then_some(())
        })
        .await;
    }
}

async fn sync(r: &GitOpsReconciler, app: &AppKey) {
    r.refresh(app).await.unwrap();
    loop {
        match r.operate(app).await.unwrap() {
            Operated::Finished => break,
            Operated::Wait(d) => tokio::time::sleep(d).await,
            other => panic!("the sync stopped: {other:?}"),
        }
    }
    r.refresh(app).await.unwrap();
}

fn messages(events: &[Value]) -> Vec<(String, String, String)> {
    events
        .iter()
        .map(|e| {
            let text = |f: &str| e[f].as_str().unwrap_or_default().to_owned();
            (text("type"), text("reason"), text("message"))
        })
        .collect()
}

#[tokio::test]
async fn an_automated_sync_records_argo_cds_events_and_a_quiet_refresh_none() {
    let env = env().await;
    let events = env.events(always(), EventSettings::default());
    let r = env.reconciler(always(), events.clone());
    sync(&r, &key("web")).await;
    env.settled(&events, 6).await;
    let listed = env.listed();
    let normal = |reason: &str, message: String| ("Normal".to_owned(), reason.to_owned(), message);
    let got = messages(&listed);
    let health_now = app_status(&env.control, "web")["health"]["status"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        got,
        [
            normal(
                "ResourceUpdated",
                "Updated sync status:  -> OutOfSync".into()
            ),
            normal(
                "ResourceUpdated",
                "Updated health status:  -> Missing".into()
            ),
            normal(
                "OperationStarted",
                format!("Initiated automated sync to '{}'", env.commit)
            ),
            normal(
                "OperationCompleted",
                format!("Sync operation to {} succeeded", env.commit)
            ),
            normal(
                "ResourceUpdated",
                "Updated sync status: OutOfSync -> Synced".into()
            ),
            normal(
                "ResourceUpdated",
                format!("Updated health status: Missing -> {health_now}")
            ),
        ],
        "{listed:#?}"
    );
    let app = env
        .control
        .get("argoproj.io/v1alpha1", "Application", "argocd", "web")
        .unwrap();
    for e in &listed {
        let name = e["metadata"]["name"].as_str().unwrap();
        let (prefix, nanos) = name.split_once('.').unwrap();
        assert_eq!(prefix, "web");
        assert!(i128::from_str_radix(nanos, 16).is_ok(), "{name}");
        assert_eq!(
            e["source"],
            json!({"component": "argocd-application-controller"})
        );
        assert_eq!(e["involvedObject"]["kind"], "Application");
        assert_eq!(e["involvedObject"]["apiVersion"], "argoproj.io/v1alpha1");
        assert_eq!(e["involvedObject"]["name"], "web");
        assert_eq!(e["involvedObject"]["namespace"], "argocd");
        assert_eq!(e["involvedObject"]["uid"], app["metadata"]["uid"]);
        assert!(
            e["involvedObject"]["resourceVersion"]
                .as_str()
                .is_some_and(|v| !v.is_empty())
        );
        assert_eq!(e["count"], 1);
        assert_eq!(e["firstTimestamp"], NOW);
        assert_eq!(e["lastTimestamp"], NOW);
        assert_eq!(
            e["metadata"]["annotations"],
            json!({"dest-server": env.cluster.url(), "dest-namespace": "default"})
        );
        assert_eq!(
            e["metadata"]["labels"],
            json!({"team": "shop"}),
            "included keys only"
        );
    }
    // Nothing changed: nothing new.
    r.refresh(&key("web")).await.unwrap();
    r.refresh(&key("web")).await.unwrap();
    assert_eq!(r.operate(&key("web")).await.unwrap(), Operated::Idle);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(env.listed().len(), 6);
    assert_eq!(events.counts().created, 6);

    // A new owner (a restart, a move) reads what is recorded: no transition either.
    let events2 = env.events(always(), EventSettings::default());
    let r2 = env.reconciler(always(), events2.clone());
    r2.refresh(&key("web")).await.unwrap();
    assert_eq!(r2.operate(&key("web")).await.unwrap(), Operated::Idle);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(events2.counts(), Default::default());
    assert_eq!(env.listed().len(), 6);
    drop(env.git);
}

#[tokio::test]
async fn a_flood_is_aggregated_then_rate_limited() {
    let env = env().await;
    let settings = EventSettings {
        correlator: CorrelatorConfig {
            burst: 5,
            ..CorrelatorConfig::default()
        },
        ..EventSettings::default()
    };
    let events = env.events(always(), settings);
    let flapping = AppEvent {
        kind: EventType::Normal,
        reason: "ResourceUpdated",
        message: "Updated sync status: Synced -> OutOfSync".into(),
    };
    for _ in 0..20 {
        events.emit(
            &key("web"),
            "c1",
            flapping.clone(),
            EventLabelKeys::default(),
        );
    }
    env.settled(&events, 20).await;
    let c = events.counts();
    assert_eq!(
        (c.created, c.aggregated, c.dropped_rate_limited),
        (1, 4, 15),
        "{c:?}"
    );
    let listed = env.listed();
    assert_eq!(listed.len(), 1, "one object for identical events");
    assert_eq!(listed[0]["count"], 5);
}

#[tokio::test]
async fn refused_events_do_not_stop_the_sync() {
    let env = env().await;
    env.control
        .fail_next(u64::MAX, 403, |r| r.is(Verb::Create, "events"));
    let events = env.events(always(), EventSettings::default());
    let r = env.reconciler(always(), events.clone());
    sync(&r, &key("web")).await;
    let status = app_status(&env.control, "web");
    assert_eq!(status["sync"]["status"], "Synced", "{status:#}");
    assert_eq!(status["operationState"]["phase"], "Succeeded", "{status:#}");
    env.settled(&events, 6).await;
    assert_eq!(events.counts().refused, 6, "{:?}", events.counts());
    assert!(env.listed().is_empty());
}

#[tokio::test]
async fn a_replica_that_does_not_own_the_app_records_no_event() {
    let env = env().await;
    let none: Arc<dyn LeaseCheck> = Arc::new(|| None);
    let events = env.events(none.clone(), EventSettings::default());
    let r = env.reconciler(none, events.clone());
    assert!(
        r.refresh(&key("web")).await.is_err(),
        "no status written either"
    );
    // Handed over directly, an event is still not written without the lease.
    events.emit(
        &key("web"),
        "c1",
        fleetshard_gitops::events::message::sync_status_changed("", "Synced"),
        EventLabelKeys::default(),
    );
    env.settled(&events, 1).await;
    assert_eq!(events.counts().dropped_not_owner, 1);
    assert!(env.listed().is_empty());
    // Nor an event queued before its cluster was stopped (handed to another owner):
    // the first is held reading its Application while the second waits in the queue.
    let owner = env.events(always(), EventSettings::default());
    let r = env.reconciler(always(), owner.clone());
    let held = env.control.partition(|r| r.is(Verb::Get, "applications"));
    let event = || fleetshard_gitops::events::message::sync_status_changed("", "Synced");
    owner.emit(&key("web"), "c1", event(), EventLabelKeys::default());
    tokio::time::sleep(Duration::from_millis(200)).await;
    owner.emit(&key("web"), "c1", event(), EventLabelKeys::default());
    r.stop_cluster("c1");
    env.control.remove_fault(held);
    env.control.heal();
    env.settled(&owner, 2).await;
    assert_eq!(owner.counts().dropped_not_owner, 2, "{:?}", owner.counts());
    assert!(env.listed().is_empty());
}
