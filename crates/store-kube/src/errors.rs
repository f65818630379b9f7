//! How API-server answers become [`StoreError`]s, and the time bound on every call.

use std::future::Future;
use std::time::Duration;

use fleetshard_coord::store::StoreError;

/// One API call's failure, before the caller decides what a 404 or 409 means for it.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The API server answered with a `Status` (its HTTP code and reason).
    #[error("{what}: {code} {reason}: {message}")]
    Status {
        /// What was being done (`replace ConfigMap fleetshard.assignment`).
        what: String,
        /// HTTP status code.
        code: u16,
        /// `Status.reason` (`Conflict`, `AlreadyExists`, `NotFound`, `Expired`…).
        reason: String,
        /// `Status.message`.
        message: String,
    },
    /// No answer within the call timeout.
    #[error("{what}: no answer within {timeout:?}")]
    Timeout {
        /// What was being done.
        what: String,
        /// The bound.
        timeout: Duration,
    },
    /// The connection failed, or the client could not be built or send the request.
    #[error("{what}: {source}")]
    Client {
        /// What was being done.
        what: String,
        /// kube's error.
        source: kube::Error,
    },
}

impl CallError {
    /// The HTTP status code, if the server answered with one.
    pub fn code(&self) -> Option<u16> {
        match self {
            CallError::Status { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Whether this is a 409 (AlreadyExists or a resourceVersion Conflict).
    pub fn is_conflict(&self) -> bool {
        self.code() == Some(409)
    }

    /// Whether this is a 404.
    pub fn is_not_found(&self) -> bool {
        self.code() == Some(404)
    }

    /// The [`StoreError`] for a failure the caller gives no special meaning. Server-side
    /// trouble (5xx, 429) and transport failures are `Unavailable` (the operation may or
    /// may not have applied; retrying later may work); refusals (403, 422, …) are
    /// `Backend`: retrying will not help.
    pub fn into_store(self, key: &str) -> StoreError {
        match &self {
            CallError::Status { code, .. } if *code == 409 => StoreError::Conflict {
                key: key.to_owned(),
            },
            CallError::Status { code, .. } if *code >= 500 || *code == 429 => {
                StoreError::Unavailable(format!("key {key:?}: {self}"))
            }
            CallError::Status { .. } => StoreError::Backend(format!("key {key:?}: {self}")),
            CallError::Timeout { .. } => StoreError::Unavailable(format!("key {key:?}: {self}")),
            CallError::Client { source, .. } => match source {
                kube::Error::SerdeError(_) | kube::Error::BuildRequest(_) => {
                    StoreError::Backend(format!("key {key:?}: {self}"))
                }
                _ => StoreError::Unavailable(format!("key {key:?}: {self}")),
            },
        }
    }
}

/// Runs one API call with a time bound, naming it in any error.
pub async fn call<T>(
    what: impl FnOnce() -> String,
    timeout: Duration,
    fut: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, CallError> {
    match tokio::time::timeout(timeout, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(kube::Error::Api(status))) => Err(CallError::Status {
            what: what(),
            code: status.code,
            reason: status.reason.clone(),
            message: status.message.clone(),
        }),
        Ok(Err(source)) => Err(CallError::Client {
            what: what(),
            source,
        }),
        Err(_) => Err(CallError::Timeout {
            what: what(),
            timeout,
        }),
    }
}

/// Parses a `resourceVersion` as the store revision it is.
pub fn parse_version(rv: Option<&str>, object: &str) -> Result<u64, StoreError> {
    let rv = rv.ok_or_else(|| {
        StoreError::Backend(format!(
            "{object}: the API server sent no metadata.resourceVersion"
        ))
    })?;
    rv.parse().map_err(|_| {
        StoreError::Backend(format!(
            "{object}: metadata.resourceVersion {rv:?} is not a number; this store needs an API \
             server whose resourceVersions are etcd revisions"
        ))
    })
}
