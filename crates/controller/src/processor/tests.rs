//! The worker pools with a scripted reconciler, under paused time.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use fleetshard_core::{App, Cluster};
use tokio::time::{Instant, sleep};

use super::*;
use crate::RateLimiterConfig;
use crate::shard_work::WorkMetrics;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Call {
    Refresh(String),
    Operate(String),
}

/// Answers from a per-app script (then success), taking `work` per call, logging calls
/// with their start time.
#[derive(Default)]
struct Scripted {
    refresh: Mutex<HashMap<String, VecDeque<Result<(), ReconcileError>>>>,
    operate: Mutex<HashMap<String, VecDeque<Result<Operated, ReconcileError>>>>,
    panic_on: Mutex<Option<String>>,
    work: Duration,
    log: Mutex<Vec<(Call, Instant)>>,
}

impl Scripted {
    fn calls(&self) -> Vec<Call> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .map(|(c, _)| c.clone())
            .collect()
    }

    fn times(&self) -> Vec<Instant> {
        self.log.lock().unwrap().iter().map(|(_, t)| *t).collect()
    }
}

impl Reconciler for Scripted {
    async fn refresh(&self, app: &AppKey) -> Result<(), ReconcileError> {
        let key = app.to_string();
        self.log
            .lock()
            .unwrap()
            .push((Call::Refresh(key.clone()), Instant::now()));
        if self.panic_on.lock().unwrap().as_deref() == Some(key.as_str()) {
            panic!("scripted panic");
        }
        sleep(self.work).await;
        let next = self
            .refresh
            .lock()
            .unwrap()
            .get_mut(&key)
            .and_then(VecDeque::pop_front);
        next.unwrap_or(Ok(()))
    }

    async fn operate(&self, app: &AppKey) -> Result<Operated, ReconcileError> {
        let key = app.to_string();
        self.log
            .lock()
            .unwrap()
            .push((Call::Operate(key.clone()), Instant::now()));
        sleep(self.work).await;
        let next = self
            .operate
            .lock()
            .unwrap()
            .get_mut(&key)
            .and_then(VecDeque::pop_front);
        next.unwrap_or(Ok(Operated::Idle))
    }
}

/// Cluster "c1" (owned) with apps `ns/a`, `ns/b`; "c2" (not owned) with `ns/z`. Nothing
/// is queued: each test queues what it needs. Retries back off from 1 s (whole
/// milliseconds: tokio's timers have 1 ms resolution).
fn filter() -> Arc<ShardWork> {
    let limits = RateLimiterConfig {
        base_delay: Duration::from_secs(1),
        max_delay: Duration::from_secs(60),
        ..RateLimiterConfig::default()
    };
    let q = || WorkQueue::new(limits, None).unwrap();
    let f = ShardWork::new(q(), q(), WorkMetrics::default());
    let clusters = [
        Cluster::new("c1", "https://one"),
        Cluster::new("c2", "https://two"),
    ];
    let apps = [
        App::to_server("ns", "a", "https://one"),
        App::to_server("ns", "b", "https://one/"),
        App::to_server("ns", "z", "https://two"),
    ];
    f.set_inventory(&clusters, &apps);
    f.start_cluster("c1");
    f.refresh_queue().remove_many(&[app("a"), app("b")]);
    f
}

fn start(rec: &Arc<Scripted>, workers: usize) -> Processors {
    let cfg = PoolConfig {
        status_processors: workers,
        operation_processors: workers,
        ..PoolConfig::default()
    };
    Processors::start(cfg, filter(), rec.clone()).unwrap()
}

/// Lets the workers run until nothing is queued, waiting or in flight.
async fn settle(p: &Processors) {
    let (r, o) = (p.work().refresh_queue(), p.work().operation_queue());
    loop {
        sleep(Duration::from_millis(1)).await;
        let busy = [r, o]
            .iter()
            .any(|q| !q.is_empty() || q.waiting() > 0 || q.processing() > 0);
        if !busy {
            return;
        }
    }
}

fn app(name: &str) -> AppKey {
    AppKey::new("ns", name)
}

fn refresh(n: &str) -> Call {
    Call::Refresh(format!("ns/{n}"))
}

fn operate(n: &str) -> Call {
    Call::Operate(format!("ns/{n}"))
}

