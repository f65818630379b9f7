//! Argo CD's metrics as a scrape shows them, checked against a list written from Argo CD's
//! documented metrics (`argocd_metrics.txt`) and a small dashboard's queries
//! (`dashboard.promql`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use fleetshard_controller::{AppKey, Operated, RateLimiterConfig, Reconciler, ShardWork};
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

use super::{ArgoCdCollector, ArgoCdQueues};

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

fn scrape(registry: &Registry) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    text
}

/// A reconciler of the apps in `inventory` (a replica's), with repositories cached under
/// `cache`.
fn reconciler(inventory: Arc<StaticInventory>, cache: std::path::PathBuf) -> Arc<GitOpsReconciler> {
    let mut repos = RepoCacheConfig::new(cache);
    repos.refresh_interval = Duration::ZERO;
    Arc::new(GitOpsReconciler::new(
        inventory,
        RepoCache::new(repos),
        ClusterConnections::new(LiveOptions {
            refuse_plaintext: false,
            ..LiveOptions::default()
        }),
        MemorySink::new(),
        always(),
        Arc::new(FixedClock("2026-11-21T10:00:00Z".into())),
        ReconcilerConfig::default(),
    ))
}

/// The value of the series `prefix…` (its name and first labels), if scraped.
fn value_of(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
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
    let mut good_target = target("good", &git.path(), "good", &cluster);
    good_target.spec.labels = BTreeMap::from([("team".to_owned(), "payments".to_owned())]);
    inventory.insert(good_target);
    // A path that does not exist: a ComparisonError condition.
    inventory.insert(target("broken", &git.path(), "nowhere", &cluster));
    let r = reconciler(inventory.clone(), tmp.path().join("cache"));
    // The replica's queues: fleetshard's names in its own registry, Argo CD's beside.
    let mut own = Registry::with_prefix("fleetshard");
    let work = ShardWork::registered(RateLimiterConfig::default(), &mut own).unwrap();
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
    work.refresh_queue().add(good.clone());
    work.refresh_queue().add(good.clone());
    work.operation_queue().add(broken.clone());
    let mut registry = Registry::default();
    registry.register_collector(Box::new(ArgoCdQueues::of(&work)));
    registry.register_collector(Box::new(ArgoCdCollector {
        reconciler: r.clone(),
        app_labels: vec!["team".into(), "app.kubernetes.io/part-of".into()],
        app_conditions: vec!["ComparisonError".into(), "SyncError".into()],
    }));
    // The sync's apply reaches the ConfigMaps' watch as an event (not a list item).
    let events_of = format!(
        "argocd_cluster_events_total{{server=\"{}\",group=\"\",kind=\"ConfigMap\"}}",
        cluster.url()
    );
    let mut text = scrape(&registry);
    for _ in 0..400 {
        if value_of(&text, &events_of).is_some_and(|n| n >= 1.0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        text = scrape(&registry);
    }
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
    // Only the condition types asked for (`--metrics-application-conditions`) are counted.
    let mut sync_errors_only = Registry::default();
    sync_errors_only.register_collector(Box::new(ArgoCdCollector {
        reconciler: r.clone(),
        app_labels: Vec::new(),
        app_conditions: vec!["SyncError".into()],
    }));
    let only = scrape(&sync_errors_only);
    assert!(!only.contains("condition=\"ComparisonError\""), "{only}");
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
    // Every request of the sync, counted for the app: the server-side apply of the
    // ConfigMap, dry run first (every resource is, as in Argo CD), answered.
    let server = cluster.url();
    let applied = format!(
        "argocd_app_k8s_request_total{{namespace=\"argocd\",name=\"good\",project=\"default\",server=\"{server}\",response_code=\"20"
    );
    assert!(text.contains(&applied), "{text}");
    assert!(
        text.contains(r#"verb="Patch",resource_kind="configmaps",resource_namespace="default",dry_run="false"} 2"#),
        "{text}"
    );
    assert!(
        !text.contains(r#"argocd_app_k8s_request_total{namespace="argocd",name="broken""#),
        "{text}"
    );
    // The chosen labels, sanitised as Argo CD does; a label the app lacks is empty.
    assert!(
        text.contains(r#"argocd_app_labels{namespace="argocd",name="good",project="default",label_team="payments",label_app_kubernetes_io_part_of=""} 1"#),
        "{text}"
    );
    // The cluster: its name and version (the fake's `v1.33.0-fleetshard-fake`, as
    // gitops-engine normalises it), reached, and the ConfigMap's watch events.
    let info =
        format!("argocd_cluster_info{{server=\"{server}\",k8s_version=\"v1.33.0\",name=\"c1\"}} 1");
    assert!(text.contains(&info), "{text}");
    let status = format!(
        "argocd_cluster_connection_status{{server=\"{server}\",k8s_version=\"v1.33.0\"}} 1"
    );
    assert!(text.contains(&status), "{text}");
    assert!(
        value_of(&text, &events_of).is_some_and(|n| n >= 1.0),
        "{text}"
    );
    // The queues under Argo CD's names: the very figures of fleetshard's own (one add of
    // an item already queued does not count).
    let argo_adds = "workqueue_adds_total{name=\"app_reconciliation_queue\",controller=\"app_reconciliation_queue\"}";
    let own_text = scrape(&own);
    let own_adds = "fleetshard_workqueue_adds_total{name=\"app_refresh\"}";
    assert_eq!(value_of(&text, argo_adds), Some(1.0), "{text}");
    assert_eq!(value_of(&own_text, own_adds), Some(1.0), "{own_text}");
    assert_eq!(
        value_of(
            &text,
            "workqueue_depth{name=\"app_operation_processing_queue\",controller=\"app_operation_processing_queue\",priority=\"\"}"
        ),
        Some(1.0),
        "{text}"
    );
    assert!(
        text.contains("workqueue_queue_duration_seconds_bucket{le=\"1e-8\""),
        "{text}"
    );
    for query in DASHBOARD
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        for name in query
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with("argocd_") || w.starts_with("workqueue_"))
        {
            assert!(
                text.lines().any(|l| l.starts_with(&format!("{name}{{"))),
                "the dashboard's {name} ({query}) has no series:\n{text}"
            );
        }
    }

    // The apps' cluster stops here (it moved away): their series and the cluster's go…
    r.stop_cluster("c1");
    let text = scrape(&registry);
    assert!(!text.contains("name=\"good\""), "{text}");
    assert!(!text.contains(&server), "{text}");
    // …and its new owner shows them: summed over both replicas, the cluster counts once.
    let next = reconciler(inventory.clone(), tmp.path().join("cache-next"));
    timeout(bounded, next.refresh(&good))
        .await
        .expect("refresh within 20 s")
        .unwrap();
    let mut next_registry = Registry::default();
    next_registry.register_collector(Box::new(ArgoCdCollector {
        reconciler: next.clone(),
        app_labels: Vec::new(),
        app_conditions: Vec::new(),
    }));
    let next_text = scrape(&next_registry);
    // Without labels or conditions chosen, no `argocd_app_labels` and no
    // `argocd_app_condition` (as Argo CD without the flags).
    assert!(!next_text.contains("argocd_app_labels"), "{next_text}");
    assert!(!next_text.contains("argocd_app_condition"), "{next_text}");
    let owners: f64 = [&text, &next_text]
        .iter()
        .filter_map(|t| value_of(t, &format!("argocd_cluster_info{{server=\"{server}\"")))
        .sum();
    assert_eq!(owners, 1.0, "{text}\n{next_text}");
    let objects = format!("argocd_cluster_api_resource_objects{{server=\"{server}\"}}");
    assert!(value_of(&next_text, &objects).is_some(), "{next_text}");
}

#[test]
fn application_labels_are_named_as_argo_cd_names_them() {
    use super::{app_label_name, check_app_label_keys};
    assert_eq!(app_label_name("team"), "label_team");
    assert_eq!(
        app_label_name("app.kubernetes.io/part-of"),
        "label_app_kubernetes_io_part_of"
    );
    assert_eq!(check_app_label_keys(&["a".into(), "b.c".into()]), Ok(()));
    let clash = check_app_label_keys(&["a.b".into(), "a-b".into()]).unwrap_err();
    assert!(
        clash.contains("\"a.b\"") && clash.contains("label_a_b"),
        "{clash}"
    );
}
