//! What `fleetshard simulate` does to its clusters besides serving them: namespaces and
//! objects created before it prints `ready` (`--namespaces`, `--objects`), and the
//! Deployment controller it may play (`--ready-deployments`).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use fleetshard_kube_sim::FakeApiServer;
use serde_json::Value;

use super::SimCluster;

/// Objects to create, by cluster name: what an `--objects` file holds.
pub type Objects = BTreeMap<String, Vec<Value>>;

/// Reads an `--objects` file: a JSON object from cluster name (`sim-N`) to a list of
/// objects.
pub fn read_objects(path: &Path) -> anyhow::Result<Objects> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--objects: reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| {
        format!(
            "--objects {}: not a JSON object from cluster name to a list of objects",
            path.display()
        )
    })
}

/// Creates `namespaces` on every cluster, then `objects` on theirs; a cluster name this
/// process does not serve is an error (`source` names the file in messages).
pub fn seed(
    servers: &[FakeApiServer],
    clusters: &[SimCluster],
    namespaces: &[String],
    objects: &Objects,
    source: &str,
) -> anyhow::Result<()> {
    for (server, cluster) in servers.iter().zip(clusters) {
        for ns in namespaces {
            server
                .create_namespace(ns)
                .map_err(|e| anyhow::anyhow!("{}: creating namespace {ns}: {e:?}", cluster.name))?;
        }
    }
    for (name, objs) in objects {
        let Some(i) = clusters.iter().position(|c| &c.name == name) else {
            bail!(
                "{source}: no cluster {name:?} here (this process serves {} to {})",
                clusters.first().map_or("", |c| c.name.as_str()),
                clusters.last().map_or("", |c| c.name.as_str()),
            );
        };
        for (n, obj) in objs.iter().enumerate() {
            servers[i].insert(obj.clone()).map_err(|e| {
                anyhow::anyhow!("{source}: {name}, object {n} ({}): {e:?}", describe(obj))
            })?;
        }
    }
    Ok(())
}

fn describe(obj: &Value) -> String {
    let s = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or("?");
    format!("{} {}", s("/kind"), s("/metadata/name"))
}

/// Plays the Deployment controller on the clusters: a Deployment whose spec changed
/// becomes ready (its status observes the new generation), checked every 250 ms on the
/// clusters written since the last check (a cluster's revision moves with every write;
/// listing every cluster's Deployments 4 times a second cost a core at 10,000 clusters).
pub async fn deployment_controller(servers: Arc<Vec<FakeApiServer>>) {
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut checked = vec![None; servers.len()];
    loop {
        tick.tick().await;
        for (s, seen) in servers.iter().zip(checked.iter_mut()) {
            // Read before the check: a write during it is seen at the next tick.
            let revision = s.revision();
            if *seen != Some(revision) {
                make_deployments_ready(s);
                *seen = Some(revision);
            }
        }
    }
}

fn make_deployments_ready(s: &FakeApiServer) {
    for d in s.list("apps/v1", "Deployment", None) {
        let generation = d.pointer("/metadata/generation").cloned();
        if d.pointer("/status/observedGeneration").cloned() == generation {
            continue;
        }
        let ns = d
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("default");
        let name = d
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let replicas = d
            .pointer("/spec/replicas")
            .and_then(Value::as_u64)
            .unwrap_or(1);
        let _ = s.set_deployment_ready(ns, name, replicas);
    }
}
