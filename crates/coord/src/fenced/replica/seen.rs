//! Reading a listing: decode the records, judge every lease on this replica's clock.
//!
//! An unreadable lease record (garbage, a newer schema, oversized) is not absent: it is
//! present at its version, judged like any other (a version unchanged for the lease
//! duration has expired), and claimed with compare-and-swap on that version. Its content
//! stands in as an unknown holder that acknowledged nothing, so it blocks neither a claim
//! after expiry nor, once expired, the handover barrier. An unreadable assignment keeps the
//! last good one in force, and its stored version is what the distributor overwrites.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use super::Replica;
use crate::fenced::inventory::InventoryRecord;
use crate::fenced::records::{
    AssignmentDoc, CorruptRecord, DistributorRecord, PresenceRecord, ShardRecord, decode,
    decode_lease,
};
use crate::fenced::snapshot::{RecordKey, decode_desired, not_a_shard};
use crate::lease::{Mono, Verdict};
use crate::store::Listing;

/// A lease record as seen: its version, content, and this replica's verdict on it.
#[derive(Debug, Clone)]
pub(super) struct Seen<R> {
    pub version: u64,
    pub record: R,
    pub verdict: Verdict,
}

/// What a store listing says, decoded and judged.
#[derive(Debug, Default)]
pub(super) struct View {
    /// Every shard record, by number (also those beyond the current count: their holders
    /// take part in the handover barrier until they have let go).
    pub shards: BTreeMap<u32, Seen<ShardRecord>>,
    pub distributor: Option<Seen<DistributorRecord>>,
    /// Presence records by identity.
    pub presence: BTreeMap<String, Seen<PresenceRecord>>,
    /// Inventory records by identity, with their versions (`None`: unreadable).
    pub inventories: BTreeMap<String, (u64, Option<InventoryRecord>)>,
    pub assignment: Option<(u64, Arc<AssignmentDoc>)>,
    /// The stored assignment's version, readable or not (what a commit overwrites).
    pub assignment_version: Option<u64>,
    /// The stored assignment could not be read (`assignment` is the last good one, if any).
    pub assignment_corrupt: bool,
    /// The stored desired shard count.
    pub desired: Option<u32>,
    pub corrupt: Vec<CorruptRecord>,
}

impl View {
    /// Whether the holder of shard `n` can no longer act on what generation `generation`
    /// took from it: no record, or one released, no longer live by this replica's
    /// observation, or acknowledging that generation (its holder has stopped every cluster
    /// that generation did not give it).
    pub(super) fn shard_let_go(&self, n: u32, generation: u64) -> bool {
        self.shards.get(&n).is_none_or(|s| {
            s.record.released || !s.verdict.is_live() || s.record.acked >= generation
        })
    }

    /// Whether every shard's holder but `except`'s let generation `generation` go
    /// ([`View::shard_let_go`]): the handover barrier's base (`handoffs.rs`).
    pub(super) fn acknowledged(&self, generation: u64, except: Option<u32>) -> bool {
        self.shards
            .keys()
            .filter(|&&n| Some(n) != except)
            .all(|&n| self.shard_let_go(n, generation))
    }
}

