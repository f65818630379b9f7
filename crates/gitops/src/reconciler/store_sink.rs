//! Local mode: app statuses in the coordination store ([`StoreStatusSink`]), and the
//! record format readers share ([`StoredAppStatus`], [`read_statuses`]).
//!
//! # Where
//! One record per app at [`status_key`]: `<first segment of the root>-status/<rest of the
//! root>apps/<namespace>/<name>` — root `fleetshard/` gives
//! `fleetshard-status/apps/<namespace>/<name>`. Never under the root itself: every replica
//! lists the whole root on each step of the protocol and waits for changes under it, so
//! statuses there would be read by every replica again and again and would wake every
//! waiter on each write. The first segment changes (not a deeper one) so that the
//! Kubernetes store, which labels and watches records by their key's first segment, keeps
//! them in a scope of their own too. (A fleet whose root is another fleet's status prefix
//! would collide; don't name roots `…-status/`.)
//!
//! # How often
//! A refresh runs every ~3 minutes per app, so 100k apps would mean ~550 writes/s if every
//! refresh wrote. A comparison is written only when it changed in something other than its
//! timestamps (`reconciledAt`, a condition's `lastTransitionTime`), or when the stored one
//! was written a heartbeat ago or more (constructor parameter, [`DEFAULT_HEARTBEAT`]: 10
//! minutes). So in local mode **`reconciledAt` is up to one heartbeat (plus one refresh
//! interval) older than the last refresh**; the content is never older than the last
//! refresh that changed it. An operation is written whenever it differs at all (its phase,
//! message, results or times): operations are rare and each step matters.
//!
//! Reads and writes go through [`Batched`]: while the store is busy, those made at the same
//! time go in one request (etcd: one transaction of up to 64; SQLite: one write
//! transaction), so a takeover's burst of first statuses costs a few hundred requests, not
//! two per moved app. Each write keeps its own compare-and-swap and its own outcome.
//!
//! What was last written per app (content, store version, when) is kept in memory, so the
//! decision costs no read. Writes are compare-and-swap on that version; when another
//! writer got there first (the app moved between replicas, or a refresh and an operation
//! of the app wrote at once) the record is read again, this update merged on top, and the
//! write tried again (up to [`CONFLICT_RETRIES`] times; then the reconciler retries, and an
//! operation's end is kept until it is written). The first write of an app after a start reads the record first and
//! always writes. A record that does not decode is overwritten (with a warning) by its
//! owner's next write. A store error is [`SinkError::Unavailable`]: the reconciler retries
//! with backoff; the app's memory is dropped, since the write may or may not have applied.
//!
//! A condition still present with the same type and message keeps its
//! `lastTransitionTime` from the previous status (Argo CD's meaning: when it appeared).
//!
//! Known limit: if an app moves away and back within a heartbeat and the other replica
//! wrote a different status meanwhile, an unchanged refresh here is not written until the
//! heartbeat (memory says it is already there). Records of deleted apps are not removed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use fleetshard_controller::AppKey;
use fleetshard_coord::store::batched::Batched;
use fleetshard_coord::store::{Entry, Precondition, Store, StoreError};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::history::RevisionHistory;
use super::packed;
use super::status::{
    ComparisonStatus, Condition, OperationState, SinkError, StatusSink, StatusUpdate,
};

/// How old a stored `reconciledAt` may get before an unchanged refresh is written anyway.
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(600);

/// How many times a write that meets another writer's is merged on top of theirs and tried
/// again before the write is reported failed (and retried by the reconciler).
const CONFLICT_RETRIES: u32 = 8;

/// What the store holds for one app (JSON), as the sink writes it and readers read it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredAppStatus {
    /// The last refresh's result, in Argo CD's `status` shape (no `operationState`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<ComparisonStatus>,
    /// The last operation, as Argo CD's `status.operationState`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<OperationState>,
    /// Argo CD's `status.history`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<RevisionHistory>,
}

/// A stored record that is not a [`StoredAppStatus`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("status record {key}: field {field}: {message}")]
pub struct RecordError {
    /// The store key.
    pub key: String,
    /// Where in the record (`comparison.sync.status`; `.` for the record itself).
    pub field: String,
    /// What is wrong there.
    pub message: String,
}

