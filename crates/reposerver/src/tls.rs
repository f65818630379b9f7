//! The client's transport security, as Argo CD's controller runs it
//! (`reposerver/apiclient/clientset.go`): TLS without certificate verification by default
//! (the repo-server generates a self-signed certificate at start), TLS verified against
//! given roots with strict TLS (`--repo-server-ca-cert-path`, formerly
//! `--repo-server-strict-tls`), or plain text; with TLS, optionally a client certificate
//! for a repo-server that requires mutual TLS (`--repo-server-client-cert-path`).
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
#[derive(Clone, PartialEq, Eq, Default)]
pub enum TlsMode {
    /// TLS, the server's certificate not verified (Argo CD's default: the repo-server's
    /// certificate is self-signed). The handshake still proves the server holds the key
    /// of the certificate it shows; nothing proves which server that is.
    #[default]
    InsecureSkipVerify,
    /// `--repo-server-strict-tls`: TLS, the certificate verified against these PEM roots
    /// and the address's host name.
    Strict {
        /// PEM CA certificates (one or more).
        roots_pem: String,
    },
    /// `--repo-server-plaintext`: no TLS (the repo-server runs with `--disable-tls`).
    Plaintext,
}

impl std::fmt::Debug for TlsMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TlsMode::InsecureSkipVerify => f.write_str("InsecureSkipVerify"),
            TlsMode::Strict { roots_pem } => {
                write!(f, "Strict({} bytes of roots)", roots_pem.len())
            }
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
        TlsMode::Strict { roots_pem } => {
            let mut roots = RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(roots_pem.as_bytes()) {
                let cert = cert.map_err(|e| {
                    ClientError::Config(format!("strict TLS: reading the CA certificates: {e}"))
                })?;
                roots.add(cert).map_err(config_err)?;
            }
            if roots.is_empty() {
                return Err(ClientError::Config(
                    "strict TLS: no CA certificate in the roots given".to_owned(),
                ));
            }
            builder.with_root_certificates(roots)
        }
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
