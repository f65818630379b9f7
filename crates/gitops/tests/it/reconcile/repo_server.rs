//! Sources rendered by Argo CD's repo-server (a fake at the wire level): the request the
//! reconciler assembles, checked field by field as Argo CD's controller fills it; a Helm
//! chart from a Helm repository syncs with the answer's revision and source type; a
//! failing or unreachable repo-server is a `ComparisonError`, retried, and prunes nothing.

use std::sync::Arc;
use std::time::Duration;

use super::support::*;
use fleetshard_controller::{Operated, Reconciler};
use fleetshard_gitops::reconciler::{Inventory as _, KubeStatusSink, StaticInventory};
use fleetshard_gitops::source::RepoServerRenderer;
use fleetshard_manifest::{
    AppSource, AutoSync, RefreshRequest, Refusal, RefusalKind, RepoSecretKind, RepoSettings,
    SyncRequest,
};
use fleetshard_reposerver::{ClientConfig, RepoServerClient, TlsMode};
use fleetshard_testsupport::kube_api::FakeApiServer;
use fleetshard_testsupport::repo_server::{Answer, Code, FakeRepoServer, Scripted, Transport};
use serde_json::{Value, json};

const AUTO: Option<AutoSync> = Some(AutoSync {
    prune: true,
    self_heal: true,
    allow_empty: false,
});

const CHART_REPO: &str = "https://charts.example.com/stable";
const CHART_PASSWORD: &str = "chart-s3cret";
const DEPS_REPO: &str = "https://charts.example.com/deps";

fn app_status(control: &FakeApiServer, name: &str) -> Value {
    control
        .get("argoproj.io/v1alpha1", "Application", "argocd", name)
        .unwrap()["status"]
        .clone()
}

fn config_map_json(name: &str, value: &str) -> String {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name}, "data": {"value": value}})
    .to_string()
}

struct Env {
    cluster: FakeApiServer,
    control: FakeApiServer,
    server: FakeRepoServer,
    inventory: Arc<StaticInventory>,
    reconciler: Arc<fleetshard_gitops::reconciler::GitOpsReconciler>,
    _tmp: tempfile::TempDir,
}

/// App `web`: chart `web` 1.2.x from a Helm repository, with a field the standalone
/// renderer refuses (`helm.fileParameters`) — the repo-server takes it.
async fn env(addr_override: Option<&str>) -> Env {
    env_with(addr_override, None).await
}

/// As [`env`], the Application annotated with `argocd.argoproj.io/refresh` when `refresh`.
async fn env_with(addr_override: Option<&str>, refresh: Option<&str>) -> Env {
    let tmp = tempfile::tempdir().unwrap();
    let cluster = FakeApiServer::start().await.unwrap();
    let control = FakeApiServer::start().await.unwrap();
    control.install_argocd_crds().unwrap();
    let server = FakeRepoServer::start(Transport::Plaintext).await.unwrap();
    let inventory = Arc::new(StaticInventory::default());
    let mut t = target("web", CHART_REPO, "1.2.*", "", access("c1", &cluster), AUTO);
    t.spec.source.raw = json!({
        "repoURL": CHART_REPO, "chart": "web", "targetRevision": "1.2.*",
        "helm": {"releaseName": "web", "valuesObject": {"replicas": 2},
                 "fileParameters": [{"name": "config", "path": "files/config.json"}]},
    });
    t.spec.refusals.push(Refusal {
        kind: RefusalKind::InvalidSpec,
        field: "spec.source.helm.fileParameters".into(),
        message: "not rendered on this replica".into(),
    });
    // The Helm repository's Secret: its credentials go to the repo-server.
    let secret = repo_secret;
    use RepoSecretKind::{Repository, Template};
    t.repositories = Arc::new(RepoSettings {
        secrets: vec![
            secret(Repository, "charts", CHART_REPO, "helm", "", CHART_PASSWORD),
            // A dependency's repository and a template, both permitted to the project.
            secret(Repository, "deps", DEPS_REPO, "helm", "", "deps-s3cret"),
            secret(
                Template,
                "all-charts",
                "https://charts.example.com/",
                "helm",
                "",
                "t-s3cret",
            ),
            // Another project's, and a Git repository: not sent.
            secret(
                Repository,
                "theirs",
                "https://charts.example.com/theirs",
                "helm",
                "other",
                "x",
            ),
            secret(
                Repository,
                "git",
                "https://git.example.com/apps",
                "git",
                "",
                "y",
            ),
        ],
        ..RepoSettings::default()
    });
    let mut app = application("web");
    if let Some(kind) = refresh {
        t.spec.refresh = Some(match kind {
            "hard" => RefreshRequest::Hard,
            _ => RefreshRequest::Normal,
        });
        app["metadata"]["annotations"] = json!({"argocd.argoproj.io/refresh": kind});
    }
    inventory.insert(t);
    control.insert(app).unwrap();
    let mut client = ClientConfig::new(addr_override.unwrap_or(&server.addr()));
    client.tls = TlsMode::Plaintext;
    client.timeout = Duration::from_secs(5);
    client.attempts = 1;
    let renderer = RepoServerRenderer::new(RepoServerClient::new(&client).unwrap());
    let mut kube = kube::Config::new(control.url().parse().unwrap());
    kube.default_retry = false;
    let sink = KubeStatusSink::new(
        kube::Client::try_from(kube).unwrap(),
        Duration::from_secs(2),
    );
    let r = reconciler(
        &inventory,
        repos(&tmp.path().join("cache")),
        live_options(),
        Arc::new(sink),
        always(),
    );
    let reconciler = Arc::new(
        Arc::into_inner(r)
            .expect("only owner")
            .with_renderer(Arc::new(renderer)),
    );
    Env {
        cluster,
        control,
        server,
        inventory,
        reconciler,
        _tmp: tmp,
    }
}

