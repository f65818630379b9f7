//! Running one group of tasks (gitops-engine's `runTasks`): prunes, then the deletions
//! of hooks that must go before they are created again, then the applies; each write's
//! outcome recorded; and what follows the group.

use super::{
    Action, AwaitKind, Next, Outcome, Purpose, Run, RunState, RunStep, Stage, Sync, SyncFail,
    Write, object_option,
};
use crate::record::{OperationPhase, ResultCode};
use crate::tasks::Target;

impl Sync<'_> {
    /// One group of tasks, step by step: prunes, deletions before creation, applies.
    pub(super) fn run(&mut self, mut run: Run) -> Option<Next> {
        let dry = run.dry_run || self.view.settings.dry_run;
        loop {
            match run.step {
                RunStep::Prunes => {
                    run.step = RunStep::PreDeletes;
                    let prunes: Vec<usize> = run
                        .tasks
                        .iter()
                        .copied()
                        .filter(|&t| self.tasks[t].is_prune())
                        .collect();
                    if !self.view.settings.prune_confirmed
                        && prunes
                            .iter()
                            .any(|&t| self.view.needs_prune_confirmation(&self.tasks[t]))
                    {
                        run.state = RunState::Pending;
                        run.step = RunStep::Done;
                        continue;
                    }
                    let writes = self.prune_writes(&prunes, dry, &mut run);
                    if !writes.is_empty() {
                        self.stage = Stage::Run(run);
                        return self.hand_out(writes, AwaitKind::Prunes);
                    }
                }
                RunStep::PreDeletes => {
                    if self.run_failed(&run) {
                        run.state = RunState::Failed;
                        run.step = RunStep::Done;
                        continue;
                    }
                    run.step = RunStep::AfterDeletes;
                    if dry {
                        continue;
                    }
                    let writes: Vec<(usize, Write)> = run
                        .tasks
                        .iter()
                        .copied()
                        .filter(|&t| {
                            !self.tasks[t].is_prune()
                                && self.view.delete_before_creation(&self.tasks[t])
                        })
                        .map(|t| (t, self.delete_write(t)))
                        .collect();
                    if !writes.is_empty() {
                        self.stage = Stage::Run(run);
                        return self.hand_out(writes, AwaitKind::PreDeletes);
                    }
                }
                RunStep::AfterDeletes => {
                    if self.run_pending(&run) {
                        run.state = RunState::Pending;
                        run.step = RunStep::Done;
                        continue;
                    }
                    if self.run_failed(&run) {
                        run.state = RunState::Failed;
                        run.step = RunStep::Done;
                        continue;
                    }
                    run.step = RunStep::Creates;
                }
                RunStep::Creates => {
                    run.step = RunStep::Done;
                    let writes: Vec<(usize, Write)> = run
                        .tasks
                        .iter()
                        .copied()
                        .filter(|&t| {
                            !(self.tasks[t].is_prune() || dry && self.tasks[t].skip_dry_run)
                        })
                        .map(|t| (t, self.apply_write(t, dry)))
                        .collect();
                    if !writes.is_empty() {
                        self.stage = Stage::Run(run);
                        return self.hand_out(writes, AwaitKind::Creates);
                    }
                }
                RunStep::Done => {
                    if run.state == RunState::Successful && self.run_failed(&run) {
                        run.state = RunState::Failed;
                    }
                    return self.after_run(run);
                }
            }
        }
    }

    /// A task of `run` failed in it.
    fn run_failed(&self, run: &Run) -> bool {
        run.state == RunState::Failed
            || run.tasks.iter().any(|&t| {
                let task = &self.tasks[t];
                task.status == Some(ResultCode::SyncFailed)
                    || task.op == Some(OperationPhase::Error)
            })
    }

    /// A deletion before creation was sent and not yet seen through.
    fn run_pending(&self, run: &Run) -> bool {
        run.state == RunState::Pending
    }

    fn prune_writes(&mut self, prunes: &[usize], dry: bool, run: &mut Run) -> Vec<(usize, Write)> {
        let record = !run.dry_run || self.view.settings.dry_run;
        let mut writes = Vec::new();
        for &t in prunes {
            let task = &self.tasks[t];
            let skipped = if !self.view.settings.prune {
                Some((
                    ResultCode::PruneSkipped,
                    "ignored (requires pruning)".to_owned(),
                ))
            } else if let Some(why) = self.view.prune_protection(task) {
                Some((ResultCode::PruneSkipped, why))
            } else if dry {
                Some((ResultCode::Pruned, "pruned (dry run)".to_owned()))
            } else if self.view.live_of(task).is_some_and(|l| l.deleting) {
                Some((ResultCode::Pruned, "pruned".to_owned()))
            } else {
                None
            };
            match skipped {
                Some((code, message)) => {
                    if record {
                        self.set_result(t, Some(code), Some(OperationPhase::Succeeded), &message);
                    }
                }
                None => writes.push((t, self.delete_write(t))),
            }
        }
        writes
    }

    pub(super) fn delete_write(&self, t: usize) -> Write {
        Write {
            key: self.tasks[t].key.clone(),
            action: Action::Delete {
                propagation: self.view.settings.options.prune_propagation(),
            },
        }
    }

    fn apply_write(&self, t: usize, dry_run: bool) -> Write {
        let task = &self.tasks[t];
        let s = self.view.settings;
        let action = match task.target {
            Target::Manifest(manifest) => Action::Apply {
                manifest,
                dry_run,
                replace: s.options.has("Replace=true")
                    || object_option(&self.view, task, "Replace=true"),
                force: s.force || object_option(&self.view, task, "Force=true"),
                validate: !s.options.has("Validate=false")
                    && !crate::annotations::has_option(
                        self.view.annotations(task),
                        "Validate=false",
                    ),
                hook_attempt: task.hook.then(|| s.attempt.clone()),
            },
            Target::Namespace | Target::Prune => {
                let managed = s
                    .namespace_creation
                    .as_ref()
                    .and_then(|c| c.managed.clone())
                    .unwrap_or_default();
                let mut annotations = managed.annotations;
                if !managed.labels.is_empty() || !annotations.is_empty() {
                    // As Argo CD marks the managed namespace: applied server-side.
                    annotations.insert(
                        crate::annotations::SYNC_OPTIONS.to_owned(),
                        "ServerSideApply=true".to_owned(),
                    );
                }
                Action::ApplyNamespace {
                    dry_run,
                    labels: managed.labels,
                    annotations,
                }
            }
        };
        Write {
            key: task.key.clone(),
            action,
        }
    }

    /// Records one write's outcome.
    pub(super) fn absorb(&mut self, t: usize, kind: AwaitKind, outcome: Outcome) {
        let settings_dry = self.view.settings.dry_run;
        let status = self.tasks[t].status;
        match (kind, outcome) {
            (AwaitKind::Prunes, Outcome::Done(_)) => {
                self.set_result(
                    t,
                    Some(ResultCode::Pruned),
                    Some(OperationPhase::Succeeded),
                    "pruned",
                );
            }
            (AwaitKind::Prunes, Outcome::Gone) => {
                self.set_result(
                    t,
                    Some(ResultCode::Pruned),
                    Some(OperationPhase::Succeeded),
                    "already gone",
                );
            }
            (AwaitKind::Prunes, Outcome::Failed(m)) => {
                self.set_result(
                    t,
                    Some(ResultCode::SyncFailed),
                    Some(OperationPhase::Failed),
                    &m,
                );
            }
            (AwaitKind::PreDeletes, Outcome::Gone) => {
                // Already gone: created at once.
                self.tasks[t].live = None;
            }
            (AwaitKind::PreDeletes, Outcome::Done(_)) => {
                // Deleted: created once it is gone (a later step).
                if let Some(Stage::Run(run)) = self.stage_run_mut() {
                    run.state = RunState::Pending;
                }
            }
            (AwaitKind::PreDeletes | AwaitKind::HookDeletes, Outcome::Failed(m)) => {
                let op = Some(OperationPhase::Error);
                self.set_result(t, status, op, &format!("failed to delete resource: {m}"));
            }
            (AwaitKind::HookDeletes, _) => {}
            (AwaitKind::Creates, Outcome::Done(m)) => {
                let dry = match self.stage_run_mut() {
                    Some(Stage::Run(run)) => run.dry_run,
                    _ => false,
                };
                if !dry {
                    self.written_now[t] = true;
                }
                if !dry || settings_dry {
                    let op = if settings_dry {
                        OperationPhase::Succeeded
                    } else {
                        OperationPhase::Running
                    };
                    self.set_result(t, Some(ResultCode::Synced), Some(op), &m);
                }
            }
            (AwaitKind::Creates, Outcome::Failed(m)) => {
                self.set_result(
                    t,
                    Some(ResultCode::SyncFailed),
                    Some(OperationPhase::Failed),
                    &m,
                );
            }
            (AwaitKind::Creates, Outcome::Gone) => {
                let m = "the object went away while it was written";
                self.set_result(
                    t,
                    Some(ResultCode::SyncFailed),
                    Some(OperationPhase::Failed),
                    m,
                );
            }
            (AwaitKind::Terminate, Outcome::Failed(m)) => {
                self.terminate_ok = false;
                let op = Some(OperationPhase::Failed);
                self.set_result(t, status, op, &format!("Failed to delete: {m}"));
            }
            (AwaitKind::Terminate, _) => {}
        }
    }

    fn stage_run_mut(&mut self) -> Option<&mut Stage> {
        match &mut self.stage {
            s @ Stage::Run(_) => Some(s),
            _ => None,
        }
    }

    /// What follows a group of tasks that ran.
    fn after_run(&mut self, run: Run) -> Option<Next> {
        match run.purpose {
            Purpose::Namespace => {
                if run.state == RunState::Failed {
                    let message = self.fail_message("the namespace failed to apply", &run.tasks);
                    return self.end(Next::Finished {
                        phase: OperationPhase::Failed,
                        message,
                    });
                }
                self.stage = super::Stage::DryRun;
                None
            }
            Purpose::DryRun => {
                if run.state == RunState::Failed {
                    return self.end(Next::Finished {
                        phase: OperationPhase::Failed,
                        message: "one or more objects failed to apply (dry run)".to_owned(),
                    });
                }
                self.validated = true;
                self.stage = Stage::Assess;
                None
            }
            Purpose::SyncFail => {
                let message = self.running_message(&run.tasks, false);
                self.end(Next::Running {
                    message,
                    wave_delay: false,
                })
            }
            Purpose::Wave {
                final_wave,
                remaining,
                sync_fail,
                on_failure,
                on_success,
            } => match run.state {
                RunState::Failed => {
                    let failed: Vec<usize> = run
                        .tasks
                        .iter()
                        .copied()
                        .filter(|&t| self.tasks[t].status == Some(ResultCode::SyncFailed))
                        .collect();
                    let running: Vec<usize> = run
                        .tasks
                        .iter()
                        .copied()
                        .filter(|&t| self.tasks[t].running())
                        .collect();
                    self.stage = Stage::SyncFail(SyncFail {
                        sync_fail,
                        failed,
                        message: "one or more objects failed to apply".to_owned(),
                        on_failure: if running.is_empty() {
                            on_failure
                        } else {
                            Vec::new()
                        },
                        running,
                    });
                    None
                }
                RunState::Pending => {
                    let waiting: Vec<usize> = run
                        .tasks
                        .iter()
                        .copied()
                        .filter(|&t| {
                            let task = &self.tasks[t];
                            self.view.delete_before_creation(task)
                                || (task.is_prune() && task.pending())
                        })
                        .collect();
                    let message = self.running_message(&waiting, true);
                    self.end(Next::Running {
                        message,
                        wave_delay: false,
                    })
                }
                RunState::Successful => {
                    if !remaining && !run.tasks.iter().any(|&t| self.tasks[t].hook) {
                        // The last wave of resources: done, even if they degrade later.
                        self.stage = Stage::DeleteHooks {
                            tasks: on_success,
                            persisted: false,
                            then: Box::new(Stage::End(Next::Finished {
                                phase: OperationPhase::Succeeded,
                                message: "successfully synced (all tasks run)".to_owned(),
                            })),
                        };
                        return None;
                    }
                    let message = self.running_message(&run.tasks, false);
                    self.end(Next::Running {
                        message,
                        wave_delay: !final_wave,
                    })
                }
            },
        }
    }
}
