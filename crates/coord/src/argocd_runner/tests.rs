//! The heartbeat-mode runner over `MemoryStore` (and wrappers that lose replies, fail or
//! count writes) under paused time. Scenarios are in `tests/scenarios.rs`.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use fleetshard_core::argo::{ArgoAlgorithm, ArgoControllerAssignment};

use super::*;
use crate::argocd::{MAPPING_KEY, ShardEntry, decode};
use crate::runner::Ownership;
use crate::store::Precondition;
use crate::store::memory::MemoryStore;

mod scenarios;

/// H in every test (Argo CD's default); S = 3H.
const H: Duration = Duration::from_secs(10);
const S: Duration = Duration::from_secs(30);

fn clusters(n: usize) -> Vec<Cluster> {
    (0..n)
        .map(|i| Cluster::new(format!("c{i:02}"), format!("https://c{i}.example")))
        .collect()
}

/// A wall clock that advances with (paused) tokio time from a fixed date.
fn wall() -> WallClock {
    let origin = Instant::now();
    Arc::new(move || WallTime::from_unix_seconds(1_795_000_000).saturating_add(origin.elapsed()))
}

/// A store wrapper: counts this replica's confirmed writes (and when the last was sent),
/// can lose write replies (the write applies, the caller hears `Unavailable`), and can be
/// cut off entirely.
struct Wrapped {
    inner: Arc<dyn Store>,
    writes: AtomicU64,
    last_write_sent: Mutex<Option<Instant>>,
    lose_every_other_reply: AtomicBool,
    flip: AtomicBool,
    /// Cut off: every call fails with `Unavailable` and nothing applies (a partition).
    cut: AtomicBool,
    /// Added to every read and write.
    delay: Mutex<Duration>,
}

impl Wrapped {
    fn new(inner: &Arc<dyn Store>) -> Arc<Wrapped> {
        Arc::new(Wrapped {
            inner: inner.clone(),
            writes: AtomicU64::new(0),
            last_write_sent: Mutex::new(None),
            lose_every_other_reply: AtomicBool::new(false),
            flip: AtomicBool::new(false),
            cut: AtomicBool::new(false),
            delay: Mutex::new(Duration::ZERO),
        })
    }

    /// Fails if cut off, after the configured delay.
    async fn gate(&self) -> Result<(), StoreError> {
        let delay = *self.delay.lock().unwrap();
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        if self.cut.load(Ordering::SeqCst) {
            return Err(StoreError::Unavailable("cut off".into()));
        }
        Ok(())
    }
}

impl Store for Wrapped {
    fn get<'a>(
        &'a self,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<crate::store::Entry>, StoreError>> {
        self.inner.get(key)
    }
    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Listing, StoreError>> {
        Box::pin(async move {
            self.gate().await?;
            self.inner.list(prefix).await
        })
    }
    fn put<'a>(
        &'a self,
        key: &'a str,
        value: Vec<u8>,
        pre: Precondition,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        Box::pin(async move {
            let sent = Instant::now();
            self.gate().await?;
            let r = self.inner.put(key, value, pre).await;
            if r.is_ok() {
                self.writes.fetch_add(1, Ordering::SeqCst);
                *self.last_write_sent.lock().unwrap() = Some(sent);
                if self.lose_every_other_reply.load(Ordering::SeqCst)
                    && !self.flip.fetch_xor(true, Ordering::SeqCst)
                {
                    return Err(StoreError::Unavailable("reply lost".into()));
                }
            }
            r
        })
    }
    fn delete<'a>(
        &'a self,
        key: &'a str,
        pre: Precondition,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.inner.delete(key, pre)
    }
    fn wait_for_change<'a>(
        &'a self,
        prefix: &'a str,
        since: u64,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        Box::pin(async move {
            self.gate().await?;
            self.inner.wait_for_change(prefix, since).await
        })
    }
    fn describe(&self) -> String {
        "wrapped".into()
    }
}

struct Node {
    name: String,
    store: Arc<Wrapped>,
    shutdown: watch::Sender<bool>,
    status: watch::Receiver<ArgoStatus>,
    task: tokio::task::JoinHandle<bool>,
}

/// Everything a scenario shares: the store, the fleet, the count and the event timeline.
struct World {
    store: Arc<dyn Store>,
    clusters: Vec<Cluster>,
    count: watch::Sender<u32>,
    events: mpsc::UnboundedSender<OwnershipChange>,
    /// (when reported, the change), stamped as they arrive.
    timeline: Arc<Mutex<Vec<(Instant, OwnershipChange)>>>,
}

impl World {
    fn new(n_clusters: usize, replicas: u32) -> World {
        let (tx, mut rx) = mpsc::unbounded_channel::<OwnershipChange>();
        let timeline = Arc::new(Mutex::new(Vec::new()));
        let t = timeline.clone();
        tokio::spawn(async move {
            while let Some(e) = rx.recv().await {
                t.lock().unwrap().push((Instant::now(), e));
            }
        });
        World {
            store: Arc::new(MemoryStore::new()),
            clusters: clusters(n_clusters),
            count: watch::channel(replicas).0,
            events: tx,
            timeline,
        }
    }

