use serde_json::{Value, json};

use super::{PredictionError, remove_webhook_mutations};

const MANAGER: &str = "fleetshard";

/// A Deployment as a dry run of fleetshard's apply answers it: `managed` is fleetshard's
/// `fieldsV1`; a webhook's changes are owned by no entry (as a real API server records them).
fn predicted(labels: Value, containers: Value, managed: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": labels,
                     "managedFields": [{"manager": MANAGER, "operation": "Apply", "fieldsV1": managed}]},
        "spec": {"replicas": 2, "template": {"spec": {"containers": containers}}},
    })
}

fn fleetshard_fields() -> Value {
    json!({"f:metadata": {"f:labels": {"f:app": {}}},
           "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
               "k:{\"name\":\"web\"}": {".": {}, "f:name": {}, "f:image": {}, "f:imagePullPolicy": {}}}}}}})
}

#[test]
fn a_field_a_webhook_adds_takes_its_live_value_or_goes() {
    let p = predicted(
        json!({"app": "web", "injected": "by-webhook"}),
        json!([{"name": "web", "image": "nginx:1", "imagePullPolicy": "IfNotPresent"}]),
        fleetshard_fields(),
    );
    // Live from before the webhook existed: the injected label goes.
    let live = predicted(
        json!({"app": "web"}),
        json!([{"name": "web", "image": "nginx:1", "imagePullPolicy": "IfNotPresent"}]),
        fleetshard_fields(),
    );
    let out = remove_webhook_mutations(&p, &live, MANAGER).unwrap();
    assert_eq!(out["metadata"]["labels"], json!({"app": "web"}));
    // Live as the webhook left it on the real write, another value: live's stays.
    let live = predicted(
        json!({"app": "web", "injected": "at-create"}),
        json!([{"name": "web", "image": "nginx:1", "imagePullPolicy": "IfNotPresent"}]),
        fleetshard_fields(),
    );
    let out = remove_webhook_mutations(&p, &live, MANAGER).unwrap();
    assert_eq!(
        out["metadata"]["labels"],
        json!({"app": "web", "injected": "at-create"})
    );
    // The predicted object's own managedFields are kept.
    assert_eq!(
        out["metadata"]["managedFields"],
        p["metadata"]["managedFields"]
    );
}

#[test]
fn a_field_the_applier_owns_keeps_its_predicted_value() {
    // The webhook rewrote a field the apply set; ownership stays with the applier (the
    // API server records the apply before admission), so the prediction stands.
    let p = predicted(
        json!({"app": "web"}),
        json!([{"name": "web", "image": "nginx:2", "imagePullPolicy": "IfNotPresent"}]),
        fleetshard_fields(),
    );
    let live = predicted(
        json!({"app": "old"}),
        json!([{"name": "web", "image": "nginx:1", "imagePullPolicy": "Always"}]),
        fleetshard_fields(),
    );
    let out = remove_webhook_mutations(&p, &live, MANAGER).unwrap();
    assert_eq!(out["metadata"]["labels"]["app"], "web");
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"],
        p["spec"]["template"]["spec"]["containers"]
    );
    assert_eq!(out["spec"]["replicas"], 2);
}

#[test]
fn an_injected_list_element_is_matched_by_key_and_a_new_one_dropped() {
    let p = predicted(
        json!({"app": "web"}),
        json!([{"name": "web", "image": "nginx:1"}, {"name": "sidecar", "image": "proxy:2"}]),
        fleetshard_fields(),
    );
    let live = predicted(
        json!({"app": "web"}),
        json!([{"name": "web", "image": "nginx:1"}, {"name": "sidecar", "image": "proxy:1"}]),
        fleetshard_fields(),
    );
    let out = remove_webhook_mutations(&p, &live, MANAGER).unwrap();
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"],
        json!([{"name": "web", "image": "nginx:1"}, {"name": "sidecar", "image": "proxy:1"}])
    );
    let before_webhook = predicted(
        json!({"app": "web"}),
        json!([{"name": "web", "image": "nginx:1"}]),
        fleetshard_fields(),
    );
    let out = remove_webhook_mutations(&p, &before_webhook, MANAGER).unwrap();
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"],
        json!([{"name": "web", "image": "nginx:1"}])
    );
}

#[test]
fn what_the_prediction_removed_stays_removed() {
    // The apply dropped a label it owned before; a webhook removed an annotation.
    let mut p = predicted(
        json!({"app": "web"}),
        json!([{"name": "web"}]),
        fleetshard_fields(),
    );
    p["metadata"]["annotations"] = json!({"kept": "1"});
    let mut live = predicted(
        json!({"app": "web", "dropped": "x"}),
        json!([{"name": "web"}]),
        fleetshard_fields(),
    );
    live["metadata"]["annotations"] = json!({"kept": "1", "removed-by-webhook": "y"});
    let out = remove_webhook_mutations(&p, &live, MANAGER).unwrap();
    assert_eq!(out["metadata"]["labels"], json!({"app": "web"}));
    assert_eq!(out["metadata"]["annotations"], json!({"kept": "1"}));
}

#[test]
fn a_prediction_without_the_appliers_records_is_an_error() {
    let mut p = predicted(json!({}), json!([]), fleetshard_fields());
    let live = p.clone();
    assert_eq!(
        remove_webhook_mutations(&p, &live, "argocd-controller"),
        Err(PredictionError::NoManagerEntry("argocd-controller".into()))
    );
    p["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("managedFields");
    assert_eq!(
        remove_webhook_mutations(&p, &live, MANAGER),
        Err(PredictionError::NoManagedFields)
    );
}
