//! Measures the cost of comparing one resource client-side and server-side (Argo CD's
//! `ServerSideDiff=true`) against a fake API server over HTTP on this machine: N
//! Deployments applied by fleetshard's field manager, a mutating webhook adding an
//! annotation to each; then, per resource, the client-side comparison
//! (`compare_resource`), and the server-side one uncached (a server-side apply dry run,
//! `apply::predict_live`, the webhook's addition removed, `compare_resource` of the
//! prediction). A cached server-side comparison costs what the client-side one does: the
//! prediction is reused (`reconciler/server_side.rs`).
//!
//! Run: `cargo bench -p fleetshard-gitops --bench server_side_diff -- [DEPLOYMENTS]`
//! (200 unless told).

#![allow(
    clippy::disallowed_types,
    reason = "a measurement harness reads the wall clock"
)]

use std::time::Instant;

use fleetshard_gitops::apply::predict_live;
use fleetshard_gitops::compare::{
    CompareOptions, FIELD_MANAGER, ResourceKey, SyncStatus, compare_resource,
};
use fleetshard_gitops::live::{ClusterAccess, ClusterConnections, ClusterCredentials, LiveOptions};
use fleetshard_testsupport::kube_api::FakeApiServer;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

fn desired(i: usize) -> Value {
    let name = format!("svc-{i}");
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "prod", "labels": {"app": name}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}}, "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "app", "image": format!("registry.example.com/{name}:1.0.{i}"),
                "ports": [{"containerPort": 8080, "name": "http"}],
                "env": (0..10).map(|e| json!({"name": format!("VAR_{e}"), "value": format!("{e}")})).collect::<Vec<_>>(),
                "resources": {"limits": {"cpu": 1, "memory": "512Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}}}]}}}
    })
}

fn micros_per(start: Instant, n: usize) -> f64 {
    start.elapsed().as_secs_f64() * 1e6 / n as f64
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::args()
        .filter(|a| a != "--bench")
        .nth(1)
        .map(|a| a.parse().expect("DEPLOYMENTS is a number"))
        .unwrap_or(200);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let server = FakeApiServer::start().await.expect("fake API server");
    server.create_namespace("prod").expect("namespace");
    server.add_mutating_webhook("annotator", |req, obj| {
        if req.kind == "Deployment" {
            obj["metadata"]["annotations"]["injected-by"] = json!("annotator");
        }
        Ok(())
    });
    let conns = ClusterConnections::new(LiveOptions::default());
    let access = ClusterAccess {
        id: "c0".into(),
        server: server.url(),
        credentials: ClusterCredentials::default(),
    };
    let conn = conns.start(&access).await.expect("connect");
    let kind = conn
        .kind_info("apps/v1", "Deployment")
        .await
        .expect("discovery");
    let api: Api<DynamicObject> =
        Api::namespaced_with(conn.client().clone(), "prod", &kind.resource);
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut pairs = Vec::with_capacity(n);
    for i in 0..n {
        let d = desired(i);
        let name = format!("svc-{i}");
        let applied = api
            .patch(&name, &params, &Patch::Apply(&d))
            .await
            .expect("apply");
        let mut live = serde_json::to_value(applied).expect("json");
        live["apiVersion"] = json!("apps/v1");
        live["kind"] = json!("Deployment");
        pairs.push((
            ResourceKey::new("apps", "Deployment", "prod", &name),
            d,
            live,
        ));
    }
    let opts = CompareOptions::new("shop").with_destination_namespace("prod");
    println!("{n} Deployments; load average at start: {}", load.trim());
    let requests = std::sync::Arc::new(fleetshard_gitops::live::AppRequests::default());
    let at = fleetshard_gitops::live::AppConn::new(&conn, requests, false);
    for pass in 1..=3 {
        let start = Instant::now();
        for (key, d, live) in &pairs {
            let r = compare_resource(key.clone(), d, Some(live), &opts);
            assert_eq!(r.status, SyncStatus::Synced, "{:?}", r.differences);
        }
        let client = micros_per(start, n);
        let start = Instant::now();
        for (key, d, live) in &pairs {
            let predicted = predict_live(&at, &kind, key, d).await.expect("dry run");
            let predicted =
                fleetshard_diff::remove_webhook_mutations(&predicted, live, FIELD_MANAGER)
                    .expect("prediction");
            let r = compare_resource(key.clone(), &predicted, Some(live), &opts);
            assert_eq!(r.status, SyncStatus::Synced, "{:?}", r.differences);
        }
        let server_side = micros_per(start, n);
        println!(
            "pass {pass}: client-side {client:.1} µs/resource; server-side, uncached \
             {server_side:.1} µs/resource ({:.0}×)",
            server_side / client
        );
    }
}
