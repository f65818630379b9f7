//! From the etcd client's errors to the store trait's: "may pass, try again"
//! ([`StoreError::Unavailable`]) or "this client cannot use the answer"
//! ([`StoreError::Backend`]).

use etcd_client::Error;
use fleetshard_coord::store::StoreError;
use tonic::Code;

/// What kind of failure an etcd client error is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The server could not be reached, did not answer, or refused for a reason that
    /// passes (no leader, leader changed, overloaded, out of space until compacted). The
    /// operation may or may not have applied.
    Unavailable,
    /// The requested revision was compacted away.
    Compacted,
    /// Anything else: a request etcd refuses (too large, permission), or a bug.
    Backend,
}

/// Classifies an etcd client error.
pub(crate) fn kind(e: &Error) -> Kind {
    match e {
        // The connection failed or broke, or a watch stream ended under us.
        Error::TransportError(_) | Error::IoError(_) | Error::WatchError(_) => Kind::Unavailable,
        Error::GRpcStatus(s) => match s.code() {
            // etcd answers OutOfRange for "mvcc: required revision has been compacted".
            Code::OutOfRange if s.message().contains("compacted") => Kind::Compacted,
            // gRPC's own size limit: the same request will never fit.
            Code::ResourceExhausted if s.message().contains("larger than max") => Kind::Backend,
            // Unknown is what tonic reports for a connection reset mid-call.
            Code::Unavailable
            | Code::DeadlineExceeded
            | Code::Cancelled
            | Code::Unknown
            | Code::Aborted
            | Code::ResourceExhausted => Kind::Unavailable,
            _ => Kind::Backend,
        },
        _ => Kind::Backend,
    }
}

/// The trait's error for `e`, naming the endpoints and what was being done.
pub(crate) fn store_error(e: &Error, endpoints: &str, what: &str) -> StoreError {
    let message = match e {
        // The status's own text is the useful part ("etcdserver: no leader").
        Error::GRpcStatus(s) => {
            let mut text = format!("{endpoints}: {what}: {:?}: {}", s.code(), s.message());
            // A transport failure's status says only "transport error": its causes say
            // which (refused, the handshake failed, …).
            add_causes(&mut text, std::error::Error::source(s));
            text
        }
        other => {
            let mut text = format!("{endpoints}: {what}: {other}");
            add_causes(&mut text, std::error::Error::source(other));
            text
        }
    };
    match kind(e) {
        Kind::Unavailable => StoreError::Unavailable(message),
        Kind::Compacted | Kind::Backend => StoreError::Backend(message),
    }
}

/// Appends `cause` and its own causes to `text`, `: `-separated, skipping any whose text
/// is already there (a transport error's own text is just "transport error"; the causes
/// say which: refused, a certificate not trusted, …).
fn add_causes(text: &mut String, mut cause: Option<&(dyn std::error::Error + 'static)>) {
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: Code, msg: &str) -> Error {
        Error::GRpcStatus(tonic::Status::new(code, msg))
    }

    #[test]
    fn transient_failures_are_unavailable_and_others_backend() {
        for (e, k) in [
            (
                status(Code::Unavailable, "etcdserver: no leader"),
                Kind::Unavailable,
            ),
            (
                status(Code::Unavailable, "etcdserver: request timed out"),
                Kind::Unavailable,
            ),
            (
                status(Code::DeadlineExceeded, "deadline"),
                Kind::Unavailable,
            ),
            (status(Code::Unknown, "transport error"), Kind::Unavailable),
            (
                status(
                    Code::ResourceExhausted,
                    "etcdserver: mvcc: database space exceeded",
                ),
                Kind::Unavailable,
            ),
            (
                status(
                    Code::OutOfRange,
                    "etcdserver: mvcc: required revision has been compacted",
                ),
                Kind::Compacted,
            ),
            (
                status(Code::InvalidArgument, "etcdserver: request is too large"),
                Kind::Backend,
            ),
            (
                status(
                    Code::ResourceExhausted,
                    "grpc: received message larger than max (3 vs. 2)",
                ),
                Kind::Backend,
            ),
            (
                status(Code::PermissionDenied, "etcdserver: permission denied"),
                Kind::Backend,
            ),
            (Error::WatchError("closed".into()), Kind::Unavailable),
            (Error::InvalidArgs("x".into()), Kind::Backend),
        ] {
            assert_eq!(kind(&e), k, "{e}");
        }
    }

    #[test]
    fn messages_name_the_endpoints_the_operation_and_the_cause() {
        let e = store_error(
            &status(Code::Unavailable, "etcdserver: no leader"),
            "etcd://a:1",
            "put k",
        );
        assert_eq!(
            e,
            StoreError::Unavailable("etcd://a:1: put k: Unavailable: etcdserver: no leader".into())
        );
        let e = store_error(
            &status(Code::InvalidArgument, "too large"),
            "etcd://a:1",
            "put k",
        );
        assert!(matches!(e, StoreError::Backend(m) if m.contains("too large")));
    }
}
