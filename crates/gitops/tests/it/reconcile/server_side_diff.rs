//! Server-side diff end to end (`compare-options: ServerSideDiff=true`,
//! `IncludeMutationWebhook=true`, the controller-wide setting), on a fake API server with
//! mutating admission webhooks and a real Git repository.

use std::sync::Arc;
use std::time::Duration;

use super::support::*;
use fleetshard_appstate::{AppStateCache, Compression, RedisSettings};
use fleetshard_controller::{Operated, Reconciler};
use fleetshard_gitops::reconciler::{AppTarget, GitOpsReconciler, ReconcilerConfig};
use fleetshard_manifest::AppCompareOptions;
use fleetshard_testsupport::kube_api::{FakeApiServer, Verb};
use fleetshard_testsupport::redis::RedisServer;
use serde_json::{Value, json};

const SERVER_SIDE: AppCompareOptions = AppCompareOptions {
    server_side_diff: Some(true),
    include_mutation_webhook: false,
};

/// `manifest` as `app/web.yaml`.
async fn env(manifest: &str) -> AppEnv {
    app_env(&[("app/web.yaml", manifest.to_owned())]).await
}

impl AppEnv {
    /// App `a` with `compare_options`.
    fn add_app_comparing(&self, compare_options: AppCompareOptions) {
        self.add_app(|t| t.spec.compare_options = compare_options);
    }

    fn set(&self, compare_options: AppCompareOptions) {
        self.inventory.update(&key("a"), |t: &mut AppTarget| {
            t.spec.compare_options = compare_options;
        });
    }

    /// A reconciler; `controller_wide`: Argo CD's `controller.diff.server.side`.
    fn reconciler(&self, controller_wide: bool) -> Arc<GitOpsReconciler> {
        self.reconciler_with(ReconcilerConfig {
            server_side_diff: controller_wide,
            ..ReconcilerConfig::default()
        })
    }

    fn live(&self) -> Value {
        self.fake
            .get("apps/v1", "Deployment", "default", "web")
            .unwrap()
    }

    /// Server-side apply dry runs and applies of Deployments so far.
    fn patches(&self) -> u64 {
        self.fake.request_count(Verb::Patch, "deployments")
    }

    /// Writes that changed the cluster or could have (dry runs left out).
    fn real_writes(&self) -> usize {
        self.fake.writes().iter().filter(|w| !w.dry_run).count()
    }

    /// Refreshes and returns the app's sync status.
    async fn refreshed(&self, r: &GitOpsReconciler) -> String {
        r.refresh(&key("a")).await.unwrap();
        self.status().sync.status
    }
}

/// A registry-mirror webhook, as clusters run them: every container image of a Deployment
/// is rewritten to the mirror — a field the manifest sets.
fn mirror_images(fake: &FakeApiServer) {
    fake.add_mutating_webhook("mirror", |req, obj| {
        if req.kind != "Deployment" {
            return Ok(());
        }
        let containers = obj.pointer_mut("/spec/template/spec/containers");
        for c in containers
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            let image = c["image"].as_str().unwrap_or_default().to_owned();
            if !image.starts_with("mirror.example/") {
                c["image"] = json!(format!("mirror.example/{image}"));
            }
        }
        Ok(())
    });
}

/// A webhook that adds an annotation the manifest does not set.
fn annotate(fake: &FakeApiServer) {
    fake.add_mutating_webhook("annotator", |req, obj| {
        if req.kind == "Deployment" {
            obj["metadata"]["annotations"]["injected-by"] = json!("annotator");
        }
        Ok(())
    });
}

/// Syncs the app once (it is missing: no dry run is needed to see that).
async fn first_sync(e: &AppEnv, r: &GitOpsReconciler) {
    assert_eq!(e.refreshed(r).await, "OutOfSync");
    assert_eq!(e.patches(), 0, "a missing resource needs no dry run");
    assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Finished);
}

