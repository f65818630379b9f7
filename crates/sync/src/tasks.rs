//! The tasks of a sync, built and ordered as gitops-engine builds them: one per resource
//! and phase (a hook may run in several phases), prunes for tracked live objects no longer
//! desired (never hooks), the namespace `CreateNamespace=true` asks for, the recorded result
//! of each, and their order — phase, wave, kind (Helm's install order), name — with
//! namespaces and CRDs moved before the objects that need them, prune waves reversed, and
//! `PruneLast` prunes after the last wave.

use std::collections::HashMap;

use crate::annotations::{self as ann, Annotations, DeletePolicy, HookType};
use crate::object::{Live, Manifest, ObjectKey};
use crate::options::Settings;
use crate::record::{OperationPhase, Record, ResultCode, SyncPhase};

/// Kinds in the order Helm installs them; a kind not listed comes after all of them.
const KIND_ORDER: &[&str] = &[
    "Namespace",
    "NetworkPolicy",
    "ResourceQuota",
    "LimitRange",
    "PodSecurityPolicy",
    "PodDisruptionBudget",
    "ServiceAccount",
    "Secret",
    "SecretList",
    "ConfigMap",
    "StorageClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleList",
    "ClusterRoleBinding",
    "ClusterRoleBindingList",
    "Role",
    "RoleList",
    "RoleBinding",
    "RoleBindingList",
    "Service",
    "DaemonSet",
    "Pod",
    "ReplicationController",
    "ReplicaSet",
    "Deployment",
    "HorizontalPodAutoscaler",
    "StatefulSet",
    "Job",
    "CronJob",
    "IngressClass",
    "Ingress",
    "APIService",
];

/// A kind's place in [`KIND_ORDER`] (unlisted kinds last).
fn kind_rank(kind: &str) -> usize {
    KIND_ORDER
        .iter()
        .position(|k| *k == kind)
        .unwrap_or(KIND_ORDER.len())
}

/// What a task writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// A manifest (by index).
    Manifest(usize),
    /// The destination namespace of `CreateNamespace=true`.
    Namespace,
    /// Nothing: the live object is to be pruned.
    Prune,
}

/// One thing to do in one phase.
#[derive(Debug, Clone)]
pub(crate) struct Task {
    pub(crate) phase: SyncPhase,
    pub(crate) target: Target,
    /// The live counterpart (by index), if any.
    pub(crate) live: Option<usize>,
    /// The object's key (a generated hook's name included; the live key for prunes).
    pub(crate) key: ObjectKey,
    pub(crate) version: String,
    pub(crate) hook: bool,
    pub(crate) wave: i64,
    pub(crate) skip_dry_run: bool,
    /// The recorded result.
    pub(crate) status: Option<ResultCode>,
    pub(crate) op: Option<OperationPhase>,
    pub(crate) message: String,
}

impl Task {
    pub(crate) fn is_prune(&self) -> bool {
        self.target == Target::Prune
    }
    pub(crate) fn pending(&self) -> bool {
        self.op.is_none()
    }
    pub(crate) fn running(&self) -> bool {
        self.op == Some(OperationPhase::Running)
    }
    pub(crate) fn completed(&self) -> bool {
        self.op.is_some_and(OperationPhase::completed)
    }
    pub(crate) fn successful(&self) -> bool {
        self.op == Some(OperationPhase::Succeeded)
    }
    pub(crate) fn hook_type(&self) -> Option<HookType> {
        self.hook.then(|| self.phase.hook_type())
    }
}

/// The sync's inputs, and how tasks read them.
pub(crate) struct View<'a> {
    pub(crate) manifests: &'a [Manifest],
    pub(crate) live: &'a [Live],
    pub(crate) settings: &'a Settings,
}

