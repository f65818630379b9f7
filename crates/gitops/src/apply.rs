//! Sync: server-side apply of an application's desired objects (field manager
//! [`FIELD_MANAGER`], forced; the reconciler has stamped them as the app's, as argocd-cm's
//! tracking method says: [`Tracking::stamp`](crate::compare::Tracking::stamp)), then, only when asked,
//! deletion of the live objects it tracks that Git no longer has (prune).
//!
//! Before every write the caller's [`LeaseCheck`] is asked; once it says no, the
//! operation stops at once and nothing more reaches the cluster (a replica whose shard
//! lease lapsed may already have a successor writing to the same cluster). Every write also
//! carries a deadline no later than the lease deadline minus [`WRITE_MARGIN`]: a request
//! still unanswered then is dropped with its connection, so a slow apply cannot outlive the
//! lease. What remains is a request the server received before the cut and applies after
//! it: the successor starts at least `WRITE_MARGIN` plus the lease protocol's own margin
//! (about 1 s: observers expire a lease 4 s after its last change, the holder stops 3 s
//! after sending it) after the cut, so such a write would have to sit in the API server
//! for over 1.25 s after its client gave up (`docs/reliability.md`).

use std::time::Duration;

use kube::Api;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams};
use serde::Serialize;
use serde_json::Value;
use tokio::time::Instant;

use crate::compare::{FIELD_MANAGER, ResourceKey};
use crate::live::{ClusterConn, KindInfo, live_value};

mod handover;

pub use handover::LEGACY_MANAGERS;
pub(crate) use handover::handover_patch;

/// How long before the lease deadline every request to a cluster is cut.
pub const WRITE_MARGIN: Duration = Duration::from_millis(250);

/// Until when this replica may write: its shard lease's deadline.
pub trait LeaseCheck: Send + Sync {
    /// The deadline (`None`: no lease, no writes).
    fn write_deadline(&self) -> Option<Instant>;

    /// Whether a write may start now.
    fn lease_valid(&self) -> bool {
        self.write_deadline().is_some_and(|t| Instant::now() < t)
    }
}

impl<F: Fn() -> Option<Instant> + Send + Sync> LeaseCheck for F {
    fn write_deadline(&self) -> Option<Instant> {
        self()
    }
}

/// When a request must end: `call_timeout` from `now`, or [`WRITE_MARGIN`] before the
/// lease deadline if that is sooner (then `cut` is true). `None`: no request may start.
pub fn request_deadline(
    now: Instant,
    lease: Option<Instant>,
    call_timeout: Duration,
) -> Option<RequestDeadline> {
    let last = lease?.checked_sub(WRITE_MARGIN)?;
    if last <= now {
        return None;
    }
    let timeout = now + call_timeout;
    Some(RequestDeadline {
        at: last.min(timeout),
        cut: last < timeout,
    })
}

/// A request's deadline, from [`request_deadline`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestDeadline {
    /// When the request is dropped.
    pub at: Instant,
    /// Whether that is the lease's deadline (not the call timeout).
    pub cut: bool,
}

impl RequestDeadline {
    /// What a request that got no answer by [`RequestDeadline::at`] reports.
    fn message(self, call_timeout: Duration) -> String {
        if self.cut {
            format!(
                "cut {WRITE_MARGIN:?} before the shard lease's deadline: this replica may no \
                 longer write to the cluster"
            )
        } else {
            format!("no answer within {call_timeout:?}")
        }
    }
}

/// One desired object, ready to apply.
#[derive(Debug, Clone, PartialEq)]
pub struct DesiredObject {
    /// Its key (namespace defaulted for namespaced kinds, empty for cluster-scoped ones).
    pub key: ResourceKey,
    /// The kind as the cluster serves it.
    pub kind: KindInfo,
    /// The manifest, with `metadata.namespace` set as in `key`.
    pub object: Value,
    /// The merge patch that first hands another applier's fields to fleetshard
    /// ([`LEGACY_MANAGERS`], `handover`), when the live object has such fields.
    pub handover: Option<Value>,
}

/// One live object to delete when pruning.
#[derive(Debug, Clone, PartialEq)]
pub struct PruneTarget {
    /// Its key.
    pub key: ResourceKey,
    /// Its `apiVersion` as cached.
    pub api_version: String,
    /// Why it must never be pruned (`Prune=false`, `Delete=false`, Helm's `keep`), if so.
    pub keep: Option<String>,
}

