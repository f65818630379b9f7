//! HTTPS for the fake: each server generates its own CA, a server certificate for
//! `127.0.0.1` and `localhost` signed by it, and a client certificate signed by it; with
//! [`TlsOptions::require_client_cert`] every connection must present a certificate
//! signed by that CA (mutual TLS, as an API server with `--client-ca-file` and anonymous
//! access off), else the handshake fails. Keys are ECDSA P-256, generated with ring.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::RootCertStore;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ServerConfig, WebPkiClientVerifier};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use super::FakeApiError;

/// How a fake serves HTTPS ([`crate::FakeConfig::tls`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// Every connection must present a client certificate signed by the server's CA
    /// ([`TlsMaterial::client_cert_pem`]); one without it, or with another CA's, fails
    /// the TLS handshake.
    pub require_client_cert: bool,
}

/// The PEM certificates and key a TLS fake generated: what a client needs to trust it
/// and, when it requires one, to present a client certificate.
#[derive(Clone, PartialEq, Eq)]
pub struct TlsMaterial {
    /// The CA that signed the server's and the client's certificates (a cluster Secret's
    /// `tlsClientConfig.caData` is the base64 of this).
    pub ca_pem: String,
    /// A client certificate signed by the CA (`certData`).
    pub client_cert_pem: String,
    /// Its private key, PKCS#8 (`keyData`).
    pub client_key_pem: String,
}

impl std::fmt::Debug for TlsMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsMaterial")
            .field("ca_pem", &self.ca_pem.len())
            .field("client_cert_pem", &self.client_cert_pem.len())
            .field("client_key_pem", &"<redacted>")
            .finish()
    }
}

/// A generated PKI and the acceptor serving it.
pub struct Tls {
    /// The certificates and key handed to clients.
    pub material: TlsMaterial,
    acceptor: TlsAcceptor,
}

fn tls_err(what: &str) -> impl Fn(String) -> FakeApiError + '_ {
    move |e| FakeApiError::Tls(format!("{what}: {e}"))
}

/// A generated PKI: a CA, a server certificate for `127.0.0.1` and `localhost` and a client
/// certificate, both signed by the CA. Other fakes serving TLS (testsupport's repo-server)
/// build their own server configuration from it.
pub struct Pki {
    /// The CA and the client certificate and key, in PEM.
    pub material: TlsMaterial,
    /// The CA's certificate (DER).
    pub ca_cert: CertificateDer<'static>,
    /// The server's certificate (DER).
    pub server_cert: CertificateDer<'static>,
    /// The server's key (PKCS#8 DER).
    pub server_key: PrivatePkcs8KeyDer<'static>,
}

/// Generates a [`Pki`] whose CA is named `ca_name` (each server's CA is another issuer).
pub fn generate_pki(ca_name: &str) -> Result<Pki, FakeApiError> {
    let cert_err = |e: rcgen::Error| tls_err("generating certificates")(e.to_string());
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(cert_err)?;
    ca.distinguished_name.push(DnType::CommonName, ca_name);
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().map_err(cert_err)?)
        .map_err(cert_err)?;
    let leaf = |sans: Vec<String>, name: &str, usage: ExtendedKeyUsagePurpose| {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(sans)?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![usage];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.use_authority_key_identifier_extension = true;
        let cert = params.signed_by(&key, &ca)?;
        Ok::<_, rcgen::Error>((cert, key))
    };
    let (server_cert, server_key) = leaf(
        vec!["127.0.0.1".into(), "localhost".into()],
        "fake-apiserver",
        ExtendedKeyUsagePurpose::ServerAuth,
    )
    .map_err(cert_err)?;
    let (client_cert, client_key) = leaf(
        Vec::new(),
        "fleetshard-test-client",
        ExtendedKeyUsagePurpose::ClientAuth,
    )
    .map_err(cert_err)?;

    Ok(Pki {
        material: TlsMaterial {
            ca_pem: ca.pem(),
            client_cert_pem: client_cert.pem(),
            client_key_pem: client_key.serialize_pem(),
        },
        ca_cert: ca.der().clone(),
        server_cert: server_cert.der().clone(),
        server_key: PrivatePkcs8KeyDer::from(server_key.serialize_der()),
    })
}

/// Generates a CA, server and client certificates, and the server's TLS configuration,
/// for the server at `addr` (named in the CA's name: each server's CA is another issuer).
pub fn generate(options: &TlsOptions, addr: SocketAddr) -> Result<Tls, FakeApiError> {
    let pki = generate_pki(&format!("fleetshard fake API server CA for {addr}"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let rustls_err = |e: rustls::Error| tls_err("configuring TLS")(e.to_string());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(rustls_err)?;
    let builder = if options.require_client_cert {
        let mut roots = RootCertStore::empty();
        roots.add(pki.ca_cert).map_err(rustls_err)?;
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| tls_err("configuring client certificates")(e.to_string()))?;
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let config = builder
        .with_single_cert(vec![pki.server_cert], PrivateKeyDer::Pkcs8(pki.server_key))
        .map_err(rustls_err)?;
    Ok(Tls {
        material: pki.material,
        acceptor: TlsAcceptor::from(Arc::new(config)),
    })
}

/// How long a connection may take to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A listener yielding connections whose TLS handshake succeeded. Handshakes run in
/// their own tasks, so a client that never finishes one holds up nobody; failed ones are
/// dropped (logged at debug).
pub struct TlsListener {
    connections: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    addr: SocketAddr,
}

impl TlsListener {
    /// Serves TLS on `listener` with `tls`'s certificates.
    pub fn new(listener: TcpListener, addr: SocketAddr, tls: &Tls) -> Self {
        let (tx, connections) = mpsc::channel(64);
        let acceptor = tls.acceptor.clone();
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    accepted = listener.accept() => accepted,
                    () = tx.closed() => return, // the server stopped
                };
                let (tcp, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::debug!(error = %e, "fake API server: accept failed");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                };
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => {
                            let _ = tx.send((stream, peer)).await;
                        }
                        Ok(Err(e)) => {
                            tracing::debug!(%peer, error = %e, "fake API server: TLS handshake failed");
                        }
                        Err(_) => {
                            tracing::debug!(%peer, "fake API server: TLS handshake timed out");
                        }
                    }
                });
            }
        });
        Self { connections, addr }
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.connections.recv().await {
            Some(conn) => conn,
            // The accept task only ends once this listener is gone.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.addr)
    }
}
