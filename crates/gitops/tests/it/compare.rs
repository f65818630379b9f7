//! Comparison of realistic desired and live objects: what must be Synced despite the API
//! server's additions, and the realistic diffs that must be OutOfSync.

use fleetshard_gitops::compare::{
    CompareError, CompareOptions, DifferenceKind, KeyError, ResourceKey, ResourceStatus, Side,
    SyncStatus, TRACKING_ANNOTATION, Tracking, TrackingId, compare_app, compare_resource,
    tracking_annotation,
};
use serde_json::{Value, json};

fn opts() -> CompareOptions {
    CompareOptions::new("shop").with_destination_namespace("prod")
}

fn compare(desired: &Value, live: &Value) -> ResourceStatus {
    let key = ResourceKey::of(desired).expect("test objects have keys");
    compare_resource(key, desired, Some(live), &opts())
}

fn paths(status: &ResourceStatus) -> Vec<(&str, DifferenceKind)> {
    status
        .differences
        .iter()
        .map(|d| (d.path.as_str(), d.kind))
        .collect()
}

/// A Deployment as written in Git.
fn desired_deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "prod", "labels": {"app": "web", "tier": "front"}, "creationTimestamp": null},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {
                            "name": "web",
                            "image": "registry.example.com/web:1.4.2",
                            "imagePullPolicy": "IfNotPresent",
                            "ports": [{"containerPort": 8080, "name": "http"}],
                            "env": [{"name": "MODE", "value": "prod"}, {"name": "LOG", "value": "info"}],
                            "resources": {"limits": {"cpu": 1, "memory": "1Gi"}, "requests": {"cpu": "250m", "memory": "256Mi"}}
                        },
                        {"name": "proxy", "image": "envoy:v1.30", "args": ["--config", "/etc/envoy.yaml"]}
                    ],
                    "securityContext": {}
                }
            }
        }
    })
}

/// The same Deployment as the API server returns it after fleetshard applied it: server
/// metadata, status, defaults, quantities in canonical form, containers reordered.
fn live_deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web", "namespace": "prod",
            "uid": "0b5e7f3c-2a0e-4a57-9d6c-0d3c52f1f1aa", "resourceVersion": "918273", "generation": 4,
            "creationTimestamp": "2026-11-01T09:00:00Z",
            "labels": {"app": "web", "tier": "front"},
            "annotations": {
                "deployment.kubernetes.io/revision": "4",
                TRACKING_ANNOTATION: "shop:apps/Deployment:prod/web"
            },
            "managedFields": [
                {"manager": "fleetshard", "operation": "Apply", "apiVersion": "apps/v1", "fieldsType": "FieldsV1", "fieldsV1": {
                    "f:metadata": {"f:annotations": {"f:argocd.argoproj.io/tracking-id": {}}, "f:labels": {"f:app": {}, "f:tier": {}}},
                    "f:spec": {"f:replicas": {}, "f:selector": {}, "f:template": {
                        "f:metadata": {"f:labels": {"f:app": {}}},
                        "f:spec": {"f:containers": {
                            "k:{\"name\":\"web\"}": {".": {}, "f:env": {
                                "k:{\"name\":\"MODE\"}": {".": {}, "f:name": {}, "f:value": {}},
                                "k:{\"name\":\"LOG\"}": {".": {}, "f:name": {}, "f:value": {}}
                            }, "f:image": {}, "f:name": {}},
                            "k:{\"name\":\"proxy\"}": {".": {}, "f:args": {}, "f:image": {}, "f:name": {}}
                        }}
                    }}
                }},
                {"manager": "kube-controller-manager", "operation": "Update", "subresource": "status", "fieldsV1": {"f:status": {}}}
            ]
        },
        "spec": {
            "replicas": 3,
            "revisionHistoryLimit": 10,
            "progressDeadlineSeconds": 600,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
            "template": {
                "metadata": {"creationTimestamp": null, "labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {
                            "name": "proxy", "image": "envoy:v1.30", "args": ["--config", "/etc/envoy.yaml"],
                            "imagePullPolicy": "IfNotPresent", "resources": {},
                            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"
                        },
                        {
                            "name": "web", "image": "registry.example.com/web:1.4.2", "imagePullPolicy": "IfNotPresent",
                            "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
                            "env": [{"name": "LOG", "value": "info"}, {"name": "MODE", "value": "prod"}],
                            "resources": {"limits": {"cpu": "1000m", "memory": "1024Mi"}, "requests": {"cpu": "0.25", "memory": "256Mi"}},
                            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"
                        }
                    ],
                    "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "schedulerName": "default-scheduler",
                    "securityContext": {}, "terminationGracePeriodSeconds": 30
                }
            }
        },
        "status": {"observedGeneration": 4, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3,
                   "conditions": [{"type": "Available", "status": "True"}]}
    })
}

