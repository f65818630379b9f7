//! Diffing customisation and health customisation end to end, on a fake API server with
//! real Git repositories: an HPA scaling a Deployment under `selfHeal` (ignoreDifferences by
//! JSON pointer, by trusted field manager, and `RespectIgnoreDifferences=true`), and a
//! custom resource turned Degraded by a Lua script in argocd-cm.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::support::*;
use fleetshard_controller::{Operated, Reconciler};
use fleetshard_gitops::compare::ResourceKey;
use fleetshard_gitops::live::ClusterConnections;
use fleetshard_gitops::reconciler::{FixedClock, GitOpsReconciler, ReconcilerConfig};
use fleetshard_manifest::customizations::{IgnoreDifference, IgnoreRules};
use fleetshard_testsupport::kube_api::{FakeApiServer, Verb};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

impl AppEnv {
    fn replicas(&self) -> Option<i64> {
        self.fake
            .get("apps/v1", "Deployment", "default", "web")
            .and_then(|d| d.pointer("/spec/replicas").and_then(Value::as_i64))
    }

    /// Syncs the app once and checks that it is Synced.
    async fn synced(&self, r: &fleetshard_gitops::reconciler::GitOpsReconciler) {
        r.refresh(&key("a")).await.unwrap();
        assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Finished);
        r.refresh(&key("a")).await.unwrap();
        assert_eq!(self.status().sync.status, "Synced");
    }

    /// Waits until the reconciler's cache holds the Deployment with `replicas`, then
    /// refreshes and checks the sync status is `expected`.
    async fn refreshed_at(
        &self,
        r: &fleetshard_gitops::reconciler::GitOpsReconciler,
        replicas: i64,
        expected: &str,
    ) {
        assert_eq!(self.replicas(), Some(replicas));
        let conn = r.clusters().start(&access("c1", &self.fake)).await.unwrap();
        let web: HashSet<ResourceKey> =
            [ResourceKey::new("apps", "Deployment", "default", "web")].into();
        eventually(
            Duration::from_secs(10),
            "the scaled Deployment cached",
            || async {
                conn.live_objects("a", &web, &Default::default())
                    .iter()
                    .any(|d| d.pointer("/spec/replicas") == Some(&json!(replicas)))
                    .then_some(())
            },
        )
        .await;
        r.refresh(&key("a")).await.unwrap();
        assert_eq!(self.status().sync.status, expected);
    }
}

/// The HPA's write: `spec.replicas` through the `scale` subresource, as its controller
/// (manager `kube-controller-manager`) makes it.
async fn hpa_scales(fake: &FakeApiServer, replicas: i64) {
    let api: Api<DynamicObject> = Api::namespaced_with(
        kube_client(fake),
        "default",
        &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
            "apps",
            "v1",
            "Deployment",
        )),
    );
    api.patch_scale(
        "web",
        &PatchParams::apply("kube-controller-manager"),
        &Patch::Merge(json!({"spec": {"replicas": replicas}})),
    )
    .await
    .unwrap();
}

fn ignore_replicas() -> IgnoreDifference {
    IgnoreDifference {
        group: "apps".into(),
        kind: "Deployment".into(),
        rules: IgnoreRules {
            json_pointers: vec!["/spec/replicas".into()],
            ..IgnoreRules::default()
        },
        ..IgnoreDifference::default()
    }
}

#[tokio::test]
async fn an_hpa_scaling_a_deployment_is_not_fought_by_self_heal() {
    let e = app_env(&[("app/web.yaml", deployment("web", "nginx:1"))]).await;
    e.add_app(|t| t.spec.ignore_differences = vec![ignore_replicas()]);
    let r = e.reconciler_with(ReconcilerConfig::default());
    e.synced(&r).await;
    assert_eq!(e.replicas(), Some(2));

    hpa_scales(&e.fake, 5).await;
    e.refreshed_at(&r, 5, "Synced").await;
    let writes = e.fake.write_count();
    for _ in 0..3 {
        assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Idle);
        r.refresh(&key("a")).await.unwrap();
    }
    assert_eq!(e.replicas(), Some(5), "the HPA's replicas stay");
    assert_eq!(e.fake.write_count(), writes, "nothing written");

    // Without the rule, selfHeal puts Git's replicas back: the fight the rule prevents.
    e.inventory
        .update(&key("a"), |t| t.spec.ignore_differences.clear());
    r.refresh(&key("a")).await.unwrap();
    assert_eq!(e.status().sync.status, "OutOfSync");
    assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Finished);
    assert_eq!(e.replicas(), Some(2));
}

