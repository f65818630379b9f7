//! Shared by the store-kube tests: a fake API server and stores connected to it.

use std::time::Duration;

use fleetshard_store_kube::{KubeOptions, KubeStore};
use fleetshard_testsupport::kube_api::FakeApiServer;

/// A fake API server (namespace `default` exists).
pub async fn fake() -> FakeApiServer {
    FakeApiServer::start().await.expect("fake API server")
}

/// Options for tests: a short call timeout so partitions are noticed quickly, and a
/// short cache freshness bound (the fake sends a bookmark every second).
pub fn options() -> KubeOptions {
    KubeOptions {
        call_timeout: Duration::from_secs(2),
        watch_timeout: Duration::from_secs(3),
        cache_freshness: Duration::from_secs(4),
        ..KubeOptions::default()
    }
}

/// [`options`] without the watch cache (every listing is two LISTs).
pub fn uncached() -> KubeOptions {
    KubeOptions {
        cache: false,
        ..options()
    }
}

/// A store with its own client, in `namespace` of `server`.
pub fn store(server: &FakeApiServer, namespace: &str) -> KubeStore {
    store_with(server, namespace, options())
}

/// [`store`] with explicit options.
pub fn store_with(server: &FakeApiServer, namespace: &str, options: KubeOptions) -> KubeStore {
    let config = kube::Config::new(server.url().parse().expect("the fake's URL"));
    KubeStore::from_config(config, Some(namespace), options)
}