impl Replica {
    /// Decodes a listing of `root` and judges each lease record. The assignment document is
    /// decoded only when its version changed (it may be megabytes; listings come every few
    /// hundred milliseconds).
    /// Leases are judged as of `asked`, when the listing was asked for, and new versions
    /// counted from `received` ([`crate::lease::LeaseObserver::observe_listed`]).
    pub(super) fn decode(&mut self, listing: &Listing, asked: Mono, received: Mono) -> View {
        let root = self.cfg.root.clone();
        let timing = self.cfg.timing;
        let mut view = View::default();
        // The lease records judged in this listing; the observer forgets every other key
        // (a record deleted starts a fresh wait if it comes back).
        let mut judged: HashSet<&str> = HashSet::new();
        for e in &listing.entries {
            let mut judge = |observer: &mut crate::lease::LeaseObserver| {
                judged.insert(e.key.as_str());
                observer.observe_listed(&e.key, e.version, asked, received, &timing)
            };
            match RecordKey::classify(&root, &e.key) {
                RecordKey::Distributor => {
                    let record = stand_in(
                        decode_lease::<DistributorRecord>(&e.key, &e.value),
                        &mut view.corrupt,
                        || DistributorRecord {
                            holder: String::new(),
                            incarnation: 0,
                            beat: 0,
                            released: false,
                            shard: None,
                        },
                    );
                    let verdict = judge(&mut self.observer);
                    view.distributor = Some(Seen {
                        version: e.version,
                        record,
                        verdict,
                    });
                }
                RecordKey::Assignment => {
                    view.assignment_version = Some(e.version);
                    match &self.last_doc {
                        Some((v, doc)) if *v == e.version => {
                            view.assignment = Some((e.version, doc.clone()));
                        }
                        _ => match decode::<AssignmentDoc>(&e.key, &e.value) {
                            Ok(doc) => view.assignment = Some((e.version, Arc::new(doc))),
                            Err(c) => {
                                view.assignment_corrupt = true;
                                view.corrupt.push(c);
                            }
                        },
                    }
                }
                RecordKey::DesiredShards => match decode_desired(&e.key, &e.value) {
                    Ok(n) => {
                        view.desired = Some(n);
                        self.last_desired = Some(n);
                    }
                    // An unreadable count changes nothing: the last good one stays.
                    Err(c) => {
                        view.desired = self.last_desired;
                        view.corrupt.push(c);
                    }
                },
                RecordKey::Shard(n) => {
                    let record = stand_in(
                        decode_lease::<ShardRecord>(&e.key, &e.value),
                        &mut view.corrupt,
                        || ShardRecord {
                            holder: String::new(),
                            incarnation: 0,
                            beat: 0,
                            acked: 0,
                            released: false,
                            zone: None,
                            capacity: None,
                        },
                    );
                    let verdict = judge(&mut self.observer);
                    let seen = Seen {
                        version: e.version,
                        record,
                        verdict,
                    };
                    view.shards.insert(n, seen);
                }
                RecordKey::Presence(id) => {
                    let record = stand_in(
                        decode_lease::<PresenceRecord>(&e.key, &e.value),
                        &mut view.corrupt,
                        || PresenceRecord {
                            holder: id.to_owned(),
                            incarnation: 0,
                            beat: 0,
                            released: false,
                        },
                    );
                    let verdict = judge(&mut self.observer);
                    let seen = Seen {
                        version: e.version,
                        record,
                        verdict,
                    };
                    view.presence.insert(id.to_owned(), seen);
                }
                RecordKey::Inventory(id) => {
                    let record = decode_lease::<InventoryRecord>(&e.key, &e.value)
                        .map_err(|c| view.corrupt.push(c))
                        .ok();
                    view.inventories.insert(id.to_owned(), (e.version, record));
                }
                RecordKey::NotAShard => view.corrupt.push(not_a_shard(&e.key)),
                RecordKey::Other => {}
            }
        }
        // An unreadable assignment is not obeyed: the last good one stays (G7).
        match &view.assignment {
            Some(doc) => self.last_doc = Some(doc.clone()),
            None if view.assignment_corrupt => view.assignment = self.last_doc.clone(),
            None => {}
        }
        self.observer.retain(|k| judged.contains(k));
        self.peers
            .note(&view, self.shard.as_ref().map(|h| h.shard), asked);
        // Each problem is reported once, when it appears (listings come every poll).
        let known = std::mem::take(&mut self.corrupt);
        self.warnings.extend(
            view.corrupt
                .iter()
                .filter(|c| !known.contains(c))
                .map(ToString::to_string),
        );
        self.corrupt = view.corrupt.clone();
        view
    }

    /// Every shard below the count is held, live and unreleased, by someone else.
    pub(super) fn all_held_by_others(&self, view: &View) -> bool {
        (0..self.count).all(|n| {
            view.shards.get(&n).is_some_and(|s| {
                !s.record.released
                    && s.verdict.is_live()
                    && !self.is_me(&s.record.holder, s.record.incarnation)
            })
        })
    }
}

/// The decoded record, or (reporting why) a stand-in for an unreadable one.
fn stand_in<R>(
    decoded: Result<R, CorruptRecord>,
    corrupt: &mut Vec<CorruptRecord>,
    unknown: impl FnOnce() -> R,
) -> R {
    decoded.unwrap_or_else(|c| {
        corrupt.push(c);
        unknown()
    })
}
