//! Throughput of the controller runtime with a no-op reconciler.
//!
//! `cargo bench -p fleetshard-controller --bench queue_throughput`
//!
//! 1. One work queue, 20 workers: add + get + done per second.
//! 2. A fleet of 10k clusters / 100k apps (10 per cluster) split over R in-process
//!    "replicas" (R = 1, 2, 4), each with its own queues, shard filter and pools (20
//!    refresh + 10 operation workers) owning every R-th cluster. Every replica starts its
//!    clusters at once (as after a rollout); measured: time until every app has been
//!    refreshed and handed to and through the operation queue, in items (refreshes +
//!    operations) per second; then the time to stop every cluster (a full handover).
//!
//! All replicas share this process's runtime (2 worker threads on the reference machine),
//! so R replicas compete for the same cores: this measures the runtime's own cost per item
//! and how it divides, not what R machines would do.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use fleetshard_controller::processor::PoolStats;
use fleetshard_controller::shard_work::WorkMetrics;
use fleetshard_controller::{
    AppKey, Operated, PoolConfig, Processors, RateLimiterConfig, ReconcileError, Reconciler,
    ShardWork, WorkQueue,
};
use fleetshard_core::{App, Cluster};
use tokio::time::Instant;

const CLUSTERS: usize = 10_000;
const APPS_PER_CLUSTER: usize = 10;

struct Noop;

impl Reconciler for Noop {
    async fn refresh(&self, _app: &AppKey) -> Result<(), ReconcileError> {
        Ok(())
    }

    async fn operate(&self, _app: &AppKey) -> Result<Operated, ReconcileError> {
        Ok(Operated::Idle)
    }
}

fn fleet() -> (Vec<Cluster>, Vec<App>) {
    let clusters: Vec<Cluster> = (0..CLUSTERS)
        .map(|i| Cluster::new(format!("c{i:05}"), format!("https://c{i:05}.example")))
        .collect();
    let apps = (0..CLUSTERS * APPS_PER_CLUSTER)
        .map(|j| {
            let c = j % CLUSTERS;
            App::to_server("apps", &format!("a{j:06}"), &clusters[c].server)
        })
        .collect();
    (clusters, apps)
}

async fn single_queue(items: u64, workers: usize) -> f64 {
    let q: WorkQueue<u64> = WorkQueue::new(RateLimiterConfig::default(), None).unwrap();
    let done = Arc::new(AtomicU64::new(0));
    let t = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let (q, done) = (q.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            while let Some(i) = q.get().await {
                q.done(&i);
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for chunk in (0..items).collect::<Vec<_>>().chunks(1000) {
        q.add_many(chunk.iter().copied());
        tokio::task::yield_now().await;
    }
    while done.load(Ordering::Relaxed) < items {
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    let secs = t.elapsed().as_secs_f64();
    q.shut_down_with_drain().await;
    for t in tasks {
        t.await.unwrap();
    }
    items as f64 / secs
}

struct Replica {
    filter: Arc<ShardWork>,
    pools: Processors,
    owned: Vec<String>,
    apps: u64,
}

async fn fleet_run(replicas: usize, clusters: &[Cluster], apps: &[App]) {
    let mut rs = Vec::new();
    for r in 0..replicas {
        let q = || WorkQueue::new(RateLimiterConfig::default(), None).unwrap();
        let filter = ShardWork::new(q(), q(), WorkMetrics::default());
        filter.set_inventory(clusters, apps);
        let pools =
            Processors::start(PoolConfig::default(), filter.clone(), Arc::new(Noop)).unwrap();
        let owned: Vec<String> = clusters
            .iter()
            .enumerate()
            .filter(|(i, _)| i % replicas == r)
            .map(|(_, c)| c.id.clone())
            .collect();
        let apps = (owned.len() * APPS_PER_CLUSTER) as u64;
        rs.push(Replica {
            filter,
            pools,
            owned,
            apps,
        });
    }
    let t = Instant::now();
    for r in &rs {
        for c in &r.owned {
            r.filter.start_cluster(c);
        }
    }
    let queued = t.elapsed();
    let mut finished = vec![None; rs.len()];
    while finished.iter().any(Option::is_none) {
        for (i, r) in rs.iter().enumerate() {
            let s = r.pools.stats();
            let n = PoolStats::get(&s.refreshed) + PoolStats::get(&s.operated);
            if finished[i].is_none() && n >= 2 * r.apps {
                finished[i] = Some(t.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_micros(500)).await;
    }
    let all = finished.iter().flatten().max().copied().unwrap_or_default();
    let total_items = 2 * rs.iter().map(|r| r.apps).sum::<u64>();
    let per_replica: Vec<String> = rs
        .iter()
        .zip(&finished)
        .map(|(r, f)| {
            let secs = f.unwrap_or_default().as_secs_f64();
            format!("{:.0}", 2.0 * r.apps as f64 / secs)
        })
        .collect();
    // A full handover: every replica stops every cluster it owns.
    let t = Instant::now();
    for r in &rs {
        for c in &r.owned {
            r.filter.stop_cluster(c).await;
        }
    }
    let stopped = t.elapsed();
    println!(
        "| {replicas} | {} | {} | {:.2} | {:.0} | {} | {:.1} | {:.1} |",
        rs[0].owned.len(),
        rs[0].apps,
        all.as_secs_f64(),
        total_items as f64 / all.as_secs_f64(),
        per_replica.join(" / "),
        queued.as_secs_f64() * 1000.0,
        stopped.as_secs_f64() * 1000.0,
    );
    for r in rs {
        r.pools.shutdown().await;
    }
}

#[tokio::main]
async fn main() {
    println!("## one queue, add + get + done, 20 workers");
    for _ in 0..3 {
        let rate = single_queue(1_000_000, 20).await;
        println!("{rate:.0} items/s");
    }
    let (clusters, apps) = fleet();
    println!(
        "\n## {} clusters / {} apps, refresh (20) + operation (10) workers per replica",
        clusters.len(),
        apps.len()
    );
    println!(
        "| replicas | clusters each | apps each | all done (s) | items/s (all) | items/s per replica | start_cluster × all (ms) | stop_cluster × all (ms) |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for replicas in [1, 2, 4] {
        for _ in 0..3 {
            fleet_run(replicas, &clusters, &apps).await;
        }
    }
}
