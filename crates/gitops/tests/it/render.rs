//! Rendering against real repositories: source type detection, Kustomize with the real
//! `kubectl kustomize` (or `kustomize`) on PATH, Jsonnet in process, Helm through a fake
//! `helm` executable, and the conditions when a tool is missing.

use std::ffi::OsString;
use std::sync::Arc;

use fleetshard_gitops::source::{
    RenderConfig, Rendered, RepoCache, RepoCacheConfig, SourceError, SourceType, StandaloneRenderer,
};
use fleetshard_manifest::AppSource;
use fleetshard_testsupport::git::{Git, config_map};
use serde_json::{Value, json};

pub(crate) fn renderer(tmp: &tempfile::TempDir, config: RenderConfig) -> StandaloneRenderer {
    let repos = RepoCache::new(RepoCacheConfig::new(tmp.path().join("cache")));
    StandaloneRenderer::new(repos, config)
}

/// A directory holding only the named executables of the system's PATH (symbolic
/// links), as the tools' search path.
pub fn path_with(tmp: &tempfile::TempDir, tools: &[&str]) -> OsString {
    let dir = tmp.path().join("bin");
    std::fs::create_dir_all(&dir).unwrap();
    for tool in tools {
        let found = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .map(|d| d.join(tool))
            .find(|p| p.is_file())
            .unwrap_or_else(|| panic!("{tool} must be installed for this test"));
        std::os::unix::fs::symlink(found, dir.join(tool)).unwrap();
    }
    dir.into_os_string()
}

pub(crate) use crate::shared_render::{render_with, source};

async fn render(r: &StandaloneRenderer, source: &AppSource) -> Result<Rendered, SourceError> {
    render_with(r, source, &[]).await
}

fn objects(r: &Rendered) -> Vec<&Value> {
    r.manifests.objects.iter().map(|m| &m.object).collect()
}

fn deployment(name: &str, image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n    spec:\n      containers:\n      - name: main\n        image: {image}\n"
    )
}

/// A base with a Deployment and a ConfigMap, an overlay with a patch and a component.
fn kustomize_repo(tmp: &tempfile::TempDir) -> Git {
    let git = Git::init(&tmp.path().join("repo"));
    git.write("base/deploy.yaml", &deployment("web", "nginx:1.25"));
    git.write("base/cm.yaml", &config_map("settings", "base"));
    git.write(
        "base/kustomization.yaml",
        "resources:\n- deploy.yaml\n- cm.yaml\n",
    );
    git.write(
        "components/extra/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources:\n- extra.yaml\n",
    );
    git.write("components/extra/extra.yaml", &config_map("extra", "c"));
    git.write(
        "overlays/prod/kustomization.yaml",
        "resources:\n- ../../base\npatches:\n- target: {kind: ConfigMap, name: settings}\n  patch: |-\n    - op: replace\n      path: /data/value\n      value: prod\n",
    );
    git.commit("kustomize");
    git
}

#[tokio::test]
async fn a_kustomize_overlay_builds_with_the_sources_overrides() {
    let tmp = tempfile::tempdir().unwrap();
    let git = kustomize_repo(&tmp);
    let config = RenderConfig {
        path: Some(path_with(&tmp, &["kubectl"])),
        ..RenderConfig::default()
    };
    let r = renderer(&tmp, config);
    let src = source(
        &git.path(),
        "overlays/prod",
        json!({"kustomize": {
            "namePrefix": "p-",
            "images": ["nginx=registry.example/nginx:$ARGOCD_APP_NAME"],
            "commonLabels": {"team": "a"},
            "components": ["../../components/extra"],
        }}),
    );
    let rendered = render(&r, &src).await.unwrap();
    assert_eq!(rendered.source_type, SourceType::Kustomize);
    let objs = objects(&rendered);
    let mut names: Vec<&str> = objs
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["p-extra", "p-settings", "p-web"]);
    let web = objs.iter().find(|o| o["kind"] == "Deployment").unwrap();
    assert_eq!(
        web["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.example/nginx:guestbook"
    );
    assert_eq!(web["metadata"]["labels"]["team"], "a");
    let settings = objs
        .iter()
        .find(|o| o["metadata"]["name"] == "p-settings")
        .unwrap();
    assert_eq!(settings["data"]["value"], "prod", "the overlay's patch");

    // The repository itself is not changed by the overrides.
    assert!(
        !std::fs::read_to_string(tmp.path().join("repo/overlays/prod/kustomization.yaml"))
            .unwrap()
            .contains("p-")
    );
}

