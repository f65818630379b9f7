//! Create, get, update (strict resourceVersion), status subresource, generation, no-op
//! writes, delete preconditions, finalizers, errors as `Status` — over raw HTTP.

use fleetshard_kube_sim::FakeApiServer;
use serde_json::{Value, json};

use super::raw::{self, get, send_json};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

fn cm(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

fn rv(obj: &Value) -> u64 {
    obj["metadata"]["resourceVersion"]
        .as_str()
        .expect("resourceVersion is a string")
        .parse()
        .expect("resourceVersion is an integer")
}

fn assert_status(r: &raw::Resp, code: u16, reason: &str) -> Value {
    let s = r.json();
    assert_eq!(r.status, code, "{s}");
    assert_eq!(s["kind"], "Status");
    assert_eq!(s["apiVersion"], "v1");
    assert_eq!(s["status"], "Failure");
    assert_eq!(s["code"], code);
    assert_eq!(s["reason"], reason);
    s
}

#[tokio::test]
async fn create_get_update_with_strict_resource_version() {
    let f = FakeApiServer::start().await.unwrap();
    let a = f.addr();
    let created = send_json(a, "POST", CMS, &cm("one", json!({"k": "v1"}))).await;
    assert_eq!(created.status, 201);
    let c = created.json();
    assert_eq!(c["metadata"]["namespace"], "default");
    assert_eq!(c["metadata"]["generation"], 1);
    assert_eq!(c["metadata"]["uid"].as_str().unwrap().len(), 36);
    assert!(
        c["metadata"]["creationTimestamp"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );
    let rv1 = rv(&c);
    assert_eq!(rv1, f.revision());

    let again = send_json(a, "POST", CMS, &cm("one", json!({}))).await;
    let s = assert_status(&again, 409, "AlreadyExists");
    assert_eq!(s["message"], "configmaps \"one\" already exists");

    let got = get(a, &format!("{CMS}/one")).await;
    assert_eq!((got.status, got.json()), (200, c.clone()));

    // Update with the current resourceVersion: new, higher revision.
    let mut next = c.clone();
    next["data"]["k"] = json!("v2");
    let upd = send_json(a, "PUT", &format!("{CMS}/one"), &next).await;
    assert_eq!(upd.status, 200);
    let rv2 = rv(&upd.json());
    assert!(rv2 > rv1);
    assert_eq!(upd.json()["metadata"]["uid"], c["metadata"]["uid"]);

    // The same update again carries a stale resourceVersion: 409 Conflict, worded as k8s.
    next["data"]["k"] = json!("v3");
    let stale = send_json(a, "PUT", &format!("{CMS}/one"), &next).await;
    let s = assert_status(&stale, 409, "Conflict");
    assert_eq!(
        s["message"],
        "Operation cannot be fulfilled on configmaps \"one\": the object has been modified; please apply your changes to the latest version and try again"
    );
    assert_eq!(s["details"]["name"], "one");
    assert_eq!(
        f.get("v1", "ConfigMap", "default", "one").unwrap()["data"]["k"],
        "v2"
    );

    // Without a resourceVersion an update is unconditional.
    let mut blind = cm("one", json!({"k": "v4"}));
    blind["metadata"]["resourceVersion"] = json!("");
    let ok = send_json(a, "PUT", &format!("{CMS}/one"), &blind).await;
    assert_eq!(ok.status, 200);
    assert!(rv(&ok.json()) > rv2);

    // Update of a missing object: 404 NotFound.
    let missing = send_json(a, "PUT", &format!("{CMS}/nope"), &cm("nope", json!({}))).await;
    let s = assert_status(&missing, 404, "NotFound");
    assert_eq!(s["message"], "configmaps \"nope\" not found");
}

#[tokio::test]
async fn revisions_are_one_counter_across_kinds() {
    let f = FakeApiServer::start().await.unwrap();
    let a = f.addr();
    let c = send_json(a, "POST", CMS, &cm("x", json!({}))).await.json();
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}});
    let l = send_json(
        a,
        "POST",
        "/apis/coordination.k8s.io/v1/namespaces/default/leases",
        &lease,
    )
    .await
    .json();
    assert_eq!(rv(&l), rv(&c) + 1);
    let list = get(a, CMS).await.json();
    assert_eq!(
        list["metadata"]["resourceVersion"],
        l["metadata"]["resourceVersion"]
    );
}