#[test]
fn live_with_server_fields_defaults_and_reordered_lists_is_synced() {
    let status = compare(&desired_deployment(), &live_deployment());
    assert_eq!(status.status, SyncStatus::Synced, "{}", status.summary());
    assert!(status.differences.is_empty());
}

#[test]
fn image_change_is_out_of_sync_at_the_container_path() {
    let mut desired = desired_deployment();
    desired["spec"]["template"]["spec"]["containers"][0]["image"] =
        json!("registry.example.com/web:1.5.0");
    let status = compare(&desired, &live_deployment());
    assert_eq!(status.status, SyncStatus::OutOfSync);
    assert_eq!(
        paths(&status),
        [(
            "spec.template.spec.containers[name=web].image",
            DifferenceKind::Changed
        )]
    );
    assert_eq!(
        status.differences[0].live,
        Some(json!("registry.example.com/web:1.4.2"))
    );
}

#[test]
fn replicas_change_is_out_of_sync() {
    let mut desired = desired_deployment();
    desired["spec"]["replicas"] = json!(5);
    let status = compare(&desired, &live_deployment());
    assert_eq!(paths(&status), [("spec.replicas", DifferenceKind::Changed)]);
    assert_eq!(status.summary(), "differs at spec.replicas");
}

#[test]
fn env_var_added_in_git_is_missing_in_live() {
    let mut desired = desired_deployment();
    desired["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "FEATURE_X", "value": "on"}));
    let status = compare(&desired, &live_deployment());
    assert_eq!(
        paths(&status),
        [(
            "spec.template.spec.containers[name=web].env[name=FEATURE_X]",
            DifferenceKind::MissingInLive
        )]
    );
}

#[test]
fn env_var_removed_from_git_is_extra_in_live_because_we_applied_it() {
    let mut desired = desired_deployment();
    desired["spec"]["template"]["spec"]["containers"][0]["env"] =
        json!([{"name": "MODE", "value": "prod"}]);
    let status = compare(&desired, &live_deployment());
    assert_eq!(
        paths(&status),
        [(
            "spec.template.spec.containers[name=web].env[name=LOG]",
            DifferenceKind::ExtraInLive
        )]
    );
}

#[test]
fn label_removed_from_git_is_out_of_sync_only_if_we_applied_it() {
    let mut desired = desired_deployment();
    desired["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("tier");
    let status = compare(&desired, &live_deployment());
    assert_eq!(
        paths(&status),
        [("metadata.labels.tier", DifferenceKind::ExtraInLive)]
    );

    // A label someone else added (not in our managed fields) is not ours to judge.
    let mut live = live_deployment();
    live["metadata"]["labels"]["team"] = json!("payments");
    let status = compare(&desired_deployment(), &live);
    assert_eq!(status.status, SyncStatus::Synced, "{}", status.summary());
}

#[test]
fn removal_is_seen_through_kubectls_last_applied_configuration() {
    let desired = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "prod"},
                         "data": {"a": "1"}});
    let applied = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "prod"},
                         "data": {"a": "1", "b": "2"}});
    let live = json!({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "cfg", "namespace": "prod", "uid": "u1",
                                   "annotations": {"kubectl.kubernetes.io/last-applied-configuration": applied.to_string()}},
                      "data": {"a": "1", "b": "2", "c": "added by hand"}});
    let status = compare(&desired, &live);
    assert_eq!(paths(&status), [("data.b", DifferenceKind::ExtraInLive)]);
}

