//! Corrupt records and a replaced store, the failures `SimConfig::corruption` draws.

use super::*;

impl Sim {
    /// What one failure becomes under `corruption`: a record of any kind overwritten, or
    /// the store replaced by an empty one.
    pub(super) fn draw_corruption(&mut self) -> Ev {
        match self.rng.below(6) {
            0 => Ev::Corrupt(Record::Shard(
                self.rng.below(u64::from(self.cfg.shards)) as u32
            )),
            1 => Ev::Corrupt(Record::Distributor),
            2 => Ev::Corrupt(Record::Presence(
                self.rng.below(self.cfg.nodes as u64) as usize
            )),
            3 => Ev::Corrupt(Record::Assignment),
            4 => Ev::Corrupt(Record::DesiredShards),
            _ => Ev::ReplaceStore,
        }
    }

    /// Overwrites `record` with garbage, a newer schema's record or an oversized one.
    pub(super) fn corrupt(&mut self, record: Record) {
        let key = match record {
            Record::Shard(n) => shard_key("fs/", n),
            Record::Distributor => distributor_key("fs/"),
            Record::Presence(n) => presence_key("fs/", &self.nodes[n].life.identity),
            Record::Assignment => assignment_key("fs/"),
            Record::DesiredShards => desired_shards_key("fs/"),
        };
        let value = match self.rng.below(3) {
            0 => b"\x00\xffnot a record".to_vec(),
            // A newer release's record: a field this one does not know.
            1 => self.store.entries.get(&key).map_or_else(
                || br#"{"epoch":1}"#.to_vec(),
                |(v, _)| {
                    let mut v = v.clone();
                    if v.last() == Some(&b'}') {
                        v.pop();
                        v.extend_from_slice(br#","epoch":1}"#);
                    }
                    v
                },
            ),
            _ => vec![b' '; MAX_LEASE_RECORD_BYTES + 1],
        };
        if tracing() {
            eprintln!("{:>6} corrupt {key}", self.t);
        }
        let _ = self.store.write(&key, value, Precondition::Any);
        self.checker.out.disruptions.push(self.t);
    }
}
