//! The coordination store named on the command line, shared by `run` and `status`.

use std::sync::Arc;

use anyhow::{Context as _, bail};
use fleetshard_coord::store::Store;
use fleetshard_coord::store::chunked::{self, ChunkedStore};
use fleetshard_coord::store::memory::MemoryStore;
use fleetshard_store_sqlite::SqliteStore;

/// The flags that name a fleet's records in a store.
#[derive(Debug, Clone, clap::Args)]
pub struct StoreArgs {
    /// Coordination store: `sqlite://PATH`, `etcd://HOST:PORT[,HOST:PORT…]` (builds with
    /// `--features etcd`), `kubernetes://NAMESPACE` (ConfigMaps and Leases; in-cluster or
    /// KUBECONFIG credentials; empty NAMESPACE: the configuration's), `memory://` (this
    /// process only).
    #[arg(
        long,
        value_name = "URL",
        default_value = "sqlite://fleetshard.db",
        env = "FLEETSHARD_STORE"
    )]
    pub store: String,
    /// Key prefix of this fleet's records in the store (ends with `/`).
    #[arg(
        long,
        value_name = "PREFIX",
        default_value = "fleetshard/",
        env = "FLEETSHARD_ROOT"
    )]
    pub root: String,
}

impl StoreArgs {
    /// The key prefix, checked.
    pub fn root(&self) -> anyhow::Result<&str> {
        if !self.root.ends_with('/') {
            bail!("--root {:?} must end with '/'", self.root);
        }
        Ok(&self.root)
    }

    /// Opens the store. Values too large for the backend (a big fleet's assignment) are
    /// split into parts transparently ([`ChunkedStore`]).
    pub fn open(&self) -> anyhow::Result<Arc<dyn Store>> {
        let inner = open_store(&self.store)?;
        Ok(Arc::new(ChunkedStore::new(inner, chunked::DEFAULT_LIMIT)))
    }
}

/// Opens the store a URL names.
pub fn open_store(url: &str) -> anyhow::Result<Arc<dyn Store>> {
    let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    match scheme.as_deref() {
        Some("memory") => Ok(Arc::new(MemoryStore::new())),
        Some("sqlite") => Ok(Arc::new(
            SqliteStore::from_url(url).with_context(|| format!("opening {url}"))?,
        )),
        #[cfg(feature = "etcd")]
        Some("etcd") => Ok(Arc::new(
            fleetshard_store_etcd::EtcdStore::from_url(url)
                .with_context(|| format!("opening {url}"))?,
        )),
        // Optional because etcd's client is generated from .proto files at build time, and
        // a plain `cargo build` must work with nothing but cargo.
        #[cfg(not(feature = "etcd"))]
        Some("etcd") => bail!(
            "store {url:?}: etcd is not yet supported in this build (built without the `etcd` \
             feature); rebuild with `cargo build --features etcd` (it needs protoc: Debian's \
             protobuf-compiler package)"
        ),
        // Connects on first use: configuration errors surface from the first operation.
        Some("kubernetes") => Ok(Arc::new(
            fleetshard_store_kube::KubeStore::from_url(url)
                .with_context(|| format!("opening {url}"))?,
        )),
        _ => bail!(
            "store {url:?}: expected sqlite://PATH, etcd://HOST:PORT, kubernetes://NAMESPACE or \
             memory://"
        ),
    }
}
