//! Unit tests of the pure machine, one step at a time: listings built by hand (or by a
//! tiny in-memory store applying the replica's own writes), `Mono` times, no runtime.

use std::time::Duration;

use fleetshard_core::Cluster;
use fleetshard_core::placement::PlacementConfig;

use super::*;
use crate::fenced::records::{
    AssignmentDoc, DistributorRecord, MAX_LEASE_RECORD_BYTES, PresenceRecord, ShardRecord,
    assignment_key, distributor_key, encode, presence_key, shard_key,
};
use crate::lease::LeaseTiming;
use crate::store::{Entry, Precondition};

const ROOT: &str = "f/";

fn config(identity: &str, shards: u32) -> ReplicaConfig {
    ReplicaConfig {
        identity: identity.into(),
        incarnation: 7,
        root: ROOT.into(),
        shards: ShardCount::Fixed(shards),
        timing: LeaseTiming::default(),
        grace: Duration::from_millis(500),
        placement: PlacementConfig::default(),
        hysteresis: None,
        split_clusters: false,
        zone: None,
        capacity: 1,
        shard_specs: Vec::new(),
    }
}

fn ms(n: u64) -> Mono {
    Mono(Duration::from_millis(n))
}

fn clusters(n: usize) -> Vec<Cluster> {
    (0..n)
        .map(|i| Cluster::new(format!("c{i}"), format!("https://c{i}")))
        .collect()
}

/// A store that applies writes with compare-and-swap, and the replica under test.
struct Bench {
    r: Replica,
    entries: BTreeMap<String, (Vec<u8>, u64)>,
    revision: u64,
    clusters: Vec<Cluster>,
    loads: Vec<u64>,
    /// The applications (slices of split clusters).
    apps: Vec<fleetshard_core::App>,
    /// The fleet's revision: bump it with every change of `clusters`.
    fleet_revision: u64,
    /// `loads` are measured costs (the configured hysteresis applies).
    measured: bool,
}

impl Bench {
    fn new(identity: &str, shards: u32, n_clusters: usize) -> Bench {
        Bench {
            r: Replica::new(config(identity, shards)),
            entries: BTreeMap::new(),
            revision: 0,
            clusters: clusters(n_clusters),
            loads: vec![1; n_clusters],
            apps: Vec::new(),
            fleet_revision: 0,
            measured: false,
        }
    }

    /// [`Bench::new`] with the shard count policy `count`.
    fn with_count(identity: &str, count: ShardCount, n_clusters: usize) -> Bench {
        let mut b = Bench::new(identity, 1, n_clusters);
        b.r = Replica::new(ReplicaConfig {
            shards: count,
            ..config(identity, 1)
        });
        b
    }

    fn listing(&self) -> Listing {
        Listing {
            entries: self
                .entries
                .iter()
                .map(|(k, (v, ver))| Entry {
                    key: k.clone(),
                    value: v.clone(),
                    version: *ver,
                })
                .collect(),
            revision: self.revision,
        }
    }

    /// Sets `key` the way a store does (the version bumped), bypassing the replica.
    fn put(&mut self, key: &str, value: Vec<u8>) -> u64 {
        self.revision += 1;
        self.entries.insert(key.to_owned(), (value, self.revision));
        self.revision
    }

    fn remove_all(&mut self) {
        self.entries.clear();
    }

    fn step(&mut self, now: Mono) -> Vec<Action> {
        let listing = self.listing();
        let fleet = FleetInput {
            clusters: &self.clusters,
            loads: &self.loads,
            apps: &self.apps,
            revision: self.fleet_revision,
            external_shards: None,
            measured: self.measured,
        };
        self.r.step(now, Some(&listing), fleet)
    }

    /// Carries out actions: stops are done at once, writes applied (or refused) and
    /// reported. Returns the writes with their outcomes.
    fn run(&mut self, actions: Vec<Action>) -> Vec<(WritePurpose, Precondition, bool)> {
        let mut done = Vec::new();
        for a in actions {
            match a {
                Action::Stop(c) => self.r.on_stopped(&c),
                Action::Start(_) => {}
                Action::Place(_) => unreachable!("these replicas place inside the step"),
                Action::Write {
                    ticket,
                    purpose,
                    key,
                    value,
                    pre,
                } => {
                    let result = if pre.admits(self.entries.get(&key).map(|e| e.1)) {
                        Ok(self.put(&key, value))
                    } else {
                        Err(StoreError::Conflict { key })
                    };
                    done.push((purpose, pre, result.is_ok()));
                    self.r.on_write(ticket, result);
                }
                Action::Delete {
                    ticket,
                    purpose,
                    key,
                    pre,
                } => {
                    let result = if pre.admits(self.entries.get(&key).map(|e| e.1)) {
                        self.revision += 1;
                        self.entries.remove(&key);
                        Ok(())
                    } else {
                        Err(StoreError::Conflict { key })
                    };
                    done.push((purpose, pre, result.is_ok()));
                    self.r.on_delete(ticket, result);
                }
            }
        }
        done
    }

