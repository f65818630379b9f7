//! The reconciler run by the controller's real runtime (queues, shard work, worker
//! pools): several simulated clusters behind one replica, and a cluster moving from one
//! replica to another.

use std::sync::Arc;
use std::time::Duration;

use super::support::*;
use fleetshard_controller::inventory::{Inventory, InventoryContent};
use fleetshard_controller::{
    ControllerInputs, ControllerRuntime, RateLimiterConfig, RuntimeConfig, ShardWork, StopMode,
    WorkStopHook,
};
use fleetshard_coord::runner::{Ownership, OwnershipChange, Status, StopHook};
use fleetshard_core::Cluster;
use fleetshard_gitops::reconciler::{
    GitOpsReconciler, GitOpsStopHook, MemorySink, StaticInventory,
};
use fleetshard_manifest::AutoSync;
use fleetshard_testsupport::git::{Git, config_map};
use fleetshard_testsupport::kube_api::FakeApiServer;
use prometheus_client::registry::Registry;
use tokio::sync::{mpsc, watch};

const AUTO: Option<AutoSync> = Some(AutoSync {
    prune: true,
    self_heal: false,
    allow_empty: false,
});
const LIMIT: Duration = Duration::from_secs(30);

fn started(cluster: &str) -> OwnershipChange {
    OwnershipChange {
        identity: "replica".into(),
        change: Ownership::Started(cluster.into()),
        shard: Some(0),
        generation: 1,
        lapsed_at: None,
        at: tokio::time::Instant::now(),
    }
}

struct Replica {
    runtime: ControllerRuntime,
    reconciler: Arc<GitOpsReconciler>,
    sink: Arc<CountingSink>,
    memory: Arc<MemorySink>,
    feed: mpsc::UnboundedSender<OwnershipChange>,
    _audit: mpsc::UnboundedReceiver<OwnershipChange>,
    _inputs: (Inventory, watch::Sender<Status>),
}

/// One replica's controller as `fleetshard run` wires it: the work built first, the
/// reconciler checking its lease gate before every write, the runtime following the feed.
fn replica(
    inventory: &Arc<StaticInventory>,
    cache: &std::path::Path,
    clusters: &[Cluster],
    apps: &[fleetshard_core::App],
) -> Replica {
    replica_with(clusters, apps, RuntimeConfig::default(), |sink, lease| {
        reconciler(inventory, repos(cache), live_options(), sink, lease)
    })
}

/// [`replica`] with the runtime's configuration and the reconciler given (built from the
/// status sink and the lease check).
fn replica_with(
    clusters: &[Cluster],
    apps: &[fleetshard_core::App],
    config: RuntimeConfig,
    build: impl FnOnce(
        Arc<dyn fleetshard_gitops::reconciler::StatusSink>,
        Arc<dyn fleetshard_gitops::apply::LeaseCheck>,
    ) -> Arc<GitOpsReconciler>,
) -> Replica {
    let memory = MemorySink::new();
    let sink = CountingSink::new(memory.clone());
    let work = ShardWork::registered(config.limits, &mut Registry::default()).unwrap();
    let lease = {
        let work = work.clone();
        Arc::new(move || work.write_deadline())
    };
    let reconciler = build(sink.clone(), lease);
    let app_inventory = Inventory::new();
    app_inventory.publish(
        InventoryContent {
            clusters: clusters.to_vec(),
            apps: apps.to_vec(),
            ..InventoryContent::default()
        },
        Vec::new(),
        true,
    );
    let (feed, ownership) = mpsc::unbounded_channel();
    let (status, status_rx) = watch::channel(Status {
        lease_valid_until: Some(tokio::time::Instant::now() + Duration::from_secs(3600)),
        ..Status::default()
    });
    let inputs = ControllerInputs {
        ownership,
        stops: StopMode::Gated,
        status: status_rx,
        inventory: app_inventory.subscribe(),
        project_finalizer: None,
    };
    let (runtime, audit) =
        ControllerRuntime::start(config, work, reconciler.clone(), inputs).unwrap();
    Replica {
        runtime,
        reconciler,
        sink,
        memory,
        feed,
        _audit: audit,
        _inputs: (app_inventory, status),
    }
}