impl StoredAppStatus {
    /// Decodes the record stored at `key`.
    pub fn decode(key: &str, bytes: &[u8]) -> Result<Self, RecordError> {
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let value: Self = serde_path_to_error::deserialize(&mut de).map_err(|e| RecordError {
            key: key.to_owned(),
            field: e.path().to_string(),
            message: e.inner().to_string(),
        })?;
        de.end().map_err(|e| RecordError {
            key: key.to_owned(),
            field: ".".to_owned(),
            message: e.to_string(),
        })?;
        Ok(value)
    }

    /// The JSON bytes stored.
    pub fn encode(&self) -> Vec<u8> {
        // Strings, vectors and options only: serialising cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// Where the status records of the fleet rooted at `root` live (a prefix ending in `/`,
/// never under `root`; see the module docs).
pub fn status_prefix(root: &str) -> String {
    let (first, rest) = root.split_once('/').unwrap_or((root, ""));
    format!("{first}-status/{rest}apps/")
}

/// The key of `app`'s status record.
pub fn status_key(root: &str, app: &AppKey) -> String {
    format!("{}{}", status_prefix(root), app.as_str())
}

/// One record found by [`read_statuses`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredStatusEntry {
    /// `namespace/name`, from the key.
    pub app: String,
    /// The store key.
    pub key: String,
    /// The store version it was read at.
    pub version: u64,
    /// The bytes as stored.
    pub raw: Vec<u8>,
    /// The decoded record, or why it could not be.
    pub status: Result<StoredAppStatus, RecordError>,
}

/// Every status record of the fleet rooted at `root`, in key order (one listing).
pub async fn read_statuses(
    store: &dyn Store,
    root: &str,
) -> Result<Vec<StoredStatusEntry>, StoreError> {
    let prefix = status_prefix(root);
    let listing = store.list(&prefix).await?;
    Ok(listing
        .entries
        .into_iter()
        .map(
            |Entry {
                 key,
                 value,
                 version,
             }| StoredStatusEntry {
                app: key.strip_prefix(&prefix).unwrap_or(&key).to_owned(),
                status: StoredAppStatus::decode(&key, &value),
                key,
                version,
                raw: value,
            },
        )
        .collect())
}

/// What this sink last wrote for an app.
struct Written {
    /// The record as written, encoded and deflated ([`packed::pack`]): 2.5 KiB of JSON per app
    /// at the full-size share, where the decoded record's maps and strings took several
    /// times that; unpacked and decoded again by the next write.
    record: Arc<[u8]>,
    version: u64,
    /// When the stored comparison (its `reconciledAt`) was written by this sink; `None`
    /// when unknown (the record was read, not written here).
    comparison_at: Option<Instant>,
    /// The last write asked for this app, written or not (for forgetting idle apps).
    touched: Instant,
}

struct Memory {
    apps: HashMap<AppKey, Written>,
    last_sweep: Instant,
}

/// Local mode's [`StatusSink`]: one record per app in the coordination store (see the
/// module docs for the key layout and the write policy).
pub struct StoreStatusSink {
    /// Reads and writes combined while the store is busy: a takeover's first statuses
    /// go in batches, not one request each.
    store: Batched,
    prefix: String,
    heartbeat: Duration,
    memory: Mutex<Memory>,
}

impl std::fmt::Debug for StoreStatusSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreStatusSink")
            .field("store", &self.store.store().describe())
            .field("prefix", &self.prefix)
            .field("heartbeat", &self.heartbeat)
            .finish_non_exhaustive()
    }
}

impl StoreStatusSink {
    /// Records statuses of the fleet rooted at `root` (the coordination root, e.g.
    /// `fleetshard/`) in `store`, rewriting an unchanged comparison once it is `heartbeat`
    /// old ([`DEFAULT_HEARTBEAT`] unless there is a reason).
    pub fn new(store: Arc<dyn Store>, root: &str, heartbeat: Duration) -> Self {
        StoreStatusSink {
            store: Batched::new(store),
            prefix: status_prefix(root),
            heartbeat,
            memory: Mutex::new(Memory {
                apps: HashMap::new(),
                last_sweep: Instant::now(),
            }),
        }
    }

