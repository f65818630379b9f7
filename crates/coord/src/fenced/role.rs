//! The distributor role, judged the one way every reader judges it (the replicas, `status`,
//! the dashboard). Only a replica holding a shard takes the role, and its record names
//! that shard ([`DistributorRecord::shard`]): the role then lives exactly as long as the
//! shard record names the same holder and incarnation, unreleased, and that record's lease
//! is live. The holder's shard renewals confirm the role, so a fleet of N replicas writes
//! about 0.8 records per second per replica at the default period, the distributor
//! included.
//!
//! **Why it is safe.** Others take the role only when the shard record's lease has expired
//! by their own observation, is released, or names someone else (who took it only after
//! it expired or was released); the holder acts as distributor only while its shard lease
//! is valid and not being released, so by the lease timing argument (`lease.rs`) it has
//! stopped by then. A record bound to a shard whose record cannot be read is judged by that
//! record's version, like any unreadable lease.
//!
//! **Older releases.** A record without `shard` (the separate form, what older releases
//! write and renew) is judged by its own version, as before. Older releases refuse the
//! `shard` field and would take a record they cannot read over once its version has stood
//! still for the lease period; so a distributor keeps the separate form, renewed, while any
//! live replica has not announced [`PROTOCOL`](super::PROTOCOL) in its inventory record.

use super::records::{DistributorRecord, ShardRecord};

/// What a reader has of one shard's record.
#[derive(Debug, Clone, Copy)]
pub enum ShardSeen<'a> {
    /// No record under the key.
    Absent,
    /// A record that does not decode (judged by its version).
    Unreadable,
    /// The record.
    Record(&'a ShardRecord),
}

/// Which lease says whether the distributor record's holder holds the role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoleLease {
    /// The distributor record's own (the separate form, or an unreadable record's stand-in).
    Own,
    /// Shard n's record's (the bound form: it names the holder, unreleased, or cannot be
    /// read).
    Shard(u32),
    /// Nobody's: the record is released, or bound to a shard whose record is absent,
    /// released, or names another holder.
    Free,
}

/// Judges `dist`: `shard` looks a shard's record up.
pub fn role_lease<'a>(
    dist: &DistributorRecord,
    shard: impl FnOnce(u32) -> ShardSeen<'a>,
) -> RoleLease {
    if dist.released {
        return RoleLease::Free;
    }
    let Some(n) = dist.shard else {
        return RoleLease::Own;
    };
    match shard(n) {
        ShardSeen::Absent => RoleLease::Free,
        ShardSeen::Unreadable => RoleLease::Shard(n),
        ShardSeen::Record(r)
            if r.released || r.holder != dist.holder || r.incarnation != dist.incarnation =>
        {
            RoleLease::Free
        }
        ShardSeen::Record(_) => RoleLease::Shard(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dist(shard: Option<u32>) -> DistributorRecord {
        DistributorRecord {
            holder: "a".into(),
            incarnation: 1,
            beat: 1,
            released: false,
            shard,
        }
    }

    fn shard(holder: &str, incarnation: u64, released: bool) -> ShardRecord {
        ShardRecord {
            holder: holder.into(),
            incarnation,
            beat: 3,
            acked: 0,
            released,
            zone: None,
            capacity: None,
        }
    }

    #[test]
    fn a_bound_record_lives_through_its_shard_record() {
        let held = shard("a", 1, false);
        assert_eq!(
            role_lease(&dist(Some(2)), |_| ShardSeen::Record(&held)),
            RoleLease::Shard(2)
        );
        assert_eq!(
            role_lease(&dist(None), |_| ShardSeen::Absent),
            RoleLease::Own
        );
        assert_eq!(
            role_lease(&dist(Some(2)), |_| ShardSeen::Unreadable),
            RoleLease::Shard(2)
        );
        for other in [
            shard("a", 2, false),
            shard("b", 1, false),
            shard("a", 1, true),
        ] {
            assert_eq!(
                role_lease(&dist(Some(2)), |_| ShardSeen::Record(&other)),
                RoleLease::Free,
                "{other:?}"
            );
        }
        assert_eq!(
            role_lease(&dist(Some(2)), |_| ShardSeen::Absent),
            RoleLease::Free
        );
        let released = DistributorRecord {
            released: true,
            ..dist(None)
        };
        assert_eq!(
            role_lease(&released, |_| ShardSeen::Absent),
            RoleLease::Free
        );
    }
}
