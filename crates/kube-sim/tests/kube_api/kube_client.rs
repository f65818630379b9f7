//! The fake through kube-rs, the client fleetshard uses: a client from the written
//! kubeconfig, typed CRUD with 409s, Leases, `kube::runtime::watcher` including recovery
//! from 410, discovery, and dynamic objects with server-side apply.

use std::time::Duration;

use fleetshard_kube_sim::{FakeApiServer, Verb};
use futures::{Stream, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, Preconditions,
    WatchEvent, WatchParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::discovery::{Discovery, Scope};
use kube::runtime::watcher;
use kube::{Client, Config};
use serde_json::json;

/// A kube-rs client from the kubeconfig the fake writes.
pub async fn client(f: &FakeApiServer) -> Client {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    f.write_kubeconfig(&path).unwrap();
    let kc = Kubeconfig::read_from(&path).unwrap();
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    assert_eq!(config.default_namespace, "default");
    Client::try_from(config).unwrap()
}

fn cm(name: &str, v: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": v}})).unwrap()
}

fn api_code(e: kube::Error) -> u16 {
    match e {
        kube::Error::Api(s) => s.code,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn configmap_crud_with_conflicts() {
    let f = FakeApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(client(&f).await);
    let pp = PostParams::default();
    let c = api.create(&pp, &cm("a", "1")).await.unwrap();
    assert_eq!(
        api_code(api.create(&pp, &cm("a", "1")).await.unwrap_err()),
        409
    );
    let mut next = c.clone();
    next.data.as_mut().unwrap().insert("k".into(), "2".into());
    let r = api.replace("a", &pp, &next).await.unwrap();
    assert!(
        r.metadata.resource_version.unwrap().parse::<u64>().unwrap()
            > c.metadata
                .resource_version
                .clone()
                .unwrap()
                .parse::<u64>()
                .unwrap()
    );
    // `next` still carries the old resourceVersion: conflict.
    assert_eq!(
        api_code(api.replace("a", &pp, &next).await.unwrap_err()),
        409
    );
    assert_eq!(api.get("a").await.unwrap().data.unwrap()["k"], "2");
    assert_eq!(api_code(api.get("zz").await.unwrap_err()), 404);
    assert!(api.get_opt("zz").await.unwrap().is_none());
    let listed = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(
        listed.metadata.resource_version.unwrap(),
        f.revision().to_string()
    );
    let stale = DeleteParams {
        preconditions: Some(Preconditions {
            resource_version: c.metadata.resource_version.clone(),
            uid: None,
        }),
        ..DeleteParams::default()
    };
    assert_eq!(api_code(api.delete("a", &stale).await.unwrap_err()), 409);
    let deleted = api.delete("a", &DeleteParams::default()).await.unwrap();
    assert!(deleted.is_right(), "built-in kinds answer a Status");
    assert!(f.get("v1", "ConfigMap", "default", "a").is_none());
}

#[tokio::test]
async fn lease_crud_and_merge_patch() {
    let f = FakeApiServer::start().await.unwrap();
    let api: Api<Lease> = Api::namespaced(client(&f).await, "kube-system");
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "shard-0", "annotations": {"fleetshard.io/record": "{}"}},
        "spec": {"holderIdentity": "replica-a"}}))
    .unwrap();
    let l = api.create(&PostParams::default(), &lease).await.unwrap();
    assert_eq!(
        l.spec.as_ref().unwrap().holder_identity.as_deref(),
        Some("replica-a")
    );
    let mut take = l.clone();
    take.spec.as_mut().unwrap().holder_identity = Some("replica-b".into());
    let t = api
        .replace("shard-0", &PostParams::default(), &take)
        .await
        .unwrap();
    assert_eq!(
        api_code(
            api.replace("shard-0", &PostParams::default(), &take)
                .await
                .unwrap_err()
        ),
        409
    );
    let p = api
        .patch("shard-0", &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"resourceVersion": t.metadata.resource_version}, "spec": {"holderIdentity": "replica-c"}})))
        .await
        .unwrap();
    assert_eq!(
        p.spec.unwrap().holder_identity.as_deref(),
        Some("replica-c")
    );
    api.delete("shard-0", &DeleteParams::default())
        .await
        .unwrap();
    assert!(api.get_opt("shard-0").await.unwrap().is_none());
}