impl<'a> View<'a> {
    /// The annotations of what the task writes (the live object's for a prune).
    pub(crate) fn annotations(&self, t: &Task) -> &'a Annotations {
        match t.target {
            Target::Manifest(i) => &self.manifests[i].annotations,
            Target::Namespace => self.namespace_annotations(),
            Target::Prune => &self.live[t.live.unwrap_or_default()].annotations,
        }
    }

    fn namespace_annotations(&self) -> &'a Annotations {
        static EMPTY: Annotations = Annotations::new();
        self.settings
            .namespace_creation
            .as_ref()
            .and_then(|c| c.managed.as_ref())
            .map_or(&EMPTY, |m| &m.annotations)
    }

    /// The task's live object (for the namespace of `CreateNamespace=true`, as the
    /// settings give it).
    pub(crate) fn live_of(&self, t: &Task) -> Option<&'a Live> {
        match t.target {
            Target::Namespace => self
                .settings
                .namespace_creation
                .as_ref()
                .and_then(|c| c.live.as_ref()),
            _ => t.live.map(|i| &self.live[i]),
        }
    }

    pub(crate) fn has_policy(&self, t: &Task, policy: DeletePolicy) -> bool {
        t.hook && ann::delete_policies(self.annotations(t)).contains(&policy)
    }

    /// Argo CD's `deleteBeforeCreation`: a pending hook whose earlier object is live. A
    /// live object this very attempt created (its owner died before recording it) is not
    /// deleted: applying it again changes nothing, so the hook does not run twice.
    pub(crate) fn delete_before_creation(&self, t: &Task) -> bool {
        t.pending()
            && self.live_of(t).is_some_and(|l| !self.is_this_attempt(l))
            && self.has_policy(t, DeletePolicy::BeforeHookCreation)
    }

    /// Whether a live hook object was created by this attempt of the operation.
    pub(crate) fn is_this_attempt(&self, live: &Live) -> bool {
        live.annotations
            .get(crate::HOOK_ATTEMPT)
            .map(String::as_str)
            == Some(self.settings.attempt.as_str())
    }

    /// Whether the prune of `t` waits for a confirmation (`Prune=confirm`, on the object
    /// or app-wide).
    pub(crate) fn needs_prune_confirmation(&self, t: &Task) -> bool {
        let own = self
            .live_of(t)
            .and_then(|l| ann::option_value(&l.annotations, "Prune"));
        own.or_else(|| self.settings.options.value("Prune")) == Some("confirm")
    }

    /// Why the live object of prune `t` is never pruned, if it is not: `Prune=false` on
    /// the object or app-wide (Argo CD's rule), and — fleetshard's rule, so that what Argo
    /// CD would keep on the app's deletion is not lost to a prune either — `Delete=false` or
    /// Helm's `resource-policy: keep` on the object.
    pub(crate) fn prune_protection(&self, t: &Task) -> Option<String> {
        let live = self.live_of(t)?;
        let own = ann::option_value(&live.annotations, "Prune");
        if own.or_else(|| self.settings.options.value("Prune")) == Some("false") {
            return Some("ignored (no prune)".to_owned());
        }
        if ann::option_value(&live.annotations, "Delete") == Some("false") {
            return Some(format!(
                "ignored (no prune): {}: Delete=false",
                ann::SYNC_OPTIONS
            ));
        }
        if live
            .annotations
            .get(ann::HELM_RESOURCE_POLICY)
            .is_some_and(|p| p.trim() == "keep")
        {
            return Some(format!(
                "ignored (no prune): {}: keep",
                ann::HELM_RESOURCE_POLICY
            ));
        }
        None
    }
}

/// The phases an object runs in: none for a `Skip` object, its hook types' phases for a
/// hook, `Sync` otherwise.
fn phases(annotations: &Annotations) -> Vec<SyncPhase> {
    if ann::is_skip(annotations) {
        return Vec::new();
    }
    if !ann::is_hook(annotations) {
        return vec![SyncPhase::Sync];
    }
    let mut out = Vec::new();
    for t in ann::hook_types(annotations) {
        let phase = match t {
            HookType::PreSync => SyncPhase::PreSync,
            HookType::Sync => SyncPhase::Sync,
            HookType::PostSync => SyncPhase::PostSync,
            HookType::SyncFail => SyncPhase::SyncFail,
            HookType::Skip => continue,
        };
        if !out.contains(&phase) {
            out.push(phase);
        }
    }
    out.sort();
    out
}

/// The name Argo CD gives a hook with only `generateName`: that prefix, then the
/// revision's first seven characters, the phase and the operation's start (Unix seconds),
/// lower-cased.
pub fn generated_name(
    prefix: &str,
    revision: &str,
    phase: SyncPhase,
    started_at_unix: i64,
) -> String {
    let short = if revision.len() >= 8 {
        revision.get(..7).unwrap_or(revision)
    } else {
        revision
    };
    let postfix = format!("{short}-{}-{started_at_unix}", phase.as_str()).to_lowercase();
    format!("{prefix}{postfix}")
}

/// A task failed before it ran, and why.
pub(crate) struct Invalid {
    pub(crate) task: usize,
    pub(crate) message: String,
}

