//! A `fleetshard run --protocol argocd` replica serves the read-only dashboard: three
//! processes on one SQLite file, two shards (one spare), Argo CD's `legacy` algorithm.
//! A bystander's dashboard JSON shows every cluster owned by the controller of the shard
//! Argo CD's algorithm gives it; after `kill -9` of a holder, Argo CD's protocol leaves its
//! entry until it has stayed unchanged for 3H, then the spare takes it: the dashboard
//! shows the spare owning those clusters and a failover naming both.

use std::collections::BTreeMap;

use fleetshard_core::Cluster;
use fleetshard_core::argo::{ArgoAlgorithm, ArgoControllerAssignment};
use serde_json::Value;

use crate::run_argocd::{CLUSTERS, Procs, Setup, wait_until, write_fleet};
use crate::support::http;

/// The dashboard JSON's `fleet`, once it has one.
fn fleet(port: u16) -> Option<Value> {
    let (code, body) = http::get(port, "/api/dashboard")?;
    let page: Value = serde_json::from_str(&body).ok().filter(|_| code == 200)?;
    assert_eq!(
        page["controls"], false,
        "a replica's dashboard is read-only"
    );
    Some(page["fleet"].clone())
}

/// Shard → holder, as the dashboard shows it.
fn holders(f: &Value) -> BTreeMap<u64, String> {
    f["shards"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| Some((s["shard"].as_u64()?, s["holder"].as_str()?.to_owned())))
        .collect()
}

/// Every cluster owned, by the holder of its shard, and the two shards held by `live`.
fn all_owned_by(f: &Value, live: &[&str]) -> bool {
    let h = holders(f);
    f["unowned"] == 0
        && f["clusters"].as_array().unwrap().len() == CLUSTERS
        && h.len() == 2
        && h.values().all(|x| live.contains(&x.as_str()))
        && f["shards"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["lease"] == "live")
        && f["clusters"].as_array().unwrap().iter().all(|c| {
            c["state"] == "acting"
                && c["owner"].as_str() == h.get(&c["shard"].as_u64().unwrap()).map(String::as_str)
        })
}

#[test]
fn an_argocd_replicas_dashboard_shows_owners_and_the_failover_after_kill() {
    let dir = tempfile::tempdir().unwrap();
    let names = ["r0", "r1", "r2"];
    let setup = Setup {
        fleet: write_fleet(dir.path()),
        store: format!("sqlite://{}", dir.path().join("fleetshard.db").display()),
        ports: names
            .iter()
            .map(|n| ((*n).to_owned(), http::free_port()))
            .collect(),
        dir,
        kubeconfig: None,
    };
    let mut procs = Procs(BTreeMap::new());
    for n in names {
        procs.0.insert(n.to_owned(), setup.spawn(n));
    }

    // 1. Every cluster owned, each by the controller of the shard Argo CD's algorithm
    //    gives it among 2 replicas.
    let mut f = Value::Null;
    wait_until("r0's dashboard shows every cluster owned", || {
        fleet(setup.ports["r0"]).is_some_and(|v| {
            f = v;
            all_owned_by(&f, &names)
        })
    });
    assert_eq!(f["shard_count"], 2);
    let ids: Vec<Cluster> = (0..CLUSTERS)
        .map(|i| {
            let id = format!("c{i:02}");
            Cluster::new(id.clone(), format!("https://{id}.example"))
        })
        .collect();
    let want = ArgoControllerAssignment::compute(ArgoAlgorithm::Legacy, 2, &ids, &[]);
    for c in f["clusters"].as_array().unwrap() {
        let i = ids.iter().position(|x| x.id == c["id"]).unwrap();
        assert_eq!(c["shard"].as_i64(), Some(want.shards()[i]), "{c}");
        assert_eq!(c["name"], c["id"]);
        assert_eq!(c["apps"], 1);
    }
    let h = holders(&f);
    let spare = *names.iter().find(|n| !h.values().any(|x| x == *n)).unwrap();
    let (&victim_shard, victim) = h.iter().next().unwrap();
    let victim = victim.clone();
    let bystander = *names
        .iter()
        .find(|n| **n != spare && **n != victim)
        .unwrap();
    let claims = f["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "claim")
        .count();
    assert!(claims >= 2, "{}", f["timeline"]);
    let (code, page) = http::get(setup.ports[bystander], "/dashboard").unwrap();
    assert_eq!(code, 200);
    assert!(page.contains(r#"<meta name="fs-controls" content="0">"#));

    // 2. kill -9 the holder of the first shard: by Argo CD's protocol its entry stays
    //    until unchanged for 3H; then the spare takes it and owns its clusters.
    let mut bystanders = fleet(setup.ports[bystander]);
    wait_until("the bystander's dashboard is read", || {
        bystanders = fleet(setup.ports[bystander]);
        bystanders.is_some()
    });
    let mut child = procs.0.remove(&victim).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    let live = [spare, bystander];
    wait_until(
        "the bystander's dashboard shows the spare owning the shard",
        || {
            fleet(setup.ports[bystander]).is_some_and(|v| {
                f = v;
                all_owned_by(&f, &live)
            })
        },
    );
    assert_eq!(holders(&f)[&victim_shard], spare);
    let failover = f["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "failover")
        .unwrap_or_else(|| panic!("no failover in {}", f["timeline"]));
    let text = failover["text"].as_str().unwrap();
    assert!(
        text.contains(spare)
            && text.contains(&victim)
            && text.contains(&format!("shard {victim_shard}")),
        "{text}"
    );
}
