//! A fake server's settings, and why starting one can fail.

use std::time::Duration;

use crate::rbac::NamespacedToken;
use crate::registry::{DEFAULT_RESOURCES, ResourceKind};
use crate::tls::TlsOptions;

/// Failures starting the fake or writing its kubeconfig.
#[derive(Debug, thiserror::Error)]
pub enum FakeApiError {
    /// Binding or inspecting the loopback listener failed.
    #[error("fake API server: cannot listen on 127.0.0.1: {0}")]
    Bind(#[source] std::io::Error),
    /// Generating the certificates or the TLS configuration failed.
    #[error("fake API server: TLS: {0}")]
    Tls(String),
    /// Writing the kubeconfig file failed.
    #[error("fake API server: cannot write kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Settings of a fake server.
#[derive(Debug, Clone)]
pub struct FakeConfig {
    /// The kinds served.
    pub resources: Vec<ResourceKind>,
    /// How many events are retained for watches and exact reads; older revisions answer
    /// 410 Expired.
    pub history_limit: usize,
    /// How often watches that allow bookmarks get one.
    pub bookmark_interval: Duration,
    /// The token every request must carry as `Authorization: Bearer TOKEN`; a request
    /// without it, or with another, answers 401 Unauthorized (a `Status`, as the real
    /// server with anonymous access off) before anything else, faults and counters
    /// included. None (the default): no authentication.
    pub bearer_token: Option<String>,
    /// Tokens whose holders reach only some namespaces: a request carrying one may list,
    /// watch and write namespaced kinds only inside those namespaces (and cluster-scoped
    /// kinds only with [`NamespacedToken::cluster_resources`]); anything else that names a
    /// resource, a cluster-wide list or watch included, answers 403 Forbidden worded as
    /// the real authorizer words it. Discovery stays open. Once any is set, every request
    /// needs one of them or [`Self::bearer_token`] (401 otherwise). Empty (the default):
    /// no such tokens.
    pub namespaced_tokens: Vec<NamespacedToken>,
    /// How many write requests [`FakeApiServer::writes`](crate::FakeApiServer::writes) keeps
    /// (the newest).
    pub write_log_limit: usize,
    /// Serve HTTPS with a CA generated for this server (see [`TlsOptions`]); None (the
    /// default): plain HTTP.
    pub tls: Option<TlsOptions>,
}

impl Default for FakeConfig {
    fn default() -> Self {
        Self {
            resources: DEFAULT_RESOURCES.to_vec(),
            history_limit: 10_000,
            bookmark_interval: Duration::from_secs(1),
            bearer_token: None,
            namespaced_tokens: Vec::new(),
            write_log_limit: 100_000,
            tls: None,
        }
    }
}
