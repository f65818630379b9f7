//! Private repositories: Argo CD repository Secrets and credential templates against real
//! servers on 127.0.0.1 — `git http-backend` behind HTTP basic authentication and an
//! OpenSSH daemon with its own host key — and what a wrong password, an unknown host key
//! or a silent server become (clear errors naming the repository, never a secret, never
//! a hang).

use std::time::Duration;

use fleetshard_gitops::source::{
    Refresh, RepoAccess, RepoCache, RepoCacheConfig, SourceError, TemplateMatch,
};
use fleetshard_manifest::{AppSource, RepoSettings};
use fleetshard_testsupport::git::{Git, config_map};
use fleetshard_testsupport::git_http::GitHttpServer;
use fleetshard_testsupport::git_ssh::GitSshServer;
use fleetshard_util::redact::redact_userinfo;
use serde_json::json;

const PASSWORD: &str = "s3cret-t0ken-value";

fn source(repo: &str) -> AppSource {
    AppSource {
        repo_url: repo.to_owned(),
        target_revision: "main".to_owned(),
        path: "app".to_owned(),
        directory: Default::default(),
        raw: Default::default(),
    }
}

/// Settings from Argo CD objects as the Kubernetes inventory would read them.
fn settings(secrets: &[serde_json::Value], known_hosts: Option<&str>) -> RepoSettings {
    let mut out = RepoSettings::default();
    for s in secrets {
        let loaded = fleetshard_manifest::repo_secret_from_value(s, "test").unwrap();
        out.secrets.extend(loaded.value);
    }
    if let Some(hosts) = known_hosts {
        let cm = json!({
            "kind": "ConfigMap",
            "metadata": {"name": "argocd-ssh-known-hosts-cm", "namespace": "argocd"},
            "data": {"ssh_known_hosts": hosts},
        });
        out.merge(
            fleetshard_manifest::repo_config_map_from_value(&cm, "test")
                .unwrap()
                .value,
        );
    }
    out
}

fn secret(kind: &str, name: &str, data: serde_json::Value) -> serde_json::Value {
    json!({
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "argocd",
                     "labels": {"argocd.argoproj.io/secret-type": kind}},
        "stringData": data,
    })
}

fn repo_at(root: &std::path::Path) -> (Git, String) {
    let git = Git::init(root);
    git.write("app/cm.yaml", &config_map("cm", "1"));
    let commit = git.commit("1");
    (git, commit)
}

fn assert_no_secret(text: &str, secrets: &[&str]) {
    for s in secrets {
        assert!(!text.contains(s), "a secret leaked into: {text}");
    }
}

#[tokio::test]
async fn https_basic_auth_from_a_template_or_a_repository_secret() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("repos");
    let (_git, commit) = repo_at(&root.join("team/app"));
    let server = GitHttpServer::start(&root).await.unwrap();
    server.require_basic_auth("team", "deploy", PASSWORD);
    let url = server.url("team/app");
    let cache = RepoCache::new(RepoCacheConfig::new(tmp.path().join("cache")));

    // Anonymous: the server's 401 says what is missing.
    let err = cache
        .manifests(&source(&url), Refresh::Normal)
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, SourceError::Fetch { .. })
            && text.contains(&url)
            && text.contains("HTTP 401")
            && text.contains("no repository Secret or credential template matches"),
        "{text}"
    );

    // A credential template for every repository under `team`.
    let template = secret(
        "repo-creds",
        "team-creds",
        json!({"url": server.url("team"), "username": "deploy", "password": PASSWORD}),
    );
    let good = settings(std::slice::from_ref(&template), None);
    let access = RepoAccess::resolve(&good, &url, "default", TemplateMatch::Prefix);
    let m = cache
        .manifests_with(&source(&url), &access, Refresh::Normal)
        .await
        .unwrap();
    assert_eq!(m.commit, commit);
    assert_eq!(m.objects[0].object["data"]["value"], "1");

    // A repository Secret with a wrong password wins over the template: refused, with a
    // message naming the repository and the Secret, never the password; and the mirror
    // the right credentials made is not used for it.
    let wrong = secret(
        "repository",
        "app-repo",
        json!({"url": format!("{url}.git"), "username": "deploy", "password": "wrong-pass"}),
    );
    let bad = settings(&[template.clone(), wrong], None);
    let access = RepoAccess::resolve(&bad, &url, "default", TemplateMatch::Prefix);
    let err = cache
        .manifests_with(&source(&url), &access, Refresh::Normal)
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains(&url)
            && text.contains("refused the credentials of Secret argocd/app-repo")
            && text.contains("HTTP 401"),
        "{text}"
    );
    assert_no_secret(&text, &[PASSWORD, "wrong-pass"]);
    assert_no_secret(&format!("{access:?} {err:?}"), &[PASSWORD, "wrong-pass"]);

    // A project-scoped template serves only its project.
    let mut scoped = template;
    scoped["stringData"]["project"] = json!("team-a");
    let scoped = settings(&[scoped], None);
    for (project, ok) in [("team-a", true), ("team-b", false)] {
        let access = RepoAccess::resolve(&scoped, &url, project, TemplateMatch::Prefix);
        let got = cache
            .manifests_with(&source(&url), &access, Refresh::Hard)
            .await;
        assert_eq!(got.is_ok(), ok, "{project}: {got:?}");
    }
}

