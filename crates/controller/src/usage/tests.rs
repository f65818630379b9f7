//! The workers' reconcile CPU time per cluster, under a CPU clock the reconciler drives.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fleetshard_core::{App, Cluster, Destination};
use tokio::time::sleep;

use super::{CpuClock, CpuMeter, ThreadCpuClock};
use crate::processor::{Operated, PoolConfig, Processors, ReconcileError, Reconciler};
use crate::shard_work::{ShardWork, WorkMetrics};
use crate::{AppKey, RateLimiterConfig, WorkQueue};

/// A CPU clock that moves only when told (shared by every "thread").
#[derive(Debug, Default)]
struct FakeCpu(AtomicU64);

impl FakeCpu {
    fn spend(&self, d: Duration) {
        self.0.fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
    }
}

impl CpuClock for FakeCpu {
    fn thread_time(&self) -> Duration {
        Duration::from_nanos(self.0.load(Ordering::Relaxed))
    }
}

/// Spends, per app, the given CPU time in each of two polls of its refresh (a tick of
/// paused time between them) and once in its operation; and CPU time outside any poll
/// (the clock is shared) in between.
#[derive(Debug)]
struct Burner {
    cpu: Arc<FakeCpu>,
    cost: HashMap<String, Duration>,
    calls: Mutex<Vec<String>>,
}

impl Burner {
    fn cost(&self, app: &AppKey) -> Duration {
        self.calls.lock().unwrap().push(app.to_string());
        self.cost[app.as_str()]
    }
}

impl Reconciler for Burner {
    async fn refresh(&self, app: &AppKey) -> Result<(), ReconcileError> {
        let cost = self.cost(app);
        self.cpu.spend(cost);
        sleep(Duration::from_millis(1)).await;
        self.cpu.spend(cost);
        Ok(())
    }

    async fn operate(&self, app: &AppKey) -> Result<Operated, ReconcileError> {
        self.cpu.spend(self.cost(app));
        Ok(Operated::Idle)
    }
}

fn app(name: &str) -> AppKey {
    AppKey::new("ns", name)
}

/// "c1" with `ns/a`, "c2" with `ns/b`, and `ns/u`, whose destination names no cluster
/// (so the anchor, "c1", processes it); both clusters owned, nothing queued.
fn work() -> Arc<ShardWork> {
    let q = || WorkQueue::new(RateLimiterConfig::default(), None).unwrap();
    let w = ShardWork::new(q(), q(), WorkMetrics::default());
    let clusters = [
        Cluster::new("c1", "https://one"),
        Cluster::new("c2", "https://two"),
    ];
    let mut nowhere = App::to_server("ns", "u", "https://one");
    nowhere.destination = Destination {
        server: Some("https://nowhere".into()),
        ..nowhere.destination
    };
    let apps = [
        App::to_server("ns", "a", "https://one"),
        App::to_server("ns", "b", "https://two"),
        nowhere,
    ];
    w.set_inventory(&clusters, &apps);
    w.start_cluster("c1");
    w.start_cluster("c2");
    w.refresh_queue()
        .remove_many(&[app("a"), app("b"), app("u")]);
    w
}

/// Lets the workers run until nothing is queued, waiting or in flight.
async fn settle(w: &ShardWork) {
    let (r, o) = (w.refresh_queue(), w.operation_queue());
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

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[tokio::test(start_paused = true)]
async fn each_poll_counts_for_the_cluster_its_item_holds_and_a_stop_forgets_it() {
    let cpu = Arc::new(FakeCpu::default());
    let w = work();
    w.set_cpu_clock(cpu.clone());
    let costs = [("ns/a", ms(3)), ("ns/b", ms(10)), ("ns/u", ms(100))];
    let rec = Arc::new(Burner {
        cpu: cpu.clone(),
        cost: costs.iter().map(|(k, d)| (k.to_string(), *d)).collect(),
        calls: Mutex::default(),
    });
    let cfg = PoolConfig {
        status_processors: 2,
        operation_processors: 2,
        ..PoolConfig::default()
    };
    let p = Processors::start(cfg, w.clone(), rec.clone()).unwrap();
    assert_eq!(
        w.cluster_cpu(),
        [("c1".to_owned(), ms(0)), ("c2".to_owned(), ms(0))]
    );
    w.refresh_queue()
        .add_many(vec![app("a"), app("b"), app("u")]);
    settle(&w).await;
    // Outside every poll: counted nowhere.
    cpu.spend(ms(1000));
    assert_eq!(
        rec.calls.lock().unwrap().len(),
        6,
        "a refresh and an operation each"
    );
    // Two refresh polls and one operation poll each; `u` counts for its anchor.
    assert_eq!(
        w.cluster_cpu(),
        [
            ("c1".to_owned(), ms(3 * 3 + 100 * 3)),
            ("c2".to_owned(), ms(30))
        ]
    );

    w.stop_cluster("c2").await;
    assert_eq!(w.cluster_cpu(), [("c1".to_owned(), ms(309))], "forgotten");
    w.start_cluster("c2");
    assert_eq!(
        w.cluster_cpu()[1],
        ("c2".to_owned(), ms(0)),
        "owned again: from zero"
    );
    settle(&w).await;
    assert_eq!(w.cluster_cpu()[1], ("c2".to_owned(), ms(30)));
    p.shutdown().await;
}

#[tokio::test]
async fn the_adapter_adds_each_polls_time_and_nothing_between_polls() {
    let cpu = Arc::new(FakeCpu::default());
    let nanos = Arc::new(AtomicU64::new(0));
    let meter = CpuMeter::new(nanos.clone(), cpu.clone());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let inner = {
        let cpu = cpu.clone();
        async move {
            cpu.spend(ms(2));
            rx.await.unwrap();
            cpu.spend(ms(5));
            7
        }
    };
    let task = tokio::spawn(meter.measure(inner));
    tokio::task::yield_now().await;
    cpu.spend(ms(40)); // between polls
    tx.send(()).unwrap();
    assert_eq!(task.await.unwrap(), 7);
    assert_eq!(super::cpu_time(&nanos), ms(7));
}

#[test]
fn the_thread_clock_reads_the_threads_cpu_time() {
    // Every thread has run for some time by the time it reads its clock, and the clock
    // never goes back.
    let clock = ThreadCpuClock;
    let first = clock.thread_time();
    let mut x = 0u64;
    for _ in 0..100_000_000u64 {
        if clock.thread_time() != first {
            break;
        }
        x = std::hint::black_box(x.wrapping_add(1));
    }
    assert!(first > Duration::ZERO);
    assert!(clock.thread_time() > first);
}