/// Marks `spec.replicas` as the HPA controller's, as the API server records an update
/// through `scale` (the fake records only appliers' fields): the field moves from
/// fleetshard's Apply entry to a `kube-controller-manager` entry of subresource `scale`.
fn hpa_owns_replicas(fake: &FakeApiServer, replicas: i64) {
    fake.modify("apps/v1", "Deployment", "default", "web", |d| {
        d["spec"]["replicas"] = json!(replicas);
        let entries = d["metadata"]["managedFields"].as_array_mut().unwrap();
        entries.retain(|e| e["manager"] != "kube-controller-manager");
        for e in entries.iter_mut() {
            if let Some(spec) = e
                .pointer_mut("/fieldsV1/f:spec")
                .and_then(Value::as_object_mut)
            {
                spec.remove("f:replicas");
            }
        }
        entries.push(
            json!({"manager": "kube-controller-manager", "operation": "Update",
            "subresource": "scale", "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:replicas": {}}}}),
        );
    })
    .unwrap();
}

#[tokio::test]
async fn a_trusted_manager_keeps_its_fields_and_a_respectful_sync_leaves_them() {
    let e = app_env(&[("app/web.yaml", deployment("web", "nginx:1"))]).await;
    e.add_app(|t| {
        t.spec.ignore_differences = vec![IgnoreDifference {
            group: "apps".into(),
            kind: "Deployment".into(),
            rules: IgnoreRules {
                managed_fields_managers: vec!["kube-controller-manager".into()],
                ..IgnoreRules::default()
            },
            ..IgnoreDifference::default()
        }];
        t.spec.policy.sync_options = vec!["RespectIgnoreDifferences=true".to_owned()];
    });
    let r = e.reconciler_with(ReconcilerConfig::default());
    e.synced(&r).await;
    hpa_owns_replicas(&e.fake, 5);
    e.refreshed_at(&r, 5, "Synced").await;
    assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Idle);

    // A new image in Git is synced; the HPA's replicas are applied as they are live.
    e.git.write("app/web.yaml", &deployment("web", "nginx:2"));
    e.git.commit("new image");
    r.refresh(&key("a")).await.unwrap();
    assert_eq!(e.status().sync.status, "OutOfSync");
    assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Finished);
    let live = e
        .fake
        .get("apps/v1", "Deployment", "default", "web")
        .unwrap();
    assert_eq!(
        live.pointer("/spec/template/spec/containers/0/image"),
        Some(&json!("nginx:2"))
    );
    assert_eq!(e.replicas(), Some(5), "RespectIgnoreDifferences kept them");

    // Without RespectIgnoreDifferences the sync applies Git's replicas, as Argo CD's does.
    hpa_owns_replicas(&e.fake, 6);
    e.inventory
        .update(&key("a"), |t| t.spec.policy.sync_options.clear());
    e.git.write("app/web.yaml", &deployment("web", "nginx:3"));
    e.git.commit("another image");
    e.refreshed_at(&r, 6, "OutOfSync").await;
    assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Finished);
    assert_eq!(e.replicas(), Some(2));
}

const CERTIFICATE_HEALTH: &str = r#"
hs = {}
if obj.status ~= nil and obj.status.conditions ~= nil then
  for i, condition in ipairs(obj.status.conditions) do
    if condition.type == "Ready" and condition.status == "False" then
      hs.status = "Degraded"
      hs.message = condition.message
      return hs
    end
    if condition.type == "Ready" and condition.status == "True" then
      hs.status = "Healthy"
      hs.message = condition.message
      return hs
    end
  end
