//! Why a cluster's live state could not be read.

/// Why a cluster's live state could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LiveError {
    /// The cluster's URL or credentials cannot make a client.
    #[error("cluster {cluster}: invalid connection settings: {message}")]
    Config {
        /// The cluster's server URL.
        cluster: String,
        /// What is wrong.
        message: String,
    },
    /// The API server did not answer (refused, timed out, or an error status).
    #[error("cluster {cluster} is unreachable: {message}")]
    Unreachable {
        /// The cluster's server URL.
        cluster: String,
        /// What happened.
        message: String,
    },
    /// The cluster serves no such kind (a missing CRD, a wrong `apiVersion`).
    #[error("cluster {cluster} serves no kind {kind} in {api_version}: {message}")]
    UnknownKind {
        /// The cluster's server URL.
        cluster: String,
        /// The manifest's `apiVersion`.
        api_version: String,
        /// The manifest's `kind`.
        kind: String,
        /// What discovery said.
        message: String,
    },
    /// An object outside the namespaces the cluster Secret lists (`namespaces`), or
    /// cluster-scoped while its `clusterResources` is not true.
    #[error("cluster {cluster}: {message}")]
    NotManaged {
        /// The cluster's server URL.
        cluster: String,
        /// Which object, and what the Secret allows.
        message: String,
    },
    /// A kind's cache did not complete its first list in time.
    #[error("cluster {cluster}: the cache of {kind} is not ready: {message}")]
    NotReady {
        /// The cluster's server URL.
        cluster: String,
        /// The kind.
        kind: String,
        /// The last watch error, or the timeout.
        message: String,
    },
}

/// `e` and its causes: kube's message for a failed connection alone does not say why.
pub(super) fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    for cause in std::iter::successors(e.source(), |c| c.source()) {
        let said = cause.to_string();
        if !text.contains(&said) {
            text = format!("{text}: {said}");
        }
    }
    text
}
