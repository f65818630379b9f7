//! `fleetshard status` and two `fleetshard run` processes over a real etcd (the test-support
//! fixture): the two own disjoint sets of clusters that together cover the fleet, as their
//! audit logs tell, and `status` agrees.
//!
//! The audit logs carry wall-clock milliseconds (one machine, one clock, so lines from both
//! processes compare). Replaying every acquire and release in timestamp order (releases
//! first within one millisecond) must never find a cluster acquired while the other
//! process holds it. Needs `--features etcd`; without it, only the refusal is tested.

#![cfg_attr(not(feature = "etcd"), allow(dead_code, unused_imports))]

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

#[cfg(feature = "etcd")]
use fleetshard_testsupport::etcd::EtcdServer;
use serde_json::Value;

const CLUSTERS: usize = 10;
/// Every wait in this test is bounded by this, so a broken build fails instead of hanging.
const WAIT: Duration = Duration::from_secs(60);

/// Kills the children if the test fails half-way.
struct Replicas(Vec<Child>);

impl Drop for Replicas {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn free_port() -> u16 {
    fleetshard_testsupport::kube_api::free_port().unwrap()
}

/// The status code of `GET path`, or None when nothing answers.
fn http_status(port: u16, path: &str) -> Option<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    text.split_whitespace().nth(1)?.parse().ok()
}

