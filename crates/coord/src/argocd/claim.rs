//! Which shard this replica holds: Argo CD's `getOrUpdateShardNumberForController` without
//! the defects that lose or duplicate ownership (argo-compat §5.4–§5.5, §8; the codes used
//! here are explained in `docs/glossary.md`).
//!
//! [`get_or_update_shard`] gives Argo CD's answer wherever that answer is safe (every
//! argo-compat §6.5 vector but one, see `claim/tests.rs`) and deliberately differs
//! where it is not:
//!
//! - **W11** scale-down keeps every surviving owner; only entries `>= replicas` go.
//! - **W12** a pinned shard (`ARGOCD_CONTROLLER_SHARD`) is taken only when free or stale;
//!   otherwise the replica waits ([`ClaimStatus::WaitingForPinned`]).
//! - **W13** staleness is *how long this replica has seen the entry unchanged*, on its own
//!   monotonic clock, supplied by the caller (see [`super::ChangeObserver`]); the written
//!   `HeartbeatTime` is never compared with a clock. A heartbeat always changes the entry, so
//!   a live holder is never mistaken for a dead one, even with a stuck or stepped clock.
//! - **W15** the answer says whether the replica holds a shard, and why not; readiness is
//!   the caller's decision.
//! - **W18** a pin `< 0` or `>= replicas` is refused with a warning, never used as an index.
//! - **W20** the list is repaired first ([`super::repair`]): no duplicate, missing or
//!   out-of-range shard is ever handed out.
//! - **W29** the identity is whatever the caller says, not necessarily the hostname.
//!
//! The function is pure: no I/O, no clock. The runner reads the ConfigMap, calls this, and
//! writes [`Outcome::write`] back with compare-and-swap.

use std::fmt;
use std::time::Duration;

use super::mapping::ShardEntry;
use super::repair::{repair, shard_of};
use super::time::WallTime;

/// The most replicas the mapping is kept for. 1024 entries with 253-character identities
/// stay far below a ConfigMap's 1 MiB; Argo CD deployments run a handful of replicas.
pub const MAX_REPLICAS: u32 = 1024;

/// The longest identity accepted: a Kubernetes object name (a pod's hostname is ≤ 63).
pub const MAX_IDENTITY_LEN: usize = 253;

/// What a replica asks for, and what it knows right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRequest<'a> {
    /// This replica's identity, written as `ControllerName`: unique among live replicas
    /// and, ideally, stable across its restarts (W29). Must not be empty (that means free).
    pub identity: &'a str,
    /// The current number of shards (the Deployment's `spec.replicas`, re-read by the
    /// runner: W10).
    pub replicas: u32,
    /// The pinned shard (`ARGOCD_CONTROLLER_SHARD`), `None` when unpinned (Argo's `-1`).
    pub pin: Option<i64>,
    /// The wall-clock time to *write* as `HeartbeatTime`, for Argo CD's readers. Never
    /// compared with anything.
    pub now: WallTime,
    /// How long an entry must have been seen unchanged before it may be taken over: Argo
    /// CD's `HeartbeatTimeout`, 3 × `ARGOCD_CONTROLLER_HEARTBEAT_TIME`.
    pub stale_after: Duration,
}

/// What the replica holds after the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimStatus {
    /// It holds this shard: its entry carries its identity and a fresh heartbeat.
    Holds(u32),
    /// It is pinned to `shard`, which a live replica holds: it holds nothing and asks again
    /// on its next heartbeat (upstream takes the shard over unconditionally, W12).
    WaitingForPinned {
        /// The pinned shard.
        shard: u32,
        /// Who holds it.
        holder: String,
    },
    /// Unpinned, and every shard is held by a live replica: it is a spare.
    Spare,
    /// Its pin is outside `0..replicas` and it held no entry: it holds nothing (upstream
    /// runs as that number, which owns nothing, or panics, W18).
    PinOutOfRange {
        /// The pin.
        pin: i64,
        /// The shard count it is outside of.
        replicas: u32,
    },
}

impl ClaimStatus {
    /// The shard held, if any.
    pub fn shard(&self) -> Option<u32> {
        match self {
            ClaimStatus::Holds(shard) => Some(*shard),
            _ => None,
        }
    }
}

/// The result of one claim round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// What the replica holds now, once `write` (if any) is stored.
    pub status: ClaimStatus,
    /// The mapping to store, at the version that was read (or created, when there was no
    /// ConfigMap); `None` when it is unchanged and nothing needs writing. Heartbeats in it
    /// are whole seconds, so it reads back exactly as written.
    pub write: Option<Vec<ShardEntry>>,
    /// What was wrong with the mapping or the request, and notable takeovers.
    pub warnings: Vec<Warning>,
}

impl Outcome {
    /// The shard held, if any.
    pub fn shard(&self) -> Option<u32> {
        self.status.shard()
    }
}

