//! Three `fleetshard run` processes on one SQLite file: they cover the fleet, survive a
//! `kill -9` of one and a SIGTERM of another, and never have two owners for a cluster at
//! one instant, as their audit logs tell.
//!
//! The audit logs carry wall-clock milliseconds (one machine, one clock, so lines from the
//! three processes compare). The safety check replays every acquire/release in timestamp
//! order (at an equal millisecond, releases first: the log cannot order them finer), per
//! cluster:
//! - an acquire while nobody holds the cluster is fine;
//! - an acquire while another replica A holds it is allowed only if A is the process that
//!   was SIGKILLed (it can log no release), the acquire comes after the kill, and at least
//!   the lease duration (4 s) passed since A's last logged event (a dead holder's lease
//!   must have run out; a live holder would have logged its release first);
//! - a release must come from the holder.

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

const CLUSTERS: usize = 12;
/// The default lease duration of `fleetshard run`.
const LEASE_MS: u64 = 4_000;
/// Every wait in this test is bounded by this, so a broken build fails instead of hanging.
const WAIT: Duration = Duration::from_secs(30);

/// Wall-clock milliseconds: only to compare with the audit logs' `ts_ms` (same machine).
#[allow(clippy::disallowed_types)]
fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Kills the children if the test fails half-way.
struct Replicas(Vec<Option<Child>>);

impl Drop for Replicas {
    fn drop(&mut self) {
        for c in self.0.iter_mut().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Status code and body of `GET path`, or None when nothing answers.
fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let code = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())?;
    Some((code, body))
}

fn http_status(port: u16, path: &str) -> Option<u16> {
    http_get(port, path).map(|(code, _)| code)
}

/// Whether the replica on `port` says it is the distributor (`/metrics`).
fn is_distributor(port: u16) -> bool {
    http_get(port, "/metrics").is_some_and(|(_, body)| body.contains("fleetshard_is_distributor 1"))
}

#[derive(Debug, Clone)]
struct Event {
    ts: u64,
    identity: String,
    acquire: bool,
    cluster: String,
}

fn read_events(logs: &[PathBuf]) -> Vec<Event> {
    let mut out = Vec::new();
    for path in logs {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        // A line being written right now may be incomplete: only whole lines count.
        for line in text.lines().filter(|l| l.ends_with('}')) {
            let v: Value = serde_json::from_str(line).expect("audit line is JSON");
            out.push(Event {
                ts: v["ts_ms"].as_u64().unwrap(),
                identity: v["identity"].as_str().unwrap().to_owned(),
                acquire: v["event"] == "acquire",
                cluster: v["cluster"].as_str().unwrap().to_owned(),
            });
            assert!(v["generation"].is_u64() && (v["shard"].is_u64() || v["shard"].is_null()));
        }
    }
    // Releases first within one millisecond.
    out.sort_by_key(|e| (e.ts, e.acquire));
    out
}

/// Replays the events with the rule in the module docs; returns each cluster's holder.
/// `killed` is the SIGKILLed identity and when it was killed.
fn replay(events: &[Event], killed: Option<(&str, u64)>) -> BTreeMap<String, String> {
    let mut holder: BTreeMap<String, String> = BTreeMap::new();
    let mut last: BTreeMap<&str, u64> = BTreeMap::new();
    for e in events {
        if e.acquire {
            if let Some(h) = holder.get(&e.cluster).filter(|h| **h != e.identity) {
                let ok = killed.is_some_and(|(k, at)| {
                    h == k && e.ts >= at && e.ts >= last.get(k).copied().unwrap_or(0) + LEASE_MS
                });
                assert!(
                    ok,
                    "{} acquired {} at {} while {h} held it",
                    e.identity, e.cluster, e.ts
                );
            }
            holder.insert(e.cluster.clone(), e.identity.clone());
        } else {
            assert_eq!(
                holder.remove(&e.cluster).as_deref(),
                Some(e.identity.as_str()),
                "{} released {} it did not hold",
                e.identity,
                e.cluster
            );
        }
        last.insert(&e.identity, e.ts);
    }
    holder
}

/// Polls until `f` holds; panics after [`WAIT`].
fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let start = unix_ms();
    while !f() {
        assert!(
            unix_ms() - start < WAIT.as_millis() as u64,
            "timed out: {what}"
        );
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
            1 + i % 4
        ));
    }
    let path = dir.join("fleet.yaml");
    std::fs::write(&path, yaml).unwrap();
    (path, ids)
}

