//! What an operation records of each resource (Argo CD's `syncResult.resources[]`) and of
//! itself (its phase): the engine's whole state between steps. A new owner resumes an
//! operation from this record alone.

use std::collections::HashMap;

use crate::annotations::HookType;
use crate::object::ObjectKey;

/// The phase of a sync a task belongs to, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SyncPhase {
    /// Hooks before the resources.
    PreSync,
    /// The resources (and Sync hooks).
    Sync,
    /// Hooks once every resource is healthy.
    PostSync,
    /// Hooks run only when the sync failed.
    SyncFail,
}

impl SyncPhase {
    /// Argo CD's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SyncPhase::PreSync => "PreSync",
            SyncPhase::Sync => "Sync",
            SyncPhase::PostSync => "PostSync",
            SyncPhase::SyncFail => "SyncFail",
        }
    }

    /// The phase Argo CD's spelling names.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "PreSync" => SyncPhase::PreSync,
            "Sync" => SyncPhase::Sync,
            "PostSync" => SyncPhase::PostSync,
            "SyncFail" => SyncPhase::SyncFail,
            _ => return None,
        })
    }

    /// The hook type that runs in this phase.
    pub fn hook_type(self) -> HookType {
        match self {
            SyncPhase::PreSync => HookType::PreSync,
            SyncPhase::Sync => HookType::Sync,
            SyncPhase::PostSync => HookType::PostSync,
            SyncPhase::SyncFail => HookType::SyncFail,
        }
    }
}

/// What happened to a resource's write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResultCode {
    /// Applied (or validated, in a dry run).
    Synced,
    /// The write was refused or failed.
    SyncFailed,
    /// Deleted (prune).
    Pruned,
    /// To prune, but not pruned (prune off, or protected).
    PruneSkipped,
}

impl ResultCode {
    /// Argo CD's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ResultCode::Synced => "Synced",
            ResultCode::SyncFailed => "SyncFailed",
            ResultCode::Pruned => "Pruned",
            ResultCode::PruneSkipped => "PruneSkipped",
        }
    }

    /// The code Argo CD's spelling names.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "Synced" => ResultCode::Synced,
            "SyncFailed" => ResultCode::SyncFailed,
            "Pruned" => ResultCode::Pruned,
            "PruneSkipped" => ResultCode::PruneSkipped,
            _ => return None,
        })
    }
}

/// The phase of an operation, and of one resource's part in it (`hookPhase`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OperationPhase {
    /// Going on.
    Running,
    /// Asked to stop (`argocd app terminate-op`, or the sync timeout).
    Terminating,
    /// Ended, failed.
    Failed,
    /// Ended in an error (could not run).
    Error,
    /// Ended well.
    Succeeded,
}

impl OperationPhase {
    /// Argo CD's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            OperationPhase::Running => "Running",
            OperationPhase::Terminating => "Terminating",
            OperationPhase::Failed => "Failed",
            OperationPhase::Error => "Error",
            OperationPhase::Succeeded => "Succeeded",
        }
    }

    /// The phase Argo CD's spelling names.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "Running" => OperationPhase::Running,
            "Terminating" => OperationPhase::Terminating,
            "Failed" => OperationPhase::Failed,
            "Error" => OperationPhase::Error,
            "Succeeded" => OperationPhase::Succeeded,
            _ => return None,
        })
    }

    /// Ended (failed, error or succeeded).
    pub fn completed(self) -> bool {
        matches!(
            self,
            OperationPhase::Failed | OperationPhase::Error | OperationPhase::Succeeded
        )
    }
}

/// One entry of `syncResult.resources[]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultEntry {
    /// The object (a generated hook name included).
    pub key: ObjectKey,
    /// Its API version.
    pub version: String,
    /// The write's result (`None`: the task failed before any write, or a termination
    /// recorded it).
    pub status: Option<ResultCode>,
    /// The hook type, for hooks.
    pub hook_type: Option<HookType>,
    /// Where the resource's part stands: `Running` until healthy (or, for a hook, until
    /// it completed), then `Succeeded` or `Failed`.
    pub hook_phase: Option<OperationPhase>,
    /// The sync phase.
    pub sync_phase: SyncPhase,
    /// The last message.
    pub message: String,
}

/// Every resource's result so far, in the order they were first recorded.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Record {
    /// The entries.
    pub results: Vec<ResultEntry>,
}

impl Record {
    /// The entry of `key` in `phase`.
    pub fn get(&self, key: &ObjectKey, phase: SyncPhase) -> Option<&ResultEntry> {
        self.results
            .iter()
            .find(|r| r.sync_phase == phase && r.key == *key)
    }

    /// Where each entry is, by phase and key: one lookup per task instead of a scan each
    /// (a step over N resources would otherwise cost N²).
    pub fn positions(&self) -> HashMap<(SyncPhase, &ObjectKey), usize> {
        self.results
            .iter()
            .enumerate()
            .map(|(i, r)| ((r.sync_phase, &r.key), i))
            .collect()
    }

    /// Sets the entry of `entry`'s key and phase: an existing one keeps its place (and its
    /// message when the new one has none), a new one goes last.
    pub fn set(&mut self, entry: ResultEntry) {
        let at = self
            .results
            .iter()
            .position(|r| r.sync_phase == entry.sync_phase && r.key == entry.key);
        self.set_at(at, entry);
    }

    /// [`Record::set`] with the entry's position already known (`None`: it has none yet);
    /// returns where it is now. A position that holds another entry is looked up again.
    pub fn set_at(&mut self, at: Option<usize>, entry: ResultEntry) -> usize {
        let same = |r: &ResultEntry| r.sync_phase == entry.sync_phase && r.key == entry.key;
        let at = match at {
            Some(i) if self.results.get(i).is_some_and(same) => Some(i),
            Some(_) => self.results.iter().position(same),
            None => None,
        };
        match at.map(|i| (i, &mut self.results[i])) {
            Some((i, existing)) => {
                let message = if entry.message.is_empty() {
                    std::mem::take(&mut existing.message)
                } else {
                    entry.message
                };
                *existing = ResultEntry { message, ..entry };
                i
            }
            None => {
                self.results.push(entry);
                self.results.len() - 1
            }
        }
    }
}
