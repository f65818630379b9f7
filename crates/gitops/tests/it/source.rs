//! The Git source against real repositories: revisions, trees, manifests, errors.

use fleetshard_gitops::source::{
    ManifestError, Manifests, Refresh, RepoCache, RepoCacheConfig, SourceError,
};
use fleetshard_manifest::AppSource;
use fleetshard_testsupport::git::{Git, config_map};
use fleetshard_testsupport::logs::LogCapture;

fn source(repo: &str, revision: &str, path: &str) -> AppSource {
    AppSource {
        repo_url: repo.to_owned(),
        target_revision: revision.to_owned(),
        path: path.to_owned(),
        directory: Default::default(),
        raw: Default::default(),
    }
}

/// `source` with `directory.recurse: true`.
fn recursive(repo: &str, revision: &str, path: &str) -> AppSource {
    let mut s = source(repo, revision, path);
    s.directory.recurse = true;
    s
}

fn cache(dir: &tempfile::TempDir) -> RepoCache {
    RepoCache::new(RepoCacheConfig::new(dir.path().join("cache")))
}

fn names(m: &Manifests) -> Vec<String> {
    m.objects
        .iter()
        .map(|o| format!("{} {} @{}", o.identity.kind, o.identity.name, o.location))
        .collect()
}

/// Two commits on `main`, an annotated tag `v1` and a lightweight tag `light` on the first.
fn two_commits(tmp: &tempfile::TempDir) -> (Git, String, String) {
    let git = Git::init(&tmp.path().join("repo"));
    git.write("app/cm.yaml", &config_map("cm", "one"));
    let c1 = git.commit("one");
    git.run(&["tag", "-a", "v1", "-m", "release 1"]);
    git.run(&["tag", "light"]);
    git.write("app/cm.yaml", &config_map("cm", "two"));
    let c2 = git.commit("two");
    (git, c1, c2)
}

#[tokio::test]
async fn revisions_resolve_like_git() {
    let tmp = tempfile::tempdir().unwrap();
    let (git, c1, c2) = two_commits(&tmp);
    git.run(&["branch", "old", &c1]);
    let cache = cache(&tmp);
    let repo = git.path();
    let cases = [
        ("main", &c2),
        ("HEAD", &c2),
        ("", &c2),
        ("refs/heads/main", &c2),
        ("old", &c1),
        ("v1", &c1),
        ("refs/tags/v1", &c1),
        ("light", &c1),
        (c1.as_str(), &c1),
        (&c1[..7], &c1),
        (&c2[..12], &c2),
    ];
    for (revision, want) in cases {
        let got = cache.resolve(&repo, revision, Refresh::Normal).await;
        assert_eq!(got.as_deref(), Ok(want.as_str()), "revision {revision:?}");
    }
    let m = cache
        .manifests(&source(&repo, "v1", "app"), Refresh::Normal)
        .await
        .unwrap();
    assert_eq!(m.commit, c1);
    assert_eq!(m.objects[0].object["data"]["value"], "one");
    let m = cache
        .manifests(&source(&repo, "main", "app"), Refresh::Normal)
        .await
        .unwrap();
    assert_eq!(m.objects[0].object["data"]["value"], "two");
}

#[tokio::test]
async fn file_urls_and_plain_paths_read_the_same_repository_once() {
    let tmp = tempfile::tempdir().unwrap();
    let (git, _, c2) = two_commits(&tmp);
    let cache = cache(&tmp);
    let by_path = cache
        .manifests(&source(&git.path(), "main", "app"), Refresh::Normal)
        .await
        .unwrap();
    let by_url = cache
        .manifests(&source(&git.file_url(), "main", "app/"), Refresh::Normal)
        .await
        .unwrap();
    assert_eq!(by_path.commit, c2);
    assert_eq!(by_path, by_url);
    let stats = cache.stats();
    assert_eq!((stats.fetches, stats.reads), (1, 1), "{stats:?}");
    // Nothing was copied: a local repository is read in place.
    assert!(!tmp.path().join("cache").exists());
}

