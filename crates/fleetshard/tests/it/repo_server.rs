//! The contract of `fleetshard run --repo-server HOST:PORT --repo-server-plaintext`: the
//! replica asks that repo-server, in plain-text gRPC, for every app's manifests, and an
//! app whose source only a repo-server renders (a chart from a Helm repository) syncs on a
//! simulated cluster.

use std::time::Duration;

use serde_json::json;

use crate::simulate::{SETTLE, read_sims, simulate};
use crate::support::replicas::{apps_json, local_replica};
use crate::support::{KillOnDrop, wait_for};
use fleetshard_testsupport::repo_server::{Answer, FakeRepoServer, Transport};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_renders_through_a_plaintext_repo_server() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = dir.path().join("fleet");
    let _sim = simulate(
        &["--clusters", "1"],
        &fleet.join("sim"),
        &dir.path().join("simulate.log"),
    );
    let sims = read_sims(&fleet.join("sim"));
    let server = FakeRepoServer::start(Transport::Plaintext).await.unwrap();
    let manifest = json!({"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": "web-config"}, "data": {"replicas": "2"}});
    server.answer_all(
        Answer::rendered(&[&manifest.to_string()], "1.2.7", "Helm"),
        Duration::ZERO,
    );
    let app = json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": "web", "namespace": "argocd"},
        "spec": {
            "project": "default",
            "source": {"repoURL": "https://charts.example.com/stable", "chart": "web",
                       "targetRevision": "1.2.*", "helm": {"releaseName": "web"}},
            "destination": {"name": sims[0].name, "namespace": "default"},
            "syncPolicy": {"automated": {"prune": true}},
        },
    });
    std::fs::write(fleet.join("app.json"), app.to_string()).unwrap();
    let store = format!("sqlite://{}", dir.path().join("fs.db").display());
    let _replica = KillOnDrop(
        local_replica(dir.path(), &fleet, &store)
            .args(["--resync", "2s", "--in-cluster-enabled=false"])
            .args(["--repo-server", &server.addr(), "--repo-server-plaintext"])
            .spawn()
            .unwrap(),
    );
    wait_for("the chart synced", SETTLE, || {
        let v = apps_json(&store)?;
        let web = v["apps"]
            .as_array()
            .and_then(|a| a.iter().find(|a| a["app"] == "argocd/web"))
            .cloned()
            .ok_or("no status yet")?;
        if web["sync"] == "Synced" && web["record"]["comparison"]["sync"]["revision"] == "1.2.7" {
            Ok(())
        } else {
            Err(web.to_string())
        }
    });
    let requests = server.requests();
    let q = requests.last().expect("the repo-server was asked");
    assert_eq!(q.str_or_empty(5), "web", "appName");
    assert_eq!(
        q.message(10).expect("source").str_or_empty(12),
        "web",
        "chart"
    );
}
