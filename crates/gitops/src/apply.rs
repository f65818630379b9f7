//! The writes of a sync, one object each, as the sync engine (`fleetshard-sync`) asks
//! for them: server-side apply of a desired object (field manager [`FIELD_MANAGER`],
//! forced, with the tracking annotation added) or its replacement, the destination
//! namespace of `CreateNamespace=true`, and deletes (prunes, hooks by policy, cascade
//! deletion) with a propagation policy; and, for a server-side diff, the same apply as a
//! dry run ([`predict_live`]: not a write, so no lease is asked).
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
use kube::api::{
    DeleteParams, DynamicObject, Patch, PatchParams, PostParams, PropagationPolicy,
    ValidationDirective,
};
use serde_json::Value;
use tokio::time::Instant;

use crate::compare::{FIELD_MANAGER, ResourceKey, Tracking, child_map};
use crate::live::{AppConn, ClusterConn, KindInfo, live_value};

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

    /// How a write that failed with `why` ended: past a deadline that is the lease's, the
    /// lease lapsed (the write was cut, or failed in the last instants of the lease;
    /// whether it landed is unknown, nothing more may be written, and an operation stops
    /// without counting it as the resource's failure); otherwise the write failed.
    fn failed(self, why: String) -> WriteResult {
        if self.cut && Instant::now() >= self.at {
            WriteResult::LeaseLapsed
        } else {
            WriteResult::Failed(why)
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

/// How one object is written (the sync engine's choice, `fleetshard_sync::Action`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WriteHow {
    /// Server-side dry run (`dryRun=All`): validated, nothing persisted, no handover.
    pub dry_run: bool,
    /// `Replace=true`: replace the live object whole (create it when missing).
    pub replace: bool,
    /// `Force=true` (or a forced strategy): when the write is refused, delete the object
    /// and create it again (`kubectl apply --force`).
    pub force: bool,
    /// Validate fields strictly (`Validate=false`: unknown fields are ignored).
    pub validate: bool,
    /// For a hook: the operation attempt written in `fleetshard_sync::HOOK_ATTEMPT`.
    pub hook_attempt: Option<String>,
}

/// How one write ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteResult {
    /// Done; what the server did, in words.
    Done(String),
    /// A delete of an object already gone.
    Gone,
    /// Refused or failed, and why.
    Failed(String),
    /// The lease check said no: nothing was sent, and nothing more may be.
    LeaseLapsed,
}

/// The deadline of a write now, or `None` when the lease says no write may start.
fn deadline(conn: &ClusterConn, lease: &dyn LeaseCheck) -> Option<RequestDeadline> {
    request_deadline(
        Instant::now(),
        lease.write_deadline(),
        conn.options().call_timeout,
    )
}

/// Runs `call` until `until`; a timeout is the deadline's message.
async fn bounded<T>(
    conn: &ClusterConn,
    until: RequestDeadline,
    call: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<T, String> {
    tokio::time::timeout_at(until.at, call)
        .await
        .map_err(|_| until.message(conn.options().call_timeout))
        .and_then(|r| r.map_err(|e| e.to_string()))
}

/// Writes the desired object `d` under `name` (a hook's generated name, or its own),
/// with the tracking annotation of `app_name` (and a hook's attempt): server-side apply
/// as [`FIELD_MANAGER`], forced; or, with [`WriteHow::replace`], a replace (a create when
/// it is missing). First, outside a dry run, the fields of earlier appliers are handed
/// over (`handover`). A refused write with [`WriteHow::force`] deletes the object and
/// writes it again. The applied object is recorded in the cluster's cache so that the next
/// read sees it. The lease is checked before every request; each is counted for the app
/// (`at`).
pub async fn apply_object(
    at: &AppConn<'_>,
    (tracking, app_name): (&Tracking, &str),
    d: &DesiredObject,
    name: &str,
    how: &WriteHow,
    lease: &dyn LeaseCheck,
) -> WriteResult {
    let conn = at.conn;
    let Some(until) = deadline(conn, lease) else {
        return WriteResult::LeaseLapsed;
    };
    let mut key = d.key.clone();
    key.name = name.to_owned();
    let mut object = d.object.clone();
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("name".into(), Value::String(name.to_owned()));
        meta.remove("generateName");
    }
    tracking.stamp(&mut object, app_name, &key);
    if let Some(attempt) = &how.hook_attempt {
        annotate(&mut object, fleetshard_sync::HOOK_ATTEMPT, attempt);
    }
    let api = api_for(&at.client, &d.kind, &key.namespace);
    if let (Some(ops), false) = (&d.handover, how.dry_run)
        && let Err(why) = hand_over(&api, name, ops, until).await
    {
        return until.failed(why);
    }
    let mut written = write(conn, &api, &object, name, how, until).await;
    if let (Err(why), true, false) = (&written, how.force, how.dry_run) {
        tracing::info!(object = %key, %why, "forced: deleting and creating again");
        let params = DeleteParams::background();
        match bounded(conn, until, api.delete(name, &params)).await {
            Ok(_) => {}
            Err(e) if e.contains("404") || e.contains("not found") => {}
            Err(e) => return until.failed(format!("{why}; forced delete failed: {e}")),
        }
        if let Err(e) = wait_gone(conn, &api, name, until).await {
            return until.failed(format!("{why}; forced re-creation: {e}"));
        }
        written = write(conn, &api, &object, name, how, until).await;
    }
    match written {
        Ok(applied) if how.dry_run => {
            let _ = applied;
            conn.heard_now();
            WriteResult::Done("valid (server-side dry run; not applied)".to_owned())
        }
        Ok(applied) => {
            conn.heard_now();
            conn.observe(&key, live_value(&d.kind.resource, applied));
            let how = match (&d.handover, how.replace) {
                (_, true) => "replaced",
                (Some(_), false) => "applied (server-side; fields of earlier appliers taken over)",
                (None, false) => "applied (server-side)",
            };
            WriteResult::Done(how.to_owned())
        }
        Err(why) => until.failed(why),
    }
}