/// Polls until `f` holds; panics after [`WAIT`].
fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    // Bounds a real-process wait; no decision reads this clock.
    #[allow(clippy::disallowed_types)]
    let start = std::time::Instant::now();
    while !f() {
        assert!(start.elapsed() < WAIT, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn fleetshard() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fleetshard"))
}

fn write_fleet(dir: &Path) -> (PathBuf, Vec<String>) {
    let ids: Vec<String> = (0..CLUSTERS).map(|i| format!("c{i:02}")).collect();
    let mut yaml = String::from("clusters:\n");
    for (i, id) in ids.iter().enumerate() {
        yaml.push_str(&format!(
            "- name: {id}\n  id: {id}\n  server: https://{id}.example\n  apps: {}\n",
            1 + i % 3
        ));
    }
    let path = dir.join("fleet.yaml");
    std::fs::write(&path, yaml).unwrap();
    (path, ids)
}

/// Replays the audit logs; returns each cluster's holder. Panics on an acquire while
/// another replica holds the cluster, or a release by a non-holder.
fn replay(logs: &[PathBuf]) -> BTreeMap<String, String> {
    let mut events = Vec::new();
    for path in logs {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        // A line being written right now may be incomplete: only whole lines count.
        for line in text.lines().filter(|l| l.ends_with('}')) {
            let v: Value = serde_json::from_str(line).expect("audit line is JSON");
            events.push((
                v["ts_ms"].as_u64().unwrap(),
                v["event"] == "acquire",
                v["identity"].as_str().unwrap().to_owned(),
                v["cluster"].as_str().unwrap().to_owned(),
            ));
        }
    }
    events.sort_by_key(|e| (e.0, e.1));
    let mut holder: BTreeMap<String, String> = BTreeMap::new();
    for (ts, acquire, identity, cluster) in events {
        if acquire {
            if let Some(h) = holder.get(&cluster) {
                assert_eq!(
                    h, &identity,
                    "{identity} acquired {cluster} at {ts} while {h} held it"
                );
            }
            holder.insert(cluster, identity);
        } else {
            let h = holder.remove(&cluster);
            assert_eq!(
                h.as_deref(),
                Some(identity.as_str()),
                "{identity} released {cluster} it did not hold"
            );
        }
    }
    holder
}

#[cfg(feature = "etcd")]
fn status(etcd: &EtcdServer, root: &str, extra: &[&str]) -> Output {
    fleetshard()
        .args([
            "status",
            "--store",
            &etcd.url(),
            "--root",
            root,
            "--output",
            "json",
        ])
        .args(extra)
        .output()
        .unwrap()
}

fn json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[cfg(not(feature = "etcd"))]
#[test]
fn without_the_feature_etcd_urls_say_how_to_get_it() {
    let out = fleetshard()
        .args(["status", "--store", "etcd://127.0.0.1:2379"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--features etcd") && err.contains("protobuf-compiler"),
        "{err}"
    );
}

#[cfg(feature = "etcd")]
#[test]
fn status_of_an_empty_etcd_lists_vacant_shards() {
    let etcd = EtcdServer::start().unwrap();
    let root = format!("{}fleetshard/", etcd.key_prefix());
    let v = json(&status(&etcd, &root, &["--shards", "2"]));
    assert_eq!(v["generation"], Value::Null);
    assert_eq!(v["shards"].as_array().unwrap().len(), 2);
    assert_eq!(v["shards"][0]["holder"], Value::Null);
    assert_eq!(v["clusters"], serde_json::json!([]));
}

#[cfg(feature = "etcd")]
#[test]
fn status_of_a_dead_etcd_fails_clearly_without_hanging() {
    let mut etcd = EtcdServer::start().unwrap();
    if !etcd.is_local() {
        return; // an external etcd cannot be stopped
    }
    let url = etcd.url();
    etcd.kill().unwrap();
    // It must end on its own (its calls are bounded): given up on after [`WAIT`].
    let mut status = Replicas(vec![
        fleetshard()
            .args(["status", "--store", &url])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ]);
    let child = &mut status.0[0];
    let mut exit = None;
    wait_until("status of a dead etcd to end", || {
        exit = child.try_wait().unwrap();
        exit.is_some()
    });
    assert!(!exit.unwrap().success());
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(
        err.contains("unavailable") && err.contains(etcd.endpoint()),
        "{err}"
    );
}

#[cfg(feature = "etcd")]
#[test]
fn two_processes_own_disjoint_clusters_covering_the_fleet() {
    let etcd = EtcdServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (fleet, ids) = write_fleet(dir.path());
    let root = format!("{}fleetshard/", etcd.key_prefix());
    let names = ["e0", "e1"];
    let logs: Vec<PathBuf> = names
        .iter()
        .map(|n| dir.path().join(format!("{n}.audit.jsonl")))
        .collect();
    let ports: Vec<u16> = names.iter().map(|_| free_port()).collect();
    let mut replicas = Replicas(Vec::new());
    for (i, name) in names.iter().enumerate() {
        let child = fleetshard()
            .args(["run", "--store", &etcd.url(), "--root", &root])
            .args(["--identity", name, "--shards", "2"])
            .arg("--fleet")
            .arg(&fleet)
            .arg("--listen")
            .arg(format!("127.0.0.1:{}", ports[i]))
            .arg("--audit-log")
            .arg(&logs[i])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join(format!("{name}.log"))).unwrap())
            .spawn()
            .unwrap();
        replicas.0.push(child);
    }

    // The first generations may be committed before both hold a shard: wait for the
    // settled one, where each owns some clusters.
    wait_until("every cluster acquired, by both", || {
        let h = replay(&logs);
        h.len() == CLUSTERS && names.iter().all(|n| h.values().any(|v| v == n))
    });
    wait_until("both ready", || {
        ports
            .iter()
            .all(|&p| http_status(p, "/readyz") == Some(200))
    });
    let holders = replay(&logs);
    assert_eq!(holders.keys().cloned().collect::<Vec<_>>(), ids);

    // `status` reads the same etcd and agrees with the audit logs. It judges a holder by
    // seeing its lease renewed within about 1.3 s: on a loaded machine a replica starved
    // past one renewal is shown, rightly, as not renewed (its clusters at risk), so the
    // read is repeated until it saw both renewing.
    let mut v = Value::Null;
    wait_until("status to see both holders renewing", || {
        v = json(&status(&etcd, &root, &[]));
        v["unowned"] == serde_json::json!([])
    });
    assert!(v["generation"].as_u64().unwrap() >= 1);
    assert_eq!(v["shards"].as_array().unwrap().len(), 2);
    let clusters = v["clusters"].as_array().unwrap();
    assert_eq!(clusters.len(), CLUSTERS);
    for c in clusters {
        let id = c["id"].as_str().unwrap();
        assert_eq!(c["owner"].as_str(), Some(holders[id].as_str()), "{c}");
    }

    // SIGTERM both: each releases what it holds and exits 0, and the history stays clean.
    for c in &replicas.0 {
        let st = Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .status()
            .unwrap();
        assert!(st.success());
    }
    for c in &mut replicas.0 {
        let mut exit = None;
        wait_until("a replica exits after SIGTERM", || {
            exit = c.try_wait().unwrap();
            exit.is_some()
        });
        assert!(exit.unwrap().success(), "exit: {exit:?}");
    }
    assert!(
        replay(&logs).is_empty(),
        "every cluster released on shutdown"
    );
}
