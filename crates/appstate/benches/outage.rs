//! What a Redis outage costs the reconciler: the time of one `write_app` (tree, managed
//! resources, gzip, handed to the writer) with Redis up and with Redis down, and what the
//! writer holds meanwhile (keys pending, values superseded), then how long after Redis is
//! back every key is written again.
//!
//! `cargo bench -p fleetshard-appstate --bench outage -- [APPS] [RESOURCES]` (defaults
//! 200 apps of 20 resources, each a Deployment with a ReplicaSet and a Pod).

use std::sync::Arc;
use std::time::Duration;

use fleetshard_appstate::{AppShown, AppStateCache, HealthStatus, ManagedResource, RedisSettings};
use fleetshard_testsupport::redis::RedisServer;
use serde_json::{Value, json};
use tokio::time::Instant;

fn app(n: usize) -> (Vec<ManagedResource>, Vec<Arc<Value>>) {
    let mut managed = Vec::new();
    let mut objects = Vec::new();
    for i in 0..n {
        let d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": format!("d{i}"), "namespace": "ns", "uid": format!("d{i}")},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
        let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": format!("r{i}"), "namespace": "ns", "uid": format!("r{i}"),
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": format!("d{i}"), "uid": format!("d{i}")}]}});
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("p{i}"), "namespace": "ns", "uid": format!("p{i}"),
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("r{i}"), "uid": format!("r{i}")}]},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx"}]},
            "status": {"phase": "Running"}});
        managed.push(ManagedResource {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
            namespace: "ns".into(),
            name: format!("d{i}"),
            target: Some(d.clone()),
            live: Some(Arc::new(d.clone())),
            ..Default::default()
        });
        objects.extend([d, rs, pod].map(Arc::new));
    }
    (managed, objects)
}

fn healthy(_: &Value) -> Option<HealthStatus> {
    Some(HealthStatus {
        status: "Healthy".into(),
        message: String::new(),
    })
}

/// Writes every app once; returns the median and worst time of one `write_app`.
fn round(
    cache: &AppStateCache,
    apps: usize,
    data: &(Vec<ManagedResource>, Vec<Arc<Value>>),
) -> (Duration, Duration) {
    let mut times = Vec::with_capacity(apps);
    for a in 0..apps {
        let start = Instant::now();
        cache
            .write_app(
                &format!("app{a}"),
                &data.0,
                &data.1,
                &healthy,
                &AppShown::default(),
                &[],
            )
            .unwrap();
        times.push(start.elapsed());
    }
    times.sort();
    (times[times.len() / 2], times[times.len() - 1])
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let apps = args.first().copied().unwrap_or(200);
    let resources = args.get(1).copied().unwrap_or(20);
    let data = app(resources);
    let mut redis = RedisServer::start().unwrap();
    let cache = AppStateCache::start(RedisSettings::new(redis.address())).unwrap();
    round(&cache, apps, &data);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (up_p50, up_max) = round(&cache, apps, &data);
    println!(
        "redis up:   write_app p50 {up_p50:?}, max {up_max:?} ({apps} apps, {resources} resources each)"
    );
    redis.kill().unwrap();
    let mut worst = Duration::ZERO;
    for _ in 0..3 {
        let (p50, max) = round(&cache, apps, &data);
        worst = worst.max(max);
        println!(
            "redis down: write_app p50 {p50:?}, max {max:?}; writer {:?}",
            cache.stats()
        );
    }
    println!("redis down: worst write_app {worst:?}");
    redis.restart().unwrap();
    let back = Instant::now();
    while cache.stats().pending > 0 || !cache.stats().connected {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    println!(
        "redis back: every pending key written {:?} after the restart; writer {:?}; keys {}",
        back.elapsed(),
        cache.stats(),
        redis.keys("*").unwrap().len()
    );
}