    /// Steps and runs until nothing more is written, at `now`.
    fn settle(&mut self, now: Mono) {
        for _ in 0..6 {
            let a = self.step(now);
            if self.run(a).is_empty() {
                break;
            }
        }
    }

    fn doc(&self) -> AssignmentDoc {
        serde_json::from_slice(&self.entries[&assignment_key(ROOT)].0).unwrap()
    }
}

fn writes(actions: &[Action]) -> Vec<(WritePurpose, &str, Precondition)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Write {
                purpose, key, pre, ..
            } => Some((*purpose, key.as_str(), *pre)),
            _ => None,
        })
        .collect()
}

fn starts(actions: &[Action]) -> usize {
    actions
        .iter()
        .filter(|a| matches!(a, Action::Start(_)))
        .count()
}

fn stops(actions: &[Action]) -> usize {
    actions
        .iter()
        .filter(|a| matches!(a, Action::Stop(_)))
        .count()
}

fn shard_record(holder: &str, acked: u64) -> Vec<u8> {
    encode(&ShardRecord {
        holder: holder.into(),
        incarnation: 1,
        beat: 1,
        acked,
        released: false,
        zone: None,
        capacity: None,
    })
}

#[test]
fn claims_a_free_shard_and_the_distributor_role_with_create() {
    let mut b = Bench::new("a", 1, 0);
    let a = b.step(ms(0));
    let w = writes(&a);
    assert!(w.contains(&(WritePurpose::ClaimShard, "f/shards/0", Precondition::Absent)));
    assert!(
        !w.iter().any(|w| w.0 == WritePurpose::Distributor),
        "only a replica holding a shard takes the role: {w:?}"
    );
    b.run(a);
    let a = b.step(ms(5));
    assert!(writes(&a).contains(&(
        WritePurpose::Distributor,
        "f/distributor",
        Precondition::Absent
    )));
    b.run(a);
    assert_eq!(b.r.shard(ms(10)), Some(0));
    assert!(b.r.is_distributor(ms(10)));
    assert_eq!(b.r.shard_valid_until(ms(10)), Some(ms(3_000)));
}

#[test]
fn renews_when_due_with_compare_and_swap_on_its_version() {
    let mut b = Bench::new("a", 1, 0);
    b.settle(ms(0));
    let v = b.entries[&shard_key(ROOT, 0)].1;
    assert!(writes(&b.r.tick(ms(1_000))).is_empty(), "not due yet");
    let a = b.r.tick(ms(1_250));
    assert!(writes(&a).contains(&(
        WritePurpose::RenewShard,
        "f/shards/0",
        Precondition::Version(v)
    )));
    b.run(a);
    assert_eq!(b.r.shard_valid_until(ms(1_300)), Some(ms(4_250)));
}

#[test]
fn a_lease_not_renewed_in_time_lapses_and_stops_everything() {
    let mut b = Bench::new("a", 1, 3);
    b.settle(ms(0));
    b.settle(ms(10));
    assert_eq!(b.r.acting(ms(20)).count(), 3);
    // Renews go out but are never confirmed: the lease lapses at its deadline.
    let _ = b.r.tick(ms(1_250));
    let _ = b.r.tick(ms(2_500));
    let a = b.r.tick(ms(3_000));
    assert_eq!(stops(&a), 3);
    assert_eq!(b.r.shard(ms(3_000)), None);
    assert_eq!(b.r.take_lapse(), Some(ms(3_000)));
}