/// argocd-cm's `kustomize.buildOptions` reach the build (here kustomize's load
/// restrictor, which refuses a file outside the kustomization's directory by default), and
/// `kustomize.enable: "false"` makes a Kustomize directory a plain one, as Argo CD's
/// repo-server reads it.
#[tokio::test]
async fn argocd_cm_build_options_and_enabled_types_are_honoured() {
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    git.write("shared/cm.yaml", &config_map("shared", "s"));
    git.write(
        "app/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ../shared/cm.yaml\n",
    );
    git.commit("kustomize");
    let config = RenderConfig {
        path: Some(path_with(&tmp, &["kubectl"])),
        ..RenderConfig::default()
    };
    let r = renderer(&tmp, config);
    let src = source(&git.path(), "app", json!({}));
    let refused = render(&r, &src).await.unwrap_err().to_string();
    assert!(refused.contains("security"), "{refused}");
    let built = render_with(
        &r,
        &src,
        &[(
            "kustomize.buildOptions",
            "--load-restrictor LoadRestrictionsNone",
        )],
    )
    .await
    .unwrap();
    assert_eq!(built.source_type, SourceType::Kustomize);
    assert_eq!(objects(&built)[0]["metadata"]["name"], "shared");

    // Read as a plain directory, which refuses a kustomization file by name rather than
    // apply a Kustomization object.
    let off = render_with(&r, &src, &[("kustomize.enable", "false")]).await;
    assert!(
        matches!(&off, Err(SourceError::UnsupportedSource { file, .. }) if file == "app/kustomization.yaml"),
        "{off:?}"
    );
}

#[tokio::test]
async fn kustomize_without_an_executable_or_with_a_remote_base_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let git = kustomize_repo(&tmp);
    let none = renderer(
        &tmp,
        RenderConfig {
            path: Some(path_with(&tmp, &[])),
            ..RenderConfig::default()
        },
    );
    let src = source(&git.path(), "overlays/prod", json!({}));
    let err = render(&none, &src).await.unwrap_err().to_string();
    assert!(
        err.contains("Kustomize needs a `kustomize` or `kubectl` executable on PATH"),
        "{err}"
    );

    // The overlay reaches a base naming a remote base; another app's kustomization
    // (here one leaving the repository) is not the overlay's concern.
    git.write(
        "overlays/prod/kustomization.yaml",
        "resources:\n- ../../base\n- ../../remote\n",
    );
    git.write(
        "elsewhere/kustomization.yaml",
        "resources:\n- ../../../../etc\n",
    );
    git.write(
        "remote/kustomization.yaml",
        "resources:\n- https://github.com/kubernetes-sigs/kustomize//examples/helloWorld?ref=v5.5.0\n",
    );
    git.commit("a remote base");
    let tmp2 = tempfile::tempdir().unwrap();
    let r = renderer(
        &tmp2,
        RenderConfig {
            path: Some(path_with(&tmp2, &["kubectl"])),
            ..RenderConfig::default()
        },
    );
    let err = render(&r, &source(&git.path(), "overlays/prod", json!({})))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("remote base"),
        "a base the overlay reaches: {err}"
    );
    assert!(err.contains("remote/kustomization.yaml"), "{err}");
}

#[tokio::test]
async fn jsonnet_files_render_with_ext_vars_tlas_and_libs_inside_the_repository() {
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    git.write(
        "vendor/lib/cm.libsonnet",
        "{ cm(name, value):: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: name }, data: { value: value } } }",
    );
    git.write(
        "app/main.jsonnet",
        "local lib = import 'lib/cm.libsonnet';\nfunction(replicas, tier='web') [\n  lib.cm('env-' + std.extVar('env'), std.toString(replicas)),\n  { apiVersion: 'v1', kind: 'List', items: [lib.cm(tier, std.extVar('app'))] },\n]\n",
    );
    git.write("app/plain.yaml", &config_map("plain", "1"));
    git.commit("jsonnet");
    let r = renderer(&tmp, RenderConfig::default());
    let src = source(
        &git.path(),
        "app",
        json!({"directory": {"jsonnet": {
            "extVars": [{"name": "env", "value": "prod"}, {"name": "app", "value": "$ARGOCD_APP_NAME"}],
            "tlas": [{"name": "replicas", "value": "std.length([1, 2, 3])", "code": true}, {"name": "tier", "value": "db"}],
            "libs": ["vendor"],
        }}}),
    );
    let rendered = render(&r, &src).await.unwrap();
    assert_eq!(rendered.source_type, SourceType::Directory);
    let got: Vec<(String, String)> = objects(&rendered)
        .iter()
        .map(|o| {
            (
                o["metadata"]["name"].as_str().unwrap().to_owned(),
                o["data"]["value"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("env-prod".to_owned(), "3".to_owned()),
            ("db".to_owned(), "guestbook".to_owned()),
            ("plain".to_owned(), "1".to_owned()),
        ]
    );

    // Imports never leave the repository.
    for (file, import) in [
        ("abs.jsonnet", "import '/etc/passwd'"),
        ("up.jsonnet", "importstr '../../../../../../etc/passwd'"),
    ] {
        git.write(&format!("bad/{file}"), import);
    }
    git.commit("escapes");
    for file in ["abs.jsonnet", "up.jsonnet"] {
        let tmp = tempfile::tempdir().unwrap();
        let r = renderer(&tmp, RenderConfig::default());
        let include = json!({"directory": {"include": file}});
        let err = render(&r, &source(&git.path(), "bad", include))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("outside the repository"), "{file}: {err}");
        assert!(
            !err.contains("root:"),
            "{file}: nothing of the file is shown: {err}"
        );
    }
}

#[tokio::test]
async fn a_directory_still_reads_include_and_exclude_and_says_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    git.write("app/a.yaml", &config_map("a", "1"));
    git.write("app/b.yaml", &config_map("b", "1"));
    git.write("app/sub/c.yaml", &config_map("c", "1"));
    git.commit("dir");
    let r = renderer(&tmp, RenderConfig::default());
    let src = source(
        &git.path(),
        "app",
        json!({"directory": {"recurse": true, "exclude": "b.yaml"}}),
    );
    let rendered = render(&r, &src).await.unwrap();
    assert_eq!(rendered.source_type, SourceType::Directory);
    let names: Vec<&str> = objects(&rendered)
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "c"], "recursive, b excluded");
}

