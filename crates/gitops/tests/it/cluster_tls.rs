//! Reaching a cluster over HTTPS as Argo CD does, from a cluster Secret's `config`
//! (`tlsClientConfig`: `caData`, `insecure`, `serverName`, `certData`/`keyData`, and
//! `bearerToken`), against the fake API server serving TLS with a CA of its own: the
//! right CA is accepted, another refused with an error naming the certificate problem;
//! `insecure` skips the check; a wrong token is a 401; a client certificate the server
//! requires is accepted, and its absence refused.

use fleetshard_gitops::live::{ClusterAccess, ClusterConnections, LiveError, LiveOptions};
use fleetshard_manifest::ClusterCredentials;
use fleetshard_testsupport::kube_api::{FakeApiServer, FakeConfig, TlsOptions};
use serde_json::{Value, json};

const TOKEN: &str = "tls-test-token";

async fn tls_server(require_client_cert: bool) -> FakeApiServer {
    FakeApiServer::start_with(FakeConfig {
        bearer_token: Some(TOKEN.to_owned()),
        tls: Some(TlsOptions {
            require_client_cert,
        }),
        ..FakeConfig::default()
    })
    .await
    .expect("fake API server")
}

fn b64(pem: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(pem)
}

/// `caData` trusting `server`'s CA.
fn ca_of(server: &FakeApiServer) -> String {
    b64(&server.tls().expect("a TLS server").ca_pem)
}

/// `certData`/`keyData` of `server`'s CA-signed client certificate.
fn client_cert_of(server: &FakeApiServer) -> Value {
    let tls = server.tls().expect("a TLS server");
    json!({"certData": b64(&tls.client_cert_pem), "keyData": b64(&tls.client_key_pem)})
}

/// Connects to `url` with a Secret `config` and asks the server for its version, as the
/// reconciler checks a cluster.
async fn reach(url: String, config: Value) -> Result<(), LiveError> {
    let (credentials, _) = ClusterCredentials::from_argo_config(&config.to_string(), "config")
        .expect("a valid config");
    let access = ClusterAccess {
        id: "c1".into(),
        server: url,
        credentials,
    };
    ClusterConnections::new(LiveOptions::default())
        .start(&access)
        .await?
        .check_reachable()
        .await
}

