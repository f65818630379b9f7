//! Three `fleetshard run --protocol argocd` processes on one SQLite file, two shards (so
//! one is a spare): a `kill -9`ed holder's clusters are taken over only after its entry went
//! stale, a SIGTERMed holder's at once, and the audit logs never show two owners of a
//! cluster at one instant. The map in the store reads back as Argo CD reads it. A second
//! test runs two replicas over the fake Kubernetes API server, where the map is Argo CD's
//! own ConfigMap.
//!
//! Argo CD's minimum heartbeat is 10 s (stale after 30 s), too slow for a test, so the
//! processes run with the hidden, test-only `--heartbeat-ms 300` (stale after 900 ms, a
//! holder acts until 600 ms after its last confirmed heartbeat was sent). No bound on how
//! long a takeover took is asserted: after a `kill -9`, not before the entry could have
//! gone stale; after a SIGTERM, through the release — before the entry could have gone
//! stale, or the start delay passed, since the release.
//!
//! The audit logs carry wall-clock milliseconds (one machine, one clock). The replay takes
//! every acquire/release in timestamp order (at an equal millisecond, releases first) and,
//! per cluster, allows an acquire only while nobody holds the cluster, or while the holder
//! is the SIGKILLed process and the acquire comes after the kill (a dead process acts on
//! nothing; it can log no release).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fleetshard_coord::argocd::{MAPPING_KEY, ShardEntry, WallTime, decode, upstream};
use fleetshard_coord::store::Store as _;
use serde_json::Value;

use crate::support::{http, timing};

pub(crate) const CLUSTERS: usize = 12;
pub(crate) const HEARTBEAT_MS: u64 = 300;
/// Every wait is bounded by this, so a broken build fails instead of hanging.
const WAIT: Duration = Duration::from_secs(40);

/// Wall-clock milliseconds: only to compare with the audit logs' `ts_ms` (same machine).
#[allow(clippy::disallowed_types)]
fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Kills the children if the test fails half-way.
pub(crate) struct Procs(pub(crate) BTreeMap<String, Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in self.0.values_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
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
            // generation: the replica count in the argocd protocol.
            assert_eq!(v["generation"].as_u64(), Some(2), "{line}");
            assert!(v["shard"].is_u64(), "{line}");
            out.push(Event {
                ts: v["ts_ms"].as_u64().unwrap(),
                identity: v["identity"].as_str().unwrap().to_owned(),
                acquire: v["event"] == "acquire",
                cluster: v["cluster"].as_str().unwrap().to_owned(),
            });
        }
    }
    out.sort_by_key(|e| (e.ts, e.acquire));
    out
}

/// Replays the events with the rule in the module docs; returns each cluster's holder.
fn replay(events: &[Event], killed: Option<(&str, u64)>) -> BTreeMap<String, String> {
    let mut holder: BTreeMap<String, String> = BTreeMap::new();
    for e in events {
        if e.acquire {
            if let Some(h) = holder.get(&e.cluster).filter(|h| **h != e.identity) {
                let ok = killed.is_some_and(|(k, at)| h == k && e.ts >= at);
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
    }
    holder
}

/// Polls until `f` holds; panics after [`WAIT`].
pub(crate) fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let start = unix_ms();
    while !f() {
        assert!(
            unix_ms() - start < WAIT.as_millis() as u64,
            "timed out: {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn fleetshard() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fleetshard"))
}

pub(crate) fn write_fleet(dir: &Path) -> PathBuf {
    let mut yaml = String::from("clusters:\n");
    for i in 0..CLUSTERS {
        let id = format!("c{i:02}");
        yaml.push_str(&format!(
            "- name: {id}\n  id: {id}\n  server: https://{id}.example\n  apps: 1\n"
        ));
    }
    let path = dir.join("fleet.yaml");
    std::fs::write(&path, yaml).unwrap();
    path
}

pub(crate) struct Setup {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) fleet: PathBuf,
    pub(crate) store: String,
    pub(crate) ports: BTreeMap<String, u16>,
    /// `KUBECONFIG` for `kubernetes://` stores.
    pub(crate) kubeconfig: Option<PathBuf>,
}

