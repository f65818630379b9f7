//! Coordination for fleetshard: replicas claim shards and agree on the assignment through a
//! [`store::Store`] with compare-and-swap.
//!
//! **Architecture invariant:** protocol logic is pure (state machines fed with observed
//! store state and local monotonic time, returning actions): fenced mode's
//! [`fenced::Replica`] and Argo CD mode's [`argocd::ArgoReplica`]. Only the store backends
//! and the runners that drive the machines ([`runner`], [`argocd_runner`]) do I/O or read
//! clocks (`crates/tidy` checks the protocol modules for clock reads). Both machines
//! run under one seeded deterministic simulation in tests (`sim/`). Nothing here knows the
//! reconciler.
//!
//! Feature `test-util` (for other crates' `[dev-dependencies]` only): the backends'
//! conformance suite `store::conformance`, the measurement `store::throughput`, and Argo
//! CD's claim functions verbatim, `argocd::upstream`. They are test harnesses and are not
//! compiled otherwise.

pub mod argocd;
pub mod argocd_runner;
pub mod fenced;
pub mod lease;
pub mod ownership;
pub mod runner;
pub mod select;
#[cfg(test)]
mod sim;
pub mod store;
