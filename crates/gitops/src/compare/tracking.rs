//! Which objects an application owns, and how the sync marks them: Argo CD's resource
//! tracking, as argocd-cm configures it ([`Tracking`]).
//!
//! - **Annotation** (Argo CD's default since 3.0): `argocd.argoproj.io/tracking-id:
//!   <app>:<group>/<kind>:<namespace>/<name>` (`my-app:apps/Deployment:default/web`; the
//!   core group is empty, so a Service is `my-app:/Service:default/web`). An object whose
//!   annotation names the app but another object (copied by an operator onto its
//!   children) is not the app's.
//! - **Label** (the default before 3.0): the instance label (`application.instanceLabelKey`,
//!   `app.kubernetes.io/instance` by default) holds the instance name. Helm charts set that
//!   label themselves too, which is why Argo CD moved away from it; an instance that keeps
//!   it gets Argo CD's behaviour, pruning included.
//! - **Annotation and label**: the annotation tracks; the label (truncated to 63
//!   characters) is written too.
//!
//! With an `installationID` every object is also stamped `argocd.argoproj.io/installation-id`,
//! and under annotation tracking an object stamped with another id (or none) is not this
//! instance's: two Argo CD instances sharing a cluster never take each other's objects.

use serde_json::{Map, Value};

use super::key::ResourceKey;

pub use fleetshard_reposerver::{DEFAULT_APP_LABEL_KEY, TrackingMethod};

/// The annotation that carries the tracking id.
pub const TRACKING_ANNOTATION: &str = "argocd.argoproj.io/tracking-id";

/// The annotation that carries argocd-cm's `installationID`.
pub const INSTALLATION_ID_ANNOTATION: &str = "argocd.argoproj.io/installation-id";

/// Kubernetes' limit on a label value (the label written beside the annotation is cut to it).
const LABEL_MAX: usize = 63;

/// The tracking id written on the object `key` of application `app` (the value of
/// [`TRACKING_ANNOTATION`]). `app` is the application's instance name (Argo CD writes
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

/// How one Argo CD instance tracks its apps' objects (argocd-cm's
/// `application.resourceTrackingMethod`, `application.instanceLabelKey`, `installationID`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracking {
    /// The method.
    pub method: TrackingMethod,
    /// The instance label's key.
    pub label_key: String,
    /// The installation id (empty: none).
    pub installation_id: String,
}

impl Default for Tracking {
    /// Argo CD's defaults: annotation tracking, `app.kubernetes.io/instance`, no
    /// installation id.
    fn default() -> Self {
        Tracking::from(&fleetshard_reposerver::TrackingSettings::default())
    }
}

impl From<&fleetshard_reposerver::TrackingSettings> for Tracking {
    fn from(s: &fleetshard_reposerver::TrackingSettings) -> Self {
        Tracking {
            method: s.method,
            label_key: s.label_key.clone(),
            installation_id: s.installation_id.clone(),
        }
    }
}

impl Tracking {
    /// Read from argocd-cm's `data`.
    pub fn from_argocd_cm(data: &std::collections::BTreeMap<String, String>) -> Self {
        Tracking::from(&fleetshard_reposerver::TrackingSettings::from_argocd_cm(
            data,
        ))
    }

