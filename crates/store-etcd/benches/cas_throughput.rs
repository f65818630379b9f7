//! How many compare-and-swap writes per second one etcd takes through [`EtcdStore`], with 1
//! and 4 handles (each its own client and connection), on one shared counter (every handle
//! contends) and on one key per handle (only etcd's serialised log is shared). Each write
//! is a read (`get`) and a transaction (`put` with `Version`), as the protocol does.
//!
//! ```sh
//! cargo bench -p fleetshard-store-etcd --bench cas_throughput -- [SECONDS] [HOST:PORT]
//! ```
//! Without `HOST:PORT` (or `FLEETSHARD_TEST_ETCD`) it starts a fresh single-node etcd with
//! the test fixture: data in a temporary directory, fsync on every commit, as in production.

use std::sync::Arc;
use std::time::Duration;

use fleetshard_coord::store::throughput::cas_throughput;
use fleetshard_store_etcd::{EtcdOptions, EtcdStore};
use fleetshard_testsupport::etcd::EtcdServer;

async fn measure(endpoint: &str, prefix: &str, handles: usize, shared_key: bool, secs: f64) {
    let options = EtcdOptions {
        key_prefix: prefix.to_owned(),
        ..EtcdOptions::default()
    };
    let stores: Vec<Arc<EtcdStore>> = (0..handles)
        .map(|_| Arc::new(EtcdStore::new([endpoint], options.clone()).unwrap()))
        .collect();
    let under = format!("bench/{handles}/{shared_key}/");
    let r = cas_throughput(&stores, &under, shared_key, Duration::from_secs_f64(secs)).await;
    let keys = if shared_key { "one key" } else { "key each" };
    println!(
        "{handles} handle(s), {keys:<8}: {:>6.0} CAS writes/s, {:>5.0} conflicts/s",
        r.writes_per_sec(),
        r.conflicts_per_sec(),
    );
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let mut args = std::env::args().filter(|a| a != "--bench").skip(1);
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
