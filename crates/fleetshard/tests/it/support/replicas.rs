//! The processes of one scenario: a fleet file, a store, and `fleetshard run` replicas,
//! each with its identity, a free listen port, its own audit log and stderr log. Replicas
//! are numbered in start order; a restarted identity is a new replica (a new incarnation
//! with its own logs), so the audit replay tells the dead process from its successor.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::audit::{History, Owners, Source, read_log};
use super::store::StoreUnderTest;
use super::{http, unix_ms, wait_for};

/// Deadline of every wait for the fleet to settle (generous: a loaded 2-core CI machine).
pub const SETTLE: Duration = Duration::from_secs(40);

/// The `fleetshard` binary under test, with a clean environment: no variable of ours or
/// Argo CD's leaks in from the machine running the tests (each flag also reads one).
pub fn fleetshard() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fleetshard"));
    for (key, _) in std::env::vars() {
        if key.starts_with("FLEETSHARD_") || key.starts_with("ARGOCD_") {
            cmd.env_remove(key);
        }
    }
    cmd
}

/// `fleetshard run` of one replica, `r0`, in local mode: the fleet from the directory
/// `fleet`, statuses in `store`, one shard, a free listen port, its repository cache in
/// `dir/repos` and its standard error in `dir/r0.log`. The caller adds what its test is
/// about (flags, environment) and spawns it.
pub fn local_replica(dir: &std::path::Path, fleet: &std::path::Path, store: &str) -> Command {
    let mut cmd = fleetshard();
    cmd.args(["run", "--identity", "r0", "--store", store, "--shards", "1"])
        .arg("--fleet-dir")
        .arg(fleet)
        .arg("--repo-cache")
        .arg(dir.join("repos"))
        .arg("--listen")
        .arg(format!("127.0.0.1:{}", http::free_port()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("r0.log")).expect("the replica's log"));
    cmd
}

/// `fleetshard apps --output json --store STORE`, parsed.
pub fn apps_json(store: &str) -> Result<Value, String> {
    let out = fleetshard()
        .args(["apps", "--output", "json", "--store", store])
        .output()
        .map_err(|e| e.to_string())?;
    serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())
}

/// A scenario's fixed parameters.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The shard count the fleet should settle on (`--shards N` unless `shards_arg` says
    /// otherwise; a scenario that changes the count updates it).
    pub shards: u32,
    /// `--shards` when it is not the fixed count (`stored:N`, `auto`).
    pub shards_arg: Option<String>,
    /// Clusters in the generated fleet.
    pub clusters: usize,
    /// `--grace-ms`.
    pub grace_ms: u64,
    /// More arguments of `run` (another protocol's).
    pub args: Vec<String>,
    /// More environment of `run` (Argo CD's variables).
    pub env: Vec<(String, String)>,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            shards: 5,
            shards_arg: None,
            clusters: 20,
            grace_ms: 500,
            args: Vec::new(),
            env: Vec::new(),
        }
    }
}

/// A signal the harness sent, dated just before sending.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The replica (index).
    pub replica: usize,
    /// Wall-clock ms just before the signal was sent.
    pub at: u64,
}

/// One `fleetshard run` process (one incarnation of an identity).
#[derive(Debug)]
pub struct Replica {
    /// `--identity`.
    pub identity: String,
    /// How many earlier processes had this identity.
    pub incarnation: usize,
    /// `--listen` port.
    pub port: u16,
    /// `--audit-log`.
    pub audit: PathBuf,
    /// Its stderr.
    pub log: PathBuf,
    /// Its process id.
    pub pid: u32,
    child: Option<Child>,
    /// SIGKILLed, and known dead at this wall-clock ms.
    pub killed_at: Option<u64>,
    /// Exited (and reaped) after SIGTERM.
    pub exit: Option<ExitStatus>,
    /// SIGSTOPped and not continued.
    pub paused: bool,
}

impl Replica {
    /// Running and not paused.
    pub fn live(&self) -> bool {
        self.child.is_some() && !self.paused
    }
}

