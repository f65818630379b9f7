//! One fleetshard replica as a library value (linkerd's `app` is the model): validated
//! [`ReplicaSettings`] are built into a [`Replica`] whose fields name its parts, which
//! [`Replica::spawn`] starts; the [`ReplicaHandle`] it returns drains them in a stated
//! order and joins every task. `fleetshard run` is a short script around this; tests start
//! replicas in-process the same way.
//!
//! ```text
//! ReplicaSettings ──build──► Replica { inventory, store, coordination, controller,
//!                                      reconciler, http, audit }
//!                 ──spawn──► ReplicaHandle ──shutdown──► every task joined
//! ```
//!
//! The two protocols differ only in how their coordination runner is started
//! ([`coordination`]); everything else sees them through one interface
//! (`fleetshard_coord::ownership`: ownership events, a status with readiness, lease
//! deadline and shard view).
//!
//! **Architecture invariant:** the only crate that knows every part: the controller and
//! the reconciler never see a store backend, the protocols never see the controller
//! beyond its stop hook.

mod argocd_metrics;
pub mod audit;
pub mod clock;
mod controller;
pub mod coordination;
pub mod costs;
pub mod dashboard;
pub mod deployment;
pub mod http;
pub mod inventory;
mod live_metrics;
pub mod metrics;
mod replica;
pub mod settings;
pub mod store;

use std::io::Read as _;

pub use replica::{Replica, ReplicaHandle};
pub use settings::{
    ArgoSettings, ControllerSettings, FencedSettings, FleetSource, ProtocolSettings,
    ReconcilerKind, ReplicaSettings, RepoServerSetting,
};
pub use store::{OpenedStore, StoreUrl};

/// Why a replica could not be built or did not run cleanly.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    /// A setting is unusable.
    #[error("{field}: {reason}")]
    Settings {
        /// The setting.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The store could not be opened.
    #[error("opening {url}: {reason}")]
    Store {
        /// The store's URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// The inventory could not be loaded.
    #[error("{0}")]
    Inventory(String),
    /// A part could not be started.
    #[error("starting {part}: {reason}")]
    Start {
        /// The part (`the controller runtime`, `the coordination runner`, ...).
        part: &'static str,
        /// Why.
        reason: String,
    },
    /// A file could not be opened or written.
    #[error("{what}: {source}")]
    Io {
        /// The file and what was being done.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A task of the replica failed (panicked).
    #[error("the {0} task failed")]
    Task(&'static str),
}

/// A fresh incarnation: random, so a restart is told apart from the process before it.
pub fn fresh_incarnation() -> Result<u64, ReplicaError> {
    let mut b = [0u8; 8];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|source| ReplicaError::Io {
            what: "reading /dev/urandom for the incarnation".into(),
            source,
        })?;
    Ok(u64::from_le_bytes(b))
}
