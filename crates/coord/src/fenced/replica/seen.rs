//! Reading a listing: decode the records, judge every lease on this replica's clock.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use super::Replica;
use crate::fenced::records::{
    AssignmentDoc, CorruptRecord, DistributorRecord, PresenceRecord, ShardRecord, decode,
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
    pub assignment: Option<(u64, Arc<AssignmentDoc>)>,
    /// The stored desired shard count.
    pub desired: Option<u32>,
    pub corrupt: Vec<CorruptRecord>,
}

impl Replica {
    /// Decodes a listing of `root` and judges each lease record. The assignment document is
    /// decoded only when its version changed (it may be megabytes; listings come every few
    /// hundred milliseconds).
    pub(super) fn decode(&mut self, listing: &Listing, now: Mono) -> View {
        let root = self.cfg.root.clone();
        let timing = self.cfg.timing;
        let mut view = View::default();
        let mut assignment_corrupt = false;
        // The lease records judged in this listing; the observer forgets every other key
        // (a record deleted, or unreadable, starts a fresh wait if it comes back).
        let mut judged: HashSet<&str> = HashSet::new();
        for e in &listing.entries {
            let mut judge = |observer: &mut crate::lease::LeaseObserver| {
                judged.insert(e.key.as_str());
                observer.observe(&e.key, e.version, now, &timing)
            };
            match RecordKey::classify(&root, &e.key) {
                RecordKey::Distributor => match decode::<DistributorRecord>(&e.key, &e.value) {
                    Ok(record) => {
                        let verdict = judge(&mut self.observer);
                        view.distributor = Some(Seen {
                            version: e.version,
                            record,
                            verdict,
                        });
                    }
                    Err(c) => view.corrupt.push(c),
                },
                RecordKey::Assignment => match &self.last_doc {
                    Some((v, doc)) if *v == e.version => {
                        view.assignment = Some((e.version, doc.clone()));
                    }
                    _ => match decode::<AssignmentDoc>(&e.key, &e.value) {
                        Ok(doc) => view.assignment = Some((e.version, Arc::new(doc))),
                        Err(c) => {
                            assignment_corrupt = true;
                            view.corrupt.push(c);
                        }
                    },
                },
                RecordKey::DesiredShards => match decode_desired(&e.key, &e.value) {
                    Ok(n) => view.desired = Some(n),
                    Err(c) => view.corrupt.push(c),
                },
                RecordKey::Shard(n) => match decode::<ShardRecord>(&e.key, &e.value) {
                    Ok(record) => {
                        let verdict = judge(&mut self.observer);
                        let seen = Seen {
                            version: e.version,
                            record,
                            verdict,
                        };
                        view.shards.insert(n, seen);
                    }
                    Err(c) => view.corrupt.push(c),
                },
                RecordKey::Presence(id) => match decode::<PresenceRecord>(&e.key, &e.value) {
                    Ok(record) => {
                        let verdict = judge(&mut self.observer);
                        let seen = Seen {
                            version: e.version,
                            record,
                            verdict,
                        };
                        view.presence.insert(id.to_owned(), seen);
                    }
                    Err(c) => view.corrupt.push(c),
                },
                RecordKey::NotAShard => view.corrupt.push(not_a_shard(&e.key)),
                RecordKey::Other => {}
            }
        }
        // An unreadable assignment is not obeyed: the last good one stays (G7).
        match &view.assignment {
            Some(doc) => self.last_doc = Some(doc.clone()),
            None if assignment_corrupt => view.assignment = self.last_doc.clone(),
            None => {}
        }
        self.observer.retain(|k| judged.contains(k));
        self.warnings
            .extend(view.corrupt.iter().map(ToString::to_string));
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