/// The old owner's handover of `unit`: the replica's stop hook as `run` wires it (its
/// work stops, then its warm-up and caches go).
async fn stop(r: &Replica, unit: &str) {
    let hook = GitOpsStopHook {
        inner: Arc::new(WorkStopHook(r.runtime.work().clone())),
        reconciler: r.reconciler.clone(),
    };
    hook.stop(unit.into()).await;
}

fn synced_at(memory: &MemorySink, app: &str, commit: &str) -> bool {
    memory
        .get(&key(app))
        .and_then(|s| s.comparison)
        .is_some_and(|c| c.sync.status == "Synced" && c.sync.revision.as_deref() == Some(commit))
}

/// Replicas owning `units` of cluster `c1` on `fake` (one list of units per replica, its
/// Git caches under `caches`), once every app of `targets` is synced at `commit` by one of
/// them: the caller reads what it measures, then [`shut_down`]s them.
async fn synced_by(
    fake: &FakeApiServer,
    targets: Vec<fleetshard_gitops::reconciler::AppTarget>,
    units: &[Vec<&str>],
    caches: &std::path::Path,
    commit: &str,
) -> Vec<Replica> {
    let inventory = Arc::new(StaticInventory::default());
    let clusters = vec![Cluster::new("c1", fake.url())];
    let apps: Vec<_> = targets.iter().map(|t| t.app.clone()).collect();
    for t in targets {
        inventory.insert(t);
    }
    let mut replicas = Vec::new();
    for (n, owned) in units.iter().enumerate() {
        let r = replica(
            &inventory,
            &caches.join(format!("cache-{n}")),
            &clusters,
            &apps,
        );
        for u in owned {
            r.feed.send(started(u)).unwrap();
        }
        replicas.push(r);
    }
    eventually(LIMIT, "every app synced", || async {
        apps.iter()
            .all(|a| {
                replicas
                    .iter()
                    .any(|r| synced_at(&r.memory, &a.name, commit))
            })
            .then_some(())
    })
    .await;
    replicas
}

/// Apps `app0`… `app{n-1}` in `git`, each one ConfigMap `cm{i}` whose value is `value`
/// (uncommitted).
fn write_config_map_apps(git: &Git, n: usize, value: &str) {
    for i in 0..n {
        git.write(
            &format!("app{i}/cm.yaml"),
            &config_map(&format!("cm{i}"), value),
        );
    }
}

/// App `a{i}` from `git`'s `app{i}` at `main`, auto-synced to cluster `c1` on `fake`.
fn app_target(
    i: usize,
    git: &Git,
    fake: &FakeApiServer,
) -> fleetshard_gitops::reconciler::AppTarget {
    let (name, path) = (format!("a{i}"), format!("app{i}"));
    target(&name, &git.path(), "main", &path, access("c1", fake), AUTO)
}

