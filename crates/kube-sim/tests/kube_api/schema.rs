//! Structural schemas: a CRD's `openAPIV3Schema` prunes unknown fields and refuses what
//! the real server refuses (required, types, enums, date-times), on create, update,
//! patches, apply and the status subresource, with the real server's `Status`.

use fleetshard_kube_sim::FakeApiServer;
use serde_json::{Value, json};

use super::raw::{Resp, get, request, send_json};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";

fn schema() -> Value {
    json!({
        "type": "object",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "required": ["size"],
                "properties": {
                    "size": {"type": "integer"},
                    "color": {"type": "string", "enum": ["red", "blue"]},
                    "port": {"x-kubernetes-int-or-string": true},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "labels": {"type": "object",
                               "additionalProperties": {"type": "string"}},
                    "extra": {"type": "object",
                              "x-kubernetes-preserve-unknown-fields": true,
                              "properties": {"known": {"type": "boolean"}}},
                    "note": {"type": "string", "nullable": true},
                },
            },
            "status": {
                "type": "object",
                "properties": {
                    "phase": {"type": "string"},
                    "at": {"type": "string", "format": "date-time"},
                },
            },
        },
    })
}

async fn server() -> FakeApiServer {
    let f = FakeApiServer::start().await.unwrap();
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "schema": {"openAPIV3Schema": schema()},
                          "subresources": {"status": {}}}],
        },
    });
    assert_eq!(send_json(f.addr(), "POST", CRDS, &crd).await.status, 201);
    f
}

fn widget(spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget",
           "metadata": {"name": "w"}, "spec": spec})
}

/// (field, reason, message) of each cause of a 422.
fn causes(r: &Resp) -> Vec<(String, String, String)> {
    assert_eq!(r.status, 422, "{}", r.json());
    let s = r.json();
    assert_eq!(
        (s["kind"].as_str(), s["reason"].as_str()),
        (Some("Status"), Some("Invalid"))
    );
    s["details"]["causes"]
        .as_array()
        .unwrap_or_else(|| panic!("no causes: {s}"))
        .iter()
        .map(|c| {
            let text = |k: &str| c[k].as_str().unwrap().to_owned();
            (text("field"), text("reason"), text("message"))
        })
        .collect()
}

fn cause(field: &str, reason: &str, message: &str) -> (String, String, String) {
    (field.into(), reason.into(), message.into())
}

#[tokio::test]
async fn a_missing_required_field_is_refused_naming_it() {
    let f = server().await;
    let r = send_json(f.addr(), "POST", WIDGETS, &widget(json!({"color": "red"}))).await;
    assert_eq!(
        causes(&r),
        [cause("spec.size", "FieldValueRequired", "Required value")]
    );
    assert_eq!(
        r.json()["message"],
        "Widget.example.com \"w\" is invalid: spec.size: Required value"
    );
    let no_spec = json!({"apiVersion": "example.com/v1", "kind": "Widget",
                         "metadata": {"name": "w"}});
    let r = send_json(f.addr(), "POST", WIDGETS, &no_spec).await;
    assert_eq!(
        causes(&r),
        [cause("spec", "FieldValueRequired", "Required value")]
    );
    assert_eq!(get(f.addr(), &format!("{WIDGETS}/w")).await.status, 404);
}

#[tokio::test]
async fn wrong_types_and_values_are_all_reported() {
    let f = server().await;
    let body = widget(json!({
        "size": "big", "color": "green", "port": true, "tags": ["a", 1],
        "labels": {"x": 2}, "extra": {"known": "yes"},
    }));
    let r = send_json(f.addr(), "POST", WIDGETS, &body).await;
    let mut got = causes(&r);
    got.sort();
    assert_eq!(
        got,
        [
            cause(
                "spec.color",
                "FieldValueNotSupported",
                "Unsupported value: \"green\": supported values: \"red\", \"blue\""
            ),
            cause(
                "spec.extra.known",
                "FieldValueInvalid",
                "Invalid value: \"string\": spec.extra.known in body must be of type boolean: \"string\""
            ),
            cause(
                "spec.labels.x",
                "FieldValueInvalid",
                "Invalid value: \"integer\": spec.labels.x in body must be of type string: \"integer\""
            ),
            cause(
                "spec.port",
                "FieldValueInvalid",
                "Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\""
            ),
            cause(
                "spec.size",
                "FieldValueInvalid",
                "Invalid value: \"string\": spec.size in body must be of type integer: \"string\""
            ),
            cause(
                "spec.tags[1]",
                "FieldValueInvalid",
                "Invalid value: \"integer\": spec.tags[1] in body must be of type string: \"integer\""
            ),
        ]
    );
    let message = r.json()["message"].as_str().unwrap().to_owned();
    assert!(
        message.starts_with("Widget.example.com \"w\" is invalid: [spec."),
        "{message}"
    );
}