#[tokio::test]
async fn a_helm_repository_chart_rendered_by_the_repo_server_syncs() {
    let e = env(None).await;
    e.server.answer_all(
        Answer::rendered(&[&config_map_json("web-config", "2")], "1.2.7", "Helm"),
        Duration::ZERO,
    );
    let r = &e.reconciler;
    r.refresh(&key("web")).await.unwrap();
    assert_eq!(r.operate(&key("web")).await.unwrap(), Operated::Finished);
    r.refresh(&key("web")).await.unwrap();
    let status = app_status(&e.control, "web");
    assert_eq!(status["sync"]["status"], "Synced", "{status}");
    assert_eq!(status["sync"]["revision"], "1.2.7", "{status}");
    assert_eq!(status["sourceType"], "Helm", "{status}");
    let result = &status["operationState"]["syncResult"];
    assert_eq!(result["revision"], "1.2.7", "{result}");
    assert_eq!(
        result["source"]["chart"], "web",
        "the source synced: {result}"
    );
    assert!(
        e.cluster
            .get("v1", "ConfigMap", "default", "web-config")
            .is_some()
    );

    // The request, by field number, as Argo CD's controller fills it.
    let requests = e.server.requests();
    let q = requests.last().expect("asked");
    let repo = q.message(1).expect("repo");
    assert_eq!(repo.str_or_empty(1), CHART_REPO);
    assert_eq!(repo.str_or_empty(2), "charts-reader", "username");
    assert_eq!(repo.str_or_empty(3), CHART_PASSWORD, "password");
    assert_eq!(repo.str_or_empty(11), "helm", "type");
    assert_eq!(repo.str_or_empty(12), "charts-repo", "name: the Secret's");
    assert_eq!(q.str_or_empty(2), "1.2.*", "revision");
    assert!(!q.bool(3), "noCache on a normal refresh");
    assert_eq!(q.str_or_empty(4), "app.kubernetes.io/instance");
    assert_eq!(q.str_or_empty(5), "web", "appName: the instance name");
    assert_eq!(q.str_or_empty(8), "default", "namespace");
    let source = q.message(10).expect("applicationSource");
    assert_eq!(source.str_or_empty(1), CHART_REPO);
    assert_eq!(source.str_or_empty(12), "web", "chart");
    let helm = source.message(7).expect("helm");
    assert_eq!(helm.str_or_empty(3), "web", "releaseName");
    assert_eq!(helm.messages(5).len(), 1, "fileParameters sent on");
    let values_object = helm.message(10).expect("valuesObject");
    let raw: Value = serde_json::from_slice(&values_object.bytes(1).unwrap()).unwrap();
    assert_eq!(raw, json!({"replicas": 2}), "valuesObject's raw JSON");
    let kube_version = q.str_or_empty(14);
    assert!(
        kube_version.starts_with("v1."),
        "kubeVersion {kube_version:?}"
    );
    let api_versions = q.strings(15);
    assert!(
        api_versions.iter().any(|v| v == "v1") && api_versions.iter().any(|v| v == "v1/ConfigMap"),
        "{api_versions:?}"
    );
    let mut sorted = api_versions.clone();
    sorted.sort();
    assert_eq!(api_versions, sorted, "sorted");
    assert_eq!(q.str_or_empty(19), "annotation", "trackingMethod");
    // The Helm repositories and templates the project permits (Argo CD's
    // GetPermittedRepos), with their credentials.
    // Each with its Secret's name, which a chart's dependencies (`@name`, `alias:name`)
    // are found by.
    let repos: Vec<(String, String, String)> = q
        .messages(11)
        .iter()
        .map(|r| (r.str_or_empty(1), r.str_or_empty(3), r.str_or_empty(12)))
        .collect();
    assert_eq!(
        repos,
        [
            (
                CHART_REPO.to_owned(),
                CHART_PASSWORD.to_owned(),
                "charts-repo".to_owned()
            ),
            (
                DEPS_REPO.to_owned(),
                "deps-s3cret".to_owned(),
                "deps-repo".to_owned()
            )
        ],
        "repos"
    );
    let creds: Vec<(String, String)> = q
        .messages(17)
        .iter()
        .map(|c| (c.str_or_empty(1), c.str_or_empty(3)))
        .collect();
    assert_eq!(
        creds,
        [(
            "https://charts.example.com/".to_owned(),
            "t-s3cret".to_owned()
        )],
        "helmRepoCreds"
    );
    assert_eq!(q.str_or_empty(25), "default", "projectName");
    assert_eq!(q.strings(24), ["*"], "projectSourceRepos");
}

