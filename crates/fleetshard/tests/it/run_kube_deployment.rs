//! `--shards deployment:NAME` over the fake API server: the shard count follows a
//! Deployment's `spec.replicas` without a restart, in fenced mode (the distributor commits
//! the new count) — the same source Argo CD reads.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::support::replicas::fleetshard;
use crate::support::{KillOnDrop, http, wait_for};
use fleetshard_testsupport::kube_api::FakeApiServer;
use serde_json::{Value, json};

const STORE: &str = "kubernetes://default";

fn status(kubeconfig: &Path) -> Option<Value> {
    let out = fleetshard()
        .env("KUBECONFIG", kubeconfig)
        .args(["status", "--output", "json", "--store", STORE])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).ok())
        .flatten()
}

fn deployment(replicas: u32) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "ctrl", "namespace": "default"},
        "spec": {"replicas": replicas,
            "selector": {"matchLabels": {"app": "ctrl"}},
            "template": {"metadata": {"labels": {"app": "ctrl"}},
                "spec": {"containers": [{"name": "c", "image": "x"}]}}}
    })
}

#[test]
fn the_shard_count_follows_the_deployment() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(FakeApiServer::start()).unwrap();
    // Argo CD's CRDs: every Application and status written is checked against their schema.
    server.install_argocd_crds().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    server.insert(deployment(2)).unwrap();
    let fleet = dir.path().join("fleet.yaml");
    let clusters: Vec<Value> = (0..8)
        .map(|i| json!({"name": format!("c{i}"), "server": format!("https://c{i}.example")}))
        .collect();
    std::fs::write(&fleet, json!({"clusters": clusters}).to_string()).unwrap();
    let port = http::free_port();
    let _replica = KillOnDrop(
        fleetshard()
            .env("KUBECONFIG", &kubeconfig)
            .args(["run", "--identity", "r0", "--store", STORE])
            .args(["--shards", "deployment:ctrl", "--fleet"])
            .arg(&fleet)
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("r0.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    let count = || status(&kubeconfig).and_then(|s| s["shard_count"].as_u64());
    wait_for(
        "the count from the Deployment",
        Duration::from_secs(60),
        || match count() {
            Some(2) => Ok(()),
            other => Err(format!("shard count {other:?}")),
        },
    );
    // Scaled: the next generation has the new count, no restart.
    server
        .modify("apps/v1", "Deployment", "default", "ctrl", |d| {
            d["spec"]["replicas"] = json!(5);
        })
        .unwrap();
    wait_for(
        "the count to follow",
        Duration::from_secs(60),
        || match count() {
            Some(5) => Ok(()),
            other => Err(format!("shard count {other:?}")),
        },
    );
    let s = status(&kubeconfig).unwrap();
    assert_eq!(s["clusters"].as_array().unwrap().len(), 8);
}

#[test]
fn deployment_needs_the_kubernetes_store() {
    let dir = tempfile::tempdir().unwrap();
    let out = fleetshard()
        .args(["run", "--store", "memory://", "--shards", "deployment"])
        .arg("--fleet")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/fleet.yaml"
        ))
        .arg("--listen")
        .arg(format!("127.0.0.1:{}", http::free_port()))
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("needs --store kubernetes://"), "{err}");
}