#[test]
fn namespace_left_to_the_destination_is_not_a_difference() {
    let desired = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "1"}});
    let applied = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "prod"}, "data": {"a": "1"}});
    let live = json!({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "cfg", "namespace": "prod",
                                   "annotations": {"kubectl.kubernetes.io/last-applied-configuration": applied.to_string()}},
                      "data": {"a": "1"}});
    let result = compare_app(&[desired], &[live], &opts()).unwrap();
    assert_eq!(result.status, SyncStatus::Synced, "{:?}", result.resources);
}

#[test]
fn removing_a_field_we_own_at_its_default_value_changes_nothing() {
    let mut desired = desired_deployment();
    desired["spec"].as_object_mut().unwrap().remove("replicas");
    let mut live = live_deployment();
    live["spec"]["replicas"] = json!(1);
    assert_eq!(compare(&desired, &live).status, SyncStatus::Synced);
    live["spec"]["replicas"] = json!(3);
    assert_eq!(
        paths(&compare(&desired, &live)),
        [("spec.replicas", DifferenceKind::ExtraInLive)]
    );
}

#[test]
fn explicit_defaults_match_a_live_object_without_them() {
    // A live object from a server that did not default (our fake API server, an old cache).
    let desired = json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "prod"},
        "spec": {"type": "ClusterIP", "sessionAffinity": "None", "selector": {"app": "web"},
                 "ports": [{"name": "http", "port": 80, "targetPort": 80, "protocol": "TCP"}]}
    });
    let live = json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "prod"},
        "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80}]}
    });
    assert_eq!(compare(&desired, &live).status, SyncStatus::Synced);

    // A value that is not the default is a difference.
    let mut other = desired.clone();
    other["spec"]["sessionAffinity"] = json!("ClientIP");
    assert_eq!(
        paths(&compare(&other, &live)),
        [("spec.sessionAffinity", DifferenceKind::MissingInLive)]
    );
}

#[test]
fn service_with_server_assigned_addresses_is_synced() {
    let desired = json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}
    });
    let live = json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "prod", "uid": "u2"},
        "spec": {"clusterIP": "10.96.12.7", "clusterIPs": ["10.96.12.7"], "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                 "internalTrafficPolicy": "Cluster", "sessionAffinity": "None", "type": "ClusterIP", "selector": {"app": "web"},
                 "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": "http"}]},
        "status": {"loadBalancer": {}}
    });
    let result = compare_app(&[desired], &[live], &opts()).unwrap();
    assert_eq!(result.status, SyncStatus::Synced, "{:?}", result.resources);
}

#[test]
fn image_pull_policy_default_depends_on_the_tag() {
    let pod = |image: &str, policy: Option<&str>| {
        let mut c = json!({"name": "app", "image": image});
        if let Some(p) = policy {
            c["imagePullPolicy"] = json!(p);
        }
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "prod"}, "spec": {"containers": [c]}})
    };
    assert_eq!(
        compare(&pod("app:latest", Some("Always")), &pod("app:latest", None)).status,
        SyncStatus::Synced
    );
    assert_eq!(
        compare(&pod("app:2.0", Some("IfNotPresent")), &pod("app:2.0", None)).status,
        SyncStatus::Synced
    );
    assert_eq!(
        compare(&pod("app:2.0", Some("Always")), &pod("app:2.0", None)).status,
        SyncStatus::OutOfSync
    );
}

