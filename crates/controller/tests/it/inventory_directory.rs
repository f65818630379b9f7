//! The directory source: polling under paused time over an in-memory filesystem (reads are
//! counted, so "unchanged files are not re-read" is checked), and one test on the real
//! filesystem with deadlines.

use std::time::Duration;

use fleetshard_controller::AppKey;
use fleetshard_controller::inventory::{
    DirectoryConfig, DirectorySource, Inventory, InventorySnapshot, MemoryFiles, Severity,
};

use crate::support::wait_for;

fn secret(name: &str, uid: &str, server: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  namespace: argocd\n  uid: {uid}\n  labels:\n    argocd.argoproj.io/secret-type: cluster\nstringData:\n  name: {name}\n  server: {server}\n"
    )
}

fn app(name: &str, dest: &str) -> String {
    format!(
        "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: {name}\n  namespace: argocd\nspec:\n  project: default\n  destination:\n    {dest}\n    namespace: default\n"
    )
}

fn docs(parts: &[String]) -> String {
    parts.join("---\n")
}

fn names(snap: &InventorySnapshot) -> (Vec<String>, Vec<String>) {
    (
        snap.clusters.iter().map(|c| c.server.clone()).collect(),
        snap.apps.iter().map(|a| a.name.clone()).collect(),
    )
}

fn start(files: &MemoryFiles) -> (Inventory, tokio::task::JoinHandle<()>) {
    // These fleets model no in-cluster destination (see
    // `argo_objects_alone_get_the_built_in_in_cluster_entry`).
    start_with(files, false)
}

fn start_with(
    files: &MemoryFiles,
    in_cluster_enabled: bool,
) -> (Inventory, tokio::task::JoinHandle<()>) {
    let inventory = Inventory::new();
    let config = DirectoryConfig {
        dir: "/fleet".into(),
        poll_interval: Duration::from_secs(1),
        in_cluster_enabled,
    };
    let source = DirectorySource::with_files(config, files.clone());
    let task = tokio::spawn(source.run(inventory.clone()));
    (inventory, task)
}

#[tokio::test(start_paused = true)]
async fn follows_added_modified_and_deleted_files() {
    let files = MemoryFiles::default();
    files.write(
        "/fleet/clusters.yaml",
        &docs(&[
            secret("a", "u-a", "https://a"),
            secret("b", "u-b", "https://b"),
        ]),
    );
    files.write("/fleet/apps/one.yaml", &app("one", "server: https://a"));
    files.write("/elsewhere/x.yaml", &app("ignored", "server: https://a"));
    let (inventory, task) = start(&files);
    let mut rx = inventory.subscribe();

    let snap = wait_for(&mut rx, "first load", |s| s.ready).await;
    assert_eq!(snap.revision, 1);
    assert_eq!(
        names(&snap),
        (
            vec!["https://a".into(), "https://b".into()],
            vec!["one".into()]
        )
    );
    assert!(snap.problems.is_empty(), "{:?}", snap.problems);
    assert_eq!(files.reads(), 2);

    // Nothing changes: scans only stat, nothing is re-read, nothing is published.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(files.reads(), 2);
    assert!(!rx.has_changed().expect("alive"));

    // A new file.
    files.write("/fleet/apps/two.yaml", &app("two", "name: b"));
    let snap = wait_for(&mut rx, "new file", |s| s.apps.len() == 2).await;
    assert_eq!(snap.revision, 2);
    assert_eq!(snap.apps[1].destination.name.as_deref(), Some("b"));

    // A modified file.
    files.write("/fleet/apps/one.yaml", &app("one", "server: https://b"));
    let snap = wait_for(&mut rx, "modified file", |s| {
        s.apps[0].destination.server.as_deref() == Some("https://b")
    })
    .await;
    assert_eq!(snap.revision, 3);

    // Rewritten with the same content: re-read (new stamp), but the revision stays.
    let reads = files.reads();
    files.write("/fleet/apps/one.yaml", &app("one", "server: https://b"));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(files.reads(), reads + 1);
    assert_eq!(inventory.snapshot().revision, 3);

    // A deleted file.
    files.remove("/fleet/clusters.yaml");
    let snap = wait_for(&mut rx, "deleted file", |s| s.clusters.is_empty()).await;
    assert_eq!(snap.revision, 4);
    assert_eq!(snap.apps.len(), 2);
    task.abort();
}

