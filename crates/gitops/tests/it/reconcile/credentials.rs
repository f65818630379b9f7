//! Credentials go only where they belong: a password written inside a `repoURL` never
//! shows in a log line, the app's status or an error (the Application's own copies of its
//! source aside); a credential template that matches a `repoURL` only as a string prefix
//! is noted on the app, and refused with `TemplateMatch::PathBoundary`.

use std::sync::Arc;
use std::time::Duration;

use super::support::*;
use fleetshard_controller::{Operated, Reconciler};
use fleetshard_gitops::reconciler::{
    FixedClock, GitOpsReconciler, ReconcilerConfig, StaticInventory,
};
use fleetshard_gitops::source::{RepoServerRenderer, TemplateMatch};
use fleetshard_manifest::{AutoSync, RepoSecretKind, RepoSettings};
use fleetshard_reposerver::{ClientConfig, RepoServerClient, TlsMode};
use fleetshard_testsupport::kube_api::FakeApiServer;
use fleetshard_testsupport::logs::LogCapture;
use fleetshard_testsupport::repo_server::{Answer, Code, FakeRepoServer, Scripted, Transport};
use serde_json::{Value, json};

const AUTO: Option<AutoSync> = Some(AutoSync {
    prune: true,
    self_heal: true,
    allow_empty: false,
});
const PASSWORD: &str = "hunter2-in-the-url";

struct Env {
    _cluster: FakeApiServer,
    control: FakeApiServer,
    server: FakeRepoServer,
    reconciler: Arc<GitOpsReconciler>,
    _tmp: tempfile::TempDir,
}

/// App `web` from `repo` (rendered by a fake repo-server when `repo_server`, else on this
/// replica), with `repositories`, templates matched as `matching`.
async fn env(
    repo: &str,
    repositories: RepoSettings,
    matching: TemplateMatch,
    repo_server: bool,
) -> Env {
    let tmp = tempfile::tempdir().unwrap();
    let cluster = FakeApiServer::start().await.unwrap();
    let control = FakeApiServer::start().await.unwrap();
    control.install_argocd_crds().unwrap();
    control.insert(application("web")).unwrap();
    let server = FakeRepoServer::start(Transport::Plaintext).await.unwrap();
    let inventory = Arc::new(StaticInventory::default());
    let mut t = target("web", repo, "main", "app", access("c1", &cluster), AUTO);
    t.spec.source.raw = json!({"repoURL": repo, "targetRevision": "main", "path": "app"});
    t.repositories = Arc::new(repositories);
    inventory.insert(t);
    let config = ReconcilerConfig {
        template_match: matching,
        ..ReconcilerConfig::default()
    };
    let mut reconciler = GitOpsReconciler::new(
        inventory.clone(),
        repos(&tmp.path().join("cache")),
        fleetshard_gitops::live::ClusterConnections::new(live_options()),
        Arc::new(sink_for(&control)),
        always(),
        Arc::new(FixedClock(NOW.into())),
        config,
    );
    if repo_server {
        let mut client = ClientConfig::new(&server.addr());
        client.tls = TlsMode::Plaintext;
        client.timeout = Duration::from_secs(5);
        client.attempts = 1;
        let client = RepoServerClient::new(&client).unwrap();
        reconciler = reconciler.with_renderer(Arc::new(RepoServerRenderer::new(client)));
    }
    Env {
        _cluster: cluster,
        control,
        server,
        reconciler: Arc::new(reconciler),
        _tmp: tmp,
    }
}

fn config_map_json(name: &str) -> String {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name}, "data": {"value": "1"}})
    .to_string()
}

/// The status without the Application's own copies of its source (`syncResult.source`,
/// `history[].source`, `operation.sync.source`, `sync.comparedTo`): Argo CD copies the
/// spec's source there verbatim (the UI compares `comparedTo` with the spec to tell a
/// changed spec), and an operation is resumed from it.
fn messages_of(status: &Value) -> String {
    let mut status = status.clone();
    if let Some(sync) = status.get_mut("sync") {
        sync["comparedTo"] = Value::Null;
    }
    if let Some(op) = status.get_mut("operationState") {
        op["syncResult"]["source"] = Value::Null;
        op["operation"]["sync"]["source"] = Value::Null;
    }
    if let Some(history) = status.get_mut("history").and_then(Value::as_array_mut) {
        for h in history {
            h["source"] = Value::Null;
        }
    }
    status.to_string()
}

