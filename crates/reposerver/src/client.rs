//! The repo-server client: one lazily connected HTTP/2 channel (gRPC reconnects by
//! itself), a timeout per attempt, Argo CD's retries, a bound on calls in flight, and
//! typed errors.
//!
//! Retries are Argo CD's client's (`reposerver/apiclient/clientset.go`): up to 3 attempts,
//! 1 s apart, when the repo-server is unreachable or answers `Unavailable` or
//! `ResourceExhausted`; each attempt has the whole timeout; a timeout or any other status
//! is not retried.

use std::error::Error as _;
use std::sync::Arc;
use std::time::Duration;

use http::Uri;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio_rustls::TlsConnector;
use tonic::transport::{Channel, Endpoint};

use crate::error::ClientError;
use crate::proto::repo_server_service_client::RepoServerServiceClient;
use crate::proto::{ManifestRequest, ManifestResponse};
use crate::redact::redact;
use crate::request::secrets;
use crate::response::{Rendered, parse};
use crate::tls::{ClientIdentity, TlsMode, client_config};

/// Argo CD's default repo-server address (`--repo-server`).
pub const DEFAULT_ADDR: &str = "argocd-repo-server:8081";
/// Argo CD's default `--repo-server-timeout-seconds`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// The largest message sent or accepted: Argo CD's `ARGOCD_GRPC_MAX_SIZE_MB` default.
pub const MAX_MESSAGE_BYTES: usize = 100 * 1024 * 1024;
/// Calls in flight at once, by default: the size of the refresh worker pool (20, as Argo
/// CD's status processors), so that a replica asks no more of the repo-server than Argo
/// CD's own controller does, and a multi-source app fanning out its sources cannot take
/// more than that either. Renders are CPU-heavy on a repo-server that Argo CD deploys
/// with one replica and no parallelism limit.
pub const DEFAULT_MAX_CONCURRENT: usize = 20;
/// Attempts per call, as Argo CD's client (`grpc_retry.WithMax(3)`).
pub const DEFAULT_ATTEMPTS: u32 = 3;
/// The wait between attempts, as Argo CD's client (`BackoffLinear(1s)`).
pub const DEFAULT_RETRY_WAIT: Duration = Duration::from_secs(1);

/// How to reach the repo-server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    /// `HOST:PORT`.
    pub addr: String,
    /// Transport security.
    pub tls: TlsMode,
    /// A client certificate, for a repo-server that requires mutual TLS (ignored in plain
    /// text).
    pub client_identity: Option<ClientIdentity>,
    /// How long one attempt may take once it is sent (waiting for a free slot not
    /// counted).
    pub timeout: Duration,
    /// Calls in flight at once; further calls wait for a slot. At least 1.
    pub max_concurrent: usize,
    /// Attempts per call (at least 1); see the module's doc for what is retried.
    pub attempts: u32,
    /// The wait between two attempts.
    pub retry_wait: Duration,
}

impl ClientConfig {
    /// Argo CD's defaults for the server at `addr`, except TLS: verified against the
    /// system's CA certificates ([`TlsMode::default`]).
    pub fn new(addr: &str) -> Self {
        ClientConfig {
            addr: addr.to_owned(),
            tls: TlsMode::default(),
            client_identity: None,
            timeout: DEFAULT_TIMEOUT,
            max_concurrent: DEFAULT_MAX_CONCURRENT,
            attempts: DEFAULT_ATTEMPTS,
            retry_wait: DEFAULT_RETRY_WAIT,
        }
    }
}

/// A connection to one repo-server. Cheap to clone; clones share the channel and the
/// bound on calls in flight.
#[derive(Clone, Debug)]
pub struct RepoServerClient {
    addr: String,
    timeout: Duration,
    attempts: u32,
    retry_wait: Duration,
    slots: Arc<Semaphore>,
    client: RepoServerServiceClient<Channel>,
}

/// A transport failure of the connector, so that it is told apart from a status the
/// server sent.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct ConnectFailed(String);