/// argocd-cm's settings, from the inventory, reach every request, and a change reaches
/// the next one without a restart; an argocd-cm Argo CD refuses is a ComparisonError
/// naming it, and nothing is asked.
#[tokio::test]
async fn argocd_cm_settings_reach_the_request_and_follow_changes() {
    let e = env(None).await;
    e.server.answer_all(
        Answer::rendered(&[&config_map_json("web-config", "2")], "1.2.7", "Helm"),
        Duration::ZERO,
    );
    let set_argocd_cm = |pairs: &[(&str, &str)]| {
        let mut t = e.inventory.target(&key("web")).expect("target");
        t.argocd_cm = Arc::new(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        e.inventory.insert(t);
    };
    set_argocd_cm(&[
        ("kustomize.buildOptions", "--enable-helm"),
        ("kustomize.enable", "false"),
        ("installationID", "prod-1"),
        ("application.instanceLabelKey", "example.com/instance"),
        ("helm.valuesFileSchemes", "https"),
    ]);
    let r = &e.reconciler;
    r.refresh(&key("web")).await.unwrap();
    let q = e.server.requests().pop().expect("asked");
    assert_eq!(q.str_or_empty(4), "example.com/instance", "appLabelKey");
    assert_eq!(
        q.message(13).expect("kustomizeOptions").str_or_empty(1),
        "--enable-helm",
        "kustomizeOptions.buildOptions"
    );
    let enabled: Vec<(String, bool)> = q
        .messages(20)
        .iter()
        .map(|entry| (entry.str_or_empty(1), entry.bool(2)))
        .collect();
    assert!(
        enabled.contains(&("Kustomize".to_owned(), false))
            && enabled.contains(&("Helm".to_owned(), true)),
        "enabledSourceTypes {enabled:?}"
    );
    assert_eq!(
        q.message(21).expect("helmOptions").strings(1),
        ["https"],
        "helmOptions.valuesFileSchemes"
    );
    assert_eq!(q.str_or_empty(27), "prod-1", "installationID");

    // Changed in argocd-cm: the next request says so.
    set_argocd_cm(&[]);
    r.refresh(&key("web")).await.unwrap();
    let q = e.server.requests().pop().expect("asked");
    assert_eq!(q.str_or_empty(4), "app.kubernetes.io/instance");
    assert_eq!(q.str_or_empty(27), "", "no installationID");

    // A Kustomize version named twice: Argo CD refuses the settings; so does the app.
    set_argocd_cm(&[
        ("kustomize.path.v5", "/tools/k5"),
        ("kustomize.version.v5", "v5.0.0"),
    ]);
    let asked = e.server.requests().len();
    r.refresh(&key("web")).await.unwrap();
    assert_eq!(e.server.requests().len(), asked, "nothing asked");
    let status = app_status(&e.control, "web");
    let message = status["conditions"][0]["message"].as_str().unwrap();
    assert!(
        message.contains("argocd-cm kustomize.version.v5"),
        "{message}"
    );
}

#[tokio::test]
async fn a_failing_repo_server_is_a_comparison_error_and_prunes_nothing() {
    let e = env(None).await;
    e.server.answer_all(
        Answer::rendered(&[&config_map_json("web-config", "2")], "1.2.7", "Helm"),
        Duration::ZERO,
    );
    let r = &e.reconciler;
    r.refresh(&key("web")).await.unwrap();
    assert_eq!(r.operate(&key("web")).await.unwrap(), Operated::Finished);
    // The chart breaks: an error status, tried again at the next refresh (not in a loop);
    // nothing is pruned.
    e.server.answer_all(
        Answer::Error {
            code: Code::Unknown,
            message: "helm template . --name-template web: exit status 1: parse error".into(),
        },
        Duration::ZERO,
    );
    for _ in 0..2 {
        r.refresh(&key("web")).await.unwrap();
        assert_eq!(r.operate(&key("web")).await.unwrap(), Operated::Idle);
    }
    let status = app_status(&e.control, "web");
    assert_eq!(
        status["conditions"][0]["type"], "ComparisonError",
        "{status}"
    );
    let message = status["conditions"][0]["message"].as_str().unwrap();
    assert!(message.contains("parse error"), "{message}");
    assert!(!status.to_string().contains(CHART_PASSWORD), "{status}");
    assert!(message.contains(&e.server.addr()), "{message}");
    assert!(
        e.cluster
            .get("v1", "ConfigMap", "default", "web-config")
            .is_some(),
        "not pruned"
    );
}

#[tokio::test]
async fn an_unreachable_repo_server_is_a_comparison_error() {
    // A port nothing listens on.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let e = env(Some(&closed)).await;
    e.reconciler.refresh(&key("web")).await.unwrap();
    let status = app_status(&e.control, "web");
    assert_eq!(
        status["conditions"][0]["type"], "ComparisonError",
        "{status}"
    );
    let message = status["conditions"][0]["message"].as_str().unwrap();
    assert!(message.contains(&closed), "{message}");
    assert_eq!(
        e.reconciler.operate(&key("web")).await.unwrap(),
        Operated::Idle
    );
}

/// Argo CD's "Hard Refresh": the annotation `argocd.argoproj.io/refresh: hard` makes the
/// next render skip the repo-server's caches (`noCache`), and the refresh removes the
/// annotation, as Argo CD's controller does; the next refresh uses the caches again.
#[tokio::test]
async fn a_hard_refresh_asks_for_no_cache_and_removes_its_annotation() {
    let e = env_with(None, Some("hard")).await;
    e.server.answer_all(
        Answer::rendered(&[&config_map_json("web-config", "2")], "1.2.7", "Helm"),
        Duration::ZERO,
    );
    e.reconciler.refresh(&key("web")).await.unwrap();
    let asked = e.server.requests();
    assert!(asked.last().unwrap().bool(3), "noCache on a hard refresh");
    let app = e
        .control
        .get("argoproj.io/v1alpha1", "Application", "argocd", "web")
        .unwrap();
    assert!(
        app["metadata"]["annotations"]
            .get("argocd.argoproj.io/refresh")
            .is_none(),
        "the annotation is removed: {app}"
    );
    assert_eq!(app["status"]["sync"]["status"], "OutOfSync", "{app}");
    // The inventory still shows the annotation (a watch behind, or a fleet file, which
    // nothing removes): the hard refresh is not served twice.
    e.reconciler.refresh(&key("web")).await.unwrap();
    assert!(!e.server.requests().last().unwrap().bool(3), "served once");
    // The inventory sees the annotation gone, then asked for again: served again.
    e.inventory.update(&key("web"), |t| t.spec.refresh = None);
    e.reconciler.refresh(&key("web")).await.unwrap();
    assert!(!e.server.requests().last().unwrap().bool(3));
    e.inventory.update(&key("web"), |t| {
        t.spec.refresh = Some(RefreshRequest::Hard);
    });
    e.reconciler.refresh(&key("web")).await.unwrap();
    assert!(e.server.requests().last().unwrap().bool(3), "asked again");
}

/// Argo CD's `noRevisionCache` (request field 18): sent with a refresh annotation (normal
/// or hard) and with the first comparison after the app's source changed, not otherwise;
/// `noCache` (3) only with a hard refresh. The app's `manifest-generate-paths` annotation
/// travels as field 26, and an empty `targetRevision` as Argo CD sends it: empty.
#[tokio::test]
async fn the_revision_cache_is_skipped_when_argo_cd_skips_it() {
    let e = env_with(None, Some("normal")).await;
    e.server.answer_all(
        Answer::rendered(&[&config_map_json("web-config", "2")], "1.2.7", "Helm"),
        Duration::ZERO,
    );
    let flags = |e: &Env| {
        let q = e.server.requests().pop().expect("asked");
        (q.bool(3), q.bool(18))
    };
    e.reconciler.refresh(&key("web")).await.unwrap();
    assert_eq!(
        flags(&e),
        (false, true),
        "a normal refresh: noRevisionCache only"
    );
    e.inventory.update(&key("web"), |t| t.spec.refresh = None);
    e.reconciler.refresh(&key("web")).await.unwrap();
    assert_eq!(
        flags(&e),
        (false, false),
        "a periodic refresh uses the caches"
    );
    e.inventory.update(&key("web"), |t| {
        t.spec.source.raw["targetRevision"] = json!("1.3.*");
        t.spec.source.target_revision = "1.3.*".into();
    });
    e.reconciler.refresh(&key("web")).await.unwrap();
    assert_eq!(
        flags(&e),
        (false, true),
        "the first comparison after a change"
    );
    e.reconciler.refresh(&key("web")).await.unwrap();
    assert_eq!(flags(&e), (false, false), "not the next");
    e.inventory.update(&key("web"), |t| {
        t.spec.manifest_generate_paths = Some(".;../shared".into());
        t.spec
            .source
            .raw
            .as_object_mut()
            .unwrap()
            .remove("targetRevision");
        t.spec.source.target_revision = fleetshard_manifest::DEFAULT_REVISION.into();
    });
    e.reconciler.refresh(&key("web")).await.unwrap();
    let q = e.server.requests().pop().expect("asked");
    assert_eq!(
        q.str_or_empty(26),
        ".;../shared",
        "annotationManifestGeneratePaths"
    );
    assert_eq!(
        q.str_or_empty(2),
        "",
        "an absent targetRevision is sent empty"
    );
}

/// A sync asked for by hand (Argo CD's Sync button) runs on an app whose source fields
/// only a repo-server renders: the refusals a repo-server judges are left to it for
/// requested syncs as for refreshes.
#[tokio::test]
async fn a_requested_sync_of_a_chart_runs_through_the_repo_server() {
    let e = env(None).await;
    e.server.answer_all(
        Answer::rendered(&[&config_map_json("web-config", "2")], "1.2.7", "Helm"),
        Duration::ZERO,
    );
    e.inventory.update(&key("web"), |t| {
        t.spec.auto_sync = None;
        t.spec.sync_request = Some(SyncRequest::default());
    });
    let r = &e.reconciler;
    r.refresh(&key("web")).await.unwrap();
    assert_eq!(r.operate(&key("web")).await.unwrap(), Operated::Finished);
    let app = e
        .control
        .get("argoproj.io/v1alpha1", "Application", "argocd", "web")
        .unwrap();
    let op = &app["status"]["operationState"];
    assert_eq!(op["phase"], "Succeeded", "{op}");
    assert!(
        e.cluster
            .get("v1", "ConfigMap", "default", "web-config")
            .is_some(),
        "synced"
    );
}

/// A multi-source app — a chart from a Helm repository with its values from a Git
/// repository (`$values`) — rendered by the repo-server one source at a time, each request
/// knowing the others (`hasMultipleSources`, `refSources`); the objects are the union, the
/// status lists each source's revision and type. Without a repo-server the app is refused.
#[tokio::test]
async fn a_multi_source_app_renders_each_source_with_its_ref_sources() {
    let e = env(None).await;
    let values_repo = "https://git.example.com/values";
    e.inventory.update(&key("web"), |t| {
        let chart = json!({"repoURL": CHART_REPO, "chart": "web", "targetRevision": "1.2.*",
                           "helm": {"valueFiles": ["$values/web/values.yaml"]}});
        let values = json!({"repoURL": values_repo, "targetRevision": "main", "ref": "values"});
        t.spec.sources = [chart, values]
            .into_iter()
            .map(|raw| AppSource {
                repo_url: raw["repoURL"].as_str().unwrap().to_owned(),
                target_revision: raw["targetRevision"].as_str().unwrap().to_owned(),
                raw,
                ..AppSource::default()
            })
            .collect();
        t.spec.source = t.spec.sources[0].clone();
        t.spec.refusals = vec![Refusal {
            kind: RefusalKind::InvalidSpec,
            field: "spec.sources".into(),
            message: "rendered only by a repo-server".into(),
        }];
    });
    let chart = Answer::rendered(&[&config_map_json("web-config", "3")], "1.2.7", "Helm");
    // A ref-only source: its revision, no manifests (as Argo CD's repo-server answers).
    let values = Answer::rendered(&[], "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b", "Directory");
    e.server.answer_app_in_turn(
        "web",
        [chart, values]
            .into_iter()
            .cycle()
            .take(6)
            .map(|answer| Scripted {
                answer,
                delay: Duration::ZERO,
            })
            .collect(),
    );
    let r = &e.reconciler;
    r.refresh(&key("web")).await.unwrap();
    assert_eq!(r.operate(&key("web")).await.unwrap(), Operated::Finished);
    r.refresh(&key("web")).await.unwrap();
    let status = app_status(&e.control, "web");
    assert_eq!(status["sync"]["status"], "Synced", "{status}");
    assert_eq!(
        status["sync"]["revisions"],
        json!(["1.2.7", "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b"]),
        "{status}"
    );
    assert!(status["sync"].get("revision").is_none(), "{status}");
    assert_eq!(
        status["sourceTypes"],
        json!(["Helm", "Directory"]),
        "{status}"
    );
    assert!(status.get("sourceType").is_none(), "{status}");
    // The operation records the revisions and sources, as Argo CD's does (the CRD's
    // schema, which the fake API server enforces, requires `revision`: empty here).
    let result = &status["operationState"]["syncResult"];
    assert_eq!(result["revision"], "", "{result}");
    assert_eq!(
        result["revisions"],
        json!(["1.2.7", "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b"]),
        "{result}"
    );
    assert_eq!(result["sources"][1]["ref"], "values", "{result}");
    assert!(result.get("source").is_none(), "{result}");
    let cm = e
        .cluster
        .get("v1", "ConfigMap", "default", "web-config")
        .unwrap();
    assert_eq!(cm["data"]["value"], "3");

    let requests = e.server.requests();
    assert!(requests.len() >= 4, "two sources per refresh");
    for (i, q) in requests[..2].iter().enumerate() {
        assert!(q.bool(22), "request {i}: hasMultipleSources");
        let refs = q.message_map(23);
        let values_ref = refs.get("$values").expect("refSources has $values");
        assert_eq!(values_ref.message(1).unwrap().str_or_empty(1), values_repo);
        assert_eq!(
            values_ref.str_or_empty(2),
            "main",
            "the ref's targetRevision"
        );
    }
    let first = requests[0].message(10).unwrap();
    assert_eq!(first.str_or_empty(12), "web", "the chart source first");
    assert_eq!(
        requests[1].message(10).unwrap().str_or_empty(13),
        "values",
        "then the ref"
    );
}
