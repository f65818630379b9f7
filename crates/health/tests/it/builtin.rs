//! Health per kind, table-driven over realistic live objects, and application health.

use fleetshard_health::{Health, HealthStatus, app_health, assess};
use serde_json::{Value, json};

use HealthStatus::{Degraded, Healthy, Missing, Progressing, Suspended, Unknown};

/// Runs a table: (case name, object, expected status, a fragment the message must contain).
fn check(cases: &[(&str, Value, HealthStatus, &str)]) {
    for (name, obj, expected, fragment) in cases {
        let health = assess(Some(obj));
        assert_eq!(health.status, *expected, "{name}: {}", health.message);
        assert!(
            health.message.contains(fragment),
            "{name}: message {:?} lacks {fragment:?}",
            health.message
        );
        assert!(health.checked, "{name}");
    }
}

fn deployment(spec: Value, generation: i64, status: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "prod", "generation": generation},
           "spec": spec, "status": status})
}

#[test]
fn deployment_rules() {
    let ok = json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3,
                    "conditions": [{"type": "Available", "status": "True"},
                                   {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}]});
    let mut deadline = ok.clone();
    deadline["conditions"][1] =
        json!({"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"});
    check(&[
        (
            "rolled out",
            deployment(json!({"replicas": 3}), 2, ok.clone()),
            Healthy,
            "",
        ),
        (
            "paused",
            deployment(json!({"replicas": 3, "paused": true}), 2, ok.clone()),
            Suspended,
            "paused",
        ),
        (
            "new generation",
            deployment(json!({"replicas": 3}), 3, ok.clone()),
            Progressing,
            "generation",
        ),
        (
            "deadline exceeded",
            deployment(json!({"replicas": 3}), 2, deadline),
            Degraded,
            "progress deadline",
        ),
        (
            "updating",
            deployment(
                json!({"replicas": 3}),
                2,
                json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 1, "availableReplicas": 3}),
            ),
            Progressing,
            "1 out of 3 new replicas",
        ),
        (
            "old replicas terminating",
            deployment(
                json!({"replicas": 3}),
                2,
                json!({"observedGeneration": 2, "replicas": 4, "updatedReplicas": 3, "availableReplicas": 3}),
            ),
            Progressing,
            "1 old replicas",
        ),
        (
            "not yet available",
            deployment(
                json!({"replicas": 3}),
                2,
                json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 2}),
            ),
            Progressing,
            "2 of 3 updated replicas",
        ),
        (
            "scaled to zero",
            deployment(json!({"replicas": 0}), 1, json!({"observedGeneration": 1})),
            Healthy,
            "",
        ),
    ]);
}

fn statefulset(spec: Value, status: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "prod", "generation": 5},
           "spec": spec, "status": status})
}