async fn shut_down(replicas: Vec<Replica>) {
    for r in replicas {
        drop(r.feed);
        r.runtime.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replica_syncs_apps_on_three_clusters_through_the_real_queues() {
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    for i in 0..3 {
        git.write(
            &format!("app{i}/cm.yaml"),
            &config_map(&format!("cm{i}"), "1"),
        );
    }
    let commit = git.commit("initial");
    let fakes = [
        FakeApiServer::start().await.unwrap(),
        FakeApiServer::start().await.unwrap(),
        FakeApiServer::start().await.unwrap(),
    ];
    let inventory = Arc::new(StaticInventory::default());
    let mut clusters = Vec::new();
    let mut apps = Vec::new();
    for (c, fake) in fakes.iter().enumerate() {
        let id = format!("c{c}");
        clusters.push(Cluster::new(&id, fake.url()));
        for a in 0..2 {
            let t = target(
                &format!("{id}-a{a}"),
                &git.path(),
                "main",
                &format!("app{a}"),
                access(&id, fake),
                AUTO,
            );
            apps.push(t.app.clone());
            inventory.insert(t);
        }
    }
    let r = replica(&inventory, &tmp.path().join("cache"), &clusters, &apps);
    for c in &clusters {
        r.feed.send(started(&c.id)).unwrap();
    }
    eventually(LIMIT, "all six apps synced", || async {
        apps.iter()
            .all(|a| synced_at(&r.memory, &a.name, &commit))
            .then_some(())
    })
    .await;
    for (c, fake) in fakes.iter().enumerate() {
        let names: Vec<String> = fake
            .list("v1", "ConfigMap", Some("default"))
            .iter()
            .map(|o| tracking(o).unwrap())
            .collect();
        assert_eq!(
            names,
            vec![
                format!("c{c}-a0:/ConfigMap:default/cm0"),
                format!("c{c}-a1:/ConfigMap:default/cm1"),
            ],
            "cluster c{c} holds exactly its own apps' objects"
        );
    }
    assert_eq!(r.reconciler.clusters().started(), vec!["c0", "c1", "c2"]);
    // Each acquisition was timed to its last app's comparison.
    let mut registry = Registry::default();
    registry.register("phase", "", r.reconciler.acquisition_phases());
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    for phase in ["connect", "list", "compare"] {
        assert!(
            text.contains(&format!("phase_count{{phase=\"{phase}\"}} 3")),
            "{phase}: {text}"
        );
    }
    drop(r.feed);
    r.runtime.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_cluster_stops_on_the_old_owner_before_the_new_one_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    git.write("app/cm.yaml", &config_map("cm", "1"));
    git.commit("initial");
    let fake = FakeApiServer::start().await.unwrap();
    let inventory = Arc::new(StaticInventory::default());
    let clusters = vec![Cluster::new("c1", fake.url())];
    let mut apps = Vec::new();
    for name in ["x", "y"] {
        let t = target(name, &git.path(), "main", "app", access("c1", &fake), AUTO);
        apps.push(t.app.clone());
        inventory.insert(t);
    }
    // Two apps deploying one object would fight; give each its own directory.
    git.write("app-y/cm.yaml", &config_map("cm-y", "1"));
    let first_y = git.commit("y");
    inventory.update(&key("y"), |t| t.spec.source.path = "app-y".into());

    let a = replica(&inventory, &tmp.path().join("cache-a"), &clusters, &apps);
    let b = replica(&inventory, &tmp.path().join("cache-b"), &clusters, &apps);
    a.feed.send(started("c1")).unwrap();
    eventually(LIMIT, "synced on the old owner", || async {
        (synced_at(&a.memory, "x", &first_y) && synced_at(&a.memory, "y", &first_y)).then_some(())
    })
    .await;

    // The handover: the old owner stops (its hook returns once nothing of c1 runs and its
    // caches are gone), and only then does the new owner start.
    stop(&a, "c1").await;
    assert_eq!(a.runtime.work().in_flight("c1"), 0);
    assert!(!a.runtime.work().owns("c1"));
    assert!(
        a.reconciler.clusters().started().is_empty(),
        "caches dropped"
    );
    let writes_before = a.sink.count();

    git.write("app/cm.yaml", &config_map("cm", "2"));
    let second = git.commit("v2");
    // Work queued on the old owner after its stop is not done.
    a.runtime.work().refresh_queue().add(key("x"));
    b.feed.send(started("c1")).unwrap();
    eventually(LIMIT, "synced on the new owner", || async {
        (synced_at(&b.memory, "x", &second) && synced_at(&b.memory, "y", &second)).then_some(())
    })
    .await;
    assert_eq!(
        fake.get("v1", "ConfigMap", "default", "cm").unwrap()["data"]["value"],
        "2"
    );
    assert_eq!(
        a.sink.count(),
        writes_before,
        "the old owner wrote nothing more"
    );
    assert!(a.reconciler.clusters().started().is_empty());
    assert!(!synced_at(&a.memory, "x", &second));
    drop((a.feed, b.feed));
    a.runtime.shutdown().await;
    b.runtime.shutdown().await;
}

/// An app whose destination names no cluster is processed by the owner of the inventory's
/// anchor (its cluster with the smallest id) alone: the owner of another cluster records
/// nothing for it, the anchor's owner records Argo CD's `InvalidSpecError` status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_whose_cluster_is_gone_is_recorded_by_the_anchors_owner_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let fake = FakeApiServer::start().await.unwrap();
    let inventory = Arc::new(StaticInventory::default());
    let clusters = vec![
        Cluster::new("c1", fake.url()),
        Cluster::new("c0", fake.url()),
    ];
    let lost = fleetshard_core::App::to_server("argocd", "lost", "https://gone.example");
    inventory.insert_unresolved(fleetshard_gitops::reconciler::UnresolvedTarget::new(
        lost.clone(),
        fleetshard_manifest::AppSpec::default(),
    ));
    let apps = vec![lost];
    let other = replica(&inventory, &tmp.path().join("cache-a"), &clusters, &apps);
    let anchor = replica(&inventory, &tmp.path().join("cache-b"), &clusters, &apps);
    other.feed.send(started("c1")).unwrap();
    anchor.feed.send(started("c0")).unwrap();
    let recorded = eventually(LIMIT, "recorded by the anchor's owner", || async {
        anchor.memory.get(&key("lost")).and_then(|s| s.comparison)
    })
    .await;
    assert_eq!(recorded.sync.status, "Unknown");
    assert_eq!(recorded.conditions[0].kind, "InvalidSpecError");
    // The other replica has the same inventory and owns a cluster, but not the anchor.
    assert!(matches!(
        other.runtime.work().admit(&key("lost")),
        fleetshard_controller::Admission::NotOwned
    ));
    assert_eq!(other.sink.count(), 0, "the other replica records nothing");
    drop((other.feed, anchor.feed));
    other.runtime.shutdown().await;
    anchor.runtime.shutdown().await;
}

/// A source that never renders, counting how often it is asked.
#[derive(Default)]
struct FailingRender {
    asked: std::sync::atomic::AtomicU64,
}

impl fleetshard_gitops::source::Render for FailingRender {
    fn render<'a>(
        &'a self,
        request: fleetshard_gitops::source::RenderRequest<'a>,
    ) -> futures::future::BoxFuture<
        'a,
        Result<fleetshard_gitops::source::Rendered, fleetshard_gitops::source::SourceError>,
    > {
        self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let source = request.source.clone();
        Box::pin(async move {
            Err(fleetshard_gitops::source::SourceError::RepoServer {
                repo: source.repo_url,
                revision: source.target_revision,
                addr: "repo-server:8081".into(),
                message: "rpc error: code = Unknown desc = helm template: exit status 1".into(),
            })
        })
    }
}

