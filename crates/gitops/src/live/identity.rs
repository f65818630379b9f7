//! The cluster this replica runs in, recognised by what it is rather than by how a cluster
//! Secret names it: the project rules guard its control plane
//! ([`fleetshard_manifest::project::ControlPlane`]), so a destination that is this cluster
//! under another name (its API server's IP, a load balancer's name) must be recognised too.
//!
//! The rule, first match wins:
//! 1. the built-in in-cluster entry (id `""`, or the pod's own service account), or a
//!    server that names the in-cluster service (`kubernetes.default.svc` and its variants,
//!    [`ControlPlane::named_in_cluster`]);
//! 2. a server equal to the replica's own API server address (its in-cluster
//!    configuration or kubeconfig, [`ControlPlaneIdentity::from_config`]);
//! 3. a destination whose CA data holds one of the replica's own cluster CA certificates;
//! 4. an API server whose serving certificate the replica's own cluster CA signed: one TLS
//!    handshake to the destination's address, with only that CA trusted and the host name
//!    not checked ([`ControlPlaneIdentity::probe`]), ended once the certificate is seen.
//!
//! A destination the probe cannot settle (it did not answer, it is reached through a
//! proxy) counts as the control plane until a later probe says otherwise: the guard
//! fails closed. A plaintext `http://` server is never this cluster's API server by rule
//! 4. Without an identity (a replica outside any cluster, in local mode) only rule 1
//! applies.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use fleetshard_manifest::project::ControlPlane;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};

use super::ClusterAccess;

/// What the replica knows of the cluster it runs in: its API server's address and its
/// CA certificates.
#[derive(Clone, Default)]
pub struct ControlPlaneIdentity {
    /// The replica's own API server URL, normalised ([`normalize`]).
    server: Option<String>,
    /// The replica's cluster CA certificates (DER).
    ca: Vec<Vec<u8>>,
    /// Verifies a serving certificate against `ca` (`None` without a CA).
    verifier: Option<Arc<WebPkiServerVerifier>>,
}

impl std::fmt::Debug for ControlPlaneIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlaneIdentity")
            .field("server", &self.server)
            .field("ca_certificates", &self.ca.len())
            .finish()
    }
}

/// Whether a destination is the cluster the replica runs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recognition {
    /// It is, for the reason given.
    ControlPlane(String),
    /// It is another cluster.
    Other,
    /// Not settled yet (not probed, or the probe failed for the reason given): treated as
    /// the control plane.
    Unknown(String),
}

impl Recognition {
    /// Whether the guard applies: the control plane, or not known not to be.
    pub fn guarded(&self) -> bool {
        !matches!(self, Recognition::Other)
    }
}

impl ControlPlaneIdentity {
    /// The identity of the cluster `config` reaches (the replica's in-cluster
    /// configuration, or the kubeconfig its inventory uses): its API server address and
    /// its CA certificates.
    pub fn from_config(config: &kube::Config) -> Self {
        let ca = config.root_cert.clone().unwrap_or_default();
        let verifier = verifier_for(&ca);
        ControlPlaneIdentity {
            server: Some(normalize(&config.cluster_url.to_string())),
            ca,
            verifier,
        }
    }

    /// Whether this identity knows the cluster's CA (so rule 4 can be probed).
    pub fn knows_ca(&self) -> bool {
        self.verifier.is_some()
    }

    /// Rules 1–3 (no network): `destination_ca` is the destination's own CA certificates
    /// (DER), when its Secret gives them. `None`: not settled by them.
    pub fn by_settings(
        &self,
        access: &ClusterAccess,
        destination_ca: Option<&[Vec<u8>]>,
    ) -> Option<Recognition> {
        if access.credentials.pod_service_account
            || ControlPlane::named_in_cluster(&access.id, &access.server)
        {
            return Some(Recognition::ControlPlane(
                "the in-cluster destination, by its name".to_owned(),
            ));
        }
        if self
            .server
            .as_deref()
            .is_some_and(|own| own == normalize(&access.server))
        {
            return Some(Recognition::ControlPlane(
                "its server is this replica's own API server address".to_owned(),
            ));
        }
        if destination_ca.is_some_and(|certs| certs.iter().any(|c| self.ca.contains(c))) {
            return Some(Recognition::ControlPlane(
                "its CA data holds this replica's own cluster CA certificate".to_owned(),
            ));
        }
        None
    }