#[test]
fn empty_values_in_git_match_their_absence() {
    let desired = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "prod", "annotations": {}, "creationTimestamp": null},
        "spec": {"hostNetwork": false, "containers": [{"name": "app", "image": "app:1", "args": [], "env": null}]}});
    let live = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "prod", "uid": "u"},
        "spec": {"containers": [{"name": "app", "image": "app:1"}]}});
    assert_eq!(compare(&desired, &live).status, SyncStatus::Synced);
}

#[test]
fn finalizers_are_a_set_and_server_added_ones_are_ignored() {
    let desired = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": "prod", "finalizers": ["example.com/keep"]},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}});
    let live = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": "prod", "finalizers": ["kubernetes.io/pvc-protection", "example.com/keep"]},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10240Mi"}}, "volumeMode": "Filesystem",
                 "volumeName": "pvc-123", "storageClassName": "standard"},
        "status": {"phase": "Bound"}});
    assert_eq!(compare(&desired, &live).status, SyncStatus::Synced);
    let mut grown = desired.clone();
    grown["spec"]["resources"]["requests"]["storage"] = json!("20Gi");
    assert_eq!(
        paths(&compare(&grown, &live)),
        [("spec.resources.requests.storage", DifferenceKind::Changed)]
    );
}

#[test]
fn positional_lists_must_match_in_order_and_length() {
    let mut desired = desired_deployment();
    desired["spec"]["template"]["spec"]["containers"][1]["args"] =
        json!(["/etc/envoy.yaml", "--config"]);
    let status = compare(&desired, &live_deployment());
    assert_eq!(
        paths(&status),
        [
            (
                "spec.template.spec.containers[name=proxy].args[0]",
                DifferenceKind::Changed
            ),
            (
                "spec.template.spec.containers[name=proxy].args[1]",
                DifferenceKind::Changed
            )
        ]
    );
    desired["spec"]["template"]["spec"]["containers"][1]["args"] = json!(["--config"]);
    let status = compare(&desired, &live_deployment());
    assert_eq!(
        paths(&status),
        [(
            "spec.template.spec.containers[name=proxy].args",
            DifferenceKind::Changed
        )]
    );
}

fn configmap(name: &str, annotations: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "prod", "annotations": annotations},
           "data": {"k": "v"}})
}

#[test]
fn app_comparison_reports_missing_and_prunable_resources() {
    let desired = [desired_deployment(), configmap("settings", json!({}))];
    let live = [
        live_deployment(),
        // Ours, no longer in Git: to prune.
        configmap(
            "old",
            json!({TRACKING_ANNOTATION: "shop:/ConfigMap:prod/old"}),
        ),
        // Another app's, and an untracked one: not ours to report.
        configmap(
            "theirs",
            json!({TRACKING_ANNOTATION: "billing:/ConfigMap:prod/theirs"}),
        ),
        configmap("manual", json!({})),
        // Our id copied onto another object (an operator copies annotations): not ours.
        configmap(
            "copied",
            json!({TRACKING_ANNOTATION: "shop:/ConfigMap:prod/settings"}),
        ),
    ];
    let result = compare_app(&desired, &live, &opts()).unwrap();
    assert_eq!(result.status, SyncStatus::OutOfSync);
    let summary: Vec<(String, SyncStatus, bool, bool)> = result
        .resources
        .iter()
        .map(|r| (r.key.to_string(), r.status, r.missing, r.requires_pruning))
        .collect();
    assert_eq!(
        summary,
        [
            (
                "ConfigMap prod/old".to_owned(),
                SyncStatus::OutOfSync,
                false,
                true
            ),
            (
                "ConfigMap prod/settings".to_owned(),
                SyncStatus::OutOfSync,
                true,
                false
            ),
            (
                "Deployment.apps prod/web".to_owned(),
                SyncStatus::Synced,
                false,
                false
            ),
        ]
    );
    assert_eq!(result.resources[0].summary(), "not in Git; to be pruned");
    assert_eq!(result.resources[1].summary(), "missing in the cluster");
}

