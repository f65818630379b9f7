//! A model cluster and a driver of the engine over it: what the reconciler does, without
//! I/O. Writes change the model at once; health is set by the test (or the simulation);
//! every write is logged for the checks.

use std::collections::{BTreeMap, BTreeSet};

use fleetshard_sync::{
    Action, Annotations, HOOK_ATTEMPT, Health, HealthStatus, Live, Manifest, Next, ObjectKey,
    OperationPhase, Outcome, Record, Settings, Sync, SyncInput,
};

/// One object in the model cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct Obj {
    pub uid: u64,
    pub annotations: Annotations,
    pub health: Option<Health>,
    pub deleting: bool,
    pub tracked: bool,
}

/// One write the driver made.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// An apply: `created` when no object was there.
    Applied {
        key: ObjectKey,
        dry_run: bool,
        created: bool,
        attempt: Option<String>,
    },
    /// The destination namespace.
    Namespace {
        key: ObjectKey,
        labels: BTreeMap<String, String>,
    },
    /// A delete.
    Deleted { key: ObjectKey, propagation: String },
}

/// The model cluster.
#[derive(Debug, Default, Clone)]
pub struct Cluster {
    pub objects: BTreeMap<ObjectKey, Obj>,
    pub next_uid: u64,
    pub log: Vec<Event>,
    /// Applies of these keys fail.
    pub failing: BTreeSet<ObjectKey>,
    /// Health a newly applied object of a kind gets (absent: no health rule).
    pub initial_health: BTreeMap<String, HealthStatus>,
    /// Objects being deleted stay (with `deleting`) until the test finishes them.
    pub slow_deletes: bool,
}

impl Cluster {
    pub fn new() -> Self {
        let mut c = Cluster::default();
        for kind in ["Job", "Pod", "Deployment"] {
            c.initial_health
                .insert(kind.to_owned(), HealthStatus::Progressing);
        }
        c
    }

    pub fn set_health(&mut self, key: &ObjectKey, status: HealthStatus) {
        if let Some(o) = self.objects.get_mut(key) {
            o.health = Some(Health::new(status, &format!("{status:?}")));
        }
    }

    pub fn has(&self, name: &str) -> bool {
        self.objects.keys().any(|k| k.name == name)
    }

    fn execute(&mut self, manifests: &[Manifest], w: &fleetshard_sync::Write) -> Outcome {
        match &w.action {
            Action::Apply {
                manifest,
                dry_run,
                hook_attempt,
                ..
            } => {
                if self.failing.contains(&w.key) || self.failing.contains(&manifests[*manifest].key)
                {
                    return Outcome::Failed(format!("{} refused", w.key.name));
                }
                let created = !self.objects.contains_key(&w.key);
                self.log.push(Event::Applied {
                    key: w.key.clone(),
                    dry_run: *dry_run,
                    created,
                    attempt: hook_attempt.clone(),
                });
                if *dry_run {
                    return Outcome::Done("valid".into());
                }
                let mut annotations = manifests[*manifest].annotations.clone();
                if let Some(a) = hook_attempt {
                    annotations.insert(HOOK_ATTEMPT.to_owned(), a.clone());
                }
                let health = self
                    .initial_health
                    .get(&w.key.kind)
                    .map(|s| Health::new(*s, "applied"));
                let uid = self.next_uid;
                match self.objects.get_mut(&w.key) {
                    Some(o) => {
                        o.annotations = annotations;
                        o.tracked = true;
                        if o.health.is_none() {
                            o.health = health;
                        }
                    }
                    None => {
                        self.next_uid += 1;
                        self.objects.insert(
                            w.key.clone(),
                            Obj {
                                uid,
                                annotations,
                                health,
                                deleting: false,
                                tracked: true,
                            },
                        );
                    }
                }
                let how = if created { "created" } else { "configured" };
                Outcome::Done(format!(
                    "{}/{} {how}",
                    w.key.kind.to_lowercase(),
                    w.key.name
                ))
            }
            Action::ApplyNamespace { dry_run: true, .. } => Outcome::Done("valid".into()),
            Action::ApplyNamespace { labels, .. } => {
                self.log.push(Event::Namespace {
                    key: w.key.clone(),
                    labels: labels.clone(),
                });
                let uid = self.next_uid;
                self.next_uid += 1;
                self.objects.entry(w.key.clone()).or_insert(Obj {
                    uid,
                    annotations: Annotations::new(),
                    health: None,
                    deleting: false,
                    tracked: false,
                });
                Outcome::Done(format!("namespace/{} created", w.key.name))
            }
            Action::Delete { propagation } => {
                self.log.push(Event::Deleted {
                    key: w.key.clone(),
                    propagation: propagation.as_str().to_owned(),
                });
                match self.objects.get_mut(&w.key) {
                    None => Outcome::Gone,
                    Some(o) if self.slow_deletes => {
                        o.deleting = true;
                        Outcome::Done("deleting".into())
                    }
                    Some(_) => {
                        self.objects.remove(&w.key);
                        Outcome::Done("deleted".into())
                    }
                }
            }
        }
    }

