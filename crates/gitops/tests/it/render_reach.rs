//! What a tenant's kustomization reaches, with the real `kubectl kustomize`: every field
//! that takes a path or a URL, argocd-cm's load restrictor and exec options, and the
//! bounds on a tool's output. Each case is an attack that worked before the check: an
//! internal HTTP endpoint's body, or a file of the replica's host, ended up in a
//! ConfigMap of the tenant's namespace.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use fleetshard_gitops::source::{
    ReadLimits, RenderConfig, RepoCache, RepoCacheConfig, StandaloneRenderer,
};
use fleetshard_testsupport::git::{Git, config_map};
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::render::{path_with, render_with, renderer, source};

/// A renderer of `config` with only the system's `kubectl` on its tools' path.
fn with_kubectl(tmp: &tempfile::TempDir, config: RenderConfig) -> StandaloneRenderer {
    renderer(
        tmp,
        RenderConfig {
            path: Some(path_with(tmp, &["kubectl"])),
            ..config
        },
    )
}

/// An "internal" HTTP endpoint on 127.0.0.1 that answers every request with a secret and
/// counts the requests.
async fn internal_endpoint() -> (u16, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf).await;
                let body = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: internal\ndata:\n  secret: internal-endpoint-secret\n";
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\ncontent-type: text/plain\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(reply.as_bytes()).await;
            });
        }
    });
    (port, hits)
}

#[tokio::test]
async fn a_kustomization_fetches_nothing_and_reads_no_file_outside_the_repository() {
    let (port, hits) = internal_endpoint().await;
    let url = format!("http://127.0.0.1:{port}");
    let tmp = tempfile::tempdir().unwrap();
    // A file of the replica's host, outside the repository.
    let host_file = tmp.path().join("token");
    std::fs::write(&host_file, "the-replica-token").unwrap();
    let host_file = host_file.display().to_string();
    let git = Git::init(&tmp.path().join("repo"));
    git.write("app/cm.yaml", &config_map("plain", "v"));
    // A directory named `http:` made a resources URL look like a path of the tree.
    git.write(
        &format!("app/http:/127.0.0.1:{port}/r.yaml"),
        &config_map("decoy", "v"),
    );
    git.write(
        "app/transformer.yaml",
        &format!(
            "apiVersion: builtin\nkind: PatchTransformer\nmetadata:\n  name: p\npath: {url}/patch.yaml\n"
        ),
    );
    git.commit("apps");
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "generator file URL",
            format!("resources: [cm.yaml]\nconfigMapGenerator:\n- name: g\n  files: [k={url}/x]\n"),
            "is a URL",
        ),
        (
            "generator file outside",
            format!("configMapGenerator:\n- name: g\n  files: [k={host_file}]\n"),
            "outside the repository",
        ),
        (
            "generator envs outside",
            "secretGenerator:\n- name: g\n  envs: [../../../../../../../etc/hostname]\n".to_owned(),
            "outside the repository",
        ),
        (
            "patch URL",
            format!("resources: [cm.yaml]\npatches:\n- path: {url}/patch.yaml\n"),
            "is a URL",
        ),
        (
            "strategic merge patch URL",
            format!("resources: [cm.yaml]\npatchesStrategicMerge:\n- {url}/patch.yaml\n"),
            "is a URL",
        ),
        (
            "resources URL beside a directory named http:",
            format!("resources: [{url}/r.yaml]\n"),
            "no path of the repository",
        ),
        (
            "transformer file with a URL patch",
            "resources: [cm.yaml]\ntransformers: [transformer.yaml]\n".to_owned(),
            "is a URL",
        ),
        (
            "inline transformer reading a host file",
            format!(
                "resources: [cm.yaml]\ntransformers:\n- |-\n  apiVersion: builtin\n  kind: PatchTransformer\n  metadata:\n    name: p\n  path: {host_file}\n"
            ),
            "outside the repository",
        ),
        (
            "openapi schema outside",
            format!("resources: [cm.yaml]\nopenapi:\n  path: {host_file}\n"),
            "outside the repository",
        ),
        (
            "helm chart pulled from a repository",
            format!(
                "helmCharts:\n- name: c\n  repo: {url}/charts\n  version: 1.0.0\n  releaseName: r\n"
            ),
            "pull the chart",
        ),
    ];
    // argocd-cm's load restrictor, common among Argo CD users, lets kustomize read any
    // file: the check holds whatever it says.
    let cm = [(
        "kustomize.buildOptions",
        "--load-restrictor LoadRestrictionsNone --enable-helm",
    )];
    for (i, (name, kustomization, refusal)) in cases.iter().enumerate() {
        git.write("app/kustomization.yaml", kustomization);
        git.commit(name);
        let tmp = tempfile::tempdir().unwrap();
        let r = with_kubectl(&tmp, RenderConfig::default());
        let result = render_with(&r, &source(&git.path(), "app", json!({})), &cm).await;
        let err = match result {
            Ok(rendered) => panic!("{name}: rendered {:?}", rendered.manifests.objects),
            Err(e) => e.to_string(),
        };
        assert!(err.contains(refusal), "{name} (case {i}): {err}");
        assert!(!err.contains("the-replica-token"), "{name}: {err}");
        assert!(!err.contains("internal-endpoint-secret"), "{name}: {err}");
    }
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "kustomize fetched from the network"
    );

    // A field path is no file: a label's field spec stays a relative path, and builds.
    git.write(
        "app/kustomization.yaml",
        "resources: [cm.yaml]\nlabels:\n- pairs: {team: a}\n  fields:\n  - path: metadata/annotations\n    kind: ConfigMap\n    create: true\n",
    );
    git.commit("labels");
    let tmp = tempfile::tempdir().unwrap();
    let r = with_kubectl(&tmp, RenderConfig::default());
    let rendered = render_with(&r, &source(&git.path(), "app", json!({})), &cm)
        .await
        .unwrap();
    assert_eq!(rendered.manifests.objects.len(), 1);
}

