//! The client configuration built from a cluster Secret's credentials.

use super::*;

/// Every authentication field of an Argo CD cluster Secret reaches kube's client
/// configuration: basic auth, a client certificate and key, the server name to verify,
/// a proxy.
#[tokio::test]
async fn a_secrets_authentication_reaches_the_client_configuration() {
    // A self-signed certificate is not needed: kube only decodes the PEM later, when it
    // builds TLS; here the configuration is checked field by field.
    let (credentials, unsupported) = ClusterCredentials::from_argo_config(
        r#"{"username":"admin","password":"pw","proxyUrl":"socks5://127.0.0.1:1080",
            "tlsClientConfig":{"serverName":"api.internal","certData":"Y2VydA==","keyData":"a2V5"}}"#,
        "config",
    )
    .unwrap();
    assert!(unsupported.is_empty());
    let access = ClusterAccess {
        id: "c".into(),
        server: "https://10.0.0.1:6443".into(),
        credentials,
    };
    let config = kubeconfig_config(&access).await.expect("config");
    let auth = &config.auth_info;
    assert_eq!(auth.username.as_deref(), Some("admin"));
    assert!(auth.password.is_some());
    assert_eq!(auth.client_certificate_data.as_deref(), Some("Y2VydA=="));
    assert!(auth.client_key_data.is_some());
    assert_eq!(config.tls_server_name.as_deref(), Some("api.internal"));
    assert_eq!(
        config
            .proxy_url
            .as_ref()
            .map(ToString::to_string)
            .as_deref(),
        Some("socks5://127.0.0.1:1080/")
    );
}

/// Argo CD's built-in in-cluster entry is reached with the pod's service account, never
/// anonymously: outside a pod that is a configuration error naming the way out.
#[tokio::test]
async fn the_built_in_in_cluster_entry_needs_the_pods_service_account() {
    let access = ClusterAccess {
        id: String::new(),
        server: fleetshard_core::argo::IN_CLUSTER_SERVER.to_owned(),
        credentials: ClusterCredentials::pod_service_account(),
    };
    // What kube says outside a pod, wherever the test runs (inside one too).
    let outside_a_pod = || Err("unable to load in-cluster env vars".to_owned());
    let Err(err) = ClusterConnections::new(LiveOptions::default())
        .with_pod_config(outside_a_pod)
        .start(&access)
        .await
    else {
        panic!("connected anonymously to the in-cluster server");
    };
    let message = err.to_string();
    assert!(matches!(err, LiveError::Config { .. }), "{message}");
    assert!(message.contains("service account"), "{message}");
    assert!(message.contains("--in-cluster-enabled=false"), "{message}");
}
