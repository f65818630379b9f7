//! The GitOps reconciler: what an application should look like (from Git), what it looks
//! like (from its destination cluster), how they differ, and how healthy it is.
//!
//! - [`source`]: desired state from a Git repository (gix): resolve `targetRevision`,
//!   read the manifests under `path`, with a cache so many apps on one repository fetch it
//!   once per revision;
//! - [`compare`]: desired against live, with normalisation of server-populated fields and
//!   defaults: Synced/OutOfSync per resource and per app;
//! - [`health`]: health of live objects (crate `fleetshard-health`, re-exported here):
//!   built-in checks and Lua scripts;
//! - [`live`]: live state from the destination clusters (kube-rs clients, discovery,
//!   watch-backed caches per owned cluster);
//! - [`apply`]: sync by server-side apply (field manager `fleetshard`) and prune, with a
//!   lease check before every write;
//! - [`reconciler`]: the controller's `Reconciler` assembled from the above, recording
//!   each app's status in memory or on its Application object;
//! - [`events`]: Kubernetes Events on Applications, as Argo CD's controller records them,
//!   written by a task of their own that never delays a reconcile.

pub mod apply;
pub mod compare;
pub mod events;
pub use fleetshard_health as health;
pub mod live;
pub mod reconciler;
pub mod source;