#[tokio::test]
async fn helm_runs_only_through_a_helm_executable_with_argo_cds_arguments() {
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    git.write(
        "chart/Chart.yaml",
        "apiVersion: v2\nname: c\nversion: 0.1.0\n",
    );
    git.write("chart/values-prod.yaml", "replicas: 2\n");
    git.commit("chart");
    let src = source(
        &git.path(),
        "chart",
        json!({"helm": {
            "releaseName": "rel",
            "valueFiles": ["values-prod.yaml", "missing.yaml"],
            "ignoreMissingValueFiles": true,
            "valuesObject": {"a": 1},
            "parameters": [{"name": "x", "value": "1,2"}, {"name": "y", "value": "s", "forceString": true}],
            "skipCrds": true,
        }}),
    );
    let no_helm = renderer(
        &tmp,
        RenderConfig {
            path: Some(path_with(&tmp, &[])),
            ..RenderConfig::default()
        },
    );
    let err = render(&no_helm, &src).await.unwrap_err().to_string();
    assert!(
        err.contains(
            "Helm needs Argo CD's repo-server (--repo-server) or a helm executable on PATH"
        ),
        "{err}"
    );

    // A fake helm that prints its arguments as a ConfigMap.
    let bin = tmp.path().join("fake-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = bin.join("helm");
    std::fs::write(
        &script,
        "#!/bin/sh\nd=$(pwd)\nprintf 'apiVersion: v1\\nkind: ConfigMap\\nmetadata:\\n  name: args\\ndata:\\n  args: |-\\n    %s\\n  cwd: %s\\n' \"$*\" \"${d##*/}\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let tmp2 = tempfile::tempdir().unwrap();
    let with_helm = renderer(
        &tmp2,
        RenderConfig {
            path: Some(bin.into_os_string()),
            ..RenderConfig::default()
        },
    );
    let rendered = render(&with_helm, &src).await.unwrap();
    assert_eq!(rendered.source_type, SourceType::Helm);
    let cm = objects(&rendered)[0].clone();
    let args = cm["data"]["args"].as_str().unwrap();
    let shown: String = args
        .split(' ')
        .map(|a| {
            // The temporary copy's paths end in the repository path.
            a.rsplit_once("/repo/").map_or(a, |(_, rel)| rel)
        })
        .map(|a| {
            if a.ends_with("fleetshard-inline-values.yaml") {
                "INLINE"
            } else {
                a
            }
        })
        .collect::<Vec<_>>()
        .join(" ");
    assert_eq!(
        shown,
        "template . --name-template rel --namespace team-a --kube-version 1.31.0 \
         --set x=1\\,2 --set-string y=s --values chart/values-prod.yaml --values INLINE \
         --api-versions apps/v1"
    );
    assert_eq!(cm["data"]["cwd"], "chart");
}

#[tokio::test]
async fn explicit_types_win_and_a_plugin_needs_the_repo_server() {
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    git.write("app/cm.yaml", &config_map("a", "1"));
    git.commit("dir");
    let r = Arc::new(renderer(&tmp, RenderConfig::default()));
    let err = render(
        &r,
        &source(&git.path(), "app", json!({"plugin": {"name": "cmp"}})),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(err.contains("need Argo CD's repo-server"), "{err}");
    let err = render(
        &r,
        &source(&git.path(), "app", json!({"helm": {}, "kustomize": {}})),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("multiple application sources defined: Kustomize,Helm"),
        "{err}"
    );
}