#[tokio::test]
async fn trees_are_read_recursively_with_multi_document_yaml_json_and_lists() {
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    git.write(
        "apps/a.yaml",
        &format!("{}---\n{}", config_map("a1", "x"), config_map("a2", "y")),
    )
    .write(
        "apps/z/b.json",
        r#"{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "b", "namespace": "prod"}}"#,
    )
    .write(
        "apps/z/deeper/list.yml",
        "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Service, metadata: {name: s1}}\n- {apiVersion: v1, kind: Service, metadata: {name: s2}}\n",
    )
    .write("apps/.hidden.yaml", "not: [valid")
    .write(".github/workflow.yaml", "not: [valid")
    .write("apps/.config/x.yaml", "not: [valid")
    .write("apps/README.md", "# not a manifest\n")
    .write("apps/values.txt", "x: [")
    .write("other/c.yaml", &config_map("elsewhere", "z"));
    git.commit("tree");
    let cache = cache(&tmp);
    let m = cache
        .manifests(&recursive(&git.path(), "HEAD", "apps"), Refresh::Normal)
        .await
        .unwrap();
    assert_eq!(
        names(&m),
        vec![
            "ConfigMap a1 @apps/a.yaml, document 1",
            "ConfigMap a2 @apps/a.yaml, document 2",
            "Deployment b @apps/z/b.json, document 1",
            "Service s1 @apps/z/deeper/list.yml, document 1, items[0]",
            "Service s2 @apps/z/deeper/list.yml, document 1, items[1]",
        ]
    );
    assert_eq!(m.objects[2].identity.namespace.as_deref(), Some("prod"));
    assert_eq!(m.objects[2].identity.group(), "apps");
    // The root reads everything but hidden entries.
    let all = cache
        .manifests(&recursive(&git.path(), "HEAD", "."), Refresh::Normal)
        .await
        .unwrap();
    assert_eq!(all.objects.len(), 6);
}

#[tokio::test]
async fn bad_manifests_name_file_and_document_and_are_typed() {
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    git.write("ok/a.yaml", &config_map("a", "1"))
        .write(
            "nokind/x.yaml",
            &format!(
                "{}---\napiVersion: v1\nmetadata: {{name: b}}\n",
                config_map("a", "1")
            ),
        )
        .write(
            "syntax/y.yaml",
            "apiVersion: v1\nkind: A\nmetadata:\n  name: [unclosed\n",
        )
        .write("dup/one.yaml", &config_map("same", "1"))
        .write("dup/two/two.yaml", &config_map("same", "2"))
        .write("kust/kustomization.yaml", "resources: [a.yaml]\n")
        .write("kust/a.yaml", &config_map("a", "1"))
        .write("helm/sub/Chart.yaml", "apiVersion: v2\nname: c\n")
        .write("afile.yaml", &config_map("f", "1"));
    let commit = git.commit("bad things");
    let cache = cache(&tmp);
    let repo = git.path();
    let read = |path: &'static str| {
        let cache = cache.clone();
        let repo = repo.clone();
        async move {
            cache
                .manifests(&recursive(&repo, "main", path), Refresh::Normal)
                .await
        }
    };

    match read("nokind").await.unwrap_err() {
        SourceError::Manifest {
            error,
            commit: c,
            revision,
            ..
        } => {
            assert_eq!(c, commit);
            assert_eq!(revision, "main");
            assert_eq!(
                error.to_string(),
                "nokind/x.yaml, document 2: object has no kind"
            );
        }
        other => panic!("{other:?}"),
    }
    let err = read("syntax").await.unwrap_err();
    assert!(
        matches!(&err, SourceError::Manifest { error, .. } if matches!(&**error, ManifestError::Syntax { at, line: Some(_), .. } if at.file == "syntax/y.yaml")),
        "{err:?}"
    );
    // An object defined twice is read twice, in the files' order: the reconciler keeps
    // the last, with a RepeatedResourceWarning (as Argo CD).
    let dup = read("dup").await.unwrap();
    let files: Vec<&str> = dup
        .objects
        .iter()
        .map(|m| m.location.file.as_str())
        .collect();
    assert_eq!(files, ["dup/one.yaml", "dup/two/two.yaml"]);
    let err = read("kust").await.unwrap_err();
    assert!(
        matches!(&err, SourceError::UnsupportedSource { file, tool: "Kustomize", .. } if file == "kust/kustomization.yaml"),
        "{err:?}"
    );
    let err = read("helm").await.unwrap_err();
    assert!(
        matches!(&err, SourceError::UnsupportedSource { tool: "Helm", .. }),
        "{err:?}"
    );
    let err = read("missing/dir").await.unwrap_err();
    assert!(
        matches!(&err, SourceError::PathNotFound { reason: "not found", path, .. } if path == "missing/dir"),
        "{err:?}"
    );
    let err = read("afile.yaml").await.unwrap_err();
    assert!(
        matches!(
            &err,
            SourceError::PathNotFound {
                reason: "is not a directory",
                ..
            }
        ),
        "{err:?}"
    );
    for path in ["../x", "/etc", "a/../../b"] {
        let err = read(path).await.unwrap_err();
        assert!(
            matches!(&err, SourceError::InvalidPath { .. }),
            "{path}: {err:?}"
        );
    }
    // The error names the repository, the revision and the commit.
    let text = read("nokind").await.unwrap_err().to_string();
    assert!(
        text.contains(&repo) && text.contains("\"main\"") && text.contains(&commit),
        "{text}"
    );
    // A bad file stays bad at its commit: the second ask is answered from the cache.
    let before = cache.stats().reads;
    read("nokind").await.unwrap_err();
    assert_eq!(cache.stats().reads, before);
    // The rest of the repository is still readable.
    assert_eq!(read("ok").await.unwrap().objects.len(), 1);
}