    /// What the rules say without a probe: rules 1–3, else `Unknown` when rule 4 is to
    /// be probed, else `Other`.
    pub fn before_probe(
        &self,
        access: &ClusterAccess,
        destination_ca: Option<&[Vec<u8>]>,
    ) -> Recognition {
        if let Some(r) = self.by_settings(access, destination_ca) {
            return r;
        }
        if self.knows_ca() && !access.server.starts_with("http://") {
            Recognition::Unknown("its API server's certificate is not checked yet".to_owned())
        } else {
            Recognition::Other
        }
    }

    /// Rule 4: one TLS handshake to `access.server` (directly, within `timeout`) trusting
    /// only the replica's cluster CA, the host name unchecked; ended once the server's
    /// certificate is judged. Call it only when [`ControlPlaneIdentity::before_probe`]
    /// said `Unknown`.
    pub async fn probe(&self, access: &ClusterAccess, timeout: Duration) -> Recognition {
        let Some(verifier) = self.verifier.clone() else {
            return Recognition::Other;
        };
        if access.server.starts_with("http://") {
            return Recognition::Other;
        }
        if access.credentials.proxy_url.is_some() {
            return Recognition::Unknown(
                "it is reached through a proxy, so its API server's certificate cannot be \
                 checked directly"
                    .to_owned(),
            );
        }
        let Some((host, port)) = host_and_port(&access.server) else {
            return Recognition::Unknown(format!("no host in server {:?}", access.server));
        };
        let name = access
            .credentials
            .server_name
            .clone()
            .unwrap_or(host.clone());
        let Ok(name) = ServerName::try_from(name) else {
            return Recognition::Unknown(format!("server name of {:?} unusable", access.server));
        };
        let seen = Arc::new(Mutex::new(None));
        let recorder = Recorder {
            inner: verifier,
            seen: Arc::clone(&seen),
        };
        let config = match rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        {
            Ok(builder) => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(recorder))
                .with_no_client_auth(),
            Err(e) => return Recognition::Unknown(e.to_string()),
        };
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let handshake = async {
            let tcp = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
            connector.connect(name, tcp).await.map(drop)
        };
        let outcome = tokio::time::timeout(timeout, handshake).await;
        let judged = *seen.lock().unwrap_or_else(PoisonError::into_inner);
        match (judged, outcome) {
            (Some(true), _) => Recognition::ControlPlane(
                "its API server's certificate is signed by this replica's own cluster CA"
                    .to_owned(),
            ),
            (Some(false), _) => Recognition::Other,
            (None, Err(_)) => Recognition::Unknown(format!("no TLS answer within {timeout:?}")),
            (None, Ok(Err(e))) => Recognition::Unknown(format!("TLS handshake: {e}")),
            (None, Ok(Ok(()))) => Recognition::Unknown("no certificate seen".to_owned()),
        }
    }
}

/// A verifier over `ca` (DER certificates), `None` when none is usable.
fn verifier_for(ca: &[Vec<u8>]) -> Option<Arc<WebPkiServerVerifier>> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in ca {
        // A certificate webpki cannot use as a root simply does not count.
        let _ = roots.add(CertificateDer::from(cert.clone()));
    }
    if roots.is_empty() {
        return None;
    }
    WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    .build()
    .ok()
}

/// A URL compared: lower-case, without a trailing `/`, the default HTTPS port dropped.
fn normalize(url: &str) -> String {
    let url = url.trim().trim_end_matches('/').to_ascii_lowercase();
    match url.strip_suffix(":443") {
        Some(bare) if bare.starts_with("https://") => bare.to_owned(),
        _ => url,
    }
}

/// The host (without IPv6 brackets) and port of an `https://` URL.
fn host_and_port(server: &str) -> Option<(String, u16)> {
    let uri: http::Uri = server.parse().ok()?;
    let host = uri.host()?.trim_start_matches('[').trim_end_matches(']');
    Some((host.to_owned(), uri.port_u16().unwrap_or(443)))
}

/// Judges the serving certificate against the replica's CA, records the verdict, and
/// ends the handshake (nothing is sent to the server).
#[derive(Debug)]
struct Recorder {
    inner: Arc<WebPkiServerVerifier>,
    /// `Some(true)`: the chain leads to the replica's CA (the name aside).
    seen: Arc<Mutex<Option<bool>>>,
}

