//! What enforcing AppProjects costs a refresh: the application rules (source repository,
//! destination, source namespace), the resource rules for each object it renders, and the
//! sync windows, for 10,000 apps of 20 objects each under one realistic project (globs,
//! negations, allow and deny lists, three windows). Run:
//! `cargo bench -p fleetshard-manifest --bench project_checks`. Results and machine:
//! `docs/performance.md`.

use criterion::{Criterion, criterion_group, criterion_main};
use fleetshard_manifest::project::{ControlPlane, ProjectCheck, ResourceRef, sync_windows_verdict};
use fleetshard_manifest::{AppProject, project_from_value};
use serde_json::json;
use std::hint::black_box;

const APPS: usize = 10_000;
const OBJECTS_PER_APP: usize = 20;

fn project() -> AppProject {
    let value = json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
        "metadata": {"name": "team-a", "namespace": "argocd"},
        "spec": {
            "sourceRepos": [
                "https://git.example.com/team-a/*",
                "https://git.example.com/shared/**",
                "!https://git.example.com/team-a/secrets",
                "git@git.example.com:team-a/*",
            ],
            "destinations": (0..20).map(|i| json!({
                "server": format!("https://cluster-{i}.example.com"),
                "namespace": "team-a-*",
            })).chain([json!({"name": "!prod-*", "namespace": "*"})]).collect::<Vec<_>>(),
            "sourceNamespaces": ["argocd", "team-a-apps"],
            "clusterResourceWhitelist": [{"group": "", "kind": "Namespace"}],
            "namespaceResourceBlacklist": [
                {"group": "", "kind": "ResourceQuota"},
                {"group": "", "kind": "LimitRange"},
            ],
            "syncWindows": [
                {"kind": "deny", "schedule": "0 22 * * *", "duration": "8h",
                 "applications": ["*-prod"], "manualSync": true},
                {"kind": "allow", "schedule": "0 8 * * 1-5", "duration": "10h",
                 "namespaces": ["team-a-*"]},
                {"kind": "deny", "schedule": "0 0 25 12 *", "duration": "24h",
                 "clusters": ["*"], "timeZone": "Europe/Paris"},
            ],
        },
    });
    let loaded = project_from_value(&value, "bench").expect("a valid project");
    assert!(
        loaded.value.refusals.is_empty(),
        "{:?}",
        loaded.value.refusals
    );
    loaded.value
}

fn bench(c: &mut Criterion) {
    let project = project();
    let apps: Vec<(String, String, String)> = (0..APPS)
        .map(|i| {
            (
                format!("app-{i}"),
                format!("https://git.example.com/team-a/app-{i}"),
                format!("team-a-{}", i % 50),
            )
        })
        .collect();
    let servers: Vec<String> = (0..20)
        .map(|i| format!("https://cluster-{i}.example.com"))
        .collect();
    let check = |i: usize| ProjectCheck {
        name: "team-a",
        project: Some(&project),
        control_plane: ControlPlane::new("argocd", &[], false),
        cluster_server: &servers[i % 20],
        cluster_name: "cluster",
    };
    let kinds = [
        ("", "ConfigMap"),
        ("apps", "Deployment"),
        ("", "Service"),
        ("", "Secret"),
    ];
    let mut g = c.benchmark_group("project checks, 10k apps");
    g.sample_size(10);
    g.bench_function("application rules", |b| {
        b.iter(|| {
            for (i, (name, repo, ns)) in apps.iter().enumerate() {
                black_box(check(i).check_app("argocd", name, repo, ns)).expect("allowed");
            }
        })
    });
    g.bench_function("resource rules, 20 objects each", |b| {
        b.iter(|| {
            for (i, (name, _, ns)) in apps.iter().enumerate() {
                let c = check(i);
                for o in 0..OBJECTS_PER_APP {
                    let (group, kind) = kinds[o % kinds.len()];
                    let r = ResourceRef {
                        group,
                        kind,
                        namespace: ns,
                        name,
                    };
                    black_box(c.check_resource(&r)).expect("allowed");
                }
            }
        })
    });
    let now = jiff::Timestamp::from_second(1_764_151_200).expect("a time");
    g.bench_function("sync windows", |b| {
        b.iter(|| {
            for (i, (name, _, ns)) in apps.iter().enumerate() {
                black_box(sync_windows_verdict(
                    &project.sync_windows,
                    (name, ns, &servers[i % 20], "cluster"),
                    false,
                    now,
                ));
            }
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