#[tokio::test]
async fn a_webhook_rewriting_a_field_git_sets_stays_synced_under_self_heal() {
    let e = env(&deployment("web", "nginx:1")).await;
    mirror_images(&e.fake);
    e.add_app_comparing(SERVER_SIDE);
    let r = e.reconciler(false);
    first_sync(&e, &r).await;
    let image = "/spec/template/spec/containers/0/image";
    assert_eq!(
        e.live().pointer(image),
        Some(&json!("mirror.example/nginx:1"))
    );
    assert_eq!(e.refreshed(&r).await, "Synced");
    let writes = e.real_writes();
    for _ in 0..3 {
        assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Idle);
        assert_eq!(e.refreshed(&r).await, "Synced");
    }
    assert_eq!(e.real_writes(), writes, "self-heal wrote nothing");

    // Compared client-side, the rewritten image differs from Git's and self-heal fights
    // the webhook: what server-side diff prevents.
    e.set(AppCompareOptions::default());
    assert_eq!(e.refreshed(&r).await, "OutOfSync");
    assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Finished);
    assert_eq!(e.refreshed(&r).await, "OutOfSync");
}

/// Argo CD's UI shows a managed resource's `predictedLiveState` as what a sync would
/// leave: under server-side diff, the dry run's object (the webhook's image), not Git's
/// object merged into the live one.
#[tokio::test]
async fn the_managed_resources_in_redis_carry_the_dry_runs_prediction() {
    let e = env(&deployment("web", "nginx:1")).await;
    mirror_images(&e.fake);
    e.add_app_comparing(SERVER_SIDE);
    let redis = RedisServer::start().unwrap();
    let mut settings = RedisSettings::new(redis.address());
    settings.compression = Compression::None;
    let r = Arc::new(
        e.reconciler_built(ReconcilerConfig::default())
            .with_app_state(Arc::new(AppStateCache::start(settings).unwrap())),
    );
    first_sync(&e, &r).await;
    assert_eq!(e.refreshed(&r).await, "Synced");
    let image = "/spec/template/spec/containers/0/image";
    let predicted = eventually(
        Duration::from_secs(10),
        "the Deployment's prediction in Redis",
        || {
            let redis = &redis;
            async move {
                let bytes = redis.get("app|managed-resources|a|1.8.3").unwrap()?;
                let managed: Value = serde_json::from_slice(&bytes).unwrap();
                let web = managed
                    .as_array()?
                    .iter()
                    .find(|d| d["kind"] == "Deployment")?;
                let predicted: Value =
                    serde_json::from_str(web["predictedLiveState"].as_str()?).unwrap();
                (predicted.pointer(image) == Some(&json!("mirror.example/nginx:1")))
                    .then_some(predicted)
            }
        },
    )
    .await;
    assert_eq!(predicted["kind"], "Deployment");
}

#[tokio::test]
async fn a_steady_app_sends_no_dry_run_until_its_object_or_git_changes_or_a_refresh_is_asked() {
    let e = env(&deployment("web", "nginx:1")).await;
    e.add_app_comparing(SERVER_SIDE);
    let r = e.reconciler(false);
    first_sync(&e, &r).await;
    let before = e.patches();
    assert_eq!(e.refreshed(&r).await, "Synced");
    assert_eq!(e.patches(), before + 1, "one dry run per resource");
    for _ in 0..3 {
        assert_eq!(e.refreshed(&r).await, "Synced");
    }
    assert_eq!(e.patches(), before + 1, "the prediction is reused");
    // A refresh asked for (`argocd.argoproj.io/refresh`) predicts again, as in Argo CD.
    e.inventory.update(&key("a"), |t: &mut AppTarget| {
        t.spec.refresh = Some(fleetshard_manifest::RefreshRequest::Normal);
    });
    assert_eq!(e.refreshed(&r).await, "Synced");
    assert_eq!(e.patches(), before + 2);
    // So does a new desired object.
    e.inventory
        .update(&key("a"), |t: &mut AppTarget| t.spec.refresh = None);
    e.git.write("app/web.yaml", &deployment("web", "nginx:2"));
    e.git.commit("new image");
    assert_eq!(e.refreshed(&r).await, "OutOfSync");
    assert_eq!(e.patches(), before + 3);
}

