//! The seeded simulation: random apps (resources in waves, hooks of every phase with
//! random delete policies and generated names, leftovers of earlier syncs to prune), random
//! health results, apply failures, and the owner killed — or the app moved to another
//! replica, which resumes from the persisted record alone — at any point of any step.
//! Checked at every write: no hook of an attempt is created twice, no wave is applied
//! before every earlier wave is healthy, no hook is ever pruned; and once everything is
//! healthy the operation ends, succeeded exactly when nothing failed.
//!
//! `FLEETSHARD_SIM_SEED=<seed>` replays one run; `FLEETSHARD_SIM_RUNS=<n>` (default 400)
//! and `FLEETSHARD_SIM_SEED_OFFSET=<k>` sweep others. A failure prints its seed.

use std::collections::BTreeMap;

use fleetshard_sync::{
    Action, Annotations, DeletePolicy, HOOK_ATTEMPT, HealthStatus, Manifest, Next, ObjectKey,
    OperationPhase, Settings, SyncOptions, SyncPhase, Write, delete_policies, hook_types, is_hook,
    wave,
};
use fleetshard_util::rng::SplitMix64;

use crate::world::*;

fn seeds(default_runs: u64) -> Vec<u64> {
    if let Ok(seed) = std::env::var("FLEETSHARD_SIM_SEED") {
        return vec![seed.parse().expect("FLEETSHARD_SIM_SEED must be a number")];
    }
    let number = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let runs = number("FLEETSHARD_SIM_RUNS").unwrap_or(default_runs);
    let offset = number("FLEETSHARD_SIM_SEED_OFFSET").unwrap_or(0);
    (offset + 1..=offset + runs).collect()
}

/// A random app and the cluster as an earlier sync left it.
fn world(rng: &mut SplitMix64) -> (Vec<Manifest>, Cluster, Settings) {
    let mut manifests = Vec::new();
    let waves = ["-1", "0", "1", "2"];
    for i in 0..1 + rng.below(5) {
        let kind = ["ConfigMap", "Deployment", "Service"][rng.index(3)];
        let w = waves[rng.index(waves.len())];
        manifests.push(manifest(
            kind,
            &format!("r{i}"),
            &[("argocd.argoproj.io/sync-wave", w)],
        ));
    }
    let policies = [
        "",
        "HookSucceeded",
        "HookFailed",
        "BeforeHookCreation",
        "HookSucceeded,HookFailed",
    ];
    for i in 0..rng.below(4) {
        let phase = ["PreSync", "Sync", "PostSync", "SyncFail"][rng.index(4)];
        let mut a = vec![
            ("argocd.argoproj.io/hook", phase),
            (
                "argocd.argoproj.io/sync-wave",
                waves[rng.index(waves.len())],
            ),
        ];
        let policy = policies[rng.index(policies.len())];
        if !policy.is_empty() {
            a.push(("argocd.argoproj.io/hook-delete-policy", policy));
        }
        let mut m = manifest("Job", &format!("h{i}"), &a);
        if rng.below(3) == 0 {
            m.key.name = String::new();
            m.generate_name = format!("g{i}-");
        }
        manifests.push(m);
    }
    let mut cluster = Cluster::new();
    // Leftovers: objects to prune, a hook of an earlier sync, an untracked bystander.
    for i in 0..rng.below(3) {
        let mut annotations = Annotations::new();
        annotations.insert(
            "argocd.argoproj.io/sync-wave".into(),
            waves[rng.index(waves.len())].into(),
        );
        cluster.objects.insert(
            ObjectKey::new("", "ConfigMap", "ns", &format!("old{i}")),
            Obj {
                uid: 100 + i,
                annotations,
                health: None,
                deleting: false,
                tracked: true,
            },
        );
    }
    if let Some(h) = manifests
        .iter()
        .find(|m| is_hook(&m.annotations) && !m.key.name.is_empty())
        && rng.below(2) == 0
    {
        let mut annotations = h.annotations.clone();
        annotations.insert(HOOK_ATTEMPT.into(), "earlier#0".into());
        let health = Some(fleetshard_sync::Health::new(HealthStatus::Healthy, "done"));
        cluster.objects.insert(
            h.key.clone(),
            Obj {
                uid: 200,
                annotations,
                health,
                deleting: false,
                tracked: true,
            },
        );
    }
    // A removed hook of an earlier sync, still live and tracked: never pruned.
    let mut old_hook = Annotations::new();
    old_hook.insert("argocd.argoproj.io/hook".into(), "PreSync".into());
    cluster.objects.insert(
        ObjectKey::new("batch", "Job", "ns", "retired-hook"),
        Obj {
            uid: 300,
            annotations: old_hook,
            health: None,
            deleting: false,
            tracked: true,
        },
    );
    cluster.slow_deletes = rng.below(2) == 0;
    let mut s = settings();
    s.prune = rng.below(4) != 0;
    if rng.below(3) == 0 {
        s.options = SyncOptions(vec!["PruneLast=true".into()]);
    }
    (manifests, cluster, s)
}

