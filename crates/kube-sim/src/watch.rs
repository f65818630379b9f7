//! Watch streams: newline-delimited JSON events (`ADDED`, `MODIFIED`, `DELETED`,
//! `BOOKMARK`, `ERROR`) from a resourceVersion, filtered by namespace and selectors.
//!
//! - `resourceVersion` "" or "0" (or `sendInitialEvents=true`): synthetic ADDED for the
//!   current state, then changes; with `sendInitialEvents` the initial events end with a
//!   BOOKMARK annotated `k8s.io/initial-events-end: "true"`;
//! - `resourceVersion` N: exactly the events with revision > N, in order; if history
//!   after N was dropped, one ERROR event with a 410 Expired `Status`, then the end;
//! - selectors see transitions as a real server shows them: an object that starts
//!   matching arrives as ADDED, one that stops matching as DELETED;
//! - bookmarks (with `allowWatchBookmarks=true`) every bookmark interval and on request,
//!   carrying only `metadata.resourceVersion`: every event up to it has been sent.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use futures::Stream;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::faults::RequestInfo;
use super::registry::ResourceKind;
use super::selectors::{FieldSelector, LabelSelector};
use super::state::Shared;
use super::status::ApiError;
use super::store::EventType;

/// What a watch request asked for.
#[derive(Debug, Clone)]
pub struct WatchRequest {
    /// The resource.
    pub kind: ResourceKind,
    /// Only this namespace (None = all).
    pub namespace: Option<String>,
    /// `resourceVersion` ("" when absent).
    pub resource_version: String,
    /// `allowWatchBookmarks`.
    pub bookmarks: bool,
    /// `sendInitialEvents`.
    pub send_initial_events: bool,
    /// `timeoutSeconds`.
    pub timeout: Option<Duration>,
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
    /// The request, for partitions that stall open streams.
    pub info: RequestInfo,
}

impl WatchRequest {
    fn matches(&self, obj: &Value) -> bool {
        self.labels.matches(obj) && self.fields.matches(obj)
    }
}

fn line(ty: &str, object: &Value) -> Bytes {
    let mut s = serde_json::to_vec(&json!({"type": ty, "object": object}))
        .unwrap_or_else(|_| b"{}".to_vec());
    s.push(b'\n');
    Bytes::from(s)
}

fn bookmark(kind: &ResourceKind, rv: u64, initial_end: bool) -> Bytes {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    line(
        "BOOKMARK",
        &json!({"kind": kind.kind, "apiVersion": kind.api_version(), "metadata": meta}),
    )
}

