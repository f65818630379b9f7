//! The built-in checks Argo CD makes in Go beyond the workloads: HorizontalPodAutoscaler
//! (v1 and v2), APIService and Argo Workflows' Workflow.

use fleetshard_health::{HealthStatus, assess};
use serde_json::{Value, json};

use HealthStatus::{Degraded, Healthy, Progressing, Unknown};

fn verdict(obj: &Value) -> (HealthStatus, String) {
    let h = assess(Some(obj));
    assert!(h.checked, "{obj}");
    (h.status, h.message)
}

fn hpa_v2(conditions: Value) -> Value {
    json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
           "metadata": {"name": "web"}, "status": {"conditions": conditions}})
}

fn condition(kind: &str, status: &str, reason: &str, message: &str) -> Value {
    json!({"type": kind, "status": status, "reason": reason, "message": message})
}

#[test]
fn hpa_v2_conditions() {
    let able = condition(
        "AbleToScale",
        "True",
        "ReadyForNewScale",
        "recommended size matches current size",
    );
    let active = condition(
        "ScalingActive",
        "True",
        "ValidMetricFound",
        "the HPA was able to compute",
    );
    assert_eq!(
        verdict(&hpa_v2(json!([able.clone(), active]))),
        (Healthy, "recommended size matches current size".into())
    );
    // A failure wins over a healthy condition, whatever the order.
    let failed = condition(
        "ScalingActive",
        "False",
        "FailedGetResourceMetric",
        "missing request for cpu",
    );
    assert_eq!(
        verdict(&hpa_v2(json!([able.clone(), failed]))),
        (Degraded, "missing request for cpu".into())
    );
    let scale = condition(
        "AbleToScale",
        "False",
        "FailedGetScale",
        "no such deployment",
    );
    assert_eq!(verdict(&hpa_v2(json!([scale]))).0, Degraded);
    assert_eq!(
        verdict(&hpa_v2(json!([condition(
            "AbleToScale",
            "False",
            "FailedUpdateScale",
            ""
        )])))
        .0,
        Degraded
    );
    for reason in [
        "FailedGetObjectMetric",
        "FailedGetPodsMetric",
        "FailedGetExternalMetric",
        "FailedComputeMetricsReplicas",
        "InvalidSelector",
    ] {
        assert_eq!(
            verdict(&hpa_v2(json!([condition(
                "ScalingActive",
                "False",
                reason,
                ""
            )])))
            .0,
            Degraded,
            "{reason}"
        );
    }
    let limited = condition("ScalingLimited", "True", "TooManyReplicas", "capped at max");
    assert_eq!(
        verdict(&hpa_v2(json!([limited]))),
        (Healthy, "capped at max".into())
    );
    // No condition saying either way: waiting.
    let not_able = condition("AbleToScale", "False", "BackoffBoth", "");
    assert_eq!(
        verdict(&hpa_v2(json!([not_able]))),
        (Progressing, "Waiting to Autoscale".into())
    );
    assert_eq!(
        verdict(&hpa_v2(json!([]))),
        (Progressing, "Waiting to Autoscale".into())
    );
    let mut none = hpa_v2(json!([]));
    none.as_object_mut().unwrap().remove("status");
    assert_eq!(verdict(&none).0, Progressing);
}

#[test]
fn hpa_v1_reads_its_conditions_annotation() {
    let v1 = |annotation: Option<&str>| {
        let mut o = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"}});
        if let Some(a) = annotation {
            o["metadata"]["annotations"] = json!({"autoscaling.alpha.kubernetes.io/conditions": a});
        }
        o
    };
    assert_eq!(
        verdict(&v1(None)),
        (Progressing, "Waiting to Autoscale".into())
    );
    assert_eq!(verdict(&v1(Some("[]"))).0, Progressing);
    let healthy =
        r#"[{"type":"AbleToScale","status":"True","reason":"SucceededGetScale","message":"ok"}]"#;
    assert_eq!(verdict(&v1(Some(healthy))), (Healthy, "ok".into()));
    let degraded = r#"[{"type":"ScalingActive","status":"False","reason":"InvalidSelector","message":"bad selector"}]"#;
    assert_eq!(
        verdict(&v1(Some(degraded))),
        (Degraded, "bad selector".into())
    );
    let (status, message) = verdict(&v1(Some("not json")));
    assert_eq!(status, Unknown);
    assert!(
        message.contains("autoscaling.alpha.kubernetes.io/conditions"),
        "{message}"
    );
    // Versions Argo CD's check does not read are Unknown, as there.
    let beta = json!({"apiVersion": "autoscaling/v2beta2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"}});
    assert_eq!(verdict(&beta).0, Unknown);
}

#[test]
fn api_service_available_condition() {
    let svc = |version: &str, conditions: Value| {
        json!({"apiVersion": format!("apiregistration.k8s.io/{version}"), "kind": "APIService",
               "metadata": {"name": "v1beta1.metrics.k8s.io"}, "status": {"conditions": conditions}})
    };
    for version in ["v1", "v1beta1"] {
        assert_eq!(
            verdict(&svc(
                version,
                json!([condition(
                    "Available",
                    "True",
                    "Passed",
                    "all checks passed"
                )])
            )),
            (Healthy, "Passed: all checks passed".into())
        );
        assert_eq!(
            verdict(&svc(
                version,
                json!([condition(
                    "Available",
                    "False",
                    "MissingEndpoints",
                    "no endpoints"
                )])
            )),
            (Progressing, "MissingEndpoints: no endpoints".into())
        );
        assert_eq!(
            verdict(&svc(version, json!([]))),
            (Progressing, "Waiting to be processed".into())
        );
    }
}

#[test]
fn workflow_phases() {
    let wf = |phase: Option<&str>| {
        let mut o = json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "metadata": {"name": "build"},
                           "status": {"message": "step 2"}});
        if let Some(p) = phase {
            o["status"]["phase"] = json!(p);
        }
        o
    };
    for (phase, status) in [
        (None, Progressing),
        (Some("Pending"), Progressing),
        (Some("Running"), Progressing),
        (Some("Succeeded"), Healthy),
        (Some("Failed"), Degraded),
        (Some("Error"), Degraded),
        (Some("Paused"), Unknown),
    ] {
        assert_eq!(verdict(&wf(phase)), (status, "step 2".into()), "{phase:?}");
    }
}
