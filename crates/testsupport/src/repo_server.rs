//! A fake of Argo CD's repo-server: `repository.RepoServerService/GenerateManifest` over
//! real gRPC (HTTP/2) on 127.0.0.1, in plain text or TLS (a CA generated per server, ALPN
//! `h2` required as gRPC servers require it; optionally a client certificate required). It decodes every request by field number
//! ([`wire`]), never through generated types, records it, and answers from a scripted
//! table: by `appName` (field 5), else the default answer — rendered manifests with a
//! revision and source type, or an error status, each after an optional delay (a
//! `tokio::time::sleep`, so tests run it under paused time).

pub mod wire;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf as _, BufMut as _};
use futures::future::BoxFuture;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tonic::body::Body;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::server::{Grpc, NamedService, UnaryService};
use tonic::transport::server::Connected;
use tonic::{Request, Response, Status};

/// A gRPC status code, for scripting [`Answer::Error`].
pub use tonic::Code;

use wire::{WireMessage, WireWriter};

/// The method's path.
pub const GENERATE_MANIFEST: &str = "/repository.RepoServerService/GenerateManifest";

/// What the fake answers one request with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// A rendered source: `manifests` (1), `revision` (4), `sourceType` (6).
    Rendered {
        /// One JSON document each.
        manifests: Vec<String>,
        /// The resolved revision.
        revision: String,
        /// `Helm`, `Kustomize`, `Directory`, `Plugin`.
        source_type: String,
    },
    /// An error status.
    Error {
        /// Its code.
        code: Code,
        /// Its message.
        message: String,
    },
}

impl Answer {
    /// Rendered manifests.
    pub fn rendered(manifests: &[&str], revision: &str, source_type: &str) -> Self {
        Answer::Rendered {
            manifests: manifests.iter().map(|m| (*m).to_owned()).collect(),
            revision: revision.to_owned(),
            source_type: source_type.to_owned(),
        }
    }
}

/// An answer and how long to wait before giving it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scripted {
    /// The answer.
    pub answer: Answer,
    /// Waited (tokio time) before answering.
    pub delay: Duration,
}

/// Whether the fake speaks TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Plain-text HTTP/2 (`--disable-tls`).
    Plaintext,
    /// TLS with a certificate for 127.0.0.1 and localhost signed by a CA of its own.
    Tls,
    /// As `Tls`, and every client must present a certificate signed by that CA
    /// ([`FakeRepoServer::client_identity`]).
    MutualTls,
    /// TLS with a self-signed certificate for 127.0.0.1 and localhost (not a CA
    /// certificate), as `kubectl create secret tls` with a self-signed pair gives Argo CD's
    /// repo-server; [`FakeRepoServer::ca_pem`] is that certificate.
    SelfSignedTls,
}