/// Every task of the sync, ordered, with its recorded result; and those not valid (a kind
/// the cluster does not serve, that no CRD of this sync defines).
pub(crate) fn build(view: &View<'_>, record: &Record) -> (Vec<Task>, Vec<Invalid>) {
    let s = view.settings;
    let mut tasks = Vec::new();
    let task = |phase, target, live: Option<usize>, key: ObjectKey, version: &str, hook| Task {
        phase,
        target,
        live,
        key,
        version: version.to_owned(),
        hook,
        wave: 0,
        skip_dry_run: false,
        status: None,
        op: None,
        message: String::new(),
    };
    let live_by_key: HashMap<&ObjectKey, usize> = view
        .live
        .iter()
        .enumerate()
        .map(|(i, l)| (&l.key, i))
        .collect();
    let mut paired = vec![false; view.live.len()];
    // Resources (not hooks, not ignored) paired with their live objects.
    for (i, m) in view.manifests.iter().enumerate() {
        if ann::is_hook(&m.annotations) {
            continue;
        }
        let live = live_by_key.get(&m.key).copied();
        if let Some(l) = live {
            paired[l] = true;
        }
        if !s.selects(&m.key) {
            continue;
        }
        for phase in phases(&m.annotations) {
            tasks.push(task(
                phase,
                Target::Manifest(i),
                live,
                m.key.clone(),
                &m.version,
                false,
            ));
        }
    }
    // Tracked live objects no longer desired: prunes — never a hook.
    for (i, l) in view.live.iter().enumerate() {
        if paired[i] || !l.tracked || ann::is_hook(&l.annotations) || !s.selects(&l.key) {
            continue;
        }
        tasks.push(task(
            SyncPhase::Sync,
            Target::Prune,
            Some(i),
            l.key.clone(),
            &l.version,
            false,
        ));
    }
    // Hooks, named (a generated name per phase), unless the sync skips them.
    if !s.skip_hooks {
        for (i, m) in view.manifests.iter().enumerate() {
            if !ann::is_hook(&m.annotations) || ann::is_ignored(&m.annotations) {
                continue;
            }
            for phase in phases(&m.annotations) {
                let mut key = m.key.clone();
                if key.name.is_empty() {
                    key.name =
                        generated_name(&m.generate_name, &s.revision, phase, s.started_at_unix);
                }
                let live = live_by_key.get(&key).copied();
                tasks.push(task(
                    phase,
                    Target::Manifest(i),
                    live,
                    key,
                    &m.version,
                    true,
                ));
            }
        }
    }
    // The namespace `CreateNamespace=true` asks for, unless a manifest is that namespace:
    // created when missing; with managed metadata, applied when it exists too.
    if let Some(c) = &s.namespace_creation
        && !s.namespace.is_empty()
        && !view
            .manifests
            .iter()
            .any(|m| m.key.is_namespace(&s.namespace))
        && (c.live.is_none() || c.managed.is_some())
    {
        let key = ObjectKey::new("", "Namespace", "", &s.namespace);
        tasks.push(task(
            SyncPhase::PreSync,
            Target::Namespace,
            None,
            key,
            "v1",
            false,
        ));
    }
    for t in &mut tasks {
        t.wave = ann::wave(view.annotations(t));
    }
    let invalid = check_kinds(view, &mut tasks);
    order_prunes(view, &mut tasks);
    sort(view, &mut tasks);
    let positions = record.positions();
    for t in &mut tasks {
        if let Some(r) = positions
            .get(&(t.phase, &t.key))
            .map(|&i| &record.results[i])
        {
            t.status = r.status;
            t.op = r.hook_phase;
            t.message.clone_from(&r.message);
        }
    }
    let invalid = invalid
        .into_iter()
        .filter_map(|(key, phase, message)| {
            let task = tasks
                .iter()
                .position(|t| t.key == key && t.phase == phase)?;
            Some(Invalid { task, message })
        })
        .collect();
    (tasks, invalid)
}

