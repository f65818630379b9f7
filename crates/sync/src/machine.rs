//! The sync step machine: gitops-engine's `Sync()` as a machine that writes nothing
//! itself. Built over one step's inputs (the desired objects, the live ones, the settings,
//! the recorded results), it hands out what to write — a batch at a time — takes each
//! write's outcome back, and ends the step with the operation's phase and message; its
//! [`Record`] is then the state to persist. A step does what one `Sync()` call does:
//!
//! 1. The first step (nothing recorded yet) creates the namespace `CreateNamespace=true`
//!    asks for, then dry-runs every object; one that fails fails the sync before anything
//!    is applied.
//! 2. Running tasks are assessed from their live objects: a hook by its health (completed,
//!    failed or running); a resource by its health once it was applied. While the sync has
//!    several phases or waves, a running task — or, always, a running hook — makes the
//!    step wait; so does a pruned object still being deleted.
//! 3. A completed task that did not succeed fails the sync: SyncFail hooks run, then the
//!    operation fails. Nothing left to do succeeds it.
//! 4. Otherwise the first (phase, wave) of the pending tasks runs: prunes, then hooks whose
//!    earlier object must be deleted first (`BeforeHookCreation`), then the applies, in kind
//!    order. A wave that is not the last ends the step with Argo CD's wave delay.
//!
//! A hook is never created twice by one attempt of an operation: every hook carries the
//! attempt that created it ([`crate::HOOK_ATTEMPT`]), and a new owner that finds a pending
//! hook live with this attempt's mark (its predecessor died between creating it and
//! recording that) applies it again — which changes nothing — instead of deleting and
//! re-creating it. Before hooks are deleted by their policy the record is persisted
//! ([`Next::Persist`]): it says they completed, which the cluster no longer can.

use crate::annotations::{self as ann, DeletePolicy};
use crate::object::{HealthStatus, Live, Manifest, ObjectKey};
use crate::options::{Propagation, Settings};
use crate::record::{OperationPhase, Record, ResultCode, ResultEntry, SyncPhase};
use crate::tasks::{self, Invalid, Target, Task, View};

mod assess;
mod failure;
mod wave;

/// One step's inputs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncInput {
    /// The desired objects (resources and hooks), placed.
    pub manifests: Vec<Manifest>,
    /// The live objects: the counterparts of the desired ones and every object the app
    /// tracks.
    pub live: Vec<Live>,
    /// The operation.
    pub settings: Settings,
}

/// One write to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    /// The object written (a generated hook name included).
    pub key: ObjectKey,
    /// What to do.
    pub action: Action,
}

/// A write's kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Apply manifest `manifest` (under `key`'s name).
    Apply {
        /// The manifest's index in [`SyncInput::manifests`].
        manifest: usize,
        /// A dry run: validated by the server, nothing persisted.
        dry_run: bool,
        /// `Replace=true`: replace (create when missing) instead of apply.
        replace: bool,
        /// `Force=true` or a forced strategy: delete and re-create when the write fails.
        force: bool,
        /// Validate the object against the server's schema (`Validate=false` turns off).
        validate: bool,
        /// For a hook: the attempt to write in [`crate::HOOK_ATTEMPT`].
        hook_attempt: Option<String>,
    },
    /// Create the destination namespace, or apply its managed metadata; never tracked.
    ApplyNamespace {
        /// A dry run.
        dry_run: bool,
        /// Labels to set.
        labels: std::collections::BTreeMap<String, String>,
        /// Annotations to set.
        annotations: std::collections::BTreeMap<String, String>,
    },
    /// Delete the live object.
    Delete {
        /// The propagation policy.
        propagation: Propagation,
    },
}

/// How a write ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Done; the server's answer in words.
    Done(String),
    /// A delete of an object already gone.
    Gone,
    /// Refused or failed, and why.
    Failed(String),
}

/// What the machine needs next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Persist [`Sync::record`] now, before the writes that follow (hooks about to be
    /// deleted by their policy are recorded as completed in it); then call [`Sync::advance`]
    /// again.
    Persist,
    /// Make these writes, then report their outcomes, in order, to [`Sync::written`].
    Write(Vec<Write>),
    /// The step ended with the operation still running (`message` says on what it
    /// waits); `wave_delay`: a wave was applied that is not the last (Argo CD waits 2 s
    /// before assessing it).
    Running {
        /// What it waits for.
        message: String,
        /// Wait Argo CD's wave delay before the next step.
        wave_delay: bool,
    },
    /// The operation ended.
    Finished {
        /// `Succeeded`, `Failed` or `Error`.
        phase: OperationPhase,
        /// Why.
        message: String,
    },
}

/// What the machine does once the writes it handed out are reported.
#[derive(Debug, Clone)]
enum Stage {
    Start,
    Namespace,
    DryRun,
    Assess,
    Run(Run),
    SyncFail(SyncFail),
    /// Delete hooks by policy; `persisted`: the record that says they completed was
    /// persisted first (a new owner must not find them gone while recorded running).
    DeleteHooks {
        tasks: Vec<usize>,
        then: Box<Stage>,
        persisted: bool,
    },
    Terminate,
    End(Next),
}

