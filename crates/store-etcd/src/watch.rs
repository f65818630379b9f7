//! [`Store::wait_for_change`](fleetshard_coord::store::Store::wait_for_change) on an etcd
//! watch.

use etcd_client::{WatchOptions, WatchResponse};
use fleetshard_coord::store::StoreError;

use crate::error::{Kind, kind, store_error};
use crate::{EtcdStore, range_of};

/// Resolves with the current revision once something under `prefix` changed after
/// `since` (or `since` was compacted away); see the crate docs.
pub(crate) async fn wait_for_change(
    store: &EtcdStore,
    prefix: &str,
    since: u64,
) -> Result<u64, StoreError> {
    let url = &store.inner.url;
    let start = since
        .checked_add(1)
        .and_then(|s| i64::try_from(s).ok())
        .ok_or_else(|| {
            StoreError::Backend(format!("{url}: watch from revision {since}: out of range"))
        })?;
    let what = format!("watch {prefix:?} from revision {start}");
    let (key, end) = range_of(&store.full_key(prefix));
    let mut watch = store.client().await?.watch_client();
    // Starting at since + 1 replays what happened between the caller's listing and now:
    // nothing is missed however late the watch starts.
    let options = WatchOptions::new()
        .with_range(end)
        .with_start_revision(start);
    let mut stream = store
        .bounded(&what, watch.watch(key, Some(options)))
        .await
        .map_err(|(_, e)| e)?;
    loop {
        let message =
            match tokio::time::timeout(store.inner.options.watch_check, stream.message()).await {
                Ok(message) => message,
                Err(_idle) => {
                    // A frozen or unreachable etcd sends nothing, as an idle one does: tell them
                    // apart with a bounded read (which fails with Unavailable) and keep waiting.
                    store.revision().await?;
                    continue;
                }
            };
        match message {
            Ok(Some(resp)) => {
                store.answered_by(resp.header(), &what)?;
                match outcome(store, &resp, &what)? {
                    Outcome::Changed(revision) => return Ok(revision),
                    // `since` is older than etcd's history: a change may have been missed,
                    // so wake the caller with the current revision and let it re-list.
                    // (etcd 3.4's answer to a compacted start carries no revision.)
                    Outcome::Compacted => return store.revision().await,
                    // Created, or a progress notice: nothing yet.
                    Outcome::Nothing => {}
                }
            }
            Ok(None) => {
                store.reset();
                return Err(StoreError::Unavailable(format!(
                    "{url}: {what}: the watch stream ended"
                )));
            }
            Err(e) => {
                if kind(&e) == Kind::Unavailable {
                    store.reset();
                }
                return Err(store_error(&e, url, &what));
            }
        }
    }
}

/// What one watch response means.
enum Outcome {
    /// Something changed; the revision to return.
    Changed(u64),
    /// The start revision was compacted away.
    Compacted,
    /// Nothing yet (the watch was created, or a progress notice).
    Nothing,
}

fn outcome(store: &EtcdStore, resp: &WatchResponse, what: &str) -> Result<Outcome, StoreError> {
    if resp.compact_revision() > 0 {
        return Ok(Outcome::Compacted);
    }
    if resp.canceled() {
        return Err(StoreError::Backend(format!(
            "{}: {what}: etcd cancelled the watch: {}",
            store.inner.url,
            resp.cancel_reason()
        )));
    }
    let newest = resp
        .events()
        .iter()
        .filter_map(|e| e.kv())
        .map(|kv| kv.mod_revision())
        .max();
    let header = resp.header().map_or(0, |h| h.revision());
    match newest {
        Some(rev) => store
            .header_revision(Some(header.max(rev)), what)
            .map(Outcome::Changed),
        None => Ok(Outcome::Nothing),
    }
}