impl ServerCertVerifier for Recorder {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // webpki checks the chain before the name: a name error means the chain held.
        let chained = match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Ok(_) => true,
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => true,
            Err(_) => false,
        };
        *self.seen.lock().unwrap_or_else(PoisonError::into_inner) = Some(chained);
        Err(rustls::Error::General(
            "control-plane identity probe: certificate judged".to_owned(),
        ))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

impl super::ClusterConnections {
    /// Recognises the cluster this replica runs in by `identity` (without one, only by
    /// the in-cluster destination's names).
    pub fn with_control_plane_identity(mut self, identity: ControlPlaneIdentity) -> Self {
        self.identity = Arc::new(identity);
        self
    }

    /// Whether the project rules guard the control plane of `access`: its started
    /// connection's recognition ([`super::ClusterConn::recognise_control_plane`]), or,
    /// before it is started, the rules that need no connection (unsettled: guarded).
    pub fn is_control_plane(&self, access: &ClusterAccess) -> bool {
        let conn = super::lock(&self.clusters).get(&access.id).cloned();
        match conn {
            Some(conn) if conn.access == *access => conn.recognition().guarded(),
            _ => self.identity.before_probe(access, None).guarded(),
        }
    }
}

impl super::ClusterConn {
    /// Whether this cluster is the one the replica runs in, as last settled.
    pub fn recognition(&self) -> Recognition {
        super::lock(&self.control_plane).clone()
    }

    /// Settles whether this cluster is the one the replica runs in: the rules settled at
    /// connect, else the certificate probe (again at each call while it cannot settle).
    pub async fn recognise_control_plane(&self) -> Recognition {
        let current = self.recognition();
        if !matches!(current, Recognition::Unknown(_)) {
            return current;
        }
        let found = self
            .identity
            .probe(&self.access, self.options.call_timeout)
            .await;
        match &found {
            Recognition::ControlPlane(why) => tracing::info!(
                cluster = %self.access.id,
                server = %self.access.server,
                "the cluster this replica runs in: {why}; its control plane is guarded"
            ),
            Recognition::Unknown(why) => tracing::debug!(
                cluster = %self.access.id,
                server = %self.access.server,
                "not known whether this is the cluster this replica runs in ({why}); its \
                 control plane is guarded"
            ),
            Recognition::Other => {}
        }
        *super::lock(&self.control_plane) = found.clone();
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(id: &str, server: &str) -> ClusterAccess {
        ClusterAccess {
            id: id.to_owned(),
            server: server.to_owned(),
            credentials: Default::default(),
        }
    }

    fn identity(server: &str, ca: &[u8]) -> ControlPlaneIdentity {
        ControlPlaneIdentity {
            server: Some(normalize(server)),
            ca: vec![ca.to_vec()],
            verifier: None,
        }
    }

    #[test]
    fn names_address_and_ca_are_rules_one_to_three() {
        let own = identity("https://10.96.0.1:443/", b"own-ca");
        let guarded = |a: &ClusterAccess, ca: Option<&[Vec<u8>]>| own.by_settings(a, ca);
        assert!(guarded(&access("", "https://x"), None).is_some());
        assert!(guarded(&access("u", "https://kubernetes.default.svc"), None).is_some());
        assert!(guarded(&access("u", "https://10.96.0.1"), None).is_some());
        assert!(guarded(&access("u", "HTTPS://10.96.0.1:443"), None).is_some());
        let ours = [b"other".to_vec(), b"own-ca".to_vec()];
        assert!(guarded(&access("u", "https://192.168.1.10:6443"), Some(&ours)).is_some());
        assert!(guarded(&access("u", "https://192.168.1.10:6443"), None).is_none());
        assert!(guarded(&access("u", "https://10.96.0.2"), Some(&[b"x".to_vec()])).is_none());
        let mut sa = access("u", "https://elsewhere");
        sa.credentials.pod_service_account = true;
        assert!(guarded(&sa, None).is_some());
    }

    #[test]
    fn without_an_identity_only_names_count() {
        let none = ControlPlaneIdentity::default();
        assert_eq!(
            none.before_probe(&access("u", "https://10.96.0.1"), None),
            Recognition::Other
        );
        assert!(
            none.before_probe(&access("", "https://10.96.0.1"), None)
                .guarded()
        );
    }
}
