//! Taking a cluster over: its kinds listed in parallel, its warm-up at acquisition
//! watching only the kinds its apps use, no warm-up outliving ownership, and no app synced
//! back to a commit older than its predecessor's.

use std::sync::Arc;
use std::time::Duration;

use super::support::*;
use fleetshard_controller::{Operated, Reconciler};
use fleetshard_coord::runner::StopHook;
use fleetshard_gitops::reconciler::{GitOpsStopHook, MemorySink, StaticInventory};
use fleetshard_gitops::source::{RepoCache, RepoCacheConfig};
use fleetshard_testsupport::git::{Git, config_map};
use fleetshard_testsupport::kube_api::{FakeApiServer, Verb};
use futures::future::BoxFuture;
use serde_json::json;

const DEPLOYMENT: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        app: web\n    spec:\n      containers:\n      - name: web\n        image: nginx\n";

const SERVICE: &str =
    "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  ports:\n  - port: 80\n";

/// Cluster c1 (apps one and two: a ConfigMap, a Deployment; app four's path does not
/// exist) holding objects of kinds no app uses; cluster c2 (app three: a Service).
struct Env {
    _tmp: tempfile::TempDir,
    c1: FakeApiServer,
    c2: FakeApiServer,
    reconciler: Arc<fleetshard_gitops::reconciler::GitOpsReconciler>,
}

async fn env() -> Env {
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    git.write("one/cm.yaml", &config_map("one", "1"));
    git.write("two/deploy.yaml", DEPLOYMENT);
    git.write("three/svc.yaml", SERVICE);
    git.commit("apps");
    let (c1, c2) = (
        FakeApiServer::start().await.unwrap(),
        FakeApiServer::start().await.unwrap(),
    );
    for obj in [
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other"}, "data": {"a": "b"}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"}, "spec": {}}),
    ] {
        c1.insert(obj).unwrap();
    }
    let inventory = Arc::new(StaticInventory::default());
    let repo = git.path();
    for (name, path, cluster) in [
        ("one", "one", access("c1", &c1)),
        ("two", "two", access("c1", &c1)),
        ("three", "three", access("c2", &c2)),
        ("four", "missing", access("c1", &c1)),
    ] {
        inventory.insert(target(name, &repo, "HEAD", path, cluster, None));
    }
    let reconciler = reconciler(
        &inventory,
        repos(&tmp.path().join("cache")),
        live_options(),
        MemorySink::new(),
        always(),
    );
    Env {
        _tmp: tmp,
        c1,
        c2,
        reconciler,
    }
}

/// A warm-up watches exactly the kinds of the cluster's apps' objects, and lists them
/// before any refresh ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_warms_only_the_kinds_its_apps_use() {
    let env = env().await;
    let warm = env.reconciler.warm_cluster("c1").await.unwrap();
    let mut kinds: Vec<&str> = warm.kinds.iter().map(|(_, k)| k.as_str()).collect();
    kinds.sort();
    assert_eq!(kinds, ["ConfigMap", "Deployment"]);
    assert_eq!(warm.apps, 2, "app four renders nothing; app three is on c2");
    // Its ConfigMap ("other"): listed; nothing else of c1 (no Deployment exists yet).
    assert_eq!(env.reconciler.clusters().cached_objects(), 1);
    assert_eq!(env.reconciler.clusters().started(), ["c1"]);
    for kind in ["secrets", "services"] {
        assert_eq!(env.c1.request_count(Verb::List, kind), 0, "{kind} listed");
        assert_eq!(env.c1.request_count(Verb::Watch, kind), 0, "{kind} watched");
    }
    assert_eq!(env.c2.request_count(Verb::List, "services"), 0);
}

