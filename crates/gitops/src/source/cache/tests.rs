//! The cache's own state across reopenings.

use fleetshard_testsupport::git::{Git, config_map};

use super::*;

/// A repository with `n` apps side by side in its root (`app-NNNNN/cm.yaml`).
fn monorepo(dir: &std::path::Path, n: usize) -> Git {
    let git = Git::init(dir);
    for i in 0..n {
        git.write(&format!("app-{i:05}/cm.yaml"), &config_map("cm", "1"));
    }
    git.commit("apps");
    git
}

fn source(repo: &str, path: &str) -> AppSource {
    AppSource {
        repo_url: repo.to_owned(),
        target_revision: "main".to_owned(),
        path: path.to_owned(),
        directory: Default::default(),
        raw: Default::default(),
    }
}

/// How many large trees the repository's current opening has indexed.
async fn indexed(cache: &RepoCache, repo: &str) -> usize {
    let slot = cache.slot(repo, &RepoAccess::anonymous()).unwrap();
    let state = slot.state.lock().await;
    state.opened.as_ref().map_or(0, |o| o.trees.len())
}

/// A new owner's first refreshes ask for data fetched since its takeover, so the local
/// repository is opened again; its root, indexed before, must not be indexed again.
#[tokio::test(start_paused = true)]
async fn a_reopened_repository_keeps_its_large_trees_indexed() {
    let tmp = tempfile::tempdir().unwrap();
    let git = monorepo(&tmp.path().join("repo"), 2_000);
    let repo = git.path();
    let cache = RepoCache::new(RepoCacheConfig::new(tmp.path().join("cache")));
    cache
        .manifests(&source(&repo, "app-00001"), Refresh::Normal)
        .await
        .unwrap();
    assert_eq!(indexed(&cache, &repo).await, 1, "the root is a large tree");
    tokio::time::advance(std::time::Duration::from_secs(1)).await;
    let taken_over = Instant::now();
    let since = Refresh::ResolvedSince(taken_over);
    cache.resolve(&repo, "main", since).await.unwrap();
    assert_eq!(cache.stats().fetches, 2, "opened again since the takeover");
    assert_eq!(indexed(&cache, &repo).await, 1, "the root's index was kept");
    let m = cache
        .manifests(&source(&repo, "app-01999"), since)
        .await
        .unwrap();
    assert_eq!(m.objects.len(), 1);
    assert_eq!(cache.stats().fetches, 2, "no other opening");
    assert_eq!(indexed(&cache, &repo).await, 1);
}
