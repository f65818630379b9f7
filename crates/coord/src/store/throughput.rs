//! How many compare-and-swap writes per second a backend takes: the one measurement every
//! backend's `cas_throughput` example runs. Each write is what the protocols do — a `get`,
//! then a `put` with `Precondition::Version` — on one counter per handle, or on one counter
//! every handle shares (each conflict is retried by reading again).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{Precondition, Store, StoreError};

/// What one run measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CasThroughput {
    /// Successful compare-and-swap writes, all handles together.
    pub writes: u64,
    /// Conflicts (another handle wrote first).
    pub conflicts: u64,
    /// How long the handles ran.
    pub elapsed: Duration,
}

impl CasThroughput {
    /// Successful writes per second.
    pub fn writes_per_sec(&self) -> f64 {
        self.writes as f64 / self.elapsed.as_secs_f64()
    }

    /// Conflicts per second.
    pub fn conflicts_per_sec(&self) -> f64 {
        self.conflicts as f64 / self.elapsed.as_secs_f64()
    }
}

/// Runs every handle in `stores` for `duration`, each incrementing a counter under
/// `prefix` — the same key for all when `shared_key`, its own otherwise. Panics on any
/// store error other than a conflict: a measurement over a failing store means nothing.
pub async fn cas_throughput<S: Store>(
    stores: &[Arc<S>],
    prefix: &str,
    shared_key: bool,
    duration: Duration,
) -> CasThroughput {
    let keys: Vec<String> = (0..stores.len())
        .map(|i| match shared_key {
            true => format!("{prefix}counter"),
            false => format!("{prefix}{i}"),
        })
        .collect();
    for k in &keys {
        stores[0]
            .put(k, b"0".to_vec(), Precondition::Any)
            .await
            .unwrap_or_else(|e| panic!("seeding {k}: {e}"));
    }
    let start = Instant::now();
    let until = start + duration;
    let tasks: Vec<_> = stores
        .iter()
        .zip(keys)
        .map(|(s, k)| tokio::spawn(hammer(Arc::clone(s), k, until)))
        .collect();
    let (mut writes, mut conflicts) = (0u64, 0u64);
    for t in tasks {
        let (w, c) = t.await.unwrap_or_else(|e| panic!("a handle failed: {e}"));
        writes += w;
        conflicts += c;
    }
    CasThroughput {
        writes,
        conflicts,
        elapsed: start.elapsed(),
    }
}

/// One handle's loop: (writes, conflicts).
async fn hammer<S: Store>(store: Arc<S>, key: String, until: Instant) -> (u64, u64) {
    let (mut writes, mut conflicts) = (0, 0);
    while Instant::now() < until {
        let e = store
            .get(&key)
            .await
            .unwrap_or_else(|e| panic!("{key}: {e}"))
            .unwrap_or_else(|| panic!("{key} vanished"));
        let n: u64 = std::str::from_utf8(&e.value)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{key}: not a counter"));
        let next = (n + 1).to_string().into_bytes();
        match store
            .put(&key, next, Precondition::Version(e.version))
            .await
        {
            Ok(_) => writes += 1,
            Err(StoreError::Conflict { .. }) => conflicts += 1,
            Err(other) => panic!("{key}: {other}"),
        }
    }
    (writes, conflicts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;

    #[tokio::test]
    async fn counts_writes_and_each_write_lands() {
        let mem = MemoryStore::new();
        let stores: Vec<Arc<MemoryStore>> = (0..3).map(|_| Arc::new(mem.clone())).collect();
        let r = cas_throughput(&stores, "b/", true, Duration::from_millis(50)).await;
        assert!(r.writes > 0);
        // Every successful write incremented the one shared counter exactly once; a
        // conflict incremented nothing.
        let n: u64 = String::from_utf8(mem.get("b/counter").await.unwrap().unwrap().value)
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(n, r.writes);
        // A key each: each counter holds its own handle's writes.
        let r = cas_throughput(&stores, "k/", false, Duration::from_millis(20)).await;
        let mut total = 0;
        for i in 0..3 {
            let v = mem.get(&format!("k/{i}")).await.unwrap().unwrap().value;
            total += String::from_utf8(v).unwrap().parse::<u64>().unwrap();
        }
        assert_eq!((total, r.conflicts), (r.writes, 0));
    }
}
