use fleetshard_coord::store::Entry;
use serde_json::{Value, json};

use super::*;

fn entry(key: &str, value: Value, version: u64) -> Entry {
    Entry {
        key: key.into(),
        value: value.to_string().into_bytes(),
        version,
    }
}

fn shard(h: &str, acked: u64, released: bool) -> Value {
    json!({"holder": h, "incarnation": 1, "beat": 1, "acked": acked, "released": released})
}

fn listing(revision: u64, entries: Vec<Entry>) -> Listing {
    Listing { revision, entries }
}

/// The records of a small fleet, with shard 0's and shard 2's records at `v0` and `v2`.
fn fleet(v0: u64, v2: u64) -> Listing {
    listing(
        20,
        vec![
            entry(
                "fs/assignment",
                json!({"generation": 2, "shards": 3,
                    "clusters": {"a": 0, "b": 1, "c": 2}, "homes": {"c": 1}}),
                3,
            ),
            entry("fs/shards/0", shard("r0", 2, false), v0),
            entry("fs/shards/1", shard("r1", 2, true), 6),
            entry("fs/shards/2", shard("r2", 2, false), v2),
            entry("fs/shards/x", json!(1), 7),
            entry("fs/shards/4", shard("r4", 2, false), 8),
            entry("fs/desired-shards", json!({"shards": 2}), 9),
            entry(
                "fs/replicas/r9",
                json!({"holder": "r9", "incarnation": 3, "beat": 4}),
                9,
            ),
            entry(
                "fs/replicas/r0",
                json!({"holder": "r0", "incarnation": 1, "beat": 4, "released": true}),
                9,
            ),
        ],
    )
}

#[test]
fn a_dead_holder_is_told_apart_and_owns_nothing() {
    let (first, now) = (fleet(5, 10), fleet(11, 10));
    let w = Watched {
        now: &now,
        first: &first,
        span: WatchSpan::Lease,
        renewed: &BTreeSet::new(),
    };
    let names: Names = [("a".to_owned(), ("alpha".to_owned(), "https://a".to_owned()))]
        .into_iter()
        .collect();
    let r = build("fs/", None, &w, &names);
    assert_eq!(r.generation, Some(2));
    assert_eq!(
        r.shards.iter().map(|s| s.shard).collect::<Vec<_>>(),
        [0, 1, 2, 4]
    );
    let leases: Vec<Option<Lease>> = r.shards.iter().map(|s| s.lease).collect();
    assert_eq!(
        leases,
        [
            Some(Lease::Live),
            Some(Lease::Released),
            Some(Lease::Expired),
            Some(Lease::Expired)
        ]
    );
    // a: acting; b: its shard released; c: its holder is gone — not "held".
    assert_eq!(r.clusters[0].owner.as_deref(), Some("r0"));
    assert_eq!(r.clusters[0].state, ClusterState::Acting);
    assert_eq!(r.clusters[0].name.as_deref(), Some("alpha"));
    assert_eq!(r.clusters[1].state, ClusterState::Vacant);
    assert_eq!(r.clusters[2].owner, None);
    assert_eq!(r.clusters[2].state, ClusterState::HolderExpired);
    assert_eq!(r.unowned, ["b", "c"]);
    assert_eq!(r.clusters[2].home, Some(1), "c is displaced from shard 1");
    let text = table(&r);
    assert!(text.contains("EXPIRED (holder gone)"), "{text}");
    assert!(text.contains("UNOWNED (holder expired)"), "{text}");
    assert!(
        text.contains("alpha") && text.contains("https://a"),
        "{text}"
    );
    assert!(text.contains("beyond the count"), "{text}");
    assert!(text.contains("CORRUPT RECORD") && text.contains("2 unowned"));
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["corrupt_records"][0]["key"], "fs/shards/x");
    assert_eq!(json["clusters"][2]["owner"], Value::Null);
    assert_eq!(json["clusters"][2]["state"], "holder_expired");
    assert_eq!(json["clusters"][0]["server"], "https://a");
    assert_eq!(json["shards"][0]["incarnation"], "0000000000000001");
    assert_eq!(json["spares"][0]["identity"], "r9");
}

#[test]
fn without_a_full_watch_nothing_unrenewed_is_called_acting() {
    let l = fleet(5, 10);
    let w = Watched {
        now: &l,
        first: &l,
        span: WatchSpan::Short,
        renewed: &BTreeSet::new(),
    };
    let r = build("fs/", None, &w, &Names::new());
    assert_eq!(r.clusters[0].state, ClusterState::NotJudged);
    assert!(r.clusters.iter().all(|c| c.owner.is_none()));
}

#[test]
fn a_holder_that_missed_a_renewal_is_not_shown_acting() {
    let l = fleet(5, 10);
    let w = Watched {
        now: &l,
        first: &l,
        span: WatchSpan::RenewPeriod,
        renewed: &BTreeSet::new(),
    };
    let r = build("fs/", None, &w, &Names::new());
    assert_eq!(r.clusters[0].state, ClusterState::NotRenewed);
    assert!(r.clusters.iter().all(|c| c.owner.is_none()));
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["clusters"][0]["state"], "not_renewed");
    assert_eq!(json["shards"][0]["lease"], "not_renewed");
    assert!(table(&r).contains("NOT RENEWED"), "{}", table(&r));
}