/// A request the claim refuses: nothing is read or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimError {
    /// The identity is empty, which the mapping uses to mean "free".
    #[error("the controller identity is empty; an empty ControllerName means a free shard")]
    EmptyIdentity,
    /// The identity is longer than [`MAX_IDENTITY_LEN`] bytes.
    #[error("the controller identity is {len} bytes long; at most {max} are accepted")]
    IdentityTooLong {
        /// Its length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Zero replicas: there is no shard to hold (upstream reports not ready).
    #[error("the controller has 0 replicas: there is no shard to claim")]
    NoReplicas,
    /// More replicas than [`MAX_REPLICAS`].
    #[error("{replicas} replicas is more than the {max} the shard mapping is kept for")]
    TooManyReplicas {
        /// The replica count asked for.
        replicas: u32,
        /// The limit.
        max: u32,
    },
    /// `now` is Go's zero time or outside the years 0–9999: it cannot be written as a
    /// heartbeat that anyone reads back.
    #[error("the wall-clock time {0} cannot be written as a heartbeat")]
    UnwritableTime(WallTime),
}

/// Something wrong with the mapping or the request that the claim worked around, or a
/// takeover worth a log line. The claim never fails because of these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Warning {
    /// An entry's number is negative or not below the list's length, which neither Argo
    /// CD nor fleetshard writes (W20). Kept when still in `0..replicas`, else dropped.
    ShardNumberOutOfRange {
        /// The number.
        shard: i64,
        /// Its `ControllerName`.
        controller: String,
        /// The list's length.
        entries: usize,
        /// Whether the entry was kept.
        kept: bool,
    },
    /// Two entries share a number (W20); one was dropped.
    DuplicateShardNumber {
        /// The number.
        shard: u32,
        /// The `ControllerName` of the entry kept.
        kept: String,
        /// The `ControllerName` of the entry dropped.
        dropped: String,
    },
    /// A number below the list's length had no entry (W20); a free one was added.
    MissingShardNumber {
        /// The number.
        shard: u32,
    },
    /// One identity held several entries (W20); all but the first were freed.
    DuplicateController {
        /// The identity.
        controller: String,
        /// The shard it keeps.
        kept: u32,
        /// A shard freed.
        released: u32,
    },
    /// A heartbeat outside the years 0–9999, which would make the written map unreadable;
    /// it was clamped.
    UnreadableHeartbeat {
        /// The entry's shard.
        shard: u32,
        /// Its `ControllerName`.
        controller: String,
        /// The time found.
        time: WallTime,
        /// The time written instead.
        replaced_by: WallTime,
    },
    /// The pin is outside `0..replicas` (W18); it was ignored.
    PinOutOfRange {
        /// The pin.
        pin: i64,
        /// The shard count.
        replicas: u32,
    },
    /// This replica took over a shard whose holder had not changed its entry for longer
    /// than the stale threshold.
    StaleTakeover {
        /// The shard.
        shard: u32,
        /// The previous holder.
        previous: String,
        /// How long its entry had been seen unchanged.
        unchanged_for: Duration,
    },
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::ShardNumberOutOfRange {
                shard,
                controller,
                entries,
                kept,
            } => write!(
                f,
                "shard mapping entry ShardNumber {shard} (ControllerName {controller:?}) is \
                 outside 0..{entries}; {}",
                if *kept { "kept" } else { "dropped" }
            ),
            Warning::DuplicateShardNumber {
                shard,
                kept,
                dropped,
            } => write!(
                f,
                "shard mapping has ShardNumber {shard} twice; kept ControllerName {kept:?}, \
                 dropped {dropped:?}"
            ),
            Warning::MissingShardNumber { shard } => write!(
                f,
                "shard mapping has no entry for ShardNumber {shard}; added a free one"
            ),
            Warning::DuplicateController {
                controller,
                kept,
                released,
            } => write!(
                f,
                "ControllerName {controller:?} holds several shards; kept {kept}, freed \
                 {released}"
            ),
            Warning::UnreadableHeartbeat {
                shard,
                controller,
                time,
                replaced_by,
            } => write!(
                f,
                "shard {shard} (ControllerName {controller:?}) has HeartbeatTime {time}, \
                 which cannot be read back; writing {replaced_by}"
            ),
            Warning::PinOutOfRange { pin, replicas } => write!(
                f,
                "ARGOCD_CONTROLLER_SHARD={pin} is outside 0..{replicas}; ignored"
            ),
            Warning::StaleTakeover {
                shard,
                previous,
                unchanged_for,
            } => write!(
                f,
                "took over shard {shard} from {previous:?}, unchanged for {}s",
                unchanged_for.as_secs()
            ),
        }
    }
}

impl ClaimRequest<'_> {
    fn validate(&self) -> Result<(), ClaimError> {
        if self.identity.is_empty() {
            return Err(ClaimError::EmptyIdentity);
        }
        if self.identity.len() > MAX_IDENTITY_LEN {
            return Err(ClaimError::IdentityTooLong {
                len: self.identity.len(),
                max: MAX_IDENTITY_LEN,
            });
        }
        if self.now.is_zero() || !self.now.is_readable() {
            return Err(ClaimError::UnwritableTime(self.now));
        }
        Ok(())
    }
}

