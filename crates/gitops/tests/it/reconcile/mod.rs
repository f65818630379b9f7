//! The reconciler against fake API servers and real Git repositories: every module shares
//! `support`, and a helper no module uses any more shows as dead code.

mod control_plane;
mod credentials;
mod deletion_hooks;
mod diffing;
mod errors;
mod events;
mod hooks;
mod lifecycle;
mod options;
mod orphans;
mod projects;
mod render;
mod repo_server;
mod runtime;
mod safety;
mod scoped;
mod server_side_diff;
pub(crate) mod support;
mod sync;
mod takeover;
mod ui_status;
mod unresolved;
mod usage;
mod write_deadline;