    fn memory(&self) -> MutexGuard<'_, Memory> {
        // Each critical section leaves the map consistent: a poisoned lock is still usable.
        self.memory.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Decides from memory whether to skip, write over what memory holds, or read first
    /// (memory holds nothing for the app).
    fn plan(&self, app: &AppKey, update: &StatusUpdate, now: Instant) -> Plan {
        let (bytes, version, comparison_at) = {
            let mut memory = self.memory();
            if now.duration_since(memory.last_sweep) >= self.heartbeat {
                // Apps not written for two heartbeats have moved away or gone: forget them,
                // so that memory follows the apps this replica owns.
                let horizon = self.heartbeat * 2;
                memory
                    .apps
                    .retain(|_, w| now.duration_since(w.touched) < horizon);
                memory.last_sweep = now;
            }
            let Some(w) = memory.apps.get_mut(app) else {
                return Plan::Read;
            };
            w.touched = now;
            (Arc::clone(&w.record), w.version, w.comparison_at)
        };
        // Decoded outside the lock; bytes this sink packed always decode (else: read).
        let Some(record) = packed::unpack(&bytes)
            .and_then(|json| StoredAppStatus::decode(app.as_str(), &json).ok())
        else {
            return Plan::Read;
        };
        let write = match update {
            StatusUpdate::Comparison(c) => match (&record.comparison, comparison_at) {
                (Some(old), Some(at)) => {
                    !same_content(old, c) || now.duration_since(at) >= self.heartbeat
                }
                _ => true,
            },
            StatusUpdate::Operation(o) => record.operation.as_ref() != Some(&**o),
            StatusUpdate::History(h) => record.history != *h,
        };
        if write {
            Plan::Write(Box::new(Base {
                record,
                version: Some(version),
                comparison_at,
            }))
        } else {
            Plan::Skip
        }
    }

    /// Reads the stored record as the base of a write.
    async fn read(&self, app: &AppKey, key: &str) -> Result<Base, SinkError> {
        let entry = self
            .store
            .get(key)
            .await
            .map_err(|e| unavailable(app, key, &e))?;
        Ok(match entry {
            None => Base::default(),
            Some(e) => {
                let record = StoredAppStatus::decode(key, &e.value).unwrap_or_else(|err| {
                    tracing::warn!(app = %app, error = %err, "overwriting an unreadable status record");
                    StoredAppStatus::default()
                });
                Base {
                    record,
                    version: Some(e.version),
                    comparison_at: None,
                }
            }
        })
    }

    fn remember(&self, app: &AppKey, written: Written) {
        let mut memory = self.memory();
        match memory.apps.get(app) {
            // A concurrent write of the same app finished later with a newer version.
            Some(w) if w.version > written.version => {}
            _ => {
                memory.apps.insert(app.clone(), written);
            }
        }
    }

    fn forget(&self, app: &AppKey) {
        self.memory().apps.remove(app);
    }

    async fn write_update(&self, app: &AppKey, update: &StatusUpdate) -> Result<(), SinkError> {
        let now = Instant::now();
        let key = format!("{}{}", self.prefix, app.as_str());
        let mut base = match self.plan(app, update, now) {
            Plan::Skip => return Ok(()),
            Plan::Write(base) => *base,
            Plan::Read => self.read(app, &key).await?,
        };
        let mut conflicts = 0;
        loop {
            let record = merge(&base.record, update);
            let pre = base
                .version
                .map_or(Precondition::Absent, Precondition::Version);
            let encoded = record.encode();
            let kept: Arc<[u8]> = Arc::from(packed::pack(&encoded));
            match self.store.put(&key, encoded, pre).await {
                Ok(version) => {
                    let comparison_at = match update {
                        StatusUpdate::Comparison(_) => Some(now),
                        StatusUpdate::Operation(_) | StatusUpdate::History(_) => base.comparison_at,
                    };
                    self.remember(
                        app,
                        Written {
                            record: kept,
                            version,
                            comparison_at,
                            touched: now,
                        },
                    );
                    return Ok(());
                }
                Err(StoreError::Conflict { .. }) if conflicts < CONFLICT_RETRIES => {
                    // Someone else wrote it (this replica's other pool, or the app's
                    // previous owner): merge this update on top of theirs and try again.
                    conflicts += 1;
                    base = match self.read(app, &key).await {
                        Ok(b) => b,
                        Err(e) => {
                            self.forget(app);
                            return Err(e);
                        }
                    };
                }
                Err(e) => {
                    // The write may or may not have applied: read again next time.
                    self.forget(app);
                    return Err(unavailable(app, &key, &e));
                }
            }
        }
    }
}