/// A failing render costs what it costs Argo CD's controller: one request per periodic
/// refresh (Argo CD does not re-queue a failed comparison), never a burst. Before, a failed
/// refresh was retried with the queue's per-item backoff from 1 ms (`fleetshard run`'s
/// limits: up to the resync period): 26 requests in the first minute, 34 in ten. Paused
/// time: ten minutes pass in an instant.
#[tokio::test(start_paused = true)]
async fn a_failing_render_is_asked_once_per_periodic_refresh() {
    let inventory = Arc::new(StaticInventory::default());
    // The cluster is never reached: the render fails first.
    let cluster = fleetshard_gitops::live::ClusterAccess {
        id: "c1".into(),
        server: "https://127.0.0.1:1".into(),
        credentials: Default::default(),
    };
    let t = target(
        "broken",
        "https://git.example/apps.git",
        "main",
        "app",
        cluster,
        AUTO,
    );
    inventory.insert(t.clone());
    let render = Arc::new(FailingRender::default());
    let resync = Duration::from_secs(180);
    // `fleetshard run`'s runtime: a failing item's backoff grows up to the resync period.
    let config = RuntimeConfig {
        resync: Some(resync),
        resync_jitter: Duration::ZERO,
        limits: RateLimiterConfig {
            max_delay: resync,
            ..RateLimiterConfig::default()
        },
        ..RuntimeConfig::default()
    };
    let r = replica_with(
        &[Cluster::new("c1", "https://127.0.0.1:1")],
        &[t.app],
        config,
        {
            let (inventory, render) = (inventory.clone(), render.clone());
            move |sink, lease| {
                let tmp = std::env::temp_dir().join("fleetshard-failing-render");
                let base = reconciler(&inventory, repos(&tmp), live_options(), sink, lease);
                Arc::new(
                    Arc::try_unwrap(base)
                        .unwrap_or_else(|_| panic!("one owner"))
                        .with_renderer(render),
                )
            }
        },
    );
    r.feed.send(started("c1")).unwrap();
    let asked = || render.asked.load(std::sync::atomic::Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(asked(), 1, "one request in the first minute");
    tokio::time::sleep(Duration::from_secs(540)).await;
    // At 0, 180, 360 and 540 s.
    assert_eq!(asked(), 4, "one request per periodic refresh");
    let status = r.memory.get(&key("broken")).unwrap().comparison.unwrap();
    assert_eq!(status.conditions[0].kind, "ComparisonError");
    drop(r.feed);
    r.runtime.shutdown().await;
}

/// A cluster split in two slices, one per replica: each app is synced and recorded by
/// its slice's owner alone; when one slice stops, its owner drops the cluster's caches
/// and does nothing more, while the other slice's apps go on being synced. A replica that
/// holds both slices keeps the cluster's connection until its last slice stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_slice_of_a_split_cluster_is_worked_on_by_its_owner_alone() {
    use fleetshard_core::placement::slices::slice_of_app;
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    const N: usize = 8;
    write_config_map_apps(&git, N, "1");
    let first = git.commit("initial");
    let fake = FakeApiServer::start().await.unwrap();
    let inventory = Arc::new(StaticInventory::default());
    let clusters = vec![Cluster::new("c1", fake.url())];
    let mut apps = Vec::new();
    for i in 0..N {
        let t = app_target(i, &git, &fake);
        apps.push(t.app.clone());
        inventory.insert(t);
    }
    let slice_of = |app: &fleetshard_core::App| slice_of_app(&app.namespace, &app.name, 2);
    let (zero, one): (Vec<_>, Vec<_>) = apps.iter().partition(|a| slice_of(a) == 0);
    assert!(!zero.is_empty() && !one.is_empty(), "both slices hold apps");
    let a = replica(&inventory, &tmp.path().join("cache-a"), &clusters, &apps);
    let b = replica(&inventory, &tmp.path().join("cache-b"), &clusters, &apps);
    a.feed.send(started("c1#slice-0-of-2")).unwrap();
    b.feed.send(started("c1#slice-1-of-2")).unwrap();
    eventually(LIMIT, "every app synced by its slice's owner", || async {
        let done = zero.iter().all(|x| synced_at(&a.memory, &x.name, &first))
            && one.iter().all(|x| synced_at(&b.memory, &x.name, &first));
        done.then_some(())
    })
    .await;
    for x in &zero {
        assert!(
            b.memory.get(&key(&x.name)).is_none(),
            "{} recorded by b",
            x.name
        );
    }
    for x in &one {
        assert!(
            a.memory.get(&key(&x.name)).is_none(),
            "{} recorded by a",
            x.name
        );
    }
    // Slice 0 stops on a: its caches go (its last unit of c1), b's slice goes on.
    stop(&a, "c1#slice-0-of-2").await;
    assert!(a.reconciler.clusters().started().is_empty());
    let writes_before = a.sink.count();
    write_config_map_apps(&git, N, "2");
    let second = git.commit("v2");
    // Every app asked for again on both replicas: only b's slice 1 is worked on.
    for x in &apps {
        a.runtime.work().refresh_queue().add(key(&x.name));
        b.runtime.work().refresh_queue().add(key(&x.name));
    }
    eventually(LIMIT, "slice 1's apps synced again", || async {
        one.iter()
            .all(|x| synced_at(&b.memory, &x.name, &second))
            .then_some(())
    })
    .await;
    assert_eq!(a.sink.count(), writes_before, "a wrote nothing more");
    for x in &zero {
        let name = format!("cm{}", &x.name[1..]);
        assert_eq!(
            fake.get("v1", "ConfigMap", "default", &name).unwrap()["data"]["value"],
            "1",
            "{} has no owner now",
            x.name
        );
    }
    // b takes slice 0 too; stopping slice 1 keeps its connection to c1 for slice 0.
    b.feed.send(started("c1#slice-0-of-2")).unwrap();
    eventually(LIMIT, "slice 0's apps synced by b", || async {
        zero.iter()
            .all(|x| synced_at(&b.memory, &x.name, &second))
            .then_some(())
    })
    .await;
    stop(&b, "c1#slice-1-of-2").await;
    assert_eq!(b.reconciler.clusters().started(), vec!["c1"]);
    assert!(b.runtime.work().owns("c1#slice-0-of-2"));
    drop((a.feed, b.feed));
    a.runtime.shutdown().await;
    b.runtime.shutdown().await;
}