/// A lapse's stops run on the stop hook, off the step; the shard may be claimed again
/// before they end. A cluster is started again only once its stop has ended: a start
/// reported first would be undone by the late stop (the controller would drop the
/// restarted cluster's work while the replica believes it acts on it), and the audit log
/// would show two acquires in a row.
#[test]
fn a_cluster_still_stopping_after_a_lapse_is_not_started_again_until_stopped() {
    let mut b = Bench::new("a", 1, 3);
    b.settle(ms(0));
    b.settle(ms(10));
    assert_eq!(b.r.acting(ms(20)).count(), 3);
    let _ = b.r.tick(ms(1_250));
    let _ = b.r.tick(ms(2_500));
    let lapse = b.r.tick(ms(3_000));
    assert_eq!(stops(&lapse), 3);
    // The stops are still running: claim the shard again, commit, start.
    let mut started = 0;
    for t in (3_010..3_100).step_by(10) {
        let a = b.step(ms(t));
        started += starts(&a);
        let writes_only = a
            .into_iter()
            .filter(|a| matches!(a, Action::Write { .. }))
            .collect();
        b.run(writes_only);
    }
    assert_eq!(b.r.shard(ms(3_100)), Some(0), "claimed again");
    assert_eq!(started, 0, "started while its stop was still running");
    // The stops end: the clusters start again.
    for a in lapse {
        if let Action::Stop(c) = a {
            b.r.on_stopped(&c);
        }
    }
    let a = b.step(ms(3_110));
    assert_eq!(starts(&a), 3);
}

#[test]
fn release_stops_first_then_marks_the_records_released() {
    let mut b = Bench::new("a", 1, 2);
    b.settle(ms(0));
    b.settle(ms(10));
    let a = b.r.release();
    assert_eq!(stops(&a), 2);
    // The stops are reported by `run` before the release write is sent (next tick).
    b.run(a);
    let a = b.r.tick(ms(20));
    let purposes: Vec<_> = writes(&a).into_iter().map(|w| w.0).collect();
    assert!(
        purposes.contains(&WritePurpose::ReleaseShard),
        "{purposes:?}"
    );
    b.run(a);
    assert!(b.r.is_released());
    let rec: ShardRecord = serde_json::from_slice(&b.entries[&shard_key(ROOT, 0)].0).unwrap();
    assert!(rec.released && rec.acked == 1);
}

#[test]
fn the_distributor_commits_and_the_holder_starts_its_clusters() {
    let mut b = Bench::new("a", 1, 4);
    b.settle(ms(0));
    assert_eq!(b.doc().generation, 1);
    assert_eq!(b.doc().clusters.len(), 4);
    assert_eq!(b.r.applied_generation(), 1);
    assert_eq!(b.r.acting(ms(20)).count(), 4);
    // Nothing changed: no new generation.
    b.settle(ms(40));
    assert_eq!(b.doc().generation, 1);
}

#[test]
fn the_handover_barrier_waits_for_every_live_holder_to_acknowledge() {
    let mut b = Bench::new("a", 2, 4);
    // Another live holder of shard 1 that has acknowledged nothing yet.
    b.put(&shard_key(ROOT, 1), shard_record("b", 0));
    b.settle(ms(0));
    assert_eq!(b.doc().generation, 1);
    let a = b.step(ms(100));
    assert_eq!(starts(&a), 0, "shard 1's holder has not acknowledged");
    b.put(&shard_key(ROOT, 1), shard_record("b", 1));
    let a = b.step(ms(200));
    assert!(starts(&a) > 0);
}

#[test]
fn a_corrupt_shard_record_is_present_at_its_version_and_claimed_once_expired() {
    let mut b = Bench::new("a", 1, 0);
    let v = b.put(&shard_key(ROOT, 0), b"\x00garbage".to_vec());
    let a = b.step(ms(0));
    assert!(
        !writes(&a).iter().any(|w| w.0 == WritePurpose::ClaimShard),
        "live until unchanged for the lease duration: {a:?}"
    );
    assert_eq!(b.r.corrupt_records().len(), 1);
    assert_eq!(b.r.corrupt_records()[0].key, "f/shards/0");
    assert_eq!(b.r.take_warnings().len(), 1);
    b.run(a);
    let a = b.step(ms(4_000));
    assert!(
        writes(&a).contains(&(
            WritePurpose::ClaimShard,
            "f/shards/0",
            Precondition::Version(v)
        )),
        "{a:?}"
    );
    assert!(b.r.take_warnings().is_empty(), "reported once");
    b.run(a);
    assert_eq!(b.r.shard(ms(4_010)), Some(0));
    assert_eq!(b.r.takeovers(), 1);
    b.settle(ms(4_020));
    assert!(b.r.corrupt_records().is_empty(), "repaired by the claim");
}

