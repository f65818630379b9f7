//! How many compare-and-swap writes per second one etcd takes through [`EtcdStore`], with 1
//! and 4 handles (each its own client and connection), on one shared counter (every handle
//! contends) and on one key per handle (only etcd's serialised log is shared). Each write
//! is a read (`get`) and a transaction (`put` with `Version`), as the protocol does.
//!
//! ```sh
//! cargo run --release -p fleetshard-store-etcd --example cas_throughput [SECONDS] [HOST:PORT]
//! ```
//! Without `HOST:PORT` (or `FLEETSHARD_TEST_ETCD`) it starts a fresh single-node etcd with
//! the test fixture: data in a temporary directory, fsync on every commit, as in production.

use std::sync::Arc;
use std::time::Duration;

use fleetshard_coord::store::{Precondition, Store, StoreError};
use fleetshard_store_etcd::{EtcdOptions, EtcdStore};
use fleetshard_testsupport::etcd::EtcdServer;
use tokio::time::Instant;

/// Successful writes and conflicts of one handle.
#[derive(Default)]
struct Count {
    writes: u64,
    conflicts: u64,
}

async fn hammer(store: Arc<EtcdStore>, key: String, until: Instant) -> Count {
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

async fn measure(endpoint: &str, prefix: &str, handles: usize, shared_key: bool, secs: f64) {
    let options = EtcdOptions {
        key_prefix: prefix.to_owned(),
        ..EtcdOptions::default()
    };
    let stores: Vec<Arc<EtcdStore>> = (0..handles)
        .map(|_| Arc::new(EtcdStore::new([endpoint], options.clone()).unwrap()))
        .collect();
    let keys: Vec<String> = (0..handles)
        .map(|i| {
            if shared_key {
                format!("bench/{handles}/counter")
            } else {
                format!("bench/{handles}/{i}")
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
    println!(
        "{handles} handle(s), {keys:<8}: {:>6.0} CAS writes/s, {:>5.0} conflicts/s",
        writes as f64 / elapsed,
        conflicts as f64 / elapsed,
    );
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let secs: f64 = args.next().map_or(3.0, |s| s.parse().expect("SECONDS"));
    let (_server, endpoint, prefix) = match args.next() {
        Some(ep) => (None, ep, "fleetshard-bench/".to_owned()),
        None => {
            let server = EtcdServer::start().unwrap_or_else(|e| panic!("{e}"));
            let (ep, prefix) = (server.endpoint().to_owned(), server.key_prefix().to_owned());
            (Some(server), ep, prefix)
        }
    };
    println!(
        "etcd at {endpoint} (CPUs: {})",
        std::thread::available_parallelism().unwrap()
    );
    for (handles, shared) in [(1, true), (4, true), (4, false)] {
        measure(&endpoint, &prefix, handles, shared, secs).await;
    }
}