/// What splitting a cluster costs its API server: the apps of slice 0 deploy ConfigMaps,
/// those of slice 1 Services. Whole, one replica lists and watches both kinds; split, each
/// slice's owner lists and watches only its own apps' kind, so the cluster sees each kind
/// listed and watched once either way (discovery and the reachability check are per
/// owner). Prints both request counts (`--nocapture`): the figure in
/// `docs/performance.md`, "A split cluster's API load".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_slice_owner_lists_and_watches_only_its_apps_kinds() {
    use fleetshard_core::placement::slices::slice_of_app;
    use fleetshard_testsupport::kube_api::Verb;
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    const N: usize = 8;
    let service = |name: &str| {
        format!(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  ports:\n  - port: 80\n"
        )
    };
    for i in 0..N {
        let body = if slice_of_app("argocd", &format!("a{i}"), 2) == 0 {
            config_map(&format!("cm{i}"), "1")
        } else {
            service(&format!("svc{i}"))
        };
        git.write(&format!("app{i}/obj.yaml"), &body);
    }
    let commit = git.commit("initial");
    let run = |units: Vec<Vec<&'static str>>| {
        let (git, commit, tmp) = (&git, &commit, &tmp);
        async move {
            let fake = FakeApiServer::start().await.unwrap();
            let targets = (0..N).map(|i| app_target(i, git, &fake)).collect();
            let caches = tmp.path().join(format!("kinds-{}", units.len()));
            let replicas = synced_by(&fake, targets, &units, &caches, commit).await;
            let counts = fake.request_counts();
            shut_down(replicas).await;
            counts
        }
    };
    let whole = run(vec![vec!["c1"]]).await;
    let split = run(vec![vec!["c1#slice-0-of-2"], vec!["c1#slice-1-of-2"]]).await;
    let of = |counts: &std::collections::BTreeMap<(Verb, String), u64>, verb: Verb, res: &str| {
        counts.get(&(verb, res.to_owned())).copied().unwrap_or(0)
    };
    let reads = |counts: &std::collections::BTreeMap<(Verb, String), u64>| -> u64 {
        counts
            .iter()
            .filter(|((v, _), _)| matches!(v, Verb::Get | Verb::List | Verb::Watch))
            .map(|(_, n)| n)
            .sum()
    };
    println!("whole: {whole:?}\nsplit: {split:?}");
    println!(
        "reads (get, list, watch): whole {}, split in 2 {}",
        reads(&whole),
        reads(&split)
    );
    for res in ["configmaps", "services"] {
        for verb in [Verb::List, Verb::Watch] {
            assert_eq!(
                of(&split, verb, res),
                of(&whole, verb, res),
                "{res} {verb:?}: by its slice's owner only"
            );
        }
    }
}

