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

use std::path::Path;
use std::time::Duration;

use fleetshard_testsupport::git::config_map;
use fleetshard_testsupport::kube_api::{
    FakeApiServer, FaultAction, RequestInfo, Verb, WriteOutcome, WriteRecord,
};
use serde_json::json;

use crate::run_gitops::{SETTLE, World, cluster_id, config_value, synced, world};
use crate::support::audit::{Event, read_log};
use crate::support::wait_for;

/// The identity in a replica's User-Agent (`fleetshard/VERSION IDENTITY/INCARNATION`).
pub(crate) fn identity_of(w: &WriteRecord) -> Option<&str> {
    let agent = w.user_agent.as_deref()?;
    let (product, rest) = agent.split_once(' ')?;
    product.strip_prefix("fleetshard/")?;
    rest.rsplit_once('/').map(|(identity, _)| identity)
}

/// The audit events of every replica of a `World` (`audit-IDENTITY.jsonl` in `dir`).
pub(crate) fn audit_events(dir: &Path) -> Vec<Event> {
    let mut events = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("audit-") && name.ends_with(".jsonl") {
            events.extend(read_log(&path).unwrap());
        }
    }
    events
}

/// Consecutive writes (in arrival order) of different replicas to `cluster` with no
/// hand-over between them in the audit logs, however far apart: for a write of A followed
/// by one of B, B must have acquired the cluster between the two arrivals, and A released
/// it after its last acquire before its write and no later than B's acquire.
/// Timestamps are the machine's wall-clock milliseconds on both sides.
pub(crate) fn writes_without_handover(
    writes: &[WriteRecord],
    events: &[Event],
    cluster: &str,
) -> Vec<(WriteRecord, WriteRecord)> {
    let of = |who: &str, acquire: bool| -> Vec<u64> {
        events
            .iter()
            .filter(|e| e.cluster == cluster && e.identity == who && e.acquire == acquire)
            .map(|e| e.ts)
            .collect()
    };
    let mut sorted: Vec<&WriteRecord> = writes.iter().collect();
    sorted.sort_by_key(|w| w.seq);
    let mut out = Vec::new();
    for pair in sorted.windows(2) {
        let (w1, w2) = (pair[0], pair[1]);
        let (Some(a), Some(b)) = (identity_of(w1), identity_of(w2)) else {
            out.push((w1.clone(), w2.clone()));
            continue;
        };
        if a == b {
            continue;
        }
        let a_since = of(a, true)
            .into_iter()
            .filter(|&t| t <= w1.received_unix_ms)
            .max();
        let handed_over = of(b, true).into_iter().any(|acquired| {
            (w1.received_unix_ms..=w2.received_unix_ms).contains(&acquired)
                && a_since.is_some_and(|since| {
                    of(a, false)
                        .into_iter()
                        .any(|released| (since..=acquired).contains(&released))
                })
        });
        if !handed_over {
            out.push((w1.clone(), w2.clone()));
        }
    }
    out
}