#[tokio::test(start_paused = true)]
async fn a_bad_file_keeps_its_last_good_objects_and_names_the_field() {
    let files = MemoryFiles::default();
    files.write("/fleet/clusters.yaml", &secret("a", "u-a", "https://a"));
    files.write(
        "/fleet/apps.yaml",
        &docs(&[
            app("one", "server: https://a"),
            app("two", "server: https://a"),
        ]),
    );
    let (inventory, task) = start(&files);
    let mut rx = inventory.subscribe();
    let good = wait_for(&mut rx, "first load", |s| s.ready).await;
    assert_eq!(good.apps.len(), 2);

    // A type error inside one Secret: the whole file keeps its previous objects.
    files.write(
        "/fleet/clusters.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: a\n  namespace: argocd\n  uid: u-a\n  labels: [oops]\nstringData:\n  server: https://changed\n",
    );
    let snap = wait_for(&mut rx, "problem", |s| !s.problems.is_empty()).await;
    assert_eq!(snap.revision, good.revision, "content unchanged");
    assert_eq!(snap.clusters, good.clusters);
    let p = &snap.problems[0];
    assert_eq!(p.severity, Severity::Error);
    assert_eq!(p.source, "/fleet/clusters.yaml");
    assert_eq!(p.object, "Secret argocd/a");
    assert_eq!(p.field.as_deref(), Some("metadata.labels"));
    assert!(p.message.contains("/fleet/clusters.yaml"), "{}", p.message);

    // An application deploying nowhere: reported with its field and left out; the file's
    // other applications load (one bad object never stops the others).
    files.write(
        "/fleet/apps.yaml",
        &docs(&[app("one", "server: https://a"), app("two", "server: \"\"")]),
    );
    let snap = wait_for(&mut rx, "app problem", |s| {
        s.problems.iter().any(|p| p.source == "/fleet/apps.yaml")
    })
    .await;
    let (_, apps) = names(&snap);
    assert_eq!(apps, ["one"]);
    assert_eq!(snap.revision, good.revision + 1, "one app fewer");
    let p = snap
        .problems
        .iter()
        .find(|p| p.source == "/fleet/apps.yaml")
        .expect("reported");
    assert_eq!(p.object, "Application argocd/two");
    assert_eq!(p.field.as_deref(), Some("spec.destination"));

    // Syntax error in a new file: reported, nothing from it.
    files.write("/fleet/new.yaml", "kind: [unclosed\n");
    let snap = wait_for(&mut rx, "syntax problem", |s| {
        s.problems.iter().any(|p| p.source == "/fleet/new.yaml")
    })
    .await;
    assert_eq!(snap.revision, good.revision + 1);

    // Fixing everything clears the problems and moves the revision once.
    files.write("/fleet/clusters.yaml", &secret("a", "u-a", "https://a2"));
    files.write("/fleet/apps.yaml", &app("one", "server: https://a2"));
    files.remove("/fleet/new.yaml");
    let snap = wait_for(&mut rx, "fixed", |s| s.problems.is_empty()).await;
    assert_eq!(snap.revision, good.revision + 2);
    assert_eq!(snap.clusters[0].server, "https://a2");
    assert_eq!(snap.apps.len(), 1);
    task.abort();
}

#[tokio::test(start_paused = true)]
async fn duplicates_and_listing_failures_are_reported() {
    let files = MemoryFiles::default();
    files.write("/fleet/a.yaml", &app("same", "server: https://a"));
    files.write("/fleet/b.yaml", &app("same", "server: https://b"));
    let (inventory, task) = start(&files);
    let mut rx = inventory.subscribe();
    let snap = wait_for(&mut rx, "first load", |s| s.ready).await;
    assert_eq!(snap.apps.len(), 1, "keyed by namespace and name");
    assert_eq!(
        snap.apps[0].destination.server.as_deref(),
        Some("https://a")
    );
    assert_eq!(snap.problems.len(), 1);
    assert_eq!(snap.problems[0].source, "/fleet/b.yaml");

    files.fail_listing(true);
    let snap = wait_for(&mut rx, "listing problem", |s| {
        s.problems.iter().any(|p| p.object == "directory")
    })
    .await;
    assert_eq!(snap.apps.len(), 1, "last good files kept");
    files.fail_listing(false);
    wait_for(&mut rx, "listing recovered", |s| {
        s.problems.iter().all(|p| p.object != "directory")
    })
    .await;
    task.abort();
}

