//! A required bearer token: 401 without it or with another, over raw HTTP, before faults
//! and counters; kube-rs reaches the server with the kubeconfig it writes.

use fleetshard_kube_sim::{FakeApiServer, FakeConfig, Verb};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

use super::kube_client::client;
use super::raw::{self, request_with};

const TOKEN: &str = "0123456789abcdef-token";

async fn with_token() -> FakeApiServer {
    FakeApiServer::start_with(FakeConfig {
        bearer_token: Some(TOKEN.to_owned()),
        ..FakeConfig::default()
    })
    .await
    .unwrap()
}

async fn get_as(f: &FakeApiServer, path: &str, authorization: Option<&str>) -> raw::Resp {
    let headers: Vec<(&str, &str)> = authorization
        .map(|a| vec![("Authorization", a)])
        .unwrap_or_default();
    request_with(f.addr(), "GET", path, &headers, None, b"").await
}

#[tokio::test]
async fn requests_without_the_token_are_unauthorized() {
    let f = with_token().await;
    assert_eq!(f.bearer_token(), Some(TOKEN));
    let bearer = format!("Bearer {TOKEN}");
    for path in ["/api/v1/namespaces", "/version", "/apis", "/nowhere"] {
        for wrong in [
            None,
            Some("Bearer nope"),
            Some("Bearer 0123456789abcdef-tokeX"),
            Some("Basic dXNlcjpwYXNz"),
            Some(TOKEN),
        ] {
            let r = get_as(&f, path, wrong).await;
            assert_eq!(r.status, 401, "{path} with {wrong:?}");
            let s = r.json();
            assert_eq!(
                (s["kind"].as_str(), s["reason"].as_str(), s["code"].as_u64()),
                (Some("Status"), Some("Unauthorized"), Some(401)),
                "{s}"
            );
        }
    }
    // Refused requests reach neither counters nor faults.
    assert!(f.request_counts().is_empty(), "{:?}", f.request_counts());
    let r = get_as(&f, "/api/v1/namespaces", Some(&bearer)).await;
    assert_eq!(r.status, 200);
    assert!(
        r.json()["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|ns| ns["metadata"]["name"] == "default")
    );
    // The scheme is case-insensitive, as the real server's.
    let lower = format!("bearer {TOKEN}");
    assert_eq!(get_as(&f, "/version", Some(&lower)).await.status, 200);
    assert_eq!(f.request_count(Verb::List, "namespaces"), 1);

    // Writes too.
    let cm = serde_json::to_vec(&json!({"metadata": {"name": "c"}, "data": {"k": "v"}})).unwrap();
    let path = "/api/v1/namespaces/default/configmaps";
    let denied = request_with(f.addr(), "POST", path, &[], Some("application/json"), &cm).await;
    assert_eq!(denied.status, 401);
    assert!(f.get("v1", "ConfigMap", "default", "c").is_none());
    let auth = [("Authorization", bearer.as_str())];
    let created = request_with(f.addr(), "POST", path, &auth, Some("application/json"), &cm).await;
    assert_eq!(created.status, 201);
}

#[tokio::test]
async fn a_server_without_a_token_takes_any_request() {
    let f = FakeApiServer::start().await.unwrap();
    assert_eq!(f.bearer_token(), None);
    assert_eq!(get_as(&f, "/version", None).await.status, 200);
    assert_eq!(
        get_as(&f, "/version", Some("Bearer anything")).await.status,
        200
    );
}

#[tokio::test]
async fn kube_rs_authenticates_with_the_written_kubeconfig() {
    let f = with_token().await;
    assert!(f.kubeconfig_yaml().contains(TOKEN));
    let api: Api<ConfigMap> = Api::namespaced(client(&f).await, "default");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "a"}, "data": {"k": "v"}})).unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap();
    let listed = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
}