#[tokio::test]
async fn no_op_update_keeps_the_resource_version() {
    let f = FakeApiServer::start().await.unwrap();
    let a = f.addr();
    let c = send_json(a, "POST", CMS, &cm("same", json!({"k": "v"})))
        .await
        .json();
    let before = f.revision();
    let again = send_json(a, "PUT", &format!("{CMS}/same"), &c).await;
    assert_eq!(again.status, 200);
    assert_eq!(
        again.json()["metadata"]["resourceVersion"],
        c["metadata"]["resourceVersion"]
    );
    assert_eq!(f.revision(), before, "a no-op write commits nothing");
}

#[tokio::test]
async fn status_subresource_and_generation() {
    let f = FakeApiServer::start().await.unwrap();
    let a = f.addr();
    let deps = "/apis/apps/v1/namespaces/default/deployments";
    let dep = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}},
        "status": {"readyReplicas": 9}});
    let d = send_json(a, "POST", deps, &dep).await.json();
    assert!(d.get("status").is_none(), "create ignores status: {d}");

    // Main resource: status change ignored, spec change bumps generation.
    let mut d2 = d.clone();
    d2["status"] = json!({"readyReplicas": 5});
    d2["spec"]["replicas"] = json!(3);
    let d2 = send_json(a, "PUT", &format!("{deps}/web"), &d2)
        .await
        .json();
    assert!(d2.get("status").is_none());
    assert_eq!(d2["metadata"]["generation"], 2);

    // Status subresource: only status moves, generation does not.
    let mut d3 = d2.clone();
    d3["status"] = json!({"readyReplicas": 3});
    d3["spec"]["replicas"] = json!(7);
    let d3 = send_json(a, "PUT", &format!("{deps}/web/status"), &d3)
        .await
        .json();
    assert_eq!(d3["status"]["readyReplicas"], 3);
    assert_eq!(d3["spec"]["replicas"], 3);
    assert_eq!(d3["metadata"]["generation"], 2);

    // Metadata-only change: no generation bump.
    let mut d4 = d3.clone();
    d4["metadata"]["labels"] = json!({"x": "y"});
    let d4 = send_json(a, "PUT", &format!("{deps}/web"), &d4)
        .await
        .json();
    assert_eq!(d4["metadata"]["generation"], 2);

    // Scale subresource reads and writes spec.replicas, with the RV precondition.
    let scale = get(a, &format!("{deps}/web/scale")).await.json();
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["spec"]["replicas"], 3);
    assert_eq!(scale["status"]["selector"], "app=web");
    let mut s2 = scale.clone();
    s2["spec"]["replicas"] = json!(5);
    let s2r = send_json(a, "PUT", &format!("{deps}/web/scale"), &s2).await;
    assert_eq!(s2r.status, 200);
    assert_eq!(
        f.get("apps/v1", "Deployment", "default", "web").unwrap()["spec"]["replicas"],
        5
    );
    let stale = send_json(a, "PUT", &format!("{deps}/web/scale"), &s2).await;
    assert_status(&stale, 409, "Conflict");

    // A controller writes status directly.
    let ready = f.set_deployment_ready("default", "web", 5).unwrap();
    assert_eq!(ready["status"]["readyReplicas"], 5);
    assert_eq!(
        ready["status"]["observedGeneration"],
        ready["metadata"]["generation"]
    );
}

#[tokio::test]
async fn delete_preconditions_and_finalizers() {
    let f = FakeApiServer::start().await.unwrap();
    let a = f.addr();
    let c = send_json(a, "POST", CMS, &cm("d", json!({}))).await.json();
    let path = format!("{CMS}/d");
    let wrong_rv = json!({"preconditions": {"resourceVersion": "1"}});
    let s = assert_status(
        &send_json(a, "DELETE", &path, &wrong_rv).await,
        409,
        "Conflict",
    );
    assert!(
        s["message"]
            .as_str()
            .unwrap()
            .contains("Precondition failed: ResourceVersion in precondition: 1")
    );
    let wrong_uid = json!({"preconditions": {"uid": "nope"}});
    assert_status(
        &send_json(a, "DELETE", &path, &wrong_uid).await,
        409,
        "Conflict",
    );
    let right = json!({"preconditions": {"resourceVersion": c["metadata"]["resourceVersion"], "uid": c["metadata"]["uid"]}});
    let del = send_json(a, "DELETE", &path, &right).await;
    assert_eq!(del.status, 200);
    assert_eq!(del.json()["status"], "Success");
    assert!(f.get("v1", "ConfigMap", "default", "d").is_none());
    assert_status(
        &send_json(a, "DELETE", &path, &json!({})).await,
        404,
        "NotFound",
    );

    // With a finalizer the object stays, marked, until an update removes the finalizer.
    let mut fin = cm("fin", json!({}));
    fin["metadata"]["finalizers"] = json!(["example.com/hold"]);
    send_json(a, "POST", CMS, &fin).await;
    let marked = send_json(a, "DELETE", &format!("{CMS}/fin"), &json!({}))
        .await
        .json();
    assert!(marked["metadata"]["deletionTimestamp"].is_string());
    let mut release = f.get("v1", "ConfigMap", "default", "fin").unwrap();
    release["metadata"]["finalizers"] = json!([]);
    let r = send_json(a, "PUT", &format!("{CMS}/fin"), &release).await;
    assert_eq!(r.status, 200);
    assert!(f.get("v1", "ConfigMap", "default", "fin").is_none());
}