#[tokio::test]
async fn missing_repositories_and_revisions_are_typed_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let (git, _, _) = two_commits(&tmp);
    let cache = cache(&tmp);
    let missing = tmp.path().join("nope").display().to_string();
    let err = cache
        .resolve(&missing, "main", Refresh::Normal)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, SourceError::RepoNotFound { repo, .. } if *repo == missing),
        "{err:?}"
    );
    let not_git = tmp.path().join("plain");
    std::fs::create_dir_all(&not_git).unwrap();
    let err = cache
        .resolve(&not_git.display().to_string(), "main", Refresh::Normal)
        .await
        .unwrap_err();
    assert!(matches!(&err, SourceError::RepoNotFound { .. }), "{err:?}");
    for revision in [
        "nosuchbranch",
        "deadbeef",
        "0123456789012345678901234567890123456789",
        "a..b",
    ] {
        let err = cache
            .resolve(&git.path(), revision, Refresh::Normal)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, SourceError::RevisionNotFound { revision: r, .. } if r == revision),
            "{revision}: {err:?}"
        );
    }
    // A tree id is an object, but not a commit.
    let tree = git.run(&["rev-parse", "HEAD^{tree}"]);
    let err = cache
        .resolve(&git.path(), &tree, Refresh::Normal)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, SourceError::RevisionNotFound { detail: Some(d), .. } if d.contains("not a commit")),
        "{err:?}"
    );
    let err = cache
        .resolve("ftp://example.invalid/r.git", "main", Refresh::Normal)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, SourceError::UnsupportedUrl { .. }),
        "{err:?}"
    );
}

/// Argo CD's directory defaults and options: the top level only unless `recurse`;
/// `exclude` then `include` globs on the path relative to `path` (`*` crosses `/`); a
/// Jsonnet file is refused rather than skipped (Argo CD would render it).
#[tokio::test]
async fn directories_are_read_as_argo_cd_reads_them() {
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    git.write("app/a.yaml", &config_map("a", "1"))
        .write("app/b.yaml", &config_map("b", "1"))
        .write(
            "app/config.json",
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"j"}}"#,
        )
        .write("app/other-app/c.yaml", &config_map("c", "1"))
        .write("app/other-app/deeper/d.yaml", &config_map("d", "1"))
        .write("js/ok.yaml", &config_map("ok", "1"))
        .write("js/main.jsonnet", "{}\n");
    git.commit("tree");
    let cache = cache(&tmp);
    let repo = git.path();
    let read = |recurse: bool, include: &str, exclude: &str| {
        let mut s = source(&repo, "main", "app");
        s.directory.recurse = recurse;
        s.directory.include = include.to_owned();
        s.directory.exclude = exclude.to_owned();
        let cache = cache.clone();
        async move {
            let m = cache.manifests(&s, Refresh::Normal).await.unwrap();
            m.objects
                .iter()
                .map(|o| o.identity.name.clone())
                .collect::<Vec<_>>()
        }
    };
    // The default: subfolders (often other apps' paths) are not this app's.
    assert_eq!(read(false, "", "").await, ["a", "b", "j"]);
    assert_eq!(read(true, "", "").await, ["a", "b", "j", "c", "d"]);
    assert_eq!(read(true, "*.yaml", "").await, ["a", "b", "c", "d"]);
    assert_eq!(read(true, "", "other-app/*").await, ["a", "b", "j"]);
    assert_eq!(read(false, "{a.yaml,config.json}", "").await, ["a", "j"]);
    assert_eq!(
        read(true, "*.yaml", "{b.yaml,*/deeper/*}").await,
        ["a", "c"]
    );

    let err = cache
        .manifests(&source(&repo, "main", "js"), Refresh::Normal)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, SourceError::UnsupportedSource { file, tool: "Jsonnet", .. } if file == "js/main.jsonnet"),
        "{err:?}"
    );
    let mut excluded = source(&repo, "main", "js");
    excluded.directory.exclude = "*.jsonnet".to_owned();
    assert_eq!(
        cache
            .manifests(&excluded, Refresh::Normal)
            .await
            .unwrap()
            .objects
            .len(),
        1,
        "an excluded Jsonnet file is not read"
    );
}