/// Marks the tasks whose kind the cluster does not serve: their dry run is skipped when a
/// CRD of this sync defines the kind or `SkipDryRunOnMissingResource=true` (app-wide or on
/// the object) says so; otherwise they are not valid.
fn check_kinds(view: &View<'_>, tasks: &mut [Task]) -> Vec<(ObjectKey, SyncPhase, String)> {
    let s = view.settings;
    let mut invalid = Vec::new();
    for t in tasks.iter_mut() {
        let Target::Manifest(i) = t.target else {
            continue;
        };
        let m = &view.manifests[i];
        if m.kind_served {
            continue;
        }
        let defined = view.manifests.iter().any(|d| {
            d.defines
                .as_ref()
                .is_some_and(|(g, k)| *g == m.key.group && *k == m.key.kind)
        });
        if defined
            || s.options.has("SkipDryRunOnMissingResource=true")
            || ann::has_option(&m.annotations, "SkipDryRunOnMissingResource=true")
        {
            t.skip_dry_run = true;
        } else {
            let gk = if m.key.group.is_empty() {
                m.key.kind.clone()
            } else {
                format!("{}/{}", m.key.group, m.key.kind)
            };
            invalid.push((
                t.key.clone(),
                t.phase,
                format!("the server could not find the requested resource {gk} (its kind is not served, and no CustomResourceDefinition of this sync defines it)"),
            ));
        }
    }
    invalid
}

/// Prunes run in the reverse order of creation: their waves are mirrored (the lowest
/// wave with the highest); `PruneLast=true` (app-wide or on the object) moves a prune after
/// the last wave of the Sync phase.
fn order_prunes(view: &View<'_>, tasks: &mut [Task]) {
    let mut waves: Vec<i64> = tasks
        .iter()
        .filter(|t| t.is_prune())
        .map(|t| t.wave)
        .collect();
    waves.sort_unstable();
    waves.dedup();
    let mirrored: HashMap<i64, i64> = waves
        .iter()
        .zip(waves.iter().rev())
        .map(|(a, b)| (*a, *b))
        .collect();
    for t in tasks.iter_mut().filter(|t| t.is_prune()) {
        t.wave = mirrored[&t.wave];
    }
    let last = tasks
        .iter()
        .filter(|t| t.phase == SyncPhase::Sync)
        .map(|t| t.wave)
        .max()
        .unwrap_or(0)
        .max(0)
        + 1;
    let app_wide = view.settings.options.has("PruneLast=true");
    for t in tasks.iter_mut() {
        if t.is_prune()
            && (app_wide
                || view
                    .live_of(t)
                    .is_some_and(|l| ann::has_option(&l.annotations, "PruneLast=true")))
        {
            t.wave = last;
        }
    }
}

/// Phase, wave, kind, name; then namespaces before the objects in them, CRDs before their
/// objects (each moved to the first task that needs it, taking its phase and wave).
fn sort(view: &View<'_>, tasks: &mut Vec<Task>) {
    tasks.sort_by(|a, b| {
        (a.phase, a.wave, kind_rank(&a.key.kind), &a.key.name).cmp(&(
            b.phase,
            b.wave,
            kind_rank(&b.key.kind),
            &b.key.name,
        ))
    });
    let namespace = |t: &Task| {
        (t.target != Target::Prune && t.key.group.is_empty() && t.key.kind == "Namespace")
            .then(|| t.key.name.clone())
    };
    let in_namespace = |t: &Task| (!t.key.namespace.is_empty()).then(|| t.key.namespace.clone());
    adjust(tasks, &namespace, &in_namespace);
    let crd = |t: &Task| match t.target {
        Target::Manifest(i) => view.manifests[i]
            .defines
            .as_ref()
            .map(|(g, k)| format!("{g}/{k}")),
        _ => None,
    };
    let of_kind = |t: &Task| Some(format!("{}/{}", t.key.group, t.key.kind));
    adjust(tasks, &crd, &of_kind);
}

/// Moves each dependency task (`provides` gives its key) before the first task that
/// needs it (`needs`), with that task's phase and wave.
fn adjust(
    tasks: &mut Vec<Task>,
    provides: &dyn Fn(&Task) -> Option<String>,
    needs: &dyn Fn(&Task) -> Option<String>,
) {
    let mut first: HashMap<String, usize> = HashMap::new();
    let mut i = 0;
    while i < tasks.len() {
        if tasks[i].is_prune() {
            i += 1;
            continue;
        }
        if let Some(dep) = provides(&tasks[i]) {
            if let Some(&at) = first.get(&dep)
                && at < i
            {
                let mut t = tasks.remove(i);
                t.phase = tasks[at].phase;
                t.wave = tasks[at].wave;
                tasks.insert(at, t);
                for idx in first.values_mut() {
                    if *idx >= at {
                        *idx += 1;
                    }
                }
            }
        } else if let Some(dep) = needs(&tasks[i]) {
            first.entry(dep).or_insert(i);
        }
        i += 1;
    }
}
