//! Test controls: injected failures (with Retry-After), latency, partitions, request
//! counters, and direct access without HTTP.

use std::time::Duration;

use fleetshard_kube_sim::{FakeApiServer, FaultAction, Verb};
use serde_json::json;

use super::raw::{self, get, send_json};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn fail_next_n_matching_requests() {
    let f = FakeApiServer::start().await.unwrap();
    let a = f.addr();
    f.inject(
        Some(2),
        FaultAction::Fail {
            code: 429,
            retry_after: Some(3),
        },
        |r| r.is(Verb::Create, "configmaps"),
    );
    let body = json!({"metadata": {"name": "x"}});
    let r1 = send_json(a, "POST", CMS, &body).await;
    assert_eq!(r1.status, 429);
    assert_eq!(r1.header("retry-after"), Some("3"));
    assert_eq!(r1.json()["reason"], "TooManyRequests");
    assert_eq!(r1.json()["details"]["retryAfterSeconds"], 3);
    // Other requests are untouched.
    assert_eq!(get(a, CMS).await.status, 200);
    assert_eq!(send_json(a, "POST", CMS, &body).await.status, 429);
    assert_eq!(
        send_json(a, "POST", CMS, &body).await.status,
        201,
        "only the next 2 fail"
    );
    f.fail_next(1, 503, |r| r.verb == Some(Verb::List));
    let r = get(a, CMS).await;
    assert_eq!(
        (r.status, r.json()["reason"].as_str()),
        (503, Some("ServiceUnavailable"))
    );
    assert_eq!(get(a, CMS).await.status, 200);
}

#[tokio::test]
async fn partition_holds_requests_until_healed() {
    let f = FakeApiServer::start().await.unwrap();
    let a = f.addr();
    f.partition(|r| r.resource == "configmaps");
    let held = tokio::spawn(async move {
        send_json(a, "POST", CMS, &json!({"metadata": {"name": "p"}})).await
    });
    // Other resources still answer while configmaps are cut off.
    assert_eq!(
        get(a, "/api/v1/namespaces/default/secrets").await.status,
        200
    );
    // Poll until the held request has arrived (it is counted on arrival).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while f.request_count(Verb::Create, "configmaps") == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "request never arrived"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(!held.is_finished());
    assert!(
        f.get("v1", "ConfigMap", "default", "p").is_none(),
        "held, not served"
    );
    f.heal();
    let r = tokio::time::timeout(Duration::from_secs(10), held)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(r.status, 201);
}

#[tokio::test(start_paused = true)]
async fn latency_delays_matching_requests() {
    let f = FakeApiServer::start().await.unwrap();
    let a = f.addr();
    let id = f.add_latency(Duration::from_secs(30), |r| r.verb == Some(Verb::Get));
    f.insert(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "l"}}))
        .unwrap();
    let t0 = tokio::time::Instant::now();
    let r = get(a, &format!("{CMS}/l")).await;
    assert_eq!(r.status, 200);
    assert!(
        t0.elapsed() >= Duration::from_secs(30),
        "delayed by the injected latency"
    );
    f.remove_fault(id);
    let t1 = tokio::time::Instant::now();
    get(a, &format!("{CMS}/l")).await;
    assert!(t1.elapsed() < Duration::from_secs(30));
}

#[tokio::test]
async fn counters_by_verb_and_resource() {
    let f = FakeApiServer::start().await.unwrap();
    let a = f.addr();
    for i in 0..3 {
        send_json(
            a,
            "POST",
            CMS,
            &json!({"metadata": {"name": format!("c{i}")}}),
        )
        .await;
    }
    get(a, CMS).await;
    get(a, &format!("{CMS}/c0")).await;
    raw::request(
        a,
        "PATCH",
        &format!("{CMS}/c0"),
        Some("application/merge-patch+json"),
        b"{}",
    )
    .await;
    send_json(a, "DELETE", &format!("{CMS}/c1"), &json!({})).await;
    get(a, "/apis").await;
    assert_eq!(f.request_count(Verb::Create, "configmaps"), 3);
    assert_eq!(f.request_count(Verb::List, "configmaps"), 1);
    assert_eq!(f.request_count(Verb::Get, "configmaps"), 1);
    assert_eq!(f.request_count(Verb::Discovery, ""), 1);
    assert_eq!(f.write_count(), 5);
    f.reset_request_counts();
    assert_eq!(f.write_count(), 0);
}

#[tokio::test]
async fn direct_access_without_http() {
    let f = FakeApiServer::start().await.unwrap();
    let o = f
        .insert(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "d", "namespace": "fresh"}, "data": {"a": "1"}}))
        .unwrap();
    assert_eq!(o["metadata"]["resourceVersion"], f.revision().to_string());
    assert!(
        f.get("v1", "Namespace", "", "fresh").is_some(),
        "namespace created for the insert"
    );
    let m = f
        .modify("v1", "ConfigMap", "fresh", "d", |o| {
            o["data"]["a"] = json!("2")
        })
        .unwrap();
    assert_eq!(m["metadata"]["uid"], o["metadata"]["uid"]);
    assert_eq!(f.list("v1", "ConfigMap", Some("fresh")).len(), 1);
    assert_eq!(f.list("v1", "ConfigMap", None).len(), 1);
    let gone = f.delete("v1", "ConfigMap", "fresh", "d").unwrap();
    assert_eq!(gone["data"]["a"], "2");
    assert!(f.get("v1", "ConfigMap", "fresh", "d").is_none());
    let err = f
        .insert(json!({"apiVersion": "v9", "kind": "Nope", "metadata": {"name": "x"}}))
        .unwrap_err();
    assert_eq!(err.code, 404);
    let err = f
        .modify("v1", "ConfigMap", "fresh", "missing", |_| {})
        .unwrap_err();
    assert_eq!(err.reason, "NotFound");
}
