//! Server-side apply over raw HTTP: create, update, managedFields, removal of fields a
//! manager stops applying, conflicts between managers, force, YAML bodies.

use fleetshard_kube_sim::FakeApiServer;
use serde_json::{Value, json};

use super::raw;

const APPLY: &str = "application/apply-patch+yaml";

async fn apply(
    f: &FakeApiServer,
    path: &str,
    manager: &str,
    force: bool,
    body: &[u8],
) -> raw::Resp {
    let q = format!("{path}?fieldManager={manager}&force={force}");
    raw::request(f.addr(), "PATCH", &q, Some(APPLY), body).await
}

fn managers(obj: &Value) -> Vec<(String, String)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| {
                    (
                        e["manager"].as_str().unwrap().to_string(),
                        e["operation"].as_str().unwrap().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn apply_creates_updates_and_records_managed_fields() {
    let f = FakeApiServer::start().await.unwrap();
    let path = "/apis/apps/v1/namespaces/default/deployments/web";
    let yaml = b"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  labels:\n    app: web\nspec:\n  replicas: 2\n  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        app: web\n    spec:\n      containers:\n      - name: c\n        image: nginx:1\n";
    let created = apply(&f, path, "fleetshard", true, yaml).await;
    assert_eq!(created.status, 201);
    let c = created.json();
    assert_eq!(c["spec"]["replicas"], 2);
    assert_eq!(
        managers(&c),
        [("fleetshard".to_string(), "Apply".to_string())]
    );
    let fields = &c["metadata"]["managedFields"][0]["fieldsV1"];
    assert!(fields["f:spec"]["f:replicas"].is_object(), "{fields}");
    assert!(
        fields["f:metadata"]["f:labels"]["f:app"].is_object(),
        "{fields}"
    );
    assert_eq!(c["metadata"]["managedFields"][0]["fieldsType"], "FieldsV1");

    // Re-applying the same config is a no-op: same resourceVersion.
    let same = apply(&f, path, "fleetshard", true, yaml).await.json();
    assert_eq!(
        same["metadata"]["resourceVersion"],
        c["metadata"]["resourceVersion"]
    );

    // A JSON body works too; the label dropped from the config is removed, the image
    // changes (lists replaced), generation moves.
    let json_body = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}});
    let upd = apply(
        &f,
        path,
        "fleetshard",
        true,
        &serde_json::to_vec(&json_body).unwrap(),
    )
    .await;
    assert_eq!(upd.status, 200);
    let u = upd.json();
    assert_eq!(
        u["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:2"
    );
    assert!(
        u["metadata"].get("labels").is_none(),
        "dropped field removed: {}",
        u["metadata"]
    );
    assert_eq!(u["metadata"]["generation"], 2);
}

#[tokio::test]
async fn apply_conflicts_between_managers_unless_forced() {
    let f = FakeApiServer::start().await.unwrap();
    let path = "/api/v1/namespaces/default/configmaps/shared";
    let a = br#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}, "data": {"k": "a", "own": "a"}}"#;
    assert_eq!(apply(&f, path, "alice", false, a).await.status, 201);
    let b = br#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}, "data": {"k": "b"}}"#;
    let conflict = apply(&f, path, "bob", false, b).await;
    assert_eq!(conflict.status, 409);
    let s = conflict.json();
    assert_eq!(s["reason"], "Conflict");
    assert!(
        s["message"]
            .as_str()
            .unwrap()
            .contains("conflict with \"alice\": .data.k"),
        "{s}"
    );
    // Same value: no conflict, shared ownership.
    let same = br#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}, "data": {"k": "a"}}"#;
    assert_eq!(apply(&f, path, "carol", false, same).await.status, 200);
    // Forced: bob takes .data.k; alice keeps .data.own.
    let forced = apply(&f, path, "bob", true, b).await;
    assert_eq!(forced.status, 200);
    let o = forced.json();
    assert_eq!(o["data"], json!({"k": "b", "own": "a"}));
    let mf = o["metadata"]["managedFields"].as_array().unwrap();
    let alice = mf.iter().find(|e| e["manager"] == "alice").unwrap();
    assert!(alice["fieldsV1"]["f:data"].get("f:k").is_none());
    assert!(alice["fieldsV1"]["f:data"]["f:own"].is_object());
}

