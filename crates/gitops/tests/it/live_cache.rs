//! The live cache never stays wrong unseen: an object's change reaches the cache (and the
//! listener that refreshes its app) without any unrelated event — right after a watch's
//! first list, across a watch restart, after `410 Gone`, during a bookmark, and when a
//! watch silently stops delivering (then within the relist period). Real HTTP against the
//! simulated API server, so time cannot be paused: each wait has a deadline far beyond
//! the bound it checks (a correctness check, not a speed measurement).

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fleetshard_gitops::compare::ResourceKey;
use fleetshard_gitops::health::HealthChecks;
use fleetshard_gitops::live::{
    ClusterAccess, ClusterConn, ClusterConnections, ClusterCredentials, LiveOptions, UpdateFilter,
};
use fleetshard_manifest::customizations::ResourceCustomizations;
use fleetshard_testsupport::kube_api::FakeApiServer;
use fleetshard_testsupport::kube_api::Verb;
use serde_json::{Value, json};

/// Apps the listener was told of, in order.
type Told = Arc<Mutex<Vec<String>>>;

struct Cluster {
    fake: FakeApiServer,
    conn: Arc<ClusterConn>,
    told: Told,
    _conns: ClusterConnections,
}

fn settings(value: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "settings",
            "namespace": "default",
            "annotations": {"argocd.argoproj.io/tracking-id": "a:/ConfigMap:default/settings"},
        },
        "data": {"value": value},
    })
}

/// A fake with the app's ConfigMap and bookmarks an hour apart (none comes to the rescue).
async fn fake() -> FakeApiServer {
    let fake = FakeApiServer::start().await.unwrap();
    fake.set_bookmark_interval(LONG);
    fake.insert(settings("v1")).unwrap();
    fake
}

/// [`fake`] and a connection whose ConfigMap cache has completed its first list.
async fn cluster(relist_every: Duration) -> Cluster {
    connect(fake().await, relist_every).await
}

/// A connection to `fake` whose ConfigMap cache has completed its first list.
async fn connect(fake: FakeApiServer, relist_every: Duration) -> Cluster {
    let told: Told = Arc::default();
    let listener = {
        let told = told.clone();
        Arc::new(move |app: &str| told.lock().unwrap().push(app.to_owned()))
    };
    let conns = ClusterConnections::new(LiveOptions {
        relist_every,
        ..LiveOptions::default()
    })
    .with_listener(listener);
    let access = ClusterAccess {
        id: "c1".into(),
        server: fake.url(),
        credentials: ClusterCredentials::default(),
    };
    let conn = conns.start(&access).await.unwrap();
    let info = conn.kind_info("v1", "ConfigMap").await.unwrap();
    conn.watch_kinds(&[info]).await.unwrap();
    Cluster {
        fake,
        conn,
        told,
        _conns: conns,
    }
}

impl Cluster {
    fn cached_value(&self) -> Option<String> {
        self.cached("value")
    }

