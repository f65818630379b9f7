//! The reconciler's integration tests against fake API servers and real Git repositories,
//! as one test binary: every module shares `support`, and a helper no module uses any more
//! shows as dead code.

mod errors;
mod runtime;
mod support;
mod sync;