impl RepoServerClient {
    /// A client for `config`. Nothing is dialled until the first call; must be called
    /// inside a tokio runtime.
    pub fn new(config: &ClientConfig) -> Result<Self, ClientError> {
        if config.attempts == 0 {
            return Err(ClientError::Config("attempts must be at least 1".into()));
        }
        if config.max_concurrent == 0 {
            return Err(ClientError::Config(
                "max_concurrent must be at least 1".into(),
            ));
        }
        let addr = config.addr.trim().to_owned();
        let (host, _) = addr
            .rsplit_once(':')
            .filter(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok())
            .ok_or_else(|| ClientError::Config(format!("address {addr:?} is not HOST:PORT")))?;
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let bad_uri =
            |e: http::uri::InvalidUri| ClientError::Config(format!("address {addr:?}: {e}"));
        let tls = client_config(&config.tls, config.client_identity.as_ref())?;
        if let Some(warning) = config.tls.warning() {
            tracing::warn!(repo_server = %addr, "{warning}");
        }
        let scheme = if tls.is_some() { "https" } else { "http" };
        // The connector does TLS itself, so tonic is given an http:// URI to dial and the
        // real scheme as the requests' origin.
        let endpoint = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| ClientError::Config(format!("address {addr:?}: {e}")))?
            .origin(
                format!("{scheme}://{addr}")
                    .parse::<Uri>()
                    .map_err(bad_uri)?,
            );
        let server_name = rustls::pki_types::ServerName::try_from(host)
            .map_err(|e| ClientError::Config(format!("address {addr:?}: {e}")))?;
        let dial = addr.clone();
        let connector = tower::service_fn(move |_: Uri| {
            let dial = dial.clone();
            let tls = tls.clone();
            let server_name = server_name.clone();
            async move {
                let tcp = TcpStream::connect(&dial)
                    .await
                    .map_err(|e| ConnectFailed(format!("connecting to {dial}: {e}")))?;
                let _ = tcp.set_nodelay(true);
                let io: Box<dyn Io> = match tls {
                    None => Box::new(tcp),
                    Some(tls) => Box::new(
                        TlsConnector::from(tls)
                            .connect(server_name, tcp)
                            .await
                            .map_err(|e| {
                                ConnectFailed(format!("TLS handshake with {dial}: {e}"))
                            })?,
                    ),
                };
                Ok::<_, ConnectFailed>(TokioIo::new(io))
            }
        });
        let channel = endpoint.connect_with_connector_lazy(connector);
        let client = RepoServerServiceClient::new(channel)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        Ok(RepoServerClient {
            addr,
            timeout: config.timeout,
            attempts: config.attempts,
            retry_wait: config.retry_wait,
            slots: Arc::new(Semaphore::new(config.max_concurrent)),
            client,
        })
    }

    /// The address this client dials.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Calls `GenerateManifest` with `request` (see [`crate::build_request`]): waits for a
    /// free slot, then makes up to the configured attempts, each bounded by the timeout.
    pub async fn generate_manifest(
        &self,
        request: ManifestRequest,
    ) -> Result<Rendered, ClientError> {
        let secrets = secrets(&request);
        let _slot = self
            .slots
            .acquire()
            .await
            .map_err(|_| ClientError::Config("the client was closed".into()))?;
        let mut attempt = 1;
        let response = loop {
            match self.attempt(request.clone(), &secrets).await {
                Ok(response) => break response,
                Err(e) if attempt < self.attempts && retried(&e) => {
                    tracing::debug!(attempt, error = %e, "repo-server call retried");
                    attempt += 1;
                    tokio::time::sleep(self.retry_wait).await;
                }
                Err(e) => return Err(e),
            }
        };
        parse(response).map_err(|message| ClientError::BadResponse {
            addr: self.addr.clone(),
            message: redact(&message, &secrets),
        })
    }

    /// One attempt, bounded by the timeout.
    async fn attempt(
        &self,
        request: ManifestRequest,
        secrets: &[String],
    ) -> Result<ManifestResponse, ClientError> {
        let mut client = self.client.clone();
        match tokio::time::timeout(self.timeout, client.generate_manifest(request)).await {
            Err(_) => Err(ClientError::Timeout {
                addr: self.addr.clone(),
                after: self.timeout,
            }),
            Ok(Err(status)) => Err(self.status_error(&status, secrets)),
            Ok(Ok(response)) => Ok(response.into_inner()),
        }
    }

    /// A status made here (it has a source: the connection failed) is `Unreachable`; one
    /// the server sent is `Status`.
    fn status_error(&self, status: &tonic::Status, secrets: &[String]) -> ClientError {
        match status.source() {
            Some(source) => {
                let mut parts = vec![status.message().to_owned()];
                let mut next: Option<&(dyn std::error::Error + 'static)> = Some(source);
                while let Some(e) = next {
                    let text = e.to_string();
                    if !parts.iter().any(|p| p.contains(&text)) {
                        parts.push(text);
                    }
                    next = e.source();
                }
                ClientError::Unreachable {
                    addr: self.addr.clone(),
                    message: redact(&parts.join(": "), secrets),
                }
            }
            None => ClientError::Status {
                addr: self.addr.clone(),
                code: status.code(),
                message: redact(status.message(), secrets),
            },
        }
    }
}

/// Whether Argo CD's client retries after `e`.
fn retried(e: &ClientError) -> bool {
    match e {
        ClientError::Unreachable { .. } => true,
        ClientError::Status { code, .. } => {
            matches!(
                code,
                tonic::Code::Unavailable | tonic::Code::ResourceExhausted
            )
        }
        _ => false,
    }
}

/// A connection, plain or TLS.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> Io for T {}