#[tokio::test]
async fn ssh_with_a_key_checked_against_known_hosts() {
    let tmp = tempfile::tempdir().unwrap();
    let (_git, commit) = repo_at(&tmp.path().join("repo"));
    let server = GitSshServer::start().unwrap();
    let url = server.url(&tmp.path().join("repo"));
    let key = server.client_key();
    let key_body = key.lines().nth(1).unwrap().to_owned();
    let cache = RepoCache::new(RepoCacheConfig::new(tmp.path().join("cache")));
    let repo_secret = |insecure: bool| {
        secret(
            "repository",
            "ssh-repo",
            json!({"url": url, "sshPrivateKey": key, "insecure": insecure.to_string()}),
        )
    };

    // Messages show the URL without its user (`ssh://<redacted>@127.0.0.1:…`).
    let shown = redact_userinfo(&url);
    // The right key and the server's host key: read.
    let good = settings(&[repo_secret(false)], Some(&server.known_hosts()));
    let access = RepoAccess::resolve(&good, &url, "default", TemplateMatch::Prefix);
    let m = cache
        .manifests_with(&source(&url), &access, Refresh::Normal)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(m.commit, commit);

    // Another host key in argocd-ssh-known-hosts-cm: refused before authenticating.
    let impostor = settings(&[repo_secret(false)], Some(&server.wrong_known_hosts()));
    let access = RepoAccess::resolve(&impostor, &url, "default", TemplateMatch::Prefix);
    let err = cache
        .manifests_with(&source(&url), &access, Refresh::Normal)
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains(&shown) && text.contains("host key is not in argocd-ssh-known-hosts-cm"),
        "{text}"
    );
    assert_no_secret(&format!("{text} {err:?} {access:?}"), &[&key_body]);

    // The host unknown, but `insecure`: the host key is not checked.
    let insecure = settings(&[repo_secret(true)], Some(""));
    let access = RepoAccess::resolve(&insecure, &url, "default", TemplateMatch::Prefix);
    let m = cache
        .manifests_with(&source(&url), &access, Refresh::Normal)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(m.commit, commit);

    // A key the server does not authorize.
    let other = GitSshServer::start().unwrap();
    let stranger = secret(
        "repository",
        "ssh-repo",
        json!({"url": url, "sshPrivateKey": other.client_key()}),
    );
    let refused = settings(&[stranger], Some(&server.known_hosts()));
    let access = RepoAccess::resolve(&refused, &url, "default", TemplateMatch::Prefix);
    let err = cache
        .manifests_with(&source(&url), &access, Refresh::Normal)
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains(&shown) && text.contains("refused the SSH key of Secret argocd/ssh-repo"),
        "{text}"
    );
}

/// A server that accepts connections and never answers: the fetch ends at the timeout
/// with an error naming the repository.
#[tokio::test]
async fn a_silent_server_is_an_error_not_a_hang() {
    let tmp = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let url = format!("git://{addr}/repo");
    let mut config = RepoCacheConfig::new(tmp.path().join("cache"));
    let fetch_timeout = Duration::from_secs(2);
    config.fetch_timeout = fetch_timeout;
    let cache = RepoCache::new(config);
    // Ten times the fetch timeout before giving up: the error must come from the fetch's
    // own timeout, which it names.
    let err = tokio::time::timeout(
        fetch_timeout * 10,
        cache.resolve(&url, "main", Refresh::Normal),
    )
    .await
    .expect("the fetch from a silent server hung")
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains(&url) && text.contains("no answer within 2 s"),
        "{text}"
    );
    drop(listener);
}
