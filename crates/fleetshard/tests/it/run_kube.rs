//! `fleetshard` over `kubernetes://` against the fake API server (real HTTP, a kubeconfig
//! in `KUBECONFIG`): `status` reads an empty namespace, and two `fleetshard run` processes
//! share the fleet between them — every cluster owned by exactly one, never two at once
//! (audit-log replay) — then one is killed (-9) and the other takes over without overlap,
//! and leaves cleanly on SIGTERM.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use crate::support::audit::{History, Source, read_log};
use crate::support::replicas::fleetshard;
use crate::support::{http, signal, unix_ms, wait_for};
use fleetshard_testsupport::kube_api::{FakeApiServer, Verb};
use serde_json::Value;

const STORE: &str = "kubernetes://default";
const SETTLE: Duration = Duration::from_secs(60);

/// The fake API server on a runtime of its own, so the test can block on processes.
pub(crate) fn start_fake(
    dir: &Path,
) -> (tokio::runtime::Runtime, FakeApiServer, std::path::PathBuf) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(FakeApiServer::start()).unwrap();
    // Argo CD's CRDs: every Application and status written is checked against their schema.
    server.install_argocd_crds().unwrap();
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    (rt, server, kubeconfig)
}

fn status(kubeconfig: &Path) -> Result<Value, String> {
    let out = fleetshard()
        .env("KUBECONFIG", kubeconfig)
        .args([
            "status", "--output", "json", "--store", STORE, "--shards", "2",
        ])
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!("status: {}", String::from_utf8_lossy(&out.stderr)));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("status JSON: {e}"))
}