/// A scenario's store, fleet and replicas. Dropping it kills every process left.
pub struct Harness {
    dir: Option<tempfile::TempDir>,
    /// The store every replica uses.
    pub store: StoreUnderTest,
    /// The parameters.
    pub setup: Setup,
    /// The fleet file.
    pub fleet: PathBuf,
    /// The fleet's cluster ids, sorted.
    pub clusters: Vec<String>,
    /// Every process started, in order.
    pub replicas: Vec<Replica>,
}

impl Harness {
    /// A fleet of `setup.clusters` generated clusters (`fleetshard fleet generate`, seeded)
    /// over `store`, with files in `dir`; no replica yet.
    pub fn new(dir: tempfile::TempDir, store: StoreUnderTest, setup: Setup) -> Harness {
        let fleet = dir.path().join("fleet.json");
        let out = fleetshard()
            .args(["fleet", "generate", "--seed", "7", "--clusters"])
            .arg(setup.clusters.to_string())
            .arg("-o")
            .arg(&fleet)
            .output()
            .expect("running fleetshard fleet generate");
        assert!(
            out.status.success(),
            "fleet generate: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let doc: Value = serde_json::from_slice(&std::fs::read(&fleet).unwrap()).unwrap();
        let mut clusters: Vec<String> = doc["clusters"]
            .as_array()
            .expect("clusters in the generated fleet")
            .iter()
            .map(|c| c["id"].as_str().expect("a cluster id").to_owned())
            .collect();
        clusters.sort();
        assert_eq!(clusters.len(), setup.clusters);
        Harness {
            dir: Some(dir),
            store,
            setup,
            fleet,
            clusters,
            replicas: Vec::new(),
        }
    }

    fn dir(&self) -> &std::path::Path {
        self.dir.as_ref().expect("the scenario directory").path()
    }

    /// Starts a replica with `identity` and returns its index.
    pub fn start(&mut self, identity: &str) -> usize {
        self.start_with(identity, &[])
    }

    /// Starts a replica with `identity` and `extra` arguments of `run`; returns its index.
    pub fn start_with(&mut self, identity: &str, extra: &[&str]) -> usize {
        let incarnation = self
            .replicas
            .iter()
            .filter(|r| r.identity == identity)
            .count();
        let stem = format!("{identity}.{incarnation}");
        let audit = self.dir().join(format!("{stem}.audit.jsonl"));
        let log = self.dir().join(format!("{stem}.log"));
        let port = http::free_port();
        let shards =
            (self.setup.shards_arg.clone()).unwrap_or_else(|| self.setup.shards.to_string());
        let child = fleetshard()
            .envs(self.store.env())
            .args(["--log-level", "info", "run", "--identity", identity])
            .args(["--store", &self.store.url(), "--root", &self.store.root()])
            .args(["--shards", &shards])
            .args(["--grace-ms", &self.setup.grace_ms.to_string()])
            .arg("--fleet")
            .arg(&self.fleet)
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--audit-log")
            .arg(&audit)
            .args(&self.setup.args)
            .envs(self.setup.env.iter().map(|(k, v)| (k, v)))
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("creating the replica's log"))
            .spawn()
            .expect("starting fleetshard run");
        self.replicas.push(Replica {
            identity: identity.to_owned(),
            incarnation,
            port,
            audit,
            log,
            pid: child.id(),
            child: Some(child),
            killed_at: None,
            exit: None,
            paused: false,
        });
        self.replicas.len() - 1
    }

    /// Indices of the replicas running and not paused.
    pub fn live(&self) -> Vec<usize> {
        (0..self.replicas.len())
            .filter(|&i| self.replicas[i].live())
            .collect()
    }

    fn signal(&self, i: usize, sig: &str) {
        super::signal(self.replicas[i].pid, sig);
    }

    /// `kill -9`; returns when the process is reaped (its ownership ends then at the latest).
    pub fn kill9(&mut self, i: usize) -> Failure {
        let at = unix_ms();
        self.signal(i, "-KILL");
        let r = &mut self.replicas[i];
        r.child
            .take()
            .expect("a running replica")
            .wait()
            .expect("reaping");
        r.killed_at = Some(unix_ms());
        r.paused = false;
        Failure { replica: i, at }
    }

