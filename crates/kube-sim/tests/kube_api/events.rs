//! core/v1 Events as controllers write them: created in the involved object's namespace
//! (another namespace refused, as the real server's validation refuses it), their `count`
//! and `lastTimestamp` patched, and listed by the involved object's fields (Argo CD's API
//! server lists an Application's events by `involvedObject.name`, `.uid` and `.namespace`).

use fleetshard_kube_sim::FakeApiServer;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::kube_client::client;

fn event(name: &str, app: &str, uid: &str, reason: &str) -> Event {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "argocd"},
        "involvedObject": {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
                           "name": app, "namespace": "argocd", "uid": uid},
        "reason": reason, "message": "m", "type": "Normal", "count": 1,
        "source": {"component": "argocd-application-controller"},
        "firstTimestamp": "2026-11-30T08:00:00Z", "lastTimestamp": "2026-11-30T08:00:00Z",
    }))
    .unwrap()
}

#[tokio::test]
async fn events_are_created_patched_and_listed_by_their_involved_object() {
    let f = FakeApiServer::start().await.unwrap();
    f.create_namespace("argocd").unwrap();
    let api: Api<Event> = Api::namespaced(client(&f).await, "argocd");
    let pp = PostParams::default();
    api.create(&pp, &event("web.1", "web", "u1", "OperationStarted"))
        .await
        .unwrap();
    api.create(&pp, &event("web.2", "web", "u1", "ResourceUpdated"))
        .await
        .unwrap();
    api.create(&pp, &event("db.1", "db", "u2", "ResourceUpdated"))
        .await
        .unwrap();
    let patch = json!({"count": 2, "lastTimestamp": "2026-11-30T08:05:00Z"});
    let patched = api
        .patch("web.2", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(patched.count, Some(2));

    let of_web = ListParams::default()
        .fields("involvedObject.name=web,involvedObject.uid=u1,involvedObject.namespace=argocd");
    let mut names: Vec<String> = api
        .list(&of_web)
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|e| e.metadata.name.unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["web.1", "web.2"]);
    let by_reason = ListParams::default()
        .fields("reason=ResourceUpdated,source=argocd-application-controller,type=Normal");
    assert_eq!(api.list(&by_reason).await.unwrap().items.len(), 2);
}

#[tokio::test]
async fn an_event_outside_its_objects_namespace_or_with_a_negative_count_is_refused() {
    let f = FakeApiServer::start().await.unwrap();
    f.create_namespace("argocd").unwrap();
    f.create_namespace("other").unwrap();
    let c = client(&f).await;
    let other: Api<Event> = Api::namespaced(c.clone(), "other");
    let pp = PostParams::default();
    let mut elsewhere = event("web.1", "web", "u1", "OperationStarted");
    elsewhere.metadata.namespace = Some("other".to_owned());
    let e = other.create(&pp, &elsewhere).await.unwrap_err();
    assert!(
        matches!(&e, kube::Error::Api(s) if s.code == 422 && s.message.contains("does not match event.namespace")),
        "{e:?}"
    );
    let api: Api<Event> = Api::namespaced(c, "argocd");
    let mut negative = event("web.2", "web", "u1", "OperationStarted");
    negative.count = Some(-1);
    let e = api.create(&pp, &negative).await.unwrap_err();
    assert!(matches!(&e, kube::Error::Api(s) if s.code == 422), "{e:?}");
}
