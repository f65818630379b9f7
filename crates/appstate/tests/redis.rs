//! The app-state cache against a real `redis-server`, read back by a decoder written from
//! Argo CD's documented layout (key `<name>|1.8.3[.gz]`, value gzip of JSON), independent
//! of the writer: keys, values, expirations, shards, the update notification, and an
//! outage in the middle of a run.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use fleetshard_appstate::{
    AppShown, AppStateCache, ClusterFacts, Compression, HealthStatus, ManagedResource,
    RedisSettings,
};
use fleetshard_testsupport::redis::RedisServer;
use serde::Deserialize;
use serde_json::{Value, json};

/// Argo CD's `ApplicationTree`, as its API server decodes it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Tree {
    #[serde(default)]
    nodes: Vec<Node>,
    #[serde(default)]
    shards_count: i64,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Node {
    #[serde(default)]
    group: String,
    kind: String,
    name: String,
    #[serde(default)]
    parent_refs: Vec<Value>,
    health: Option<Value>,
}

/// Argo CD's `ResourceDiff`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Diff {
    kind: String,
    name: String,
    target_state: String,
    live_state: String,
    #[serde(default)]
    modified: bool,
}

/// Argo CD's `ClusterInfo`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Cluster {
    connection_state: Value,
    server_version: String,
    cache_info: Value,
    applications_count: i64,
}

fn decode<T: serde::de::DeserializeOwned>(bytes: &[u8], gzip: bool) -> T {
    let mut json = Vec::new();
    if gzip {
        flate2::read::GzDecoder::new(bytes)
            .read_to_end(&mut json)
            .expect("gzip");
    } else {
        json = bytes.to_vec();
    }
    assert_eq!(
        json.last(),
        Some(&b'\n'),
        "Go's json.Encoder ends with a newline"
    );
    serde_json::from_slice(&json).expect("JSON of Argo CD's type")
}

/// Polls (real time: another process) until `key` holds a value `accept`s.
fn wait_for(redis: &RedisServer, key: &str, accept: impl Fn(&[u8]) -> bool) -> Vec<u8> {
    for _ in 0..500 {
        if let Some(v) = redis.get(key).unwrap()
            && accept(&v)
        {
            return v;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{key} never written; keys: {:?}", redis.keys("*").unwrap());
}

fn app_objects() -> (Vec<ManagedResource>, Vec<Arc<Value>>) {
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop", "uid": "d-1"}});
    let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web-1", "namespace": "shop", "uid": "r-1",
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "d-1"}]}});
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "creds", "namespace": "shop"}, "data": {"password": "c2VjcmV0"}});
    let managed = vec![
        ManagedResource {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
            namespace: "shop".into(),
            name: "web".into(),
            target: Some(deploy.clone()),
            live: Some(Arc::new(deploy.clone())),
            ..Default::default()
        },
        ManagedResource {
            version: "v1".into(),
            kind: "Secret".into(),
            namespace: "shop".into(),
            name: "creds".into(),
            target: Some(secret),
            live: None,
            modified: true,
            ..Default::default()
        },
    ];
    (managed, vec![Arc::new(deploy), Arc::new(rs)])
}

fn healthy(_: &Value) -> Option<HealthStatus> {
    Some(HealthStatus {
        status: "Healthy".into(),
        message: String::new(),
    })
}

fn settings(redis: &RedisServer) -> RedisSettings {
    let mut s = RedisSettings::new(redis.address());
    s.backoff = Duration::from_millis(20);
    s.max_backoff = Duration::from_millis(200);
    s
}