#[tokio::test]
async fn raw_watch_events_and_bookmarks_through_kube() {
    let f = FakeApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(client(&f).await);
    let rv = f.revision().to_string();
    let mut stream = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    api.create(&PostParams::default(), &cm("w", "1"))
        .await
        .unwrap();
    match next(&mut stream).await {
        WatchEvent::Added(o) => assert_eq!(o.metadata.name.as_deref(), Some("w")),
        other => panic!("expected ADDED, got {other:?}"),
    }
    f.send_bookmarks();
    match next(&mut stream).await {
        WatchEvent::Bookmark(b) => {
            assert_eq!(b.metadata.resource_version, f.revision().to_string())
        }
        other => panic!("expected BOOKMARK, got {other:?}"),
    }
    f.compact();
    let mut old = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    match next(&mut old).await {
        WatchEvent::Error(e) => assert_eq!((e.code, e.reason.as_str()), (410, "Expired")),
        other => panic!("expected ERROR 410, got {other:?}"),
    }
}

async fn next<S, T>(s: &mut S) -> T
where
    S: Stream<Item = Result<T, kube::Error>> + Unpin,
{
    tokio::time::timeout(Duration::from_secs(10), s.next())
        .await
        .expect("an item within 10 s")
        .expect("stream not ended")
        .expect("no error")
}

/// The next watcher event that is not an error, skipping errors (returned separately).
async fn next_event(
    s: &mut (impl Stream<Item = Result<watcher::Event<ConfigMap>, watcher::Error>> + Unpin),
    errors: &mut Vec<String>,
) -> watcher::Event<ConfigMap> {
    loop {
        let item = tokio::time::timeout(Duration::from_secs(10), s.next())
            .await
            .expect("a watcher event within 10 s")
            .expect("the watcher does not end");
        match item {
            Ok(e) => return e,
            Err(e) => errors.push(e.to_string()),
        }
    }
}

fn name(e: &watcher::Event<ConfigMap>) -> String {
    match e {
        watcher::Event::Apply(o) | watcher::Event::Delete(o) | watcher::Event::InitApply(o) => {
            o.metadata.name.clone().unwrap_or_default()
        }
        _ => String::new(),
    }
}