    fn cfg(name: &str) -> ArgoConfig {
        ArgoConfig {
            jitter_seed: name.bytes().map(u64::from).sum::<u64>() * 7919,
            ..ArgoConfig::new(name)
        }
    }

    fn spawn(&self, name: &str) -> Node {
        self.spawn_with(Self::cfg(name), None)
    }

    /// Spawns a runner; with `running`, it is polled only while that is true (SIGSTOP).
    fn spawn_with(&self, cfg: ArgoConfig, running: Option<watch::Receiver<bool>>) -> Node {
        let name = cfg.identity.clone();
        let store = Wrapped::new(&self.store);
        let (runner, status) = ArgoRunner::new(
            store.clone(),
            cfg,
            self.clusters.clone(),
            &[],
            self.count.subscribe(),
            wall(),
            self.events.clone(),
        )
        .unwrap();
        let (shutdown, rx) = watch::channel(false);
        let task = match running {
            None => tokio::spawn(runner.run(rx)),
            Some(running) => tokio::spawn(pausable(runner.run(rx), running)),
        };
        Node {
            name,
            store,
            shutdown,
            status,
            task,
        }
    }

    /// The mapping as stored.
    async fn map(&self) -> Vec<ShardEntry> {
        match self.store.get(MAPPING_KEY).await.unwrap() {
            Some(e) => decode(std::str::from_utf8(&e.value).unwrap()).unwrap(),
            None => Vec::new(),
        }
    }

    /// Argo CD's shard of each cluster id among `replicas`.
    fn expected(&self, replicas: u32) -> BTreeMap<String, i64> {
        let a =
            ArgoControllerAssignment::compute(ArgoAlgorithm::Legacy, replicas, &self.clusters, &[]);
        self.clusters
            .iter()
            .zip(a.shards())
            .map(|(c, s)| (c.id.clone(), *s))
            .collect()
    }

    /// Checks the timeline: no cluster is acted on by two replicas at once. A stop counts
    /// from `lapsed_at` when it has one (the replica was paused past its validity and
    /// reports late). Returns the holder of each cluster at the end.
    fn check_timeline(&self) -> BTreeMap<String, String> {
        let events = self.timeline.lock().unwrap().clone();
        // (cluster) → list of (identity, from, until)
        let mut open: BTreeMap<(String, String), Instant> = BTreeMap::new();
        let mut spans: Vec<(String, String, Instant, Option<Instant>)> = Vec::new();
        for (at, e) in &events {
            match &e.change {
                Ownership::Started(c) => {
                    assert!(open.insert((c.clone(), e.identity.clone()), *at).is_none());
                }
                Ownership::Stopped(c) => {
                    let from = open
                        .remove(&(c.clone(), e.identity.clone()))
                        .expect("a stop follows a start");
                    spans.push((
                        c.clone(),
                        e.identity.clone(),
                        from,
                        Some(e.lapsed_at.unwrap_or(*at)),
                    ));
                }
            }
        }
        for ((c, id), from) in &open {
            spans.push((c.clone(), id.clone(), *from, None));
        }
        let before = |t: Instant, end: Option<Instant>| end.is_none_or(|e| t < e);
        for (i, a) in spans.iter().enumerate() {
            for b in &spans[i + 1..] {
                if a.0 == b.0 && a.1 != b.1 {
                    assert!(
                        !(before(a.2, b.3) && before(b.2, a.3)),
                        "{} acted on by {} and {} at once: {a:?} {b:?}",
                        a.0,
                        a.1,
                        b.1
                    );
                }
            }
        }
        open.into_keys().collect()
    }
}

/// Who acts on what, from the status snapshots; panics on a cluster acted on twice.
fn owners(nodes: &[&Node]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for n in nodes {
        for c in &n.status.borrow().acting {
            if let Some(other) = out.insert(c.clone(), n.name.clone()) {
                panic!("{c} acted on by {other} and {}", n.name);
            }
        }
    }
    out
}

/// Polls `fut` only while `running` is true: a process under SIGSTOP.
async fn pausable<F: std::future::Future>(fut: F, mut running: watch::Receiver<bool>) -> F::Output {
    futures::pin_mut!(fut);
    loop {
        if *running.borrow_and_update() {
            // A pause takes effect before the future is polled again (an unbiased select
            // could poll it once more after the pause, at random).
            tokio::select! {
                biased;
                _ = running.changed() => {}
                out = &mut fut => return out,
            }
        } else {
            let _ = running.changed().await;
        }
    }
}

async fn sleep(d: Duration) {
    tokio::time::sleep(d).await;
}