/// Starts a watch; the stream ends at `timeoutSeconds`, on an ERROR, when the server
/// shuts down or closes watches, or when the client goes away.
pub fn start(
    shared: Arc<Shared>,
    req: WatchRequest,
) -> Result<impl Stream<Item = Result<Bytes, Infallible>> + Send + 'static, ApiError> {
    let res = (req.kind.group, req.kind.plural);
    let initial_rv = match req.resource_version.as_str() {
        "" | "0" => None,
        s => Some(
            s.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version {s:?}")))?,
        ),
    };
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    // Subscribe before reading the store so no write between the read and the loop is
    // missed.
    let mut revision = shared.revision.subscribe();
    let mut bookmark_now = shared.bookmark_now.subscribe();
    let mut close = shared.close_watches.subscribe();
    let mut shutdown = shared.shutdown.subscribe();
    let mut interval_rx = shared.bookmark_interval.subscribe();
    let mut initial = Vec::new();
    let mut position = {
        let store = shared.read();
        match initial_rv {
            Some(rv) if !req.send_initial_events => {
                if let Err(e) = store.check_retained(rv) {
                    initial.push(line("ERROR", &e.to_status()));
                    u64::MAX
                } else {
                    rv
                }
            }
            _ => {
                for (_, obj) in store.objects_of(res, req.namespace.as_deref()) {
                    if req.matches(obj) {
                        initial.push(line("ADDED", obj));
                    }
                }
                if req.send_initial_events {
                    initial.push(bookmark(&req.kind, store.revision(), true));
                }
                store.revision()
            }
        }
    };
    tokio::spawn(async move {
        if !send_all(&tx, initial).await || position == u64::MAX {
            return; // closed, or expired: the ERROR was the whole answer
        }
        // A watch from a revision gets the retained events after it at once, as a real
        // server sends them, not at the next write or bookmark (a client resuming after
        // its stream ended would otherwise miss every change made meanwhile until then).
        if !send_news(&shared, &req, &mut position, &tx).await {
            return;
        }
        let deadline = req.timeout.map(|t| tokio::time::Instant::now() + t);
        let mut next_bookmark =
            tokio::time::Instant::now() + every(*interval_rx.borrow_and_update());
        loop {
            let mut send_bookmark = false;
            tokio::select! {
                r = revision.changed() => if r.is_err() { return },
                _ = bookmark_now.changed() => send_bookmark = true,
                _ = interval_rx.changed() => {
                    next_bookmark = tokio::time::Instant::now() + every(*interval_rx.borrow_and_update());
                    continue;
                }
                _ = tokio::time::sleep_until(next_bookmark) => {
                    send_bookmark = true;
                    next_bookmark = tokio::time::Instant::now() + every(*interval_rx.borrow());
                }
                _ = close.changed() => return,
                _ = shutdown.changed() => return,
                _ = sleep_until_opt(deadline) => return,
                _ = tx.closed() => return,
            }
            shared.faults.wait_if_partitioned(&req.info).await;
            if !send_news(&shared, &req, &mut position, &tx).await {
                return;
            }
            if send_bookmark
                && req.bookmarks
                && tx.send(bookmark(&req.kind, position, false)).await.is_err()
            {
                return;
            }
        }
    });
    Ok(futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok(b), rx))
    }))
}

/// The bookmark period, at least 1 ms so a zero interval cannot spin.
fn every(interval: Duration) -> Duration {
    interval.max(Duration::from_millis(1))
}

async fn sleep_until_opt(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// The lines for every retained event after `position` that this watch sees; advances
/// `position` to the current revision. An expired position yields one ERROR.
/// Sends `lines` in order; false once the client is gone.
async fn send_all(tx: &mpsc::Sender<Bytes>, lines: Vec<Bytes>) -> bool {
    for b in lines {
        if tx.send(b).await.is_err() {
            return false;
        }
    }
    true
}

/// Sends what happened after `position` ([`drain`]); false when the watch is over (the
/// client is gone, or the position expired and an ERROR was sent).
async fn send_news(
    shared: &Shared,
    req: &WatchRequest,
    position: &mut u64,
    tx: &mpsc::Sender<Bytes>,
) -> bool {
    let (lines, expired) = drain(shared, req, position);
    send_all(tx, lines).await && !expired
}

fn drain(shared: &Shared, req: &WatchRequest, position: &mut u64) -> (Vec<Bytes>, bool) {
    let store = shared.read();
    if let Err(e) = store.check_retained(*position) {
        return (vec![line("ERROR", &e.to_status())], true);
    }
    let mut out = Vec::new();
    for e in store.events_after(*position) {
        if e.key.res != (req.kind.group, req.kind.plural)
            || req
                .namespace
                .as_deref()
                .is_some_and(|ns| ns != e.key.namespace)
        {
            continue;
        }
        let now = req.matches(&e.object);
        let before = e.prev.as_deref().is_some_and(|p| req.matches(p));
        let ty = match e.ty {
            EventType::Added if now => Some("ADDED"),
            EventType::Modified if now && before => Some("MODIFIED"),
            EventType::Modified if now => Some("ADDED"),
            EventType::Modified if before => Some("DELETED"),
            EventType::Deleted if before || now => Some("DELETED"),
            _ => None,
        };
        if let Some(ty) = ty {
            out.push(line(ty, &e.object));
        }
    }
    // Never move back: a watch from a revision ahead of the store waits for it.
    *position = (*position).max(store.revision());
    (out, false)
}
