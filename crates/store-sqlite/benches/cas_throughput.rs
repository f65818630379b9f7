//! How many compare-and-swap writes per second one SQLite file takes, with 1 and 4
//! handles (each its own connection), on one shared counter (every handle contends) and on
//! one key per handle (only SQLite's write lock is shared), for both durabilities.
//!
//! ```sh
//! cargo bench -p fleetshard-store-sqlite --bench cas_throughput -- [SECONDS] [DIR]
//! ```
//! `DIR` (default: a temporary directory) picks the filesystem measured.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use fleetshard_coord::store::throughput::cas_throughput;
use fleetshard_store_sqlite::{Durability, SqliteOptions, SqliteStore};

async fn measure(dir: &Path, handles: usize, shared_key: bool, durability: Durability, secs: f64) {
    let path = dir.join(format!("bench-{handles}-{shared_key}-{durability:?}.db"));
    let options = SqliteOptions {
        durability,
        ..SqliteOptions::default()
    };
    let stores: Vec<Arc<SqliteStore>> = (0..handles)
        .map(|_| Arc::new(SqliteStore::open_with(&path, options.clone()).unwrap()))
        .collect();
    let r = cas_throughput(&stores, "bench/", shared_key, Duration::from_secs_f64(secs)).await;
    let keys = if shared_key { "one key" } else { "key each" };
    let durability = format!("{durability:?}");
    println!(
        "{handles} handle(s), {keys:<8}, {durability:<6}: {:>6.0} CAS writes/s, {:>5.0} conflicts/s",
        r.writes_per_sec(),
        r.conflicts_per_sec(),
    );
    drop(stores);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let mut args = std::env::args().filter(|a| a != "--bench").skip(1);
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
