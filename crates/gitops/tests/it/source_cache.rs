//! The repository cache: refresh interval, hard refresh, single flight, and the mirror path
//! (a `file://` repository cloned and fetched like a remote one).

use std::sync::Arc;
use std::time::Duration;

use fleetshard_gitops::source::{
    DEFAULT_REFRESH_INTERVAL, Refresh, RepoCache, RepoCacheConfig, SourceError,
};
use fleetshard_manifest::AppSource;
use fleetshard_testsupport::git::{Git, config_map};

fn source(repo: &str, revision: &str, path: &str) -> AppSource {
    AppSource {
        repo_url: repo.to_owned(),
        target_revision: revision.to_owned(),
        path: path.to_owned(),
        directory: Default::default(),
        raw: Default::default(),
    }
}

/// Time is paused: only `advance` moves it, so "within the interval" is exact.
#[tokio::test(start_paused = true)]
async fn a_moved_branch_is_seen_after_the_refresh_interval_or_a_hard_refresh() {
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    git.write("app/cm.yaml", &config_map("cm", "1"));
    let c1 = git.commit("1");
    let cache = RepoCache::new(RepoCacheConfig::new(tmp.path().join("cache")));
    let app = source(&git.path(), "main", "app");
    assert_eq!(
        cache.manifests(&app, Refresh::Normal).await.unwrap().commit,
        c1
    );

    git.write("app/cm.yaml", &config_map("cm", "2"));
    let c2 = git.commit("2");
    tokio::time::advance(DEFAULT_REFRESH_INTERVAL - Duration::from_secs(1)).await;
    // Within the interval the resolution is trusted: no new read of the references.
    assert_eq!(
        cache.manifests(&app, Refresh::Normal).await.unwrap().commit,
        c1
    );
    assert_eq!(cache.stats().fetches, 1);
    // A hard refresh looks now.
    let m = cache.manifests(&app, Refresh::Hard).await.unwrap();
    assert_eq!(m.commit, c2);
    assert_eq!(m.objects[0].object["data"]["value"], "2");
    assert_eq!(cache.stats().fetches, 2);

    git.write("app/cm.yaml", &config_map("cm", "3"));
    let c3 = git.commit("3");
    tokio::time::advance(DEFAULT_REFRESH_INTERVAL - Duration::from_secs(1)).await;
    assert_eq!(
        cache
            .resolve(&git.path(), "main", Refresh::Normal)
            .await
            .unwrap(),
        c2
    );
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(
        cache
            .resolve(&git.path(), "main", Refresh::Normal)
            .await
            .unwrap(),
        c3
    );
    // A commit id never expires, and an old commit's manifests are still cached.
    let reads = cache.stats().reads;
    tokio::time::advance(DEFAULT_REFRESH_INTERVAL * 10).await;
    let old = cache
        .manifests(&source(&git.path(), &c1, "app"), Refresh::Normal)
        .await
        .unwrap();
    assert_eq!(old.objects[0].object["data"]["value"], "1");
    assert_eq!(cache.stats().reads, reads, "c1/app was read once already");
}

/// `ResolvedSince(t)`: a resolution from data fetched before `t` is not used, one fetched
/// at or after it is — so a new owner's apps, all asking since its takeover, share one
/// fetch.
#[tokio::test(start_paused = true)]
async fn a_resolution_since_an_instant_fetches_once_for_all_who_ask() {
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    git.write("app/cm.yaml", &config_map("cm", "1"));
    let c1 = git.commit("1");
    let cache = RepoCache::new(RepoCacheConfig::new(tmp.path().join("cache")));
    let repo = git.path();
    let resolve = |refresh| cache.resolve(&repo, "main", refresh);
    assert_eq!(resolve(Refresh::Normal).await.unwrap(), c1);
    git.write("app/cm.yaml", &config_map("cm", "2"));
    let c2 = git.commit("2");
    tokio::time::advance(Duration::from_secs(1)).await;
    let taken_over = tokio::time::Instant::now();
    assert_eq!(
        resolve(Refresh::Normal).await.unwrap(),
        c1,
        "within the interval"
    );
    for _ in 0..3 {
        assert_eq!(
            resolve(Refresh::ResolvedSince(taken_over)).await.unwrap(),
            c2
        );
    }
    assert_eq!(cache.stats().fetches, 2, "one fetch before, one since");
}

