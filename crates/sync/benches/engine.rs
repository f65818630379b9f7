//! The sync engine's cost per resource: one step of a three-wave app of N resources (a
//! PreSync hook, waves 0/1/2) — the first step (build, order, dry run of every object,
//! the hook's wave) and a step assessing a sync running in its last wave — with every
//! write answered at once (no I/O: what the engine itself costs). Run:
//! `cargo bench -p fleetshard-sync --bench engine`. Results and machine:
//! `docs/performance.md`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use fleetshard_sync::{
    Annotations, Health, HealthStatus, Live, Manifest, Next, ObjectKey, Outcome, Record, Settings,
    Sync, SyncInput,
};

const SIZES: [usize; 3] = [10, 100, 1_000];

fn manifest(kind: &str, name: &str, wave: usize, hook: bool) -> Manifest {
    let mut annotations = Annotations::new();
    annotations.insert("argocd.argoproj.io/sync-wave".into(), wave.to_string());
    if hook {
        annotations.insert("argocd.argoproj.io/hook".into(), "PreSync".into());
    }
    Manifest {
        key: ObjectKey::new("", kind, "ns", name),
        version: "v1".into(),
        annotations,
        kind_served: true,
        ..Manifest::default()
    }
}

/// N resources in waves 0/1/2 (ConfigMaps, Services, Deployments) and a PreSync hook.
fn app(n: usize) -> Vec<Manifest> {
    let mut m: Vec<Manifest> = (0..n)
        .map(|i| {
            let kind = ["ConfigMap", "Service", "Deployment"][i % 3];
            manifest(kind, &format!("r{i}"), i % 3, false)
        })
        .collect();
    m.push(manifest("Job", "migrate", 0, true));
    m
}

fn settings() -> Settings {
    Settings {
        namespace: "ns".into(),
        revision: "0123456789abcdef".into(),
        started_at_unix: 1_700_000_000,
        attempt: "a#0".into(),
        prune: true,
        ..Settings::default()
    }
}

/// Drives one step to its end, answering every write; the step's end and record.
fn step(input: &SyncInput, record: Record) -> (Next, Record) {
    let mut sync = Sync::new(input, record, false);
    loop {
        match sync.advance() {
            Next::Persist => {}
            Next::Write(writes) => {
                let outcomes = writes.iter().map(|_| Outcome::Done("ok".into())).collect();
                sync.written(outcomes);
            }
            end => return (end, sync.record().clone()),
        }
    }
}

/// Every object of the app live and healthy.
fn all_live(manifests: &[Manifest]) -> Vec<Live> {
    manifests
        .iter()
        .map(|m| Live {
            key: m.key.clone(),
            version: "v1".into(),
            annotations: m.annotations.clone(),
            health: Some(Health::new(HealthStatus::Healthy, "")),
            tracked: true,
            ..Live::default()
        })
        .collect()
}

fn engine(c: &mut Criterion) {
    let mut group = c.benchmark_group("sync-step");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for n in SIZES {
        group.throughput(Throughput::Elements(n as u64));
        let first = SyncInput {
            manifests: app(n),
            live: Vec::new(),
            settings: settings(),
        };
        group.bench_function(BenchmarkId::new("first", n), |b| {
            b.iter(|| step(black_box(&first), Record::default()))
        });
        // The record once the last wave was applied (the hook and waves 0, 1 and 2, each
        // step seeing the earlier ones healthy); then the step that assesses it.
        let running = SyncInput {
            live: all_live(&first.manifests),
            ..first.clone()
        };
        let (_, mut record) = step(&first, Record::default());
        for _ in 0..3 {
            record = step(&running, record).1;
        }
        group.bench_function(BenchmarkId::new("assess", n), |b| {
            b.iter(|| step(black_box(&running), record.clone()))
        });
    }
    group.finish();
}

criterion_group!(benches, engine);
criterion_main!(benches);