    /// SIGSTOP.
    pub fn pause(&mut self, i: usize) -> Failure {
        let at = unix_ms();
        self.signal(i, "-STOP");
        self.replicas[i].paused = true;
        Failure { replica: i, at }
    }

    /// SIGCONT; returns when it was sent.
    pub fn resume(&mut self, i: usize) -> u64 {
        let at = unix_ms();
        self.signal(i, "-CONT");
        self.replicas[i].paused = false;
        at
    }

    /// SIGTERM (graceful release); see [`Harness::wait_exit`].
    pub fn term(&mut self, i: usize) -> Failure {
        let at = unix_ms();
        self.signal(i, "-TERM");
        Failure { replica: i, at }
    }

    /// Waits for a replica to exit and reaps it.
    pub fn wait_exit(&mut self, i: usize) -> ExitStatus {
        let r = &mut self.replicas[i];
        let child = r.child.as_mut().expect("a running replica");
        let st = wait_for(&format!("{} to exit", r.identity), SETTLE, || {
            child
                .try_wait()
                .map_err(|e| e.to_string())?
                .ok_or_else(|| "running".to_owned())
        });
        r.child = None;
        r.exit = Some(st);
        st
    }

    /// Whether a replica has exited (reaping it if so), without waiting.
    pub fn exited(&mut self, i: usize) -> bool {
        let r = &mut self.replicas[i];
        let Some(child) = r.child.as_mut() else {
            return r.exit.is_some() || r.killed_at.is_some();
        };
        match child.try_wait().expect("checking a replica") {
            Some(st) => {
                r.child = None;
                r.exit = Some(st);
                true
            }
            None => false,
        }
    }

