//! Properties of the comparison and of health assessment over generated objects.

use fleetshard_gitops::compare::{
    CompareOptions, ResourceKey, SyncStatus, compare_app, compare_resource,
};
use fleetshard_gitops::health::{app_health, assess};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Field names mixing arbitrary ones with those the comparison treats specially.
fn field_name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]{1,4}",
        prop::sample::select(vec![
            "name",
            "containers",
            "env",
            "ports",
            "containerPort",
            "port",
            "resources",
            "limits",
            "requests",
            "cpu",
            "memory",
            "finalizers",
            "args",
            "metadata",
            "labels",
            "annotations",
            "spec",
            "template",
            "image",
            "imagePullPolicy",
            "replicas",
            "volumeMounts",
            "mountPath",
            "type",
            "conditions",
            "status",
        ])
        .prop_map(str::to_owned),
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-3i64..1000).prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "[a-z0-9]{0,4}".prop_map(Value::from),
        prop::sample::select(vec![
            "1", "1000m", "0.5", "1Gi", "1024Mi", "250m", "1e3", "web", "TCP", "Always"
        ])
        .prop_map(Value::from),
    ]
}

/// Any JSON value, biased towards Kubernetes-like shapes.
fn json_value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(5, 48, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(field_name(), inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A Kubernetes-like object: identity plus arbitrary labels and spec.
fn object() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(vec![
            ("apps/v1", "Deployment"),
            ("v1", "Service"),
            ("v1", "Pod"),
            ("example.com/v1", "Widget"),
        ]),
        "[a-z]{1,6}",
        prop::collection::btree_map("[a-z]{1,4}", "[a-z]{0,4}", 0..3),
        json_value(),
    )
        .prop_map(|((api_version, kind), name, labels, spec)| {
            json!({"apiVersion": api_version, "kind": kind,
                   "metadata": {"name": name, "namespace": "prod", "labels": labels}, "spec": spec})
        })
}

fn compare_one(desired: &Value, live: &Value) -> SyncStatus {
    let key = ResourceKey::of(desired).expect("generated objects have keys");
    compare_resource(key, desired, Some(live), &CompareOptions::new("app")).status
}

