//! Argo CD's objects for the end-to-end run: a cluster Secret for a destination, an
//! auto-synced Application, and the check that it reached Synced on the destination.

use fleetshard_testsupport::kube_api::FakeApiServer;
use serde_json::{Value, json};

/// Applications' apiVersion.
pub const APPS: &str = "argoproj.io/v1alpha1";

/// A cluster Secret for the destination at `server`, pinned to `shard` when given (Argo
/// CD's `shard` field).
pub fn cluster_secret(namespace: &str, name: &str, server: &str, shard: Option<u32>) -> Value {
    let mut data = json!({
        "name": name,
        "server": server,
        "config": r#"{"tlsClientConfig":{"insecure":false}}"#,
    });
    if let Some(s) = shard {
        data["shard"] = json!(s.to_string());
    }
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {"argocd.argoproj.io/secret-type": "cluster"}},
        "stringData": data,
    })
}

/// An Application with automated sync of `path` in `repo` to `cluster`'s `default`
/// namespace.
pub fn application(namespace: &str, name: &str, repo: &str, path: &str, cluster: &str) -> Value {
    json!({
        "apiVersion": APPS, "kind": "Application",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "project": "default",
            "source": {"repoURL": repo, "path": path, "targetRevision": "HEAD"},
            "destination": {"name": cluster, "namespace": "default"},
            "syncPolicy": {"automated": {"prune": true, "selfHeal": true}},
        },
    })
}

/// The Application's status once it is Synced and Healthy at `commit` after a finished
/// sync operation, else what it shows.
pub fn synced(control: &FakeApiServer, ns: &str, app: &str, commit: &str) -> Result<Value, String> {
    let obj = control
        .get(APPS, "Application", ns, app)
        .ok_or("no Application")?;
    let status = &obj["status"];
    let sync = &status["sync"];
    if sync["status"] != "Synced" || sync["revision"] != commit {
        return Err(format!("sync {sync}, conditions {}", status["conditions"]));
    }
    let op = &status["operationState"];
    if op["phase"] != "Succeeded" || op["syncResult"]["revision"] != commit {
        return Err(format!("operation {op}"));
    }
    if status["health"]["status"] != "Healthy" {
        return Err(format!("health {}", status["health"]));
    }
    Ok(status.clone())
}

/// The object `name` on the destination once it exists, applied by server-side apply as
/// field manager `fleetshard` and nobody else.
pub fn applied(dest: &FakeApiServer, kind: &str, name: &str) -> Result<Value, String> {
    let obj = dest
        .get("v1", kind, "default", name)
        .ok_or_else(|| format!("no {kind} default/{name} on the destination"))?;
    let managers: Vec<&str> = obj["metadata"]["managedFields"]
        .as_array()
        .map(|m| m.iter().filter_map(|f| f["manager"].as_str()).collect())
        .unwrap_or_default();
    if managers != ["fleetshard"] {
        return Err(format!("managers {managers:?}"));
    }
    Ok(obj)
}

/// `git daemon` serving the repositories under `base` read-only on a loopback port, so
/// that an app's source is remote (`git://`) and the replica mirrors it into its
/// repository cache, the pod's writable volume. Killed when dropped.
pub struct GitDaemon {
    child: std::process::Child,
    port: u16,
}

impl GitDaemon {
    /// Starts the daemon and waits until `git ls-remote` reads `repo` (a directory name
    /// under `base`) through it.
    pub fn start(base: &std::path::Path, repo: &str) -> GitDaemon {
        let port = crate::support::http::free_port();
        let child = std::process::Command::new("git")
            .arg("daemon")
            .arg("--export-all")
            .arg("--reuseaddr")
            .arg("--listen=127.0.0.1")
            .arg(format!("--port={port}"))
            .arg(format!("--base-path={}", base.display()))
            .arg(base)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("git daemon (Debian's git ships it)");
        let daemon = GitDaemon { child, port };
        let url = daemon.url(repo);
        crate::support::wait_for(
            "git daemon serving",
            std::time::Duration::from_secs(30),
            || {
                let out = std::process::Command::new("git")
                    .args(["ls-remote", &url])
                    .env("GIT_CONFIG_NOSYSTEM", "1")
                    .env("GIT_CONFIG_GLOBAL", "/dev/null")
                    .output()
                    .map_err(|e| e.to_string())?;
                if out.status.success() {
                    Ok(())
                } else {
                    Err(String::from_utf8_lossy(&out.stderr).into_owned())
                }
            },
        );
        daemon
    }

    /// `git://127.0.0.1:PORT/REPO`.
    pub fn url(&self, repo: &str) -> String {
        format!("git://127.0.0.1:{}/{repo}", self.port)
    }
}

impl Drop for GitDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