/// The kinds of a cluster are listed side by side: while one kind's list is held, the
/// next kind's list is already asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kinds_of_a_cluster_are_listed_in_parallel() {
    let env = env().await;
    let conn = env
        .reconciler
        .clusters()
        .start(&access("c1", &env.c1))
        .await
        .unwrap();
    let kinds = vec![
        conn.kind_info("v1", "ConfigMap").await.unwrap(),
        conn.kind_info("apps/v1", "Deployment").await.unwrap(),
    ];
    env.c1
        .partition(|r| r.verb == Some(Verb::List) && r.resource == "configmaps");
    let waiting = {
        let conn = conn.clone();
        tokio::spawn(async move { conn.watch_kinds(&kinds).await })
    };
    eventually(Duration::from_secs(5), "the Deployments listed", || async {
        (env.c1.request_count(Verb::List, "deployments") > 0).then_some(())
    })
    .await;
    assert!(!waiting.is_finished(), "the ConfigMaps' list is held");
    env.c1.heal();
    waiting.await.unwrap().unwrap();
    assert_eq!(conn.cached_objects(), 1);
}

/// Stops nothing: the controller's part of a stop.
struct NoWork;

impl StopHook for NoWork {
    fn stop(&self, _: String) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }
}

/// An acquisition already stopped starts no warm-up; a stop ends a running warm-up
/// before the cluster's connection is dropped, and none is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_warm_up_outlives_ownership() {
    let env = env().await;
    // A warm-up is held in its reachability probe.
    env.c1.partition(|_| true);
    env.reconciler.cluster_acquired("c1", &|| false);
    assert!(env.reconciler.warming().is_empty(), "stopped meanwhile");
    env.reconciler.cluster_acquired("c1", &|| true);
    assert_eq!(env.reconciler.warming(), ["c1"]);
    let hook = GitOpsStopHook {
        inner: Arc::new(NoWork),
        reconciler: env.reconciler.clone(),
    };
    hook.stop("c1".into()).await;
    assert!(env.reconciler.warming().is_empty());
    assert!(env.reconciler.clusters().started().is_empty());
    env.c1.heal();
}

/// A new owner's first comparison of an app resolves its revision from data fetched since
/// it took the cluster over. A resolution it made earlier, for an app of another cluster on
/// the same repository, may predate the commit its predecessor synced; comparing at it
/// would find the app OutOfSync and sync it back to the older commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_owner_never_syncs_an_app_back_to_a_commit_older_than_its_predecessors() {
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    git.write("a/cm.yaml", &config_map("settings", "v1"));
    git.write("b/cm.yaml", &config_map("other", "v1"));
    git.commit("v1");
    let (c1, c2) = (
        FakeApiServer::start().await.unwrap(),
        FakeApiServer::start().await.unwrap(),
    );
    let auto = Some(fleetshard_manifest::AutoSync {
        prune: false,
        self_heal: false,
        allow_empty: false,
    });
    let inventory = Arc::new(StaticInventory::default());
    let repo = git.path();
    inventory.insert(target("a", &repo, "HEAD", "a", access("c1", &c1), auto));
    inventory.insert(target("b", &repo, "HEAD", "b", access("c2", &c2), auto));
    let sink = MemorySink::new();
    // Each replica keeps resolutions for the default interval (minutes).
    let replica = |cache: &str| {
        let repos = RepoCache::new(RepoCacheConfig::new(tmp.path().join(cache)));
        reconciler(&inventory, repos, live_options(), sink.clone(), always())
    };
    let successor = replica("successor");
    successor.refresh(&key("b")).await.unwrap();
    // v2 is pushed; the owner of c1 syncs it.
    git.write("a/cm.yaml", &config_map("settings", "v2"));
    let v2 = git.commit("v2");
    let predecessor = replica("predecessor");
    predecessor.refresh(&key("a")).await.unwrap();
    assert_eq!(
        predecessor.operate(&key("a")).await.unwrap(),
        Operated::Finished
    );
    let value =
        || c1.get("v1", "ConfigMap", "default", "settings").unwrap()["data"]["value"].clone();
    assert_eq!(value(), "v2");

    // c1 moves to the successor, whose resolution of HEAD is still v1.
    successor.cluster_acquired("c1", &|| true);
    successor.refresh(&key("a")).await.unwrap();
    let sync = sink.get(&key("a")).unwrap().comparison.unwrap().sync;
    assert_eq!((sync.status.as_str(), sync.revision), ("Synced", Some(v2)));
    assert_eq!(successor.operate(&key("a")).await.unwrap(), Operated::Idle);
    assert_eq!(value(), "v2", "never synced back to v1");
}
