//! Values the Kubernetes API server fills in when an object leaves them out (its
//! `SetDefaults_*` functions), for the kinds fleetshard compares. A field at its default
//! is equal to the field's absence: a manifest that spells out `imagePullPolicy:
//! IfNotPresent` matches a live object without it, and removing `replicas: 1` from a
//! manifest changes nothing once the server defaults it back to 1.
//!
//! Paths are patterns of field names where `*` stands for any list element. Pod-spec
//! defaults apply wherever a pod spec sits: `spec` of a Pod, `spec.template.spec` of the
//! workload kinds and Job, `spec.jobTemplate.spec.template.spec` of a CronJob.

use serde_json::{Map, Value, json};

/// The default of the field at `pattern` in an object of `kind`, given the map that holds
/// the field (`parent`, for defaults that depend on a sibling such as `imagePullPolicy` on
/// `image` or a Service port's `targetPort` on `port`). `None` when there is no default.
pub(crate) fn default_for(
    kind: &str,
    pattern: &[&str],
    parent: &Map<String, Value>,
) -> Option<Value> {
    if let Some(pod_spec) = pod_spec_path(kind, pattern) {
        return pod_spec_default(pod_spec, parent);
    }
    let rest = pattern.strip_prefix(&["spec"])?;
    match kind {
        "Deployment" => deployment_default(rest),
        "StatefulSet" => statefulset_default(rest),
        "DaemonSet" => daemonset_default(rest),
        "ReplicaSet" => match rest {
            ["replicas"] => Some(json!(1)),
            _ => None,
        },
        "Job" => job_default(rest),
        "CronJob" => match rest {
            ["concurrencyPolicy"] => Some(json!("Allow")),
            ["suspend"] => Some(json!(false)),
            ["successfulJobsHistoryLimit"] => Some(json!(3)),
            ["failedJobsHistoryLimit"] => Some(json!(1)),
            ["jobTemplate", "spec", job @ ..] => job_default(job),
            _ => None,
        },
        "Service" => service_default(rest, parent),
        "PersistentVolumeClaim" => match rest {
            ["volumeMode"] => Some(json!("Filesystem")),
            _ => None,
        },
        _ => None,
    }
}

/// The part of `pattern` inside the object's pod spec, if the pattern is inside one.
fn pod_spec_path<'p>(kind: &str, pattern: &'p [&'p str]) -> Option<&'p [&'p str]> {
    let prefix: &[&str] = match kind {
        "Pod" => &["spec"],
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "Job" => {
            &["spec", "template", "spec"]
        }
        "CronJob" => &["spec", "jobTemplate", "spec", "template", "spec"],
        _ => return None,
    };
    pattern.strip_prefix(prefix)
}

fn deployment_default(rest: &[&str]) -> Option<Value> {
    Some(match rest {
        ["replicas"] => json!(1),
        ["revisionHistoryLimit"] => json!(10),
        ["progressDeadlineSeconds"] => json!(600),
        ["strategy"] => {
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}})
        }
        ["strategy", "type"] => json!("RollingUpdate"),
        ["strategy", "rollingUpdate"] => json!({"maxSurge": "25%", "maxUnavailable": "25%"}),
        ["strategy", "rollingUpdate", "maxSurge" | "maxUnavailable"] => json!("25%"),
        _ => return None,
    })
}

fn statefulset_default(rest: &[&str]) -> Option<Value> {
    Some(match rest {
        ["replicas"] => json!(1),
        ["revisionHistoryLimit"] => json!(10),
        ["podManagementPolicy"] => json!("OrderedReady"),
        ["updateStrategy"] => json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
        ["updateStrategy", "type"] => json!("RollingUpdate"),
        ["updateStrategy", "rollingUpdate"] => json!({"partition": 0}),
        ["updateStrategy", "rollingUpdate", "partition"] => json!(0),
        ["persistentVolumeClaimRetentionPolicy"] => {
            json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
        }
        [
            "persistentVolumeClaimRetentionPolicy",
            "whenDeleted" | "whenScaled",
        ] => json!("Retain"),
        ["volumeClaimTemplates", "*", "spec", "volumeMode"] => json!("Filesystem"),
        _ => return None,
    })
}

fn daemonset_default(rest: &[&str]) -> Option<Value> {
    Some(match rest {
        ["revisionHistoryLimit"] => json!(10),
        ["updateStrategy"] => {
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
        }
        ["updateStrategy", "type"] => json!("RollingUpdate"),
        ["updateStrategy", "rollingUpdate"] => json!({"maxUnavailable": 1, "maxSurge": 0}),
        ["updateStrategy", "rollingUpdate", "maxUnavailable"] => json!(1),
        ["updateStrategy", "rollingUpdate", "maxSurge"] => json!(0),
        _ => return None,
    })
}

