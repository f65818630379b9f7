//! The Git source over smart HTTP, against Git's own `git http-backend` served on a
//! loopback port: revisions, refresh, single flight, and what a refusing server means.
//! Credentials (basic authentication, repository Secrets) are in `source_auth`.

use std::sync::Arc;
use std::time::Duration;

use fleetshard_gitops::source::{Refresh, RepoCache, RepoCacheConfig, SourceError};
use fleetshard_manifest::AppSource;
use fleetshard_testsupport::git::{Git, config_map};
use fleetshard_testsupport::git_http::GitHttpServer;

fn source(repo: &str, revision: &str, path: &str) -> AppSource {
    AppSource {
        repo_url: repo.to_owned(),
        target_revision: revision.to_owned(),
        path: path.to_owned(),
        directory: Default::default(),
        raw: Default::default(),
    }
}

/// The repository `<tmp>/repos/<name>` (branch `main`, one commit) and a server for
/// `<tmp>/repos`.
async fn served(tmp: &tempfile::TempDir, name: &str) -> (GitHttpServer, Git, String) {
    let root = tmp.path().join("repos");
    let git = Git::init(&root.join(name));
    git.write("app/cm.yaml", &config_map("cm", "1"));
    let c1 = git.commit("1");
    let server = GitHttpServer::start(root).await.unwrap();
    (server, git, c1)
}

/// How many times the server listed the references of `repo` (one per fetch).
fn ref_listings(server: &GitHttpServer, repo: &str) -> usize {
    let prefix = format!("GET /{repo}/info/refs");
    server
        .requests()
        .iter()
        .filter(|r| r.starts_with(&prefix))
        .count()
}

/// The mirrors (and half mirrors) in the cache directory: everything but the salt.
fn cache_entries(tmp: &tempfile::TempDir) -> Vec<String> {
    match std::fs::read_dir(tmp.path().join("cache")) {
        Ok(dir) => dir
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|name| name != ".salt")
            .collect(),
        Err(_) => Vec::new(),
    }
}

#[tokio::test]
async fn manifests_over_http_at_a_branch_a_tag_and_a_commit() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, git, c1) = served(&tmp, "repo").await;
    git.run(&["tag", "-a", "v1", "-m", "release 1"]);
    git.write("app/cm.yaml", &config_map("cm", "2"));
    git.write(
        "app/other.json",
        r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"ns"}}"#,
    );
    let c2 = git.commit("2");
    git.run(&["checkout", "-q", "-b", "next"]);
    git.write("app/cm.yaml", &config_map("cm", "3"));
    let c3 = git.commit("3");
    git.run(&["checkout", "-q", "main"]);

    let cache = RepoCache::new(RepoCacheConfig::new(tmp.path().join("cache")));
    let url = server.url("repo");
    for (revision, commit, value, objects) in [
        ("main", &c2, "2", 2),
        ("HEAD", &c2, "2", 2),
        ("", &c2, "2", 2),
        ("next", &c3, "3", 2),
        ("v1", &c1, "1", 1),
        (c1.as_str(), &c1, "1", 1),
        (&c1[..7], &c1, "1", 1),
    ] {
        let m = cache
            .manifests(&source(&url, revision, "app"), Refresh::Normal)
            .await
            .unwrap_or_else(|e| panic!("{revision:?}: {e}"));
        assert_eq!(&m.commit, commit, "{revision:?}");
        assert_eq!(m.objects.len(), objects, "{revision:?}");
        assert_eq!(m.objects[0].object["data"]["value"], value, "{revision:?}");
    }
    // One clone served every revision; a spelling that differs only in the scheme's and
    // host's case or a trailing slash shares the mirror.
    let other_spelling = format!("HTTP://{}/repo/", server.addr());
    assert_eq!(
        cache
            .resolve(&other_spelling, "main", Refresh::Normal)
            .await
            .unwrap(),
        c2
    );
    assert_eq!(cache.stats().fetches, 1, "{:?}", cache.stats());
    assert_eq!(ref_listings(&server, "repo"), 1, "{:?}", server.requests());
    let mirrors = cache_entries(&tmp);
    assert_eq!(mirrors.len(), 1, "{mirrors:?}");
    // The server really spoke smart HTTP (upload-pack), not the dumb protocol.
    assert!(
        server
            .requests()
            .iter()
            .any(|r| r == "POST /repo/git-upload-pack"),
        "{:?}",
        server.requests()
    );
    let err = cache
        .resolve(&url, "no-such-branch", Refresh::Normal)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, SourceError::RevisionNotFound { repo, .. } if *repo == url),
        "{err:?}"
    );
}

/// Real time (the server is real): a short interval, and polling with a deadline.
#[tokio::test]
async fn a_new_commit_is_seen_after_the_refresh_interval_or_a_hard_refresh() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, git, c1) = served(&tmp, "repo").await;
    let url = server.url("repo");
    let app = source(&url, "main", "app");
    // An interval no test run outlasts: only a hard refresh fetches again.
    let mut config = RepoCacheConfig::new(tmp.path().join("cache"));
    config.refresh_interval = Duration::from_secs(3600);
    let slow = RepoCache::new(config);
    // A short one: a later normal request fetches again.
    let mut config = RepoCacheConfig::new(tmp.path().join("cache-fast"));
    config.refresh_interval = Duration::from_millis(200);
    let fast = RepoCache::new(config);
    for cache in [&slow, &fast] {
        assert_eq!(
            cache.manifests(&app, Refresh::Normal).await.unwrap().commit,
            c1
        );
    }

    git.write("app/cm.yaml", &config_map("cm", "2"));
    let c2 = git.commit("2");
    assert_eq!(
        slow.manifests(&app, Refresh::Normal).await.unwrap().commit,
        c1,
        "within the interval the resolution is trusted"
    );
    assert_eq!(slow.stats().fetches, 1);
    let m = slow.manifests(&app, Refresh::Hard).await.unwrap();
    assert_eq!((m.commit.as_str(), slow.stats().fetches), (c2.as_str(), 2));
    assert_eq!(m.objects[0].object["data"]["value"], "2");

    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let m = fast.manifests(&app, Refresh::Normal).await.unwrap();
        if m.commit == c2 {
            assert_eq!(m.objects[0].object["data"]["value"], "2");
            break;
        }
        assert_eq!(m.commit, c1);
        assert!(
            tokio::time::Instant::now() < deadline,
            "the new commit was not fetched within 60 s: {:?}",
            fast.stats()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(fast.stats().fetches >= 2, "{:?}", fast.stats());
    assert_eq!(
        ref_listings(&server, "repo") as u64,
        slow.stats().fetches + fast.stats().fetches,
        "every fetch went to the server"
    );
}

