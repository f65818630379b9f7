//! HTTPS: the fake's kubeconfig (its CA, and its client certificate) reaches it through
//! kube-rs; a server requiring client certificates refuses a client without one; plain
//! HTTP to a TLS port gets no HTTP answer.

use fleetshard_kube_sim::{FakeApiServer, FakeConfig, TlsOptions};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::kube_client::client;

async fn tls_server(require_client_cert: bool) -> FakeApiServer {
    FakeApiServer::start_with(FakeConfig {
        tls: Some(TlsOptions {
            require_client_cert,
        }),
        ..FakeConfig::default()
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn the_kubeconfig_reaches_a_tls_server_with_its_ca_and_client_certificate() {
    let f = tls_server(true).await;
    assert!(f.url().starts_with("https://127.0.0.1:"), "{}", f.url());
    let tls = f.tls().unwrap();
    assert!(tls.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
    assert!(
        !format!("{tls:?}").contains("PRIVATE KEY"),
        "Debug redacts the key"
    );
    let namespaces: Api<Namespace> = Api::all(client(&f).await);
    let listed = namespaces.list(&ListParams::default()).await.unwrap();
    assert!(
        listed
            .items
            .iter()
            .any(|n| n.metadata.name.as_deref() == Some("default"))
    );

    // Without the client certificate: the handshake fails.
    let yaml = f.kubeconfig_yaml();
    let without: String = yaml
        .replace(
            &format!(",\"client-key-data\":{:?}", b64(&tls.client_key_pem)),
            "",
        )
        .replace(
            &format!(
                "\"client-certificate-data\":{:?}",
                b64(&tls.client_cert_pem)
            ),
            "",
        );
    assert_ne!(without, yaml);
    let kc = kube::config::Kubeconfig::from_yaml(&without).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let refused = Api::<Namespace>::all(kube::Client::try_from(config).unwrap())
        .list(&ListParams::default())
        .await;
    assert!(refused.is_err(), "listed without a client certificate");
}

fn b64(pem: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(pem)
}

#[tokio::test]
async fn plain_http_to_a_tls_port_gets_no_http_answer() {
    let f = tls_server(false).await;
    let mut s = tokio::net::TcpStream::connect(f.addr()).await.unwrap();
    let _ = s
        .write_all(b"GET /version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await;
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer).await;
    assert!(
        !answer.starts_with(b"HTTP/"),
        "{:?}",
        String::from_utf8_lossy(&answer)
    );
}
