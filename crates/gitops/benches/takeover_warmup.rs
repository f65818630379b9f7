//! Warm takeovers: the time from a cluster's acquisition to the first completed refresh of
//! all its apps, on a simulated cluster with many apps and objects, after the previous
//! owner crashed and after it handed the cluster over; and the memory of the cluster's
//! live cache.
//!
//! `cargo bench -p fleetshard-gitops --bench takeover_warmup -- [APPS] [PER_APP] [EXTRA]
//! [TRIALS] [LATENCY_MS]` (defaults 1000 10 10000 3 0): one fake API server (kube-sim,
//! real HTTP on 127.0.0.1) holding APPS × PER_APP objects deployed by the apps (per app,
//! in one of 50 namespaces: 60 % ConfigMaps, 20 % Services, 20 % Deployments, applied by
//! a first owner's sync, so with fleetshard's managed fields and tracking annotations,
//! the Deployments' status written by "the Deployment controller") and EXTRA objects no
//! app deploys (40 % ConfigMaps created by `kubectl`, 60 % Pods). With the defaults: 1,000
//! apps and 20,000 objects. LATENCY_MS delays every request to the server (a cluster
//! across a network).
//!
//! Each trial hands the cluster from one owner (a `GitOpsReconciler` whose caches are
//! warm) to a new one: a crash (the owner's tasks and connections vanish) or a graceful
//! handover (the owner stops the cluster, then the new one acquires it). From the
//! acquisition the new owner warms the cluster (`GitOpsReconciler::cluster_acquired`) and
//! refreshes every app with 20 concurrent workers (Argo CD's status processors), as the
//! controller queues every app of a cluster it starts; the figure is until the last app's
//! refresh is recorded, every app Synced. Then a child process of this program loads the
//! cluster's live cache alone and reports its resident memory.

use std::sync::Arc;
use std::time::Duration;

use fleetshard_controller::AppKey;
use fleetshard_core::{App, Destination};
use fleetshard_gitops::live::{ClusterAccess, ClusterConnections, ClusterCredentials, LiveOptions};
use fleetshard_gitops::reconciler::{
    AppTarget, FixedClock, GitOpsReconciler, MemorySink, ReconcilerConfig, StaticInventory,
};
use fleetshard_gitops::source::{RepoCache, RepoCacheConfig};
use fleetshard_testsupport::git::Git;
use fleetshard_testsupport::kube_api::{FakeApiServer, Verb};
use serde_json::json;
use tokio::time::Instant;

mod common;
use common::{Op, auto_synced, median, round};

/// Argo CD's status processors.
const WORKERS: usize = 20;
/// Namespaces the apps deploy to.
const NAMESPACES: usize = 50;

struct Args {
    apps: usize,
    per_app: usize,
    extra: usize,
    trials: usize,
    latency: Duration,
}

fn args() -> Args {
    let raw: Vec<String> = std::env::args()
        .filter(|a| a != "--bench")
        .skip(1)
        .collect();
    let num = |i: usize, d: usize| {
        raw.get(i).map_or(d, |a| {
            a.parse()
                .unwrap_or_else(|_| panic!("argument {}: {a:?} is not a number", i + 1))
        })
    };
    Args {
        apps: num(0, 1000),
        per_app: num(1, 10).max(1),
        extra: num(2, 10_000),
        trials: num(3, 3).max(1),
        latency: Duration::from_millis(num(4, 0) as u64),
    }
}