#[tokio::test]
async fn build_options_that_run_programs_are_refused_unless_the_operator_allows_them() {
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    git.write("app/cm.yaml", &config_map("plain", "v"));
    git.write("app/kustomization.yaml", "resources: [cm.yaml]\n");
    git.commit("app");
    let src = source(&git.path(), "app", json!({}));
    for options in [
        "--enable-alpha-plugins",
        "--enable-exec",
        "--enable-alpha-plugins=true",
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let r = with_kubectl(&tmp, RenderConfig::default());
        let err = render_with(&r, &src, &[("kustomize.buildOptions", options)])
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("run programs as the replica"),
            "{options}: {err}"
        );
    }
    let tmp = tempfile::tempdir().unwrap();
    let allowed = with_kubectl(
        &tmp,
        RenderConfig {
            allow_exec_plugins: true,
            ..RenderConfig::default()
        },
    );
    let rendered = render_with(
        &allowed,
        &src,
        &[("kustomize.buildOptions", "--enable-alpha-plugins")],
    )
    .await
    .unwrap();
    assert_eq!(rendered.manifests.objects.len(), 1);
}

#[tokio::test]
async fn a_tools_output_is_bounded_in_bytes_and_objects_before_it_is_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    let many: String = (0..12)
        .map(|i| format!("---\n{}", config_map(&format!("c{i}"), "v")))
        .collect();
    git.write("many/all.yaml", &many);
    git.write("many/kustomization.yaml", "resources: [all.yaml]\n");
    let big = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  v: {}\n",
        "x".repeat(64 * 1024)
    );
    git.write("big/big.yaml", &big);
    git.write("big/kustomization.yaml", "resources: [big.yaml]\n");
    git.commit("apps");
    let limits = ReadLimits {
        max_objects: 10,
        max_manifest_bytes: 32 * 1024,
        ..ReadLimits::default()
    };
    let mut config = RepoCacheConfig::new(tmp.path().join("cache"));
    config.limits = limits;
    let r = StandaloneRenderer::new(
        RepoCache::new(config),
        RenderConfig {
            path: Some(path_with(&tmp, &["kubectl"])),
            ..RenderConfig::default()
        },
    );
    let err = render_with(&r, &source(&git.path(), "many", json!({})), &[])
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("more than 10 objects"), "{err}");
    let err = render_with(&r, &source(&git.path(), "big", json!({})), &[])
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("more than 32768 bytes"), "{err}");
}
