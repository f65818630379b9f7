//! The directory source's unit tests.

use super::*;

const APP: &str = "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: NAME\n  namespace: argocd\nspec:\n  destination:\n    server: https://a\n  source:\n    repoURL: https://git.example/apps\n    path: PATH\n";

fn app(name: &str, path: &str) -> String {
    APP.replace("NAME", name).replace("PATH", path)
}

/// Once published, a file's apps are held by key only; a shadowed one stays whole.
#[test]
fn published_apps_are_held_by_key_only() {
    let files = MemoryFiles::default();
    files.write("/fleet/a.yaml", &app("one", "a"));
    files.write(
        "/fleet/b.yaml",
        &[app("one", "b"), app("two", "b")].join("---\n"),
    );
    let mut source = DirectorySource::with_files(DirectoryConfig::new("/fleet"), files);
    assert!(source.scan());
    let inventory = Inventory::new();
    let (content, problems) = source.assemble(&inventory.snapshot());
    inventory.publish(content, problems, true);
    let held = |path: &str| -> Vec<String> {
        source.entries[Path::new(path)]
            .good
            .as_ref()
            .unwrap()
            .apps
            .iter()
            .map(|a| match a {
                FileApp::Whole(held) => format!("whole {}", held.0.name),
                FileApp::Published(key) => format!("key {key}"),
            })
            .collect()
    };
    assert_eq!(held("/fleet/a.yaml"), ["key argocd/one"]);
    assert_eq!(held("/fleet/b.yaml"), ["whole one", "key argocd/two"]);
    // Assembled again from the keys: the same content.
    let before = inventory.snapshot();
    let (again, _) = source.assemble(&before);
    assert_eq!(again.apps, *before.apps);
    assert_eq!(again.specs, *before.specs);
}

fn cluster(name: &str, uid: &str, server: &str, token: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  namespace: argocd\n  uid: {uid}\n  labels:\n    argocd.argoproj.io/secret-type: cluster\nstringData:\n  name: {name}\n  server: {server}\n  config: '{{\"bearerToken\":\"{token}\"}}'\n"
    )
}

/// How a file holds its clusters and its credentials: `whole NAME` or `id ID`.
fn held_clusters(source: &DirectorySource<MemoryFiles>, path: &str) -> (Vec<String>, Vec<String>) {
    let good = source.entries[Path::new(path)].good.as_ref().unwrap();
    let clusters = (good.clusters.iter())
        .map(|c| match c {
            FileCluster::Whole(c) => format!("whole {}", c.name),
            FileCluster::Published(id) => format!("id {id}"),
        })
        .collect();
    let credentials = (good.credentials.iter())
        .map(|(id, c)| match c {
            FileCredentials::Whole(_) => format!("whole {id}"),
            FileCredentials::Published => format!("id {id}"),
        })
        .collect();
    (clusters, credentials)
}

/// Once published, a file's clusters and credentials are held by id only; a cluster
/// whose id two files name, and credentials a later file replaces, stay whole.
#[test]
fn published_clusters_are_held_by_id_only() {
    let files = MemoryFiles::default();
    files.write(
        "/fleet/a.yaml",
        &[
            cluster("one", "u1", "https://one", "t1"),
            cluster("two", "u2", "https://two", "t2"),
        ]
        .join("---\n"),
    );
    files.write(
        "/fleet/b.yaml",
        &cluster("two-again", "u2", "https://2", "t3"),
    );
    let mut source = DirectorySource::with_files(DirectoryConfig::new("/fleet"), files);
    assert!(source.scan());
    let inventory = Inventory::new();
    let (content, problems) = source.assemble(&inventory.snapshot());
    inventory.publish(content, problems, true);
    assert_eq!(
        held_clusters(&source, "/fleet/a.yaml"),
        (
            vec!["id u1".to_owned(), "whole two".to_owned()],
            vec!["id u1".to_owned(), "whole u2".to_owned()]
        )
    );
    assert_eq!(
        held_clusters(&source, "/fleet/b.yaml"),
        (vec!["whole two-again".to_owned()], vec!["id u2".to_owned()])
    );
    // Assembled again from the ids: the same content (the built-in in-cluster entry
    // included), and the same marks.
    let before = inventory.snapshot();
    let (again, _) = source.assemble(&before);
    assert_eq!(again.clusters, *before.clusters);
    assert_eq!(again.credentials, *before.credentials);
    assert!(again.clusters.iter().any(|c| c.id.is_empty()));
    assert_eq!(
        held_clusters(&source, "/fleet/a.yaml").0,
        ["id u1", "whole two"]
    );
    // The file that named u2 again is removed: a's u2 is the only one now, its
    // credentials the published ones, and both are held by id after the next assembly.
    source.files.remove("/fleet/b.yaml");
    assert!(source.scan());
    let (content, problems) = source.assemble(&before);
    assert_eq!(
        content.credentials["u2"].bearer_token.as_deref(),
        Some("t2")
    );
    inventory.publish(content, problems, true);
    let (again, _) = source.assemble(&inventory.snapshot());
    assert_eq!(again.clusters, *inventory.snapshot().clusters);
    assert_eq!(
        held_clusters(&source, "/fleet/a.yaml"),
        (
            vec!["id u1".to_owned(), "id u2".to_owned()],
            vec!["id u1".to_owned(), "id u2".to_owned()]
        )
    );
}

/// A cluster Argo CD's list leaves out (a Secret naming the in-cluster server while the
/// in-cluster destination is disabled) is not published, so its file keeps it whole.
#[test]
fn a_cluster_left_out_of_argo_cds_list_stays_whole() {
    let files = MemoryFiles::default();
    files.write(
        "/fleet/a.yaml",
        &[
            cluster("one", "u1", "https://one", "t1"),
            cluster("local", "u0", "https://kubernetes.default.svc", "t0"),
        ]
        .join("---\n"),
    );
    let config = DirectoryConfig {
        in_cluster_enabled: false,
        ..DirectoryConfig::new("/fleet")
    };
    let mut source = DirectorySource::with_files(config, files);
    assert!(source.scan());
    let inventory = Inventory::new();
    let (content, problems) = source.assemble(&inventory.snapshot());
    assert!(content.clusters.iter().all(|c| c.id != "u0"));
    inventory.publish(content, problems, true);
    assert_eq!(
        held_clusters(&source, "/fleet/a.yaml").0,
        ["id u1", "whole local"]
    );
    // Assembled again: still left out, still reported, and still held.
    let before = inventory.snapshot();
    let (again, problems) = source.assemble(&before);
    assert_eq!(again.clusters, *before.clusters);
    assert!(problems.iter().any(|p| p.message.contains("in-cluster")));
}