#[tokio::test]
async fn runtime_watcher_sees_changes_and_relists_after_410() {
    let f = FakeApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(client(&f).await);
    api.create(&PostParams::default(), &cm("pre", "0"))
        .await
        .unwrap();
    let mut w = watcher(api.clone(), watcher::Config::default()).boxed();
    let mut errors = Vec::new();
    assert!(matches!(
        next_event(&mut w, &mut errors).await,
        watcher::Event::Init
    ));
    let e = next_event(&mut w, &mut errors).await;
    assert!(matches!(e, watcher::Event::InitApply(_)) && name(&e) == "pre");
    assert!(matches!(
        next_event(&mut w, &mut errors).await,
        watcher::Event::InitDone
    ));

    let c = api
        .create(&PostParams::default(), &cm("a", "1"))
        .await
        .unwrap();
    let e = next_event(&mut w, &mut errors).await;
    assert!(
        matches!(e, watcher::Event::Apply(_)) && name(&e) == "a",
        "{e:?}"
    );
    let mut upd = c.clone();
    upd.data.as_mut().unwrap().insert("k".into(), "2".into());
    api.replace("a", &PostParams::default(), &upd)
        .await
        .unwrap();
    match next_event(&mut w, &mut errors).await {
        watcher::Event::Apply(o) => assert_eq!(o.data.unwrap()["k"], "2"),
        other => panic!("expected Apply, got {other:?}"),
    }
    api.delete("pre", &DeleteParams::default()).await.unwrap();
    let e = next_event(&mut w, &mut errors).await;
    assert!(
        matches!(e, watcher::Event::Delete(_)) && name(&e) == "pre",
        "{e:?}"
    );
    assert!(errors.is_empty(), "{errors:?}");

    // Cut the watcher off: its next watch request is held while writes happen and the
    // history is compacted, so when it gets through its revision is expired (410) and
    // it must list again.
    f.partition(|r| r.verb == Some(Verb::Watch) && r.resource == "configmaps");
    let watches_before = f.request_count(Verb::Watch, "configmaps");
    f.close_watches();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut pending = Box::pin(next_event(&mut w, &mut errors));
    loop {
        // Drive the watcher until its reconnect has arrived (and is held).
        if tokio::time::timeout(Duration::from_millis(10), &mut pending)
            .await
            .is_ok()
        {
            panic!("no event expected while partitioned");
        }
        if f.request_count(Verb::Watch, "configmaps") > watches_before {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the watcher did not reconnect"
        );
    }
    api.create(&PostParams::default(), &cm("during", "x"))
        .await
        .unwrap();
    api.delete("a", &DeleteParams::default()).await.unwrap();
    f.compact();
    f.heal();
    let mut events = vec![pending.await];
    while !matches!(events.last(), Some(watcher::Event::InitDone)) {
        events.push(next_event(&mut w, &mut errors).await);
    }
    assert!(
        errors
            .iter()
            .any(|e| e.contains("410") || e.to_lowercase().contains("expired")),
        "{errors:?}"
    );
    let names: Vec<String> = events
        .iter()
        .filter(|e| matches!(e, watcher::Event::InitApply(_)))
        .map(name)
        .collect();
    assert_eq!(names, ["during"], "relisted state: {events:?}");
    assert!(f.request_count(Verb::List, "configmaps") >= 2, "relisted");
    // And it keeps watching after the relist.
    api.create(&PostParams::default(), &cm("after", "y"))
        .await
        .unwrap();
    let e = next_event(&mut w, &mut errors).await;
    assert!(
        matches!(e, watcher::Event::Apply(_)) && name(&e) == "after",
        "{e:?}"
    );
}

#[tokio::test]
async fn discovery_and_dynamic_objects_with_server_side_apply() {
    let f = FakeApiServer::start().await.unwrap();
    let client = client(&f).await;
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let (dep, caps) = discovery
        .groups()
        .flat_map(|g| g.recommended_resources())
        .find(|(ar, _)| ar.kind == "Deployment")
        .expect("deployments discovered");
    assert_eq!(
        (
            dep.group.as_str(),
            dep.version.as_str(),
            dep.plural.as_str()
        ),
        ("apps", "v1", "deployments")
    );
    assert_eq!(caps.scope, Scope::Namespaced);
    assert!(
        caps.subresources
            .iter()
            .any(|(s, _)| s.plural.ends_with("status") || s.plural == "status")
    );
    let (app, _) = discovery
        .resolve_gvk(&kube::core::GroupVersionKind::gvk(
            "argoproj.io",
            "v1alpha1",
            "Application",
        ))
        .expect("applications discovered");
    assert_eq!(app.plural, "applications");
    let (ns, ns_caps) = discovery
        .resolve_gvk(&kube::core::GroupVersionKind::gvk("", "v1", "Namespace"))
        .unwrap();
    assert_eq!(
        (ns.plural.as_str(), ns_caps.scope.clone()),
        ("namespaces", Scope::Cluster)
    );
    let aggregated = Discovery::new(client.clone())
        .run_aggregated()
        .await
        .unwrap();
    assert!(
        aggregated
            .resolve_gvk(&kube::core::GroupVersionKind::gvk(
                "coordination.k8s.io",
                "v1",
                "Lease"
            ))
            .is_some()
    );

    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &dep);
    let desired: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
    })).unwrap();
    let pp = PatchParams::apply("fleetshard").force();
    let created = api
        .patch("web", &pp, &Patch::Apply(&desired))
        .await
        .unwrap();
    assert_eq!(created.data["spec"]["replicas"], 3);
    let mf = created.metadata.managed_fields.as_ref().unwrap();
    assert_eq!(mf[0].manager.as_deref(), Some("fleetshard"));
    assert_eq!(mf[0].operation.as_deref(), Some("Apply"));
    let mut changed = desired.clone();
    changed.data["spec"]["replicas"] = json!(4);
    let updated = api
        .patch("web", &pp, &Patch::Apply(&changed))
        .await
        .unwrap();
    assert_eq!(updated.data["spec"]["replicas"], 4);
    assert_eq!(updated.metadata.generation, Some(2));
    let got = api.get("web").await.unwrap();
    assert_eq!(got.data["spec"]["replicas"], 4);
    assert_eq!(got.types.unwrap().kind, "Deployment");
    let listed = Api::<DynamicObject>::all_with(client, &dep)
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
}

