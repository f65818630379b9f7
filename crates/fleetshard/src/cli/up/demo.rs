//! The demo fleet `fleetshard up` makes: a local Git repository (written in process)
//! holding one directory per app — ConfigMaps,
//! Deployments, Services —, the Argo CD Applications that deploy them to the simulated
//! clusters, the drift some of them must heal, and one app whose manifest does not parse.

use std::path::Path;

use serde_json::{Value, json};

use super::super::simulate::SimCluster;

/// The namespace the apps deploy into on every cluster.
pub const DEMO_NAMESPACE: &str = "demo";
/// The namespace of the Applications.
pub const APPS_NAMESPACE: &str = "argocd";
/// The value a drifted ConfigMap holds on its cluster until it is healed.
pub const DRIFTED: &str = "changed-by-hand";

/// What one app deploys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A ConfigMap.
    ConfigMap,
    /// A Deployment (the simulated Deployment controller makes it ready).
    Deployment,
    /// A Service and a ConfigMap.
    Service,
    /// A Deployment and a Service.
    Web,
    /// A manifest that does not parse: a ComparisonError, never a crash.
    Broken,
}

/// One app of the demo.
#[derive(Debug, Clone)]
pub struct DemoApp {
    /// Its name (also its directory in the repository and its objects' name).
    pub name: String,
    /// What it deploys.
    pub kind: Kind,
    /// The index of its cluster.
    pub cluster: usize,
    /// Its ConfigMap exists on the cluster with another value before the replicas start.
    pub drift: bool,
}

/// The apps: `count` of them over `clusters` clusters, round-robin; the last one (of two
/// or more) is the broken one; about one ConfigMap app in six starts drifted.
pub fn apps(count: usize, clusters: usize) -> Vec<DemoApp> {
    (0..count)
        .map(|i| {
            let broken = count >= 2 && i == count - 1;
            let kind = match (broken, i % 4) {
                (true, _) => Kind::Broken,
                (false, 0) => Kind::ConfigMap,
                (false, 1) => Kind::Deployment,
                (false, 2) => Kind::Service,
                (false, _) => Kind::Web,
            };
            DemoApp {
                name: if broken {
                    "broken-manifest".into()
                } else {
                    format!("app-{i:04}")
                },
                kind,
                cluster: i % clusters.max(1),
                drift: kind == Kind::ConfigMap && (i / 4) % 6 == 1,
            }
        })
        .collect()
}

/// The ConfigMap of a ConfigMap or Service app, as Git has it.
pub fn config_map(name: &str, value: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": DEMO_NAMESPACE, "labels": {"app": name}},
        "data": {"value": value},
    })
}

fn deployment(name: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "web", "image": "registry.invalid/demo:1"}]},
            },
        },
    })
}

fn service(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": 8080}]},
    })
}

/// The files of one app's directory: (file name, contents) — its kind's objects, then
/// `extra` more ConfigMaps (`NAME-extra-K`) unless the app is the broken one.
fn files(app: &DemoApp, extra: usize) -> Vec<(String, String)> {
    let n = app.name.as_str();
    let cm = || config_map(n, "v1").to_string();
    let mut files: Vec<(String, String)> = match app.kind {
        Kind::ConfigMap => vec![("configmap.json", cm())],
        Kind::Deployment => vec![("deployment.json", deployment(n).to_string())],
        Kind::Service => vec![
            ("service.json", service(n).to_string()),
            ("configmap.json", cm()),
        ],
        Kind::Web => vec![
            ("deployment.json", deployment(n).to_string()),
            ("service.json", service(n).to_string()),
        ],
        Kind::Broken => vec![(
            "broken.yaml",
            "# A manifest that does not parse: the app shows a ComparisonError.\n\
             apiVersion: v1\nkind: ConfigMap\nmetadata: {name: [unclosed\n"
                .into(),
        )],
    }
    .into_iter()
    .map(|(file, text)| (file.to_owned(), text))
    .collect();
    if app.kind != Kind::Broken {
        for k in 0..extra {
            let name = format!("{n}-extra-{k}");
            let text = config_map(&name, "v1").to_string();
            files.push((format!("extra-{k}.json"), text));
        }
    }
    files
}

