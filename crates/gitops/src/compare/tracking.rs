//! Which objects an application owns: Argo CD's annotation tracking.
//!
//! Every object fleetshard applies carries the annotation
//! `argocd.argoproj.io/tracking-id: <app>:<group>/<kind>:<namespace>/<name>` (Argo CD's
//! format: `my-app:apps/Deployment:default/web`; the core group is empty, so a Service is
//! `my-app:/Service:default/web`). Only objects carrying it may be pruned.
//!
//! Argo CD's older label tracking (`app.kubernetes.io/instance: <app>`) is deliberately not
//! trusted: Helm charts and operators set that label themselves, and pruning on it would
//! delete objects nobody asked us to manage. An object whose annotation names our app but
//! another object (the annotation was copied, e.g. by an operator onto its children) is
//! not ours either.

use serde_json::Value;

use super::key::ResourceKey;

/// The annotation that carries the tracking id.
pub const TRACKING_ANNOTATION: &str = "argocd.argoproj.io/tracking-id";

/// The tracking id fleetshard writes on the object `key` of application `app` (the value
/// of [`TRACKING_ANNOTATION`]). `app` is the application's instance name (Argo CD writes
/// `<namespace>_<name>` for applications outside its own namespace).
pub fn tracking_annotation(app: &str, key: &ResourceKey) -> String {
    format!(
        "{app}:{}/{}:{}/{}",
        key.group, key.kind, key.namespace, key.name
    )
}

/// A parsed tracking id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackingId {
    /// The application's instance name.
    pub app: String,
    /// The object the id was written for.
    pub key: ResourceKey,
}

impl TrackingId {
    /// Parses `<app>:<group>/<kind>:<namespace>/<name>`; `None` if malformed.
    pub fn parse(value: &str) -> Option<TrackingId> {
        let mut parts = value.splitn(3, ':');
        let (app, group_kind, ns_name) = (parts.next()?, parts.next()?, parts.next()?);
        let (group, kind) = group_kind.split_once('/')?;
        let (namespace, name) = ns_name.split_once('/')?;
        if app.is_empty()
            || kind.is_empty()
            || name.is_empty()
            || kind.contains('/')
            || name.contains('/')
        {
            return None;
        }
        Some(TrackingId {
            app: app.to_owned(),
            key: ResourceKey::new(group, kind, namespace, name),
        })
    }
}

/// Whether `obj` is managed by application `app`: its tracking annotation names `app`
/// and this very object. A cluster-scoped object may carry any namespace in its id (Argo
/// CD wrote the application's destination namespace there).
pub fn is_tracked_by(obj: &Value, app: &str) -> bool {
    let Some(id) = obj
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(TRACKING_ANNOTATION))
        .and_then(Value::as_str)
        .and_then(TrackingId::parse)
    else {
        return false;
    };
    let Ok(key) = ResourceKey::of(obj) else {
        return false;
    };
    id.app == app
        && id.key.group == key.group
        && id.key.kind == key.kind
        && id.key.name == key.name
        && (id.key.namespace == key.namespace || key.namespace.is_empty())
}