#[test]
fn a_corrupt_low_shard_does_not_stop_a_spare_for_ever() {
    // Shard 0 corrupt, shard 1 held live by b: the spare takes shard 0 once expired.
    let mut b = Bench::new("c", 2, 0);
    b.put(&shard_key(ROOT, 0), b"{".to_vec());
    b.put(&shard_key(ROOT, 1), shard_record("b", 0));
    b.settle(ms(0));
    assert_eq!(b.r.shard(ms(10)), None);
    assert!(
        b.r.is_spare(),
        "an unreadable record counts as held while live"
    );
    b.put(&shard_key(ROOT, 1), shard_record("b", 0));
    b.settle(ms(4_100));
    assert_eq!(b.r.shard(ms(4_110)), Some(0));
}

#[test]
fn a_corrupt_distributor_record_is_vacant_after_the_lease_period() {
    let mut b = Bench::new("a", 1, 0);
    let v = b.put(&distributor_key(ROOT), b"not json".to_vec());
    let a = b.step(ms(0));
    assert!(!writes(&a).iter().any(|w| w.0 == WritePurpose::Distributor));
    b.run(a);
    let a = b.step(ms(3_999));
    assert!(!writes(&a).iter().any(|w| w.0 == WritePurpose::Distributor));
    b.run(a);
    let a = b.step(ms(4_000));
    assert!(
        writes(&a).contains(&(
            WritePurpose::Distributor,
            "f/distributor",
            Precondition::Version(v)
        )),
        "{a:?}"
    );
    b.run(a);
    assert!(b.r.is_distributor(ms(4_010)));
}

#[test]
fn a_corrupt_record_that_keeps_changing_stays_live() {
    // A newer release renewing a record this one cannot read: its holder is respected.
    let mut b = Bench::new("a", 1, 0);
    for t in (0..10_000).step_by(1_000) {
        b.put(
            &distributor_key(ROOT),
            br#"{"holder":"x","incarnation":1,"beat":1,"epoch":2}"#.to_vec(),
        );
        let a = b.step(ms(t));
        assert!(!writes(&a).iter().any(|w| w.0 == WritePurpose::Distributor));
        b.run(a);
    }
    assert!(b.r.corrupt_records()[0].reason.contains("epoch"));
}

#[test]
fn an_own_corrupt_presence_record_is_overwritten_at_its_version() {
    let mut b = Bench::new("a", 1, 0);
    b.put(&shard_key(ROOT, 0), shard_record("b", 0));
    b.put(&distributor_key(ROOT), encode(&distributor("b")));
    let v = b.put(&presence_key(ROOT, "a"), b"[]".to_vec());
    let a = b.step(ms(0));
    assert!(
        writes(&a).contains(&(
            WritePurpose::Presence,
            "f/replicas/a",
            Precondition::Version(v)
        )),
        "{a:?}"
    );
    b.run(a);
    let stored: PresenceRecord =
        serde_json::from_slice(&b.entries[&presence_key(ROOT, "a")].0).unwrap();
    assert_eq!(stored.holder, "a");
}

fn distributor(holder: &str) -> DistributorRecord {
    DistributorRecord {
        holder: holder.into(),
        incarnation: 1,
        beat: 1,
        released: false,
        shard: None,
    }
}

#[test]
fn a_corrupt_assignment_keeps_the_last_good_one_and_is_rewritten_higher() {
    let mut b = Bench::new("a", 1, 4);
    b.settle(ms(0));
    b.settle(ms(10));
    assert_eq!((b.doc().generation, b.r.acting(ms(20)).count()), (1, 4));
    // Garbage written over the assignment (the store bumps the version).
    let v = b.put(&assignment_key(ROOT), b"garbage".to_vec());
    let a = b.step(ms(30));
    assert_eq!(stops(&a), 0, "the last good generation stays in force");
    assert!(
        writes(&a).contains(&(
            WritePurpose::Commit,
            "f/assignment",
            Precondition::Version(v)
        )),
        "{a:?}"
    );
    b.run(a);
    assert_eq!(b.doc().generation, 2, "a new generation, never a lower one");
    assert_eq!(b.doc().clusters.len(), 4);
    b.settle(ms(40));
    assert_eq!(b.r.applied_generation(), 2);
    assert_eq!(b.r.acting(ms(50)).count(), 4);
    assert!(b.r.corrupt_records().is_empty());
}