/// Paths (as JSON pointers) of every non-null leaf under `/spec` and `/metadata/labels`.
fn leaves(v: &Value, pointer: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => m
            .iter()
            .for_each(|(k, c)| leaves(c, format!("{pointer}/{}", escape(k)), out)),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .for_each(|(i, c)| leaves(c, format!("{pointer}/{i}"), out)),
        Value::Null => {}
        _ => out.push(pointer),
    }
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// A value of the same kind as `v` that no normalisation can make equal to it.
fn changed(v: &Value) -> Value {
    match v {
        Value::Bool(b) => Value::from(!b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Value::from(i + 1),
            // A float doubled could overflow to infinity, which JSON stores as null.
            None => Value::from(format!("{n}x")),
        },
        // Appending a letter that is no quantity suffix keeps any quantity reading apart.
        Value::String(s) => Value::from(format!("{s}x")),
        other => other.clone(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(fleetshard_util::cases::property_cases(ProptestConfig::default().cases, 512)))]

    #[test]
    fn comparison_is_reflexive(obj in object()) {
        prop_assert_eq!(compare_one(&obj, &obj), SyncStatus::Synced);
    }

    #[test]
    fn server_populated_fields_keep_it_synced(obj in object(), status in json_value(), extra in json_value(), generation in 1i64..100) {
        let mut live = obj.clone();
        let meta = live["metadata"].as_object_mut().unwrap();
        meta.insert("uid".into(), json!("0b5e7f3c-2a0e-4a57"));
        meta.insert("resourceVersion".into(), json!("12345"));
        meta.insert("generation".into(), json!(generation));
        meta.insert("creationTimestamp".into(), json!("2026-11-21T10:00:00Z"));
        meta.insert("annotations".into(), json!({
            "deployment.kubernetes.io/revision": "3",
            "kubectl.kubernetes.io/last-applied-configuration": obj.to_string(),
        }));
        meta.insert("managedFields".into(), json!([{"manager": "kube-controller-manager", "operation": "Update",
                                                    "fieldsV1": {"f:spec": {"f:extra-field": {}}}}]));
        live["status"] = status;
        // A field someone else set, not in our records.
        if let Some(spec) = live["spec"].as_object_mut() {
            spec.insert("extra-field".into(), extra);
        }
        prop_assert_eq!(compare_one(&obj, &live), SyncStatus::Synced);
    }

    #[test]
    fn changing_any_desired_leaf_makes_it_out_of_sync(obj in object(), pick in any::<prop::sample::Index>()) {
        let mut paths = Vec::new();
        leaves(&obj["spec"], "/spec".into(), &mut paths);
        leaves(&obj["metadata"]["labels"], "/metadata/labels".into(), &mut paths);
        prop_assume!(!paths.is_empty());
        let path = &paths[pick.index(paths.len())];
        let mut desired = obj.clone();
        let slot = desired.pointer_mut(path).unwrap();
        let new = changed(slot);
        // `finalizers` is a set (docs of `compare`): an entry changed into another entry of
        // the same list leaves the desired set a subset of the live one, whose extra entry
        // counts only if we applied it (here nobody did), so that is Synced by design, not
        // a change this property is about.
        if let Some((list, _)) = path.rsplit_once('/').filter(|(l, _)| l.ends_with("/finalizers")) {
            let entries = obj.pointer(list).and_then(Value::as_array);
            prop_assume!(!entries.is_some_and(|e| e.contains(&new)));
        }
        *slot = new;
        prop_assert_eq!(compare_one(&desired, &obj), SyncStatus::OutOfSync, "changed {}", path);
    }

    #[test]
    fn never_panics_on_arbitrary_json(desired in prop::collection::vec(json_value(), 0..4),
                                      live in prop::collection::vec(json_value(), 0..4),
                                      a in json_value(), b in json_value()) {
        let opts = CompareOptions::new("app").with_destination_namespace("prod");
        let _ = compare_app(&desired, &live, &opts);
        let key = ResourceKey::new("apps", "Deployment", "prod", "x");
        let _ = compare_resource(key, &a, Some(&b), &opts);
        let _ = assess(Some(&a));
    }

    #[test]
    fn never_panics_on_arbitrary_objects_of_known_kinds(desired in object(), live in object(), managed in json_value()) {
        let mut live = live;
        live["metadata"]["managedFields"] = json!([{"manager": "fleetshard", "operation": "Apply", "fieldsV1": managed}]);
        let _ = compare_one(&desired, &live);
        let _ = compare_app(&[desired], &[live], &CompareOptions::new("app"));
    }

    #[test]
    fn health_never_panics_and_is_checked_for_known_kinds(
        kind in prop::sample::select(vec![
            ("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"), ("apps/v1", "DaemonSet"), ("apps/v1", "ReplicaSet"),
            ("v1", "Pod"), ("v1", "Service"), ("networking.k8s.io/v1", "Ingress"), ("v1", "PersistentVolumeClaim"),
            ("batch/v1", "Job"), ("batch/v1", "CronJob"),
        ]),
        spec in json_value(), status in json_value(), generation in json_value(),
    ) {
        let mut obj = Map::new();
        obj.insert("apiVersion".into(), kind.0.into());
        obj.insert("kind".into(), kind.1.into());
        obj.insert("metadata".into(), json!({"name": "x", "generation": generation}));
        obj.insert("spec".into(), spec);
        obj.insert("status".into(), status);
        let health = assess(Some(&Value::Object(obj)));
        prop_assert!(health.checked);
        // A checked resource counts: an app of it alone has its health.
        prop_assert_eq!(app_health([&health]), health.status);
    }
}
