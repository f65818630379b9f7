//! A cluster's client stack around a shared rustls configuration ([`super::tls_configs`]).
//!
//! kube builds its default stack (`ClientBuilder::try_from(Config)`) around a rustls
//! configuration it makes itself, and has no way to be handed one. So [`client_builder`]
//! builds the same stack as kube 5's `try_from` and `make_generic_builder`, only with the
//! given `Arc<ClientConfig>`: the proxy (`socks5://`, `http://` and `https://` with basic
//! auth from the URL's user info), the HTTPS connector (HTTP/1, `tls_server_name` as the
//! name verified and sent), the connect/read/write timeouts, kube's base-URI, retry,
//! authentication and extra-header layers (public through `ConfigExt`), and a debug span
//! per request of our own.
//! When kube is upgraded, compare this with its builder again.

use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use hyper::rt::{Read, Write};
use hyper_rustls::ResolveServerName;
use hyper_rustls::{DefaultServerNameResolver, FixedServerNameResolver, HttpsConnector};
use hyper_timeout::TimeoutConnector;
use hyper_util::client::legacy::connect::proxy::{SocksV5, Tunnel};
use hyper_util::client::legacy::connect::{Connection, HttpConnector};
use hyper_util::rt::TokioExecutor;
use kube::Config;
use kube::client::retry::RetryPolicy;
use kube::client::{Body, ClientBuilder, ConfigExt, DynBody, RustlsTlsError};
use rustls::ClientConfig;
use tower::retry::RetryLayer;
use tower::util::BoxService;
use tower::{BoxError, Service, ServiceBuilder, ServiceExt as _};
use tower_http::classify::ServerErrorsFailureClass;
use tower_http::trace::TraceLayer;
use tracing::Span;

/// Idle HTTP connections kept per cluster for its next requests (hyper keeps every one by
/// default). Watches hold their own connections; a connection costs about 16 KiB of heap
/// (hyper's buffers and dispatch channel) and a socket, and the cold start's lists, version
/// check and reachability probe left about 3.7 idle per cluster (`docs/performance.md`, "A
/// `gitops` replica at its full-size share"). One serves the reachability probe and a
/// sync's writes one after another; a burst beyond that opens connections and closes them
/// after.
const IDLE_CONNECTIONS_PER_CLUSTER: usize = 1;

/// How long an idle connection is kept (hyper's and client-go's default is 90 s).
const IDLE_CONNECTION_TIMEOUT: Duration = Duration::from_secs(30);

/// The service of a client [`client_builder`] builds (kube's `GenericService`).
pub(super) type GenericService = BoxService<Request<Body>, Response<Box<DynBody>>, BoxError>;

/// kube's default client stack for `config`, with `tls` as its rustls configuration.
pub(super) fn client_builder(
    config: Config,
    tls: Arc<ClientConfig>,
) -> Result<ClientBuilder<GenericService>, kube::Error> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    match config.proxy_url.clone() {
        Some(proxy) if proxy.scheme_str() == Some("socks5") => {
            generic_builder(SocksV5::new(proxy, http), config, tls)
        }
        Some(proxy) if proxy.scheme_str() == Some("http") => {
            let tunnel = with_proxy_basic_auth(&proxy, Tunnel::new(proxy.clone(), http));
            generic_builder(tunnel, config, tls)
        }
        Some(proxy) if proxy.scheme_str() == Some("https") => {
            // The proxy is reached over TLS with the cluster's own configuration, as kube does.
            let to_proxy = https_connector(&config, tls.clone(), http)?;
            let tunnel = with_proxy_basic_auth(&proxy, Tunnel::new(proxy.clone(), to_proxy));
            generic_builder(tunnel, config, tls)
        }
        Some(proxy) => Err(kube::Error::ProxyProtocolUnsupported {
            proxy_url: Box::new(proxy),
        }),
        None => generic_builder(http, config, tls),
    }
}

/// HTTPS (and plain HTTP) over `connector` with `tls`, verifying and sending the
/// configured `tls_server_name` instead of the URL's host when there is one; HTTP/1 only
/// (no ALPN), as kube's connector.
fn https_connector<H>(
    config: &Config,
    tls: Arc<ClientConfig>,
    connector: H,
) -> Result<HttpsConnector<H>, kube::Error> {
    let resolver: Arc<dyn ResolveServerName + Send + Sync> = match &config.tls_server_name {
        Some(name) => Arc::new(FixedServerNameResolver::new(
            name.clone()
                .try_into()
                .map_err(RustlsTlsError::InvalidServerName)
                .map_err(kube::Error::RustlsTls)?,
        )),
        None => Arc::new(DefaultServerNameResolver::default()),
    };
    Ok(HttpsConnector::new(connector, tls, false, resolver))
}

/// Basic auth to the proxy from the user info of its URL, percent-decoded (kube's
/// `with_proxy_basic_auth`); a value a header cannot carry sends none, as kube.
fn with_proxy_basic_auth<C>(proxy: &http::Uri, tunnel: Tunnel<C>) -> Tunnel<C> {
    use base64::Engine as _;
    let Some((userinfo, _)) = proxy
        .authority()
        .and_then(|authority| authority.as_str().split_once('@'))
    else {
        return tunnel;
    };
    let decoded: Vec<u8> = percent_encoding::percent_decode_str(userinfo).collect();
    let value = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(decoded)
    );
    match http::HeaderValue::from_str(&value) {
        Ok(header) => tunnel.with_auth(header),
        Err(_) => tunnel,
    }
}

/// The stack over `connector` (kube's `make_generic_builder`; the proxy is already in
/// `connector`). No exec plugin here ([`super::tls_configs::tls_key`]), so no expiry.
fn generic_builder<H>(
    connector: H,
    config: Config,
    tls: Arc<ClientConfig>,
) -> Result<ClientBuilder<GenericService>, kube::Error>
where
    H: 'static + Clone + Send + Sync + Service<http::Uri>,
    H::Response: 'static + Connection + Read + Write + Send + Unpin,
    H::Future: 'static + Send,
    H::Error: 'static + Send + Sync + std::error::Error,
{
    let auth_layer = config.auth_layer()?;
    let mut connector = TimeoutConnector::new(https_connector(&config, tls, connector)?);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let executor = TokioExecutor::new();
    let client: hyper_util::client::legacy::Client<_, Body> =
        hyper_util::client::legacy::Builder::new(executor)
            .pool_max_idle_per_host(IDLE_CONNECTIONS_PER_CLUSTER)
            .pool_idle_timeout(IDLE_CONNECTION_TIMEOUT)
            .build(connector);

    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(
            config
                .default_retry
                .then_some(RetryLayer::new(RetryPolicy::server_retry())),
        )
        .option_layer(auth_layer)
        .layer(config.extra_headers_layer()?)
        // One debug span per request, named by method and path; a failed request or a 5xx
        // at debug too (the caller reports what it means for the app or the cluster).
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(|req: &Request<Body>| {
                    tracing::debug_span!("cluster_request", method = %req.method(), path = req.uri().path())
                })
                .on_failure(|failure: ServerErrorsFailureClass, latency: Duration, _: &Span| {
                    tracing::debug!(%failure, ?latency, "cluster request failed")
                }),
        )
        .map_err(BoxError::from)
        .service(client)
        .map_response(|response| {
            response.map(|body| {
                Box::new(http_body_util::BodyExt::map_err(body, BoxError::from)) as Box<DynBody>
            })
        })
        .boxed();
    Ok(ClientBuilder::new(service, config.default_namespace))
}
