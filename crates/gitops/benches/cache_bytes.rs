//! How close a cluster cache's estimate of its heap (`ClusterConn::cached_bytes`,
//! `live/footprint.rs`: each object's estimate summed as it enters and leaves) is to the
//! heap the allocator actually handed out for the cache.
//!
//! `cargo bench -p fleetshard-gitops --bench cache_bytes -- [OBJECTS]` (default 20,000;
//! the allocation figures do not depend on the build profile, so `cargo build
//! --bench cache_bytes` and running the binary gives the same): one fake API server
//! (kube-sim, in this process) holding OBJECTS objects in 50 namespaces — 40 %
//! ConfigMaps, 20 % Services and 20 % Deployments as a sync leaves them (fleetshard's
//! managed fields, the tracking annotation; the Deployments' status and the controller's
//! `managedFields` entry, which the cache drops), 20 % Pods created by the kubelet — then
//! a connection that lists and watches the four kinds. Measured with `stats_alloc`
//! around the lists: bytes allocated and not freed once every first list is complete
//! (the cache, its index by app, and the watches' own state), against the estimate; and
//! how long the lists took (the estimate is taken as each object enters the cache).

use std::time::Duration;

use fleetshard_gitops::live::{ClusterAccess, ClusterConnections, ClusterCredentials, LiveOptions};
use fleetshard_testsupport::kube_api::FakeApiServer;
use serde_json::{Value, json};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

/// Bytes live on the heap now (a reallocation's growth is already in `bytes_allocated`).
fn live() -> i64 {
    let s = GLOBAL.stats();
    s.bytes_allocated as i64 - s.bytes_deallocated as i64
}

fn managed(manager: &str, operation: &str, api_version: &str, fields: Value) -> Value {
    json!({"manager": manager, "operation": operation, "apiVersion": api_version,
        "time": "2026-11-26T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": fields})
}

fn object(i: usize) -> Value {
    let ns = format!("team{}", i % 50);
    let app = format!("a{}", i / 10);
    let name = format!("{app}-o{i}");
    let tracking = |group_kind: &str| format!("{app}:{group_kind}:{ns}/{name}");
    let meta = |group_kind: &str, api_version: &str, fields: Value| {
        json!({"name": name, "namespace": ns, "labels": {"app": app},
            "annotations": {"argocd.argoproj.io/tracking-id": tracking(group_kind)},
            "managedFields": [managed("fleetshard", "Apply", api_version, fields)]})
    };
    match i % 10 {
        0..=3 => json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": meta("/ConfigMap", "v1", json!({"f:data": {"f:key": {}, "f:settings.yaml": {}}})),
            "data": {"key": format!("value-{i}"),
                "settings.yaml": format!("replicas: 3\nowner: team-{app}\n")}}),
        4 | 5 => json!({"apiVersion": "v1", "kind": "Service",
            "metadata": meta("/Service", "v1", json!({"f:spec": {"f:ports": {}, "f:selector": {}}})),
            "spec": {"selector": {"app": app},
                "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}]}}),
        6 | 7 => {
            let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": meta("apps/Deployment", "apps/v1", json!({"f:spec": {"f:replicas": {},
                    "f:selector": {}, "f:template": {"f:metadata": {"f:labels": {}},
                    "f:spec": {"f:containers": {}}}}})),
                "spec": {"replicas": 1, "selector": {"matchLabels": {"app": app}},
                    "template": {"metadata": {"labels": {"app": app}},
                        "spec": {"containers": [{"name": "main",
                            "image": format!("registry.example/{app}:1.0"),
                            "ports": [{"containerPort": 8080}]}]}}},
                "status": {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1,
                    "readyReplicas": 1, "availableReplicas": 1,
                    "conditions": [{"type": "Available", "status": "True",
                        "reason": "MinimumReplicasAvailable"}]}});
            d["metadata"]["managedFields"]
                .as_array_mut()
                .unwrap()
                .push(managed(
                    "kube-controller-manager",
                    "Update",
                    "apps/v1",
                    json!({"f:status": {"f:availableReplicas": {}, "f:conditions": {},
                        "f:observedGeneration": {}, "f:readyReplicas": {}}}),
                ));
            d
        }
        _ => json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("pod-{i}"), "namespace": ns,
                "managedFields": [managed("kubelet", "Update", "v1", json!({"f:status": {}}))]},
            "spec": {"containers": [{"name": "main", "image": "registry.example/x:1"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1"}}),
    }
}

#[tokio::main]
async fn main() {
    let objects: usize = std::env::args()
        .filter(|a| a != "--bench")
        .nth(1)
        .map_or(20_000, |a| a.parse().expect("OBJECTS is a number"));
    let server = FakeApiServer::start().await.expect("fake API server");
    for ns in 0..50 {
        server
            .create_namespace(&format!("team{ns}"))
            .expect("namespace");
    }
    for i in 0..objects {
        server.insert(object(i)).expect("insert");
    }
    let access = ClusterAccess {
        id: "c0".into(),
        server: server.url(),
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
        ("v1", "Pod"),
    ] {
        kinds.push(conn.kind_info(v, k).await.expect("discovery"));
    }
    let before = live();
    let start = tokio::time::Instant::now();
    conn.watch_kinds(&kinds).await.expect("lists");
    let listed = start.elapsed();
    // The lists' last pages and responses are freed as their tasks move on.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let heap = live() - before;
    let usage = conn.cache_usage();
    println!(
        "{} objects cached in {:.0} ms: heap allocated and kept {:.1} MiB ({:.0} B/object), estimate {:.1} MiB ({:.0} B/object), estimate / heap = {:.2}",
        usage.objects,
        listed.as_secs_f64() * 1000.0,
        heap as f64 / 1048576.0,
        heap as f64 / usage.objects.max(1) as f64,
        usage.bytes as f64 / 1048576.0,
        usage.bytes as f64 / usage.objects.max(1) as f64,
        usage.bytes as f64 / heap.max(1) as f64,
    );
}