/// The phase and wave a manifest runs in (one hook type per hook here).
fn place(m: &Manifest) -> (SyncPhase, i64) {
    let phase = match hook_types(&m.annotations).first() {
        Some(fleetshard_sync::HookType::PreSync) => SyncPhase::PreSync,
        Some(fleetshard_sync::HookType::PostSync) => SyncPhase::PostSync,
        Some(fleetshard_sync::HookType::SyncFail) => SyncPhase::SyncFail,
        _ => SyncPhase::Sync,
    };
    (phase, wave(&m.annotations))
}

/// The manifest a write's key stands for (generated hook names included).
fn manifest_of<'a>(manifests: &'a [Manifest], w: &Write) -> Option<&'a Manifest> {
    match &w.action {
        Action::Apply { manifest, .. } => Some(&manifests[*manifest]),
        _ => manifests.iter().find(|m| {
            m.key == w.key
                || (!m.generate_name.is_empty() && w.key.name.starts_with(&m.generate_name))
        }),
    }
}

struct Checks {
    created: BTreeMap<(String, ObjectKey), u32>,
    sync_failed: bool,
    /// Hooks of this attempt deleted by policy, with their policies.
    deleted: Vec<(ObjectKey, Vec<DeletePolicy>)>,
}

impl Checks {
    fn check(&mut self, manifests: &[Manifest], s: &Settings, c: &Cluster, w: &Write) {
        let live = c.objects.get(&w.key);
        match &w.action {
            Action::Apply {
                dry_run: false,
                hook_attempt: Some(attempt),
                ..
            } => {
                let fresh = live.is_none_or(|o| o.annotations.get(HOOK_ATTEMPT) != Some(attempt));
                if fresh {
                    let n = self
                        .created
                        .entry((attempt.clone(), w.key.clone()))
                        .or_default();
                    *n += 1;
                    assert_eq!(*n, 1, "hook {} of attempt {attempt} created twice", w.key);
                }
                self.check_order(manifests, s, c, w);
            }
            Action::Apply { dry_run: false, .. } => self.check_order(manifests, s, c, w),
            Action::Delete { .. } => {
                let Some(o) = live else { return };
                if !is_hook(&o.annotations) {
                    return;
                }
                let m = manifest_of(manifests, w)
                    .filter(|m| is_hook(&m.annotations))
                    .unwrap_or_else(|| panic!("{}: a hook no longer in Git was pruned", w.key));
                let policies = delete_policies(&m.annotations);
                let ours = o.annotations.get(HOOK_ATTEMPT) == Some(&s.attempt);
                let health = o.health.as_ref().map(|h| h.status);
                // A hook goes once it completed, by the policy of the operation's outcome
                // (gitops-engine deletes the completed hooks with HookSucceeded when the sync
                // succeeded — an earlier sync's too —, with HookFailed when it failed); or,
                // an earlier attempt's, before its new creation (BeforeHookCreation).
                if !ours && policies.contains(&DeletePolicy::BeforeHookCreation) {
                    return;
                }
                assert_ne!(
                    health,
                    Some(HealthStatus::Progressing),
                    "running hook {} deleted",
                    w.key
                );
                let by = |p| policies.contains(&p);
                assert!(
                    by(DeletePolicy::HookSucceeded) || by(DeletePolicy::HookFailed),
                    "hook {} deleted without a policy for it: {policies:?}",
                    w.key
                );
                self.deleted.push((w.key.clone(), policies));
            }
            _ => {}
        }
    }