/// Why the fake did not start.
#[derive(Debug, thiserror::Error)]
pub enum FakeRepoServerError {
    /// Binding the port.
    #[error("fake repo-server: {0}")]
    Io(#[from] std::io::Error),
    /// Generating certificates or configuring TLS.
    #[error("fake repo-server TLS: {0}")]
    Tls(String),
}

#[derive(Default)]
struct State {
    requests: Vec<Vec<u8>>,
    /// Per app: the answers in order, the last one repeated.
    by_app: BTreeMap<String, (Vec<Scripted>, usize)>,
    default: Option<Scripted>,
}

struct Shared {
    state: Mutex<State>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A running fake; stops when dropped.
pub struct FakeRepoServer {
    addr: SocketAddr,
    tls: Option<fleetshard_kube_sim::TlsMaterial>,
    shared: Arc<Shared>,
    _stop: oneshot::Sender<()>,
}

impl FakeRepoServer {
    /// Starts a fake on a free port of 127.0.0.1. With nothing scripted, every request
    /// gets an empty `Directory` render at revision `0000000`; any other method,
    /// `Unimplemented`.
    pub async fn start(transport: Transport) -> Result<Self, FakeRepoServerError> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
        });
        let (stop, stopped) = oneshot::channel::<()>();
        let (conns, tls) = match transport {
            Transport::Plaintext => (accept(listener, None), None),
            Transport::Tls | Transport::MutualTls => {
                let mutual = transport == Transport::MutualTls;
                let (acceptor, material) = tls_acceptor(addr, mutual)?;
                (accept(listener, Some(acceptor)), Some(material))
            }
            Transport::SelfSignedTls => {
                let (acceptor, material) = self_signed_acceptor()?;
                (accept(listener, Some(acceptor)), Some(material))
            }
        };
        let service = FakeService(shared.clone());
        let incoming = futures::stream::unfold(conns, |mut rx| async move {
            rx.recv().await.map(|c| (Ok::<_, std::io::Error>(c), rx))
        });
        tokio::spawn(async move {
            let served = tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = stopped.await;
                })
                .await;
            if let Err(e) = served {
                tracing::debug!(error = %e, "fake repo-server stopped");
            }
        });
        Ok(FakeRepoServer {
            addr,
            tls,
            shared,
            _stop: stop,
        })
    }

    /// `127.0.0.1:PORT`, as `--repo-server` takes it.
    pub fn addr(&self) -> String {
        self.addr.to_string()
    }

    /// The PEM CA that signed a TLS fake's certificate (for strict TLS).
    pub fn ca_pem(&self) -> Option<&str> {
        self.tls.as_ref().map(|t| t.ca_pem.as_str())
    }

    /// A client certificate and key (PEM) signed by a TLS fake's CA: what a
    /// [`Transport::MutualTls`] fake accepts.
    pub fn client_identity(&self) -> Option<(&str, &str)> {
        self.tls
            .as_ref()
            .map(|t| (t.client_cert_pem.as_str(), t.client_key_pem.as_str()))
    }

    /// Answers every request without an answer of its own with `answer` after `delay`.
    pub fn answer_all(&self, answer: Answer, delay: Duration) {
        self.shared.lock().default = Some(Scripted { answer, delay });
    }

    /// Answers requests whose `appName` (field 5) is `app` with `answer` after `delay`.
    pub fn answer_app(&self, app: &str, answer: Answer, delay: Duration) {
        self.answer_app_in_turn(app, vec![Scripted { answer, delay }]);
    }

    /// Answers the requests of `app` with `answers` in turn, the last one from then on
    /// (an empty list removes the app's answers).
    pub fn answer_app_in_turn(&self, app: &str, answers: Vec<Scripted>) {
        let mut state = self.shared.lock();
        if answers.is_empty() {
            state.by_app.remove(app);
        } else {
            state.by_app.insert(app.to_owned(), (answers, 0));
        }
    }

    /// Every request received so far, decoded by field number, in arrival order.
    pub fn requests(&self) -> Vec<WireMessage> {
        self.shared
            .lock()
            .requests
            .iter()
            .filter_map(|b| WireMessage::decode(b).ok())
            .collect()
    }

    /// The raw bytes of every request received so far.
    pub fn raw_requests(&self) -> Vec<Vec<u8>> {
        self.shared.lock().requests.clone()
    }

    /// The most requests ever being answered at once.
    pub fn max_in_flight(&self) -> usize {
        self.shared.max_in_flight.load(Ordering::SeqCst)
    }
}

/// A served connection (TCP or TLS).
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> Io for T {}

impl Connected for Box<dyn Io> {
    type ConnectInfo = ();
    fn connect_info(&self) -> Self::ConnectInfo {}
}

type Conns = mpsc::Receiver<Box<dyn Io>>;

/// Hands out `listener`'s connections, through TLS when `acceptor` is given (each
/// handshake in a task of its own; one that fails or lacks ALPN `h2` is dropped, as gRPC
/// servers drop a TLS client that did not ask for HTTP/2).
fn accept(listener: TcpListener, acceptor: Option<tokio_rustls::TlsAcceptor>) -> Conns {
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        loop {
            let conn = tokio::select! {
                c = listener.accept() => c,
                () = tx.closed() => return,
            };
            let Ok((tcp, peer)) = conn else { continue };
            let (acceptor, tx) = (acceptor.clone(), tx.clone());
            tokio::spawn(async move {
                let conn: Box<dyn Io> = match acceptor {
                    None => Box::new(tcp),
                    Some(acceptor) => match acceptor.accept(tcp).await {
                        Ok(tls) if tls.get_ref().1.alpn_protocol() == Some(b"h2") => Box::new(tls),
                        Ok(_) => return tracing::debug!(%peer, "fake repo-server: no ALPN h2"),
                        Err(e) => {
                            return tracing::debug!(%peer, error = %e, "fake repo-server: TLS failed");
                        }
                    },
                };
                let _ = tx.send(conn).await;
            });
        }
    });
    rx
}