#[tokio::test]
async fn unknown_fields_are_pruned_unless_preserved() {
    let f = server().await;
    let body = json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w", "labels": {"keep": "me"}},
        "top": 1,
        "spec": {"size": 3, "port": "http", "unknown": {"a": 1}, "note": null,
                 "extra": {"known": true, "anything": {"deep": [1]}}},
    });
    let r = send_json(f.addr(), "POST", WIDGETS, &body).await;
    assert_eq!(r.status, 201, "{}", r.json());
    let stored = get(f.addr(), &format!("{WIDGETS}/w")).await.json();
    assert_eq!(stored.get("top"), None);
    assert_eq!(
        stored["spec"],
        json!({"size": 3, "port": "http", "note": null,
               "extra": {"known": true, "anything": {"deep": [1]}}})
    );
    assert_eq!(stored["metadata"]["labels"], json!({"keep": "me"}));
}

#[tokio::test]
async fn updates_patches_and_apply_are_validated() {
    let f = server().await;
    let created = send_json(f.addr(), "POST", WIDGETS, &widget(json!({"size": 1}))).await;
    assert_eq!(created.status, 201);
    let path = format!("{WIDGETS}/w");

    let mut put = created.json();
    put["spec"]["size"] = json!(1.5);
    let r = send_json(f.addr(), "PUT", &path, &put).await;
    assert_eq!(causes(&r)[0].0, "spec.size");

    let merge = br#"{"spec": {"size": null}}"#;
    let r = request(
        f.addr(),
        "PATCH",
        &path,
        Some("application/merge-patch+json"),
        merge,
    )
    .await;
    assert_eq!(
        causes(&r),
        [cause("spec.size", "FieldValueRequired", "Required value")]
    );

    let json_patch = br#"[{"op": "add", "path": "/spec/color", "value": "pink"}]"#;
    let r = request(
        f.addr(),
        "PATCH",
        &path,
        Some("application/json-patch+json"),
        json_patch,
    )
    .await;
    assert_eq!(causes(&r)[0].0, "spec.color");

    let apply = br#"{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": "x"}}"#;
    let r = request(
        f.addr(),
        "PATCH",
        &format!("{path}?fieldManager=t&force=true"),
        Some("application/apply-patch+yaml"),
        apply,
    )
    .await;
    assert_eq!(causes(&r)[0].0, "spec.size");

    let r = request(
        f.addr(),
        "PATCH",
        &path,
        Some("application/merge-patch+json"),
        br#"{"spec": {"size": 2, "junk": 1}}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert_eq!(r.json()["spec"], json!({"size": 2}));
}

#[tokio::test]
async fn status_writes_are_validated_and_pruned() {
    let f = server().await;
    assert_eq!(
        send_json(f.addr(), "POST", WIDGETS, &widget(json!({"size": 1})))
            .await
            .status,
        201
    );
    let status = format!("{WIDGETS}/w/status");
    let patch = |body: &'static [u8]| {
        request(
            f.addr(),
            "PATCH",
            &status,
            Some("application/merge-patch+json"),
            body,
        )
    };
    let r = patch(br#"{"status": {"at": "yesterday"}}"#).await;
    assert_eq!(
        causes(&r),
        [cause(
            "status.at",
            "FieldValueInvalid",
            "Invalid value: \"yesterday\": status.at in body must be of type date-time: \"yesterday\""
        )]
    );
    let r = patch(br#"{"status": {"at": "2026-11-26T14:00:00Z", "phase": "Up", "odd": 1}}"#).await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert_eq!(
        r.json()["status"],
        json!({"at": "2026-11-26T14:00:00Z", "phase": "Up"})
    );
}

#[tokio::test]
async fn unchanged_invalid_fields_are_ratcheted() {
    let f = server().await;
    // Stored before the schema said so (the handle bypasses validation).
    f.insert(widget(json!({"size": "legacy"}))).unwrap();
    let path = format!("{WIDGETS}/w");
    let ok = request(
        f.addr(),
        "PATCH",
        &path,
        Some("application/merge-patch+json"),
        br#"{"spec": {"color": "red"}}"#,
    )
    .await;
    assert_eq!(ok.status, 200, "{}", ok.json());
    let changed = request(
        f.addr(),
        "PATCH",
        &path,
        Some("application/merge-patch+json"),
        br#"{"spec": {"size": "other"}}"#,
    )
    .await;
    assert_eq!(causes(&changed)[0].0, "spec.size");
}

const APPS: &str = "/apis/argoproj.io/v1alpha1/namespaces/argocd/applications";

fn app(status: Value) -> Value {
    json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": "guestbook", "namespace": "argocd"},
        "spec": {"project": "default",
                 "destination": {"server": "https://kubernetes.default.svc", "namespace": "gb"},
                 "source": {"repoURL": "https://example.com/r.git", "path": "gb",
                            "helm": {"valuesObject": {"any": {"thing": 1}}}}},
        "status": status,
    })
}