/// One app cannot exhaust the replica: manifests over the byte budget or over the object
/// limit are refused with an error naming the file and the setting, and nothing is read
/// past the limit.
#[tokio::test]
async fn an_app_over_its_limits_is_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    git.write("app/a.yaml", &config_map("a", "1"));
    git.write("app/big.yaml", &config_map("big", &"x".repeat(64 * 1024)));
    let many: Vec<String> = (0..30).map(|i| config_map(&format!("m{i}"), "v")).collect();
    git.write("many/all.yaml", &many.join("---\n"));
    git.commit("limits");
    let mut config = RepoCacheConfig::new(tmp.path().join("cache"));
    config.limits.max_manifest_bytes = 16 * 1024;
    config.limits.max_objects = 20;
    let limited = RepoCache::new(config);
    let repo = git.path();

    let err = limited
        .manifests(&source(&repo, "main", "app"), Refresh::Normal)
        .await
        .unwrap_err();
    assert!(matches!(err, SourceError::TooLarge { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("app/big.yaml") && message.contains("--max-manifest-bytes"),
        "{message}"
    );

    let err = limited
        .manifests(&source(&repo, "main", "many"), Refresh::Normal)
        .await
        .unwrap_err();
    assert!(matches!(err, SourceError::TooLarge { .. }), "{err}");
    assert!(err.to_string().contains("--max-objects"), "{err}");

    // Within the limits, the same repository reads.
    let ok = cache(&tmp)
        .manifests(&source(&repo, "main", "many"), Refresh::Normal)
        .await
        .unwrap();
    assert_eq!(ok.objects.len(), 30);
}

/// On Argo CD's objects a tenant's `file://` or plain-path repoURL would read the replica's
/// own files: refused unless allowed; and a path into the repository cache (another app's
/// mirror) is refused even in local mode.
#[tokio::test]
async fn local_repositories_are_refused_where_they_would_reach_the_replica() {
    let tmp = tempfile::tempdir().unwrap();
    let (git, _, _) = two_commits(&tmp);
    let repo = git.path();
    let mut config = RepoCacheConfig::new(tmp.path().join("cache"));
    config.allow_local = false;
    let refused = RepoCache::new(config);
    for url in [repo.clone(), format!("file://{repo}")] {
        let err = refused
            .manifests(&source(&url, "main", "app"), Refresh::Normal)
            .await
            .unwrap_err();
        assert!(matches!(err, SourceError::UnsupportedUrl { .. }), "{err}");
        assert!(
            err.to_string().contains("--allow-local-repositories"),
            "{err}"
        );
    }

    // Local mode: allowed, but never into the cache directory.
    let local = cache(&tmp);
    local
        .manifests(&source(&repo, "main", "app"), Refresh::Normal)
        .await
        .expect("a local repository in local mode");
    let cached = Git::init(&tmp.path().join("cache").join("someone-elses"));
    cached.write("app/cm.yaml", &config_map("secret-stuff", "x"));
    cached.commit("theirs");
    let err = local
        .manifests(&source(&cached.path(), "main", "app"), Refresh::Normal)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("repository cache"), "{err}");
}

/// Plaintext `http://` and `git://` repositories are refused with --refuse-plaintext-http,
/// before anything is fetched; without it, each is warned about.
#[tokio::test]
async fn plaintext_repositories_are_refused_when_asked() {
    for url in ["http://127.0.0.1:1/repo.git", "git://127.0.0.1:1/repo.git"] {
        let tmp = tempfile::tempdir().unwrap();
        let mut config = RepoCacheConfig::new(tmp.path().join("cache"));
        config.refuse_plaintext = true;
        let err = RepoCache::new(config)
            .manifests(&source(url, "main", "app"), Refresh::Normal)
            .await
            .unwrap_err();
        assert!(
            matches!(err, SourceError::UnsupportedUrl { .. }),
            "{url}: {err}"
        );
        assert!(err.to_string().contains("--refuse-plaintext-http"), "{err}");

        let logs = LogCapture::start();
        let tmp = tempfile::tempdir().unwrap();
        let err = RepoCache::new(RepoCacheConfig::new(tmp.path().join("cache")))
            .manifests(&source(url, "main", "app"), Refresh::Normal)
            .await
            .unwrap_err();
        assert!(
            !err.to_string().contains("--refuse-plaintext-http"),
            "{err}"
        );
        let text = logs.text();
        assert!(
            text.contains("WARN") && text.contains("cross the") && text.contains(url),
            "{url}: {text}"
        );
    }
}