#[tokio::test]
async fn create_rules_and_errors() {
    let f = FakeApiServer::start().await.unwrap();
    let a = f.addr();
    // generateName
    let g = send_json(
        a,
        "POST",
        CMS,
        &json!({"metadata": {"generateName": "gen-"}}),
    )
    .await;
    assert_eq!(g.status, 201);
    let name = g.json()["metadata"]["name"].as_str().unwrap().to_string();
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");
    // invalid name, naming the field
    let bad = send_json(a, "POST", CMS, &cm("Bad_Name", json!({}))).await;
    let s = assert_status(&bad, 422, "Invalid");
    assert_eq!(s["details"]["causes"][0]["field"], "metadata.name");
    // missing name
    let s = assert_status(
        &send_json(a, "POST", CMS, &json!({"metadata": {}})).await,
        422,
        "Invalid",
    );
    assert!(s["message"].as_str().unwrap().contains("metadata.name"));
    // malformed body
    let r = raw::request(a, "POST", CMS, Some("application/json"), b"{not json").await;
    assert_status(&r, 400, "BadRequest");
    // namespace must exist
    let r = send_json(
        a,
        "POST",
        "/api/v1/namespaces/ghost/configmaps",
        &cm("x", json!({})),
    )
    .await;
    let s = assert_status(&r, 404, "NotFound");
    assert_eq!(s["message"], "namespaces \"ghost\" not found");
    // namespace in the body must match the path
    let mut other = cm("y", json!({}));
    other["metadata"]["namespace"] = json!("kube-system");
    assert_status(&send_json(a, "POST", CMS, &other).await, 400, "BadRequest");
    // unknown resource, method not allowed
    assert_status(
        &get(a, "/api/v1/namespaces/default/widgets").await,
        404,
        "NotFound",
    );
    assert_status(
        &send_json(a, "POST", &format!("{CMS}/x"), &json!({})).await,
        405,
        "MethodNotAllowed",
    );
    // Secrets: stringData becomes base64 data
    let sec = json!({"metadata": {"name": "s"}, "stringData": {"token": "hi"}, "type": "Opaque"});
    let s = send_json(a, "POST", "/api/v1/namespaces/default/secrets", &sec)
        .await
        .json();
    assert_eq!(s["data"]["token"], "aGk=");
    assert!(s.get("stringData").is_none());
    // Deleting a namespace deletes what is in it.
    send_json(
        a,
        "POST",
        "/api/v1/namespaces",
        &json!({"metadata": {"name": "tmp"}}),
    )
    .await;
    send_json(
        a,
        "POST",
        "/api/v1/namespaces/tmp/configmaps",
        &cm("in", json!({})),
    )
    .await;
    let r = send_json(a, "DELETE", "/api/v1/namespaces/tmp", &json!({})).await;
    assert_eq!(r.status, 200);
    assert!(f.get("v1", "ConfigMap", "tmp", "in").is_none());
    assert!(f.get("v1", "Namespace", "", "tmp").is_none());
}