#[test]
fn statefulset_rules() {
    let rolling = |partition: i64| json!({"replicas": 5, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": partition}}});
    let status = |ready: i64, updated: i64| {
        json!({"observedGeneration": 5, "replicas": 5, "readyReplicas": ready, "updatedReplicas": updated, "currentReplicas": 5,
               "currentRevision": "db-7d9f", "updateRevision": "db-7d9f"})
    };
    let mut revisions = status(5, 5);
    revisions["updateRevision"] = json!("db-85c1");
    check(&[
        (
            "all updated and ready",
            statefulset(rolling(0), status(5, 5)),
            Healthy,
            "5 new pods",
        ),
        (
            "spec not observed",
            statefulset(rolling(0), json!({"observedGeneration": 4})),
            Progressing,
            "observed",
        ),
        (
            "never observed",
            statefulset(rolling(0), json!({})),
            Progressing,
            "observed",
        ),
        (
            "pods not ready",
            statefulset(rolling(0), status(3, 5)),
            Progressing,
            "2 pods to be ready",
        ),
        (
            "partition reached",
            statefulset(rolling(2), status(5, 3)),
            Healthy,
            "partitioned roll out complete",
        ),
        (
            "partition not reached",
            statefulset(rolling(2), status(5, 2)),
            Progressing,
            "2 out of 3",
        ),
        (
            "on delete",
            statefulset(
                json!({"replicas": 5, "updateStrategy": {"type": "OnDelete"}}),
                revisions.clone(),
            ),
            Healthy,
            "5 ready",
        ),
        (
            "revision rolling",
            statefulset(
                json!({"replicas": 5, "updateStrategy": {"type": "RollingUpdate"}}),
                revisions,
            ),
            Progressing,
            "db-85c1",
        ),
        (
            "revisions equal",
            statefulset(json!({"replicas": 5}), status(5, 5)),
            Healthy,
            "db-7d9f",
        ),
    ]);
}

#[test]
fn daemonset_rules() {
    let ds = |strategy: &str, generation: i64, desired: i64, updated: i64, available: i64| {
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "generation": generation},
               "spec": {"updateStrategy": {"type": strategy}},
               "status": {"observedGeneration": 2, "desiredNumberScheduled": desired, "updatedNumberScheduled": updated,
                          "numberAvailable": available, "numberReady": available}})
    };
    check(&[
        ("rolled out", ds("RollingUpdate", 2, 4, 4, 4), Healthy, ""),
        (
            "new generation",
            ds("RollingUpdate", 3, 4, 4, 4),
            Progressing,
            "generation",
        ),
        (
            "updating",
            ds("RollingUpdate", 2, 4, 2, 4),
            Progressing,
            "2 out of 4 new pods",
        ),
        (
            "not available",
            ds("RollingUpdate", 2, 4, 4, 3),
            Progressing,
            "3 of 4 updated pods",
        ),
        (
            "on delete",
            ds("OnDelete", 2, 4, 1, 4),
            Healthy,
            "1 out of 4",
        ),
    ]);
}

#[test]
fn replicaset_rules() {
    let rs = |available: i64, conditions: Value| {
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web-5d8f", "generation": 1},
               "spec": {"replicas": 2}, "status": {"observedGeneration": 1, "replicas": 2, "availableReplicas": available, "conditions": conditions}})
    };
    let quota = json!([{"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": "exceeded quota: pods"}]);
    check(&[
        ("available", rs(2, json!([])), Healthy, ""),
        ("replica failure", rs(1, quota), Degraded, "exceeded quota"),
        (
            "resolved failure",
            rs(2, json!([{"type": "ReplicaFailure", "status": "False"}])),
            Healthy,
            "",
        ),
        ("starting", rs(1, json!([])), Progressing, "1 out of 2"),
    ]);
}

fn pod(restart_policy: Option<&str>, status: Value) -> Value {
    let mut spec = json!({"containers": [{"name": "app", "image": "app:1"}]});
    if let Some(policy) = restart_policy {
        spec["restartPolicy"] = json!(policy);
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "app-7c9", "namespace": "prod"}, "spec": spec, "status": status})
}

