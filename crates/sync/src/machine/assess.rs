//! Assessing a running sync: each running task's progress from its live object, what
//! the step waits for (gitops-engine's `setRunningPhase`), and which wave runs next.

use super::{Next, Purpose, Run, Stage, Sync, SyncFail, has_policy, hook_phase};
use crate::annotations::DeletePolicy;
use crate::object::HealthStatus;
use crate::record::{OperationPhase, ResultCode, SyncPhase};

impl Sync<'_> {
    /// Running tasks' progress from their live objects; then what the sync does next.
    pub(super) fn assess(&mut self) -> Option<Next> {
        self.update_running();
        let all: Vec<usize> = (0..self.tasks.len()).collect();
        let multi_step = match (all.first(), all.last()) {
            (Some(&a), Some(&b)) => {
                let (a, b) = (&self.tasks[a], &self.tasks[b]);
                (a.phase, a.wave) != (b.phase, b.wave)
            }
            _ => false,
        };
        let running: Vec<usize> = all
            .iter()
            .copied()
            .filter(|&t| (multi_step || self.tasks[t].hook) && self.tasks[t].running())
            .collect();
        if !running.is_empty() {
            for &t in &running {
                // Written by this very step: the inputs predate it; the next step sees it.
                if self.view.live_of(&self.tasks[t]).is_none() && !self.written_now[t] {
                    let k = &self.tasks[t].key;
                    let message = format!(
                        "Resource {}/{}/{} is missing, it might have been deleted",
                        k.group, k.kind, k.name
                    );
                    self.set_result(
                        t,
                        Some(ResultCode::SyncFailed),
                        Some(OperationPhase::Error),
                        &message,
                    );
                }
            }
            let message = self.running_message(&running, false);
            return self.end(Next::Running {
                message,
                wave_delay: false,
            });
        }
        let deleting: Vec<usize> = all
            .iter()
            .copied()
            .filter(|&t| {
                let task = &self.tasks[t];
                task.status == Some(ResultCode::Pruned)
                    && self.view.live_of(task).is_some_and(|l| l.deleting)
            })
            .collect();
        if !deleting.is_empty() {
            let message = self.running_message(&deleting, true);
            return self.end(Next::Running {
                message,
                wave_delay: false,
            });
        }
        let on_success = self.hooks_to_delete(DeletePolicy::HookSucceeded);
        let on_failure = self.hooks_to_delete(DeletePolicy::HookFailed);
        let (sync_fail, others): (Vec<usize>, Vec<usize>) = all
            .into_iter()
            .partition(|&t| self.tasks[t].phase == SyncPhase::SyncFail);
        let failed: Vec<usize> = others
            .iter()
            .copied()
            .filter(|&t| self.tasks[t].status == Some(ResultCode::SyncFailed))
            .collect();
        if others
            .iter()
            .any(|&t| self.tasks[t].completed() && !self.tasks[t].successful())
        {
            self.stage = Stage::DeleteHooks {
                tasks: on_failure.clone(),
                persisted: false,
                then: Box::new(Stage::SyncFail(SyncFail {
                    sync_fail,
                    failed,
                    message: "one or more synchronization tasks completed unsuccessfully"
                        .to_owned(),
                    running: Vec::new(),
                    on_failure: Vec::new(),
                })),
            };
            return None;
        }
        let pending: Vec<usize> = others
            .into_iter()
            .filter(|&t| self.tasks[t].pending() && !self.unmodified(t))
            .collect();
        let (Some(&first), Some(&last)) = (pending.first(), pending.last()) else {
            self.stage = Stage::DeleteHooks {
                tasks: on_success,
                persisted: false,
                then: Box::new(Stage::End(Next::Finished {
                    phase: OperationPhase::Succeeded,
                    message: "successfully synced (no more tasks)".to_owned(),
                })),
            };
            return None;
        };
        let at = (self.tasks[first].phase, self.tasks[first].wave);
        let final_wave = at == (self.tasks[last].phase, self.tasks[last].wave);
        let (group, rest): (Vec<usize>, Vec<usize>) = pending
            .into_iter()
            .partition(|&t| (self.tasks[t].phase, self.tasks[t].wave) == at);
        self.stage = Stage::Run(Run::new(
            group,
            false,
            Purpose::Wave {
                final_wave,
                remaining: !rest.is_empty(),
                sync_fail,
                on_failure,
                on_success,
            },
        ));
        None
    }

    /// Argo CD's progress of running tasks: a hook by its live health (a pending hook
    /// live with this attempt's mark is adopted first); a resource once healthy (or of a
    /// kind without health) succeeded, once degraded failed.
    fn update_running(&mut self) {
        for t in 0..self.tasks.len() {
            let task = &self.tasks[t];
            let Some(live) = self.view.live_of(task) else {
                continue;
            };
            if task.hook && task.pending() && self.view.is_this_attempt(live) {
                // Created by this attempt, by an owner that died before recording it:
                // adopted, never created again.
                let message = format!("{}/{} created", task.key.kind.to_lowercase(), task.key.name);
                self.set_result(
                    t,
                    Some(ResultCode::Synced),
                    Some(OperationPhase::Running),
                    &message,
                );
            }
            let task = &self.tasks[t];
            if !task.running() {
                continue;
            }
            if task.hook {
                let (phase, message) = hook_phase(live);
                self.set_result(t, task.status, Some(phase), &message);
                continue;
            }
            let status = task.status;
            match &live.health {
                None => self.set_result(t, status, Some(OperationPhase::Succeeded), ""),
                Some(h) if h.status == HealthStatus::Healthy => {
                    let message = h.message.clone();
                    self.set_result(t, status, Some(OperationPhase::Succeeded), &message);
                }
                Some(h) if h.status == HealthStatus::Degraded => {
                    let message = h.message.clone();
                    self.set_result(t, status, Some(OperationPhase::Failed), &message);
                }
                Some(_) => {}
            }
        }
    }

    /// Completed hooks (live, not running) with `policy`.
    fn hooks_to_delete(&self, policy: DeletePolicy) -> Vec<usize> {
        (0..self.tasks.len())
            .filter(|&t| {
                let task = &self.tasks[t];
                task.hook
                    && !task.running()
                    && self.view.live_of(task).is_some()
                    && has_policy(&self.view, task, policy)
            })
            .collect()
    }

    /// gitops-engine's `setRunningPhase`: what the step waits for.
    pub(super) fn running_message(&self, tasks: &[usize], deletion: bool) -> String {
        let Some(_) = tasks.first() else {
            return String::new();
        };
        let (hooks, resources): (Vec<usize>, Vec<usize>) =
            tasks.iter().copied().partition(|&t| self.tasks[t].hook);
        let mut reason = if hooks.is_empty() {
            "healthy state of".to_owned()
        } else {
            "completion of hook".to_owned()
        };
        let task_type = if resources.is_empty() {
            "hooks"
        } else {
            "resources"
        };
        if deletion {
            reason = if hooks.is_empty() {
                "deletion of".to_owned()
            } else {
                "deletion of hook".to_owned()
            };
        }
        let mut first = hooks
            .first()
            .or(resources.first())
            .copied()
            .unwrap_or(tasks[0]);
        let mut more = tasks.len() - 1;
        if !self.view.settings.prune_confirmed {
            let confirm: Vec<usize> = tasks
                .iter()
                .copied()
                .filter(|&t| {
                    self.tasks[t].is_prune() && self.view.needs_prune_confirmation(&self.tasks[t])
                })
                .collect();
            if let Some(&c) = confirm.first() {
                reason = "pruning confirmation of".to_owned();
                first = c;
                more = confirm.len() - 1;
            }
        }
        let k = &self.tasks[first].key;
        let mut message = format!("waiting for {reason} {}/{}/{}", k.group, k.kind, k.name);
        if more > 0 {
            message = format!("{message} and {more} more {task_type}");
        }
        message
    }
}
