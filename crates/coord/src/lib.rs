//! Coordination for fleetshard: replicas claim shards and agree on the assignment through a
//! [`store::Store`] with compare-and-swap.
//!
//! **Architecture invariant:** protocol logic is pure (state machines fed with observed
//! store state and local monotonic time, returning actions); only the store backends and
//! the runner that drives the machines do I/O. Nothing here knows the reconciler.

pub mod argocd;
pub mod argocd_runner;
pub mod fenced;
pub mod lease;
pub mod runner;
mod select;
#[cfg(test)]
mod sim;
pub mod store;