fn facts() -> ClusterFacts {
    ClusterFacts {
        reached: Some(Ok(())),
        server_version: "1.31".into(),
        resources_count: 2,
        apis_count: 2,
        applications_count: 1,
        now: "2026-11-30T10:00:00Z".into(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_are_written_in_argo_cds_layout() {
    let redis = RedisServer::start().unwrap();
    let cache = AppStateCache::start(settings(&redis)).unwrap();
    let (managed, objects) = app_objects();
    cache
        .write_app(
            "guestbook",
            &managed,
            &objects,
            &healthy,
            &AppShown::default(),
            &[],
        )
        .unwrap();
    cache
        .write_cluster("https://kubernetes.default.svc", &facts())
        .unwrap();

    let tree: Tree = decode(
        &wait_for(&redis, "app|resources-tree|guestbook|1.8.3.gz", |_| true),
        true,
    );
    let names: Vec<(&str, &str)> = tree
        .nodes
        .iter()
        .map(|n| (n.kind.as_str(), n.name.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("Secret", "creds"),
            ("Deployment", "web"),
            ("ReplicaSet", "web-1")
        ]
    );
    assert_eq!(tree.nodes[0].health, Some(json!({"status": "Missing"})));
    assert_eq!(tree.nodes[2].group, "apps");
    assert_eq!(tree.nodes[2].parent_refs[0]["uid"], "d-1");
    assert_eq!(tree.shards_count, 0);

    let diffs: Vec<Diff> = decode(
        &wait_for(&redis, "app|managed-resources|guestbook|1.8.3.gz", |_| true),
        true,
    );
    assert_eq!(diffs.len(), 2);
    assert_eq!(
        (diffs[0].kind.as_str(), diffs[0].name.as_str()),
        ("Secret", "creds")
    );
    assert!(diffs[0].modified);
    assert_eq!(diffs[0].live_state, "null");
    assert!(
        !diffs[0].target_state.contains("c2VjcmV0"),
        "{}",
        diffs[0].target_state
    );
    assert!(diffs[0].target_state.contains("++++++++"));

    let info: Cluster = decode(
        &wait_for(
            &redis,
            "cluster|info|https://kubernetes.default.svc|1.8.3.gz",
            |_| true,
        ),
        true,
    );
    assert_eq!(info.connection_state["status"], "Successful");
    assert_eq!(info.connection_state["attemptedAt"], "2026-11-30T10:00:00Z");
    assert_eq!(info.server_version, "1.31");
    assert_eq!(
        info.cache_info,
        json!({"resourcesCount": 2, "apisCount": 2})
    );
    assert_eq!(info.applications_count, 1);

    // Argo CD's expirations: app state 1 h by default, cluster info 10 minutes.
    let tree_ttl = redis
        .ttl_ms("app|resources-tree|guestbook|1.8.3.gz")
        .unwrap();
    assert!((3_500_000..=3_600_000).contains(&tree_ttl), "{tree_ttl}");
    let info_ttl = redis
        .ttl_ms("cluster|info|https://kubernetes.default.svc|1.8.3.gz")
        .unwrap();
    assert!((500_000..=600_000).contains(&info_ttl), "{info_ttl}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uncompressed_and_sharded_trees() {
    let redis = RedisServer::start().unwrap();
    let mut s = settings(&redis);
    s.compression = Compression::None;
    s.tree_shard_size = 2;
    let cache = AppStateCache::start(s).unwrap();
    let (managed, objects) = app_objects();
    cache
        .write_app(
            "guestbook",
            &managed,
            &objects,
            &healthy,
            &AppShown::default(),
            &[],
        )
        .unwrap();
    let first: Tree = decode(
        &wait_for(&redis, "app|resources-tree|guestbook|1.8.3", |_| true),
        false,
    );
    let second: Tree = decode(
        &wait_for(&redis, "app|resources-tree|guestbook|1|1.8.3", |_| true),
        false,
    );
    assert_eq!(first.shards_count, 2);
    assert_eq!((first.nodes.len(), second.nodes.len()), (2, 1));
    assert!(redis.keys("*.gz").unwrap().is_empty());
}

/// Subscribes to `channel` over plain RESP and returns the socket once subscribed.
fn subscribe(redis: &RedisServer, channel: &str) -> BufReader<TcpStream> {
    let mut s = TcpStream::connect(redis.address()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "*2\r\n$9\r\nSUBSCRIBE\r\n${}\r\n{channel}\r\n",
        channel.len()
    )
    .unwrap();
    let mut r = BufReader::new(s);
    // The confirmation: *3, $9, subscribe, $n, the channel, :1.
    for _ in 0..6 {
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
    }
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_servers_watchers_are_notified() {
    let redis = RedisServer::start().unwrap();
    let mut sub = subscribe(&redis, "app|managed-resources|guestbook|1.8.3");
    let cache = AppStateCache::start(settings(&redis)).unwrap();
    let (managed, objects) = app_objects();
    cache
        .write_app(
            "guestbook",
            &managed,
            &objects,
            &healthy,
            &AppShown::default(),
            &[],
        )
        .unwrap();
    let message = tokio::task::spawn_blocking(move || {
        let mut lines = Vec::new();
        for _ in 0..7 {
            let mut line = String::new();
            sub.read_line(&mut line).unwrap();
            lines.push(line.trim_end().to_owned());
        }
        lines
    })
    .await
    .unwrap();
    assert_eq!(
        message,
        [
            "*3",
            "$7",
            "message",
            "$37",
            "app|managed-resources|guestbook|1.8.3",
            "$0",
            ""
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_keeps_the_latest_values_and_they_come_back() {
    let mut redis = RedisServer::start().unwrap();
    let cache = AppStateCache::start(settings(&redis)).unwrap();
    let key = "cluster|info|https://c1|1.8.3.gz";
    cache.write_cluster("https://c1", &facts()).unwrap();
    wait_for(&redis, key, |_| true);

    redis.kill().unwrap();
    // Written during the outage: returns at once each time; only the last is kept.
    for n in 0..50 {
        let f = ClusterFacts {
            applications_count: n,
            ..facts()
        };
        cache.write_cluster("https://c1", &f).unwrap();
    }
    let during = cache.stats();
    assert!(during.pending <= 1, "{during:?}");
    redis.restart().unwrap();
    let info: Cluster = decode(
        &wait_for(&redis, key, |v| {
            decode::<Cluster>(v, true).applications_count == 49
        }),
        true,
    );
    assert_eq!(info.applications_count, 49);
    // Every value is written or superseded: the first and the last were written. Redis
    // holds the last value before the writer has read Redis's reply and counted it.
    let mut after = cache.stats();
    for _ in 0..500 {
        if after.written + after.superseded == 51 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        after = cache.stats();
    }
    assert_eq!((after.written, after.superseded), (2, 49), "{after:?}");
    assert!(after.connected && after.pending == 0, "{after:?}");
}