/// Why a group of tasks runs (what follows).
#[derive(Debug, Clone)]
enum Purpose {
    Namespace,
    DryRun,
    Wave {
        final_wave: bool,
        remaining: bool,
        sync_fail: Vec<usize>,
        on_failure: Vec<usize>,
        on_success: Vec<usize>,
    },
    SyncFail,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RunState {
    Successful,
    Pending,
    Failed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RunStep {
    Prunes,
    PreDeletes,
    AfterDeletes,
    Creates,
    Done,
}

/// gitops-engine's `runTasks`: one group of tasks, in steps.
#[derive(Debug, Clone)]
struct Run {
    tasks: Vec<usize>,
    dry_run: bool,
    step: RunStep,
    state: RunState,
    purpose: Purpose,
}

/// gitops-engine's `executeSyncFailPhase`, and what follows when its hooks are started.
#[derive(Debug, Clone)]
struct SyncFail {
    sync_fail: Vec<usize>,
    failed: Vec<usize>,
    message: String,
    /// Hooks still running in the failed wave: the step waits on them too.
    running: Vec<usize>,
    /// Hooks to delete once the phase completed (`HookFailed`).
    on_failure: Vec<usize>,
}

/// The writes handed out and what they were for.
#[derive(Debug, Clone)]
struct Awaiting {
    tasks: Vec<usize>,
    kind: AwaitKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AwaitKind {
    Prunes,
    PreDeletes,
    Creates,
    HookDeletes,
    Terminate,
}

/// One step of a sync (see the module documentation).
pub struct Sync<'a> {
    view: View<'a>,
    tasks: Vec<Task>,
    invalid: Vec<Invalid>,
    record: Record,
    stage: Stage,
    validated: bool,
    awaiting: Option<Awaiting>,
    terminate_ok: bool,
    /// Tasks applied by this step: their live objects are not in the inputs yet.
    written_now: Vec<bool>,
    /// The namespace this step created first (left out of its dry run).
    namespace_created: Option<usize>,
    /// Where each task's entry is in `record` (by task), once it has one.
    recorded_at: Vec<Option<usize>>,
}

impl<'a> Sync<'a> {
    /// A step over `input`, resuming from `record`. `validated`: this step's dry run was
    /// already done (by an earlier step of the same call).
    pub fn new(input: &'a SyncInput, record: Record, validated: bool) -> Self {
        let view = View {
            manifests: &input.manifests,
            live: &input.live,
            settings: &input.settings,
        };
        let (tasks, invalid) = tasks::build(&view, &record);
        let written_now = vec![false; tasks.len()];
        let positions = record.positions();
        let recorded_at = tasks
            .iter()
            .map(|t| positions.get(&(t.phase, &t.key)).copied())
            .collect();
        Sync {
            view,
            tasks,
            invalid,
            record,
            stage: Stage::Start,
            validated,
            awaiting: None,
            terminate_ok: true,
            written_now,
            namespace_created: None,
            recorded_at,
        }
    }

    /// The termination of the operation (`Terminating`): running hooks are deleted (or,
    /// once completed, recorded as they ended), and the operation fails.
    pub fn terminate(input: &'a SyncInput, record: Record) -> Self {
        let mut sync = Sync::new(input, record, true);
        sync.stage = Stage::Terminate;
        sync
    }

    /// The results so far: the state to persist.
    pub fn record(&self) -> &Record {
        &self.record
    }

    /// Whether this step's dry run is done.
    pub fn validated(&self) -> bool {
        self.validated
    }

    /// What to do next.
    pub fn advance(&mut self) -> Next {
        assert!(
            self.awaiting.is_none(),
            "sync machine: outcomes of the last writes not reported"
        );
        loop {
            let stage = std::mem::replace(&mut self.stage, Stage::Start);
            let out = match stage {
                Stage::Start => self.start(),
                Stage::Namespace => self.namespace(),
                Stage::DryRun => self.dry_run(),
                Stage::Assess => self.assess(),
                Stage::Run(run) => self.run(run),
                Stage::SyncFail(sf) => self.sync_fail(sf),
                Stage::DeleteHooks {
                    tasks,
                    then,
                    persisted,
                } => self.delete_hooks(tasks, *then, persisted),
                Stage::Terminate => self.terminate_hooks(),
                Stage::End(next) => {
                    self.stage = Stage::End(next.clone());
                    return next;
                }
            };
            if let Some(next) = out {
                return next;
            }
        }
    }

    /// The outcomes of the writes [`Sync::advance`] handed out, in their order.
    pub fn written(&mut self, outcomes: Vec<Outcome>) {
        let awaiting = self
            .awaiting
            .take()
            .expect("sync machine: outcomes reported with no writes handed out");
        assert_eq!(
            awaiting.tasks.len(),
            outcomes.len(),
            "one outcome per write"
        );
        for (&t, outcome) in awaiting.tasks.iter().zip(outcomes) {
            self.absorb(t, awaiting.kind, outcome);
        }
        if awaiting.kind == AwaitKind::Terminate {
            self.termination_ending();
        }
    }

    fn set_result(
        &mut self,
        t: usize,
        status: Option<ResultCode>,
        op: Option<OperationPhase>,
        message: &str,
    ) {
        let task = &mut self.tasks[t];
        task.status = status;
        task.op = op;
        if !message.is_empty() {
            task.message = message.to_owned();
        }
        let entry = ResultEntry {
            key: task.key.clone(),
            version: task.version.clone(),
            status,
            hook_type: task.hook_type(),
            hook_phase: op,
            sync_phase: task.phase,
            message: task.message.clone(),
        };
        self.recorded_at[t] = Some(self.record.set_at(self.recorded_at[t], entry));
    }

    fn hand_out(&mut self, writes: Vec<(usize, Write)>, kind: AwaitKind) -> Option<Next> {
        let (tasks, writes): (Vec<usize>, Vec<Write>) = writes.into_iter().unzip();
        self.awaiting = Some(Awaiting { tasks, kind });
        Some(Next::Write(writes))
    }

    fn end(&mut self, next: Next) -> Option<Next> {
        self.stage = Stage::End(next);
        None
    }

    fn started(&self) -> bool {
        let ns = &self.view.settings.namespace;
        self.record
            .results
            .iter()
            .any(|r| !(r.sync_phase == SyncPhase::PreSync && r.key.is_namespace(ns)))
    }

    fn start(&mut self) -> Option<Next> {
        if !self.invalid.is_empty() {
            let invalid = std::mem::take(&mut self.invalid);
            let mut messages: Vec<String> = Vec::new();
            for i in invalid {
                self.set_result(i.task, Some(ResultCode::SyncFailed), None, &i.message);
                if !messages.contains(&i.message) {
                    messages.push(i.message);
                }
            }
            messages.sort();
            return self.end(Next::Finished {
                phase: OperationPhase::Failed,
                message: format!(
                    "one or more synchronization tasks are not valid: {}",
                    messages.join("; ")
                ),
            });
        }
        self.stage = if !self.started() && !self.validated {
            Stage::Namespace
        } else {
            Stage::Assess
        };
        None
    }

    /// The namespace `CreateNamespace=true` creates goes first: the dry run of the rest
    /// would fail without it.
    fn namespace_creation_task(&self) -> Option<usize> {
        self.tasks.iter().position(|t| {
            t.target == Target::Namespace && t.pending() && self.view.live_of(t).is_none()
        })
    }

    fn namespace(&mut self) -> Option<Next> {
        self.namespace_created = self.namespace_creation_task();
        self.stage = match self.namespace_created {
            Some(t) => Stage::Run(Run::new(vec![t], false, Purpose::Namespace)),
            None => Stage::DryRun,
        };
        None
    }

    fn dry_run(&mut self) -> Option<Next> {
        let ns = self.namespace_created;
        let tasks: Vec<usize> = (0..self.tasks.len())
            .filter(|&t| Some(t) != ns && !self.unmodified(t))
            .collect();
        self.stage = Stage::Run(Run::new(tasks, true, Purpose::DryRun));
        None
    }

    /// With `ApplyOutOfSyncOnly=true`: a resource compared equal to its live object.
    fn unmodified(&self, t: usize) -> bool {
        let task = &self.tasks[t];
        if !self.view.settings.options.has("ApplyOutOfSyncOnly=true") || task.hook {
            return false;
        }
        match task.target {
            Target::Manifest(i) => {
                task.live.is_some() && self.view.manifests[i].out_of_sync == Some(false)
            }
            _ => false,
        }
    }
}

impl Run {
    fn new(tasks: Vec<usize>, dry_run: bool, purpose: Purpose) -> Self {
        Run {
            tasks,
            dry_run,
            step: RunStep::Prunes,
            state: RunState::Successful,
            purpose,
        }
    }
}

/// A hook's phase and message from its live object's health.
pub(crate) fn hook_phase(live: &Live) -> (OperationPhase, String) {
    match &live.health {
        None => (
            OperationPhase::Succeeded,
            format!("{} created", live.key.name),
        ),
        Some(h) => {
            let phase = match h.status {
                HealthStatus::Unknown | HealthStatus::Degraded | HealthStatus::Missing => {
                    OperationPhase::Failed
                }
                HealthStatus::Progressing | HealthStatus::Suspended => OperationPhase::Running,
                HealthStatus::Healthy => OperationPhase::Succeeded,
            };
            (phase, h.message.clone())
        }
    }
}

/// Whether the hook `t` of `view` has delete policy `policy`.
pub(crate) fn has_policy(view: &View<'_>, t: &Task, policy: DeletePolicy) -> bool {
    view.has_policy(t, policy)
}

/// Whether the object has the per-object sync option `option`.
pub(crate) fn object_option(view: &View<'_>, t: &Task, option: &str) -> bool {
    ann::has_option(view.annotations(t), option)
        || view
            .live_of(t)
            .is_some_and(|l| ann::has_option(&l.annotations, option))
}