/// Writes every app's directory into a new bare repository at `dir`, committed on
/// `main` — in process (gix), so `up` needs no `git` executable. Each app's directory holds
/// `extra` ConfigMaps besides its kind's objects.
pub fn write_repository(dir: &Path, apps: &[DemoApp], extra: usize) -> anyhow::Result<()> {
    use gix::objs::tree::{Entry, EntryKind};

    let failed = |what: &str, e: &dyn std::fmt::Display| {
        anyhow::anyhow!("writing the demo repository {}: {what}: {e}", dir.display())
    };
    let repo = gix::init_bare(dir).map_err(|e| failed("init", &e))?;
    let mut root = gix::objs::Tree::empty();
    for app in apps {
        let mut tree = gix::objs::Tree::empty();
        for (file, text) in files(app, extra) {
            let blob = repo
                .write_blob(text.as_bytes())
                .map_err(|e| failed(&file, &e))?;
            tree.entries.push(Entry {
                mode: EntryKind::Blob.into(),
                filename: file.as_str().into(),
                oid: blob.detach(),
            });
        }
        tree.entries.sort();
        let id = repo
            .write_object(&tree)
            .map_err(|e| failed(&app.name, &e))?;
        root.entries.push(Entry {
            mode: EntryKind::Tree.into(),
            filename: app.name.as_str().into(),
            oid: id.detach(),
        });
    }
    root.entries.sort();
    let tree = repo.write_object(&root).map_err(|e| failed("tree", &e))?;
    let now = gix::date::Time::now_utc();
    let signature = gix::actor::Signature {
        name: "fleetshard up".into(),
        email: "up@fleetshard.invalid".into(),
        time: now,
    };
    let mut time = gix::date::parse::TimeBuf::default();
    repo.commit_as(
        signature.to_ref(&mut time),
        signature.to_ref(&mut gix::date::parse::TimeBuf::default()),
        "refs/heads/main",
        "fleetshard up: the demo apps",
        tree.detach(),
        gix::commit::NO_PARENT_IDS,
    )
    .map_err(|e| failed("commit", &e))?;
    Ok(())
}

/// The Applications, as a `List` (JSON): auto-sync with prune and self-heal, from the
/// repository at `repo_url`, to their clusters' servers.
pub fn applications(apps: &[DemoApp], clusters: &[SimCluster], repo_url: &str) -> Value {
    let items: Vec<Value> = apps
        .iter()
        .map(|a| {
            json!({
                "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
                "metadata": {"name": a.name, "namespace": APPS_NAMESPACE},
                "spec": {
                    "project": "default",
                    "source": {"repoURL": repo_url, "path": a.name, "targetRevision": "HEAD"},
                    "destination": {"server": clusters[a.cluster].server, "namespace": DEMO_NAMESPACE},
                    "syncPolicy": {"automated": {"prune": true, "selfHeal": true}},
                },
            })
        })
        .collect();
    json!({"apiVersion": "v1", "kind": "List", "items": items})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_has_every_kind_some_drift_and_one_broken_app() {
        let apps = apps(300, 24);
        assert_eq!(apps.len(), 300);
        for kind in [Kind::ConfigMap, Kind::Deployment, Kind::Service, Kind::Web] {
            assert!(apps.iter().any(|a| a.kind == kind), "{kind:?}");
        }
        assert_eq!(apps.iter().filter(|a| a.kind == Kind::Broken).count(), 1);
        let drifted = apps.iter().filter(|a| a.drift).count();
        assert!((5..=20).contains(&drifted), "{drifted}");
        assert!(apps.iter().all(|a| a.cluster < 24));
        assert!(apps.iter().all(|a| a.kind == Kind::ConfigMap || !a.drift));
    }

    #[test]
    fn extra_config_maps_are_added_to_every_app_but_the_broken_one() {
        let apps = apps(8, 2);
        for app in &apps {
            let plain = files(app, 0).len();
            let more = files(app, 3);
            if app.kind == Kind::Broken {
                assert_eq!(more.len(), plain);
            } else {
                assert_eq!(more.len(), plain + 3, "{app:?}");
                assert!(
                    more.iter()
                        .any(|(_, t)| t.contains(&format!("{}-extra-2", app.name)))
                );
            }
        }
    }
}
