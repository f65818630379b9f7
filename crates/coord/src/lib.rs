//! Coordination for fleetshard: replicas claim shards and agree on the assignment through a
//! [`store::Store`] with compare-and-swap.
//!
//! **Architecture invariant:** protocol logic is pure (state machines fed with observed
//! store state and local monotonic time, returning actions): fenced mode's
//! [`fenced::Replica`] and Argo CD mode's [`argocd::ArgoReplica`]. Only the store backends
//! and the runners that drive the machines ([`runner`], [`argocd_runner`]) do I/O or read
//! clocks (a test, `tidy.rs`, checks the protocol modules for clock reads). Both machines
//! run under one seeded deterministic simulation in tests (`sim/`). Nothing here knows the
//! reconciler.

pub mod argocd;
pub mod argocd_runner;
pub mod fenced;
pub mod lease;
pub mod runner;
mod select;
#[cfg(test)]
mod sim;
pub mod store;
#[cfg(test)]
mod tidy;