/// Many applications on one repository at once: one fetch over HTTP (one listing of the
/// references on the server), one resolution, one read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_fetch_once_over_http() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, git, _) = served(&tmp, "repo").await;
    for i in 0..50 {
        git.write(
            &format!("app/cm{i}.yaml"),
            &config_map(&format!("cm{i}"), "v"),
        );
    }
    git.commit("many");
    let cache = RepoCache::new(RepoCacheConfig::new(tmp.path().join("cache")));
    let app = source(&server.url("repo"), "main", "app");
    let barrier = Arc::new(tokio::sync::Barrier::new(64));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..64 {
        let (cache, app, barrier) = (cache.clone(), app.clone(), Arc::clone(&barrier));
        tasks.spawn(async move {
            barrier.wait().await;
            cache.manifests(&app, Refresh::Normal).await
        });
    }
    let mut results = Vec::new();
    while let Some(r) = tasks.join_next().await {
        results.push(r.unwrap().unwrap());
    }
    assert_eq!(results.len(), 64);
    // One read, kept as text: every caller gets the same objects (parsed for each).
    assert!(results.iter().all(|r| **r == *results[0]));
    assert_eq!(results[0].objects.len(), 51);
    let stats = cache.stats();
    assert_eq!(
        (stats.fetches, stats.resolutions, stats.reads),
        (1, 1, 1),
        "{stats:?}"
    );
    assert_eq!(ref_listings(&server, "repo"), 1, "{:?}", server.requests());
}

#[tokio::test]
async fn a_missing_repository_is_not_found_and_leaves_no_mirror() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, _git, _) = served(&tmp, "repo").await;
    let cache = RepoCache::new(RepoCacheConfig::new(tmp.path().join("cache")));
    let url = server.url("nothing");
    let err = cache
        .resolve(&url, "main", Refresh::Normal)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, SourceError::RepoNotFound { repo, message } if *repo == url && message.contains("404")),
        "{err:?}"
    );
    assert!(err.to_string().contains(&url), "{err}");
    assert_eq!(cache_entries(&tmp), Vec::<String>::new(), "no half mirror");
    // Nothing listens on the port any more: a fetch error, naming the repository.
    let addr = server.addr();
    drop(server);
    let gone = format!("http://{addr}/repo");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let err = loop {
        // The server task ends shortly after the drop; poll until connections are refused.
        match cache.resolve(&gone, "main", Refresh::Hard).await {
            Err(err) => break err,
            Ok(_) => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the server never stopped"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    assert!(
        matches!(&err, SourceError::Fetch { repo, .. } if *repo == gone),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_server_asking_for_credentials_is_refused_with_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, _git, _) = served(&tmp, "repo").await;
    server.deny("private", 401);
    server.deny("forbidden", 403);
    let cache = RepoCache::new(RepoCacheConfig::new(tmp.path().join("cache")));

    let private = server.url("private/repo");
    let err = cache
        .resolve(&private, "main", Refresh::Normal)
        .await
        .unwrap_err();
    let SourceError::Fetch { repo, message } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(repo, &private);
    assert!(
        message.contains("HTTP 401")
            && message.contains("no repository Secret or credential template matches"),
        "{message}"
    );
    assert!(err.to_string().contains(&private), "{err}");
    // Asked once, refused at once: no retry with credentials, no prompt.
    assert_eq!(
        ref_listings(&server, "private/repo"),
        1,
        "{:?}",
        server.requests()
    );

    let forbidden = server.url("forbidden/repo");
    let err = cache
        .resolve(&forbidden, "main", Refresh::Normal)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, SourceError::Fetch { repo, message }
            if *repo == forbidden && message.contains("HTTP 403") && message.contains("no repository Secret or credential template matches")),
        "{err:?}"
    );
    assert_eq!(cache_entries(&tmp), Vec::<String>::new(), "no half mirror");
}

/// No certificate here to serve TLS with: an `https://` URL to the plain HTTP server shows
/// the https path is built in (a TLS client with a crypto provider, no panic) and fails
/// the handshake with a fetch error rather than an unsupported URL.
#[tokio::test]
async fn https_goes_through_the_same_transport_with_tls() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, _git, _) = served(&tmp, "repo").await;
    let cache = RepoCache::new(RepoCacheConfig::new(tmp.path().join("cache")));
    let url = format!("https://{}/repo", server.addr());
    let err = cache
        .resolve(&url, "main", Refresh::Normal)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, SourceError::Fetch { repo, .. } if *repo == url),
        "{err:?}"
    );
    // The server saw bytes that are not HTTP (a TLS ClientHello), so no request was logged.
    assert_eq!(server.requests(), Vec::<String>::new());
}
