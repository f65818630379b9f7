//! What one protocol step costs a distributor at fleet scale, and what memoisation saves.
//!
//! `cargo bench -p fleetshard-coord --bench replica_step -- [CLUSTERS] [SHARDS]`
//! (default 10000 clusters, 100 shards). Prints the time of: the step that places the
//! fleet and commits (no assignment yet); the first step that sees the committed document
//! (decodes it, finds the placement unchanged); later steps with nothing changed (the
//! document is not decoded again and the placement not recomputed).

#![allow(clippy::disallowed_types)] // a measurement harness reads the wall clock

use std::time::{Duration, Instant};

use fleetshard_coord::fenced::{
    Action, DistributorRecord, FleetInput, Replica, ReplicaConfig, ShardCount, ShardRecord,
    distributor_key, encode, shard_key,
};
use fleetshard_coord::lease::{LeaseTiming, Mono};
use fleetshard_coord::store::{Entry, Listing};
use fleetshard_core::Cluster;
use fleetshard_core::placement::PlacementConfig;

fn main() {
    let mut args = std::env::args().filter(|a| a != "--bench").skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let shards: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    let clusters: Vec<Cluster> = (0..n)
        .map(|i| Cluster::new(format!("cluster-{i:05}"), format!("https://c{i}.example")))
        .collect();
    let loads: Vec<u64> = (0..n as u64).map(|i| 1 + (i * 7919) % 40).collect();
    let fleet = FleetInput {
        clusters: &clusters,
        loads: &loads,
        apps: &[],
        revision: 1,
        external_shards: None,
        measured: false,
    };
    let cfg = ReplicaConfig {
        identity: "r0".into(),
        incarnation: 7,
        root: "fs/".into(),
        shards: ShardCount::Fixed(shards),
        timing: LeaseTiming::default(),
        grace: Duration::from_millis(500),
        placement: PlacementConfig::default(),
        hysteresis: None,
        split_clusters: false,
        zone: None,
        capacity: 1,
        shard_specs: Vec::new(),
    };
    let mut replica = Replica::new(cfg);
    let mut t = Mono::default();
    // Round 1: claim shard 0 and the distributor role, both confirmed.
    let empty = Listing {
        entries: vec![],
        revision: 1,
    };
    for a in replica.step(t, Some(&empty), fleet) {
        if let Action::Write { ticket, .. } = a {
            replica.on_write(ticket, Ok(2));
        }
    }
    // Every shard held, the distributor ours, no assignment yet.
    let mut entries: Vec<Entry> = (0..shards)
        .map(|s| Entry {
            key: shard_key("fs/", s),
            value: encode(&ShardRecord {
                holder: format!("r{s}"),
                incarnation: if s == 0 { 7 } else { 1 },
                beat: 1,
                acked: 0,
                released: false,
                zone: None,
                capacity: None,
            }),
            version: 2,
        })
        .collect();
    entries.push(Entry {
        key: distributor_key("fs/"),
        value: encode(&DistributorRecord {
            holder: "r0".into(),
            incarnation: 7,
            beat: 1,
            released: false,
            shard: None,
        }),
        version: 2,
    });
    entries.sort_by(|a, b| a.key.cmp(&b.key));
    let listing = Listing {
        entries: entries.clone(),
        revision: 10,
    };
    t = t.after(Duration::from_millis(200));
    let started = Instant::now();
    let actions = replica.step(t, Some(&listing), fleet);
    let place = started.elapsed();
    let doc = actions
        .iter()
        .find_map(|a| match a {
            Action::Write { key, value, .. } if key == "fs/assignment" => Some(value.clone()),
            _ => None,
        })
        .expect("the distributor commits a first generation");
    let doc_len = doc.len();
    entries.push(Entry {
        key: "fs/assignment".into(),
        value: doc,
        version: 11,
    });
    entries.sort_by(|a, b| a.key.cmp(&b.key));
    let committed = Listing {
        entries,
        revision: 11,
    };
    t = t.after(Duration::from_millis(200));
    let started = Instant::now();
    replica.step(t, Some(&committed), fleet);
    let first_seen = started.elapsed();
    let rounds = 50;
    let started = Instant::now();
    for _ in 0..rounds {
        t = t.after(Duration::from_millis(10));
        replica.step(t, Some(&committed), fleet);
    }
    let steady = started.elapsed() / rounds;
    println!(
        "{n} clusters, {shards} shards, assignment document {:.0} KiB",
        doc_len as f64 / 1024.0
    );
    println!("place and commit:                     {place:>10.2?}");
    println!(
        "first step seeing the commit:         {first_seen:>10.2?}  (decode + placement found unchanged)"
    );
    println!(
        "step with nothing changed (mean of {rounds}): {steady:>10.2?}  (no decode, no placement)"
    );
}