#[test]
fn pod_rules() {
    let waiting = |reason: &str, phase: &str| {
        json!({"phase": phase, "containerStatuses": [{"name": "app", "ready": false, "restartCount": 4,
               "state": {"waiting": {"reason": reason, "message": format!("{reason}: container app")}}}]})
    };
    let running = |ready: &str, restarted: bool| {
        let mut c = json!({"name": "app", "ready": ready == "True", "state": {"running": {"startedAt": "2026-11-21T10:00:00Z"}}});
        if restarted {
            c["lastState"] = json!({"terminated": {"exitCode": 1, "reason": "Error"}});
        }
        json!({"phase": "Running", "conditions": [{"type": "Ready", "status": ready}], "containerStatuses": [c]})
    };
    let failed_with = |terminated: Value| json!({"phase": "Failed", "containerStatuses": [{"name": "app", "state": {"terminated": terminated}}]});
    check(&[
        (
            "running and ready",
            pod(Some("Always"), running("True", false)),
            Healthy,
            "",
        ),
        (
            "restart policy defaults to Always",
            pod(None, running("True", false)),
            Healthy,
            "",
        ),
        (
            "crash loop",
            pod(Some("Always"), waiting("CrashLoopBackOff", "Running")),
            Degraded,
            "CrashLoopBackOff",
        ),
        (
            "image pull backoff",
            pod(Some("Always"), waiting("ImagePullBackOff", "Pending")),
            Degraded,
            "ImagePullBackOff",
        ),
        (
            "err image pull",
            pod(None, waiting("ErrImagePull", "Pending")),
            Degraded,
            "ErrImagePull",
        ),
        (
            "config error",
            pod(None, waiting("CreateContainerConfigError", "Pending")),
            Degraded,
            "CreateContainerConfigError",
        ),
        (
            "hook pod waiting for its image",
            pod(Some("Never"), waiting("ImagePullBackOff", "Pending")),
            Progressing,
            "",
        ),
        (
            "creating",
            pod(None, waiting("ContainerCreating", "Pending")),
            Progressing,
            "",
        ),
        (
            "succeeded",
            pod(Some("Never"), json!({"phase": "Succeeded"})),
            Healthy,
            "",
        ),
        (
            "failed with message",
            pod(
                Some("Never"),
                json!({"phase": "Failed", "message": "Pod was evicted"}),
            ),
            Degraded,
            "evicted",
        ),
        (
            "failed OOM",
            pod(
                Some("Never"),
                failed_with(json!({"exitCode": 137, "reason": "OOMKilled"})),
            ),
            Degraded,
            "OOMKilled",
        ),
        (
            "failed exit code",
            pod(
                Some("Never"),
                failed_with(json!({"exitCode": 2, "reason": "Error"})),
            ),
            Degraded,
            "exit code 2",
        ),
        (
            "not ready after a crash",
            pod(None, running("False", true)),
            Degraded,
            "",
        ),
        (
            "not ready yet",
            pod(None, running("False", false)),
            Progressing,
            "",
        ),
        (
            "hook pod running",
            pod(Some("OnFailure"), running("True", false)),
            Progressing,
            "",
        ),
        ("no phase", pod(None, json!({})), Unknown, ""),
    ]);
}

#[test]
fn service_ingress_and_pvc() {
    let svc = |kind: &str, ingress: Value| {
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {"type": kind, "ports": [{"port": 80}]},
               "status": {"loadBalancer": {"ingress": ingress}}})
    };
    let ing = |ingress: Value| {
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "web"},
               "spec": {"rules": [{"host": "shop.example.com"}]}, "status": {"loadBalancer": {"ingress": ingress}}})
    };
    let pvc = |phase: Value| {
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
               "spec": {"resources": {"requests": {"storage": "1Gi"}}}, "status": {"phase": phase}})
    };
    check(&[
        ("cluster ip", svc("ClusterIP", json!([])), Healthy, ""),
        (
            "lb pending",
            svc("LoadBalancer", json!([])),
            Progressing,
            "load balancer",
        ),
        (
            "lb ready",
            svc("LoadBalancer", json!([{"ip": "203.0.113.7"}])),
            Healthy,
            "",
        ),
        ("ingress pending", ing(json!([])), Progressing, ""),
        (
            "ingress ready",
            ing(json!([{"hostname": "lb.example.com"}])),
            Healthy,
            "",
        ),
        ("bound", pvc(json!("Bound")), Healthy, ""),
        ("pending", pvc(json!("Pending")), Progressing, ""),
        ("lost", pvc(json!("Lost")), Degraded, ""),
        ("no phase", pvc(Value::Null), Unknown, ""),
    ]);
}

