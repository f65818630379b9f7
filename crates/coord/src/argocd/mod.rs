//! Argo CD-compatible heartbeat mode: the pure parts.
//!
//! Argo CD's "dynamic cluster distribution" keeps a list of `{ShardNumber, ControllerName,
//! HeartbeatTime}` in the ConfigMap [`CONFIG_MAP_NAME`], key [`DATA_KEY`]; each controller
//! replica claims an entry and refreshes its heartbeat (argo-compat §5; this and the other
//! codes are explained in `docs/glossary.md`). fleetshard speaks the same format, byte for
//! byte, so that Argo CD's docs and tooling apply, but decides ownership without the
//! defects of §8 that lose or duplicate it.
//!
//! - [`mapping`]: the exact codec ([`encode`], [`decode`]), with [`time`] for Go's
//!   RFC 3339;
//! - [`get_or_update_shard`]: one claim round, after [`repair`]ing the list, with staleness
//!   from [`ChangeObserver`] (this replica's monotonic clock, never the written time);
//! - `upstream` (tests and the `test-util` feature only): Argo CD's functions verbatim,
//!   defects included, as a test reference;
//! - [`Settings`]: Argo CD's environment variables, parsed as Argo CD parses them;
//! - [`machine`]: one replica as a state machine ([`ArgoReplica`]): claim rounds on its
//!   heartbeat, validity, start delays, backoff, release.
//!
//! Nothing here does I/O, awaits, or reads a clock: the runner
//! ([`crate::argocd_runner`]) reads the ConfigMap through the store, passes wall and
//! monotonic times in, and carries out the machine's actions (writes with compare-and-swap,
//! starts and stops). `docs/argocd-compatibility.md` lists every deviation from upstream.

mod claim;
mod json;
pub mod machine;
pub mod mapping;
mod observe;
mod repair;
mod settings;
pub mod time;
#[cfg(any(test, feature = "test-util"))]
pub mod upstream;

pub use claim::{
    ClaimError, ClaimRequest, ClaimStatus, MAX_IDENTITY_LEN, MAX_REPLICAS, Outcome, Warning,
    get_or_update_shard,
};
pub use machine::{Action, ArgoConfig, ArgoConfigError, ArgoReplica, Ticket};
pub use mapping::{MappingError, ShardEntry, decode, encode};
pub use observe::ChangeObserver;
pub use repair::repair;
pub use settings::{
    ENV_DYNAMIC, ENV_HEARTBEAT_TIME, ENV_REPLICAS, ENV_SHARD, HEARTBEAT_SECONDS_DEFAULT,
    STALE_AFTER_HEARTBEATS, SettingProblem, SettingWarning, Settings,
};
pub use time::{TimeError, WallTime};

/// The ConfigMap Argo CD keeps the mapping in, in the controller's namespace.
pub const CONFIG_MAP_NAME: &str = "argocd-app-controller-shard-cm";

/// The ConfigMap data key that holds the mapping.
pub const DATA_KEY: &str = "shardControllerMapping";

/// The store key of the mapping: data key [`DATA_KEY`] of ConfigMap [`CONFIG_MAP_NAME`]
/// (the Kubernetes backend maps `configmap/NAME/DATAKEY` to exactly that; other backends
/// keep it as an ordinary key).
pub const MAPPING_KEY: &str = "configmap/argocd-app-controller-shard-cm/shardControllerMapping";

#[cfg(test)]
mod vectors;
