//! What loading a generated kubectl-style export costs: fleetgen's clusters as a cluster
//! Secret `List` and its applications as an Application `List` (as `fleetshard fleet
//! generate --format argocd` writes them), in YAML and in JSON, read the way `plan` reads
//! them (the GitOps specs dropped) and the way a replica reads them (specs kept).
//! Throughput is in bytes of input. Run:
//! `cargo bench -p fleetshard-manifest --bench load` (10,000 clusters and 100,000
//! applications; `FLEETSHARD_BENCH_CLUSTERS` sets another size). With
//! `FLEETSHARD_BENCH_EXPORT=DIR` the four texts are written to `DIR` first, for measuring
//! other loaders on the same input. Results and machine: `docs/performance.md`.

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use fleetshard_fleetgen::{FleetSpec, REPO_URL, TARGET_REVISION};
use fleetshard_manifest::{
    AppSource, AppSpec, parse_apps, parse_apps_with_specs, parse_clusters, spec_key,
    to_application_list_yaml, to_secret_list_yaml,
};

/// The export's four texts: clusters and apps, YAML and JSON.
struct Export {
    clusters_yaml: String,
    apps_yaml: String,
    clusters_json: String,
    apps_json: String,
}

fn export(clusters: usize) -> Export {
    let spec = FleetSpec::new(clusters);
    let fleet = spec.try_generate().expect("a valid fleet spec");
    let specs: BTreeMap<_, _> = fleet
        .apps
        .iter()
        .zip(spec.app_paths())
        .map(|(app, path)| {
            let source = AppSource {
                repo_url: REPO_URL.to_owned(),
                target_revision: TARGET_REVISION.to_owned(),
                path,
                directory: Default::default(),
                raw: Default::default(),
            };
            let spec = AppSpec {
                source,
                ..AppSpec::default()
            };
            (spec_key(app), spec)
        })
        .collect();
    let clusters_yaml = to_secret_list_yaml(&fleet.clusters);
    let apps_yaml = to_application_list_yaml(&fleet.apps, &specs);
    // `kubectl get … -o json` prints the same objects indented.
    let json = |yaml: &str| {
        let value: serde_json::Value = serde_saphyr::from_str_with_options(
            yaml,
            fleetshard_manifest::yaml_options(yaml.len()),
        )
        .expect("the writers' YAML reads");
        serde_json::to_string_pretty(&value).expect("serialisable")
    };
    Export {
        clusters_json: json(&clusters_yaml),
        apps_json: json(&apps_yaml),
        clusters_yaml,
        apps_yaml,
    }
}

fn load(c: &mut Criterion) {
    let clusters = std::env::var("FLEETSHARD_BENCH_CLUSTERS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000);
    let e = export(clusters);
    if let Ok(dir) = std::env::var("FLEETSHARD_BENCH_EXPORT") {
        let dir = std::path::Path::new(&dir);
        std::fs::create_dir_all(dir).expect("export directory");
        for (name, text) in [
            ("clusters.yaml", &e.clusters_yaml),
            ("apps.yaml", &e.apps_yaml),
            ("clusters.json", &e.clusters_json),
            ("apps.json", &e.apps_json),
        ] {
            std::fs::write(dir.join(name), text).expect("export written");
        }
    }
    let size = format!("{}k", clusters / 1000);
    let mut g = c.benchmark_group("load");
    g.sample_size(10);
    for (format, clusters_text, apps_text) in [
        ("yaml", &e.clusters_yaml, &e.apps_yaml),
        ("json", &e.clusters_json, &e.apps_json),
    ] {
        g.throughput(Throughput::Bytes(clusters_text.len() as u64));
        g.bench_function(format!("clusters/{format}/{size}"), |b| {
            b.iter(|| parse_clusters(black_box(clusters_text), "clusters").expect("loads"));
        });
        g.throughput(Throughput::Bytes(apps_text.len() as u64));
        g.bench_function(format!("apps/{format}/{size}"), |b| {
            b.iter(|| parse_apps(black_box(apps_text), "apps").expect("loads"));
        });
        g.bench_function(format!("apps-with-specs/{format}/{size}"), |b| {
            b.iter(|| parse_apps_with_specs(black_box(apps_text), "apps").expect("loads"));
        });
    }
    g.finish();
}

criterion_group!(benches, load);
criterion_main!(benches);