#[tokio::test]
async fn runtime_watcher_with_streaming_lists() {
    let f = FakeApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(client(&f).await);
    api.create(&PostParams::default(), &cm("s1", "1"))
        .await
        .unwrap();
    api.create(&PostParams::default(), &cm("s2", "1"))
        .await
        .unwrap();
    let mut w = watcher(api.clone(), watcher::Config::default().streaming_lists()).boxed();
    let mut errors = Vec::new();
    let mut events = Vec::new();
    while !matches!(events.last(), Some(watcher::Event::InitDone)) {
        events.push(next_event(&mut w, &mut errors).await);
    }
    assert!(matches!(events[0], watcher::Event::Init));
    let names: Vec<String> = events
        .iter()
        .filter(|e| matches!(e, watcher::Event::InitApply(_)))
        .map(name)
        .collect();
    assert_eq!(names, ["s1", "s2"]);
    assert_eq!(
        f.request_count(Verb::List, "configmaps"),
        0,
        "no LIST with streaming lists"
    );
    api.create(&PostParams::default(), &cm("s3", "1"))
        .await
        .unwrap();
    let e = next_event(&mut w, &mut errors).await;
    assert!(
        matches!(e, watcher::Event::Apply(_)) && name(&e) == "s3",
        "{e:?}"
    );
    assert!(errors.is_empty(), "{errors:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_compare_and_swap_loses_no_update_and_watch_sees_every_write() {
    let f = FakeApiServer::start().await.unwrap();
    let client = client(&f).await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    api.create(&PostParams::default(), &cm("counter", "0"))
        .await
        .unwrap();
    let from = f.revision().to_string();
    let mut events = api
        .watch(&WatchParams::default().disable_bookmarks(), &from)
        .await
        .unwrap()
        .boxed();
    let (writers, per_writer) = (4, 25);
    let mut tasks = Vec::new();
    for _ in 0..writers {
        let api = api.clone();
        tasks.push(tokio::spawn(async move {
            let mut conflicts = 0u32;
            for _ in 0..per_writer {
                loop {
                    let mut c = api.get("counter").await.unwrap();
                    let n: u64 = c.data.as_ref().unwrap()["k"].parse().unwrap();
                    c.data
                        .as_mut()
                        .unwrap()
                        .insert("k".into(), (n + 1).to_string());
                    match api.replace("counter", &PostParams::default(), &c).await {
                        Ok(_) => break,
                        Err(kube::Error::Api(s)) if s.code == 409 => conflicts += 1,
                        Err(e) => panic!("unexpected error {e}"),
                    }
                }
            }
            conflicts
        }));
    }
    let mut conflicts = 0;
    for t in tasks {
        conflicts += t.await.unwrap();
    }
    let total = writers * per_writer;
    let last = api.get("counter").await.unwrap();
    assert_eq!(
        last.data.unwrap()["k"],
        total.to_string(),
        "no lost update ({conflicts} conflicts retried)"
    );
    let mut seen = Vec::new();
    while seen.len() < total {
        match next(&mut events).await {
            WatchEvent::Modified(o) => seen.push((
                o.metadata.resource_version.unwrap().parse::<u64>().unwrap(),
                o.data.unwrap()["k"].parse::<u64>().unwrap(),
            )),
            other => panic!("expected MODIFIED, got {other:?}"),
        }
    }
    assert!(
        seen.windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 + 1 == w[1].1),
        "in order, one by one"
    );
}