    /// Nothing is applied before every earlier wave is healthy (SyncFail hooks run only
    /// after a failure).
    fn check_order(&mut self, manifests: &[Manifest], s: &Settings, c: &Cluster, w: &Write) {
        let Some(m) = manifest_of(manifests, w) else {
            return;
        };
        let at = place(m);
        if at.0 == SyncPhase::SyncFail {
            self.sync_failed = true;
            return;
        }
        for e in manifests {
            let earlier = place(e);
            if earlier >= at || earlier.0 == SyncPhase::SyncFail {
                continue;
            }
            let hook = is_hook(&e.annotations);
            let keys: Vec<&ObjectKey> = if e.key.name.is_empty() {
                c.objects
                    .keys()
                    .filter(|k| k.name.starts_with(&e.generate_name))
                    .collect()
            } else {
                vec![&e.key]
            };
            let done = keys.iter().any(|k| {
                c.objects.get(*k).is_some_and(|o| {
                    let healthy = matches!(
                        o.health.as_ref().map(|h| h.status),
                        None | Some(HealthStatus::Healthy)
                    );
                    healthy && (!hook || o.annotations.get(HOOK_ATTEMPT) == Some(&s.attempt))
                })
            });
            assert!(
                done,
                "{} ({at:?}) applied before {} ({earlier:?}) was healthy",
                w.key, e.key
            );
        }
    }
}

fn run(seed: u64) {
    let mut rng = SplitMix64::new(seed);
    let (manifests, mut cluster, s) = world(&mut rng);
    let mut persisted = Persisted::default();
    let mut checks = Checks {
        created: BTreeMap::new(),
        sync_failed: false,
        deleted: Vec::new(),
    };
    let crashes = [
        Crash::AfterPersist,
        Crash::MidBatch(0),
        Crash::MidBatch(1),
        Crash::BeforeRecord,
    ];
    let mut ended = None;
    let mut quiet_steps = 0;
    for event in 0..2_000 {
        // Late in the run, results settle: everything in progress becomes healthy (or
        // fails) so that liveness can be judged.
        let settle = event > 300;
        match rng.below(5) {
            0 | 1 => {
                let crash =
                    (!settle && rng.below(4) == 0).then(|| crashes[rng.index(crashes.len())]);
                let mut check = |c: &Cluster, w: &Write| checks.check(&manifests, &s, c, w);
                let end = step_checked(
                    &manifests,
                    &s,
                    &mut cluster,
                    &mut persisted,
                    crash,
                    false,
                    &mut check,
                );
                if let Some(end @ Next::Finished { .. }) = end {
                    ended = Some(end);
                    break;
                }
                if settle {
                    quiet_steps += 1;
                }
            }
            2 | 3 => {
                let progressing: Vec<ObjectKey> = cluster
                    .objects
                    .iter()
                    .filter(|(_, o)| {
                        o.health
                            .as_ref()
                            .is_some_and(|h| h.status == HealthStatus::Progressing)
                    })
                    .map(|(k, _)| k.clone())
                    .collect();
                if !progressing.is_empty() {
                    let k = &progressing[rng.index(progressing.len())];
                    let status = if !settle && rng.below(6) == 0 {
                        HealthStatus::Degraded
                    } else {
                        HealthStatus::Healthy
                    };
                    cluster.set_health(k, status);
                }
            }
            _ => {
                if settle || rng.below(2) == 0 {
                    cluster.objects.retain(|_, o| !o.deleting);
                }
            }
        }
        assert!(
            quiet_steps < 200,
            "the operation never ended: {:?}",
            persisted.end
        );
    }
    let Some(Next::Finished { phase, message }) = ended else {
        panic!("no end after 2,000 events: {:?}", persisted.end)
    };
    let failed = persisted.record.results.iter().any(|r| {
        r.sync_phase != SyncPhase::SyncFail
            && matches!(
                r.hook_phase,
                Some(OperationPhase::Failed | OperationPhase::Error)
            )
    });
    assert_eq!(
        phase == OperationPhase::Succeeded,
        !failed,
        "{phase:?}: {message}"
    );
    if checks.sync_failed {
        assert_ne!(
            phase,
            OperationPhase::Succeeded,
            "SyncFail hooks ran in a successful sync"
        );
    }
    let wanted = if phase == OperationPhase::Succeeded {
        DeletePolicy::HookSucceeded
    } else {
        DeletePolicy::HookFailed
    };
    for (key, policies) in &checks.deleted {
        assert!(
            policies.contains(&wanted),
            "{key} deleted by {policies:?} in a {phase:?} sync: {message}\n{:#?}\n{:#?}",
            persisted.record.results,
            cluster.log
        );
    }
}

#[test]
fn no_hook_twice_no_wave_early_no_prune_of_a_hook() {
    for seed in seeds(400) {
        let result = std::panic::catch_unwind(|| run(seed));
        if let Err(e) = result {
            let why = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            panic!(
                "seed {seed}: {why}\nreplay: FLEETSHARD_SIM_SEED={seed} cargo test -p fleetshard-sync --test it sim"
            );
        }
    }
}