impl Setup {
    fn log(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("{name}.audit.jsonl"))
    }

    pub(crate) fn spawn(&self, name: &str) -> Child {
        self.spawn_with_heartbeat(name, HEARTBEAT_MS)
    }

    /// [`Setup::spawn`] with `--heartbeat-ms heartbeat_ms`.
    pub(crate) fn spawn_with_heartbeat(&self, name: &str, heartbeat_ms: u64) -> Child {
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(format!("{name}.log")))
            .unwrap();
        fleetshard()
            .args(["run", "--protocol", "argocd", "--shards", "2"])
            .args(["--heartbeat-ms", &heartbeat_ms.to_string()])
            .args(["--store", &self.store, "--identity", name])
            .arg("--fleet")
            .arg(&self.fleet)
            .arg("--listen")
            .arg(format!("127.0.0.1:{}", self.ports[name]))
            // dashboard_argocd.rs reads each replica's dashboard.
            .arg("--dashboard")
            .arg("--audit-log")
            .arg(self.log(name))
            .env("FLEETSHARD_LOG", "info")
            .envs(self.kubeconfig.iter().map(|k| ("KUBECONFIG", k)))
            .env_remove("ARGOCD_CONTROLLER_SHARD")
            .env_remove("ARGOCD_CONTROLLER_REPLICAS")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap()
    }

    fn ready(&self, name: &str) -> Option<String> {
        http::get(self.ports[name], "/readyz")
            .filter(|(code, _)| *code == 200)
            .map(|(_, body)| body)
    }
}

