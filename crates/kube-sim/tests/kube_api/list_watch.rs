//! LIST (selectors, resourceVersion, pagination, 410) and WATCH (from a revision, exactly
//! the later events, bookmarks, 410 after compaction, selector transitions) over raw HTTP.

use std::time::Duration;

use fleetshard_kube_sim::{FakeApiServer, FakeConfig};
use serde_json::{Value, json};

use super::raw::{Watch, get, send_json};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

fn cm(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}})
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

async fn seed(f: &FakeApiServer) {
    let a = f.addr();
    send_json(
        a,
        "POST",
        CMS,
        &cm("a", json!({"app": "web", "tier": "front"})),
    )
    .await;
    send_json(a, "POST", CMS, &cm("b", json!({"app": "db"}))).await;
    send_json(
        a,
        "POST",
        CMS,
        &cm("c", json!({"app": "web", "tier": "back"})),
    )
    .await;
    send_json(
        a,
        "POST",
        "/api/v1/namespaces/kube-system/configmaps",
        &cm("d", json!({"app": "web"})),
    )
    .await;
}

#[tokio::test]
async fn list_with_label_and_field_selectors() {
    let f = FakeApiServer::start().await.unwrap();
    seed(&f).await;
    let a = f.addr();
    let q = |s: &str| format!("{CMS}?labelSelector={s}");
    assert_eq!(names(&get(a, &q("app%3Dweb")).await.json()), ["a", "c"]);
    assert_eq!(names(&get(a, &q("app!%3Dweb")).await.json()), ["b"]);
    assert_eq!(
        names(&get(a, &q("tier%20in%20(front,x)")).await.json()),
        ["a"]
    );
    assert_eq!(
        names(&get(a, &q("tier%20notin%20(front)")).await.json()),
        ["b", "c"]
    );
    assert_eq!(names(&get(a, &q("tier")).await.json()), ["a", "c"]);
    assert_eq!(names(&get(a, &q("!tier")).await.json()), ["b"]);
    let list = get(a, &format!("{CMS}?fieldSelector=metadata.name%3Db"))
        .await
        .json();
    assert_eq!(names(&list), ["b"]);
    assert_eq!(list["kind"], "ConfigMapList");
    assert_eq!(list["apiVersion"], "v1");
    assert_eq!(
        list["metadata"]["resourceVersion"],
        f.revision().to_string()
    );
    // All namespaces, with a namespace field selector.
    let all = get(a, "/api/v1/configmaps?labelSelector=app%3Dweb")
        .await
        .json();
    assert_eq!(names(&all), ["a", "c", "d"]);
    let ks = get(
        a,
        "/api/v1/configmaps?fieldSelector=metadata.namespace%3Dkube-system",
    )
    .await
    .json();
    assert_eq!(names(&ks), ["d"]);
    // A malformed selector is a 400.
    assert_eq!(get(a, &q("app%20in%20web")).await.status, 400);
}

#[tokio::test]
async fn list_pages_and_exact_resource_versions() {
    let f = FakeApiServer::start().await.unwrap();
    seed(&f).await;
    let a = f.addr();
    let p1 = get(a, &format!("{CMS}?limit=2")).await.json();
    assert_eq!(names(&p1), ["a", "b"]);
    assert_eq!(p1["metadata"]["remainingItemCount"], 1);
    let token = p1["metadata"]["continue"].as_str().unwrap().to_string();
    // A write between pages does not show: the pages are one snapshot.
    send_json(a, "POST", CMS, &cm("bb", json!({}))).await;
    let p2 = get(a, &format!("{CMS}?limit=2&continue={token}"))
        .await
        .json();
    assert_eq!(names(&p2), ["c"]);
    assert!(p2["metadata"].get("continue").is_none());
    assert_eq!(
        p2["metadata"]["resourceVersion"],
        p1["metadata"]["resourceVersion"]
    );

    // Exact read at an older revision: the state then.
    let old_rv = p1["metadata"]["resourceVersion"].as_str().unwrap();
    let exact = get(
        a,
        &format!("{CMS}?resourceVersion={old_rv}&resourceVersionMatch=Exact"),
    )
    .await
    .json();
    assert_eq!(names(&exact), ["a", "b", "c"]);
    // NotOlderThan: the current state.
    let newer = get(a, &format!("{CMS}?resourceVersion={old_rv}"))
        .await
        .json();
    assert_eq!(names(&newer), ["a", "b", "bb", "c"]);
    // After compaction the old revision (and the continue token) are gone: 410.
    f.compact();
    let gone = get(
        a,
        &format!("{CMS}?resourceVersion={old_rv}&resourceVersionMatch=Exact"),
    )
    .await;
    assert_eq!(gone.status, 410);
    assert_eq!(gone.json()["reason"], "Expired");
    let gone = get(a, &format!("{CMS}?limit=2&continue={token}")).await;
    assert_eq!(gone.status, 410);
}

