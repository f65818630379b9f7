//! How many compare-and-swap writes per second one SQLite file takes, with 1 and 4
//! handles (each its own connection), on one shared counter (every handle contends) and on
//! one key per handle (only SQLite's write lock is shared), for both durabilities.
//!
//! ```sh
//! cargo run --release -p fleetshard-store-sqlite --example cas_throughput [SECONDS] [DIR]
//! ```
//! `DIR` (default: a temporary directory) picks the filesystem measured.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use fleetshard_coord::store::{Precondition, Store, StoreError};
use fleetshard_store_sqlite::{Durability, SqliteOptions, SqliteStore};
use tokio::time::Instant;

/// Successful writes and conflicts of one handle.
#[derive(Default)]
struct Count {
    writes: u64,
    conflicts: u64,
}

async fn hammer(store: Arc<SqliteStore>, key: String, until: Instant) -> Count {
    let mut count = Count::default();
    while Instant::now() < until {
        let e = store.get(&key).await.unwrap().unwrap();
        let n: u64 = std::str::from_utf8(&e.value).unwrap().parse().unwrap();
        let next = (n + 1).to_string().into_bytes();
        match store
            .put(&key, next, Precondition::Version(e.version))
            .await
        {
            Ok(_) => count.writes += 1,
            Err(StoreError::Conflict { .. }) => count.conflicts += 1,
            Err(other) => panic!("{other}"),
        }
    }
    count
}

async fn measure(dir: &Path, handles: usize, shared_key: bool, durability: Durability, secs: f64) {
    let path = dir.join(format!("bench-{handles}-{shared_key}-{durability:?}.db"));
    let options = SqliteOptions {
        durability,
        ..SqliteOptions::default()
    };
    let stores: Vec<Arc<SqliteStore>> = (0..handles)
        .map(|_| Arc::new(SqliteStore::open_with(&path, options.clone()).unwrap()))
        .collect();
    let keys: Vec<String> = (0..handles)
        .map(|i| {
            if shared_key {
                "bench/counter".to_owned()
            } else {
                format!("bench/{i}")
            }
        })
        .collect();
    for k in &keys {
        stores[0]
            .put(k, b"0".to_vec(), Precondition::Any)
            .await
            .unwrap();
    }
    let start = Instant::now();
    let until = start + Duration::from_secs_f64(secs);
    let tasks: Vec<_> = stores
        .iter()
        .zip(keys)
        .map(|(s, k)| tokio::spawn(hammer(Arc::clone(s), k, until)))
        .collect();
    let (mut writes, mut conflicts) = (0, 0);
    for t in tasks {
        let c = t.await.unwrap();
        writes += c.writes;
        conflicts += c.conflicts;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let keys = if shared_key { "one key" } else { "key each" };
    let durability = format!("{durability:?}");
    println!(
        "{handles} handle(s), {keys:<8}, {durability:<6}: {:>6.0} CAS writes/s, {:>5.0} conflicts/s",
        writes as f64 / elapsed,
        conflicts as f64 / elapsed,
    );
    drop(stores);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let secs: f64 = args.next().map_or(3.0, |s| s.parse().expect("SECONDS"));
    let tmp = tempfile::tempdir().unwrap();
    let dir = args
        .next()
        .map_or_else(|| tmp.path().to_owned(), Into::into);
    println!(
        "{} (CPUs: {})",
        dir.display(),
        std::thread::available_parallelism().unwrap()
    );
    for durability in [Durability::Full, Durability::Normal] {
        for (handles, shared) in [(1, true), (4, true), (4, false)] {
            measure(&dir, handles, shared, durability, secs).await;
        }
    }
}
