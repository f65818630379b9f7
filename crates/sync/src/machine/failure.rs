//! The end of a failed sync (gitops-engine's `executeSyncFailPhase`), deleting hooks by
//! their policy, and terminating an operation.

use super::{AwaitKind, Next, Purpose, Run, Stage, Sync, SyncFail, has_policy, hook_phase};
use crate::annotations::DeletePolicy;
use crate::record::{OperationPhase, ResultCode};

impl Sync<'_> {
    /// `message`, with the failed tasks' messages as the reason.
    pub(super) fn fail_message(&self, message: &str, failed: &[usize]) -> String {
        let mut reasons: Vec<&str> = failed
            .iter()
            .map(|&t| self.tasks[t].message.as_str())
            .collect();
        reasons.sort_unstable();
        reasons.dedup();
        if reasons.is_empty() {
            message.to_owned()
        } else {
            format!("{message}, reason: {}", reasons.join(","))
        }
    }

    /// gitops-engine's `executeSyncFailPhase`: without SyncFail hooks the operation fails
    /// now; once they all completed it fails (naming those that failed); else the pending
    /// ones start and the step waits for them.
    pub(super) fn sync_fail(&mut self, sf: SyncFail) -> Option<Next> {
        let mut message = self.fail_message(&sf.message, &sf.failed);
        let finished = |message: String| {
            Stage::End(Next::Finished {
                phase: OperationPhase::Failed,
                message,
            })
        };
        if sf.sync_fail.is_empty() {
            self.stage = Stage::DeleteHooks {
                tasks: sf.on_failure,
                persisted: false,
                then: Box::new(finished(message)),
            };
            return None;
        }
        if sf.sync_fail.iter().all(|&t| self.tasks[t].completed()) {
            let failed: Vec<usize> = sf
                .sync_fail
                .iter()
                .copied()
                .filter(|&t| self.tasks[t].status == Some(ResultCode::SyncFailed))
                .collect();
            if !failed.is_empty() {
                let hooks = self.fail_message("one or more SyncFail hooks failed", &failed);
                message = format!("{message}\n{hooks}");
            }
            self.stage = Stage::DeleteHooks {
                tasks: sf.on_failure,
                persisted: false,
                then: Box::new(finished(message)),
            };
            return None;
        }
        let pending: Vec<usize> = sf
            .sync_fail
            .iter()
            .copied()
            .filter(|&t| !self.tasks[t].completed() && !self.tasks[t].running())
            .collect();
        if pending.is_empty() {
            let mut waiting = sf.running.clone();
            waiting.extend(
                sf.sync_fail
                    .iter()
                    .copied()
                    .filter(|&t| self.tasks[t].running()),
            );
            let message = self.running_message(&waiting, false);
            return self.end(Next::Running {
                message,
                wave_delay: false,
            });
        }
        self.stage = Stage::Run(Run::new(pending, false, Purpose::SyncFail));
        None
    }

    /// Deletes the hooks `tasks` (by their delete policy), then goes on to `then`. The
    /// record is persisted first: it says the hooks completed, which a new owner could not
    /// tell from the cluster once they are gone.
    pub(super) fn delete_hooks(
        &mut self,
        tasks: Vec<usize>,
        then: Stage,
        persisted: bool,
    ) -> Option<Next> {
        // A dry run deletes nothing.
        let tasks: Vec<usize> = if self.view.settings.dry_run {
            Vec::new()
        } else {
            tasks
        };
        if tasks.is_empty() {
            self.stage = then;
            return None;
        }
        if !persisted {
            self.stage = Stage::DeleteHooks {
                tasks,
                then: Box::new(then),
                persisted: true,
            };
            return Some(Next::Persist);
        }
        self.stage = then;
        let writes = tasks
            .into_iter()
            .map(|t| (t, self.delete_write(t)))
            .collect();
        self.hand_out(writes, AwaitKind::HookDeletes)
    }

    /// gitops-engine's `Terminate`: each running hook is deleted when it still runs (or
    /// failed and asks for deletion then), and recorded as it ended or as terminated.
    pub(super) fn terminate_hooks(&mut self) -> Option<Next> {
        let mut writes = Vec::new();
        for t in 0..self.tasks.len() {
            let task = &self.tasks[t];
            if !task.hook || !task.running() {
                continue;
            }
            let Some(live) = self.view.live_of(task) else {
                self.set_result(
                    t,
                    self.tasks[t].status,
                    Some(OperationPhase::Succeeded),
                    "Terminated",
                );
                continue;
            };
            let (phase, message) = hook_phase(live);
            if phase == OperationPhase::Running
                || has_policy(&self.view, task, DeletePolicy::HookFailed)
            {
                writes.push((t, self.delete_write(t)));
            }
            let status = self.tasks[t].status;
            if phase.completed() {
                self.set_result(t, status, Some(phase), &message);
            } else if self.tasks[t].op != Some(OperationPhase::Error) {
                self.set_result(t, status, Some(OperationPhase::Failed), "Terminated");
            }
        }
        self.stage = Stage::End(Next::Finished {
            phase: OperationPhase::Failed,
            message: "Operation terminated".to_owned(),
        });
        if writes.is_empty() {
            return None;
        }
        self.hand_out(writes, AwaitKind::Terminate)
    }

    /// After a termination's deletes: whether any failed changes the ending.
    pub(super) fn termination_ending(&mut self) {
        if !self.terminate_ok {
            self.stage = Stage::End(Next::Finished {
                phase: OperationPhase::Error,
                message: "Operation termination had errors".to_owned(),
            });
        }
    }
}