/// One claim round for this replica over the mapping as read (`entries`; empty when the
/// ConfigMap does not exist yet, in which case [`Outcome::write`] is what to create).
///
/// `unchanged_for(entry)` answers how long this replica has seen exactly that entry
/// (number, controller, heartbeat) without change, on its own monotonic clock (zero for an
/// entry it has not seen before; [`super::ChangeObserver`] keeps this). An entry is free
/// when its `ControllerName` is empty, or stale when `unchanged_for` exceeds
/// `stale_after`; only free or stale entries are ever taken.
///
/// Then, on the repaired list ([`repair`]):
/// - **unpinned**: refresh the entry this identity holds; else take the first free or
///   stale entry in list order (upstream's order); else be a spare;
/// - **pinned to `p` in range**: refresh `p` if held; else take `p` if free or stale; else
///   wait. A pinned replica holds only `p`, so anything else it held is freed;
/// - **pinned out of range**: warn; refresh an entry already held, else hold nothing.
///
/// A refreshed heartbeat is `now` in whole seconds, or one second off the previous one if
/// that is the same second, so that every heartbeat changes the entry.
pub fn get_or_update_shard(
    entries: &[ShardEntry],
    request: &ClaimRequest<'_>,
    unchanged_for: impl Fn(&ShardEntry) -> Duration,
) -> Result<Outcome, ClaimError> {
    request.validate()?;
    let (list, warnings) = repair(entries, request.replicas)?;
    let mut round = Round {
        list,
        warnings,
        request,
        unchanged_for,
    };
    let own = round
        .list
        .iter()
        .position(|e| e.controller_name == request.identity);
    let replicas = request.replicas;

    let status = match request.pin {
        None => match own {
            Some(at) => round.refresh(at),
            None => match round.first_claimable() {
                Some(at) => round.take(at),
                None => ClaimStatus::Spare,
            },
        },
        Some(pin) if u32::try_from(pin).is_ok_and(|p| p < replicas) => {
            let target = round
                .list
                .iter()
                .position(|e| e.shard_number == pin)
                .unwrap_or(0);
            if own == Some(target) {
                round.refresh(target)
            } else {
                if let Some(at) = own {
                    round.release(at);
                }
                if round.claimable(target) {
                    round.take(target)
                } else {
                    let entry = &round.list[target];
                    ClaimStatus::WaitingForPinned {
                        shard: shard_of(entry),
                        holder: entry.controller_name.clone(),
                    }
                }
            }
        }
        Some(pin) => {
            round
                .warnings
                .push(Warning::PinOutOfRange { pin, replicas });
            match own {
                Some(at) => round.refresh(at),
                None => ClaimStatus::PinOutOfRange { pin, replicas },
            }
        }
    };
    let Round { list, warnings, .. } = round;
    let write = (list.as_slice() != entries).then_some(list);
    Ok(Outcome {
        status,
        write,
        warnings,
    })
}

/// The working state of one [`get_or_update_shard`] call.
struct Round<'r, 'a, F> {
    list: Vec<ShardEntry>,
    warnings: Vec<Warning>,
    request: &'r ClaimRequest<'a>,
    unchanged_for: F,
}

impl<F: Fn(&ShardEntry) -> Duration> Round<'_, '_, F> {
    fn claimable(&self, at: usize) -> bool {
        let entry = &self.list[at];
        entry.is_free() || (self.unchanged_for)(entry) > self.request.stale_after
    }

    fn first_claimable(&self) -> Option<usize> {
        (0..self.list.len()).find(|&at| self.claimable(at))
    }

    fn refresh(&mut self, at: usize) -> ClaimStatus {
        let entry = &mut self.list[at];
        entry.heartbeat_time = next_heartbeat(entry.heartbeat_time, self.request.now);
        ClaimStatus::Holds(shard_of(entry))
    }

    fn take(&mut self, at: usize) -> ClaimStatus {
        let unchanged_for = (self.unchanged_for)(&self.list[at]);
        let entry = &mut self.list[at];
        if !entry.is_free() {
            self.warnings.push(Warning::StaleTakeover {
                shard: shard_of(entry),
                previous: entry.controller_name.clone(),
                unchanged_for,
            });
        }
        entry.controller_name = self.request.identity.to_owned();
        entry.heartbeat_time = self.request.now.truncated();
        ClaimStatus::Holds(shard_of(entry))
    }

    fn release(&mut self, at: usize) {
        let entry = &mut self.list[at];
        *entry = ShardEntry::free(entry.shard_number);
    }
}

/// The heartbeat to write over `previous`: `now` in whole seconds, unless that is the second
/// already written, in which case the next (or, at the end of the readable years, the
/// previous) second, so that observers always see the entry change.
fn next_heartbeat(previous: WallTime, now: WallTime) -> WallTime {
    let now = now.truncated();
    if now != previous.truncated() {
        return now;
    }
    [1, -1]
        .into_iter()
        .filter_map(|step| now.checked_add_seconds(step))
        .find(|t| t.is_readable() && !t.is_zero())
        .unwrap_or(now)
}

#[cfg(test)]
mod tests;
