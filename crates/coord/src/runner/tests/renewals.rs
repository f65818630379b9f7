//! Renewals come every renew period, not up to a timer tick or a poll later: observers
//! (`status`, other replicas' at-risk signal) judge a holder by that period.

use super::*;
use crate::store::{Entry, Precondition};

/// How long a listing of [`Slow`] takes.
const LISTING: Duration = Duration::from_millis(7);

/// A store whose listings take 7 ms and writes 3 ms, as a real one's do.
struct Slow(MemoryStore);

impl Store for Slow {
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Entry>, StoreError>> {
        self.0.get(key)
    }
    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Listing, StoreError>> {
        Box::pin(async move {
            tokio::time::sleep(LISTING).await;
            self.0.list(prefix).await
        })
    }
    fn put<'a>(
        &'a self,
        key: &'a str,
        value: Vec<u8>,
        pre: Precondition,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(3)).await;
            self.0.put(key, value, pre).await
        })
    }
    fn delete<'a>(
        &'a self,
        key: &'a str,
        pre: Precondition,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.0.delete(key, pre)
    }
    fn wait_for_change<'a>(
        &'a self,
        prefix: &'a str,
        since: u64,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        self.0.wait_for_change(prefix, since)
    }
    fn describe(&self) -> String {
        "slow://".into()
    }
}

#[tokio::test(start_paused = true)]
async fn a_holder_and_a_spare_renew_every_renew_period_on_time() {
    let store: Arc<dyn Store> = Arc::new(Slow(MemoryStore::new()));
    let clusters: Vec<Cluster> = (0..4)
        .map(|i| Cluster::new(format!("c{i:02}"), format!("https://c{i}")))
        .collect();
    let (tx, _rx) = mpsc::unbounded_channel();
    // Steps on a timer and polls that no renew period is a multiple of, as a real task's
    // wake-ups are (a tick a millisecond early is a whole tick late for a renewal).
    let timing = RunnerTiming {
        poll: Duration::from_millis(330),
        tick: Duration::from_millis(400),
        ..RunnerTiming::default()
    };
    let node = |name: &str| {
        let (r, status) = Runner::new(
            store.clone(),
            config(name, 1, None),
            timing,
            RunnerFleet::fixed(clusters.clone(), vec![1; clusters.len()]),
            tx.clone(),
        )
        .unwrap();
        start((r.with_placer(Arc::new(InlinePlacer)), status))
    };
    // One shard: the first holds it, the second is a spare with a presence record.
    let holder = node("a");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let spare = node("b");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(spare.status.borrow().spare, "{:?}", spare.status.borrow());
    let every = LeaseTiming::default().renew_every;
    let step = Duration::from_millis(5);
    // A presence record is renewed at a listing's step: a listing later.
    for (key, late) in [("fs/shards/0", step), ("fs/replicas/b", step + LISTING)] {
        let (mut last, mut changed_at) = (beat(&store, key).await, None::<Instant>);
        let mut gaps = Vec::new();
        for _ in 0..2000 {
            tokio::time::sleep(step).await;
            let b = beat(&store, key).await;
            if b != last {
                let now = Instant::now();
                gaps.extend(changed_at.map(|t| now - t));
                (last, changed_at) = (b, Some(now));
            }
        }
        assert!(gaps.len() >= 6, "{key}: {gaps:?}");
        for gap in &gaps {
            assert!(
                *gap >= every && *gap <= every + late,
                "{key}: renewed after {gap:?}, not every {every:?}: {gaps:?}"
            );
        }
    }
    for node in [spare, holder] {
        node.shutdown.send(true).unwrap();
        node.task.await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn holders_that_acknowledged_one_generation_renew_spread_over_the_period() {
    let store: Arc<dyn Store> = Arc::new(Slow(MemoryStore::new()));
    let (nodes, _rx) = three_runners(&store);
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(owners(&nodes.iter().collect::<Vec<_>>()).len(), 12);
    // When each shard's record changes, over four periods, as a phase of the period.
    let every = LeaseTiming::default().renew_every;
    let step = Duration::from_millis(5);
    let keys = ["fs/shards/0", "fs/shards/1", "fs/shards/2"];
    let mut last = Vec::new();
    for k in keys {
        last.push(beat(&store, k).await);
    }
    let origin = Instant::now();
    let mut phases: Vec<Vec<Duration>> = vec![Vec::new(); keys.len()];
    for _ in 0..1000 {
        tokio::time::sleep(step).await;
        for (i, k) in keys.iter().enumerate() {
            let b = beat(&store, k).await;
            if b != last[i] {
                last[i] = b;
                let since = Instant::now() - origin;
                phases[i].push(Duration::from_nanos(
                    (since.as_nanos() % every.as_nanos()) as u64,
                ));
            }
        }
    }
    // Each holder keeps one phase (to the sampling step), and any two are at least a
    // quarter period apart on the circle (spread evenly: a third).
    let phase: Vec<Duration> = phases
        .iter()
        .map(|p| {
            assert!(p.len() >= 3, "{phases:?}");
            let last = p[p.len() - 1];
            let apart = |x: Duration| x.abs_diff(last).min(every - x.abs_diff(last));
            assert!(p.iter().all(|&x| apart(x) <= step), "{phases:?}");
            last
        })
        .collect();
    for a in 0..phase.len() {
        for b in a + 1..phase.len() {
            let d = phase[a].abs_diff(phase[b]);
            let apart = d.min(every - d);
            assert!(
                apart >= every / 4,
                "shards {a} and {b} renew {apart:?} apart: {phases:?}"
            );
        }
    }
    for node in nodes {
        node.shutdown.send(true).unwrap();
        node.task.await.unwrap();
    }
}