#[test]
fn app_is_synced_when_every_resource_is_and_nothing_is_to_prune() {
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod"}});
    let live_ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod", "uid": "n"},
                         "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
    // The desired objects lack a namespace: the Deployment gets the destination's, the
    // cluster-scoped Namespace none.
    let mut deployment = desired_deployment();
    deployment["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("namespace");
    let result = compare_app(&[ns, deployment], &[live_ns, live_deployment()], &opts()).unwrap();
    assert_eq!(result.status, SyncStatus::Synced, "{:?}", result.resources);
    assert_eq!(result.resources.len(), 2);
    assert_eq!(
        compare_app::<Value>(&[], &[], &opts()).unwrap().status,
        SyncStatus::Synced
    );
}

#[test]
fn bad_input_is_an_error_naming_the_object_and_field() {
    let no_kind = json!({"apiVersion": "v1", "metadata": {"name": "x"}});
    let err = compare_app::<Value>(&[desired_deployment(), no_kind], &[], &opts()).unwrap_err();
    assert_eq!(
        err,
        CompareError::BadObject {
            side: Side::Desired,
            index: 1,
            name: "? x".into(),
            field: "kind"
        }
    );
    assert!(
        err.to_string()
            .contains("desired object #1 (? x): field kind"),
        "{err}"
    );

    let bad_ns =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": 3}});
    let err = compare_app(&[], &[bad_ns], &opts()).unwrap_err();
    assert!(
        matches!(
            err,
            CompareError::BadObject {
                side: Side::Live,
                field: "metadata.namespace",
                ..
            }
        ),
        "{err}"
    );

    assert_eq!(
        ResourceKey::of(&json!({"apiVersion": "v1", "kind": ""})),
        Err(KeyError { field: "kind" })
    );
    assert_eq!(
        ResourceKey::of(&json!("text")).unwrap_err().field,
        "(the object itself: not a JSON object)"
    );

    let err = compare_app::<Value>(&[desired_deployment(), desired_deployment()], &[], &opts())
        .unwrap_err();
    assert!(
        matches!(
            err,
            CompareError::Duplicate {
                first: 0,
                second: 1,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn tracking_ids_use_argo_cds_format() {
    let key = ResourceKey::new("apps", "Deployment", "default", "my-deployment");
    assert_eq!(
        tracking_annotation("my-app", &key),
        "my-app:apps/Deployment:default/my-deployment"
    );
    let svc = ResourceKey::new("", "Service", "default", "web");
    assert_eq!(
        tracking_annotation("my-app", &svc),
        "my-app:/Service:default/web"
    );
    let parsed = TrackingId::parse("my-app:/Service:default/web").unwrap();
    assert_eq!((parsed.app.as_str(), &parsed.key), ("my-app", &svc));
    for bad in [
        "",
        "my-app",
        "my-app:apps/Deployment",
        "my-app:Deployment:default/x",
        ":apps/D:ns/x",
    ] {
        assert_eq!(TrackingId::parse(bad), None, "{bad}");
    }
}

#[test]
fn tracked_by_needs_the_app_and_the_object_itself() {
    let is_tracked_by =
        |o: &serde_json::Value, app: &str| Tracking::default().is_tracked_by(o, app);
    let ns_scoped = configmap(
        "cfg",
        json!({TRACKING_ANNOTATION: "shop:/ConfigMap:prod/cfg"}),
    );
    assert!(is_tracked_by(&ns_scoped, "shop"));
    assert!(!is_tracked_by(&ns_scoped, "shop2"));
    let labelled = json!({"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": "cfg", "namespace": "prod", "labels": {"app.kubernetes.io/instance": "shop"}}});
    assert!(
        !is_tracked_by(&labelled, "shop"),
        "under annotation tracking (Argo CD's default) the label does not track"
    );
    let cluster = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                         "metadata": {"name": "reader", "annotations": {TRACKING_ANNOTATION: "shop:rbac.authorization.k8s.io/ClusterRole:prod/reader"}}});
    assert!(is_tracked_by(&cluster, "shop"));
}
