//! The crate's errors: [`RequestError`] (the request cannot be assembled from the
//! application and settings given) and [`ClientError`] (the call failed). Neither ever
//! carries a credential: messages name fields and paths, and the repo-server's own
//! messages are redacted ([`crate::redact`]) before they are kept.

use std::time::Duration;

/// Why a `GenerateManifest` request could not be assembled. The path names the field in
/// the Application (`spec.source.helm.parameters[1].forceString`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// A field fleetshard does not know: the source is not sent without it (sending it
    /// without the field would render something else than the user asked for).
    #[error(
        "{path}: unknown field; fleetshard does not know it and does not render the source without it"
    )]
    UnknownField {
        /// Where, with the field's name last.
        path: String,
    },
    /// A field of the wrong JSON type.
    #[error("{path}: expected {expected}, found {found}")]
    WrongType {
        /// Where.
        path: String,
        /// The JSON type Argo CD's schema gives the field.
        expected: &'static str,
        /// What the Application has.
        found: &'static str,
    },
    /// A value of the right type that Argo CD would not accept either.
    #[error("{path}: {message}")]
    Invalid {
        /// Where.
        path: String,
        /// What is wrong.
        message: String,
    },
}

/// Why a `GenerateManifest` call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// The client's configuration cannot be used (the address, the CA certificates).
    #[error("repo-server client configuration: {0}")]
    Config(String),
    /// No connection to the repo-server (refused, DNS, TLS handshake, reset).
    #[error("repo-server {addr} unreachable: {message}")]
    Unreachable {
        /// The address dialled.
        addr: String,
        /// The transport's error (never carries a credential: nothing secret is dialled).
        message: String,
    },
    /// No answer within the per-call timeout (`--repo-server-timeout-seconds`).
    #[error("repo-server {addr}: no answer within {}s", after.as_secs_f64())]
    Timeout {
        /// The address.
        addr: String,
        /// The timeout.
        after: Duration,
    },
    /// The repo-server answered with an error status: its message, credentials redacted.
    #[error("repo-server {addr}: {code:?}: {message}")]
    Status {
        /// The address.
        addr: String,
        /// The gRPC status code.
        code: tonic::Code,
        /// The server's message, every credential of the request replaced by `<redacted>`.
        message: String,
    },
    /// The repo-server answered something fleetshard cannot use (a manifest that is not
    /// one JSON object).
    #[error("repo-server {addr}: bad response: {message}")]
    BadResponse {
        /// The address.
        addr: String,
        /// What is wrong, naming the manifest's index.
        message: String,
    },
}