#[tokio::test]
async fn apply_requires_a_field_manager_and_honours_resource_version() {
    let f = FakeApiServer::start().await.unwrap();
    let path = "/api/v1/namespaces/default/configmaps/c";
    let body = br#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}"#;
    let r = raw::request(f.addr(), "PATCH", path, Some(APPLY), body).await;
    assert_eq!(r.status, 400);
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains("fieldManager")
    );
    let c = apply(&f, path, "m", true, body).await.json();
    let stale = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "resourceVersion": "1"}, "data": {"x": "y"}});
    let r = apply(&f, path, "m", true, &serde_json::to_vec(&stale).unwrap()).await;
    assert_eq!(r.status, 409);
    let mut fresh = stale.clone();
    fresh["metadata"]["resourceVersion"] = c["metadata"]["resourceVersion"].clone();
    let r = apply(&f, path, "m", true, &serde_json::to_vec(&fresh).unwrap()).await;
    assert_eq!(r.status, 200);
    // Apply to the status subresource changes only status.
    let app_path = "/apis/apps/v1/namespaces/default/deployments/web";
    let app = br#"{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 1}, "status": {"replicas": 1}}"#;
    let created = apply(&f, app_path, "m", true, app).await.json();
    assert!(created.get("status").is_none());
    let st = br#"{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 5}, "status": {"replicas": 2}}"#;
    let r = apply(&f, &format!("{app_path}/status"), "ctl", true, st)
        .await
        .json();
    assert_eq!(r["status"]["replicas"], 2);
    assert_eq!(r["spec"]["replicas"], 1);
    // Argo CD's Application CRD has no status subresource: status is written with the
    // object, as Argo CD's controller does.
    let app_path = "/apis/argoproj.io/v1alpha1/namespaces/default/applications/app";
    let app = br#"{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": {"name": "app"}, "spec": {"project": "default"}, "status": {"sync": {"status": "Synced"}}}"#;
    let created = apply(&f, app_path, "m", true, app).await.json();
    assert_eq!(created["status"]["sync"]["status"], "Synced");
    let r = apply(&f, &format!("{app_path}/status"), "ctl", true, app).await;
    assert_eq!(r.status, 404, "no /status for Applications");
}

#[tokio::test]
async fn mutating_webhooks_change_real_and_dry_run_writes_and_own_nothing() {
    let f = FakeApiServer::start().await.unwrap();
    f.add_mutating_webhook("labeler", |req, obj| {
        if req.kind != "ConfigMap" {
            return Ok(());
        }
        if obj.pointer("/data/refuse").is_some() {
            return Err("refused by policy".into());
        }
        obj["metadata"]["labels"]["injected"] = json!(if req.create { "create" } else { "update" });
        Ok(())
    });
    let path = "/api/v1/namespaces/default/configmaps/c";
    let yaml = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: \"1\"\n";
    let created = apply(&f, path, "fleetshard", false, yaml).await;
    assert_eq!(created.status, 201);
    let c = created.json();
    assert_eq!(c["metadata"]["labels"]["injected"], "create");
    // The webhook's label is owned by no manager.
    let fields = &c["metadata"]["managedFields"][0]["fieldsV1"];
    assert!(fields["f:metadata"].is_null(), "{fields}");
    // A dry run passes the webhook too, and changes nothing stored.
    let q = format!("{path}?fieldManager=fleetshard&dryRun=All");
    let yaml2 = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: \"2\"\n";
    let dry = raw::request(f.addr(), "PATCH", &q, Some(APPLY), yaml2).await;
    assert_eq!(dry.status, 200);
    let d = dry.json();
    assert_eq!(d["metadata"]["labels"]["injected"], "update");
    assert_eq!(d["data"]["a"], "2");
    let stored = f.get("v1", "ConfigMap", "default", "c").unwrap();
    assert_eq!(stored["data"]["a"], "1");
    assert_eq!(stored["metadata"]["labels"]["injected"], "create");
    // A refusal is the real server's 400, naming the webhook.
    let bad = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  refuse: \"1\"\n";
    let refused = raw::request(f.addr(), "PATCH", &q, Some(APPLY), bad).await;
    assert_eq!(refused.status, 400);
    let message = refused.json()["message"].as_str().unwrap().to_owned();
    assert_eq!(
        message,
        "admission webhook \"labeler\" denied the request: refused by policy"
    );
    f.remove_mutating_webhook("labeler");
    let plain = raw::request(f.addr(), "PATCH", &q, Some(APPLY), bad).await;
    assert_eq!(plain.status, 200);
}