#[test]
fn during_a_handover_no_owner_is_claimed() {
    let first = fleet(5, 10);
    let mut now = fleet(11, 12);
    // r2 has not acknowledged generation 2 yet.
    now.entries[3] = entry("fs/shards/2", shard("r2", 1, false), 12);
    let w = Watched {
        now: &now,
        first: &first,
        span: WatchSpan::Lease,
        renewed: &BTreeSet::new(),
    };
    let r = build("fs/", None, &w, &Names::new());
    assert_eq!(r.clusters[0].state, ClusterState::Handover);
    assert_eq!(r.clusters[0].owner, None);
}

#[test]
fn replicas_that_see_another_fleet_are_flagged_and_dead_ones_ignored() {
    let inventory = |h: &str, inc: u64, digest: &str, problems: u64| {
        json!({"holder": h, "incarnation": inc, "digest": digest, "clusters": 3,
            "problems": problems})
    };
    let mut first = fleet(5, 10);
    first.entries.extend([
        entry(
            "fs/inventory/r0",
            inventory("r0", 1, "00000000000000aa", 0),
            12,
        ),
        entry(
            "fs/inventory/r9",
            inventory("r9", 3, "00000000000000aa", 0),
            13,
        ),
        entry(
            "fs/inventory/r2",
            inventory("r2", 1, "00000000000000bb", 0),
            14,
        ),
        entry(
            "fs/inventory/r5",
            inventory("r5", 1, "00000000000000cc", 2),
            15,
        ),
        entry(
            "fs/replicas/r5",
            json!({"holder": "r5", "incarnation": 1, "beat": 4}),
            16,
        ),
        entry(
            "fs/distributor",
            json!({"holder": "r0", "incarnation": 1, "beat": 4}),
            17,
        ),
    ]);
    let mut now = first.clone();
    // r0, r9, r5 and the distributor renew; r2 (shard 2) does not.
    for e in &mut now.entries {
        if [
            "fs/shards/0",
            "fs/replicas/r9",
            "fs/replicas/r5",
            "fs/distributor",
        ]
        .contains(&e.key.as_str())
        {
            e.version += 100;
        }
    }
    now.entries.push(entry(
        "fs/inventory/r0",
        json!({"holder": "r0", "incarnation": 1, "digest": "00000000000000aa",
            "clusters": 3, "held_back": {"previous": 10, "dropped": 7, "grace_secs": 12}}),
        130,
    ));
    now.entries
        .retain(|e| !(e.key == "fs/inventory/r0" && e.version == 12));
    let w = Watched {
        now: &now,
        first: &first,
        span: WatchSpan::Lease,
        renewed: &BTreeSet::new(),
    };
    let r = build("fs/", None, &w, &Names::new());
    let flags: Vec<(&str, bool, bool)> = r
        .replicas
        .iter()
        .map(|p| (p.identity.as_str(), p.live, p.disagrees))
        .collect();
    assert_eq!(
        flags,
        [
            ("r0", true, false),
            ("r2", false, false),
            ("r5", true, true),
            ("r9", true, false)
        ]
    );
    assert!(r.inventory_disagreement);
    let held = r.held_back.as_ref().unwrap();
    assert_eq!((held.previous, held.dropped), (10, 7));
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("r5: its inventory has 2 problem"))
    );
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("different inventories: r5"))
    );
    let text = table(&r);
    assert!(
        text.contains("DIFFERS") && text.contains("(gone)"),
        "{text}"
    );
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["replicas"][0]["digest"], "00000000000000aa");
    assert_eq!(json["held_back"]["dropped"], 7);
}

#[test]
fn a_distributor_bound_to_its_shard_is_judged_by_that_shard() {
    // r0's role record stands still; its shard 0 is renewed (v0 moves), r2's is not.
    let with_role = |v0: u64, holder: &str, shard: u32| {
        let mut l = fleet(v0, 10);
        l.entries.push(entry(
            "fs/distributor",
            json!({"holder": holder, "incarnation": 1, "beat": 1, "shard": shard}),
            4,
        ));
        l
    };
    let report = |holder: &str, shard: u32| {
        let (first, now) = (with_role(5, holder, shard), with_role(11, holder, shard));
        let w = Watched {
            now: &now,
            first: &first,
            span: WatchSpan::Lease,
            renewed: &BTreeSet::new(),
        };
        build("fs/", None, &w, &Names::new())
    };
    let r = report("r0", 0);
    let d = r.distributor.as_ref().unwrap();
    assert_eq!((d.lease, d.shard), (Lease::Live, Some(0)));
    assert!(table(&r).contains("distributor: r0 (incarnation 0000000000000001, with shard 0) "));
    // Bound to a shard whose lease expired, or that was released: nobody holds the role.
    assert_eq!(report("r2", 2).distributor.unwrap().lease, Lease::Expired);
    assert_eq!(report("r1", 1).distributor.unwrap().lease, Lease::Expired);
    // Bound to a shard someone else holds.
    assert_eq!(report("r9", 0).distributor.unwrap().lease, Lease::Expired);
}

/// Argo CD's built-in in-cluster entry has the empty id: its row names it `""`, not a blank.
#[test]
fn the_in_cluster_entry_is_not_a_blank_id() {
    let line = |id: &'static str| crate::cli::status::ClusterLine {
        id,
        name: Some("in-cluster"),
        server: Some("https://kubernetes.default.svc"),
        shard: "0".into(),
        owner: Some("r0"),
        state: "acting",
        home: None,
    };
    let mut out = String::new();
    crate::cli::status::write_clusters(&mut out, [line(""), line("uid-1")].into_iter(), 0);
    let rows: Vec<&str> = out.lines().filter(|l| l.contains("in-cluster")).collect();
    assert_eq!(rows.len(), 2, "{out}");
    assert!(rows[0].starts_with("\"\" "), "{out}");
    assert!(rows[1].starts_with("uid-1 "), "{out}");
}
