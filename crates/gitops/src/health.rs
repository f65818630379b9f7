//! Health of live objects, by kind, with Argo CD's (gitops-engine's) rules, and the health
//! of an application as the worst of its resources.
//!
//! Pure: no I/O, no clock (a CronJob's timestamps are compared with each other, never with
//! now).
//!
//! | kind (group) | rule |
//! |---|---|
//! | Deployment (apps, extensions) | paused → Suspended; generation not observed → Progressing; `Progressing` condition `ProgressDeadlineExceeded` → Degraded; updated < desired, old replicas left, or available < updated → Progressing |
//! | StatefulSet (apps) | generation not observed → Progressing; ready < desired → Progressing; rolling update with `partition` → Progressing until `replicas − partition` are updated; `OnDelete` → Healthy; `updateRevision ≠ currentRevision` → Progressing |
//! | DaemonSet (apps, extensions) | generation not observed → Progressing; `OnDelete` → Healthy; updated or available < desired scheduled → Progressing |
//! | ReplicaSet (apps, extensions) | generation not observed → Progressing; `ReplicaFailure` True → Degraded; available < desired → Progressing |
//! | Pod | restart policy Always and a container waiting with a reason `Err*`, `*Error` or `*BackOff` (CrashLoopBackOff, ImagePullBackOff, ErrImagePull, CreateContainerConfigError) → Degraded; phase Pending → Progressing, Succeeded → Healthy, Failed → Degraded; Running: Always → Healthy if Ready, Degraded if a container has terminated before, else Progressing; OnFailure/Never → Progressing (such pods are hooks: running is not done) |
//! | Service | type LoadBalancer without `status.loadBalancer.ingress` → Progressing |
//! | Ingress (networking.k8s.io, extensions) | no `status.loadBalancer.ingress` → Progressing |
//! | PersistentVolumeClaim | Bound → Healthy, Pending → Progressing, Lost → Degraded, else Unknown |
//! | Job (batch) | condition Failed → Degraded, Complete → Healthy, Suspended → Suspended, else Progressing |
//! | CronJob (batch) | suspended → Suspended; never scheduled → Healthy; last run failed (last success before last schedule, nothing active) → Degraded; no status yet → Progressing |
//!
//! Any object with `metadata.deletionTimestamp` is Progressing ("Pending deletion"). A
//! kind without a rule is **Unknown** (as the issue asks; Argo CD reports no health for
//! it). Such resources do not count towards the application's health
//! ([`Health::checked`] is false), as in Argo CD: otherwise every application with a
//! ConfigMap would be Unknown. A field of the wrong type makes the object Unknown, with a
//! message naming it (Argo CD: the typed conversion fails).
//!
//! The [`HealthStatus::Suspended`] variant is kept (paused Deployment, suspended Job or
//! CronJob), as in Argo CD, rather than folded into Healthy: an operator wants to see it.

mod batch;
mod core;
mod workloads;

use std::fmt;

use serde::Serialize;
use serde_json::Value;

/// Health of a resource or application, ordered from best to worst as Argo CD's
/// `healthOrder`: Healthy < Suspended < Progressing < Missing < Degraded < Unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum HealthStatus {
    /// Working as intended.
    Healthy,
    /// Paused or suspended on purpose.
    Suspended,
    /// Not healthy yet, still expected to get there.
    Progressing,
    /// The object does not exist in the cluster.
    Missing,
    /// Failed, or cannot become healthy without intervention.
    Degraded,
    /// Health could not be told.
    Unknown,
}

impl fmt::Display for HealthStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// The health of one resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Health {
    /// The status.
    pub status: HealthStatus,
    /// Why, for a human (may be empty).
    pub message: String,
    /// Whether a rule decided the status (false only for kinds without a rule, which do
    /// not count towards an application's health).
    pub checked: bool,
}

impl Health {
    pub(crate) fn new(status: HealthStatus, message: impl Into<String>) -> Health {
        Health {
            status,
            message: message.into(),
            checked: true,
        }
    }
}