#[test]
fn job_and_cronjob() {
    let job = |status: Value| json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "migrate"}, "spec": {}, "status": status});
    let cron = |suspend: bool, status: Option<Value>| {
        let mut obj = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "report"},
                             "spec": {"schedule": "0 * * * *", "suspend": suspend}});
        if let Some(status) = status {
            obj["status"] = status;
        }
        obj
    };
    check(&[
        (
            "job running",
            job(json!({"active": 1})),
            Progressing,
            "1 active",
        ),
        (
            "job complete",
            job(json!({"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]})),
            Healthy,
            "",
        ),
        (
            "job failed",
            job(
                json!({"failed": 6, "conditions": [{"type": "Failed", "status": "True", "message": "Job has reached the specified backoff limit"}]}),
            ),
            Degraded,
            "backoff limit",
        ),
        (
            "job condition not true",
            job(json!({"active": 1, "conditions": [{"type": "Failed", "status": "False"}]})),
            Progressing,
            "",
        ),
        (
            "job suspended",
            job(json!({"conditions": [{"type": "Suspended", "status": "True"}]})),
            Suspended,
            "",
        ),
        (
            "cron suspended",
            cron(true, Some(json!({}))),
            Suspended,
            "Suspended",
        ),
        ("cron no status", cron(false, None), Progressing, "Waiting"),
        (
            "cron never scheduled",
            cron(false, Some(json!({}))),
            Healthy,
            "not been scheduled",
        ),
        (
            "cron first run",
            cron(
                false,
                Some(json!({"lastScheduleTime": "2026-11-21T10:00:00Z"})),
            ),
            Healthy,
            "never completed",
        ),
        (
            "cron last run failed",
            cron(
                false,
                Some(
                    json!({"lastScheduleTime": "2026-11-21T10:00:00Z", "lastSuccessfulTime": "2026-11-21T09:00:05Z"}),
                ),
            ),
            Degraded,
            "last execution",
        ),
        (
            "cron last run succeeded",
            cron(
                false,
                Some(
                    json!({"lastScheduleTime": "2026-11-21T10:00:00Z", "lastSuccessfulTime": "2026-11-21T10:00:07Z"}),
                ),
            ),
            Healthy,
            "successfully",
        ),
        (
            "cron running",
            cron(
                false,
                Some(
                    json!({"lastScheduleTime": "2026-11-21T10:00:00Z", "lastSuccessfulTime": "2026-11-21T09:00:05Z",
                                    "active": [{"name": "report-29000"}]}),
                ),
            ),
            Healthy,
            "running",
        ),
        (
            "cron bad timestamp",
            cron(
                false,
                Some(
                    json!({"lastScheduleTime": "yesterday", "lastSuccessfulTime": "2026-11-21T09:00:05Z"}),
                ),
            ),
            Unknown,
            "status.lastScheduleTime",
        ),
    ]);
}

#[test]
fn missing_deleting_unknown_kinds_and_bad_fields() {
    let missing = assess(None);
    assert_eq!((missing.status, missing.checked), (Missing, true));

    let deleting = deployment(json!({"replicas": 1}), 1, json!({"observedGeneration": 1}));
    let mut deleting = deleting;
    deleting["metadata"]["deletionTimestamp"] = json!("2026-11-21T10:00:00Z");
    assert_eq!(
        assess(Some(&deleting)),
        Health {
            status: Progressing,
            message: "Pending deletion".into(),
            checked: true
        }
    );

    let cm =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {}});
    let health = assess(Some(&cm));
    assert_eq!((health.status, health.checked), (Unknown, false));
    assert!(health.message.contains("ConfigMap"), "{}", health.message);

    // A Deployment in a group without a rule is not judged by the Deployment rule.
    let odd =
        json!({"apiVersion": "example.com/v1", "kind": "Deployment", "metadata": {"name": "x"}});
    assert!(!assess(Some(&odd)).checked);

    let bad = deployment(
        json!({"replicas": "three"}),
        1,
        json!({"observedGeneration": 1, "updatedReplicas": 3}),
    );
    let health = assess(Some(&bad));
    assert_eq!(health.status, Unknown);
    assert_eq!(
        health.message,
        "Deployment web: field spec.replicas is not an integer"
    );
    assert!(health.checked);

    assert_eq!(assess(Some(&json!([1, 2]))).status, Unknown);
}

#[test]
fn app_health_is_the_worst_checked_resource_in_argo_order() {
    let h = |status: HealthStatus| Health {
        status,
        message: String::new(),
        checked: true,
    };
    let order = [Healthy, Suspended, Progressing, Missing, Degraded, Unknown];
    for (i, worse) in order.iter().enumerate() {
        for better in &order[..i] {
            assert!(better < worse, "{better} should be better than {worse}");
            assert_eq!(app_health([&h(*better), &h(*worse), &h(*better)]), *worse);
        }
    }
    let unchecked = Health {
        status: Unknown,
        message: "no health check".into(),
        checked: false,
    };
    assert_eq!(
        app_health([&h(Healthy), &unchecked]),
        Healthy,
        "kinds without a rule do not count"
    );
    assert_eq!(app_health([&unchecked]), Healthy);
    assert_eq!(app_health(std::iter::empty::<&Health>()), Healthy);
    assert_eq!(
        app_health([&h(Missing), &h(Progressing), &unchecked]),
        Missing
    );
}