    /// The live view the reconciler would read: desired keys and tracked objects.
    pub fn live(&self, manifests: &[Manifest]) -> Vec<Live> {
        self.objects
            .iter()
            .filter(|(k, o)| o.tracked || manifests.iter().any(|m| &m.key == *k))
            .map(|(k, o)| Live {
                key: k.clone(),
                version: "v1".into(),
                annotations: o.annotations.clone(),
                deleting: o.deleting,
                health: o.health.clone(),
                tracked: o.tracked,
            })
            .collect()
    }
}

/// Where a crash may happen within one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Crash {
    /// Right after the record was persisted ahead of writes.
    AfterPersist,
    /// After this many writes of a batch.
    MidBatch(usize),
    /// After the writes, before the outcomes are persisted.
    BeforeRecord,
}

/// The operation as persisted.
#[derive(Debug, Clone, Default)]
pub struct Persisted {
    pub record: Record,
    pub end: Option<Next>,
}

/// Runs one step: builds the input, drives the machine against `cluster`, persists the
/// record when asked and at the end. With `crash`, the step dies at that point (nothing
/// after it is persisted) and `None` is returned.
pub fn step(
    manifests: &[Manifest],
    settings: &Settings,
    cluster: &mut Cluster,
    persisted: &mut Persisted,
    crash: Option<Crash>,
) -> Option<Next> {
    step_with(manifests, settings, cluster, persisted, crash, false)
}

/// [`step`], or the termination of the operation.
pub fn step_with(
    manifests: &[Manifest],
    settings: &Settings,
    cluster: &mut Cluster,
    persisted: &mut Persisted,
    crash: Option<Crash>,
    terminate: bool,
) -> Option<Next> {
    step_checked(
        manifests,
        settings,
        cluster,
        persisted,
        crash,
        terminate,
        &mut |_, _| {},
    )
}

/// [`step_with`], calling `check` with the cluster as it is before each write.
pub fn step_checked(
    manifests: &[Manifest],
    settings: &Settings,
    cluster: &mut Cluster,
    persisted: &mut Persisted,
    crash: Option<Crash>,
    terminate: bool,
    check: &mut dyn FnMut(&Cluster, &fleetshard_sync::Write),
) -> Option<Next> {
    let input = SyncInput {
        manifests: manifests.to_vec(),
        live: cluster.live(manifests),
        settings: settings.clone(),
    };
    let mut sync = if terminate {
        Sync::terminate(&input, persisted.record.clone())
    } else {
        Sync::new(&input, persisted.record.clone(), false)
    };
    loop {
        match sync.advance() {
            Next::Persist => {
                persisted.record = sync.record().clone();
                if crash == Some(Crash::AfterPersist) {
                    return None;
                }
            }
            Next::Write(writes) => {
                let mut outcomes = Vec::new();
                for (i, w) in writes.iter().enumerate() {
                    if crash == Some(Crash::MidBatch(i)) {
                        return None;
                    }
                    check(cluster, w);
                    outcomes.push(cluster.execute(manifests, w));
                }
                if crash == Some(Crash::BeforeRecord) {
                    return None;
                }
                sync.written(outcomes);
            }
            end @ (Next::Running { .. } | Next::Finished { .. }) => {
                persisted.record = sync.record().clone();
                persisted.end = Some(end.clone());
                return Some(end);
            }
        }
    }
}

/// A manifest of `kind` named `name` in namespace `ns`, with `annotations`.
pub fn manifest(kind: &str, name: &str, annotations: &[(&str, &str)]) -> Manifest {
    let group = match kind {
        "Job" => "batch",
        "Deployment" => "apps",
        _ => "",
    };
    Manifest {
        key: ObjectKey::new(group, kind, "ns", name),
        version: "v1".into(),
        generate_name: String::new(),
        annotations: annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        defines: None,
        kind_served: true,
        out_of_sync: None,
    }
}

/// Settings of an operation at revision `rev` in namespace `ns`.
pub fn settings() -> Settings {
    Settings {
        namespace: "ns".into(),
        revision: "0123456789abcdef".into(),
        started_at_unix: 1_700_000_000,
        attempt: "2023-11-14T22:13:20Z#0".into(),
        prune: true,
        ..Settings::default()
    }
}

/// Whether `end` finished with `phase`.
pub fn finished(end: &Option<Next>, phase: OperationPhase) -> bool {
    matches!(end, Some(Next::Finished { phase: p, .. }) if *p == phase)
}

/// The result entry of `name` in `phase`.
pub fn result<'a>(p: &'a Persisted, name: &str) -> Vec<&'a fleetshard_sync::ResultEntry> {
    p.record
        .results
        .iter()
        .filter(|r| r.key.name == name)
        .collect()
}