/// App `argocd/name` to `https://a` from directory `path` of one repository.
fn app_at(name: &str, path: &str) -> String {
    format!(
        "{}  source:\n    repoURL: https://git.example/apps\n    path: {path}\n",
        app(name, "server: https://a")
    )
}

#[tokio::test(start_paused = true)]
async fn specs_follow_the_files_and_the_first_definition() {
    let files = MemoryFiles::default();
    files.write("/fleet/a.yaml", &app_at("one", "first"));
    files.write("/fleet/b.yaml", &app_at("one", "second"));
    let (inventory, task) = start(&files);
    let mut rx = inventory.subscribe();
    let snap = wait_for(&mut rx, "first load", |s| s.ready).await;
    let one = AppKey::new("argocd", "one");
    assert_eq!(snap.specs.len(), 1);
    assert_eq!(
        snap.spec(&one).source.path,
        "first",
        "the first file's definition, spec included"
    );
    assert_eq!(snap.spec(&one).source.target_revision, "HEAD");

    // Only the source changes: the app is the same, the revision moves.
    files.write("/fleet/a.yaml", &app_at("one", "moved"));
    let snap2 = wait_for(&mut rx, "new source", |s| {
        s.specs
            .get(&one)
            .is_some_and(|s| s.to_spec().source.path == "moved")
    })
    .await;
    assert_eq!(snap2.apps, snap.apps);
    assert_eq!(snap2.revision, snap.revision + 1);
    task.abort();
}

/// The source holds a published app by its key only and takes it back from the inventory:
/// through other files' changes, its own file's failure, and a shadowed definition (held
/// whole) that takes over when the first file goes.
#[tokio::test(start_paused = true)]
async fn published_apps_come_back_from_the_inventory_and_shadowed_ones_stay_whole() {
    let files = MemoryFiles::default();
    files.write("/fleet/a.yaml", &app_at("one", "first"));
    files.write(
        "/fleet/b.yaml",
        &docs(&[app_at("one", "second"), app_at("two", "b-two")]),
    );
    let (inventory, task) = start(&files);
    let mut rx = inventory.subscribe();
    let first = wait_for(&mut rx, "first load", |s| s.ready).await;
    let (one, two) = (AppKey::new("argocd", "one"), AppKey::new("argocd", "two"));
    assert_eq!(names(&first).1, ["one", "two"]);
    assert_eq!(first.spec(&one).source.path, "first");

    // Another file changes: a.yaml's and b.yaml's published apps come back unchanged.
    files.write("/fleet/c.yaml", &app_at("three", "c-three"));
    let snap = wait_for(&mut rx, "c.yaml read", |s| s.apps.len() == 3).await;
    assert_eq!(names(&snap).1, ["one", "two", "three"]);
    assert_eq!(snap.spec(&one).source.path, "first");
    assert_eq!(snap.spec(&two).source.path, "b-two");
    assert_eq!(snap.specs.len(), 3);

    // b.yaml stops parsing: its last good objects, published ones included, are kept.
    files.write("/fleet/b.yaml", "kind: [oops\n");
    let snap = wait_for(&mut rx, "b.yaml's problem", |s| {
        s.problems.iter().any(|p| p.source == "/fleet/b.yaml")
    })
    .await;
    assert_eq!(snap.spec(&two).source.path, "b-two");
    files.write("/fleet/c.yaml", &app_at("three", "c-moved"));
    let snap = wait_for(&mut rx, "c.yaml moved", |s| {
        s.specs
            .get(&AppKey::new("argocd", "three"))
            .is_some_and(|s| s.to_spec().source.path == "c-moved")
    })
    .await;
    assert_eq!(names(&snap).1, ["one", "two", "three"]);
    assert_eq!(
        snap.spec(&two).source.path,
        "b-two",
        "kept through a bad read"
    );

    // a.yaml goes: b.yaml's shadowed definition of `one`, never published, takes over.
    files.remove("/fleet/a.yaml");
    let snap = wait_for(&mut rx, "a.yaml gone", |s| {
        s.specs
            .get(&one)
            .is_some_and(|s| s.to_spec().source.path == "second")
    })
    .await;
    assert_eq!(names(&snap).1.len(), 3);
    task.abort();
}

