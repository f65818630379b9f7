//! HorizontalPodAutoscaler, APIService and Argo Workflows' Workflow.

use serde_json::Value;

use super::{Health, HealthStatus, Obj, text};

/// The message of an HPA that has not reported a verdict yet.
const WAITING_TO_AUTOSCALE: &str = "Waiting to Autoscale";

/// The annotation an `autoscaling/v1` HPA carries its v2 conditions in (JSON).
const V1_CONDITIONS: &str = "autoscaling.alpha.kubernetes.io/conditions";

/// (type, reason) of the HPA conditions that mean it cannot do its job.
const HPA_DEGRADED: &[(&str, &str)] = &[
    ("AbleToScale", "FailedGetScale"),
    ("AbleToScale", "FailedUpdateScale"),
    ("ScalingActive", "FailedGetResourceMetric"),
    ("ScalingActive", "FailedGetObjectMetric"),
    ("ScalingActive", "FailedGetPodsMetric"),
    ("ScalingActive", "FailedGetExternalMetric"),
    ("ScalingActive", "FailedComputeMetricsReplicas"),
    ("ScalingActive", "InvalidSelector"),
];

/// An `autoscaling/v2` HPA: its `status.conditions`.
pub(super) fn hpa_v2(o: &Obj<'_>) -> Result<Health, String> {
    Ok(hpa_conditions(o.list("status.conditions")?))
}

/// An `autoscaling/v1` HPA: the conditions in its annotation; none → Progressing.
pub(super) fn hpa_v1(o: &Obj<'_>) -> Result<Health, String> {
    let Some(text) = o.str_opt(&["metadata", "annotations", V1_CONDITIONS])? else {
        return Ok(Health::new(HealthStatus::Progressing, WAITING_TO_AUTOSCALE));
    };
    let conditions: Vec<Value> = serde_json::from_str(text).map_err(|e| {
        format!(
            "{} {}: annotation {V1_CONDITIONS} is not a JSON list of conditions: {e}",
            o.kind, o.name
        )
    })?;
    if conditions.iter().any(|c| !c.is_object()) {
        return Err(format!(
            "{} {}: annotation {V1_CONDITIONS} holds an entry that is not an object",
            o.kind, o.name
        ));
    }
    Ok(hpa_conditions(&conditions))
}

/// The verdict of an HPA's conditions: a degraded one first, then a healthy one.
fn hpa_conditions(conditions: &[Value]) -> Health {
    let degraded = conditions.iter().find(|c| {
        HPA_DEGRADED
            .iter()
            .any(|(kind, reason)| text(c, "type") == *kind && text(c, "reason") == *reason)
    });
    if let Some(c) = degraded {
        return Health::new(HealthStatus::Degraded, text(c, "message"));
    }
    let healthy = conditions.iter().find(|c| {
        matches!(text(c, "type"), "AbleToScale" | "ScalingLimited") && text(c, "status") == "True"
    });
    match healthy {
        Some(c) => Health::new(HealthStatus::Healthy, text(c, "message")),
        None => Health::new(HealthStatus::Progressing, WAITING_TO_AUTOSCALE),
    }
}

/// An APIService: its `Available` condition.
pub(super) fn api_service(o: &Obj<'_>) -> Result<Health, String> {
    let Some(c) = o.condition("Available")? else {
        return Ok(Health::new(
            HealthStatus::Progressing,
            "Waiting to be processed",
        ));
    };
    let message = format!("{}: {}", text(c, "reason"), text(c, "message"));
    let status = if text(c, "status") == "True" {
        HealthStatus::Healthy
    } else {
        HealthStatus::Progressing
    };
    Ok(Health::new(status, message))
}

/// An Argo Workflows Workflow: its phase.
pub(super) fn workflow(o: &Obj<'_>) -> Result<Health, String> {
    let message = o.str("status.message")?;
    let status = match o.str("status.phase")? {
        "" | "Pending" | "Running" => HealthStatus::Progressing,
        "Succeeded" => HealthStatus::Healthy,
        "Failed" | "Error" => HealthStatus::Degraded,
        _ => HealthStatus::Unknown,
    };
    Ok(Health::new(status, message))
}

/// A version of the kind that Argo CD's check does not read: Unknown, naming it.
pub(super) fn unsupported_version(o: &Obj<'_>) -> Result<Health, String> {
    Err(format!(
        "{} {}: unsupported version {} of the kind",
        o.kind, o.name, o.api_version
    ))
}
