//! Pod, Service, Ingress and PersistentVolumeClaim.

use serde_json::Value;

use super::{Health, HealthStatus, Obj, text};

pub(super) fn pod(o: &Obj<'_>) -> Result<Health, String> {
    // The API server defaults an absent restart policy to Always.
    let restart_policy = match o.str("spec.restartPolicy")? {
        "" => "Always",
        other => other,
    };
    let statuses = o.list("status.containerStatuses")?;
    // Only for long-running pods: a hook pod (OnFailure/Never) that cannot pull its image
    // yet must not fail the sync it belongs to; it may still succeed.
    if restart_policy == "Always" {
        let stuck: Vec<&str> = statuses
            .iter()
            .filter(|c| {
                let reason = text(c, "state.waiting.reason");
                reason.starts_with("Err")
                    || reason.ends_with("Error")
                    || reason.ends_with("BackOff")
            })
            .map(|c| match text(c, "state.waiting.message") {
                "" => text(c, "state.waiting.reason"),
                message => message,
            })
            .collect();
        if !stuck.is_empty() {
            return Ok(Health::new(HealthStatus::Degraded, stuck.join(", ")));
        }
    }
    let message = o.str("status.message")?;
    match o.str("status.phase")? {
        "Pending" => Ok(Health::new(HealthStatus::Progressing, message)),
        "Succeeded" => Ok(Health::new(HealthStatus::Healthy, message)),
        "Failed" => {
            if !message.is_empty() {
                return Ok(Health::new(HealthStatus::Degraded, message));
            }
            let init = o.list("status.initContainerStatuses")?;
            let why = init
                .iter()
                .chain(statuses)
                .find_map(failure_message)
                .unwrap_or_default();
            Ok(Health::new(HealthStatus::Degraded, why))
        }
        "Running" if restart_policy == "Always" => {
            let ready = o
                .condition("Ready")?
                .is_some_and(|c| text(c, "status") == "True");
            if ready {
                return Ok(Health::new(HealthStatus::Healthy, message));
            }
            let restarted = statuses.iter().any(|c| {
                c.pointer("/lastState/terminated")
                    .is_some_and(|t| !t.is_null())
            });
            let status = if restarted {
                HealthStatus::Degraded
            } else {
                HealthStatus::Progressing
            };
            Ok(Health::new(status, message))
        }
        // OnFailure / Never pods have a finite life (typically hooks): running is not done.
        "Running" => Ok(Health::new(HealthStatus::Progressing, message)),
        _ => Ok(Health::new(HealthStatus::Unknown, message)),
    }
}

/// Why a terminated container failed, if it says.
fn failure_message(container: &Value) -> Option<String> {
    let terminated = container
        .pointer("/state/terminated")
        .filter(|t| !t.is_null())?;
    match (text(terminated, "message"), text(terminated, "reason")) {
        ("", "OOMKilled") => Some("OOMKilled".to_owned()),
        ("", _) => {
            let code = terminated
                .get("exitCode")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            (code != 0).then(|| {
                format!(
                    "container {:?} failed with exit code {code}",
                    text(container, "name")
                )
            })
        }
        (message, _) => Some(message.to_owned()),
    }
}

pub(super) fn service(o: &Obj<'_>) -> Result<Health, String> {
    if o.str("spec.type")? == "LoadBalancer" && o.list("status.loadBalancer.ingress")?.is_empty() {
        return Ok(Health::new(
            HealthStatus::Progressing,
            "Waiting for the load balancer's address",
        ));
    }
    Ok(Health::new(HealthStatus::Healthy, ""))
}

pub(super) fn ingress(o: &Obj<'_>) -> Result<Health, String> {
    if o.list("status.loadBalancer.ingress")?.is_empty() {
        return Ok(Health::new(
            HealthStatus::Progressing,
            "Waiting for the ingress controller's address",
        ));
    }
    Ok(Health::new(HealthStatus::Healthy, ""))
}

pub(super) fn pvc(o: &Obj<'_>) -> Result<Health, String> {
    let (status, message) = match o.str("status.phase")? {
        "Bound" => (HealthStatus::Healthy, ""),
        "Pending" => (
            HealthStatus::Progressing,
            "Waiting for the claim to be bound",
        ),
        "Lost" => (HealthStatus::Degraded, "The claim lost its volume"),
        _ => (HealthStatus::Unknown, "No claim phase"),
    };
    Ok(Health::new(status, message))
}