/// The kind of an app's `i`-th object: 6 of 10 ConfigMaps, 2 Services, 2 Deployments.
fn manifest(app: usize, i: usize) -> String {
    let name = format!("a{app}-o{i}");
    match i % 10 {
        0..=5 => format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  labels:\n    app: a{app}\ndata:\n  key: value-{i}\n  settings.yaml: |\n    replicas: 3\n    owner: team-{app}\n"
        ),
        6 | 7 => format!(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  labels:\n    app: a{app}\nspec:\n  selector:\n    app: a{app}\n  ports:\n  - name: http\n    port: 80\n    targetPort: 8080\n"
        ),
        _ => format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  labels:\n    app: a{app}\nspec:\n  replicas: 1\n  selector:\n    matchLabels:\n      app: a{app}\n  template:\n    metadata:\n      labels:\n        app: a{app}\n    spec:\n      containers:\n      - name: main\n        image: registry.example/a{app}:1.0\n        ports:\n        - containerPort: 8080\n"
        ),
    }
}

fn write_repo(dir: &std::path::Path, a: &Args) -> Git {
    let git = Git::init(dir);
    for app in 0..a.apps {
        for i in 0..a.per_app {
            git.write(&format!("apps/a{app}/o{i}.yaml"), &manifest(app, i));
        }
    }
    git.commit("apps");
    git
}

fn inventory(
    repo: &str,
    access: &ClusterAccess,
    apps: usize,
) -> (Arc<StaticInventory>, Vec<AppKey>) {
    let inventory = Arc::new(StaticInventory::default());
    let project = Arc::new(fleetshard_manifest::AppProject::builtin_default("argocd"));
    let mut keys = Vec::new();
    for a in 0..apps {
        let app = App {
            namespace: "argocd".into(),
            name: format!("a{a}"),
            project: "default".into(),
            destination: Destination {
                server: Some(access.server.clone()),
                name: None,
                namespace: Some(format!("team{}", a % NAMESPACES)),
            },
        };
        let spec = auto_synced(repo, format!("apps/a{a}"));
        keys.push(AppKey::of(&app));
        inventory.insert(AppTarget {
            app,
            spec,
            cluster: access.clone(),
            cluster_name: access.id.clone(),
            project: Some(project.clone()),
            repositories: Default::default(),
            argocd_cm: Default::default(),
        });
    }
    (inventory, keys)
}

/// One owner of the cluster.
struct Owner {
    reconciler: Arc<GitOpsReconciler>,
    sink: Arc<MemorySink>,
}

fn owner(inventory: &Arc<StaticInventory>, cache_dir: &std::path::Path) -> Owner {
    let sink = MemorySink::new();
    let reconciler = Arc::new(GitOpsReconciler::new(
        inventory.clone(),
        RepoCache::new(RepoCacheConfig::new(cache_dir.to_owned())),
        ClusterConnections::new(LiveOptions {
            sync_timeout: Duration::from_secs(120),
            ..LiveOptions::default()
        }),
        sink.clone(),
        Arc::new(|| Some(tokio::time::Instant::now() + Duration::from_secs(3600))),
        Arc::new(FixedClock("2026-11-26T00:00:00Z".into())),
        ReconcilerConfig::default(),
    ));
    Owner { reconciler, sink }
}

fn synced(sink: &MemorySink) -> usize {
    sink.all()
        .values()
        .filter(|s| {
            s.comparison
                .as_ref()
                .is_some_and(|c| c.sync.status == "Synced")
        })
        .count()
}