/// How a sync runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SyncMode {
    /// Delete the prune targets (without: they are reported as skipped).
    pub prune: bool,
    /// Server-side dry run (`dryRun=All`): every write is validated by the server and
    /// nothing is persisted; no handover, nothing pruned.
    pub dry_run: bool,
}

/// What happened to one resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ResultCode {
    /// Applied.
    Synced,
    /// The apply or delete was refused or failed.
    SyncFailed,
    /// Deleted (prune).
    Pruned,
    /// To prune, but the app's `prune` is off.
    PruneSkipped,
}

/// One resource's outcome, as in Argo CD's `syncResult.resources[]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceResult {
    /// Which object.
    pub key: ResourceKey,
    /// Its API version.
    pub version: String,
    /// What happened.
    pub status: ResultCode,
    /// The server's answer or why it was skipped.
    pub message: String,
}

/// Why a sync stopped before its end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// The lease check said no before a write: nothing more was written.
    #[error("the shard lease lapsed after {} of the operation's writes", .done.len())]
    LeaseLapsed {
        /// The writes made before it.
        done: Vec<ResourceResult>,
    },
}

/// Applies `desired` in order (Namespaces first, then CustomResourceDefinitions, then the
/// rest by key) and, when `mode.prune`, deletes `to_prune`; without it they are reported
/// as skipped, and so is a target with a [`PruneTarget::keep`] reason always. A resource
/// that fails is reported and the others still go on (one bad object does not block the
/// app). The applied objects are recorded in the cluster's cache so that the refresh
/// after the sync sees them. With `mode.dry_run` every apply and delete is sent with
/// `dryRun=All` and nothing is recorded.
pub async fn sync(
    conn: &ClusterConn,
    desired: &[DesiredObject],
    to_prune: &[PruneTarget],
    mode: SyncMode,
    lease: &dyn LeaseCheck,
) -> Result<Vec<ResourceResult>, ApplyError> {
    let prune = mode.prune;
    let mut order: Vec<&DesiredObject> = desired.iter().collect();
    order.sort_by_key(|d| (wave(&d.key), d.key.clone()));
    let mut results = Vec::with_capacity(desired.len() + to_prune.len());
    let mut params = PatchParams::apply(FIELD_MANAGER).force();
    params.dry_run = mode.dry_run;
    let call_timeout = conn.options().call_timeout;
    for d in order {
        let Some(until) = request_deadline(Instant::now(), lease.write_deadline(), call_timeout)
        else {
            return Err(ApplyError::LeaseLapsed { done: results });
        };
        let object = &d.object;
        let api = api_for(conn, &d.kind, &d.key.namespace);
        let handed = match (&d.handover, mode.dry_run) {
            (Some(ops), false) => hand_over(&api, &d.key.name, ops, until).await,
            _ => Ok(()),
        };
        let outcome = match handed {
            Ok(()) => {
                let patch = Patch::Apply(object);
                let call = api.patch(&d.key.name, &params, &patch);
                tokio::time::timeout_at(until.at, call)
                    .await
                    .map_err(|_| until.message(call_timeout))
                    .and_then(|r| r.map_err(|e| e.to_string()))
            }
            Err(why) => Err(why),
        };
        let (status, message) = match outcome {
            Ok(_) if mode.dry_run => {
                conn.heard_now();
                (
                    ResultCode::Synced,
                    "valid (server-side dry run; not applied)".to_owned(),
                )
            }
            Ok(applied) => {
                conn.heard_now();
                conn.observe(&d.key, live_value(&d.kind.resource, applied));
                let how = if d.handover.is_some() {
                    "applied (server-side; fields of earlier appliers taken over)"
                } else {
                    "applied (server-side)"
                };
                (ResultCode::Synced, how.to_owned())
            }
            Err(message) => (ResultCode::SyncFailed, message),
        };
        results.push(ResourceResult {
            key: d.key.clone(),
            version: d.kind.resource.version.clone(),
            status,
            message,
        });
    }
    for p in to_prune {
        let version = p
            .api_version
            .rsplit_once('/')
            .map_or(p.api_version.as_str(), |(_, v)| v)
            .to_owned();
        let skipped = match &p.keep {
            Some(why) => Some(why.clone()),
            None if !prune => Some("not in Git; prune is off".to_owned()),
            None => None,
        };
        if let Some(message) = skipped {
            results.push(ResourceResult {
                key: p.key.clone(),
                version,
                status: ResultCode::PruneSkipped,
                message,
            });
            continue;
        }
        let Some(until) = request_deadline(Instant::now(), lease.write_deadline(), call_timeout)
        else {
            return Err(ApplyError::LeaseLapsed { done: results });
        };
        let (status, message) = delete(conn, p, until, mode.dry_run).await;
        results.push(ResourceResult {
            key: p.key.clone(),
            version,
            status,
            message,
        });
    }
    Ok(results)
}

