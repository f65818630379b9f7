//! This replica's inventory record (`fenced/inventory.rs`): written when what it says
//! changes, and compared with the records of the other live replicas — those whose shard,
//! presence or distributor record with the same incarnation is live and unreleased by this
//! replica's observation — so that every replica can tell how many disagree with it.

use std::collections::BTreeSet;

use super::seen::View;
use super::{Action, Pending, Replica, WritePurpose};
use crate::fenced::inventory::{
    HeldBackRecord, InventoryRecord, InventorySummary, PROTOCOL, digest_text, inventory_key,
};
use crate::fenced::records::encode;
use crate::store::Precondition;

/// This replica's inventory, and what the last listing said of the others'.
#[derive(Debug, Clone, Default)]
pub(super) struct InventoryState {
    summary: Option<InventorySummary>,
    disagreement: u64,
}

impl Replica {
    /// This replica's inventory now (its runner computes the summary off the step whenever
    /// the inventory changes): published in its inventory record at the next step.
    pub fn set_inventory(&mut self, summary: InventorySummary) {
        self.inventory.summary = Some(summary);
    }

    /// How many other live replicas published an inventory digest that differs from this
    /// one's, at the last listing (0 before this replica's inventory is known).
    pub fn inventory_disagreement(&self) -> u64 {
        self.inventory.disagreement
    }

    /// Counts the live replicas that disagree, and writes this replica's record when the
    /// stored one says something else (or is unreadable).
    pub(super) fn publish_inventory(&mut self, view: &View, out: &mut Vec<Action>) {
        let Some(summary) = self.inventory.summary else {
            return;
        };
        let digest = digest_text(summary.digest);
        let live: BTreeSet<(&str, u64)> = view
            .shards
            .values()
            .map(|s| {
                (
                    &s.record.holder,
                    s.record.incarnation,
                    s.record.released,
                    &s.verdict,
                )
            })
            .chain(view.presence.values().map(|s| {
                (
                    &s.record.holder,
                    s.record.incarnation,
                    s.record.released,
                    &s.verdict,
                )
            }))
            .chain(view.distributor.iter().map(|s| {
                (
                    &s.record.holder,
                    s.record.incarnation,
                    s.record.released,
                    &s.verdict,
                )
            }))
            .filter(|(_, _, released, verdict)| !released && verdict.is_live())
            .map(|(holder, incarnation, ..)| (holder.as_str(), incarnation))
            .collect();
        self.inventory.disagreement = view
            .inventories
            .iter()
            .filter(|(id, _)| **id != self.cfg.identity)
            .filter_map(|(_, (_, r))| r.as_ref())
            .filter(|r| live.contains(&(r.holder.as_str(), r.incarnation)) && r.digest != digest)
            .count() as u64;
        if self.stopping || self.has_pending(|p| matches!(p, Pending::Inventory)) {
            return;
        }
        let record = InventoryRecord {
            holder: self.cfg.identity.clone(),
            incarnation: self.cfg.incarnation,
            digest,
            clusters: summary.clusters,
            problems: summary.problems,
            held_back: self.guard.held.map(|h| HeldBackRecord {
                previous: h.previous,
                dropped: h.dropped,
                grace_secs: self.guard.config.grace.as_secs(),
            }),
            protocol: Some(PROTOCOL),
        };
        let stored = view.inventories.get(&self.cfg.identity);
        // Ours already; or another live process's with our identity (a misconfiguration
        // its own lease records show): not fought over at every step.
        let leave = stored.is_some_and(|(_, r)| {
            r.as_ref().is_some_and(|r| {
                *r == record
                    || (r.incarnation != record.incarnation
                        && live.contains(&(r.holder.as_str(), r.incarnation)))
            })
        });
        if leave {
            return;
        }
        let pre = stored.map_or(Precondition::Absent, |(v, _)| Precondition::Version(*v));
        let ticket = self.ticket(Pending::Inventory);
        out.push(Action::Write {
            ticket,
            purpose: WritePurpose::Inventory,
            key: inventory_key(&self.cfg.root, &self.cfg.identity),
            value: encode(&record),
            pre,
        });
    }
}