    /// `fleetshard scale N`: the desired shard count, followed by replicas started with
    /// `--shards stored`; the fleet is then expected to settle on `n` shards.
    pub fn scale(&mut self, n: u32) {
        let out = fleetshard()
            .envs(self.store.env())
            .args(["scale", &n.to_string(), "--store", &self.store.url()])
            .args(["--root", &self.store.root()])
            .output()
            .expect("running fleetshard scale");
        assert!(
            out.status.success(),
            "scale {n}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.setup.shards = n;
    }

    /// Every audit log replayed (panics on a log that contradicts itself).
    pub fn history(&self) -> History {
        let sources = self
            .replicas
            .iter()
            .map(|r| Source {
                name: format!("{}#{}", r.identity, r.incarnation),
                identity: r.identity.clone(),
                events: read_log(&r.audit).unwrap_or_else(|e| panic!("{e}")),
                killed_at: r.killed_at,
                exited: r.exit.is_some(),
            })
            .collect();
        History::build(sources).unwrap_or_else(|e| panic!("audit logs: {e}"))
    }

    /// `fleetshard status --output json`.
    pub fn status(&self) -> Result<Value, String> {
        let out = fleetshard()
            .envs(self.store.env())
            .args(["status", "--output", "json", "--store", &self.store.url()])
            .args(["--root", &self.store.root()])
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!("status: {}", String::from_utf8_lossy(&out.stderr)));
        }
        serde_json::from_slice(&out.stdout).map_err(|e| format!("status JSON: {e}"))
    }

    /// `status` once a read saw every holder renewing (no cluster unowned). A read
    /// judges a holder by seeing its lease renewed within about 1.3 s, so on a loaded
    /// machine it can catch a replica starved past a renewal and rightly show that
    /// replica's clusters at risk; the next read sees it renew.
    pub fn status_all_owned(&self) -> Value {
        wait_for("status to see every holder renewing", SETTLE, || {
            let status = self.status()?;
            if status["unowned"] == serde_json::json!([]) {
                Ok(status)
            } else {
                Err(format!("status: unowned {}", status["unowned"]))
            }
        })
    }

    /// A replica's `/metrics` value, if it answers.
    pub fn metric(&self, i: usize, name: &str) -> Option<f64> {
        let (_, body) = http::get(self.replicas[i].port, "/metrics")?;
        http::metric(&body, name)
    }

    /// Whether the replica says it is the distributor.
    pub fn is_distributor(&self, i: usize) -> bool {
        self.metric(i, "fleetshard_is_distributor") == Some(1.0)
    }

    /// The shard the replica says it holds.
    pub fn shard_of(&self, i: usize) -> Option<u32> {
        self.metric(i, "fleetshard_shard")
            .filter(|s| *s >= 0.0)
            .map(|s| s as u32)
    }

    /// The process has exited though nobody asked it to (it is a zombie until reaped).
    fn zombie(&self, i: usize) -> bool {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.replicas[i].pid));
        // The state follows the parenthesised command name.
        stat.ok()
            .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| rest.starts_with('Z')))
            .unwrap_or(true)
    }

    /// `/readyz` answers 200.
    pub fn ready(&self, i: usize) -> bool {
        http::get(self.replicas[i].port, "/readyz").is_some_and(|(c, _)| c == 200)
    }

    /// Why the fleet is not settled, or Ok: [`Harness::audit_settled`]; every replica
    /// holding a shard owns a cluster; every cluster owned by the owner `status` names; the
    /// committed assignment is for the expected shard count; and when every shard is
    /// held, no cluster displaced from its home.
    pub fn settled(&self) -> Result<(), String> {
        let (owners, holders) = self.audit_settled()?;
        for &i in &holders {
            let id = &self.replicas[i].identity;
            if !owners.values().any(|o| o[0] == *id) {
                return Err(format!("{id} holds a shard and no cluster"));
            }
        }
        let status = self.status()?;
        if status["unowned"] != serde_json::json!([]) {
            return Err(format!("status: unowned {}", status["unowned"]));
        }
        for row in status["clusters"].as_array().ok_or("status: no clusters")? {
            let id = row["id"].as_str().unwrap_or_default();
            let said = row["owner"].as_str();
            if owners.get(id).map(|o| o[0].as_str()) != said {
                return Err(format!(
                    "status says {id} is {said:?}'s, audit {:?}",
                    owners.get(id)
                ));
            }
        }
        let (_, doc) = self.store.read_root()?;
        let doc = doc.ok_or("no assignment committed")?;
        if doc.shards != self.setup.shards {
            return Err(format!(
                "assignment for {} shards, want {}",
                doc.shards, self.setup.shards
            ));
        }
        if holders.len() == self.setup.shards as usize && !doc.homes.is_empty() {
            return Err(format!("{} clusters still away from home", doc.homes.len()));
        }
        Ok(())
    }

    /// Why the fleet is not settled by the replicas' own account (whatever the protocol),
    /// or the owners of the clusters and the replicas holding shards: every live replica
    /// ready; every cluster owned by exactly one live replica (audit logs); as many shards
    /// held as live replicas allow. Panics on a replica that exited on its own.
    pub fn audit_settled(&self) -> Result<(Owners, Vec<usize>), String> {
        let live = self.live();
        for &i in &live {
            if self.zombie(i) {
                panic!(
                    "{} exited on its own; see its log {}",
                    self.replicas[i].identity,
                    self.replicas[i].log.display()
                );
            }
            if !self.ready(i) {
                return Err(format!("{} not ready", self.replicas[i].identity));
            }
        }
        let live_ids: BTreeSet<&str> = live
            .iter()
            .map(|&i| self.replicas[i].identity.as_str())
            .collect();
        let owners = self.history().current_owners();
        for c in &self.clusters {
            match owners.get(c).map(Vec::as_slice) {
                Some([one]) if live_ids.contains(one.as_str()) => {}
                other => return Err(format!("cluster {c} owned by {other:?}")),
            }
        }
        let holders: Vec<usize> = live
            .iter()
            .copied()
            .filter(|&i| self.shard_of(i).is_some())
            .collect();
        let want = live.len().min(self.setup.shards as usize);
        if holders.len() != want {
            return Err(format!("{} of {want} shards held", holders.len()));
        }
        Ok((owners, holders))
    }

    /// Waits until [`Harness::settled`].
    pub fn wait_settled(&self, what: &str) -> u64 {
        wait_for(&format!("the fleet to settle ({what})"), SETTLE, || {
            self.settled()
        });
        unix_ms()
    }

    /// Waits until every cluster the failed replica held is acquired by another process;
    /// returns the time from the signal to the last acquire, in ms.
    pub fn wait_takeover(&self, f: &Failure) -> u64 {
        let who = &self.replicas[f.replica].identity;
        wait_for(
            &format!("{who}'s clusters to be taken over"),
            SETTLE,
            || {
                let t = self.history().takeover(f.replica, f.at);
                t.complete()
                    .ok_or_else(|| format!("pending {:?} of {}", t.pending(), t.clusters.len()))
            },
        )
    }

    /// (a) and (b) over the whole history since `from` (when the fleet first settled): no
    /// overlap, and no handover that may have waited for a lease — every stretch without
    /// an owner that began with a release on purpose ended less than `lease_ms` after it
    /// ([`History::handovers_that_waited`]; `lease_ms` is how long a successor taking over
    /// through expiry waits after the leaver's last change: the lease duration, or Argo CD
    /// mode's stale-after). Stretches after a kill or a lapse are not bounded here: the
    /// scenarios wait for their takeover ([`Harness::wait_takeover`]) and check it came no
    /// sooner than the protocol allows.
    pub fn check_history(&self, from: u64, lease_ms: u64) -> History {
        let hist = self.history();
        let name = self.store.name();
        hist.check_no_overlap()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let waited = hist.handovers_that_waited(&self.clusters, from, unix_ms(), lease_ms);
        if let Some(g) = waited.first() {
            let leaver = g.last_owner.map(|i| hist.sources[i].name.as_str());
            panic!(
                "{name}: {} handover(s) took a lease ({lease_ms} ms) or more after the release, \
                 as a successor waiting for the leaver's lease would: e.g. {} released by \
                 {leaver:?} at {}, unowned for {} ms{}; {waited:?}\n{}",
                waited.len(),
                g.cluster,
                g.start,
                g.len(),
                if g.open { " and still unowned" } else { "" },
                hist.cluster_events(&g.cluster)
            );
        }
        hist
    }

    /// The structure of a graceful handover: the leaver's shard record
    /// is still its own and marked released (the others took over through the release, not
    /// through the lease's expiry), and every stop it logged after the signal is a
    /// release, none dated at a lapse. Call after the leaver has exited.
    pub fn check_released(&self, f: &Failure, shard: u32) {
        let who = &self.replicas[f.replica].identity;
        let name = self.store.name();
        let status = self.status().unwrap_or_else(|e| panic!("{name}: {e}"));
        let row = status["shards"]
            .as_array()
            .and_then(|rows| rows.iter().find(|r| r["shard"] == shard))
            .unwrap_or_else(|| panic!("{name}: no record of shard {shard}: {status}"));
        assert!(
            row["holder"] == who.as_str() && row["released"] == true,
            "{name}: shard {shard} after {who} left gracefully: {row}"
        );
        let hist = self.history();
        let lapsed: Vec<_> = hist
            .intervals
            .iter()
            .filter(|iv| iv.source == f.replica && iv.lapsed)
            .collect();
        assert!(
            lapsed.is_empty(),
            "{name}: {who} lost clusters to its lease instead of releasing them: {lapsed:?}"
        );
    }

    /// The store-wide revision (writes so far) in this scenario's store.
    pub fn revision(&self) -> u64 {
        self.store.read_root().expect("reading the store").0
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        for r in &mut self.replicas {
            if let Some(mut c) = r.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        if std::thread::panicking() {
            // Keep the files for a post-mortem and show the end of every replica's log.
            let dir = self.dir.take().map(tempfile::TempDir::keep);
            eprintln!("scenario files kept in {dir:?}");
            for r in &self.replicas {
                let text = std::fs::read_to_string(&r.log).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(15).collect();
                eprintln!(
                    "--- {}#{} (pid {}) log tail:",
                    r.identity, r.incarnation, r.pid
                );
                for l in tail.into_iter().rev() {
                    eprintln!("{l}");
                }
            }
        }
    }
}