/// Sends the handover JSON patch; a failure (the object changed since it was read, a
/// refusal) fails this object's sync rather than applying without it.
async fn hand_over(
    api: &Api<DynamicObject>,
    name: &str,
    ops: &Value,
    until: RequestDeadline,
) -> Result<(), String> {
    let patch = Patch::Merge(ops);
    let params = PatchParams::default();
    let call = api.patch(name, &params, &patch);
    match tokio::time::timeout_at(until.at, call).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!(
            "taking over the fields of earlier appliers (retried at the next sync): {e}"
        )),
        Err(_) => Err("taking over the fields of earlier appliers: no answer".to_owned()),
    }
}

async fn delete(
    conn: &ClusterConn,
    p: &PruneTarget,
    until: RequestDeadline,
    dry_run: bool,
) -> (ResultCode, String) {
    let kind = match conn.kind_info(&p.api_version, &p.key.kind).await {
        Ok(kind) => kind,
        Err(e) => return (ResultCode::SyncFailed, e.to_string()),
    };
    let api = api_for(conn, &kind, &p.key.namespace);
    let params = DeleteParams {
        dry_run,
        ..DeleteParams::default()
    };
    let call = api.delete(&p.key.name, &params);
    match tokio::time::timeout_at(until.at, call).await {
        Ok(Ok(_)) if dry_run => {
            conn.heard_now();
            (
                ResultCode::Pruned,
                "would be pruned (server-side dry run)".to_owned(),
            )
        }
        Ok(Ok(_)) => {
            conn.heard_now();
            conn.forget(&p.key);
            (ResultCode::Pruned, "pruned".to_owned())
        }
        Ok(Err(kube::Error::Api(s))) if s.code == 404 => {
            conn.forget(&p.key);
            (ResultCode::Pruned, "already gone".to_owned())
        }
        Ok(Err(e)) => (ResultCode::SyncFailed, e.to_string()),
        Err(_) => (
            ResultCode::SyncFailed,
            until.message(conn.options().call_timeout),
        ),
    }
}

fn api_for(conn: &ClusterConn, kind: &KindInfo, namespace: &str) -> Api<DynamicObject> {
    if kind.namespaced {
        Api::namespaced_with(conn.client().clone(), namespace, &kind.resource)
    } else {
        Api::all_with(conn.client().clone(), &kind.resource)
    }
}

/// Namespaces and CRDs go first: other objects may need them.
fn wave(key: &ResourceKey) -> u8 {
    match (key.group.as_str(), key.kind.as_str()) {
        ("", "Namespace") => 0,
        ("apiextensions.k8s.io", "CustomResourceDefinition") => 1,
        _ => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_ends_before_the_lease_does() {
        let now = Instant::now();
        let timeout = Duration::from_secs(5);
        let far = request_deadline(now, Some(now + Duration::from_secs(60)), timeout).unwrap();
        assert_eq!((far.at, far.cut), (now + timeout, false));
        let near = request_deadline(now, Some(now + Duration::from_secs(1)), timeout).unwrap();
        assert_eq!(
            (near.at, near.cut),
            (now + Duration::from_secs(1) - WRITE_MARGIN, true)
        );
        assert!(near.message(timeout).contains("lease"));
        // Within the margin, or no lease: no request starts.
        assert_eq!(
            request_deadline(now, Some(now + WRITE_MARGIN), timeout),
            None
        );
        assert_eq!(request_deadline(now, None, timeout), None);
    }
}