#[tokio::test(start_paused = true)]
async fn a_revision_missing_from_older_data_is_looked_for_again() {
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    git.write("app/cm.yaml", &config_map("cm", "1"));
    git.commit("1");
    let cache = RepoCache::new(RepoCacheConfig::new(tmp.path().join("cache")));
    let err = cache
        .resolve(&git.path(), "feature", Refresh::Normal)
        .await
        .unwrap_err();
    assert!(
        matches!(err, SourceError::RevisionNotFound { .. }),
        "{err:?}"
    );
    git.run(&["checkout", "-q", "-b", "feature"]);
    let c2 = git.commit("feature work");
    // Still within the interval of the first fetch, but an unknown revision re-reads.
    assert_eq!(
        cache
            .resolve(&git.path(), "feature", Refresh::Normal)
            .await
            .unwrap(),
        c2
    );
}

/// Many applications on one repository at once: one fetch, one resolution, one read, one
/// shared result. Real threads, so the requests do overlap the first fetch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_fetch_and_read_once() {
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    for i in 0..50 {
        git.write(
            &format!("app/cm{i}.yaml"),
            &config_map(&format!("cm{i}"), "v"),
        );
    }
    git.commit("many");
    let mut config = RepoCacheConfig::new(tmp.path().join("cache"));
    // The mirror path: the first request clones, which takes long enough for every other
    // request to arrive while it runs.
    config.mirror_local = true;
    let cache = RepoCache::new(config);
    let app = source(&git.file_url(), "main", "app");
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
    assert_eq!(results[0].objects.len(), 50);
    let stats = cache.stats();
    assert_eq!(
        (stats.fetches, stats.resolutions, stats.reads),
        (1, 1, 1),
        "{stats:?}"
    );
}

#[tokio::test]
async fn mirrors_clone_once_then_fetch_branches_tags_and_head() {
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    git.write("app/cm.yaml", &config_map("cm", "1"));
    let c1 = git.commit("1");
    git.run(&["tag", "-a", "v1", "-m", "v1"]);
    let mut config = RepoCacheConfig::new(tmp.path().join("cache"));
    config.mirror_local = true;
    let cache = RepoCache::new(config);
    let url = git.file_url();
    for revision in ["main", "HEAD", "v1", &c1[..8]] {
        assert_eq!(
            cache
                .resolve(&url, revision, Refresh::Normal)
                .await
                .unwrap(),
            c1,
            "{revision}"
        );
    }
    // One bare mirror, named by the hash of the normalised URL.
    let mirrors: Vec<_> = std::fs::read_dir(tmp.path().join("cache"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(mirrors.len(), 1, "{mirrors:?}");
    assert!(
        mirrors[0].ends_with(".git") && mirrors[0].len() == 36,
        "{mirrors:?}"
    );

    // The source moves on: a new commit on main, a new branch that becomes HEAD, a tag.
    git.write("app/cm.yaml", &config_map("cm", "2"));
    let c2 = git.commit("2");
    git.run(&["checkout", "-q", "-b", "next"]);
    let c3 = git.commit("3");
    git.run(&["tag", "v3"]);
    let m = cache
        .manifests(&source(&url, "main", "app"), Refresh::Hard)
        .await
        .unwrap();
    assert_eq!(m.commit, c2);
    assert_eq!(m.objects[0].object["data"]["value"], "2");
    assert_eq!(
        cache.resolve(&url, "next", Refresh::Normal).await.unwrap(),
        c3
    );
    assert_eq!(
        cache.resolve(&url, "v3", Refresh::Normal).await.unwrap(),
        c3
    );
    assert_eq!(
        cache.resolve(&url, "HEAD", Refresh::Hard).await.unwrap(),
        c3
    );
    // A damaged mirror (its HEAD file gone, so it no longer opens) is cloned again.
    let mirror = tmp.path().join("cache").join(&mirrors[0]);
    std::fs::remove_file(mirror.join("HEAD")).unwrap();
    let fetches = cache.stats().fetches;
    assert_eq!(
        cache.resolve(&url, "main", Refresh::Hard).await.unwrap(),
        c2
    );
    assert_eq!(cache.stats().fetches, fetches + 1);
    assert!(mirror.join("HEAD").exists(), "the mirror was cloned again");
    // The source repository is gone: the mirror still answers what it has, and a fetch
    // fails with a typed error.
    std::fs::remove_dir_all(&git.dir).unwrap();
    assert_eq!(cache.resolve(&url, &c1, Refresh::Normal).await.unwrap(), c1);
    let err = cache
        .resolve(&url, "main", Refresh::Hard)
        .await
        .unwrap_err();
    assert!(matches!(err, SourceError::Fetch { .. }), "{err:?}");
    // A repository that never existed cannot be cloned.
    let err = cache
        .resolve(
            &format!("file://{}/nothing", tmp.path().display()),
            "main",
            Refresh::Normal,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, SourceError::Fetch { .. }), "{err:?}");
    assert_eq!(
        std::fs::read_dir(tmp.path().join("cache")).unwrap().count(),
        1,
        "no half mirror left"
    );
}
