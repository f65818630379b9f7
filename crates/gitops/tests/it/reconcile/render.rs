//! Rendered sources through the reconciler: a Kustomize app syncs and its status says
//! `sourceType: Kustomize`; a source that cannot be rendered here is a condition and
//! prunes nothing.

use std::sync::Arc;

use super::support::*;
use fleetshard_controller::{Operated, Reconciler};
use fleetshard_gitops::reconciler::StaticInventory;
use fleetshard_gitops::source::{RenderConfig, StandaloneRenderer};
use fleetshard_manifest::AutoSync;
use fleetshard_testsupport::git::{Git, config_map};
use fleetshard_testsupport::kube_api::FakeApiServer;

const AUTO: Option<AutoSync> = Some(AutoSync {
    prune: true,
    self_heal: true,
    allow_empty: false,
});

#[tokio::test]
async fn a_kustomize_app_syncs_and_a_helm_app_without_helm_prunes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    git.write("kust/cm.yaml", &config_map("kcm", "1"));
    git.write(
        "kust/kustomization.yaml",
        "resources:\n- cm.yaml\nnamePrefix: k-\n",
    );
    git.write("chart/cm.yaml", &config_map("hcm", "1"));
    git.commit("initial");
    let cluster = FakeApiServer::start().await.unwrap();
    let control = FakeApiServer::start().await.unwrap();
    // Argo CD's CRD: every status written is checked against its schema.
    control.install_argocd_crds().unwrap();
    let inventory = Arc::new(StaticInventory::default());
    let c1 = access("c1", &cluster);
    for (name, path) in [("kust", "kust"), ("chart", "chart")] {
        inventory.insert(target(name, &git.path(), "main", path, c1.clone(), AUTO));
        control.insert(application(name)).unwrap();
    }
    let repos = repos(&tmp.path().join("cache"));
    // kubectl from the machine's PATH, and no helm.
    let config = RenderConfig {
        path: Some(crate::render::path_with(&tmp, &["kubectl"])),
        ..RenderConfig::default()
    };
    let renderer = StandaloneRenderer::new(repos.clone(), config);
    let r = reconciler(
        &inventory,
        repos,
        live_options(),
        Arc::new(sink_for(&control)),
        always(),
    );
    let r = Arc::new(
        Arc::into_inner(r)
            .expect("only owner")
            .with_renderer(Arc::new(renderer)),
    );

    for app in ["kust", "chart"] {
        r.refresh(&key(app)).await.unwrap();
        assert_eq!(
            r.operate(&key(app)).await.unwrap(),
            Operated::Finished,
            "{app}"
        );
        r.refresh(&key(app)).await.unwrap();
    }
    let kust = app_status(&control, "kust");
    assert_eq!(kust["sync"]["status"], "Synced", "{kust}");
    assert_eq!(kust["sourceType"], "Kustomize", "{kust}");
    assert!(cluster.get("v1", "ConfigMap", "default", "k-kcm").is_some());
    assert_eq!(app_status(&control, "chart")["sourceType"], "Directory");
    assert!(cluster.get("v1", "ConfigMap", "default", "hcm").is_some());

    // The directory becomes a Helm chart; without helm it is a condition and nothing of
    // the app is pruned, however often it is refreshed and operated.
    git.write(
        "chart/Chart.yaml",
        "apiVersion: v2\nname: c\nversion: 0.1.0\n",
    );
    git.remove("chart/cm.yaml");
    git.commit("now a chart");
    for _ in 0..2 {
        r.refresh(&key("chart")).await.unwrap();
        assert_eq!(r.operate(&key("chart")).await.unwrap(), Operated::Idle);
    }
    let chart = app_status(&control, "chart");
    assert_eq!(chart["conditions"][0]["type"], "ComparisonError", "{chart}");
    let message = chart["conditions"][0]["message"].as_str().unwrap();
    assert!(
        message.contains(
            "Helm needs Argo CD's repo-server (--repo-server) or a helm executable on PATH"
        ),
        "{message}"
    );
    assert!(
        chart.get("sourceType").is_none() || chart["sourceType"].is_null(),
        "{chart}"
    );
    assert!(
        cluster.get("v1", "ConfigMap", "default", "hcm").is_some(),
        "not pruned"
    );
}
