//! One kind's cached objects, its revision, and the log of recent changes that
//! `wait_for_change` reads.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::time::Duration;

use fleetshard_coord::store::{Entry, StoreError};
use tokio::time::Instant;

/// How many changes a kind remembers for waiters; one waiting from before the oldest is
/// woken (spuriously, which the trait allows).
const LOG_LIMIT: usize = 1024;

/// One object: its resourceVersion and the entries it holds (none for an object that is
/// not a record; an error for one that cannot be read, reported by listings).
#[derive(Debug, Clone)]
pub(crate) struct Obj {
    pub(crate) rv: u64,
    pub(crate) entries: Result<Vec<Entry>, StoreError>,
}

impl Obj {
    fn touched(&self, into: &mut Touched) {
        match &self.entries {
            Ok(entries) => into.keys.extend(entries.iter().map(|e| e.key.clone())),
            Err(_) => into.any = true,
        }
    }
}

/// A LIST's answer: its resourceVersion and the objects by name.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    pub(crate) rev: u64,
    pub(crate) objects: HashMap<String, Obj>,
}

/// Which keys a change touched (`any`: cannot tell, wake every waiter).
#[derive(Debug, Default)]
struct Touched {
    keys: BTreeSet<String>,
    any: bool,
}

#[derive(Debug)]
struct Change {
    rv: u64,
    touched: Touched,
}

/// An object this client deleted, until the watch shows the deletion (or a re-creation):
/// events at or below `rv` (the version it had) are older than the delete and must not
/// bring it back.
#[derive(Debug)]
struct Tombstone {
    rv: u64,
    /// The store's delete counter when the delete returned: a LIST sent later reflects it.
    seq: u64,
    touched: Touched,
}

/// What is known of one kind of one scope.
#[derive(Debug)]
pub(crate) struct KindState {
    /// A LIST has filled `objects`.
    synced: bool,
    /// Every write of this kind in the scope up to this revision is in `objects`.
    pub(crate) rev: u64,
    /// Changes before this revision are forgotten.
    horizon: u64,
    objects: HashMap<String, Obj>,
    log: VecDeque<Change>,
    tombstones: HashMap<String, Tombstone>,
    /// When the scope was started (freshness counts from here until first heard).
    started: Instant,
    /// Last sign of life from the API server on this kind's LIST/WATCH.
    heard: Option<Instant>,
    /// The newest own write this kind's watch will show (selected by its selectors).
    pub(crate) awaited: u64,
    /// Why the last LIST or WATCH failed, for `Unavailable` messages.
    pub(crate) last_error: Option<String>,
}

impl KindState {
    pub(crate) fn new(started: Instant) -> Self {
        KindState {
            synced: false,
            rev: 0,
            horizon: 0,
            objects: HashMap::new(),
            log: VecDeque::new(),
            tombstones: HashMap::new(),
            started,
            heard: None,
            awaited: 0,
            last_error: None,
        }
    }

    /// When this kind stops being fresh unless it hears from the server again.
    pub(crate) fn fresh_until(&self, freshness: Duration) -> Instant {
        self.heard.unwrap_or(self.started) + freshness
    }

    /// Nothing heard for longer than `freshness` (since start, if never).
    pub(crate) fn gave_up(&self, now: Instant, freshness: Duration) -> bool {
        now > self.fresh_until(freshness)
    }

    /// Synced and heard from within `freshness`: listings may come from here.
    pub(crate) fn is_fresh(&self, now: Instant, freshness: Duration) -> bool {
        self.synced && self.heard.is_some() && !self.gave_up(now, freshness)
    }

    /// Why this kind is not fresh, for an `Unavailable`.
    pub(crate) fn staleness(&self, freshness: Duration) -> String {
        let why = self.last_error.as_deref().unwrap_or("no answer");
        format!("nothing from the API server for over {freshness:?} (last error: {why})")
    }

    pub(crate) fn heard(&mut self, now: Instant) {
        self.heard = Some(now);
        self.last_error = None;
    }

