//! Argo CD's sync, as a pure step machine.
//!
//! **Contract.** [`Sync`] takes one step's inputs — the desired objects ([`Manifest`]:
//! key, annotations, whether the cluster serves the kind), the live ones ([`Live`]:
//! annotations, health, whether the app tracks them), the operation's [`Settings`] and
//! the results recorded so far ([`Record`], Argo CD's `syncResult.resources[]`) — and
//! hands out the writes to make, batch by batch, until the step ends with the operation
//! still running (and what it waits for) or finished. It reads no clock and does no I/O:
//! the caller makes the writes, reports each outcome, persists the record when asked
//! ([`Next::Persist`], before hooks are created) and at the end of every step. The
//! record alone is enough to resume: a new owner builds the next step from it and never
//! creates a hook of the same attempt twice. Phases, waves, kind order, hooks (Argo CD's
//! and Helm's), hook delete policies, sync options, prune order, `CreateNamespace`,
//! termination, retries ([`retry`]) and cascade deletion ([`deletion`]) follow
//! gitops-engine and Argo CD's controller; where fleetshard differs, the item says so.

mod annotations;
pub mod deletion;
mod machine;
mod object;
mod options;
mod record;
pub mod retry;
mod tasks;

pub use annotations::{
    Annotations, DELETION_APPROVED, DeletePolicy, DeletionHook, HELM_HOOK, HELM_HOOK_DELETE_POLICY,
    HELM_HOOK_WEIGHT, HELM_RESOURCE_POLICY, HOOK, HOOK_DELETE_POLICY, HookType, SYNC_OPTIONS,
    SYNC_WAVE, csv, delete_policies, has_option, hook_types, is_deletion_hook, is_hook, is_ignored,
    is_skip, option_value, wave,
};
pub use machine::{Action, Next, Outcome, Sync, SyncInput, Write};
pub use object::{Health, HealthStatus, Live, Manifest, ObjectKey};
pub use options::{
    ManagedMetadata, NamespaceCreation, Propagation, Selected, Settings, SyncOptions,
};
pub use record::{OperationPhase, Record, ResultCode, ResultEntry, SyncPhase};
pub use tasks::generated_name;

/// The annotation fleetshard writes on every hook it creates: the operation attempt that
/// created it (its start and retry count), so that an owner resuming the operation adopts a
/// hook the previous owner created instead of creating it again.
pub const HOOK_ATTEMPT: &str = "fleetshard.io/sync-attempt";