fn job_default(rest: &[&str]) -> Option<Value> {
    Some(match rest {
        ["backoffLimit"] => json!(6),
        ["completions" | "parallelism"] => json!(1),
        ["completionMode"] => json!("NonIndexed"),
        ["suspend"] => json!(false),
        _ => return None,
    })
}

fn service_default(rest: &[&str], parent: &Map<String, Value>) -> Option<Value> {
    Some(match rest {
        ["type"] => json!("ClusterIP"),
        ["sessionAffinity"] => json!("None"),
        ["internalTrafficPolicy"] => json!("Cluster"),
        ["ipFamilyPolicy"] => json!("SingleStack"),
        ["ports", "*", "protocol"] => json!("TCP"),
        // An absent targetPort means "the same as port".
        ["ports", "*", "targetPort"] => parent.get("port")?.clone(),
        _ => return None,
    })
}

fn pod_spec_default(rest: &[&str], parent: &Map<String, Value>) -> Option<Value> {
    Some(match rest {
        ["restartPolicy"] => json!("Always"),
        ["dnsPolicy"] => json!("ClusterFirst"),
        ["schedulerName"] => json!("default-scheduler"),
        ["securityContext"] => json!({}),
        ["terminationGracePeriodSeconds"] => json!(30),
        [
            "volumes",
            "*",
            "configMap" | "secret" | "projected" | "downwardAPI",
            "defaultMode",
        ] => json!(420),
        [
            "containers" | "initContainers" | "ephemeralContainers",
            "*",
            container @ ..,
        ] => return container_default(container, parent),
        _ => return None,
    })
}

fn container_default(rest: &[&str], parent: &Map<String, Value>) -> Option<Value> {
    Some(match rest {
        ["terminationMessagePath"] => json!("/dev/termination-log"),
        ["terminationMessagePolicy"] => json!("File"),
        ["resources"] => json!({}),
        ["imagePullPolicy"] => json!(image_pull_policy(parent.get("image")?.as_str()?)),
        ["ports", "*", "protocol"] => json!("TCP"),
        ["env", "*", "valueFrom", "fieldRef", "apiVersion"] => json!("v1"),
        ["livenessProbe" | "readinessProbe" | "startupProbe", probe] => match *probe {
            "timeoutSeconds" => json!(1),
            "periodSeconds" => json!(10),
            "successThreshold" => json!(1),
            "failureThreshold" => json!(3),
            _ => return None,
        },
        [
            "livenessProbe" | "readinessProbe" | "startupProbe",
            "httpGet",
            "scheme",
        ] => json!("HTTP"),
        _ => return None,
    })
}

/// `Always` for an image without a tag or tagged `latest`, `IfNotPresent` otherwise (a
/// digest counts as pinned).
fn image_pull_policy(image: &str) -> &'static str {
    if image.contains('@') {
        return "IfNotPresent";
    }
    // The tag follows the last ':' after the last '/' (a registry port is before a '/').
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.rsplit_once(':') {
        Some((_, "latest")) | None => "Always",
        Some(_) => "IfNotPresent",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_policy_follows_the_tag() {
        assert_eq!(image_pull_policy("nginx"), "Always");
        assert_eq!(image_pull_policy("nginx:latest"), "Always");
        assert_eq!(image_pull_policy("nginx:1.27"), "IfNotPresent");
        assert_eq!(image_pull_policy("registry:5000/nginx"), "Always");
        assert_eq!(image_pull_policy("registry:5000/nginx:1.2"), "IfNotPresent");
        assert_eq!(image_pull_policy("nginx@sha256:abcd"), "IfNotPresent");
    }

    #[test]
    fn pod_spec_defaults_apply_wherever_a_pod_spec_sits() {
        let empty = Map::new();
        let path = ["spec", "template", "spec", "dnsPolicy"];
        assert_eq!(
            default_for("Deployment", &path, &empty),
            Some(json!("ClusterFirst"))
        );
        assert_eq!(
            default_for("Pod", &["spec", "dnsPolicy"], &empty),
            Some(json!("ClusterFirst"))
        );
        let cron = [
            "spec",
            "jobTemplate",
            "spec",
            "template",
            "spec",
            "schedulerName",
        ];
        assert_eq!(
            default_for("CronJob", &cron, &empty),
            Some(json!("default-scheduler"))
        );
        assert_eq!(
            default_for("ConfigMap", &["spec", "dnsPolicy"], &empty),
            None
        );
    }
}
