//! The coordination store named on the command line, shared by `run`, `status`, `apps`
//! and `scale`. Only `run` creates a store; the one-shot commands open an existing one
//! (read-only when they only read) and fail naming a path where there is none.

use std::sync::Arc;

use anyhow::bail;
use fleetshard_coord::store::Store;
use fleetshard_replica::StoreUrl;
use fleetshard_replica::store::OpenMode;

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
    pub store: StoreUrl,
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

    /// Opens the store in `mode` (a one-shot command: [`OpenMode::ReadOnly`] to read,
    /// [`OpenMode::Existing`] to write; neither creates a store). Values too large for the
    /// backend (a big fleet's assignment) are split into parts transparently.
    pub fn open(&self, mode: OpenMode) -> anyhow::Result<Arc<dyn Store>> {
        Ok(self.store.open_in(mode)?.store)
    }
}