#[test]
fn argocd_processes_take_over_after_staleness_or_at_once_after_sigterm() {
    let stale_ms = timing::argocd_stale_after_ms(HEARTBEAT_MS);
    let dir = tempfile::tempdir().unwrap();
    let setup = Setup {
        fleet: write_fleet(dir.path()),
        store: format!("sqlite://{}", dir.path().join("fleetshard.db").display()),
        ports: ["r0", "r1", "r2"]
            .iter()
            .map(|n| ((*n).to_owned(), http::free_port()))
            .collect(),
        dir,
        kubeconfig: None,
    };
    let names = ["r0", "r1", "r2"];
    let logs: Vec<PathBuf> = names.iter().map(|n| setup.log(n)).collect();
    let mut procs = Procs(BTreeMap::new());
    for n in names {
        procs.0.insert(n.to_owned(), setup.spawn(n));
    }

    // 1. Two holders cover the fleet (after the start delay of a fresh map); the third
    //    replica is a spare, and ready.
    wait_until("every cluster acquired by two replicas", || {
        let h = replay(&read_events(&logs), None);
        let mut holders: Vec<&String> = h.values().collect();
        holders.sort();
        holders.dedup();
        h.len() == CLUSTERS && holders.len() == 2
    });
    wait_until("every replica ready", || {
        names.iter().all(|n| setup.ready(n).is_some())
    });
    let holders = replay(&read_events(&logs), None);
    let spare = *names
        .iter()
        .find(|n| !holders.values().any(|h| h == *n))
        .unwrap();
    assert!(setup.ready(spare).unwrap().contains("spare"));
    let (victim, survivor) = {
        let mut hs: Vec<&str> = names.iter().copied().filter(|n| *n != spare).collect();
        hs.sort();
        (hs[0], hs[1])
    };

    // 2. kill -9 a holder: the spare takes its entry once it has been unchanged for 3H.
    let held_by_victim: Vec<String> = holders
        .iter()
        .filter(|(_, h)| *h == victim)
        .map(|(c, _)| c.clone())
        .collect();
    assert!(!held_by_victim.is_empty());
    // Watch the victim's entry (every 10 ms) to know when its last content appeared: the
    // spare may take over only once it has seen that content unchanged for 3H.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = fleetshard_store_sqlite::SqliteStore::from_url(&setup.store).unwrap();
    let victim_entry = || {
        let raw = runtime
            .block_on(store.get(MAPPING_KEY))
            .unwrap()
            .unwrap()
            .value;
        let list = decode(std::str::from_utf8(&raw).unwrap()).unwrap();
        list.into_iter().find(|e| e.controller_name == victim)
    };
    let mut last_content = (victim_entry(), unix_ms());
    let watch = |last: &mut (Option<ShardEntry>, u64)| {
        let now = victim_entry();
        if now != last.0 {
            *last = (now, unix_ms());
        }
    };
    let until = unix_ms() + 2 * HEARTBEAT_MS;
    while unix_ms() < until {
        watch(&mut last_content);
        std::thread::sleep(Duration::from_millis(10));
    }
    watch(&mut last_content);
    let killed_at = unix_ms();
    let mut child = procs.0.remove(victim).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    // A write that was in flight has landed (or never will) now that the process is gone.
    watch(&mut last_content);
    let last_seen_change = last_content.1;
    assert!(last_content.0.is_some(), "the victim held an entry");
    wait_until("the killed holder's clusters acquired by the spare", || {
        let h = replay(&read_events(&logs), Some((victim, killed_at)));
        held_by_victim
            .iter()
            .all(|c| h.get(c).is_some_and(|h| h == spare))
    });
    let events = read_events(&logs);
    let kill_failover = events
        .iter()
        .filter(|e| e.acquire && e.ts >= killed_at && held_by_victim.contains(&e.cluster))
        .map(|e| e.ts - killed_at)
        .max()
        .unwrap();
    // Not before the victim's last content had been unchanged for 3H (less our 10 ms
    // polling and the logs' millisecond rounding).
    let takeover = killed_at + kill_failover;
    assert!(
        takeover + 15 >= last_seen_change + stale_ms,
        "taken over {} ms after the victim's entry last changed",
        takeover - last_seen_change
    );

    // 3. The killed replica comes back under its name: its entry is taken, so it is the
    //    spare now; SIGTERM the other holder: it frees its entry and the restarted replica,
    //    having seen the release, takes it and starts its clusters at once.
    procs.0.insert(victim.to_owned(), setup.spawn(victim));
    wait_until("the restarted replica is a ready spare", || {
        setup.ready(victim).is_some_and(|b| b.contains("spare"))
    });
    // The fast path needs the count and map stable for 3H on the restarted replica's clock.
    std::thread::sleep(Duration::from_millis(2 * stale_ms));
    let events = read_events(&logs);
    let held_by_survivor: Vec<String> = replay(&events, Some((victim, killed_at)))
        .into_iter()
        .filter(|(_, h)| h == survivor)
        .map(|(c, _)| c)
        .collect();
    assert!(!held_by_survivor.is_empty());
    let termed_at = unix_ms();
    let pid = procs.0[survivor].id();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    wait_until(
        "the SIGTERMed holder's clusters acquired by the new spare",
        || {
            let h = replay(&read_events(&logs), Some((victim, killed_at)));
            held_by_survivor
                .iter()
                .all(|c| h.get(c).is_some_and(|h| h == victim))
        },
    );
    let mut child = procs.0.remove(survivor).unwrap();
    let mut exit = None;
    wait_until("the SIGTERMed replica exits", || {
        exit = child.try_wait().unwrap();
        exit.is_some()
    });
    assert!(exit.unwrap().success(), "{exit:?}");
    let events = read_events(&logs);
    let term_failover = events
        .iter()
        .filter(|e| e.acquire && e.ts >= termed_at && held_by_survivor.contains(&e.cluster))
        .map(|e| e.ts - termed_at)
        .max()
        .unwrap();
    // Through the release: each cluster acquired sooner after the holder released it than
    // the staleness path (the freed entry, its last change after the stops, seen unchanged
    // for 3H) or the start delay after a claim (3H) could have started it.
    let lease_wait = timing::argocd_lease_wait_ms(HEARTBEAT_MS);
    for c in &held_by_survivor {
        let first = |acquire: bool, who: &str, from: u64| {
            events
                .iter()
                .find(|e| {
                    e.acquire == acquire && e.identity == who && e.cluster == *c && e.ts >= from
                })
                .map(|e| e.ts)
        };
        let released = first(false, survivor, termed_at)
            .unwrap_or_else(|| panic!("{survivor} logged no release of {c} after SIGTERM"));
        let acquired = first(true, victim, released)
            .unwrap_or_else(|| panic!("{victim} logged no acquire of {c} after its release"));
        assert!(
            acquired - released < lease_wait,
            "{c}: acquired {} ms after {survivor} released it, as late as a takeover that \
             did not see the release ({lease_wait} ms)",
            acquired - released
        );
    }

    // 4. The whole history once more, and the final coverage.
    let holders = replay(&events, Some((victim, killed_at)));
    assert_eq!(holders.len(), CLUSTERS);

    // 5. The map reads back as Argo CD reads it, and Argo CD's own claim finds both live
    //    replicas on their entries.
    let raw = runtime
        .block_on(store.get(MAPPING_KEY))
        .unwrap()
        .expect("the map exists")
        .value;
    let text = String::from_utf8(raw).unwrap();
    let list = decode(&text).unwrap();
    assert_eq!(list.len(), 2, "{text}");
    let later = WallTime::from_unix_seconds(i64::try_from(unix_ms() / 1000).unwrap());
    for name in [spare, victim] {
        let (shard, _) = upstream::get_or_update_shard_number_for_controller(
            &list,
            name,
            2,
            -1,
            later,
            Duration::from_millis(stale_ms),
        );
        assert!((0..2).contains(&shard), "{name} not found in {text}");
    }

    // 6. `fleetshard status` agrees with the audit logs, once a read saw both holders'
    // heartbeats move (on a loaded machine one read can catch a replica starved past a
    // heartbeat, and rightly show its clusters at risk).
    let mut status = Value::Null;
    wait_until("status to see both holders' heartbeats", || {
        let out = fleetshard()
            .args(["status", "--protocol", "argocd", "--store", &setup.store])
            .args(["--shards", "2", "--output", "json", "--fleet"])
            .arg(&setup.fleet)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        status = serde_json::from_slice(&out.stdout).unwrap();
        status["clusters"]
            .as_array()
            .is_some_and(|c| c.iter().all(|c| c["owner"].is_string()))
    });
    let clusters = status["clusters"].as_array().unwrap();
    assert_eq!(clusters.len(), CLUSTERS);
    for c in clusters {
        let id = c["id"].as_str().unwrap();
        assert_eq!(c["owner"].as_str(), Some(holders[id].as_str()), "{c}");
    }

    // Without --protocol, status recognises the store: the map, and no fenced records.
    let out = fleetshard()
        .args(["status", "--store", &setup.store, "--output", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["key"], MAPPING_KEY);
    assert_eq!(status["entries"].as_array().unwrap().len(), 2);

    eprintln!(
        "argocd failover (H = {HEARTBEAT_MS} ms, stale after {stale_ms} ms): kill -9 \
         {kill_failover} ms after the kill, {} ms after the entry last changed ({} clusters), \
         SIGTERM {term_failover} ms ({} clusters)",
        takeover - last_seen_change,
        held_by_victim.len(),
        held_by_survivor.len()
    );
}

/// Over the fake Kubernetes API server: the map is Argo CD's own ConfigMap. An Argo CD
/// controller's entry (seeded as Argo CD writes it) goes stale and is taken over; the
/// ConfigMap's other data is left alone; SIGTERM frees both entries.
#[test]
fn argocd_processes_share_argo_cds_configmap_over_kubernetes() {
    use fleetshard_testsupport::kube_api::FakeApiServer;

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
    // The example of argo-compat §5.3 (`docs/glossary.md`), byte for byte, plus a key
    // fleetshard must not touch.
    let argo = r#"[{"ShardNumber":0,"ControllerName":"argocd-application-controller-7b9c8d6f5-x2kqp","HeartbeatTime":"2026-08-22T18:31:32Z"},{"ShardNumber":1,"ControllerName":"","HeartbeatTime":null}]"#;
    server
        .insert(serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "argocd-app-controller-shard-cm", "namespace": "default"},
            "data": {"shardControllerMapping": argo, "note": "kept"},
        }))
        .unwrap();
    let setup = Setup {
        fleet: write_fleet(dir.path()),
        store: "kubernetes://default".into(),
        ports: ["k0", "k1"]
            .iter()
            .map(|n| ((*n).to_owned(), http::free_port()))
            .collect(),
        dir,
        kubeconfig: Some(kubeconfig),
    };
    let names = ["k0", "k1"];
    let logs: Vec<PathBuf> = names.iter().map(|n| setup.log(n)).collect();
    let mut procs = Procs(BTreeMap::new());
    // A 1 s heartbeat, not the other tests' 300 ms: every heartbeat is a write through the
    // fake API server, and at 300 ms a loaded machine made the two replicas miss theirs
    // and trade shards for longer than the wait (seen once under a heavy combined run).
    for n in names {
        procs
            .0
            .insert(n.to_owned(), setup.spawn_with_heartbeat(n, 1_000));
    }
    wait_until("every cluster acquired, by both", || {
        let h = replay(&read_events(&logs), None);
        h.len() == CLUSTERS && names.iter().all(|n| h.values().any(|v| v == n))
    });
    let cm = || {
        server
            .get(
                "v1",
                "ConfigMap",
                "default",
                "argocd-app-controller-shard-cm",
            )
            .expect("the ConfigMap exists")
    };
    let data = cm()["data"].clone();
    assert_eq!(data["note"], "kept");
    let list = decode(data["shardControllerMapping"].as_str().unwrap()).unwrap();
    let mut controllers: Vec<&str> = list.iter().map(|e| e.controller_name.as_str()).collect();
    controllers.sort();
    assert_eq!(controllers, names, "{list:?}");

    for n in names {
        let pid = procs.0[n].id();
        assert!(
            Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status()
                .unwrap()
                .success()
        );
    }
    for n in names {
        let mut child = procs.0.remove(n).unwrap();
        let mut exit = None;
        wait_until("exit after SIGTERM", || {
            exit = child.try_wait().unwrap();
            exit.is_some()
        });
        assert!(exit.unwrap().success(), "{n}: {exit:?}");
    }
    let holders = replay(&read_events(&logs), None);
    assert!(holders.is_empty(), "{holders:?}");
    let list = decode(cm()["data"]["shardControllerMapping"].as_str().unwrap()).unwrap();
    assert!(list.iter().all(ShardEntry::is_free), "{list:?}");
}