#[test]
fn a_corrupt_assignment_without_a_last_good_one_is_replaced_above_every_ack() {
    // A new distributor that never read the assignment: holders acknowledged generation 9.
    let mut b = Bench::new("a", 2, 4);
    b.put(&shard_key(ROOT, 1), shard_record("b", 9));
    let v = b.put(&assignment_key(ROOT), vec![b'x'; 100]);
    // The first step claims the shard, the second the distributor role; the commit follows.
    let a = b.step(ms(0));
    b.run(a);
    let a = b.step(ms(5));
    b.run(a);
    b.put(&shard_key(ROOT, 1), shard_record("b", 9));
    let a = b.step(ms(10));
    assert!(
        writes(&a).contains(&(
            WritePurpose::Commit,
            "f/assignment",
            Precondition::Version(v)
        )),
        "never 'must not exist' over an unreadable record: {a:?}"
    );
    b.run(a);
    assert!(b.doc().generation >= 10, "{}", b.doc().generation);
}

#[test]
fn newer_schema_and_oversized_records_are_reported_not_read() {
    let mut b = Bench::new("a", 1, 0);
    b.put(
        &shard_key(ROOT, 0),
        br#"{"holder":"b","incarnation":1,"beat":1,"acked":0,"fence":3}"#.to_vec(),
    );
    let mut huge = shard_record("b", 0);
    huge.resize(10 << 20, b' ');
    b.put(&shard_key(ROOT, 1), huge);
    b.put(
        &presence_key(ROOT, "z"),
        vec![b'{'; MAX_LEASE_RECORD_BYTES + 1],
    );
    let _ = b.step(ms(0));
    let reasons: Vec<String> =
        b.r.corrupt_records()
            .iter()
            .map(|c| c.to_string())
            .collect();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(reasons[0].contains("f/replicas/z") && reasons[0].contains("bytes"));
    assert!(reasons[1].contains("f/shards/0") && reasons[1].contains("fence"));
    assert!(reasons[2].contains("f/shards/1") && reasons[2].contains("10485760 bytes"));
    assert_eq!(b.r.take_warnings().len(), 3);
    assert_eq!(
        b.r.shard(ms(0)),
        None,
        "both shards count as held until expired"
    );
}

#[test]
fn a_replaced_store_is_rebuilt_with_a_higher_generation() {
    let mut b = Bench::new("a", 1, 3);
    b.settle(ms(0));
    b.settle(ms(10));
    assert_eq!(b.r.applied_generation(), 1);
    // Every record gone; the store's revision continues.
    b.remove_all();
    let a = b.step(ms(20));
    assert_eq!(stops(&a), 3, "our shard record is gone: the shard is lost");
    b.run(a);
    b.settle(ms(30));
    b.settle(ms(40));
    assert_eq!(b.r.shard(ms(50)), Some(0));
    assert!(b.doc().generation >= 2, "{}", b.doc().generation);
    assert_eq!(
        b.doc().clusters.len(),
        3,
        "rebuilt from the last good generation"
    );
    b.settle(ms(60));
    assert_eq!(b.r.acting(ms(70)).count(), 3);
}

#[test]
fn a_corrupt_desired_count_keeps_the_last_good_one() {
    let mut b = Bench::with_count("a", ShardCount::Desired { default: 1 }, 4);
    b.put(
        &crate::fenced::desired_shards_key(ROOT),
        br#"{"shards":3}"#.to_vec(),
    );
    b.settle(ms(0));
    assert_eq!(b.doc().shards, 3);
    b.put(&crate::fenced::desired_shards_key(ROOT), b"3".to_vec());
    b.settle(ms(100));
    assert_eq!(
        b.doc().shards,
        3,
        "not the default because the record is unreadable"
    );
    assert_eq!(b.r.corrupt_records()[0].key, "f/desired-shards");
}

/// Helpers of the handover tests (`handoffs`, `slices`).
/// A live distributor record of someone else's, renewed at `beat`: generations are written
/// by hand.
fn someone_distributes(b: &mut Bench, beat: u64) {
    b.put(
        &distributor_key(ROOT),
        encode(&DistributorRecord {
            holder: "x".into(),
            incarnation: 1,
            beat,
            released: false,
            shard: None,
        }),
    );
}

fn commit(b: &mut Bench, generation: u64, clusters: &[(&str, u32)]) {
    b.put(
        &assignment_key(ROOT),
        encode(&AssignmentDoc {
            generation,
            shards: 3,
            clusters: clusters.iter().map(|&(c, s)| (c.to_owned(), s)).collect(),
            homes: Default::default(),
        }),
    );
}

fn started(actions: &[Action]) -> Vec<&str> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Start(c) => Some(c.as_str()),
            _ => None,
        })
        .collect()
}

mod cold_start;
mod forget;
mod guard;
mod handoffs;
mod hysteresis;
mod publish;
mod role;
mod slices;
mod spare;
