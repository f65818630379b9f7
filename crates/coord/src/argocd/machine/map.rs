//! Reading the map: decoding a listing (an unchanged version is not decoded again), the
//! entries' ages, graceful releases and shape changes seen, and whether our entry is still
//! ours.

use super::{ArgoReplica, MapView, Out};
use crate::argocd::{ShardEntry, WallTime, decode};
use crate::lease::Mono;
use crate::store::Listing;

impl ArgoReplica {
    pub(super) fn on_listing(
        &mut self,
        listing: Listing,
        now: Mono,
        wall: WallTime,
        out: &mut Out,
    ) {
        self.stats.listed = true;
        self.backoff.failures = 0;
        if listing.revision < self.newest {
            // Older than our own confirmed write: worthless; read again shortly.
            self.read_after_backoff(now);
            return;
        }
        let found = listing.entries.into_iter().find(|e| e.key == self.cfg.key);
        let (entries, version) = match found {
            None => (Vec::new(), None),
            Some(e) => match (&self.decoded, &self.map) {
                // Versions are never reused: a version seen (or written) is that content.
                (Some((v, entries)), _)
                | (
                    _,
                    Some(MapView {
                        entries,
                        version: Some(v),
                    }),
                ) if *v == e.version => (entries.clone(), Some(e.version)),
                _ => {
                    let decoded = std::str::from_utf8(&e.value)
                        .map_err(|err| err.to_string())
                        .and_then(|text| decode(text).map_err(|err| err.to_string()));
                    match decoded {
                        Ok(entries) => {
                            self.decoded = Some((e.version, entries.clone()));
                            (entries, Some(e.version))
                        }
                        Err(err) => {
                            // Not overwritten: a person or another tool must look at it.
                            // Our hold runs out with its validity, since no heartbeat is
                            // confirmed.
                            let text = format!("{}: cannot decode the shard mapping: {err}", e.key);
                            if self.stats.map_error.as_deref() != Some(&text) {
                                self.warnings.push(text.clone());
                            }
                            self.stats.map_error = Some(text);
                            self.map = None;
                            return;
                        }
                    }
                }
            },
        };
        self.stats.map_error = None;
        self.apply_map(entries, version, now);
        self.maybe_claim(now, wall, out);
    }

    /// Takes in a map read (or our own confirmed write): staleness ages, graceful releases
    /// seen, shape changes, and whether our entry is still ours.
    pub(super) fn apply_map(&mut self, entries: Vec<ShardEntry>, version: Option<u64>, now: Mono) {
        self.observer.observe(&entries, now);
        if let Some(prev) = self.map.take() {
            if prev.entries.len() != entries.len() && version.is_some() {
                self.changed_shape(now);
            }
            let me = self.cfg.identity.as_str();
            for e in &entries {
                let Ok(n) = u32::try_from(e.shard_number) else {
                    continue;
                };
                // A release is graceful only if its holder left the map: a holder moved
                // by a repair (a duplicate identity) may still be acting.
                let was_held_by_other = prev.entries.iter().any(|p| {
                    p.shard_number == e.shard_number
                        && !p.is_free()
                        && p.controller_name != me
                        && !entries
                            .iter()
                            .any(|n| n.controller_name == p.controller_name)
                });
                // …and only if the free entry carries a heartbeat: its holder released it
                // (`release_entries`). A free entry without one was added or repaired
                // (the map shrank and grew again between two of our reads, say: its
                // holder may not have read the shorter map yet).
                let released = e.heartbeat_time != WallTime::ZERO;
                if !e.is_free() || !released {
                    self.freed.remove(&n);
                } else if was_held_by_other {
                    self.freed.insert(n);
                }
            }
        }
        if let Some(s) = self.held {
            let me = self.cfg.identity.as_str();
            let mine = entries
                .iter()
                .any(|e| e.shard_number == i64::from(s) && e.controller_name == me);
            if !mine {
                self.warnings.push(format!(
                    "shard {s}: our entry is gone or someone else's: stopping"
                ));
                self.held = None;
                self.valid_until = None;
            }
        }
        self.map = Some(MapView { entries, version });
    }
}