#[tokio::test]
async fn argocd_crds_refuse_what_argocds_crd_refuses() {
    let f = FakeApiServer::start().await.unwrap();
    f.create_namespace("argocd").unwrap();
    f.install_argocd_crds().unwrap();
    let projects = "/apis/argoproj.io/v1alpha1/namespaces/argocd/appprojects";
    let project = json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
                         "metadata": {"name": "p"},
                         "spec": {"sourceRepos": ["*"], "clusterResourceWhitelist": [{"kind": "*"}]}});
    let r = send_json(f.addr(), "POST", projects, &project).await;
    assert_eq!(
        causes(&r),
        [cause(
            "spec.clusterResourceWhitelist[0].group",
            "FieldValueRequired",
            "Required value"
        )]
    );

    // What fleetshard wrote before the fix: no `operation`, a cluster-scoped resource
    // without `namespace`.
    let running = json!({"operationState": {
        "phase": "Succeeded", "message": "", "startedAt": "2026-11-26T14:00:00Z",
        "syncResult": {"revision": "abc", "resources": [
            {"group": "rbac.authorization.k8s.io", "version": "v1", "kind": "ClusterRole",
             "name": "r", "status": "Synced", "message": "created"}]}}});
    let r = send_json(f.addr(), "POST", APPS, &app(running)).await;
    let mut got = causes(&r);
    got.sort();
    assert_eq!(
        got,
        [
            cause(
                "status.operationState.operation",
                "FieldValueRequired",
                "Required value"
            ),
            cause(
                "status.operationState.syncResult.resources[0].namespace",
                "FieldValueRequired",
                "Required value"
            ),
        ]
    );
    assert!(
        r.json()["message"].as_str().unwrap().starts_with(
            "Application.argoproj.io \"guestbook\" is invalid: [status.operationState."
        ),
        "{}",
        r.json()
    );

    let fixed = json!({
        "sync": {"status": "Synced", "revision": "abc"},
        "health": {"status": "Healthy"},
        "reconciledAt": "2026-11-26T14:00:01Z",
        "operationState": {
            "operation": {"sync": {"prune": true}, "initiatedBy": {"automated": true}},
            "phase": "Succeeded", "message": "", "startedAt": "2026-11-26T14:00:00Z",
            "finishedAt": "2026-11-26T14:00:01Z",
            "syncResult": {"revision": "abc", "resources": [
                {"group": "rbac.authorization.k8s.io", "version": "v1", "kind": "ClusterRole",
                 "namespace": "", "name": "r", "status": "Synced", "message": "created"}]}},
        "fleetshardOnly": 1,
    });
    let r = send_json(f.addr(), "POST", APPS, &app(fixed)).await;
    assert_eq!(r.status, 201, "{}", r.json());
    let stored = r.json();
    assert_eq!(stored["status"].get("fleetshardOnly"), None, "pruned");
    assert_eq!(
        stored["spec"]["source"]["helm"]["valuesObject"]["any"]["thing"],
        1
    );

    let path = format!("{APPS}/guestbook");
    let bad_time = br#"{"status": {"reconciledAt": "now"}}"#;
    let r = request(
        f.addr(),
        "PATCH",
        &path,
        Some("application/merge-patch+json"),
        bad_time,
    )
    .await;
    assert_eq!(causes(&r)[0].0, "status.reconciledAt");
}