#[test]
fn readiness_follows_argo_semantics_without_w15() {
    let now = Instant::now();
    let mut s = ArgoStatus::default();
    assert!(s.readiness(now).unwrap_err().contains("not read yet"));
    s.listed = true;
    s.replicas = 3;
    assert!(s.readiness(now).unwrap_err().contains("claiming"));
    s.claim = Some(ClaimStatus::Spare);
    assert!(s.readiness(now).unwrap().contains("spare"));
    s.claim = Some(ClaimStatus::PinOutOfRange {
        pin: 7,
        replicas: 3,
    });
    assert!(s.readiness(now).unwrap_err().contains("outside"));
    s.claim = Some(ClaimStatus::WaitingForPinned {
        shard: 1,
        holder: "x".into(),
    });
    assert!(s.readiness(now).is_ok());
    s.shard = Some(1);
    s.valid_until = Some(now + H);
    assert_eq!(s.readiness(now).unwrap(), "holding shard 1");
    let late = s.readiness(now + H * 2).unwrap_err();
    assert!(late.contains("heartbeat not confirmed"), "{late}");
    s.replicas = 0;
    assert!(s.readiness(now).unwrap_err().contains("0 replicas"));
    s.replicas = 3;
    s.stopping = true;
    assert_eq!(s.readiness(now).unwrap_err(), "stopping");
}

/// A replica without a shard is a rolling update's surge pod: it reports ready only once a
/// shard released to it would be started at once (the map watched for the start delay), so
/// that the old pod stopped next does not leave its clusters unowned for that delay.
#[test]
fn a_spare_is_ready_only_once_it_would_start_a_released_shard_at_once() {
    let now = Instant::now();
    let mut s = ArgoStatus {
        listed: true,
        replicas: 3,
        claim: Some(ClaimStatus::Spare),
        fast_takeover_from: Some(now + H * 3),
        ..ArgoStatus::default()
    };
    let early = s.readiness(now).unwrap_err();
    assert!(early.contains("watching the shard mapping 3"), "{early}");
    assert!(s.readiness(now + H * 3).unwrap().contains("spare"));
    s.claim = Some(ClaimStatus::WaitingForPinned {
        shard: 1,
        holder: "x".into(),
    });
    assert!(s.readiness(now + H).is_err());
    assert!(s.readiness(now + H * 4).is_ok());
    // A holder is ready on its heartbeat alone: the delay concerns shards it would gain.
    s.shard = Some(1);
    s.valid_until = Some(now + H * 2);
    assert_eq!(s.readiness(now).unwrap(), "holding shard 1");
}

/// Counts stops and takes `took` for each, like a controller draining work in flight.
struct SlowStops {
    took: Duration,
    done: Arc<AtomicU64>,
}

impl StopHook for SlowStops {
    fn stop(&self, _cluster: String) -> BoxFuture<'static, ()> {
        let (took, done) = (self.took, self.done.clone());
        Box::pin(async move {
            tokio::time::sleep(took).await;
            done.fetch_add(1, Ordering::SeqCst);
        })
    }
}

#[tokio::test(start_paused = true)]
async fn with_a_stop_hook_the_entry_is_freed_and_stops_reported_only_after_the_work_ended() {
    let w = World::new(4, 1);
    let done = Arc::new(AtomicU64::new(0));
    let (runner, status) = ArgoRunner::new(
        w.store.clone(),
        World::cfg("a"),
        w.clusters.clone(),
        &[],
        w.count.subscribe(),
        wall(),
        w.events.clone(),
    )
    .unwrap();
    let runner = runner.with_stop_hook(Arc::new(SlowStops {
        took: Duration::from_secs(1),
        done: done.clone(),
    }));
    let (shutdown, rx) = watch::channel(false);
    let task = tokio::spawn(runner.run(rx));
    // A fresh map: the clusters start after the start delay (S).
    sleep(S + H).await;
    assert_eq!(status.borrow().acting.len(), 4, "{:?}", *status.borrow());
    let asked = Instant::now();
    shutdown.send(true).unwrap();
    sleep(Duration::from_millis(500)).await;
    assert_eq!(done.load(Ordering::SeqCst), 0, "the work is still draining");
    assert!(
        w.map().await.iter().any(|e| e.controller_name == "a"),
        "the entry is not freed while the work drains"
    );
    assert!(task.await.unwrap(), "freed once the work ended");
    assert_eq!(done.load(Ordering::SeqCst), 4);
    assert!(w.map().await.iter().all(|e| e.controller_name != "a"));
    let stops: Vec<Instant> = w
        .timeline
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, e)| matches!(e.change, Ownership::Stopped(_)))
        .map(|(at, _)| *at)
        .collect();
    assert_eq!(stops.len(), 4);
    assert!(
        stops.iter().all(|at| *at >= asked + Duration::from_secs(1)),
        "each stop is reported once its work ended"
    );
}