// The attack: `repoURL: https://bob:PASSWORD@host/r.git`. Rendered on this replica (the
// fetch fails) and by a repo-server (first an error quoting the URL, then a render): the
// password is in no log line, no condition or message of the status, no error.
#[tokio::test]
async fn a_password_inside_the_repo_url_is_shown_nowhere() {
    let logs = LogCapture::start();
    let url = format!("http://bob:{PASSWORD}@127.0.0.1:1/r.git");
    let local = env(&url, RepoSettings::default(), TemplateMatch::Prefix, false).await;
    let err = local.reconciler.refresh(&key("web")).await;
    let status = app_status(&local.control, "web");
    assert_eq!(
        status["conditions"][0]["type"], "ComparisonError",
        "{status}"
    );
    assert!(
        messages_of(&status).contains("<redacted>@127.0.0.1"),
        "{status}"
    );
    assert!(!messages_of(&status).contains(PASSWORD), "{status}");
    assert!(!format!("{err:?}").contains(PASSWORD), "{err:?}");

    let url = format!("https://bob:{PASSWORD}@git.example.com/r.git");
    let remote = env(&url, RepoSettings::default(), TemplateMatch::Prefix, true).await;
    remote.server.answer_app_in_turn(
        "web",
        vec![
            Scripted {
                answer: Answer::Error {
                    code: Code::Unknown,
                    message: format!("rpc error: git fetch {url}: authentication required"),
                },
                delay: Duration::ZERO,
            },
            Scripted {
                answer: Answer::rendered(&[&config_map_json("web")], "abc1234", "Directory"),
                delay: Duration::ZERO,
            },
        ],
    );
    let r = &remote.reconciler;
    let err = r.refresh(&key("web")).await;
    assert!(!format!("{err:?}").contains(PASSWORD), "{err:?}");
    let failed = app_status(&remote.control, "web");
    assert_eq!(
        failed["conditions"][0]["type"], "ComparisonError",
        "{failed}"
    );
    assert!(!messages_of(&failed).contains(PASSWORD), "{failed}");
    r.refresh(&key("web")).await.unwrap();
    assert_eq!(r.operate(&key("web")).await.unwrap(), Operated::Finished);
    r.refresh(&key("web")).await.unwrap();
    let synced = app_status(&remote.control, "web");
    assert_eq!(synced["sync"]["status"], "Synced", "{synced}");
    assert!(!messages_of(&synced).contains(PASSWORD), "{synced}");

    let text = logs.text();
    assert!(!text.is_empty());
    assert!(!text.contains(PASSWORD), "logged: {text}");
}

fn template(url: &str, password: &str) -> RepoSettings {
    RepoSettings {
        secrets: vec![repo_secret(
            RepoSecretKind::Template,
            "example-creds",
            url,
            "git",
            "",
            password,
        )],
        ..RepoSettings::default()
    }
}

/// The app's status after one refresh rendered by the repo-server.
async fn rendered_status(e: &Env) -> Value {
    e.server.answer_all(
        Answer::rendered(&[&config_map_json("web")], "abc1234", "Directory"),
        Duration::ZERO,
    );
    e.reconciler.refresh(&key("web")).await.unwrap();
    app_status(&e.control, "web")
}

fn carried(server: &FakeRepoServer, secret: &str) -> bool {
    server
        .raw_requests()
        .iter()
        .any(|r| r.windows(secret.len()).any(|w| w == secret.as_bytes()))
}

// The attack: a template for `http://git.example.com` and a tenant's repoURL on
// `git.example.com.evil.net`. Argo CD's rule sends the template's password there; fleetshard
// keeps the rule and says so on the app, or refuses the match.
#[tokio::test]
async fn a_template_matching_beyond_a_path_boundary_is_noted_or_refused() {
    let secret = "template-s3cret";
    let evil = "http://git.example.com.evil.net/r.git";
    for matching in [TemplateMatch::Prefix, TemplateMatch::PathBoundary] {
        let e = env(
            evil,
            template("http://git.example.com", secret),
            matching,
            true,
        )
        .await;
        let status = rendered_status(&e).await;
        let warned = status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "RepoCredentialsWarning");
        match matching {
            TemplateMatch::Prefix => {
                assert!(carried(&e.server, secret), "Argo CD's rule sends it");
                let message = warned.unwrap_or_else(|| panic!("{status}"))["message"]
                    .as_str()
                    .unwrap();
                assert!(
                    message.contains("Secret argocd/example-creds")
                        && message.contains(evil)
                        && !message.contains(secret),
                    "{message}"
                );
            }
            TemplateMatch::PathBoundary => {
                assert!(!carried(&e.server, secret), "refused: nothing sent");
                assert!(warned.is_none(), "{status}");
            }
        }
    }
    // At a path boundary the template applies, with no note.
    let e = env(
        "http://git.example.com/team/r.git",
        template("http://git.example.com", secret),
        TemplateMatch::PathBoundary,
        true,
    )
    .await;
    let status = rendered_status(&e).await;
    assert!(carried(&e.server, secret));
    assert!(
        !status.to_string().contains("RepoCredentialsWarning"),
        "{status}"
    );
}