/// What the Deployment controller, `kubectl` and the kubelet add to the cluster.
fn populate(server: &FakeApiServer, a: &Args) {
    for app in 0..a.apps {
        let ns = format!("team{}", app % NAMESPACES);
        for i in (0..a.per_app).filter(|i| i % 10 >= 8) {
            server
                .modify("apps/v1", "Deployment", &ns, &format!("a{app}-o{i}"), |d| {
                    d["status"] = json!({"observedGeneration": 1, "replicas": 1,
                        "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1,
                        "conditions": [{"type": "Available", "status": "True",
                            "reason": "MinimumReplicasAvailable"}]});
                    let entry = json!({"manager": "kube-controller-manager", "operation": "Update",
                        "apiVersion": "apps/v1", "time": "2026-11-26T00:00:00Z",
                        "fieldsType": "FieldsV1", "subresource": "status",
                        "fieldsV1": {"f:status": {"f:availableReplicas": {}, "f:conditions": {},
                            "f:observedGeneration": {}, "f:readyReplicas": {},
                            "f:replicas": {}, "f:updatedReplicas": {}}}});
                    if let Some(list) = d
                        .pointer_mut("/metadata/managedFields")
                        .and_then(|m| m.as_array_mut())
                    {
                        list.push(entry);
                    }
                })
                .expect("deployment status");
        }
    }
    let created = |manager: &str, fields: serde_json::Value| {
        json!([{"manager": manager, "operation": "Update", "apiVersion": "v1",
            "time": "2026-11-26T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": fields}])
    };
    let configmaps = a.extra * 4 / 10;
    for i in 0..a.extra {
        let ns = format!("team{}", i % NAMESPACES);
        let obj = if i < configmaps {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("other-{i}"), "namespace": ns,
                    "managedFields": created("kubectl-create",
                        json!({"f:data": {".": {}, "f:config": {}}}))},
                "data": {"config": format!("unrelated value {i}")}})
        } else {
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("pod-{i}"), "namespace": ns,
                    "managedFields": created("kubelet", json!({"f:status": {}}))},
                "spec": {"containers": [{"name": "main", "image": "registry.example/x:1"}]},
                "status": {"phase": "Running"}})
        };
        server.insert(obj).expect("insert");
    }
}

/// Resident memory in bytes (`/proc/self/statm`, 4 KiB pages).
fn rss() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    Some(statm.split(' ').nth(1)?.parse::<u64>().ok()? * 4096)
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// The child: loads the live cache of the apps' kinds on the cluster at `server` and
/// prints the resident memory it added.
async fn memory_child(server: &str) {
    let access = ClusterAccess {
        id: "c0".into(),
        server: server.to_owned(),
        credentials: ClusterCredentials::default(),
    };
    let conns = ClusterConnections::new(LiveOptions {
        sync_timeout: Duration::from_secs(120),
        ..LiveOptions::default()
    });
    let conn = conns.start(&access).await.expect("connect");
    let mut kinds = Vec::new();
    for (v, k) in [
        ("v1", "ConfigMap"),
        ("v1", "Service"),
        ("apps/v1", "Deployment"),
    ] {
        kinds.push(conn.kind_info(v, k).await.expect("discovery"));
    }
    let before = rss().unwrap_or(0);
    conn.watch_kinds(&kinds).await.expect("lists");
    let after = rss().unwrap_or(0);
    println!(
        "{} {}",
        conns.cached_objects(),
        after.saturating_sub(before)
    );
}