/// One write of `object`: a replace (or create) or a server-side apply.
async fn write(
    conn: &ClusterConn,
    api: &Api<DynamicObject>,
    object: &Value,
    name: &str,
    how: &WriteHow,
    until: RequestDeadline,
) -> Result<DynamicObject, String> {
    let validation = if how.validate {
        ValidationDirective::Strict
    } else {
        ValidationDirective::Ignore
    };
    if !how.replace {
        let mut params = PatchParams::apply(FIELD_MANAGER).force();
        params.dry_run = how.dry_run;
        params.field_validation = Some(validation);
        return server_side_apply(conn, api, object, name, &params, until).await;
    }
    let post = PostParams {
        dry_run: how.dry_run,
        field_manager: Some(FIELD_MANAGER.to_owned()),
    };
    let typed: DynamicObject = serde_json::from_value(object.clone())
        .map_err(|e| format!("the object cannot be sent: {e}"))?;
    match bounded(conn, until, api.get_opt(name)).await? {
        None => bounded(conn, until, api.create(&post, &typed)).await,
        Some(live) => {
            let mut typed = typed;
            typed.metadata.resource_version = live.metadata.resource_version;
            bounded(conn, until, api.replace(name, &post, &typed)).await
        }
    }
}

/// A server-side apply of `object` with `params`, until `until`.
async fn server_side_apply(
    conn: &ClusterConn,
    api: &Api<DynamicObject>,
    object: &Value,
    name: &str,
    params: &PatchParams,
    until: RequestDeadline,
) -> Result<DynamicObject, String> {
    bounded(conn, until, api.patch(name, params, &Patch::Apply(object))).await
}

/// The live object the cluster predicts for `object` (a desired object of kind `kind`,
/// stamped and placed): a server-side apply dry run (`dryRun=All`) as [`FIELD_MANAGER`],
/// conflicts not forced and fields not validated, as Argo CD's server-side diff asks it.
/// The object as the server answers it (admission webhooks included), or why not. Not a
/// write: no lease is needed, the call is bounded by the cluster's call timeout. Counted
/// for the app (`at`).
pub async fn predict_live(
    at: &AppConn<'_>,
    kind: &KindInfo,
    key: &ResourceKey,
    object: &Value,
) -> Result<Value, String> {
    let conn = at.conn;
    let until = RequestDeadline {
        at: Instant::now() + conn.options().call_timeout,
        cut: false,
    };
    let api = api_for(&at.client, kind, &key.namespace);
    let mut params = PatchParams::apply(FIELD_MANAGER);
    params.dry_run = true;
    params.field_validation = Some(ValidationDirective::Ignore);
    let predicted = server_side_apply(conn, &api, object, &key.name, &params, until).await?;
    conn.heard_now();
    Ok(live_value(&kind.resource, predicted))
}