    /// A bookmark: every event up to `rv` has been sent.
    pub(crate) fn progress(&mut self, rv: u64, now: Instant) {
        self.rev = self.rev.max(rv);
        self.heard(now);
    }

    /// Every entry, or the first object's read error.
    pub(crate) fn entries(&self) -> Result<Vec<&Entry>, StoreError> {
        let mut out = Vec::new();
        for o in self.objects.values() {
            match &o.entries {
                Ok(entries) => out.extend(entries),
                Err(e) => return Err(e.clone()),
            }
        }
        Ok(out)
    }

    /// The newest change under `prefix` after `from`, if any. A kind not synced yet cannot
    /// tell; one whose log no longer reaches back to `from` answers with its revision.
    pub(crate) fn changed_after(&self, prefix: &str, from: u64) -> Option<u64> {
        if !self.synced {
            return None;
        }
        if from < self.horizon {
            return Some(self.rev);
        }
        self.log
            .iter()
            .filter(|c| c.rv > from)
            .filter(|c| c.touched.any || c.touched.keys.iter().any(|k| k.starts_with(prefix)))
            .map(|c| c.rv)
            .max()
    }

    fn record(&mut self, rv: u64, touched: Touched) {
        if touched.keys.is_empty() && !touched.any {
            return;
        }
        self.log.push_back(Change { rv, touched });
        while self.log.len() > LOG_LIMIT {
            if let Some(old) = self.log.pop_front() {
                self.horizon = self.horizon.max(old.rv);
            }
        }
    }

    /// A watch event: `obj` added or modified, or (`None`) deleted, at `rv`. Events at or
    /// below `rev` are already reflected (a LIST got there first) and ignored, so applying
    /// one twice is harmless.
    pub(crate) fn apply(&mut self, name: &str, rv: u64, obj: Option<Obj>) {
        if rv <= self.rev {
            return;
        }
        self.rev = rv;
        let mut touched = Touched::default();
        if let Some(t) = self.tombstones.get_mut(name) {
            if rv <= t.rv {
                // Older than our delete: not shown, but its keys are what the delete
                // removed, for waiters once the watch shows the deletion.
                if let Some(o) = &obj {
                    o.touched(&mut t.touched);
                }
                return;
            }
            if let Some(t) = self.tombstones.remove(name) {
                touched = t.touched;
            }
        }
        if let Some(o) = &obj {
            o.touched(&mut touched);
        }
        let old = match obj {
            Some(o) => self.objects.insert(name.to_owned(), o),
            None => self.objects.remove(name),
        };
        if let Some(o) = &old {
            o.touched(&mut touched);
        }
        self.record(rv, touched);
    }

    /// This client deleted `name` (at version `rv`, if the delete named one): gone from
    /// listings at once, until the watch confirms.
    pub(crate) fn deleted(&mut self, name: &str, rv: Option<u64>, seq: u64) {
        let old = self.objects.remove(name);
        let mut touched = Touched::default();
        if let Some(o) = &old {
            o.touched(&mut touched);
        }
        let rv = rv.or(old.map(|o| o.rv)).unwrap_or_default();
        self.tombstones
            .insert(name.to_owned(), Tombstone { rv, seq, touched });
    }

