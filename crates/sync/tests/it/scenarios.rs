//! Argo CD's sync behaviours, one scenario each, against the model cluster.

use fleetshard_sync::{
    DeletionHook, HealthStatus, ManagedMetadata, NamespaceCreation, Next, ObjectKey,
    OperationPhase, Propagation, ResultCode, Selected, SyncOptions, SyncPhase,
};

use crate::world::*;

const HOOK: &str = "argocd.argoproj.io/hook";
const POLICY: &str = "argocd.argoproj.io/hook-delete-policy";
const WAVE: &str = "argocd.argoproj.io/sync-wave";
const OPTIONS: &str = "argocd.argoproj.io/sync-options";

/// The order in which objects were first created for real (not dry runs).
fn creations(c: &Cluster) -> Vec<String> {
    c.log
        .iter()
        .filter_map(|e| match e {
            Event::Applied {
                key,
                dry_run: false,
                created: true,
                ..
            } => Some(key.name.clone()),
            Event::Namespace { key, .. } => Some(format!("ns:{}", key.name)),
            _ => None,
        })
        .collect()
}

fn running(end: &Option<Next>) -> String {
    match end {
        Some(Next::Running { message, .. }) => message.clone(),
        other => panic!("expected Running, got {other:?}"),
    }
}

#[test]
fn a_plain_app_is_validated_then_applied_and_succeeds_in_one_step() {
    let m = vec![
        manifest("Deployment", "web", &[]),
        manifest("ConfigMap", "cfg", &[]),
    ];
    let mut c = Cluster::new();
    let mut p = Persisted::default();
    let end = step(&m, &settings(), &mut c, &mut p, None);
    assert!(finished(&end, OperationPhase::Succeeded), "{end:?}");
    let dry: Vec<String> = c
        .log
        .iter()
        .filter_map(|e| match e {
            Event::Applied {
                key, dry_run: true, ..
            } => Some(key.name.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        dry,
        ["cfg", "web"],
        "every object is dry-run first, in kind order"
    );
    assert_eq!(creations(&c), ["cfg", "web"]);
    let r = &p.record.results;
    assert_eq!(r.len(), 2);
    assert!(r.iter().all(|r| r.status == Some(ResultCode::Synced)
        && r.hook_phase == Some(OperationPhase::Running)
        && r.sync_phase == SyncPhase::Sync
        && r.hook_type.is_none()));
}

/// A chart-like app: a PreSync migration Job, waves 0/1/2 and a PostSync hook with a
/// generated name.
fn chart() -> Vec<fleetshard_sync::Manifest> {
    let mut smoke = manifest("Job", "", &[(HOOK, "PostSync")]);
    smoke.generate_name = "smoke-".into();
    vec![
        manifest(
            "Job",
            "migrate",
            &[(HOOK, "PreSync"), (POLICY, "HookSucceeded")],
        ),
        manifest("ConfigMap", "cfg", &[(WAVE, "0")]),
        manifest("Deployment", "web", &[(WAVE, "1")]),
        manifest("Service", "svc", &[(WAVE, "2")]),
        smoke,
    ]
}

fn key(kind: &str, name: &str) -> ObjectKey {
    let group = match kind {
        "Job" => "batch",
        "Deployment" => "apps",
        _ => "",
    };
    ObjectKey::new(group, kind, "ns", name)
}

#[test]
fn hooks_and_waves_run_in_order_each_waiting_for_the_previous() {
    let m = chart();
    let s = settings();
    let mut c = Cluster::new();
    let mut p = Persisted::default();
    let end = step(&m, &s, &mut c, &mut p, None);
    assert_eq!(
        end,
        Some(Next::Running {
            message: "waiting for completion of hook batch/Job/migrate".into(),
            wave_delay: true
        })
    );
    assert_eq!(creations(&c), ["migrate"]);
    // The hook runs: nothing else moves.
    let end = step(&m, &s, &mut c, &mut p, None);
    assert_eq!(
        running(&end),
        "waiting for completion of hook batch/Job/migrate"
    );
    assert_eq!(creations(&c), ["migrate"]);
    c.set_health(&key("Job", "migrate"), HealthStatus::Healthy);
    let end = step(&m, &s, &mut c, &mut p, None);
    assert!(
        matches!(
            end,
            Some(Next::Running {
                wave_delay: true,
                ..
            })
        ),
        "{end:?}"
    );
    assert_eq!(creations(&c), ["migrate", "cfg"]);
    // cfg has no health rule: done at the next step, which applies wave 1.
    step(&m, &s, &mut c, &mut p, None);
    assert_eq!(creations(&c), ["migrate", "cfg", "web"]);
    let end = step(&m, &s, &mut c, &mut p, None);
    assert_eq!(
        running(&end),
        "waiting for healthy state of apps/Deployment/web"
    );
    assert_eq!(
        creations(&c),
        ["migrate", "cfg", "web"],
        "wave 2 waits for web"
    );
    c.set_health(&key("Deployment", "web"), HealthStatus::Healthy);
    step(&m, &s, &mut c, &mut p, None);
    assert_eq!(creations(&c), ["migrate", "cfg", "web", "svc"]);
    let end = step(&m, &s, &mut c, &mut p, None);
    let smoke = "smoke-0123456-postsync-1700000000";
    assert_eq!(creations(&c), ["migrate", "cfg", "web", "svc", smoke]);
    assert_eq!(
        running(&end),
        format!("waiting for completion of hook batch/Job/{smoke}")
    );
    c.set_health(&key("Job", smoke), HealthStatus::Healthy);
    let end = step(&m, &s, &mut c, &mut p, None);
    assert!(finished(&end, OperationPhase::Succeeded), "{end:?}");
    assert!(
        !c.has("migrate"),
        "HookSucceeded: deleted once the sync succeeded"
    );
    assert!(
        c.has(smoke),
        "BeforeHookCreation (the default): kept until the next sync"
    );
    let hook = result(&p, "migrate")[0];
    assert_eq!(
        (hook.hook_type, hook.hook_phase, hook.sync_phase),
        (
            Some(fleetshard_sync::HookType::PreSync),
            Some(OperationPhase::Succeeded),
            SyncPhase::PreSync
        )
    );
}

#[test]
fn a_failing_presync_hook_runs_syncfail_hooks_and_applies_nothing_else() {
    let mut m = chart();
    m.push(manifest("Pod", "notify", &[(HOOK, "SyncFail")]));
    let s = settings();
    let mut c = Cluster::new();
    let mut p = Persisted::default();
    step(&m, &s, &mut c, &mut p, None);
    c.set_health(&key("Job", "migrate"), HealthStatus::Degraded);
    let end = step(&m, &s, &mut c, &mut p, None);
    assert_eq!(running(&end), "waiting for completion of hook /Pod/notify");
    c.set_health(&key("Pod", "notify"), HealthStatus::Healthy);
    let end = step(&m, &s, &mut c, &mut p, None);
    let Some(Next::Finished {
        phase: OperationPhase::Failed,
        message,
    }) = end
    else {
        panic!("{end:?}")
    };
    assert!(
        message.starts_with("one or more synchronization tasks completed unsuccessfully"),
        "{message}"
    );
    assert_eq!(
        creations(&c),
        ["migrate", "notify"],
        "nothing else was applied"
    );
}

#[test]
fn an_object_that_fails_its_dry_run_fails_the_sync_before_any_write() {
    let m = chart();
    let mut c = Cluster::new();
    c.failing.insert(key("Service", "svc"));
    let mut p = Persisted::default();
    let end = step(&m, &settings(), &mut c, &mut p, None);
    assert_eq!(
        end,
        Some(Next::Finished {
            phase: OperationPhase::Failed,
            message: "one or more objects failed to apply (dry run)".into()
        })
    );
    assert!(creations(&c).is_empty());
    let svc = result(&p, "svc")[0];
    assert_eq!(svc.status, Some(ResultCode::SyncFailed));
    assert_eq!(p.record.results.len(), 1, "only the failure is recorded");
}

#[test]
fn a_hook_is_never_created_twice_when_its_owner_dies_around_the_creation() {
    for crash in [Crash::MidBatch(0), Crash::MidBatch(1), Crash::BeforeRecord] {
        let m = chart();
        let s = settings();
        let mut c = Cluster::new();
        let mut p = Persisted::default();
        assert_eq!(step(&m, &s, &mut c, &mut p, Some(crash)), None);
        // A new owner resumes from the persisted record alone.
        let end = step(&m, &s, &mut c, &mut p, None);
        assert_eq!(
            running(&end),
            "waiting for completion of hook batch/Job/migrate",
            "{crash:?}"
        );
        let made = c
            .log
            .iter()
            .filter(|e| matches!(e, Event::Applied { key, dry_run: false, .. } if key.name == "migrate"))
            .count();
        assert_eq!(made, 1, "{crash:?}: {:?}", c.log);
        let r = result(&p, "migrate")[0];
        assert_eq!(r.status, Some(ResultCode::Synced), "{crash:?}: adopted");
    }
}

#[test]
fn an_earlier_attempts_hook_is_deleted_before_the_new_one_is_created() {
    let mut m = chart();
    m[0].annotations
        .insert(POLICY.into(), "HookSucceeded,BeforeHookCreation".into());
    let mut s = settings();
    let mut c = Cluster::new();
    let mut p = Persisted::default();
    step(&m, &s, &mut c, &mut p, None);
    c.set_health(&key("Job", "migrate"), HealthStatus::Degraded);
    step(&m, &s, &mut c, &mut p, None);
    // A retry: a new attempt with a fresh record; the failed migrate is still there.
    s.attempt = "2023-11-14T22:13:20Z#1".into();
    let mut retry = Persisted::default();
    c.log.clear();
    let end = step(&m, &s, &mut c, &mut retry, None);
    assert_eq!(
        running(&end),
        "waiting for deletion of hook batch/Job/migrate"
    );
    assert!(
        c.log
            .iter()
            .any(|e| matches!(e, Event::Deleted { key, .. } if key.name == "migrate"))
    );
    let end = step(&m, &s, &mut c, &mut retry, None);
    assert_eq!(
        running(&end),
        "waiting for completion of hook batch/Job/migrate"
    );
    assert_eq!(creations(&c), ["migrate"]);
}

#[test]
fn prunes_run_in_reverse_wave_order_and_prune_last_after_every_wave() {
    let old = |name: &str, wave: &str| {
        let mut annotations = fleetshard_sync::Annotations::new();
        annotations.insert(WAVE.to_owned(), wave.to_owned());
        (
            key("ConfigMap", name),
            Obj {
                uid: 1,
                annotations,
                health: None,
                deleting: false,
                tracked: true,
            },
        )
    };
    let m = vec![manifest("ConfigMap", "keep", &[(WAVE, "1")])];
    // Prune waves are mirrored among the prunes still live at each step, as gitops-engine
    // computes them: old-b (wave 2) goes first; once it is gone, old-a (wave 0) mirrors
    // onto itself and comes before `keep` (wave 1).
    for (options, expected) in [
        (vec![], vec!["old-b", "old-a", "keep"]),
        (
            vec!["PruneLast=true".to_owned()],
            vec!["keep", "old-a", "old-b"],
        ),
    ] {
        let mut c = Cluster::new();
        c.objects.extend([old("old-a", "0"), old("old-b", "2")]);
        let mut s = settings();
        s.options = SyncOptions(options.clone());
        let mut p = Persisted::default();
        for _ in 0..6 {
            if finished(
                &step(&m, &s, &mut c, &mut p, None),
                OperationPhase::Succeeded,
            ) {
                break;
            }
        }
        let order: Vec<String> = c
            .log
            .iter()
            .filter_map(|e| match e {
                Event::Applied {
                    key,
                    dry_run: false,
                    ..
                } => Some(key.name.clone()),
                Event::Deleted { key, propagation } => {
                    assert_eq!(propagation, "Foreground", "Argo CD's default");
                    Some(key.name.clone())
                }
                _ => None,
            })
            .collect();
        assert_eq!(order, expected, "{options:?}");
    }
}

#[test]
fn prune_confirmation_and_propagation() {
    let mut c = Cluster::new();
    let mut annotations = fleetshard_sync::Annotations::new();
    annotations.insert(OPTIONS.to_owned(), "Prune=confirm".to_owned());
    c.objects.insert(
        key("ConfigMap", "old"),
        Obj {
            uid: 1,
            annotations,
            health: None,
            deleting: false,
            tracked: true,
        },
    );
    let m = vec![manifest("ConfigMap", "new", &[])];
    let mut s = settings();
    s.options = SyncOptions(vec!["PrunePropagationPolicy=background".into()]);
    let mut p = Persisted::default();
    let end = step(&m, &s, &mut c, &mut p, None);
    assert_eq!(
        running(&end),
        "waiting for pruning confirmation of /ConfigMap/old"
    );
    assert!(c.has("old"));
    s.prune_confirmed = true;
    let end = step(&m, &s, &mut c, &mut p, None);
    assert!(finished(&end, OperationPhase::Succeeded), "{end:?}");
    assert!(c.log.contains(&Event::Deleted {
        key: key("ConfigMap", "old"),
        propagation: Propagation::Background.as_str().into()
    }));
}

#[test]
fn create_namespace_comes_first_with_its_managed_metadata() {
    let m = vec![manifest("ConfigMap", "cfg", &[])];
    let mut s = settings();
    let labels: std::collections::BTreeMap<String, String> =
        [("team".to_owned(), "a".to_owned())].into();
    s.namespace_creation = Some(NamespaceCreation {
        managed: Some(ManagedMetadata {
            labels: labels.clone(),
            ..Default::default()
        }),
        live: None,
    });
    let mut c = Cluster::new();
    let mut p = Persisted::default();
    let end = step(&m, &s, &mut c, &mut p, None);
    assert_eq!(running(&end), "waiting for healthy state of /Namespace/ns");
    assert!(
        matches!(&c.log[0], Event::Namespace { labels: l, .. } if *l == labels),
        "{:?}",
        c.log
    );
    // The next step sees the namespace (no health rule: done) and applies the rest.
    let ns_live = fleetshard_sync::Live {
        key: ObjectKey::new("", "Namespace", "", "ns"),
        ..Default::default()
    };
    s.namespace_creation.as_mut().unwrap().live = Some(ns_live);
    let end = step(&m, &s, &mut c, &mut p, None);
    assert!(finished(&end, OperationPhase::Succeeded), "{end:?}");
    assert_eq!(creations(&c), ["ns:ns", "cfg"]);
}

#[test]
fn an_unserved_kind_is_invalid_unless_a_crd_of_the_sync_defines_it() {
    let mut cr = manifest("Widget", "w", &[]);
    cr.key.group = "example.com".into();
    cr.kind_served = false;
    let mut c = Cluster::new();
    let mut p = Persisted::default();
    let end = step(&[cr.clone()], &settings(), &mut c, &mut p, None);
    let Some(Next::Finished {
        phase: OperationPhase::Failed,
        message,
    }) = end
    else {
        panic!("{end:?}")
    };
    assert!(
        message.starts_with("one or more synchronization tasks are not valid"),
        "{message}"
    );
    let mut crd = manifest("CustomResourceDefinition", "widgets.example.com", &[]);
    crd.key = ObjectKey::new(
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        "",
        "widgets.example.com",
    );
    crd.defines = Some(("example.com".into(), "Widget".into()));
    let m = vec![cr, crd];
    let mut p = Persisted::default();
    let end = step(&m, &settings(), &mut c, &mut p, None);
    assert!(finished(&end, OperationPhase::Succeeded), "{end:?}");
    assert_eq!(
        creations(&c),
        ["widgets.example.com", "w"],
        "the CRD goes first"
    );
}

#[test]
fn terminating_deletes_running_hooks_and_fails_the_operation() {
    let m = chart();
    let s = settings();
    let mut c = Cluster::new();
    let mut p = Persisted::default();
    step(&m, &s, &mut c, &mut p, None);
    let end = step_with(&m, &s, &mut c, &mut p, None, true);
    assert_eq!(
        end,
        Some(Next::Finished {
            phase: OperationPhase::Failed,
            message: "Operation terminated".into()
        })
    );
    assert!(!c.has("migrate"));
    let r = result(&p, "migrate")[0];
    assert_eq!(
        (r.hook_phase, r.message.as_str()),
        (Some(OperationPhase::Failed), "Terminated")
    );
}

#[test]
fn apply_out_of_sync_only_selective_sync_and_dry_run() {
    let mut same = manifest("ConfigMap", "same", &[]);
    same.out_of_sync = Some(false);
    let mut changed = manifest("ConfigMap", "changed", &[]);
    changed.out_of_sync = Some(true);
    let m = vec![same, changed, manifest("Job", "hook", &[(HOOK, "PreSync")])];
    let mut c = Cluster::new();
    for name in ["same", "changed"] {
        c.objects.insert(
            key("ConfigMap", name),
            Obj {
                uid: 0,
                annotations: Default::default(),
                health: None,
                deleting: false,
                tracked: true,
            },
        );
    }
    // ApplyOutOfSyncOnly: the unchanged object is not applied (hooks always are).
    let mut s = settings();
    s.options = SyncOptions(vec!["ApplyOutOfSyncOnly=true".into()]);
    let mut p = Persisted::default();
    step(&m, &s, &mut c, &mut p, None);
    c.set_health(&key("Job", "hook"), HealthStatus::Healthy);
    let end = step(&m, &s, &mut c, &mut p, None);
    assert!(finished(&end, OperationPhase::Succeeded), "{end:?}");
    assert!(result(&p, "same").is_empty());
    assert_eq!(result(&p, "changed").len(), 1);
    // A selective sync: only the chosen object; no hooks.
    let mut s = settings();
    s.skip_hooks = true;
    s.selection = Some(vec![Selected {
        group: "".into(),
        kind: "ConfigMap".into(),
        namespace: "".into(),
        name: "same".into(),
    }]);
    let mut p = Persisted::default();
    step(&m, &s, &mut c, &mut p, None);
    let names: Vec<&str> = p
        .record
        .results
        .iter()
        .map(|r| r.key.name.as_str())
        .collect();
    assert_eq!(names, ["same"]);
    // A dry run: every write validated only, results recorded, nothing created.
    let mut s = settings();
    s.dry_run = true;
    let mut c = Cluster::new();
    let mut p = Persisted::default();
    let end = step(&m, &s, &mut c, &mut p, None);
    assert!(finished(&end, OperationPhase::Succeeded), "{end:?}");
    assert!(creations(&c).is_empty());
    assert!(
        p.record
            .results
            .iter()
            .all(|r| r.hook_phase == Some(OperationPhase::Succeeded))
    );
    let _ = DeletionHook::PostDelete;
}