/// A TLS acceptor with a certificate for 127.0.0.1 signed by a CA generated for the
/// server at `addr`, requiring a client certificate of that CA when `mutual`; and the CA,
/// client certificate and key.
fn tls_acceptor(
    addr: SocketAddr,
    mutual: bool,
) -> Result<(tokio_rustls::TlsAcceptor, fleetshard_kube_sim::TlsMaterial), FakeRepoServerError> {
    let tls_err = |e: String| FakeRepoServerError::Tls(e);
    let pki =
        fleetshard_kube_sim::generate_pki(&format!("fleetshard fake repo-server CA for {addr}"))
            .map_err(|e| tls_err(e.to_string()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_err(e.to_string()))?;
    let builder = if mutual {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(pki.ca_cert).map_err(|e| tls_err(e.to_string()))?;
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| tls_err(e.to_string()))?;
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let mut config = builder
        .with_single_cert(vec![pki.server_cert], pki.server_key.into())
        .map_err(|e| tls_err(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok((
        tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        pki.material,
    ))
}

/// A TLS acceptor with a self-signed server certificate for 127.0.0.1 and localhost; the
/// material's `ca_pem` is that certificate (no client certificate).
fn self_signed_acceptor()
-> Result<(tokio_rustls::TlsAcceptor, fleetshard_kube_sim::TlsMaterial), FakeRepoServerError> {
    let tls_err = |e: String| FakeRepoServerError::Tls(e);
    let key = rcgen::KeyPair::generate().map_err(|e| tls_err(e.to_string()))?;
    let mut params = rcgen::CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()])
        .map_err(|e| tls_err(e.to_string()))?;
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params
        .self_signed(&key)
        .map_err(|e| tls_err(e.to_string()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let key_der = rustls::pki_types::PrivatePkcs8KeyDer::from(key.serialize_der());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_err(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], key_der.into())
        .map_err(|e| tls_err(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok((
        tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        fleetshard_kube_sim::TlsMaterial {
            ca_pem: cert.pem(),
            client_cert_pem: String::new(),
            client_key_pem: String::new(),
        },
    ))
}

/// The gRPC service: routes the one method, answers `Unimplemented` to any other.
#[derive(Clone)]
struct FakeService(Arc<Shared>);

impl NamedService for FakeService {
    const NAME: &'static str = "repository.RepoServerService";
}

impl tower::Service<http::Request<Body>> for FakeService {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let shared = self.0.clone();
        Box::pin(async move {
            if req.uri().path() != GENERATE_MANIFEST {
                return Ok(Status::unimplemented(req.uri().path().to_owned()).into_http());
            }
            let mut grpc = Grpc::new(RawCodec);
            Ok(grpc.unary(Generate(shared), req).await)
        })
    }
}

struct Generate(Arc<Shared>);

impl UnaryService<Vec<u8>> for Generate {
    type Response = Vec<u8>;
    type Future = BoxFuture<'static, Result<Response<Vec<u8>>, Status>>;

    fn call(&mut self, request: Request<Vec<u8>>) -> Self::Future {
        let shared = self.0.clone();
        Box::pin(async move {
            let bytes = request.into_inner();
            let decoded =
                WireMessage::decode(&bytes).map_err(|e| Status::invalid_argument(e.to_string()))?;
            let app = decoded.str_or_empty(5);
            let scripted = {
                let mut state = shared.lock();
                state.requests.push(bytes);
                match state.by_app.get_mut(&app) {
                    Some((answers, next)) => {
                        let answer = answers.get(*next).or(answers.last()).cloned();
                        *next += 1;
                        answer
                    }
                    None => state.default.clone(),
                }
            };
            let now = shared.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            shared.max_in_flight.fetch_max(now, Ordering::SeqCst);
            let scripted = scripted.unwrap_or(Scripted {
                answer: Answer::rendered(&[], "0000000", "Directory"),
                delay: Duration::ZERO,
            });
            if !scripted.delay.is_zero() {
                tokio::time::sleep(scripted.delay).await;
            }
            shared.in_flight.fetch_sub(1, Ordering::SeqCst);
            match scripted.answer {
                Answer::Error { code, message } => Err(Status::new(code, message)),
                Answer::Rendered {
                    manifests,
                    revision,
                    source_type,
                } => {
                    let mut w = WireWriter::default();
                    for m in &manifests {
                        w.bytes(1, m.as_bytes());
                    }
                    w.string(4, &revision).string(6, &source_type);
                    Ok(Response::new(w.finish()))
                }
            }
        })
    }
}

/// Passes message bytes through untouched.
#[derive(Debug, Clone, Copy, Default)]
struct RawCodec;

impl Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawCodec;
    type Decoder = RawCodec;

    fn encoder(&mut self) -> Self::Encoder {
        RawCodec
    }

    fn decoder(&mut self) -> Self::Decoder {
        RawCodec
    }
}

impl Encoder for RawCodec {
    type Item = Vec<u8>;
    type Error = Status;

    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for RawCodec {
    type Item = Vec<u8>;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, Status> {
        let mut out = vec![0; src.remaining()];
        src.copy_to_slice(&mut out);
        Ok(Some(out))
    }
}