    /// A LIST at `snap.rev`, sent when the delete counter was `seq`: replaces the objects
    /// if it is newer than what the kind has, logging what differs. The first one syncs.
    pub(crate) fn replace(&mut self, mut snap: Snapshot, seq: u64) {
        if self.synced && snap.rev <= self.rev {
            return;
        }
        // Our deletes: a listed object newer than the deleted version is a re-creation; an
        // older one is the LIST racing the delete; an absent one is gone for good once the
        // LIST was sent after the delete returned.
        self.tombstones
            .retain(|name, t| match snap.objects.get(name) {
                Some(o) if o.rv > t.rv => false,
                Some(_) => {
                    snap.objects.remove(name);
                    true
                }
                None => t.seq > seq,
            });
        if !self.synced {
            self.synced = true;
            self.horizon = snap.rev;
        } else {
            let mut changes = Vec::new();
            for (name, new) in &snap.objects {
                let old = self.objects.get(name);
                if old.is_none_or(|o| o.rv != new.rv) {
                    let mut touched = Touched::default();
                    new.touched(&mut touched);
                    if let Some(o) = old {
                        o.touched(&mut touched);
                    }
                    changes.push((new.rv, touched));
                }
            }
            for (name, old) in &self.objects {
                if !snap.objects.contains_key(name) {
                    let mut touched = Touched::default();
                    old.touched(&mut touched);
                    changes.push((snap.rev, touched));
                }
            }
            changes.sort_by_key(|(rv, _)| *rv);
            for (rv, touched) in changes {
                self.record(rv, touched);
            }
        }
        self.objects = snap.objects;
        self.rev = self.rev.max(snap.rev);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(key: &str, rv: u64) -> Obj {
        Obj {
            rv,
            entries: Ok(vec![Entry {
                key: key.into(),
                value: Vec::new(),
                version: rv,
            }]),
        }
    }

    fn synced(objects: &[(&str, &str, u64)], rev: u64) -> KindState {
        let mut s = KindState::new(Instant::now());
        let objects = objects
            .iter()
            .map(|(n, k, rv)| (n.to_string(), obj(k, *rv)))
            .collect();
        s.replace(Snapshot { rev, objects }, 0);
        s
    }

    fn keys(s: &KindState) -> Vec<String> {
        let mut k: Vec<_> = s.entries().unwrap().iter().map(|e| e.key.clone()).collect();
        k.sort();
        k
    }

    #[test]
    fn events_at_or_below_the_revision_are_ignored() {
        let mut s = synced(&[("a", "f/a", 3)], 5);
        s.apply("b", 4, Some(obj("f/b", 4)));
        s.apply("a", 5, None);
        assert_eq!(keys(&s), ["f/a"], "old news changes nothing");
        s.apply("b", 6, Some(obj("f/b", 6)));
        s.apply("b", 6, Some(obj("f/b", 6)));
        assert_eq!(keys(&s), ["f/a", "f/b"]);
        assert_eq!(s.rev, 6);
        assert_eq!(s.changed_after("f/b", 5), Some(6));
        assert_eq!(s.changed_after("f/a", 5), None);
        assert_eq!(s.changed_after("f/", 6), None);
        assert_eq!(
            s.changed_after("f/", 4),
            Some(6),
            "before the horizon: wake"
        );
    }

    #[test]
    fn an_own_delete_hides_the_object_until_the_watch_shows_it() {
        let mut s = synced(&[], 5);
        // The watch lags: the object was created at 7, which we read directly and deleted.
        s.deleted("a", Some(7), 1);
        s.apply("a", 7, Some(obj("f/a", 7)));
        assert!(keys(&s).is_empty(), "an event older than the delete");
        s.apply("a", 8, None);
        assert_eq!(s.changed_after("f/", 7), Some(8));
        // A re-creation after it shows.
        s.apply("a", 9, Some(obj("f/a", 9)));
        assert_eq!(keys(&s), ["f/a"]);
    }

    #[test]
    fn a_relist_logs_what_differs_and_keeps_own_deletes() {
        let mut s = synced(&[("a", "f/a", 3), ("b", "f/b", 4)], 5);
        s.deleted("c", Some(5), 2);
        let objects = [("a", obj("f/a", 3)), ("c", obj("f/c", 5))]
            .into_iter()
            .map(|(n, o)| (n.to_string(), o))
            .collect();
        // Sent before the delete returned (seq 1 < 2): c at its deleted version stays hidden.
        s.replace(Snapshot { rev: 9, objects }, 1);
        assert_eq!(keys(&s), ["f/a"]);
        assert_eq!(s.rev, 9);
        assert_eq!(s.changed_after("f/b", 5), Some(9), "b's removal");
        assert_eq!(s.changed_after("f/a", 5), None);
        // An older LIST changes nothing.
        s.replace(Snapshot::default(), 3);
        assert_eq!(keys(&s), ["f/a"]);
    }
}