#[tokio::test]
async fn watch_from_a_revision_sees_exactly_the_later_events_in_order() {
    let f = FakeApiServer::start().await.unwrap();
    let a = f.addr();
    send_json(a, "POST", CMS, &cm("before", json!({}))).await;
    let from = f.revision();
    // Writes after `from`, before the watch opens, must be replayed.
    let x = send_json(a, "POST", CMS, &cm("x", json!({}))).await.json();
    // Another kind in between: not in this watch.
    send_json(
        a,
        "POST",
        "/api/v1/namespaces/default/secrets",
        &json!({"metadata": {"name": "s"}}),
    )
    .await;
    let mut w = Watch::open(a, &format!("{CMS}?watch=true&resourceVersion={from}")).await;
    assert_eq!(w.status, 200);
    let mut x2 = x.clone();
    x2["data"] = json!({"k": "v"});
    send_json(a, "PUT", &format!("{CMS}/x"), &x2).await;
    send_json(a, "DELETE", &format!("{CMS}/x"), &json!({})).await;
    send_json(a, "POST", CMS, &cm("marker", json!({}))).await;
    let mut seen = Vec::new();
    for _ in 0..4 {
        let e = w.expect().await;
        seen.push((
            e["type"].as_str().unwrap().to_string(),
            e["object"]["metadata"]["name"]
                .as_str()
                .unwrap()
                .to_string(),
            e["object"]["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse::<u64>()
                .unwrap(),
        ));
    }
    let kinds: Vec<(&str, &str)> = seen
        .iter()
        .map(|(t, n, _)| (t.as_str(), n.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("ADDED", "x"),
            ("MODIFIED", "x"),
            ("DELETED", "x"),
            ("ADDED", "marker")
        ]
    );
    assert!(
        seen.windows(2).all(|p| p[0].2 < p[1].2),
        "revisions increase: {seen:?}"
    );
    assert!(seen[0].2 > from);
}

/// A client resuming its watch after the stream ended gets what changed meanwhile at once,
/// not at the next write or bookmark: with bookmarks an hour apart and nothing written
/// after the watch opens, the events must still come (the simulated clusters of the scale
/// run send bookmarks a minute apart, and a resumed watch waited that long, or for the
/// next write, before replaying).
#[tokio::test]
async fn a_resumed_watch_replays_at_once_without_a_later_write() {
    let f = FakeApiServer::start().await.unwrap();
    f.set_bookmark_interval(Duration::from_secs(3600));
    let a = f.addr();
    send_json(a, "POST", CMS, &cm("before", json!({}))).await;
    let from = f.revision();
    send_json(a, "POST", CMS, &cm("meanwhile", json!({}))).await;
    let mut w = Watch::open(a, &format!("{CMS}?watch=true&resourceVersion={from}")).await;
    assert_eq!(w.status, 200);
    let e = w.expect().await;
    assert_eq!(
        (e["type"].as_str(), e["object"]["metadata"]["name"].as_str()),
        (Some("ADDED"), Some("meanwhile"))
    );
}

#[tokio::test]
async fn watch_from_zero_starts_with_the_current_state_and_honours_selectors() {
    let f = FakeApiServer::start().await.unwrap();
    seed(&f).await;
    let a = f.addr();
    let mut w = Watch::open(
        a,
        &format!("{CMS}?watch=1&resourceVersion=0&labelSelector=app%3Dweb"),
    )
    .await;
    let e1 = w.expect().await;
    let e2 = w.expect().await;
    assert_eq!(
        (
            e1["type"].as_str(),
            e1["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("a"))
    );
    assert_eq!(e2["object"]["metadata"]["name"], "c");
    // b starts matching: ADDED; a stops matching: DELETED.
    let mut b = f.get("v1", "ConfigMap", "default", "b").unwrap();
    b["metadata"]["labels"]["app"] = json!("web");
    send_json(a, "PUT", &format!("{CMS}/b"), &b).await;
    let mut a_obj = f.get("v1", "ConfigMap", "default", "a").unwrap();
    a_obj["metadata"]["labels"]["app"] = json!("other");
    send_json(a, "PUT", &format!("{CMS}/a"), &a_obj).await;
    let e3 = w.expect().await;
    let e4 = w.expect().await;
    assert_eq!(
        (
            e3["type"].as_str(),
            e3["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("b"))
    );
    assert_eq!(
        (
            e4["type"].as_str(),
            e4["object"]["metadata"]["name"].as_str()
        ),
        (Some("DELETED"), Some("a"))
    );
}

#[tokio::test]
async fn bookmarks_arrive_periodically_and_on_request() {
    let f = FakeApiServer::start_with(FakeConfig {
        bookmark_interval: Duration::from_secs(3600),
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let a = f.addr();
    let rv = f.revision();
    let mut w = Watch::open(
        a,
        &format!("{CMS}?watch=true&resourceVersion={rv}&allowWatchBookmarks=true"),
    )
    .await;
    // A write to another kind advances the revision; the bookmark reports it.
    send_json(
        a,
        "POST",
        "/api/v1/namespaces/default/secrets",
        &json!({"metadata": {"name": "s"}}),
    )
    .await;
    let target = f.revision();
    // Poll: the watch may not have drained the write when the first request lands.
    let b = loop {
        f.send_bookmarks();
        let b = w.expect().await;
        assert_eq!(b["type"], "BOOKMARK");
        if b["object"]["metadata"]["resourceVersion"].as_str() == Some(target.to_string().as_str())
        {
            break b;
        }
    };
    assert_eq!(b["object"]["kind"], "ConfigMap");
    assert_eq!(b["object"]["metadata"].as_object().unwrap().len(), 1);
    // Periodic bookmarks.
    f.set_bookmark_interval(Duration::from_millis(20));
    for _ in 0..3 {
        assert_eq!(w.expect().await["type"], "BOOKMARK");
    }
}

#[tokio::test]
async fn watch_after_compaction_gets_410_expired() {
    let f = FakeApiServer::start().await.unwrap();
    let a = f.addr();
    let old = f.revision();
    send_json(a, "POST", CMS, &cm("x", json!({}))).await;
    f.compact();
    let mut w = Watch::open(a, &format!("{CMS}?watch=true&resourceVersion={old}")).await;
    assert_eq!(w.status, 200, "as a real server: 200, then an ERROR event");
    let e = w.expect().await;
    assert_eq!(e["type"], "ERROR");
    assert_eq!(e["object"]["kind"], "Status");
    assert_eq!(e["object"]["code"], 410);
    assert_eq!(e["object"]["reason"], "Expired");
    assert!(w.next().await.is_none(), "the stream ends after the ERROR");
    // From the current revision a watch is fine.
    let now = f.revision();
    let mut w = Watch::open(a, &format!("{CMS}?watch=true&resourceVersion={now}")).await;
    send_json(a, "POST", CMS, &cm("y", json!({}))).await;
    assert_eq!(w.expect().await["object"]["metadata"]["name"], "y");
}

#[tokio::test]
async fn history_window_expires_old_revisions() {
    let f = FakeApiServer::start_with(FakeConfig {
        history_limit: 3,
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let a = f.addr();
    let old = f.revision();
    for i in 0..5 {
        send_json(a, "POST", CMS, &cm(&format!("o{i}"), json!({}))).await;
    }
    let mut w = Watch::open(a, &format!("{CMS}?watch=true&resourceVersion={old}")).await;
    assert_eq!(w.expect().await["object"]["code"], 410);
    let recent = f.revision() - 2;
    let mut w = Watch::open(a, &format!("{CMS}?watch=true&resourceVersion={recent}")).await;
    assert_eq!(w.expect().await["object"]["metadata"]["name"], "o3");
    assert_eq!(w.expect().await["object"]["metadata"]["name"], "o4");
}

#[tokio::test]
async fn watch_timeout_and_initial_events_end_bookmark() {
    let f = FakeApiServer::start().await.unwrap();
    seed(&f).await;
    let a = f.addr();
    let mut w = Watch::open(a, &format!("{CMS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true")).await;
    for name in ["a", "b", "c"] {
        assert_eq!(w.expect().await["object"]["metadata"]["name"], name);
    }
    let end = w.expect().await;
    assert_eq!(end["type"], "BOOKMARK");
    assert_eq!(
        end["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert_eq!(
        end["object"]["metadata"]["resourceVersion"],
        f.revision().to_string()
    );
    // timeoutSeconds ends the stream (within a generous deadline).
    let mut t = Watch::open(
        a,
        &format!(
            "{CMS}?watch=true&timeoutSeconds=1&resourceVersion={}",
            f.revision()
        ),
    )
    .await;
    let ended = tokio::time::timeout(Duration::from_secs(10), t.next()).await;
    assert!(matches!(ended, Ok(None)), "stream ended: {ended:?}");
    // close_watches ends open streams.
    let mut c = Watch::open(
        a,
        &format!("{CMS}?watch=true&resourceVersion={}", f.revision()),
    )
    .await;
    f.close_watches();
    let ended = tokio::time::timeout(Duration::from_secs(10), c.next()).await;
    assert!(matches!(ended, Ok(None)), "stream closed: {ended:?}");
}