/// What a write starts from.
#[derive(Default)]
struct Base {
    record: StoredAppStatus,
    /// `None`: absent.
    version: Option<u64>,
    comparison_at: Option<Instant>,
}

enum Plan {
    Skip,
    Write(Box<Base>),
    Read,
}

impl StatusSink for StoreStatusSink {
    fn write<'a>(
        &'a self,
        app: &'a AppKey,
        update: &'a StatusUpdate,
    ) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(self.write_update(app, update))
    }

    fn last_operation<'a>(
        &'a self,
        app: &'a AppKey,
    ) -> BoxFuture<'a, Result<Option<OperationState>, SinkError>> {
        Box::pin(async move {
            let key = format!("{}{}", self.prefix, app.as_str());
            Ok(self.read(app, &key).await?.record.operation)
        })
    }

    fn history<'a>(
        &'a self,
        app: &'a AppKey,
    ) -> BoxFuture<'a, Result<Vec<RevisionHistory>, SinkError>> {
        Box::pin(async move {
            let key = format!("{}{}", self.prefix, app.as_str());
            Ok(self.read(app, &key).await?.record.history)
        })
    }
}

fn unavailable(app: &AppKey, key: &str, e: &StoreError) -> SinkError {
    SinkError::Unavailable {
        app: app.to_string(),
        message: format!("store key {key}: {e}"),
    }
}

/// Equal but for timestamps (`reconciledAt`, conditions' `lastTransitionTime`).
fn same_content(a: &ComparisonStatus, b: &ComparisonStatus) -> bool {
    a.sync == b.sync
        && a.health == b.health
        && a.resources == b.resources
        && a.conditions.len() == b.conditions.len()
        && a.conditions
            .iter()
            .zip(&b.conditions)
            .all(|(x, y)| x.kind == y.kind && x.message == y.message)
}

/// `base` with `update` applied: the update's half replaced, the other half kept; a
/// condition still there keeps the time it appeared.
fn merge(base: &StoredAppStatus, update: &StatusUpdate) -> StoredAppStatus {
    // Only the halves kept are cloned (a comparison holds every resource of the app).
    match update {
        StatusUpdate::Comparison(c) => {
            let mut c = (**c).clone();
            if let Some(old) = &base.comparison {
                keep_transition_times(&mut c.conditions, &old.conditions);
            }
            super::status::keep_health_transition(&mut c, base.comparison.as_ref());
            super::status::keep_summary(&mut c, base.comparison.as_ref());
            StoredAppStatus {
                comparison: Some(c),
                operation: base.operation.clone(),
                history: base.history.clone(),
            }
        }
        StatusUpdate::Operation(o) => StoredAppStatus {
            comparison: base.comparison.clone(),
            operation: Some((**o).clone()),
            history: base.history.clone(),
        },
        StatusUpdate::History(h) => StoredAppStatus {
            comparison: base.comparison.clone(),
            operation: base.operation.clone(),
            history: h.clone(),
        },
    }
}

fn keep_transition_times(new: &mut [Condition], old: &[Condition]) {
    for c in new {
        if let Some(prev) = old
            .iter()
            .find(|p| p.kind == c.kind && p.message == c.message)
        {
            c.last_transition_time
                .clone_from(&prev.last_transition_time);
        }
    }
}

#[cfg(test)]
mod tests;