/// A split cluster's shared kind: every app deploys a ConfigMap, each into its own
/// destination namespace, beside 24 ConfigMaps of namespaces no app uses. Whole, one
/// replica lists and watches ConfigMaps cluster-wide; split, each slice's owner lists and
/// watches them only in its own apps' namespaces, each namespace by one owner, so the two
/// owners list only the apps' objects between them instead of each the cluster's. Prints
/// the figures (`--nocapture`): `docs/performance.md`, "A split cluster's API load".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slice_owner_watches_a_shared_kind_only_in_its_apps_namespaces() {
    use fleetshard_core::placement::slices::slice_of_app;
    use fleetshard_testsupport::kube_api::Verb;
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    const N: usize = 8;
    write_config_map_apps(&git, N, "1");
    let commit = git.commit("initial");
    let ns_of = |i: usize| format!("team{i}");
    let run = |units: Vec<Vec<&'static str>>| {
        let (git, commit, tmp) = (&git, &commit, &tmp);
        async move {
            let fake = FakeApiServer::start().await.unwrap();
            for j in 0..24 {
                let other = serde_json::json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("other{j}"), "namespace": format!("elsewhere{}", j % 3)},
                });
                fake.insert(other).unwrap();
            }
            let mut targets = Vec::new();
            for i in 0..N {
                fake.create_namespace(&ns_of(i)).unwrap();
                // As a previous owner left it: the app's object is there, out of date.
                fake.insert(serde_json::json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("cm{i}"), "namespace": ns_of(i)},
                    "data": {"value": "0"},
                }))
                .unwrap();
                let mut t = app_target(i, git, &fake);
                t.app.destination.namespace = Some(ns_of(i));
                targets.push(t);
            }
            let caches = tmp.path().join(format!("namespaces-{}", units.len()));
            let replicas = synced_by(&fake, targets, &units, &caches, commit).await;
            let reach: Vec<_> = replicas
                .iter()
                .map(|r| r.reconciler.clusters().watch_reach("c1"))
                .collect();
            let counts = fake.request_counts_by_namespace();
            let listed = fake.listed_objects().get("configmaps").copied();
            shut_down(replicas).await;
            (counts, listed.unwrap_or(0), reach)
        }
    };
    let (whole, whole_listed, _) = run(vec![vec!["c1"]]).await;
    let (split, split_listed, reach) =
        run(vec![vec!["c1#slice-0-of-2"], vec!["c1#slice-1-of-2"]]).await;
    let of = |counts: &fleetshard_testsupport::kube_api::ScopedCounts,
              verb: Verb,
              ns: Option<String>| {
        counts
            .get(&(verb, "configmaps".to_owned(), ns))
            .copied()
            .unwrap_or(0)
    };
    println!("whole: {whole:?}\nsplit: {split:?}\nreach: {reach:?}");
    println!("configmaps listed: whole {whole_listed}, split in 2 {split_listed}");
    assert_eq!(
        of(&whole, Verb::List, None),
        1,
        "whole: one cluster-wide list"
    );
    assert_eq!(
        of(&split, Verb::List, None),
        0,
        "no slice owner lists everywhere"
    );
    assert_eq!(
        of(&split, Verb::Watch, None),
        0,
        "no slice owner watches everywhere"
    );
    for i in 0..N {
        assert_eq!(
            of(&split, Verb::List, Some(ns_of(i))),
            1,
            "{} listed once, by its app's slice owner",
            ns_of(i)
        );
    }
    // Each owner reaches exactly its own apps' namespaces.
    for (slice, owner) in (0u32..).zip(&reach) {
        let mut mine: Vec<String> = (0..N)
            .filter(|i| slice_of_app("argocd", &format!("a{i}"), 2) == slice)
            .map(ns_of)
            .collect();
        mine.sort();
        let configmaps = owner
            .iter()
            .find(|r| r.kind == "ConfigMap")
            .map(|r| r.namespaces.clone());
        assert_eq!(configmaps, Some(Some(mine)), "slice {slice}'s owner");
    }
    assert!(
        split_listed < whole_listed,
        "split {split_listed} objects listed, whole {whole_listed}"
    );
}
