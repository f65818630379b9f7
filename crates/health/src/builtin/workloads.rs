//! Deployment, StatefulSet, DaemonSet and ReplicaSet: kubectl's rollout-status logic, as
//! gitops-engine uses it.

use super::{Health, HealthStatus, Obj, text};

/// The controller has not yet seen the latest spec.
fn generation_pending(o: &Obj<'_>) -> Result<bool, String> {
    Ok(o.int("metadata.generation")? > o.int("status.observedGeneration")?)
}

pub(super) fn deployment(o: &Obj<'_>) -> Result<Health, String> {
    if o.bool("spec.paused")? {
        return Ok(Health::new(HealthStatus::Suspended, "Deployment is paused"));
    }
    if generation_pending(o)? {
        return Ok(progressing(
            "Waiting for rollout to finish: observed deployment generation less than desired generation",
        ));
    }
    if let Some(c) = o.condition("Progressing")?
        && text(c, "reason") == "ProgressDeadlineExceeded"
    {
        return Ok(Health::new(
            HealthStatus::Degraded,
            format!("Deployment {:?} exceeded its progress deadline", o.name),
        ));
    }
    let updated = o.int("status.updatedReplicas")?;
    let replicas = o.int("status.replicas")?;
    let available = o.int("status.availableReplicas")?;
    if let Some(desired) = o.opt_int("spec.replicas")?
        && updated < desired
    {
        return Ok(progressing(format!(
            "Waiting for rollout to finish: {updated} out of {desired} new replicas have been updated..."
        )));
    }
    if replicas > updated {
        return Ok(progressing(format!(
            "Waiting for rollout to finish: {} old replicas are pending termination...",
            replicas - updated
        )));
    }
    if available < updated {
        return Ok(progressing(format!(
            "Waiting for rollout to finish: {available} of {updated} updated replicas are available..."
        )));
    }
    Ok(Health::new(HealthStatus::Healthy, ""))
}

pub(super) fn statefulset(o: &Obj<'_>) -> Result<Health, String> {
    let observed = o.int("status.observedGeneration")?;
    if observed == 0 || o.int("metadata.generation")? > observed {
        return Ok(progressing(
            "Waiting for statefulset spec update to be observed...",
        ));
    }
    let desired = o.opt_int("spec.replicas")?;
    let ready = o.int("status.readyReplicas")?;
    if let Some(desired) = desired
        && ready < desired
    {
        return Ok(progressing(format!(
            "Waiting for {} pods to be ready...",
            desired - ready
        )));
    }
    let updated = o.int("status.updatedReplicas")?;
    // The API server defaults an absent strategy type to RollingUpdate.
    let strategy = match o.str("spec.updateStrategy.type")? {
        "" => "RollingUpdate",
        other => other,
    };
    if strategy == "RollingUpdate" && o.has("spec.updateStrategy.rollingUpdate") {
        if let (Some(desired), Some(partition)) = (
            desired,
            o.opt_int("spec.updateStrategy.rollingUpdate.partition")?,
        ) && updated < desired - partition
        {
            return Ok(progressing(format!(
                "Waiting for partitioned roll out to finish: {updated} out of {} new pods have been updated...",
                desired - partition
            )));
        }
        return Ok(Health::new(
            HealthStatus::Healthy,
            format!("partitioned roll out complete: {updated} new pods have been updated..."),
        ));
    }
    if strategy == "OnDelete" {
        return Ok(Health::new(
            HealthStatus::Healthy,
            format!("statefulset has {ready} ready pods"),
        ));
    }
    let update_revision = o.str("status.updateRevision")?;
    let current_revision = o.str("status.currentRevision")?;
    if update_revision != current_revision {
        return Ok(progressing(format!(
            "waiting for statefulset rolling update to complete {updated} pods at revision {update_revision}..."
        )));
    }
    Ok(Health::new(
        HealthStatus::Healthy,
        format!(
            "statefulset rolling update complete {} pods at revision {current_revision}...",
            o.int("status.currentReplicas")?
        ),
    ))
}

pub(super) fn daemonset(o: &Obj<'_>) -> Result<Health, String> {
    if generation_pending(o)? {
        return Ok(progressing(
            "Waiting for rollout to finish: observed daemon set generation less than desired generation",
        ));
    }
    let desired = o.int("status.desiredNumberScheduled")?;
    let updated = o.int("status.updatedNumberScheduled")?;
    if o.str("spec.updateStrategy.type")? == "OnDelete" {
        return Ok(Health::new(
            HealthStatus::Healthy,
            format!("daemon set {updated} out of {desired} new pods have been updated"),
        ));
    }
    if updated < desired {
        return Ok(progressing(format!(
            "Waiting for daemon set {:?} rollout to finish: {updated} out of {desired} new pods have been updated...",
            o.name
        )));
    }
    let available = o.int("status.numberAvailable")?;
    if available < desired {
        return Ok(progressing(format!(
            "Waiting for daemon set {:?} rollout to finish: {available} of {desired} updated pods are available...",
            o.name
        )));
    }
    Ok(Health::new(HealthStatus::Healthy, ""))
}

pub(super) fn replicaset(o: &Obj<'_>) -> Result<Health, String> {
    if generation_pending(o)? {
        return Ok(progressing(
            "Waiting for rollout to finish: observed replica set generation less than desired generation",
        ));
    }
    if let Some(c) = o.condition("ReplicaFailure")?
        && text(c, "status") == "True"
    {
        return Ok(Health::new(HealthStatus::Degraded, text(c, "message")));
    }
    let available = o.int("status.availableReplicas")?;
    if let Some(desired) = o.opt_int("spec.replicas")?
        && available < desired
    {
        return Ok(progressing(format!(
            "Waiting for rollout to finish: {available} out of {desired} new replicas are available..."
        )));
    }
    Ok(Health::new(HealthStatus::Healthy, ""))
}

fn progressing(message: impl Into<String>) -> Health {
    Health::new(HealthStatus::Progressing, message)
}