#[tokio::main]
async fn main() {
    if let Some(pos) = std::env::args().position(|a| a == "--memory-child") {
        let server = std::env::args().nth(pos + 1).expect("server URL");
        memory_child(&server).await;
        return;
    }
    let a = args();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = write_repo(&tmp.path().join("repo"), &a);
    let server = FakeApiServer::start().await.expect("fake API server");
    let access = ClusterAccess {
        id: "c0".into(),
        server: server.url(),
        credentials: ClusterCredentials::default(),
    };
    for ns in 0..NAMESPACES {
        server
            .create_namespace(&format!("team{ns}"))
            .expect("namespace");
    }
    let (inventory, keys) = inventory(&repo.path(), &access, a.apps);
    let keys = Arc::new(keys);

    // The first owner deploys every app; the cluster gets its other objects.
    let setup = Instant::now();
    let first = owner(&inventory, &tmp.path().join("cache-first"));
    round(&first.reconciler, &keys, Op::Refresh, WORKERS).await;
    round(&first.reconciler, &keys, Op::Operate, WORKERS).await;
    populate(&server, &a);
    round(&first.reconciler, &keys, Op::Refresh, WORKERS).await;
    assert_eq!(
        synced(&first.sink),
        a.apps,
        "the first owner synced every app"
    );
    let objects: usize = server
        .resources()
        .iter()
        .filter(|k| k.kind != "Namespace")
        .map(|k| server.list(&k.api_version(), k.kind, None).len())
        .sum();
    println!(
        "apps={} objects on the cluster={objects} (of the apps: {}), workers={WORKERS}, latency={:?}, load average before: {}; set up in {:.1} s",
        a.apps,
        a.apps * a.per_app,
        a.latency,
        load.split(' ').take(3).collect::<Vec<_>>().join(" "),
        setup.elapsed().as_secs_f64()
    );
    if !a.latency.is_zero() {
        server.add_latency(a.latency, |_| true);
    }

    let mut previous = first;
    let mut figures: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for trial in 0..a.trials * 2 {
        let graceful = trial % 2 == 1;
        // The previous owner goes: a crash drops its tasks and connections where they
        // are; a handover stops the cluster first.
        if graceful {
            previous.reconciler.stop_warmup(&access.id).await;
            previous.reconciler.stop_cluster(&access.id);
        }
        drop(previous);
        let next = owner(&inventory, &tmp.path().join(format!("cache{trial}")));
        server.reset_request_counts();
        let start = Instant::now();
        // What the replica does on an acquisition (`cluster_acquired` runs this).
        let warm = {
            let (r, id) = (next.reconciler.clone(), access.id.clone());
            tokio::spawn(async move {
                let w = r.warm_cluster(&id).await.expect("warm-up");
                (w, start.elapsed().as_secs_f64())
            })
        };
        round(&next.reconciler, &keys, Op::Refresh, WORKERS).await;
        let took = start.elapsed().as_secs_f64();
        let (warmup, warm_took) = warm.await.expect("warm-up task");
        assert_eq!(synced(&next.sink), a.apps, "every app refreshed and Synced");
        assert_eq!(
            next.reconciler.clusters().cached_objects(),
            a.apps * a.per_app + a.extra * 4 / 10,
            "the cache holds every object of the apps' kinds"
        );
        figures[usize::from(graceful)].push(took);
        let lists: u64 = ["configmaps", "services", "deployments"]
            .iter()
            .map(|r| server.request_count(Verb::List, r))
            .sum();
        println!(
            "  trial {}: {} → every app refreshed in {took:.2} s (warm-up: {} apps, kinds {:?}, caches listed in {warm_took:.2} s, {lists} list pages)",
            trial / 2 + 1,
            if graceful {
                "graceful handover"
            } else {
                "crash"
            },
            warmup.apps,
            warmup
                .kinds
                .iter()
                .map(|(_, k)| k.as_str())
                .collect::<Vec<_>>(),
        );
        previous = next;
    }
    drop(previous);
    for (name, f) in ["crash", "graceful handover"].iter().zip(&figures) {
        println!(
            "acquisition → first refresh of all {} apps, {name}: median {:.2} s (min {:.2}, max {:.2})",
            a.apps,
            median(f.clone()),
            f.iter().copied().fold(f64::INFINITY, f64::min),
            f.iter().copied().fold(0.0, f64::max),
        );
    }

    // The live cache's memory, in a process of its own (this one's allocator holds what
    // the owners freed).
    let exe = std::env::current_exe().expect("this program");
    let out = tokio::process::Command::new(exe)
        .args(["--memory-child", &server.url()])
        .output()
        .await
        .expect("memory child");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut fields = text
        .split_whitespace()
        .map(|f| f.parse::<u64>().unwrap_or(0));
    let (cached, bytes) = (fields.next().unwrap_or(0), fields.next().unwrap_or(0));
    println!(
        "live cache of the apps' kinds: {cached} objects, {:.1} MiB resident ({:.0} bytes per object)",
        mib(bytes),
        bytes as f64 / cached.max(1) as f64
    );
}