#[test]
fn three_processes_hand_over_after_kill_and_sigterm_without_overlap() {
    let dir = tempfile::tempdir().unwrap();
    let (fleet, ids) = write_fleet(dir.path());
    let store = format!("sqlite://{}", dir.path().join("fleetshard.db").display());
    let names = ["r0", "r1", "r2"];
    let logs: Vec<PathBuf> = names
        .iter()
        .map(|n| dir.path().join(format!("{n}.audit.jsonl")))
        .collect();
    let ports: Vec<u16> = names.iter().map(|_| free_port()).collect();
    let mut replicas = Replicas(Vec::new());
    for (i, name) in names.iter().enumerate() {
        let child = fleetshard()
            .args(["run", "--store", &store, "--identity", name])
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
        replicas.0.push(Some(child));
    }

    // 1. Every cluster acquired, every replica ready.
    // The first generations may be committed before every replica holds a shard: wait for
    // the settled one, where every replica owns some of the clusters.
    wait_until("every cluster acquired, by all three", || {
        let h = replay(&read_events(&logs), None);
        h.len() == CLUSTERS && names.iter().all(|n| h.values().any(|v| v == n))
    });
    wait_until("every replica ready", || {
        ports
            .iter()
            .all(|&p| http_status(p, "/readyz") == Some(200))
    });
    assert_eq!(http_status(ports[0], "/healthz"), Some(200));

    // 2. kill -9 r0: its clusters move to the others.
    let held_by_r0: Vec<String> = replay(&read_events(&logs), None)
        .into_iter()
        .filter(|(_, h)| h == "r0")
        .map(|(c, _)| c)
        .collect();
    let killed_at = unix_ms();
    let mut r0 = replicas.0[0].take().unwrap();
    r0.kill().unwrap();
    r0.wait().unwrap();
    wait_until("r0's clusters acquired by others", || {
        let h = replay(&read_events(&logs), Some(("r0", killed_at)));
        h.len() == CLUSTERS && h.values().all(|h| h != "r0")
    });
    let events = read_events(&logs);
    let kill_failover = events
        .iter()
        .filter(|e| e.acquire && e.ts >= killed_at && held_by_r0.contains(&e.cluster))
        .map(|e| e.ts - killed_at)
        .max()
        .unwrap_or(0);

    // 3. SIGTERM r1: it releases, r2 takes everything, r1 exits 0.
    let held_by_r1: Vec<String> = replay(&events, Some(("r0", killed_at)))
        .into_iter()
        .filter(|(_, h)| h == "r1")
        .map(|(c, _)| c)
        .collect();
    let r1_distributor = is_distributor(ports[1]);
    let termed_at = unix_ms();
    let r1_pid = replicas.0[1].as_ref().unwrap().id();
    let st = Command::new("kill")
        .args(["-TERM", &r1_pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    wait_until("r1's clusters acquired by r2", || {
        let h = replay(&read_events(&logs), Some(("r0", killed_at)));
        h.len() == CLUSTERS && h.values().all(|h| h == "r2")
    });
    let mut r1 = replicas.0[1].take().unwrap();
    let mut exit = None;
    wait_until("r1 exits", || {
        exit = r1.try_wait().unwrap();
        exit.is_some()
    });
    assert!(exit.unwrap().success(), "r1 exit: {exit:?}");
    let events = read_events(&logs);
    let term_failover = events
        .iter()
        .filter(|e| e.acquire && e.ts >= termed_at && held_by_r1.contains(&e.cluster))
        .map(|e| e.ts - termed_at)
        .max()
        .unwrap_or(0);

    // 4. The whole history, once more, and the final coverage.
    let holders = replay(&events, Some(("r0", killed_at)));
    assert_eq!(holders.keys().cloned().collect::<Vec<_>>(), ids);

    // 5. `fleetshard status` agrees.
    let out = fleetshard()
        .args(["status", "--store", &store, "--output", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(status["generation"].as_u64().unwrap() >= 1);
    let clusters = status["clusters"].as_array().unwrap();
    assert_eq!(clusters.len(), CLUSTERS);
    for c in clusters {
        let id = c["id"].as_str().unwrap();
        assert_eq!(c["owner"].as_str(), Some(holders[id].as_str()), "{c}");
    }
    assert_eq!(status["unowned"], serde_json::json!([]));
    let shard_count = status["shards"].as_array().unwrap().len();
    assert_eq!(shard_count, 3);

    eprintln!(
        "failover: kill -9 {kill_failover} ms ({} clusters), SIGTERM {term_failover} ms ({} \
         clusters; the replica leaving was the distributor: {r1_distributor})",
        held_by_r0.len(),
        held_by_r1.len()
    );
    // A dead holder's clusters wait for its lease: at least duration − one renew period.
    assert!(
        !held_by_r0.is_empty() && kill_failover >= LEASE_MS - 1_000,
        "{kill_failover}"
    );
}

#[test]
fn unsupported_stores_and_empty_identities_are_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let (fleet, _) = write_fleet(dir.path());
    let out = fleetshard()
        .args([
            "run",
            "--store",
            "etcd://localhost:2379",
            "--identity",
            "r0",
        ])
        .arg("--fleet")
        .arg(&fleet)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not yet supported in this build"), "{err}");
    let out = fleetshard()
        .args(["run", "--store", "memory://", "--identity", " "])
        .arg("--fleet")
        .arg(&fleet)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no identity"));
}

#[test]
fn status_of_an_empty_store_lists_vacant_shards() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("empty.db").display());
    let out = fleetshard()
        .args([
            "status", "--store", &store, "--shards", "2", "--output", "json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["generation"], Value::Null);
    assert_eq!(v["shards"].as_array().unwrap().len(), 2);
    assert_eq!(v["shards"][0]["holder"], Value::Null);
    assert_eq!(v["clusters"], serde_json::json!([]));
}
