//! Optional futures for `tokio::select!` loops — the runners', and every other crate's that
//! knows coord: a branch whose future may be absent waits forever instead of being
//! disabled by hand.

use futures::future::BoxFuture;
use tokio::time::Instant;

/// Sleeps until `at`, or forever when there is no deadline.
pub async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Awaits the future in `f`, or waits forever when there is none. The caller clears `f`
/// once it resolved.
pub(crate) async fn poll_opt<T>(f: &mut Option<BoxFuture<'static, T>>) -> T {
    match f {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}