#[test]
fn status_reads_an_empty_namespace_through_kubeconfig() {
    let dir = tempfile::tempdir().unwrap();
    let (_rt, server, kubeconfig) = start_fake(dir.path());
    let v = status(&kubeconfig).unwrap();
    assert_eq!(v["store"], "kubernetes://default");
    assert_eq!(v["generation"], Value::Null);
    assert_eq!(v["shards"].as_array().unwrap().len(), 2);
    assert_eq!(v["shards"][0]["holder"], Value::Null);
    assert!(
        server.request_count(Verb::List, "leases") >= 1,
        "it asked the fake"
    );
    // `kubernetes://` alone: the kubeconfig context's namespace. Requests anywhere else
    // would fail.
    server.create_namespace("fleet").unwrap();
    let in_fleet = dir.path().join("kubeconfig-fleet");
    std::fs::write(
        &in_fleet,
        server
            .kubeconfig_yaml()
            .replace("namespace: default", "namespace: fleet"),
    )
    .unwrap();
    let guard = server.fail_next(u64::MAX, 500, |r| r.namespace.as_deref() != Some("fleet"));
    let out = fleetshard()
        .env("KUBECONFIG", &in_fleet)
        .args(["status", "--output", "json", "--store", "kubernetes://"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    server.remove_fault(guard);
    // No reachable API server: a clear error naming the store, not a hang.
    drop(server);
    let out = fleetshard()
        .env("KUBECONFIG", &kubeconfig)
        .args(["status", "--store", STORE])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unavailable"), "{err}");
    // No configuration at all.
    let out = fleetshard()
        .env("KUBECONFIG", dir.path().join("missing"))
        .env("HOME", dir.path())
        .env_remove("KUBERNETES_SERVICE_HOST")
        .args(["status", "--store", STORE])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Kubernetes configuration"), "{err}");
}

struct Replica {
    identity: &'static str,
    child: Child,
    audit: std::path::PathBuf,
    port: u16,
}

fn start(dir: &Path, kubeconfig: &Path, fleet: &Path, identity: &'static str) -> Replica {
    let audit = dir.join(format!("{identity}.audit.jsonl"));
    let port = http::free_port();
    let child = fleetshard()
        .env("KUBECONFIG", kubeconfig)
        .args(["--log-level", "info", "run", "--identity", identity])
        .args(["--store", STORE, "--shards", "2", "--grace-ms", "500"])
        .arg("--fleet")
        .arg(fleet)
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--audit-log")
        .arg(&audit)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join(format!("{identity}.log"))).unwrap())
        .spawn()
        .expect("starting fleetshard run");
    Replica {
        identity,
        child,
        audit,
        port,
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn two_processes_share_the_fleet_disjointly() {
    let dir = tempfile::tempdir().unwrap();
    let (_rt, server, kubeconfig) = start_fake(dir.path());
    let fleet = dir.path().join("fleet.json");
    let out = fleetshard()
        .args(["fleet", "generate", "--seed", "7", "--clusters", "12", "-o"])
        .arg(&fleet)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut replicas = vec![
        start(dir.path(), &kubeconfig, &fleet, "r0"),
        start(dir.path(), &kubeconfig, &fleet, "r1"),
    ];

    // Settled: a committed generation for 2 shards, both held, every cluster owned, both
    // replicas owning some.
    let settled = wait_for("two replicas sharing the fleet", SETTLE, || {
        let v = status(&kubeconfig)?;
        let clusters = v["clusters"].as_array().ok_or("no clusters")?;
        let owners: std::collections::BTreeSet<_> = clusters
            .iter()
            .filter_map(|c| c["owner"].as_str())
            .collect();
        let ok = v["shard_count"] == 2
            && clusters.len() == 12
            && v["unowned"] == serde_json::json!([])
            && clusters.iter().all(|c| c["owner"].is_string())
            && owners.len() == 2;
        if ok { Ok(v) } else { Err(v.to_string()) }
    });
    // The replicas act on what status says: their audit logs show each cluster started
    // by exactly its owner, never by two at once.
    let history = wait_for("the audit logs to show every cluster owned", SETTLE, || {
        let sources = replicas
            .iter()
            .map(|r| {
                Ok(Source {
                    name: r.identity.to_owned(),
                    identity: r.identity.to_owned(),
                    events: read_log(&r.audit)?,
                    killed_at: None,
                    exited: false,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let h = History::build(sources)?;
        let owners = h.current_owners();
        if owners.len() == 12 && owners.values().all(|o| o.len() == 1) {
            Ok(h)
        } else {
            Err(format!("{owners:?}"))
        }
    });
    history.check_no_overlap().unwrap();
    let owners = history.current_owners();
    for c in settled["clusters"].as_array().unwrap() {
        assert_eq!(
            owners[c["id"].as_str().unwrap()],
            [c["owner"].as_str().unwrap()],
            "status and the replica agree on {c}"
        );
    }
    assert_eq!(
        http::get(replicas[0].port, "/readyz").map(|(code, _)| code),
        Some(200)
    );
    // The records are where the store's docs say: Leases for the shards and the
    // distributor (holders shown), a ConfigMap for the assignment.
    let leases = server.list("coordination.k8s.io/v1", "Lease", Some("default"));
    let holders: Vec<_> = leases
        .iter()
        .filter(|l| {
            l["metadata"]["name"]
                .as_str()
                .unwrap()
                .starts_with("fleetshard.shards.")
        })
        .map(|l| {
            l["spec"]["holderIdentity"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    let mut sorted = holders.clone();
    sorted.sort();
    assert_eq!(sorted, ["r0", "r1"], "{leases:?}");
    assert!(
        server
            .get("v1", "ConfigMap", "default", "fleetshard.assignment")
            .is_some()
    );
    eprintln!(
        "kubernetes://: {} requests to the fake while settling",
        server.request_counts().values().sum::<u64>()
    );

    // Steady state: what two replicas cost the API server. The store's watch cache answers
    // listings and waits, so beyond the writes themselves (lease renewals) every request
    // has a cause that is not a listing: one LIST of the other kind per own write (its
    // watch cannot show the write), a watch re-opened when the server ends it (per kind,
    // once per watch timeout), and the store guard's identity check (a GET of the
    // namespace; its period is tested under paused time in `coord::store::guard`).
    // Without the cache each runner listing (every 200 ms) is two LISTs and each wait two
    // WATCHes: far more than those causes allow. The re-watch allowance grows with the
    // window as measured, so a slow machine cannot fail it; the rate is printed
    // (docs/reliability.md), not bounded.
    const REPLICAS: u64 = 2;
    let watch_timeout = fleetshard_store_kube::KubeOptions::default().watch_timeout;
    server.reset_request_counts();
    let started = unix_ms();
    std::thread::sleep(Duration::from_secs(5));
    let counts = server.request_counts();
    let window = Duration::from_millis(unix_ms() - started);
    let writes = server.write_count();
    let total = counts.values().sum::<u64>();
    let per_replica = (total - writes) as f64 / window.as_secs_f64() / REPLICAS as f64;
    eprintln!(
        "kubernetes://: steady state, 2 replicas, {window:?}: {writes} writes, {total} requests \
         in all ({per_replica:.2}/s per replica beyond the writes): {counts:?}"
    );
    // Per replica, each period begun within the window, plus the one already running.
    let periods = |every: Duration| {
        REPLICAS * (window.as_millis() / every.as_millis().max(1)) as u64 + REPLICAS
    };
    let count = |verb: Verb, resources: &[&str]| -> u64 {
        resources
            .iter()
            .map(|r| server.request_count(verb, r))
            .sum::<u64>()
    };
    let lists = count(Verb::List, &["leases", "configmaps"]);
    let watches = count(Verb::Watch, &["leases", "configmaps"]);
    let checks = count(Verb::Get, &["namespaces"]);
    // A write just before the window may have its LIST in it: one per replica.
    assert!(
        lists <= writes + REPLICAS,
        "{lists} LISTs for {writes} own writes in {window:?}: listings are not served by \
         the watch cache ({counts:?})"
    );
    assert!(
        watches <= 2 * periods(watch_timeout),
        "{watches} WATCHes in {window:?}: more than re-opening each kind once per \
         {watch_timeout:?} ({counts:?})"
    );
    assert_eq!(
        writes + lists + watches + checks,
        total,
        "a request of another kind in steady state: {counts:?}"
    );

    // kill -9 r0: r1 takes every cluster once r0's lease has run out, without overlap.
    let victim: Vec<String> = owners
        .iter()
        .filter(|(_, o)| o[0] == "r0")
        .map(|(c, _)| c.clone())
        .collect();
    let killed_at = unix_ms();
    replicas[0].child.kill().unwrap();
    replicas[0].child.wait().unwrap();
    let history = wait_for("r1 to own every cluster", SETTLE, || {
        let sources = replicas
            .iter()
            .zip([Some(killed_at), None])
            .map(|(r, killed_at)| {
                Ok(Source {
                    name: r.identity.to_owned(),
                    identity: r.identity.to_owned(),
                    events: read_log(&r.audit)?,
                    killed_at,
                    exited: killed_at.is_some(),
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let h = History::build(sources)?;
        let owners = h.current_owners();
        if owners.len() == 12 && owners.values().all(|o| o == &["r1"]) {
            Ok(h)
        } else {
            Err(format!("{owners:?}"))
        }
    });
    history.check_no_overlap().unwrap();
    let taken = history
        .intervals
        .iter()
        .filter(|iv| iv.source == 1 && iv.end.is_none() && victim.contains(&iv.cluster))
        .map(|iv| iv.start)
        .max()
        .unwrap();
    eprintln!(
        "kubernetes://: kill -9 failover {} ms ({} clusters)",
        taken.saturating_sub(killed_at),
        victim.len()
    );
    replicas.remove(0);

    // SIGTERM the survivor: it releases and exits 0.
    for r in &replicas {
        signal(r.child.id(), "-TERM");
    }
    for r in &mut replicas {
        let exit = wait_for("a replica to exit after SIGTERM", SETTLE, || {
            r.child
                .try_wait()
                .map_err(|e| e.to_string())?
                .ok_or_else(|| "running".to_owned())
        });
        assert!(exit.success(), "{}: {exit}", r.identity);
    }
}