/// The health of a live object; `None` means it does not exist (Missing).
pub fn assess(live: Option<&Value>) -> Health {
    let Some(obj) = live else {
        return Health::new(HealthStatus::Missing, "not found in the cluster");
    };
    if !obj.is_object() {
        return Health::new(
            HealthStatus::Unknown,
            "the live object is not a JSON object",
        );
    }
    if obj
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
    {
        return Health::new(HealthStatus::Progressing, "Pending deletion");
    }
    let o = Obj::new(obj);
    let group = o.api_version.split_once('/').map_or("", |(g, _)| g);
    let rule: fn(&Obj<'_>) -> Result<Health, String> = match (group, o.kind) {
        ("apps" | "extensions", "Deployment") => workloads::deployment,
        ("apps", "StatefulSet") => workloads::statefulset,
        ("apps" | "extensions", "DaemonSet") => workloads::daemonset,
        ("apps" | "extensions", "ReplicaSet") => workloads::replicaset,
        ("", "Pod") => core::pod,
        ("", "Service") => core::service,
        ("networking.k8s.io" | "extensions", "Ingress") => core::ingress,
        ("", "PersistentVolumeClaim") => core::pvc,
        ("batch", "Job") => batch::job,
        ("batch", "CronJob") => batch::cronjob,
        _ => {
            let message = format!("no health check for {} {}", o.api_version, o.kind);
            return Health {
                status: HealthStatus::Unknown,
                message,
                checked: false,
            };
        }
    };
    rule(&o).unwrap_or_else(|message| Health::new(HealthStatus::Unknown, message))
}

/// An application's health: the worst of its checked resources' (Healthy when none is).
pub fn app_health<'a>(resources: impl IntoIterator<Item = &'a Health>) -> HealthStatus {
    resources
        .into_iter()
        .filter(|h| h.checked)
        .map(|h| h.status)
        .max()
        .unwrap_or(HealthStatus::Healthy)
}

/// Typed reads of a live object's fields: absent fields read as Go's zero values (as
/// gitops-engine's typed conversion does), a field of the wrong type is an error naming
/// the object and the field.
pub(crate) struct Obj<'a> {
    value: &'a Value,
    api_version: &'a str,
    pub(crate) kind: &'a str,
    pub(crate) name: &'a str,
}

impl<'a> Obj<'a> {
    fn new(value: &'a Value) -> Obj<'a> {
        let text = |v: Option<&'a Value>| v.and_then(Value::as_str).unwrap_or("");
        Obj {
            value,
            api_version: text(value.get("apiVersion")),
            kind: text(value.get("kind")),
            name: text(value.pointer("/metadata/name")),
        }
    }

    fn get(&self, path: &str) -> Option<&'a Value> {
        path.split('.')
            .try_fold(self.value, |v, f| v.get(f))
            .filter(|v| !v.is_null())
    }

    fn wrong(&self, path: &str, what: &str) -> String {
        format!("{} {}: field {path} is not {what}", self.kind, self.name)
    }

    /// An integer field, `None` when absent.
    pub(crate) fn opt_int(&self, path: &str) -> Result<Option<i64>, String> {
        match self.get(path) {
            None => Ok(None),
            Some(v) => match (v.as_i64(), v.as_f64()) {
                (Some(i), _) => Ok(Some(i)),
                // Safe: checked to be a whole number well inside the i64 range.
                (None, Some(f)) if f.fract() == 0.0 && f.abs() < 9.0e15 => Ok(Some(f as i64)),
                _ => Err(self.wrong(path, "an integer")),
            },
        }
    }

    /// An integer field, 0 when absent.
    pub(crate) fn int(&self, path: &str) -> Result<i64, String> {
        Ok(self.opt_int(path)?.unwrap_or(0))
    }

    /// A string field, `""` when absent.
    pub(crate) fn str(&self, path: &str) -> Result<&'a str, String> {
        match self.get(path) {
            None => Ok(""),
            Some(v) => v.as_str().ok_or_else(|| self.wrong(path, "a string")),
        }
    }

    /// A boolean field, false when absent.
    pub(crate) fn bool(&self, path: &str) -> Result<bool, String> {
        match self.get(path) {
            None => Ok(false),
            Some(v) => v.as_bool().ok_or_else(|| self.wrong(path, "a boolean")),
        }
    }

    /// A list field, empty when absent.
    pub(crate) fn list(&self, path: &str) -> Result<&'a [Value], String> {
        match self.get(path) {
            None => Ok(&[]),
            Some(v) => v
                .as_array()
                .map(Vec::as_slice)
                .ok_or_else(|| self.wrong(path, "a list")),
        }
    }

    /// Whether the field is present (and not null).
    pub(crate) fn has(&self, path: &str) -> bool {
        self.get(path).is_some()
    }

    /// The first element of `status.conditions` of type `kind`.
    pub(crate) fn condition(&self, kind: &str) -> Result<Option<&'a Value>, String> {
        let conditions = self.list("status.conditions")?;
        Ok(conditions
            .iter()
            .find(|c| c.get("type").and_then(Value::as_str) == Some(kind)))
    }
}

/// A string field of a sub-object (a condition, a container status), `""` when absent.
pub(crate) fn text<'a>(v: &'a Value, path: &str) -> &'a str {
    path.split('.')
        .try_fold(v, |v, f| v.get(f))
        .and_then(Value::as_str)
        .unwrap_or("")
}
