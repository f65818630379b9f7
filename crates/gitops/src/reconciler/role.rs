//! How a desired object takes part in the app's syncs, from its annotations: a resource,
//! skipped, a hook of a sync phase, a hook of the app's deletion only, or ignored.

use serde_json::Value;

use super::guard;

/// How a desired object takes part in a sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    /// Compared, synced, pruned when it goes.
    Resource,
    /// `Skip`: neither applied nor compared, and its live object is not pruned.
    Skip,
    /// A hook of a sync phase.
    Hook,
    /// A hook of the app's deletion only (PreDelete, PostDelete, or both): run by the
    /// deletion, never by a sync.
    Deletion { pre: bool, post: bool },
    /// A hook of no phase fleetshard runs (a Helm test hook): left alone.
    Ignored,
}

/// The role of the desired `object`, from its hook and sync-option annotations.
pub(super) fn role(object: &Value) -> Role {
    let a = guard::annotation_map(object);
    let deletion = |kind| fleetshard_sync::is_deletion_hook(&a, kind);
    let (pre, post) = (
        deletion(fleetshard_sync::DeletionHook::PreDelete),
        deletion(fleetshard_sync::DeletionHook::PostDelete),
    );
    if (pre || post) && !has_sync_phase(&a) {
        Role::Deletion { pre, post }
    } else if fleetshard_sync::is_ignored(&a) {
        Role::Ignored
    } else if fleetshard_sync::is_hook(&a) {
        Role::Hook
    } else if fleetshard_sync::is_skip(&a) {
        Role::Skip
    } else {
        Role::Resource
    }
}

/// A hook that also runs in a sync phase (Argo CD keeps such a PostDelete hook in syncs).
fn has_sync_phase(a: &fleetshard_sync::Annotations) -> bool {
    fleetshard_sync::hook_types(a)
        .iter()
        .any(|t| *t != fleetshard_sync::HookType::Skip)
}
