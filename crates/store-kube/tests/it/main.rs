//! The Kubernetes store's integration tests, as one test binary: every module shares
//! `support` (a fake API server and stores connected to it), and a helper no module uses
//! any more shows as dead code.

mod cache;
mod conformance;
mod faults;
mod identity;
mod mapping;
mod support;
mod watch;