fn tls_config(tls: Value) -> Value {
    json!({"bearerToken": TOKEN, "tlsClientConfig": tls})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_servers_ca_is_accepted_and_another_refused() {
    let server = tls_server(false).await;
    assert!(
        server.url().starts_with("https://127.0.0.1:"),
        "{}",
        server.url()
    );
    reach(server.url(), tls_config(json!({"caData": ca_of(&server)})))
        .await
        .expect("the server's own CA is trusted");

    let other = tls_server(false).await;
    let err = reach(server.url(), tls_config(json!({"caData": ca_of(&other)})))
        .await
        .expect_err("another CA must not be trusted");
    assert!(matches!(err, LiveError::Unreachable { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("invalid peer certificate: UnknownIssuer"),
        "{err}"
    );

    // No CA at all: the system roots do not know the fake's CA either.
    let err = reach(server.url(), tls_config(json!({})))
        .await
        .expect_err("an unknown CA must not be trusted");
    assert!(err.to_string().contains("certificate"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insecure_skips_verification() {
    let server = tls_server(false).await;
    reach(server.url(), tls_config(json!({"insecure": true})))
        .await
        .expect("insecure: the server's certificate is not checked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_name_is_the_name_checked() {
    let server = tls_server(false).await;
    let ca = ca_of(&server);
    reach(
        server.url(),
        tls_config(json!({"caData": ca, "serverName": "localhost"})),
    )
    .await
    .expect("the certificate names localhost");
    let err = reach(
        server.url(),
        tls_config(json!({"caData": ca, "serverName": "api.example.com"})),
    )
    .await
    .expect_err("the certificate does not name api.example.com");
    assert!(err.to_string().contains("certificate"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_is_unauthorized() {
    let server = tls_server(false).await;
    let config = json!({"bearerToken": "not-the-token",
                        "tlsClientConfig": {"caData": ca_of(&server)}});
    let err = reach(server.url(), config)
        .await
        .expect_err("a wrong token must be refused");
    assert!(
        err.to_string().contains("401") || err.to_string().contains("Unauthorized"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_required_client_certificate_is_accepted_and_its_absence_refused() {
    let server = tls_server(true).await;
    let mut with_cert = client_cert_of(&server);
    with_cert["caData"] = json!(ca_of(&server));
    reach(server.url(), tls_config(with_cert))
        .await
        .expect("the CA-signed client certificate is accepted");

    let err = reach(server.url(), tls_config(json!({"caData": ca_of(&server)})))
        .await
        .expect_err("no client certificate: refused");
    assert!(matches!(err, LiveError::Unreachable { .. }), "{err}");

    let other = tls_server(true).await;
    let mut foreign = client_cert_of(&other);
    foreign["caData"] = json!(ca_of(&server));
    reach(server.url(), tls_config(foreign))
        .await
        .expect_err("a client certificate of another CA: refused");
}

/// A cluster named `id` at `url` with a Secret `config`.
fn cluster(id: &str, url: &str, config: Value) -> ClusterAccess {
    let (credentials, _) = ClusterCredentials::from_argo_config(&config.to_string(), "config")
        .expect("a valid config");
    ClusterAccess {
        id: id.into(),
        server: url.to_owned(),
        credentials,
    }
}

/// Starts `access` on `conns` and asks its server for the version.
async fn reach_on(conns: &ClusterConnections, access: &ClusterAccess) -> Result<(), LiveError> {
    conns.start(access).await?.check_reachable().await
}

/// Clusters with one TLS setting (CA, client certificate, `insecure`) share one rustls
/// configuration, whatever their server and server name; each other setting has its own,
/// and each cluster still verifies its own server: sharing never lets a cluster trust
/// another's CA or present another's certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusters_with_one_tls_setting_share_one_configuration() {
    let server = tls_server(false).await;
    let other = tls_server(false).await;
    let conns = ClusterConnections::new(LiveOptions::default());
    let own_ca = tls_config(json!({"caData": ca_of(&server)}));
    reach_on(&conns, &cluster("a", &server.url(), own_ca.clone()))
        .await
        .expect("the server's own CA");
    let by_name = server.url().replace("127.0.0.1", "localhost");
    let mut named = own_ca.clone();
    named["tlsClientConfig"]["serverName"] = json!("localhost");
    reach_on(&conns, &cluster("b", &by_name, named))
        .await
        .expect("the same CA, another URL and server name");
    assert_eq!(conns.tls_configs(), 1, "one setting, one configuration");

    // The same CA but a server name the certificate does not carry: refused, although
    // the configuration is the one cluster `a` uses.
    let mut misnamed = own_ca.clone();
    misnamed["tlsClientConfig"]["serverName"] = json!("api.example.com");
    let err = reach_on(&conns, &cluster("c", &server.url(), misnamed))
        .await
        .expect_err("the certificate does not name api.example.com");
    assert!(err.to_string().contains("certificate"), "{err}");
    assert_eq!(conns.tls_configs(), 1);

    // Another CA: its own configuration, which trusts its server and not the first.
    let other_ca = tls_config(json!({"caData": ca_of(&other)}));
    reach_on(&conns, &cluster("d", &other.url(), other_ca.clone()))
        .await
        .expect("the other server's own CA");
    let err = reach_on(&conns, &cluster("e", &server.url(), other_ca))
        .await
        .expect_err("the other CA must not be trusted for the first server");
    assert!(
        err.to_string()
            .contains("invalid peer certificate: UnknownIssuer"),
        "{err}"
    );
    assert_eq!(conns.tls_configs(), 2, "another CA, another configuration");

    reach_on(
        &conns,
        &cluster("f", &server.url(), tls_config(json!({"insecure": true}))),
    )
    .await
    .expect("insecure");
    let mut with_cert = client_cert_of(&server);
    with_cert["caData"] = json!(ca_of(&server));
    reach_on(&conns, &cluster("g", &server.url(), tls_config(with_cert)))
        .await
        .expect("the CA and a client certificate");
    assert_eq!(
        conns.tls_configs(),
        4,
        "insecure and a client certificate: two more"
    );

    // A configuration lives while a cluster uses it: the last cluster of a setting gone,
    // its configuration goes too (kept weakly, not for the life of the process).
    let plain = cluster("h", "http://127.0.0.1:1", json!({}));
    let conn = conns
        .start(&plain)
        .await
        .expect("a client without a request");
    assert_eq!(conns.tls_configs(), 5, "no CA: the platform's roots");
    assert!(conns.stop("h"));
    drop(conn);
    // kube's client runs its stack on a buffer task, which ends (dropping the stack and
    // its configuration) soon after the last handle is gone: wait for it, bounded.
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while conns.tls_configs() != 4 {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the configuration of the stopped cluster is dropped");
}

/// A required client certificate is presented by the clusters configured with it, and
/// not by a cluster without one on the same server, after the others connected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_is_presented_only_where_configured() {
    let server = tls_server(true).await;
    let conns = ClusterConnections::new(LiveOptions::default());
    let mut with_cert = client_cert_of(&server);
    with_cert["caData"] = json!(ca_of(&server));
    for id in ["a", "b"] {
        reach_on(
            &conns,
            &cluster(id, &server.url(), tls_config(with_cert.clone())),
        )
        .await
        .expect("the CA-signed client certificate is accepted");
    }
    assert_eq!(conns.tls_configs(), 1);
    let err = reach_on(
        &conns,
        &cluster(
            "c",
            &server.url(),
            tls_config(json!({"caData": ca_of(&server)})),
        ),
    )
    .await
    .expect_err("no client certificate: refused");
    assert!(matches!(err, LiveError::Unreachable { .. }), "{err}");
    assert_eq!(conns.tls_configs(), 2);
}

/// HTTPS through an HTTP CONNECT proxy: the tunnel carries TLS verified with the
/// cluster's CA.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_goes_through_the_proxy_verified() {
    let server = tls_server(false).await;
    let other = tls_server(false).await;
    let proxy = crate::cluster_auth::connect_proxy(None).await;
    let conns = ClusterConnections::new(LiveOptions::default());
    let mut config = tls_config(json!({"caData": ca_of(&server)}));
    config["proxyUrl"] = json!(proxy.url);
    reach_on(&conns, &cluster("a", &server.url(), config.clone()))
        .await
        .expect("through the proxy");
    assert!(proxy.tunnels.load(std::sync::atomic::Ordering::SeqCst) >= 1);
    config["tlsClientConfig"]["caData"] = json!(ca_of(&other));
    let err = reach_on(&conns, &cluster("b", &server.url(), config))
        .await
        .expect_err("another CA through the proxy: refused");
    assert!(err.to_string().contains("UnknownIssuer"), "{err}");
}