#[tokio::test(start_paused = true)]
async fn a_refresh_hands_off_to_operation_and_a_finished_operation_refreshes() {
    let rec = Arc::new(Scripted::default());
    rec.operate
        .lock()
        .unwrap()
        .insert("ns/a".into(), [Ok(Operated::Finished)].into());
    let p = start(&rec, 1);
    p.work().refresh_queue().add(app("a"));
    settle(&p).await;
    assert_eq!(
        rec.calls(),
        [refresh("a"), operate("a"), refresh("a"), operate("a")],
        "refresh → operation (finished) → refresh → operation (idle) → nothing"
    );
    assert_eq!(PoolStats::get(&p.stats().refreshed), 2);
    assert_eq!(PoolStats::get(&p.stats().operated), 2);
    p.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn retry_later_backs_off_and_success_forgets() {
    let rec = Arc::new(Scripted::default());
    let busy = || Err(ReconcileError::RetryLater("cluster unreachable".into()));
    rec.refresh
        .lock()
        .unwrap()
        .insert("ns/a".into(), [busy(), busy(), busy()].into());
    let p = start(&rec, 2);
    p.work().refresh_queue().add(app("a"));
    settle(&p).await;
    let calls = rec.calls();
    assert_eq!(
        calls[..4],
        [refresh("a"), refresh("a"), refresh("a"), refresh("a")]
    );
    assert_eq!(calls[4..], [operate("a")], "handed off once it succeeded");
    let t = rec.times();
    let gaps: Vec<Duration> = t.windows(2).take(3).map(|w| w[1] - w[0]).collect();
    assert_eq!(
        gaps,
        [
            Duration::from_millis(1000),
            Duration::from_millis(1500),
            Duration::from_millis(2250)
        ]
    );
    assert_eq!(
        p.work().refresh_queue().num_requeues(&app("a")),
        0,
        "forgotten"
    );
    assert_eq!(PoolStats::get(&p.stats().retried), 3);
    p.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn retry_after_waits_exactly_the_delay_given() {
    let rec = Arc::new(Scripted::default());
    let unreachable = || {
        Err(ReconcileError::RetryAfter {
            reason: "cluster unreachable".into(),
            after: Duration::from_secs(10),
        })
    };
    rec.refresh
        .lock()
        .unwrap()
        .insert("ns/a".into(), [unreachable(), unreachable()].into());
    let p = start(&rec, 1);
    p.work().refresh_queue().add(app("a"));
    settle(&p).await;
    assert_eq!(
        rec.calls(),
        [refresh("a"), refresh("a"), refresh("a"), operate("a")]
    );
    let t = rec.times();
    let gaps: Vec<Duration> = t.windows(2).take(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(gaps, [Duration::from_secs(10), Duration::from_secs(10)]);
    assert_eq!(PoolStats::get(&p.stats().retried), 2);
    p.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_failure_is_not_retried_and_a_panic_is_a_failure() {
    let rec = Arc::new(Scripted::default());
    rec.refresh.lock().unwrap().insert(
        "ns/a".into(),
        [Err(ReconcileError::Failed("bad yaml".into()))].into(),
    );
    *rec.panic_on.lock().unwrap() = Some("ns/b".into());
    let p = start(&rec, 1);
    p.work().refresh_queue().add(app("b"));
    p.work().refresh_queue().add(app("a"));
    settle(&p).await;
    assert_eq!(rec.calls(), [refresh("b"), refresh("a")]);
    assert_eq!(PoolStats::get(&p.stats().failed), 2);
    // The single refresh worker survived the panic.
    p.work().refresh_queue().add(app("a"));
    settle(&p).await;
    assert_eq!(rec.calls()[2..], [refresh("a"), operate("a")]);
    p.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn items_of_clusters_not_owned_or_unknown_are_skipped() {
    let rec = Arc::new(Scripted::default());
    let p = start(&rec, 2);
    // z: cluster c2, not owned; gone: not in the inventory.
    p.work()
        .refresh_queue()
        .add_many([app("a"), app("z"), app("b"), app("gone")]);
    settle(&p).await;
    let mut calls = rec.calls();
    calls.sort_by_key(|c| format!("{c:?}"));
    assert_eq!(
        calls,
        [operate("a"), operate("b"), refresh("a"), refresh("b")]
    );
    assert_eq!(PoolStats::get(&p.stats().skipped), 2);
    assert_eq!(p.work().metrics().not_owned.get(), 1);
    p.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn shutdown_waits_for_work_in_flight_and_drops_the_rest() {
    let rec = Arc::new(Scripted {
        work: Duration::from_secs(5),
        ..Scripted::default()
    });
    let p = start(&rec, 1);
    // One refresh worker: it takes a, b stays queued.
    p.work().refresh_queue().add_many([app("a"), app("b")]);
    sleep(Duration::from_secs(1)).await;
    assert_eq!(rec.calls().len(), 1);
    let t = Instant::now();
    let stats = p.stats().clone();
    p.shutdown().await;
    assert_eq!(
        Instant::now() - t,
        Duration::from_secs(4),
        "the refresh in flight finished"
    );
    assert_eq!(PoolStats::get(&stats.refreshed), 1);
    assert_eq!(
        rec.calls().len(),
        1,
        "the queued app and the handoff were dropped"
    );
}

#[tokio::test(start_paused = true)]
async fn empty_pools_are_refused() {
    let rec = Arc::new(Scripted::default());
    let cfg = PoolConfig {
        operation_processors: 0,
        ..PoolConfig::default()
    };
    let err = Processors::start(cfg, filter(), rec).unwrap_err();
    assert_eq!(
        err,
        ConfigError::NoWorkers {
            field: "operation_processors"
        }
    );
    assert_eq!(err.to_string(), "operation_processors must be at least 1");
}