/// Every write the cluster received came from a named replica, as field manager
/// `fleetshard`; no two replicas' writes overlapped; and between any two writes of
/// different replicas, however far apart, the audit logs in `audit` show a hand-over
/// ([`writes_without_handover`]; the cluster is named in the logs by `cluster_id`).
pub(crate) fn assert_writes_well_formed(cluster: &FakeApiServer, cluster_id: &str, audit: &Path) {
    let writes = cluster.writes();
    assert!(!writes.is_empty(), "the cluster was written to");
    // A release is dated when ownership ended (a lapse: at the lapse), but its line is
    // written once the replica's work on the cluster stopped, which may be later.
    wait_for("a hand-over between every change of writer", SETTLE, || {
        let events = audit_events(audit);
        let unseparated = writes_without_handover(&writes, &events, cluster_id);
        if events.iter().any(|e| e.cluster == cluster_id) && unseparated.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "writes of two replicas with no hand-over between them: {unseparated:#?}\n\
                 audit logs (cluster {cluster_id}): {events:#?}"
            ))
        }
    });
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
        dir,
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
    // The successor's applies (not their dry runs) arrive 1 s late, to the end of the
    // test: its dry run of the new commit, answered 200, is not the apply (a check that
    // took it for one read "1").
    let sent_by_holder = from_holder.clone();
    c0.inject(
        None,
        FaultAction::Delay(Duration::from_millis(1_000)),
        move |r| !r.dry_run && r.is(Verb::Patch, "configmaps") && !sent_by_holder(r),
    );
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
    assert_writes_well_formed(c0, &cluster_id(&fakes, 0), dir.path());

    // The holder comes back; whoever ends up owning c0, writes still never overlap.
    fakes.control.heal();
    c0.remove_fault(slow);
    git.write("app0/cm.yaml", &config_map("cm0", "3"));
    let third = git.commit("third");
    wait_for("app0 at the third commit", SETTLE, || {
        synced(&fakes, "app0", &third)
    });
    assert_writes_well_formed(c0, &cluster_id(&fakes, 0), dir.path());
    assert_writes_well_formed(&fakes.clusters[1], &cluster_id(&fakes, 1), dir.path());
}

/// The hand-over check fails on two replicas taking turns at any distance (A, B, A, tens
/// of milliseconds apart, never simultaneous) unless the audit logs hand the cluster over
/// between each change of writer.
#[test]
fn writes_taking_turns_without_a_handover_are_caught() {
    let at = tokio::time::Instant::now();
    let write = |seq: u64, who: &str, ms: u64| WriteRecord {
        seq,
        verb: Verb::Patch,
        method: "PATCH".into(),
        path: "/api/v1/namespaces/default/configmaps/cm".into(),
        object: None,
        field_manager: Some("fleetshard".into()),
        dry_run: false,
        user_agent: Some(format!("fleetshard/1 {who}/1")),
        received: at,
        received_unix_ms: ms,
        gave_up: None,
        completed: Some(at),
        outcome: WriteOutcome::Answered(200),
    };
    let event = |who: &str, acquire: bool, ts: u64| Event {
        ts,
        identity: who.into(),
        acquire,
        cluster: "c".into(),
        shard: Some(0),
        generation: 1,
        lapsed: false,
    };
    let writes = [
        write(1, "a", 1_000),
        write(2, "b", 1_040),
        write(3, "a", 1_080),
    ];
    let pairs = |events: &[Event]| -> Vec<(u64, u64)> {
        writes_without_handover(&writes, events, "c")
            .iter()
            .map(|(x, y)| (x.seq, y.seq))
            .collect()
    };
    let a_owns = [event("a", true, 900)];
    assert_eq!(pairs(&a_owns), [(1, 2), (2, 3)], "no hand-over at all");
    let to_b = [
        event("a", true, 900),
        event("a", false, 1_010),
        event("b", true, 1_020),
    ];
    assert_eq!(pairs(&to_b), [(2, 3)], "handed to b, never back to a");
    let b_without_release = [event("a", true, 900), event("b", true, 1_020)];
    assert_eq!(
        pairs(&b_without_release),
        [(1, 2), (2, 3)],
        "a never released"
    );
    let and_back = [
        to_b.as_slice(),
        &[event("b", false, 1_050), event("a", true, 1_060)],
    ]
    .concat();
    assert!(pairs(&and_back).is_empty());
    // The acquire must fall between the two writes.
    let late_acquire = [
        event("a", true, 900),
        event("a", false, 1_010),
        event("b", true, 1_045),
    ];
    assert_eq!(pairs(&late_acquire), [(1, 2), (2, 3)]);
    // A write without a replica's User-Agent is never explained.
    let mut anonymous = writes.to_vec();
    anonymous[1].user_agent = None;
    assert_eq!(writes_without_handover(&anonymous, &and_back, "c").len(), 2);
}
