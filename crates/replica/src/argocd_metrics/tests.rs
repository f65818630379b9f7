//! Argo CD's metrics as a scrape shows them, checked against a list written from Argo CD's
//! documented metrics (`argocd_metrics.txt`) and a small dashboard's queries
//! (`dashboard.promql`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use fleetshard_controller::{AppKey, Operated, Reconciler};
use fleetshard_core::{App, Destination};
use fleetshard_gitops::apply::LeaseCheck;
use fleetshard_gitops::live::{ClusterAccess, ClusterConnections, LiveOptions};
use fleetshard_gitops::reconciler::{
    AppTarget, FixedClock, GitOpsReconciler, MemorySink, ReconcilerConfig, StaticInventory,
};
use fleetshard_gitops::source::{RepoCache, RepoCacheConfig};
use fleetshard_manifest::{AppProject, AppSource, AppSpec, AutoSync};
use fleetshard_testsupport::git::{Git, config_map};
use fleetshard_testsupport::kube_api::FakeApiServer;
use prometheus_client::registry::Registry;

use tokio::time::timeout;

use super::ArgoCdCollector;

const DOCUMENTED: &str = include_str!("argocd_metrics.txt");
const DASHBOARD: &str = include_str!("dashboard.promql");

fn target(name: &str, repo: &str, path: &str, cluster: &FakeApiServer) -> AppTarget {
    AppTarget {
        app: App {
            namespace: "argocd".into(),
            name: name.into(),
            project: "default".into(),
            destination: Destination {
                server: Some(cluster.url()),
                name: None,
                namespace: Some("default".into()),
            },
        },
        spec: AppSpec {
            source: AppSource {
                repo_url: repo.into(),
                target_revision: "main".into(),
                path: path.into(),
                directory: Default::default(),
                raw: Default::default(),
            },
            auto_sync: Some(AutoSync {
                prune: true,
                self_heal: true,
                allow_empty: false,
            }),
            ..AppSpec::default()
        },
        cluster_name: "c1".into(),
        cluster: ClusterAccess {
            id: "c1".into(),
            server: cluster.url(),
            credentials: Default::default(),
        },
        project: Some(Arc::new(AppProject::builtin_default("argocd"))),
        repositories: Default::default(),
        argocd_cm: Default::default(),
    }
}

fn always() -> Arc<dyn LeaseCheck> {
    Arc::new(|| Some(tokio::time::Instant::now() + Duration::from_secs(3600)))
}

/// The scrape's families: name → (type, label names of its series).
fn families(text: &str) -> BTreeMap<String, (String, BTreeSet<String>)> {
    let mut out: BTreeMap<String, (String, BTreeSet<String>)> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            out.insert(name.to_owned(), (kind.to_owned(), BTreeSet::new()));
        } else if !line.starts_with('#') && line.contains('{') {
            let (series, rest) = line.split_once('{').unwrap();
            let labels = rest.rsplit_once('}').unwrap().0;
            let family = out
                .keys()
                .filter(|f| series.starts_with(f.as_str()))
                .max_by_key(|f| f.len())
                .cloned()
                .unwrap();
            for pair in labels.split("\",") {
                let name = pair.split_once('=').unwrap().0;
                if name != "le" {
                    out.get_mut(&family).unwrap().1.insert(name.to_owned());
                }
            }
        }
    }
    out
}

#[tokio::test]
async fn a_scrape_shows_argo_cds_metrics_for_the_owned_apps() {
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    git.write("good/cm.yaml", &config_map("good", "1"));
    git.commit("initial");
    let cluster = FakeApiServer::start().await.unwrap();
    let inventory = Arc::new(StaticInventory::default());
    inventory.insert(target("good", &git.path(), "good", &cluster));
    // A path that does not exist: a ComparisonError condition.
    inventory.insert(target("broken", &git.path(), "nowhere", &cluster));
    let mut repos = RepoCacheConfig::new(tmp.path().join("cache"));
    repos.refresh_interval = Duration::ZERO;
    let r = Arc::new(GitOpsReconciler::new(
        inventory.clone(),
        RepoCache::new(repos),
        ClusterConnections::new(LiveOptions {
            refuse_plaintext: false,
            ..LiveOptions::default()
        }),
        MemorySink::new(),
        always(),
        Arc::new(FixedClock("2026-11-21T10:00:00Z".into())),
        ReconcilerConfig::default(),
    ));
    let (good, broken) = (
        AppKey::new("argocd", "good"),
        AppKey::new("argocd", "broken"),
    );
    let bounded = Duration::from_secs(20);
    timeout(bounded, r.refresh(&good))
        .await
        .expect("refresh within 20 s")
        .unwrap();
    let operated = timeout(bounded, r.operate(&good))
        .await
        .expect("sync within 20 s");
    assert_eq!(operated.unwrap(), Operated::Finished);
    timeout(bounded, r.refresh(&good))
        .await
        .expect("refresh within 20 s")
        .unwrap();
    let _ = timeout(bounded, r.refresh(&broken))
        .await
        .expect("broken within 20 s");
    let mut registry = Registry::default();
    registry.register_collector(Box::new(ArgoCdCollector(r.clone())));
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    let scraped = families(&text);

    for line in DOCUMENTED.lines().filter(|l| !l.starts_with('#')) {
        let [name, kind, labels, exported] = line.split(' ').collect::<Vec<_>>()[..] else {
            panic!("a fixture line is `name type labels yes|missing`: {line}");
        };
        // OpenMetrics names a counter's family without `_total`.
        let family = name.strip_suffix("_total").unwrap_or(name);
        match (exported, scraped.get(family)) {
            ("yes", Some((k, l))) => {
                let expected: BTreeSet<String> = labels.split(',').map(str::to_owned).collect();
                assert_eq!((k.as_str(), l), (kind, &expected), "{name}:\n{text}");
            }
            ("missing", None) => {}
            (exported, found) => panic!("{name} is `{exported}` in the fixture, scraped {found:?}"),
        }
    }
    assert!(
        text.contains(r#"argocd_app_info{namespace="argocd",name="good",project="default",autosync_enabled="true""#),
        "{text}"
    );
    assert!(text.contains(r#"sync_status="Synced""#), "{text}");
    assert!(
        text.contains(r#"argocd_app_condition{namespace="argocd",name="broken",project="default",condition="ComparisonError"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"phase="Succeeded",dry_run="false"} 1"#),
        "{text}"
    );
    // Argo CD's buckets; three refreshes (two of `good`, one of `broken`), all quick.
    assert!(
        text.contains(r#"argocd_app_reconcile_bucket{le="16.0",namespace="argocd""#),
        "{text}"
    );
    assert!(
        text.contains("argocd_app_reconcile_count{namespace=\"argocd\""),
        "{text}"
    );
    for query in DASHBOARD
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        for name in query
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with("argocd_"))
        {
            assert!(
                text.lines().any(|l| l.starts_with(&format!("{name}{{"))),
                "the dashboard's {name} ({query}) has no series:\n{text}"
            );
        }
    }

    // The apps' cluster stops here (it moved away): their series go.
    r.stop_cluster("c1");
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(!text.contains("name=\"good\""), "{text}");
}