/// Waits until `name` is gone (a forced re-creation), until `until`.
async fn wait_gone(
    conn: &ClusterConn,
    api: &Api<DynamicObject>,
    name: &str,
    until: RequestDeadline,
) -> Result<(), String> {
    loop {
        if bounded(conn, until, api.get_opt(name)).await?.is_none() {
            return Ok(());
        }
        if Instant::now() + Duration::from_millis(100) >= until.at {
            return Err("the old object is still being deleted".to_owned());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `CreateNamespace=true`: the destination namespace `name` created (or, with managed
/// metadata, its `labels` and `annotations` applied) by server-side apply, never tracked
/// (as Argo CD: it is neither compared nor pruned).
pub async fn apply_namespace(
    at: &AppConn<'_>,
    name: &str,
    labels: &std::collections::BTreeMap<String, String>,
    annotations: &std::collections::BTreeMap<String, String>,
    dry_run: bool,
    lease: &dyn LeaseCheck,
) -> WriteResult {
    let conn = at.conn;
    let Some(until) = deadline(conn, lease) else {
        return WriteResult::LeaseLapsed;
    };
    let mut meta = serde_json::Map::new();
    meta.insert("name".into(), name.into());
    if !labels.is_empty() {
        meta.insert(
            "labels".into(),
            serde_json::to_value(labels).unwrap_or_default(),
        );
    }
    if !annotations.is_empty() {
        meta.insert(
            "annotations".into(),
            serde_json::to_value(annotations).unwrap_or_default(),
        );
    }
    let object = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": meta});
    let api: Api<DynamicObject> = Api::all_with(
        at.client.clone(),
        &kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&()),
    );
    let mut params = PatchParams::apply(FIELD_MANAGER).force();
    params.dry_run = dry_run;
    match bounded(
        conn,
        until,
        api.patch(name, &params, &Patch::Apply(&object)),
    )
    .await
    {
        Ok(_) => {
            conn.heard_now();
            WriteResult::Done(format!("namespace/{name} serverside-applied"))
        }
        Err(why) => until.failed(why),
    }
}

/// The live namespace `name`, read (the destination namespace `CreateNamespace=true`
/// creates is not one of the app's objects): `Ok(None)` when it does not exist.
pub async fn get_namespace(at: &AppConn<'_>, name: &str) -> Result<Option<Value>, String> {
    let conn = at.conn;
    let api: Api<DynamicObject> = Api::all_with(
        at.client.clone(),
        &kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&()),
    );
    let call = api.get_opt(name);
    match tokio::time::timeout(conn.options().call_timeout, call).await {
        Ok(Ok(found)) => Ok(found.map(|o| serde_json::to_value(o).unwrap_or_default())),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("no answer".to_owned()),
    }
}

/// Deletes the live object `key` (its `api_version` as cached) with `propagation`
/// (`Foreground`, `Background`, `Orphan`). An object already gone is [`WriteResult::Gone`].
pub async fn delete_object(
    at: &AppConn<'_>,
    key: &ResourceKey,
    api_version: &str,
    propagation: &str,
    dry_run: bool,
    lease: &dyn LeaseCheck,
) -> WriteResult {
    let conn = at.conn;
    let Some(until) = deadline(conn, lease) else {
        return WriteResult::LeaseLapsed;
    };
    let kind = match conn.kind_info(api_version, &key.kind).await {
        Ok(kind) => kind,
        Err(e) => return WriteResult::Failed(e.to_string()),
    };
    let api = api_for(&at.client, &kind, &key.namespace);
    let mut params = DeleteParams {
        dry_run,
        ..DeleteParams::default()
    };
    params.propagation_policy = Some(match propagation {
        "Background" => PropagationPolicy::Background,
        "Orphan" => PropagationPolicy::Orphan,
        _ => PropagationPolicy::Foreground,
    });
    match tokio::time::timeout_at(until.at, api.delete(&key.name, &params)).await {
        Ok(Ok(_)) if dry_run => {
            conn.heard_now();
            WriteResult::Done("would be deleted (server-side dry run)".to_owned())
        }
        Ok(Ok(answer)) => {
            conn.heard_now();
            match answer.left() {
                // Still there, being deleted (finalizers, foreground dependents): the
                // cache shows it so, and whoever waits for it waits.
                Some(still) => {
                    conn.observe(key, live_value(&kind.resource, still));
                    WriteResult::Done("deleting".to_owned())
                }
                None => {
                    conn.forget(key);
                    WriteResult::Done("deleted".to_owned())
                }
            }
        }
        Ok(Err(kube::Error::Api(s))) if s.code == 404 => {
            conn.forget(key);
            WriteResult::Gone
        }
        Ok(Err(e)) => WriteResult::Failed(e.to_string()),
        Err(_) => until.failed(until.message(conn.options().call_timeout)),
    }
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

fn api_for(client: &kube::Client, kind: &KindInfo, namespace: &str) -> Api<DynamicObject> {
    if kind.namespaced {
        Api::namespaced_with(client.clone(), namespace, &kind.resource)
    } else {
        Api::all_with(client.clone(), &kind.resource)
    }
}

/// Sets annotation `key` to `value` (creating `metadata.annotations` if needed).
fn annotate(object: &mut Value, key: &str, value: &str) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        child_map(meta, "annotations").insert(key.to_owned(), Value::String(value.to_owned()));
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
