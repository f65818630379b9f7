//! The client's transport security. By default TLS verified against the system's CA
//! certificates and the operator's (`--repo-server-ca-cert-path`; in a deployment, the
//! `ca.crt` of Argo CD's Secret `argocd-repo-server-tls`), and the address's host name: a
//! server that cannot prove it is the repo-server never sees a request, so never a
//! repository credential. Stricter than Argo CD, whose controller skips verification
//! unless told otherwise (`reposerver/apiclient/clientset.go`); the old behaviour is an
//! explicit choice ([`TlsMode::InsecureSkipVerify`], `--repo-server-insecure-skip-tls-verify`).
//! Plain text for a repo-server run with `--disable-tls`. With TLS, optionally a client
//! certificate for a repo-server that requires mutual TLS (`--repo-server-client-cert-path`).
//!
//! TLS is done here (tokio-rustls, crypto provider ring, ALPN `h2` as gRPC servers
//! require) rather than by tonic, whose TLS cannot skip verification.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::error::ClientError;

/// How the client secures its connection.
#[derive(Clone, PartialEq, Eq)]
pub enum TlsMode {
    /// TLS, the server's certificate verified against the system's CA certificates and
    /// `ca_pem`, and the address's host name. The default (with no extra CA).
    Verified {
        /// PEM CA certificates trusted beside the system's (the operator's CA, e.g. the
        /// `ca.crt` of `argocd-repo-server-tls`); empty: the system's only.
        ca_pem: String,
    },
    /// TLS, the server's certificate not verified (Argo CD's default towards its
    /// repo-server). The handshake proves only that the server holds the key of the
    /// certificate it shows, not which server that is: any impostor on the path receives
    /// every repository credential of every request. Only by an explicit choice.
    InsecureSkipVerify,
    /// No TLS (the repo-server runs with `--disable-tls`).
    Plaintext,
}

impl Default for TlsMode {
    /// Verified against the system's CA certificates.
    fn default() -> Self {
        TlsMode::Verified {
            ca_pem: String::new(),
        }
    }
}

impl TlsMode {
    /// A warning an operator must see when the client is built with this mode: the
    /// transport sends credentials to whoever answers (unverified TLS) or in clear.
    pub fn warning(&self) -> Option<&'static str> {
        match self {
            TlsMode::Verified { .. } => None,
            TlsMode::InsecureSkipVerify => Some(
                "the repo-server's TLS certificate is not verified \
                 (--repo-server-insecure-skip-tls-verify): whoever answers at the repo-server's \
                 address receives every repository credential",
            ),
            TlsMode::Plaintext => Some(
                "the repo-server is spoken to in plain text (--repo-server-plaintext): \
                 repository credentials cross the network in clear",
            ),
        }
    }
}

impl std::fmt::Debug for TlsMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TlsMode::Verified { ca_pem } => {
                write!(f, "Verified(system roots + {} bytes of CA)", ca_pem.len())
            }
            TlsMode::InsecureSkipVerify => f.write_str("InsecureSkipVerify"),
            TlsMode::Plaintext => f.write_str("Plaintext"),
        }
    }
}

/// A client certificate and its key, PEM, for mutual TLS. `Debug` never shows the key.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientIdentity {
    /// The certificate chain, leaf first.
    pub cert_pem: String,
    /// Its private key (PKCS#8, PKCS#1 or SEC1).
    pub key_pem: String,
}

impl std::fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientIdentity")
            .field("cert_pem", &self.cert_pem.len())
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

/// The rustls configuration for `mode` and `identity`; `None` for plain text.
pub(crate) fn client_config(
    mode: &TlsMode,
    identity: Option<&ClientIdentity>,
) -> Result<Option<Arc<ClientConfig>>, ClientError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config_err = |e: rustls::Error| ClientError::Config(format!("TLS: {e}"));
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(config_err)?;
    let builder = match mode {
        TlsMode::Plaintext => return Ok(None),
        TlsMode::InsecureSkipVerify => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyServerCert(provider))),
        TlsMode::Verified { ca_pem } => builder.with_root_certificates(roots(ca_pem)?),
    };
    let mut config = match identity {
        None => builder.with_no_client_auth(),
        Some(id) => {
            let identity_err =
                |e: String| ClientError::Config(format!("TLS client certificate: {e}"));
            let certs = CertificateDer::pem_slice_iter(id.cert_pem.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| identity_err(e.to_string()))?;
            if certs.is_empty() {
                return Err(identity_err("no certificate in the PEM given".into()));
            }
            // The key's own error text is not kept: it could quote the key.
            let key = PrivateKeyDer::from_pem_slice(id.key_pem.as_bytes())
                .map_err(|_| identity_err("the key is not a PEM private key".into()))?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| identity_err(e.to_string()))?
        }
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Some(Arc::new(config)))
}

/// The system's CA certificates (those it cannot read skipped: a missing or unreadable
/// store must not stop a client given its own CA) and those of `ca_pem`; an error when
/// `ca_pem` is not PEM certificates or when no root at all is left.
fn roots(ca_pem: &str) -> Result<RootCertStore, ClientError> {
    let mut roots = RootCertStore::empty();
    let mut given = 0;
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        let cert = cert.map_err(|e| {
            ClientError::Config(format!(
                "TLS: reading the repo-server's CA certificates: {e}"
            ))
        })?;
        roots
            .add(cert)
            .map_err(|e| ClientError::Config(format!("TLS: a repo-server CA certificate: {e}")))?;
        given += 1;
    }
    if given == 0 && !ca_pem.trim().is_empty() {
        return Err(ClientError::Config(
            "TLS: no PEM certificate in the repo-server's CA certificates given".to_owned(),
        ));
    }
    let system = rustls_native_certs::load_native_certs();
    let (added, _) = roots.add_parsable_certificates(system.certs);
    if roots.is_empty() {
        return Err(ClientError::Config(format!(
            "TLS: no CA certificate to verify the repo-server against: none given \
             (--repo-server-ca-cert-path) and none read from the system ({} errors)",
            system.errors.len()
        )));
    }
    tracing::debug!(given, system = added, "repo-server client: CA certificates");
    Ok(roots)
}

/// Accepts any server certificate: Argo CD's default towards its repo-server
/// (`InsecureSkipVerify`). Handshake signatures are still checked against the
/// certificate's key.
#[derive(Debug)]
struct AcceptAnyServerCert(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyServerCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