/// Argo CD keeps a webhook's additions out of the predicted object unless
/// `IncludeMutationWebhook=true`: with it, a mutation the live object lacks (it was written
/// before the webhook existed) is part of the predicted state, so the app is OutOfSync and
/// a sync lets the webhook add it.
#[tokio::test]
async fn include_mutation_webhook_makes_a_mutation_the_live_object_lacks_out_of_sync() {
    let e = env(&deployment("web", "nginx:1")).await;
    e.add_app_comparing(SERVER_SIDE);
    let r = e.reconciler(false);
    first_sync(&e, &r).await;
    annotate(&e.fake);
    assert_eq!(e.refreshed(&r).await, "Synced");
    let including = AppCompareOptions {
        include_mutation_webhook: true,
        ..SERVER_SIDE
    };
    e.set(including);
    assert_eq!(e.refreshed(&r).await, "OutOfSync");
    assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Finished);
    assert_eq!(
        e.live().pointer("/metadata/annotations/injected-by"),
        Some(&json!("annotator"))
    );
    assert_eq!(e.refreshed(&r).await, "Synced");
}

#[tokio::test]
async fn the_controller_wide_setting_applies_unless_the_app_says_server_side_diff_false() {
    // A manifest's own `ServerSideDiff=false` changes nothing (Argo CD reads the option on
    // the Application only).
    let manifest = deployment("web", "nginx:1").replace(
        "metadata:\n  name: web\n",
        "metadata:\n  name: web\n  annotations:\n    argocd.argoproj.io/compare-options: ServerSideDiff=false\n",
    );
    let e = env(&manifest).await;
    mirror_images(&e.fake);
    e.add_app_comparing(AppCompareOptions::default());
    let r = e.reconciler(true);
    first_sync(&e, &r).await;
    assert_eq!(e.refreshed(&r).await, "Synced", "compared server-side");
    e.set(AppCompareOptions {
        server_side_diff: Some(false),
        ..AppCompareOptions::default()
    });
    let patches = e.patches();
    assert_eq!(e.refreshed(&r).await, "OutOfSync", "compared client-side");
    assert_eq!(e.patches(), patches, "no dry run");
}

#[tokio::test]
async fn a_refused_dry_run_is_a_comparison_error_and_nothing_is_synced() {
    let e = env(&deployment("web", "nginx:1")).await;
    e.add_app_comparing(SERVER_SIDE);
    let r = e.reconciler(false);
    first_sync(&e, &r).await;
    e.fake.add_mutating_webhook("policy", |req, _| {
        if req.kind == "Deployment" {
            return Err("images must come from the mirror".into());
        }
        Ok(())
    });
    e.git.write("app/web.yaml", &deployment("web", "nginx:2"));
    e.git.commit("new image");
    assert_eq!(e.refreshed(&r).await, "Unknown");
    let status = e.status();
    let condition = &status.conditions[0];
    assert_eq!(condition.kind, "ComparisonError");
    assert!(
        condition.message.contains("Deployment/default web")
            && condition
                .message
                .contains("admission webhook \"policy\" denied the request"),
        "{}",
        condition.message
    );
    let writes = e.real_writes();
    r.operate(&key("a")).await.unwrap();
    assert_eq!(e.real_writes(), writes, "nothing synced");
    assert_eq!(
        e.live().pointer("/spec/template/spec/containers/0/image"),
        Some(&json!("nginx:1"))
    );
    e.fake.remove_mutating_webhook("policy");
    assert_eq!(e.refreshed(&r).await, "OutOfSync");
}