    /// The instance name the object is tracked under, as Argo CD's controller reads it:
    /// the instance label under label tracking; else the tracking id's app, when the
    /// object carries this instance's installation id (if one is set).
    pub fn app_of<'v>(&self, obj: &'v Value) -> Option<&'v str> {
        let meta = obj.get("metadata")?;
        if self.method == TrackingMethod::Label {
            return meta.get("labels")?.get(&self.label_key)?.as_str();
        }
        let annotations = meta.get("annotations");
        let get = |k: &str| annotations.and_then(|a| a.get(k)).and_then(Value::as_str);
        if !self.installation_id.is_empty()
            && get(INSTALLATION_ID_ANNOTATION) != Some(&self.installation_id)
        {
            return None;
        }
        let id = get(TRACKING_ANNOTATION)?;
        id.split_once(':').map(|(app, _)| app)
    }

    /// Whether `obj` is managed by application `app`. Under annotation tracking the id
    /// must also name this very object (a cluster-scoped object may carry any namespace
    /// in it: Argo CD wrote the application's destination namespace there).
    pub fn is_tracked_by(&self, obj: &Value, app: &str) -> bool {
        if self.app_of(obj) != Some(app) {
            return false;
        }
        if self.method == TrackingMethod::Label {
            return true;
        }
        let id = obj
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(TRACKING_ANNOTATION))
            .and_then(Value::as_str)
            .and_then(TrackingId::parse);
        let (Some(id), Ok(key)) = (id, ResourceKey::of(obj)) else {
            return false;
        };
        id.key.group == key.group
            && id.key.kind == key.kind
            && id.key.name == key.name
            && (id.key.namespace == key.namespace || key.namespace.is_empty())
    }

    /// Stamps `object` (the desired object `key`) as application `app`'s, as Argo CD's
    /// repo-server and controller stamp it: the tracking annotation (and the installation
    /// id, or its removal) under annotation tracking, the instance label under label
    /// tracking, both under annotation and label.
    pub fn stamp(&self, object: &mut Value, app: &str, key: &ResourceKey) {
        let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
            return;
        };
        if self.method != TrackingMethod::Label {
            let annotations = child_map(meta, "annotations");
            annotations.insert(
                TRACKING_ANNOTATION.to_owned(),
                Value::String(tracking_annotation(app, key)),
            );
            if self.installation_id.is_empty() {
                annotations.remove(INSTALLATION_ID_ANNOTATION);
            } else {
                annotations.insert(
                    INSTALLATION_ID_ANNOTATION.to_owned(),
                    Value::String(self.installation_id.clone()),
                );
            }
        }
        let label = match self.method {
            TrackingMethod::Annotation => return,
            TrackingMethod::Label => app.to_owned(),
            TrackingMethod::AnnotationAndLabel => truncate_label(app),
        };
        child_map(meta, "labels").insert(self.label_key.clone(), Value::String(label));
    }
}

/// `meta[field]` as a map, made one if absent or not a map.
pub(crate) fn child_map<'m>(
    meta: &'m mut Map<String, Value>,
    field: &str,
) -> &'m mut Map<String, Value> {
    let v = meta
        .entry(field)
        .or_insert_with(|| Value::Object(Map::new()));
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    match v {
        Value::Object(m) => m,
        _ => unreachable!("made a map above"),
    }
}

/// A label value cut to 63 characters, then to one that ends in a letter or digit (Argo
/// CD's rule for the label written beside the annotation).
fn truncate_label(value: &str) -> String {
    if value.len() <= LABEL_MAX {
        return value.to_owned();
    }
    let mut cut: String = value.chars().take(LABEL_MAX).collect();
    while cut.len() > LABEL_MAX {
        cut.pop();
    }
    while cut
        .chars()
        .last()
        .is_some_and(|c| !c.is_ascii_alphanumeric())
    {
        cut.pop();
    }
    cut
}

/// Every name the object could be tracked under, whatever the method: its tracking id's
/// app and its `label_key` label. What the live caches index objects by (a superset; the
/// comparison decides with [`Tracking::is_tracked_by`]).
pub(crate) fn candidate_apps(obj: &Value, label_key: &str) -> Vec<String> {
    let meta = obj.get("metadata");
    let annotated = meta
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(TRACKING_ANNOTATION))
        .and_then(Value::as_str)
        .and_then(|id| id.split_once(':'))
        .map(|(app, _)| app.to_owned())
        .filter(|app| !app.is_empty());
    let labelled = meta
        .and_then(|m| m.get("labels"))
        .and_then(|l| l.get(label_key))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .filter(|app| !app.is_empty() && Some(app) != annotated.as_ref());
    annotated.into_iter().chain(labelled).collect()
}

#[cfg(test)]
mod tests;