/// Real files, real time: poll for each condition with a generous deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path();
    std::fs::create_dir(path.join("sub")).expect("mkdir");
    std::fs::write(path.join("clusters.yaml"), secret("a", "u-a", "https://a")).expect("write");
    std::fs::write(path.join("sub/apps.json"), r#"{"apiVersion":"argoproj.io/v1alpha1","kind":"Application","metadata":{"name":"j","namespace":"argocd"},"spec":{"destination":{"server":"https://a"}}}"#).expect("write");
    std::fs::write(path.join("notes.txt"), "not a manifest").expect("write");
    std::fs::write(path.join(".hidden.yaml"), "kind: [broken").expect("write");

    let inventory = Inventory::new();
    let mut rx = inventory.subscribe();
    let config = DirectoryConfig {
        dir: path.to_owned(),
        poll_interval: Duration::from_millis(50),
        in_cluster_enabled: false,
    };
    let task = tokio::spawn(DirectorySource::new(config).run(inventory.clone()));
    let snap = wait_for(&mut rx, "first load", |s| s.ready).await;
    assert_eq!(names(&snap), (vec!["https://a".into()], vec!["j".into()]));
    assert!(snap.problems.is_empty(), "{:?}", snap.problems);

    // A size change, so that a coarse mtime cannot hide it.
    std::fs::write(
        path.join("clusters.yaml"),
        docs(&[
            secret("a", "u-a", "https://a"),
            secret("bb", "u-b", "https://bb"),
        ]),
    )
    .expect("write");
    wait_for(&mut rx, "added cluster", |s| s.clusters.len() == 2).await;

    std::fs::remove_file(path.join("sub/apps.json")).expect("rm");
    let snap = wait_for(&mut rx, "deleted file", |s| s.apps.is_empty()).await;
    assert_eq!(snap.clusters.len(), 2);
    task.abort();
}

/// A directory of Argo CD's objects is Argo CD's cluster list: the built-in in-cluster entry
/// is part of it unless a Secret names the in-cluster server; a native fleet file names the
/// whole fleet; disabled, a Secret for the in-cluster server is left out with a warning.
#[tokio::test(start_paused = true)]
async fn argo_objects_alone_get_the_built_in_in_cluster_entry() {
    const LOCAL: &str = "https://kubernetes.default.svc";
    let files = MemoryFiles::default();
    files.write("/fleet/clusters.yaml", &secret("a", "u-a", "https://a"));
    files.write(
        "/fleet/apps.yaml",
        &app("guestbook", &format!("server: {LOCAL}")),
    );
    let (inventory, task) = start_with(&files, true);
    let mut rx = inventory.subscribe();
    let snap = wait_for(&mut rx, "first load", |s| s.ready).await;
    assert_eq!(names(&snap).0, ["https://a", LOCAL]);
    assert_eq!(snap.clusters[1].id, "");
    assert!(snap.credentials[""].pod_service_account);
    assert!(snap.problems.is_empty(), "{:?}", snap.problems);

    // A native fleet file beside them: the files name the whole fleet.
    files.write(
        "/fleet/native.yaml",
        "clusters:\n- name: n1\n  server: https://n1\n",
    );
    let snap = wait_for(&mut rx, "a native file", |s| {
        s.clusters.len() == 2 && s.clusters[1].id == "n1"
    })
    .await;
    assert!(!snap.credentials.contains_key(""));
    task.abort();

    // Disabled: a Secret for the in-cluster server is left out, and said so.
    let files = MemoryFiles::default();
    files.write(
        "/fleet/clusters.yaml",
        &docs(&[
            secret("a", "u-a", "https://a"),
            secret("local", "u-l", LOCAL),
        ]),
    );
    let (inventory, task) = start_with(&files, false);
    let mut rx = inventory.subscribe();
    let snap = wait_for(&mut rx, "first load", |s| s.ready).await;
    assert_eq!(names(&snap).0, ["https://a"]);
    assert!(
        snap.problems.iter().any(|p| p.severity == Severity::Warning
            && p.message.contains("in-cluster destination is disabled")),
        "{:?}",
        snap.problems
    );
    task.abort();
}