    /// The cached ConfigMap's `data.<field>`.
    fn cached(&self, field: &str) -> Option<String> {
        let keys: HashSet<ResourceKey> = HashSet::new();
        self.conn
            .live_objects("a", &keys, &Default::default())
            .iter()
            .find_map(|o| {
                o.get("data")
                    .and_then(|d| d.get(field))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
    }

    fn change(&self, value: &str) {
        self.change_field("value", value);
    }

    fn change_field(&self, field: &str, value: &str) {
        self.fake
            .modify("v1", "ConfigMap", "default", "settings", |cm| {
                cm["data"][field] = json!(value);
            })
            .unwrap();
    }

    /// Waits until the cache holds `value` and the listener was told of app `a` since
    /// `told_before` notices; panics after `deadline`.
    async fn seen(&self, value: &str, told_before: usize, deadline: Duration) {
        self.until(deadline, |c| {
            c.cached_value().as_deref() == Some(value) && c.told() > told_before
        })
        .await;
    }

    /// Waits until `check` holds; panics after `deadline`.
    async fn until(&self, deadline: Duration, check: impl Fn(&Cluster) -> bool) {
        let start = tokio::time::Instant::now();
        loop {
            if check(self) {
                return;
            }
            assert!(
                start.elapsed() < deadline,
                "after {:?}: cache {:?}, listener told {:?}",
                start.elapsed(),
                self.cached_value(),
                self.told.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn told(&self) -> usize {
        self.told.lock().unwrap().len()
    }
}

const LONG: Duration = Duration::from_secs(3600);

/// The watch after the first list starts from the list's revision; a change made before
/// it opens (its request held back here until the change has landed) is replayed at once.
#[tokio::test]
async fn a_change_right_after_the_first_list_is_seen() {
    let fake = fake().await;
    let held = fake.partition(|r| r.verb == Some(Verb::Watch));
    let c = connect(fake, LONG).await;
    c.change("v2");
    c.fake.remove_fault(held);
    c.until(Duration::from_secs(20), |c| {
        c.cached_value().as_deref() == Some("v2")
    })
    .await;
}

/// The server ends every open watch; the change lands before the client's next watch
/// opens (held back until then): replayed from the revision the client resumes at.
#[tokio::test]
async fn a_change_across_a_watch_restart_is_seen() {
    change_across_a_watch_restart(false).await;
}

/// The revision the client resumes at is no longer retained: `410 Gone`, the watcher lists
/// again, and the list's news reaches the listener as an event would have.
#[tokio::test]
async fn a_change_behind_a_410_gone_is_seen_and_told() {
    change_across_a_watch_restart(true).await;
}

/// Every open watch ended, the object changed (and, with `compact`, the revisions the
/// client would resume from dropped) before the client's next watch is let through: the
/// change reaches the cache and the listener.
async fn change_across_a_watch_restart(compact: bool) {
    let c = cluster(LONG).await;
    let before = c.told();
    let held = c.fake.partition(|r| r.verb == Some(Verb::Watch));
    c.fake.close_watches();
    c.change("v2");
    if compact {
        c.fake.compact();
    }
    c.fake.remove_fault(held);
    c.seen("v2", before, Duration::from_secs(20)).await;
}

/// Bookmarks go out while the object changes: neither is lost.
#[tokio::test]
async fn a_change_during_bookmarks_is_seen() {
    let c = cluster(LONG).await;
    let before = c.told();
    c.fake.send_bookmarks();
    c.change("v2");
    c.fake.send_bookmarks();
    c.seen("v2", before, Duration::from_secs(20)).await;
}

/// The open watch stalls (nothing more is delivered, the stream stays open): the cache
/// lists again once the relist period has passed, and the change is seen and told.
#[tokio::test]
async fn a_watch_that_silently_stops_delivering_is_relisted_and_the_cache_dated_by_that_list() {
    let relist = Duration::from_secs(2);
    let c = cluster(relist).await;
    let before = c.told();
    let partitioned = tokio::time::Instant::now();
    c.fake.partition(|r| r.verb == Some(Verb::Watch));
    c.change("v2");
    // Seen through a list: no watch gets through (the watch timeout alone would take a
    // minute); the wait gives up after ten relist periods.
    c.seen("v2", before, relist * 10).await;
    // The cache's age shows how current it is: it dates the list made since the partition
    // (younger than the partition), not the first one.
    let age = c.conn.cache_age().expect("listed");
    let since_partition = partitioned.elapsed();
    assert!(
        age < since_partition,
        "cache age {age:?}, but the partition began {since_partition:?} ago"
    );
}

/// argocd-cm's `ignoreResourceUpdates.ConfigMap: /data/noise`, as the reconciler installs it.
fn ignore_noise(c: &Cluster) {
    let argocd_cm = BTreeMap::from([(
        "resource.customizations.ignoreResourceUpdates.ConfigMap".to_owned(),
        "jsonPointers:\n- /data/noise\n".to_owned(),
    )]);
    let customizations = ResourceCustomizations::from_argocd_cm(&argocd_cm).unwrap();
    let filter = UpdateFilter::new(&customizations, HealthChecks::builtin())
        .unwrap()
        .expect("resource.ignoreResourceUpdatesEnabled is true by default");
    c.conn.set_update_filter(Some(Arc::new(filter)));
}

/// Churn in an ignored field (each write also a new resourceVersion) is stored and not
/// told; a change elsewhere is told once. Events arrive in order, so once the last churn
/// is cached every earlier one has been judged.
#[tokio::test]
async fn churn_in_fields_ignored_for_resource_updates_is_cached_and_not_told() {
    let c = cluster(LONG).await;
    ignore_noise(&c);
    let before = c.told();
    for i in 0..5 {
        c.change_field("noise", &i.to_string());
    }
    c.until(Duration::from_secs(20), |c| {
        c.cached("noise").as_deref() == Some("4")
    })
    .await;
    assert_eq!(c.told(), before, "ignored churn told the listener");
    c.change("v2");
    c.seen("v2", before, Duration::from_secs(20)).await;
    assert_eq!(c.told(), before + 1);
}

/// The same through a list (`410 Gone` behind a watch restart): an object found changed
/// only in ignored fields is cached and not told.
#[tokio::test]
async fn ignored_churn_found_by_a_list_is_cached_and_not_told() {
    let c = cluster(LONG).await;
    ignore_noise(&c);
    let before = c.told();
    let held = c.fake.partition(|r| r.verb == Some(Verb::Watch));
    c.fake.close_watches();
    c.change_field("noise", "listed");
    c.fake.compact();
    c.fake.remove_fault(held);
    c.until(Duration::from_secs(20), |c| {
        c.cached("noise").as_deref() == Some("listed")
    })
    .await;
    assert_eq!(
        c.told(),
        before,
        "ignored churn found by a list told the listener"
    );
}