#[tokio::test]
async fn patches_merge_strategic_and_json() {
    let f = FakeApiServer::start().await.unwrap();
    let a = f.addr();
    let c = send_json(a, "POST", CMS, &cm("p", json!({"a": "1", "b": "2"})))
        .await
        .json();
    let path = format!("{CMS}/p");
    let merge = raw::request(
        a,
        "PATCH",
        &path,
        Some("application/merge-patch+json"),
        br#"{"data": {"a": null, "c": "3"}}"#,
    )
    .await;
    assert_eq!(merge.status, 200);
    assert_eq!(merge.json()["data"], json!({"b": "2", "c": "3"}));
    let strategic = raw::request(
        a,
        "PATCH",
        &path,
        Some("application/strategic-merge-patch+json"),
        br#"{"metadata": {"labels": {"l": "x"}}}"#,
    )
    .await;
    assert_eq!(strategic.json()["metadata"]["labels"]["l"], "x");
    let jp = raw::request(a, "PATCH", &path, Some("application/json-patch+json"),
        br#"[{"op": "test", "path": "/data/b", "value": "2"}, {"op": "replace", "path": "/data/b", "value": "9"}]"#).await;
    assert_eq!(jp.status, 200);
    assert_eq!(jp.json()["data"]["b"], "9");
    let failing = raw::request(
        a,
        "PATCH",
        &path,
        Some("application/json-patch+json"),
        br#"[{"op": "test", "path": "/data/b", "value": "2"}]"#,
    )
    .await;
    assert_status(&failing, 422, "Invalid");
    // A resourceVersion in a merge patch is a precondition.
    let stale = format!(
        r#"{{"metadata": {{"resourceVersion": "{}"}}, "data": {{"z": "1"}}}}"#,
        c["metadata"]["resourceVersion"].as_str().unwrap()
    );
    let r = raw::request(
        a,
        "PATCH",
        &path,
        Some("application/merge-patch+json"),
        stale.as_bytes(),
    )
    .await;
    assert_status(&r, 409, "Conflict");
    let r = raw::request(
        a,
        "PATCH",
        &format!("{CMS}/none"),
        Some("application/merge-patch+json"),
        b"{}",
    )
    .await;
    assert_status(&r, 404, "NotFound");
    let r = raw::request(a, "PATCH", &path, Some("text/plain"), b"{}").await;
    assert_status(&r, 415, "UnsupportedMediaType");
}

#[tokio::test]
async fn put_creates_a_missing_lease_as_a_real_server_does() {
    let f = FakeApiServer::start().await.unwrap();
    let a = f.addr();
    let path = "/apis/coordination.k8s.io/v1/namespaces/default/leases/l";
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "l", "resourceVersion": "12345"}, "spec": {"holderIdentity": "x"}});
    let r = send_json(a, "PUT", path, &lease).await;
    assert_eq!(r.status, 201, "{}", r.json());
    assert_eq!(rv(&r.json()), f.revision());
    // ConfigMaps do not: 404.
    assert_eq!(
        send_json(a, "PUT", &format!("{CMS}/l"), &cm("l", json!({})))
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn dry_run_changes_nothing() {
    let f = FakeApiServer::start().await.unwrap();
    let a = f.addr();
    let before = f.revision();
    let r = send_json(
        a,
        "POST",
        &format!("{CMS}?dryRun=All"),
        &cm("dry", json!({"k": "v"})),
    )
    .await;
    assert_eq!(r.status, 201);
    assert_eq!(r.json()["data"]["k"], "v");
    assert!(r.json()["metadata"].get("resourceVersion").is_none());
    assert!(f.get("v1", "ConfigMap", "default", "dry").is_none());
    assert_eq!(f.revision(), before);
    let c = send_json(a, "POST", CMS, &cm("dry", json!({"k": "v"})))
        .await
        .json();
    let r = raw::request(
        a,
        "PATCH",
        &format!("{CMS}/dry?dryRun=All&fieldManager=m"),
        Some("application/apply-patch+yaml"),
        b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dry\ndata:\n  k: w\n",
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["data"]["k"], "w");
    assert_eq!(
        r.json()["metadata"]["resourceVersion"],
        c["metadata"]["resourceVersion"]
    );
    assert_eq!(f.get("v1", "ConfigMap", "default", "dry").unwrap(), c);
    let r = send_json(a, "DELETE", &format!("{CMS}/dry?dryRun=All"), &json!({})).await;
    assert_eq!(r.status, 200);
    assert!(f.get("v1", "ConfigMap", "default", "dry").is_some());
    // The log keeps every dry run, answered 2xx, as a write that changed nothing.
    let dry: Vec<_> = f.writes().into_iter().filter(|w| w.dry_run).collect();
    assert_eq!(dry.len(), 3, "{dry:#?}");
    assert!(dry.iter().all(|w| !w.may_apply()), "{dry:#?}");
    assert!(f.writes().iter().any(|w| !w.dry_run && w.may_apply()));
}

#[tokio::test]
async fn size_limits_of_a_real_server() {
    let f = FakeApiServer::start().await.unwrap();
    let a = f.addr();
    let over = cm("big", json!({"a": "x".repeat(1024 * 1024), "b": "y"}));
    let s = assert_status(&send_json(a, "POST", CMS, &over).await, 422, "Invalid");
    assert!(s["message"].as_str().unwrap().contains("1048576"), "{s}");
    let at = cm("big", json!({"a": "x".repeat(1024 * 1024)}));
    assert_eq!(send_json(a, "POST", CMS, &at).await.status, 201);
    let huge = cm("huge", json!({"a": "x".repeat(3 * 1024 * 1024)}));
    assert_status(
        &send_json(a, "POST", CMS, &huge).await,
        413,
        "RequestEntityTooLarge",
    );
}