end
hs.status = "Progressing"
hs.message = "Waiting for certificate"
return hs
"#;

async fn install_certificate_crd(fake: &FakeApiServer) {
    let crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
        serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "certificates.cert-manager.io"},
            "spec": {
                "group": "cert-manager.io",
                "scope": "Namespaced",
                "names": {"plural": "certificates", "singular": "certificate", "kind": "Certificate"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                    "subresources": {"status": {}}}],
            },
        }))
        .unwrap();
    Api::all(kube_client(fake))
        .create(&Default::default(), &crd)
        .await
        .unwrap();
    eventually(Duration::from_secs(10), "the CRD served", || async {
        fake.resources()
            .iter()
            .any(|k| k.kind == "Certificate")
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_certificate_turns_degraded_through_a_lua_script_in_argocd_cm() {
    let certificate = "apiVersion: cert-manager.io/v1\nkind: Certificate\nmetadata:\n  name: tls\nspec:\n  secretName: tls\n  dnsNames: [example.com]\n";
    let e = app_env(&[("app/cert.yaml", certificate.to_owned())]).await;
    install_certificate_crd(&e.fake).await;
    let cm: BTreeMap<String, String> = [(
        "resource.customizations.health.cert-manager.io_Certificate".to_owned(),
        CERTIFICATE_HEALTH.to_owned(),
    )]
    .into();
    e.add_app(|t| t.argocd_cm = Arc::new(cm));
    let r = e.reconciler_with(ReconcilerConfig::default());
    e.synced(&r).await;
    let health = |e: &AppEnv| {
        let s = e.status();
        (
            s.health.status.clone(),
            s.resources[0].health.status.clone(),
            s.resources[0].health.message.clone(),
        )
    };
    assert_eq!(
        health(&e),
        (
            "Progressing".into(),
            "Progressing".into(),
            "Waiting for certificate".into()
        )
    );

    e.fake
        .modify("cert-manager.io/v1", "Certificate", "default", "tls", |c| {
            c["status"] = json!({"conditions": [{"type": "Ready", "status": "False",
                "message": "Issuing certificate as Secret does not exist"}]});
        })
        .unwrap();
    eventually(
        Duration::from_secs(10),
        "the Certificate Degraded",
        || async {
            r.refresh(&key("a")).await.unwrap();
            (e.status().health.status == "Degraded").then_some(())
        },
    )
    .await;
    assert_eq!(health(&e).2, "Issuing certificate as Secret does not exist");

    // Without the script the kind has no check: no health, and the app is Healthy.
    e.inventory
        .update(&key("a"), |t| t.argocd_cm = Default::default());
    r.refresh(&key("a")).await.unwrap();
    assert_eq!(health(&e), ("Healthy".into(), String::new(), String::new()));
}

/// argocd-cm's `resource.exclusions`: an excluded kind in the app's manifests is left out
/// with Argo CD's `ExcludedResourceWarning`, never listed, watched or written, while the
/// app's other objects sync; the exclusion removed from argocd-cm, the next refresh lists
/// the kind and the object shows (no restart).
#[tokio::test]
async fn an_excluded_kind_is_left_out_with_a_warning_and_never_listed() {
    let config = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keep\ndata:\n  k: v\n";
    let secret = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: token\nstringData:\n  k: v\n";
    let e = app_env(&[
        ("app/cm.yaml", config.to_owned()),
        ("app/secret.yaml", secret.to_owned()),
    ])
    .await;
    let exclusions = format!(
        "- apiGroups: ['']\n  kinds: [Secret]\n  clusters: ['{}*']\n",
        e.fake.url()
    );
    let cm: BTreeMap<String, String> = [("resource.exclusions".to_owned(), exclusions)].into();
    e.add_app(|t| t.argocd_cm = Arc::new(cm));
    let r = e.reconciler_with(ReconcilerConfig::default());
    e.synced(&r).await;
    let status = e.status();
    let kinds: Vec<&str> = status.resources.iter().map(|r| r.kind.as_str()).collect();
    assert_eq!(kinds, ["ConfigMap"]);
    let warnings: Vec<(&str, &str)> = status
        .conditions
        .iter()
        .map(|c| (c.kind.as_str(), c.message.as_str()))
        .collect();
    assert_eq!(
        warnings,
        [(
            "ExcludedResourceWarning",
            "Resource /Secret token is excluded in the settings"
        )]
    );
    assert!(e.fake.get("v1", "ConfigMap", "default", "keep").is_some());
    assert!(
        e.fake.get("v1", "Secret", "default", "token").is_none(),
        "not written"
    );
    let secrets = |verb| e.fake.request_count(verb, "secrets");
    assert_eq!(
        (secrets(Verb::List), secrets(Verb::Watch)),
        (0, 0),
        "an excluded kind is never listed or watched"
    );

    e.inventory
        .update(&key("a"), |t| t.argocd_cm = Default::default());
    r.refresh(&key("a")).await.unwrap();
    let status = e.status();
    assert!(status.conditions.is_empty(), "{:?}", status.conditions);
    assert!(status.resources.iter().any(|r| r.kind == "Secret"));
    assert!(secrets(Verb::List) > 0);
}

/// argocd-cm's `ignoreResourceUpdates`, installed by the refresh: churn of an ignored
/// field of a synced object is cached and tells the controller nothing; a change of
/// another field tells it once. Watch events are judged and told in order, one after the
/// other: once a later change is cached, every earlier one has been told (or not).
#[tokio::test]
async fn ignored_churn_of_a_synced_object_queues_no_refresh() {
    let config = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keep\ndata:\n  k: v\n";
    let e = app_env(&[("app/cm.yaml", config.to_owned())]).await;
    let cm: BTreeMap<String, String> = [(
        "resource.customizations.ignoreResourceUpdates.ConfigMap".to_owned(),
        "jsonPointers:\n- /data/noise\n".to_owned(),
    )]
    .into();
    e.add_app(|t| t.argocd_cm = Arc::new(cm));
    let told = Arc::new(AtomicUsize::new(0));
    let conns = {
        let told = told.clone();
        ClusterConnections::new(live_options()).with_listener(Arc::new(move |_: &str| {
            told.fetch_add(1, Ordering::SeqCst);
        }))
    };
    let r = Arc::new(GitOpsReconciler::new(
        e.inventory.clone(),
        repos(&e.tmp.path().join("cache")),
        conns,
        e.sink.clone(),
        always(),
        Arc::new(FixedClock(NOW.into())),
        ReconcilerConfig::default(),
    ));
    e.synced(&r).await;
    let conn = r.clusters().start(&access("c1", &e.fake)).await.unwrap();
    let keep: HashSet<ResourceKey> = [ResourceKey::new("", "ConfigMap", "default", "keep")].into();
    let set = |field: &str, value: &str| {
        e.fake
            .modify("v1", "ConfigMap", "default", "keep", |c| {
                c["data"][field] = json!(value);
            })
            .unwrap();
    };
    let cached = |field: &'static str, value: &'static str| {
        conn.live_objects("a", &keep, &Default::default())
            .iter()
            .any(|c| c.pointer(&format!("/data/{field}")) == Some(&json!(value)))
    };
    let count = || told.load(Ordering::SeqCst);
    // Settled: every change so far told, the last one (ignored) telling nothing.
    set("marker", "settled");
    set("noise", "settle");
    eventually(Duration::from_secs(10), "settled", || async {
        cached("noise", "settle").then_some(())
    })
    .await;
    let before = count();
    for value in ["0", "1", "2"] {
        set("noise", value);
    }
    set("marker", "after-noise");
    eventually(Duration::from_secs(10), "the marker told", || async {
        (cached("marker", "after-noise") && count() > before).then_some(())
    })
    .await;
    assert_eq!(count(), before + 1, "only the marker's change is told");
    r.refresh(&key("a")).await.unwrap();
    assert_eq!(e.status().sync.status, "Synced");
}
