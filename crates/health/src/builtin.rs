//! The checks Argo CD makes in Go (gitops-engine's `pkg/health`), written here from their
//! documented behaviour, plus CronJob (a Lua script in Argo CD, built in here).
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
//! | HorizontalPodAutoscaler (autoscaling v1, v2; other versions Unknown, as Argo CD) | the conditions (v2: `status.conditions`; v1: the `autoscaling.alpha.kubernetes.io/conditions` annotation, none → Progressing): `AbleToScale` with reason `FailedGetScale`/`FailedUpdateScale`, or `ScalingActive` with `FailedGet{Resource,Object,Pods,External}Metric`, `FailedComputeMetricsReplicas`, `InvalidSelector` → Degraded (its message); else `AbleToScale` or `ScalingLimited` True → Healthy (its message); else Progressing "Waiting to Autoscale" |
//! | APIService (apiregistration.k8s.io v1, v1beta1; other versions Unknown) | condition `Available`: True → Healthy, else Progressing, with message `reason: message`; none → Progressing "Waiting to be processed" |
//! | Workflow (argoproj.io) | `status.phase` empty, Pending or Running → Progressing; Succeeded → Healthy; Failed or Error → Degraded; else Unknown; message `status.message` |
//!
//! A field of the wrong type makes the object Unknown, with a message naming it (Argo CD:
//! the typed conversion fails). Pure: no I/O, no clock (a CronJob's timestamps are compared
//! with each other, never with now).

mod batch;
mod core;
mod others;
mod workloads;

use serde_json::Value;

use crate::{Health, HealthStatus};

/// The built-in check of `obj`'s group and kind (`obj` is a JSON object), if there is one.
pub(crate) fn check(obj: &Value) -> Option<Health> {
    let o = Obj::new(obj);
    let (group, version) = o
        .api_version
        .rsplit_once('/')
        .unwrap_or(("", o.api_version));
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
        ("autoscaling", "HorizontalPodAutoscaler") => match version {
            "v1" => others::hpa_v1,
            "v2" => others::hpa_v2,
            _ => others::unsupported_version,
        },
        ("apiregistration.k8s.io", "APIService") => match version {
            "v1" | "v1beta1" => others::api_service,
            _ => others::unsupported_version,
        },
        ("argoproj.io", "Workflow") => others::workflow,
        _ => return None,
    };
    Some(rule(&o).unwrap_or_else(|message| Health::new(HealthStatus::Unknown, message)))
}

/// Whether a built-in check exists for `group` and `kind`.
pub(crate) fn has_check(group: &str, kind: &str) -> bool {
    matches!(
        (group, kind),
        (
            "apps" | "extensions",
            "Deployment" | "DaemonSet" | "ReplicaSet"
        ) | ("apps", "StatefulSet")
            | ("", "Pod" | "Service" | "PersistentVolumeClaim")
            | ("networking.k8s.io" | "extensions", "Ingress")
            | ("batch", "Job" | "CronJob")
            | ("autoscaling", "HorizontalPodAutoscaler")
            | ("apiregistration.k8s.io", "APIService")
            | ("argoproj.io", "Workflow")
    )
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
    pub(crate) fn new(value: &'a Value) -> Obj<'a> {
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

    /// A string field at `path` (whose segments may hold dots, as annotation keys do),
    /// `None` when absent.
    pub(crate) fn str_opt(&self, path: &[&str]) -> Result<Option<&'a str>, String> {
        let found = path
            .iter()
            .try_fold(self.value, |v, f| v.get(f))
            .filter(|v| !v.is_null());
        match found {
            None => Ok(None),
            Some(v) => v
                .as_str()
                .map(Some)
                .ok_or_else(|| self.wrong(&path.join("."), "a string")),
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
