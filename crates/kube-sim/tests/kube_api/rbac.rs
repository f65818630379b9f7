//! A namespaced identity: its token reaches its namespaces; a cluster-wide list or watch,
//! another namespace, or a cluster-scoped kind answers 403 as the real authorizer words
//! it; discovery stays open.

use fleetshard_kube_sim::{FakeApiServer, FakeConfig, NamespacedToken, Verb};
use serde_json::json;

use super::raw::{self, request_with};

const ADMIN: &str = "admin-token";
const TEAM: &str = "team-token";
const USER: &str = "system:serviceaccount:team-a:deployer";

async fn server(cluster_resources: bool) -> FakeApiServer {
    FakeApiServer::start_with(FakeConfig {
        bearer_token: Some(ADMIN.to_owned()),
        namespaced_tokens: vec![NamespacedToken {
            token: TEAM.to_owned(),
            user: USER.to_owned(),
            namespaces: vec!["team-a".to_owned()],
            cluster_resources,
        }],
        ..FakeConfig::default()
    })
    .await
    .unwrap()
}

async fn call(f: &FakeApiServer, method: &str, path: &str, token: &str) -> raw::Resp {
    let auth = format!("Bearer {token}");
    let body = serde_json::to_vec(&json!({"metadata": {"name": "c"}})).unwrap();
    let (ct, body): (Option<&str>, &[u8]) = if method == "POST" {
        (Some("application/json"), &body)
    } else {
        (None, b"")
    };
    request_with(
        f.addr(),
        method,
        path,
        &[("Authorization", &auth)],
        ct,
        body,
    )
    .await
}

#[tokio::test]
async fn a_namespaced_token_reaches_only_its_namespaces() {
    let f = server(false).await;
    f.insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}))
        .unwrap();
    // Its own namespace: every verb.
    let own = "/api/v1/namespaces/team-a/configmaps";
    assert_eq!(call(&f, "POST", own, TEAM).await.status, 201);
    assert_eq!(call(&f, "GET", own, TEAM).await.status, 200);
    assert_eq!(call(&f, "GET", &format!("{own}/c"), TEAM).await.status, 200);
    // Discovery and the version stay open.
    for path in ["/version", "/api", "/apis", "/api/v1", "/apis/apps/v1"] {
        assert_eq!(call(&f, "GET", path, TEAM).await.status, 200, "{path}");
    }

    let forbidden = |r: raw::Resp, message: &str| {
        assert_eq!(r.status, 403, "{message}");
        let s = r.json();
        assert_eq!(
            (s["kind"].as_str(), s["reason"].as_str(), s["code"].as_u64()),
            (Some("Status"), Some("Forbidden"), Some(403)),
            "{s}"
        );
        assert_eq!(s["message"], message, "{s}");
        s
    };
    // A cluster-wide list and watch (what a kube watcher on all namespaces sends).
    let s = forbidden(
        call(&f, "GET", "/api/v1/configmaps", TEAM).await,
        &format!(
            "configmaps is forbidden: User \"{USER}\" cannot list resource \"configmaps\" in \
             API group \"\" at the cluster scope"
        ),
    );
    assert_eq!(s["details"], json!({"kind": "configmaps"}));
    forbidden(
        call(&f, "GET", "/apis/apps/v1/deployments?watch=true", TEAM).await,
        &format!(
            "deployments.apps is forbidden: User \"{USER}\" cannot watch resource \
             \"deployments\" in API group \"apps\" at the cluster scope"
        ),
    );
    // Another namespace.
    let s = forbidden(
        call(&f, "GET", "/api/v1/namespaces/default/configmaps/x", TEAM).await,
        &format!(
            "configmaps \"x\" is forbidden: User \"{USER}\" cannot get resource \
             \"configmaps\" in API group \"\" in the namespace \"default\""
        ),
    );
    assert_eq!(s["details"], json!({"kind": "configmaps", "name": "x"}));
    forbidden(
        call(&f, "POST", "/api/v1/namespaces/default/configmaps", TEAM).await,
        &format!(
            "configmaps is forbidden: User \"{USER}\" cannot create resource \"configmaps\" \
             in API group \"\" in the namespace \"default\""
        ),
    );
    assert!(f.get("v1", "ConfigMap", "default", "c").is_none());
    // A cluster-scoped kind, its own Namespace object included.
    forbidden(
        call(&f, "GET", "/api/v1/namespaces/team-a", TEAM).await,
        &format!(
            "namespaces \"team-a\" is forbidden: User \"{USER}\" cannot get resource \
             \"namespaces\" in API group \"\" at the cluster scope"
        ),
    );
    // The attempts are counted; the administrator's token still reaches everything.
    assert_eq!(f.request_count(Verb::List, "configmaps"), 2);
    assert_eq!(
        call(&f, "GET", "/api/v1/configmaps", ADMIN).await.status,
        200
    );
    // Another token is not authenticated at all.
    assert_eq!(call(&f, "GET", own, "nope").await.status, 401);
}

#[tokio::test]
async fn cluster_resources_grant_the_cluster_scoped_kinds_only() {
    let f = server(true).await;
    assert_eq!(
        call(&f, "GET", "/api/v1/namespaces", TEAM).await.status,
        200
    );
    let path = "/apis/rbac.authorization.k8s.io/v1/clusterroles";
    assert_eq!(call(&f, "GET", path, TEAM).await.status, 200);
    // Namespaced kinds stay limited to the namespaces.
    assert_eq!(
        call(&f, "GET", "/api/v1/configmaps", TEAM).await.status,
        403
    );
    let other = "/api/v1/namespaces/default/configmaps";
    assert_eq!(call(&f, "GET", other, TEAM).await.status, 403);
}
