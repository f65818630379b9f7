//! Ownership judged from the clusters' side: every write a destination cluster (a fake API
//! server) receives is logged with the replica that sent it (its User-Agent,
//! `fleetshard/VERSION IDENTITY/INCARNATION`; the field manager is `fleetshard` for all),
//! and G1 is checked on that log — writes of different replicas never share an instant at
//! one cluster (`kube_api::overlaps`: a write lasts from its arrival until it is answered,
//! or until the server saw its client drop it at the write deadline).
//!
//! `run_gitops`'s end-to-end test checks a SIGTERM handover this way; this file holds the
//! straddling case. A replica's apply is held in the cluster (4.5 s, more than any lease
//! has left) while the replica is cut off from the store, so its lease lapses with
//! the apply in flight. The apply is cut `WRITE_MARGIN` before the lease deadline, so it
//! never lands, and the new owner's first write arrives after it ended.

use std::time::Duration;

use fleetshard_testsupport::git::config_map;
use fleetshard_testsupport::kube_api::{
    FakeApiServer, FaultAction, RequestInfo, Verb, WriteOutcome, WriteRecord,
};
use serde_json::json;

use crate::run_gitops::{SETTLE, World, config_value, synced, world};
use crate::support::wait_for;

/// The identity in a replica's User-Agent (`fleetshard/VERSION IDENTITY/INCARNATION`).
pub(crate) fn identity_of(w: &WriteRecord) -> Option<&str> {
    let agent = w.user_agent.as_deref()?;
    let (product, rest) = agent.split_once(' ')?;
    product.strip_prefix("fleetshard/")?;
    rest.rsplit_once('/').map(|(identity, _)| identity)
}

/// Every write the cluster received came from a named replica, as field manager
/// `fleetshard`, and no two replicas' writes overlapped.
pub(crate) fn assert_writes_well_formed(cluster: &FakeApiServer) {
    let writes = cluster.writes();
    assert!(!writes.is_empty(), "the cluster was written to");
    for w in &writes {
        assert!(
            identity_of(w).is_some(),
            "a write without a replica's User-Agent: {w:#?}"
        );
        if w.verb == Verb::Patch {
            assert_eq!(w.field_manager.as_deref(), Some("fleetshard"), "{w:#?}");
        }
    }
    let overlaps = cluster.write_overlaps();
    assert!(
        overlaps.is_empty(),
        "writes of two replicas overlap: {overlaps:#?}"
    );
}

#[test]
fn an_apply_straddling_a_lease_lapse_is_cut_and_never_lands_after_the_new_owner() {
    let World {
        dir: _dir,
        fakes,
        git,
        replicas: _replicas,
        first: _,
    } = world(&[]);
    let c0 = &fakes.clusters[0];
    // c0 holds every apply of a ConfigMap for 4.5 s: more than any lease has left (3 s
    // after the last confirmed renew), less than the call timeout (5 s) that bounded
    // requests before the write deadline did. The holder of c0 is whoever sends the apply
    // of the new commit: the replica that applied the first commit may have handed c0 over
    // since (the two started together, and one can sync both apps before the other holds
    // a shard).
    let hold = |matches: Box<dyn Fn(&RequestInfo) -> bool + Send + Sync>| {
        c0.inject(
            None,
            FaultAction::Delay(Duration::from_millis(4_500)),
            move |r| matches(r) && r.is(Verb::Patch, "configmaps"),
        )
    };
    let any = hold(Box::new(|_| true));
    let before = c0.writes().last().map_or(0, |w| w.seq);
    git.write("app0/cm.yaml", &config_map("cm0", "2"));
    git.commit("second");
    let straddling = wait_for("an apply of the new commit in flight", SETTLE, || {
        c0.writes()
            .into_iter()
            .find(|w| {
                w.seq > before && w.outcome == WriteOutcome::InFlight && w.verb == Verb::Patch
            })
            .ok_or_else(|| format!("writes {:#?}", c0.writes()))
    });
    let holder = straddling
        .user_agent
        .clone()
        .expect("a replica's User-Agent");
    let from_holder = {
        let holder = holder.clone();
        move |r: &RequestInfo| r.user_agent.as_deref() == Some(holder.as_str())
    };
    // From now on only the holder's applies are held (the one in flight stays held).
    let slow = hold(Box::new(from_holder.clone()));
    c0.remove_fault(any);
    // Now the holder is cut off from the store (and the control plane): its lease lapses
    // while the apply is held.
    fakes.control.partition(from_holder);
    let successor = wait_for(
        "another replica applies the new commit to c0",
        SETTLE,
        || {
            c0.writes()
                .into_iter()
                // Its apply of the new commit (not necessarily its first write).
                .find(|w| {
                    w.seq > straddling.seq
                        && w.user_agent.as_deref() != Some(holder.as_str())
                        && w.outcome != WriteOutcome::InFlight
                        && w.may_apply()
                        && w.object.as_ref().is_some_and(|o| o["data"]["value"] == "2")
                })
                .ok_or_else(|| format!("writes {:#?}", c0.writes()))
        },
    );
    assert_eq!(config_value(c0, "cm0"), Some(json!("2")));
    let cut = c0
        .writes()
        .into_iter()
        .find(|w| w.seq == straddling.seq)
        .unwrap();
    assert_eq!(
        cut.outcome,
        WriteOutcome::Abandoned,
        "the held apply was cut at the write deadline, never applied: {cut:#?}"
    );
    let first_of_successor = c0
        .writes()
        .into_iter()
        .find(|w| w.seq > straddling.seq && w.user_agent != Some(holder.clone()))
        .unwrap();
    assert!(
        cut.completed.unwrap() < first_of_successor.received,
        "the cut apply ended before the new owner's first write arrived: {cut:#?} {first_of_successor:#?}"
    );
    assert!(first_of_successor.seq <= successor.seq);
    assert_writes_well_formed(c0);

    // The holder comes back; whoever ends up owning c0, writes still never overlap.
    fakes.control.heal();
    c0.remove_fault(slow);
    git.write("app0/cm.yaml", &config_map("cm0", "3"));
    let third = git.commit("third");
    wait_for("app0 at the third commit", SETTLE, || {
        synced(&fakes, "app0", &third)
    });
    assert_writes_well_formed(c0);
    assert_writes_well_formed(&fakes.clusters[1]);
}
