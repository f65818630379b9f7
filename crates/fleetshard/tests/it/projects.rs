//! AppProjects through the real loading path: the project an app names is looked up by
//! name in the inventory (the fleet's files, or Argo CD's namespace) and its rules hold.
//! Were the lookup to return the permissive default project, the locked app would sync
//! and these tests would fail.

use serde_json::{Value, json};

use crate::run_gitops::{
    APPS, application, cluster_secret, config_value, replica, start_fakes, synced, with_condition,
};
use crate::support::replicas::{apps_json, local_replica};
use crate::support::{KillOnDrop, wait_for};
use fleetshard_testsupport::git::{Git, config_map};

const SETTLE: std::time::Duration = crate::run_gitops::SETTLE;

/// A project that permits one repository, which is not the test's.
fn locked_project() -> Value {
    json!({
        "apiVersion": APPS, "kind": "AppProject",
        "metadata": {"name": "locked", "namespace": "argocd"},
        "spec": {
            "sourceRepos": ["https://git.example.invalid/only.git"],
            "destinations": [{"server": "*", "namespace": "*"}],
            "clusterResourceWhitelist": [{"group": "*", "kind": "*"}],
        },
    })
}

fn in_project(mut app: Value, project: &str) -> Value {
    app["spec"]["project"] = json!(project);
    app
}

/// The repository and its commit.
fn repo(dir: &std::path::Path) -> (Git, String) {
    let git = Git::init(&dir.join("repo"));
    git.write("open/cm.yaml", &config_map("open-cm", "o"));
    git.write("locked/cm.yaml", &config_map("locked-cm", "l"));
    let commit = git.commit("first");
    (git, commit)
}

#[test]
fn a_project_in_the_fleet_files_confines_its_app() {
    let dir = tempfile::tempdir().unwrap();
    let fakes = start_fakes(1);
    let (git, _) = repo(dir.path());
    let fleet = dir.path().join("fleet");
    std::fs::create_dir(&fleet).unwrap();
    let mut secret = cluster_secret("c0", &fakes.clusters[0].url());
    secret["metadata"]["uid"] = json!("uid-c0");
    let objects = json!({"apiVersion": "v1", "kind": "List", "items": [
        secret,
        locked_project(),
        application("open", &git.file_url(), "c0"),
        in_project(application("locked", &git.file_url(), "c0"), "locked"),
    ]});
    std::fs::write(fleet.join("argocd.json"), objects.to_string()).unwrap();
    let store = format!("sqlite://{}", dir.path().join("fs.db").display());
    let _replica = KillOnDrop(local_replica(dir.path(), &fleet, &store).spawn().unwrap());
    let locked = wait_for(
        "the open app synced, the locked one refused",
        SETTLE,
        || {
            let v = apps_json(&store)?;
            let apps = v["apps"].as_array().cloned().unwrap_or_default();
            let find = |name: &str| apps.iter().find(|a| a["app"] == name).cloned();
            let open = find("argocd/open").ok_or("no open app")?;
            let locked = find("argocd/locked").ok_or("no locked app")?;
            let refused = locked
                .to_string()
                .contains("is not permitted in project locked");
            (open["sync"] == "Synced" && refused)
                .then_some(locked)
                .ok_or_else(|| format!("{v}"))
        },
    );
    assert!(locked.to_string().contains("InvalidSpecError"), "{locked}");
    assert_eq!(
        config_value(&fakes.clusters[0], "open-cm"),
        Some(json!("o"))
    );
    assert_eq!(config_value(&fakes.clusters[0], "locked-cm"), None);
}

#[test]
fn a_project_in_argo_cds_namespace_confines_its_app() {
    let dir = tempfile::tempdir().unwrap();
    let fakes = start_fakes(1);
    let (git, head) = repo(dir.path());
    let kubeconfig = dir.path().join("kubeconfig");
    fakes.control.write_kubeconfig(&kubeconfig).unwrap();
    fakes
        .control
        .insert(cluster_secret("c0", &fakes.clusters[0].url()))
        .unwrap();
    fakes.control.insert(locked_project()).unwrap();
    fakes
        .control
        .insert(application("open", &git.file_url(), "c0"))
        .unwrap();
    fakes
        .control
        .insert(in_project(
            application("locked", &git.file_url(), "c0"),
            "locked",
        ))
        .unwrap();
    // Two replicas for the two shards `replica` runs with: whichever owns c0 decides.
    let _replicas = [
        replica(dir.path(), &kubeconfig, "r0", &[]),
        replica(dir.path(), &kubeconfig, "r1", &[]),
    ];
    wait_for("the open app synced", SETTLE, || {
        synced(&fakes, "open", &head)
    });
    let status = wait_for("the locked app refused", SETTLE, || {
        with_condition(&fakes, "locked", "InvalidSpecError")
    });
    let message = status["conditions"][0]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.contains("is not permitted in project locked"),
        "{message}"
    );
    assert_eq!(config_value(&fakes.clusters[0], "locked-cm"), None);
}
