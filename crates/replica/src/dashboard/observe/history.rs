//! The dashboard's picture of the recent past: for each shard, runs of time with the same
//! holder, lease state and cluster count (a *segment*), and runs with the same number of
//! clusters without an owner; the page draws one lane per shard from it, each holder in
//! its own colour, the gaps in ownership shaded.
//!
//! Fed once per observer step with the step's shards; keeps [`WINDOW`] of history and at
//! most [`MAX_SEGMENTS`] segments per lane (a flapping lease cannot grow it without
//! bound). Times are the observer's seconds since it started.

use std::collections::{BTreeMap, VecDeque};

use serde::Serialize;

use super::{Lease, ShardView};

/// How much history the picture spans, in seconds.
pub const WINDOW: f64 = 600.0;

/// The most segments one lane keeps (the oldest go first).
pub const MAX_SEGMENTS: usize = 600;

/// A run of time over which a shard (or the unowned count) did not change.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Segment {
    /// Start, seconds since the observer started.
    pub from_secs: f64,
    /// End (the last step that saw it).
    pub to_secs: f64,
    /// The holder (`None`: vacant, or released).
    pub holder: Option<String>,
    /// `live`, `unknown`, `not_renewed`, `expired`, `released` or `vacant`.
    pub state: &'static str,
    /// Clusters assigned to the shard (for the unowned lane: clusters without an owner).
    pub clusters: usize,
}

/// One shard's lane.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Lane {
    /// The shard.
    pub shard: u32,
    /// Oldest first.
    pub segments: Vec<Segment>,
}

/// What the page draws.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Picture {
    /// The span drawn: from the oldest segment kept…
    pub from_secs: f64,
    /// …to the last step.
    pub to_secs: f64,
    /// One lane per shard seen in the window, by shard number.
    pub lanes: Vec<Lane>,
    /// Clusters without an owner over time (state `unowned`, or `owned` when none).
    pub unowned: Vec<Segment>,
}

/// The history the picture is drawn from.
#[derive(Debug, Default)]
pub struct History {
    lanes: BTreeMap<u32, VecDeque<Segment>>,
    unowned: VecDeque<Segment>,
    last: Option<f64>,
}

/// A shard's state as the picture colours it.
fn state(s: &ShardView) -> &'static str {
    match (s.lease, &s.holder) {
        (Some(Lease::Released), _) => "released",
        (_, None) => "vacant",
        (Some(Lease::Live), _) => "live",
        (Some(Lease::NotRenewed), _) => "not_renewed",
        (Some(Lease::Expired), _) => "expired",
        (Some(Lease::Unknown) | None, _) => "unknown",
    }
}

/// Extends the lane's last segment to `at` when it shows the same thing, else starts a new
/// one where the last ended (or at `at` for a lane that was not seen at the last step).
fn extend(lane: &mut VecDeque<Segment>, last: Option<f64>, at: f64, next: Segment) {
    match lane.back_mut() {
        Some(s)
            if s.holder == next.holder && s.state == next.state && s.clusters == next.clusters =>
        {
            s.to_secs = at;
        }
        Some(s) if Some(s.to_secs) == last => {
            let from = s.to_secs;
            lane.push_back(Segment {
                from_secs: from,
                ..next
            });
        }
        _ => lane.push_back(next),
    }
    while lane.len() > MAX_SEGMENTS {
        lane.pop_front();
    }
}

/// Drops what ended before `start` and cuts what began before it.
fn trim(lane: &mut VecDeque<Segment>, start: f64) {
    while lane.front().is_some_and(|s| s.to_secs < start) {
        lane.pop_front();
    }
    if let Some(s) = lane.front_mut() {
        s.from_secs = s.from_secs.max(start);
    }
}

impl History {
    /// One observer step at `at` seconds: its shards and how many clusters had no owner.
    pub fn record(&mut self, at: f64, shards: &[ShardView], unowned: usize) {
        for s in shards {
            let next = Segment {
                from_secs: at,
                to_secs: at,
                holder: s.holder.clone(),
                state: state(s),
                clusters: s.clusters,
            };
            extend(self.lanes.entry(s.shard).or_default(), self.last, at, next);
        }
        let next = Segment {
            from_secs: at,
            to_secs: at,
            holder: None,
            state: if unowned > 0 { "unowned" } else { "owned" },
            clusters: unowned,
        };
        extend(&mut self.unowned, self.last, at, next);
        self.last = Some(at);
        let start = at - WINDOW;
        for lane in self.lanes.values_mut() {
            trim(lane, start);
        }
        self.lanes.retain(|_, lane| !lane.is_empty());
        trim(&mut self.unowned, start);
    }

    /// The picture of the window.
    pub fn picture(&self) -> Picture {
        let from = self
            .lanes
            .values()
            .filter_map(|l| l.front())
            .chain(self.unowned.front())
            .map(|s| s.from_secs)
            .fold(f64::INFINITY, f64::min);
        Picture {
            from_secs: if from.is_finite() { from } else { 0.0 },
            to_secs: self.last.unwrap_or(0.0),
            lanes: self
                .lanes
                .iter()
                .map(|(&shard, l)| Lane {
                    shard,
                    segments: l.iter().cloned().collect(),
                })
                .collect(),
            unowned: self.unowned.iter().cloned().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(n: u32, holder: Option<&str>, lease: Option<Lease>, clusters: usize) -> ShardView {
        ShardView {
            shard: n,
            holder: holder.map(str::to_owned),
            zone: None,
            lease,
            lease_age_secs: 0.0,
            clusters,
            apps: 0,
            load: clusters,
            cost: None,
        }
    }

    fn summary(l: &Lane) -> Vec<(f64, f64, Option<&str>, &str, usize)> {
        l.segments
            .iter()
            .map(|s| {
                (
                    s.from_secs,
                    s.to_secs,
                    s.holder.as_deref(),
                    s.state,
                    s.clusters,
                )
            })
            .collect()
    }

    #[test]
    fn steady_steps_make_one_segment_and_a_failover_makes_a_shaded_gap_then_a_new_holder() {
        let mut h = History::default();
        for t in 0..5 {
            h.record(
                f64::from(t),
                &[shard(0, Some("r0"), Some(Lease::Live), 3)],
                0,
            );
        }
        h.record(5.0, &[shard(0, Some("r0"), Some(Lease::NotRenewed), 3)], 3);
        h.record(6.0, &[shard(0, Some("r0"), Some(Lease::Expired), 3)], 3);
        h.record(7.0, &[shard(0, Some("r1"), Some(Lease::Live), 3)], 0);
        let p = h.picture();
        assert_eq!(
            summary(&p.lanes[0]),
            vec![
                (0.0, 4.0, Some("r0"), "live", 3),
                (4.0, 5.0, Some("r0"), "not_renewed", 3),
                (5.0, 6.0, Some("r0"), "expired", 3),
                (6.0, 7.0, Some("r1"), "live", 3),
            ],
            "each change starts where the last ended, so the lane has no holes"
        );
        let unowned: Vec<(f64, f64, &str, usize)> = p
            .unowned
            .iter()
            .map(|s| (s.from_secs, s.to_secs, s.state, s.clusters))
            .collect();
        assert_eq!(
            unowned,
            vec![
                (0.0, 4.0, "owned", 0),
                (4.0, 6.0, "unowned", 3),
                (6.0, 7.0, "owned", 0)
            ]
        );
        assert_eq!((p.from_secs, p.to_secs), (0.0, 7.0));
    }

    #[test]
    fn a_vacant_or_released_shard_is_its_own_state_and_a_lane_seen_again_starts_anew() {
        let mut h = History::default();
        h.record(
            0.0,
            &[
                shard(0, None, None, 2),
                shard(1, Some("a"), Some(Lease::Live), 1),
            ],
            2,
        );
        h.record(1.0, &[shard(1, Some("a"), Some(Lease::Released), 1)], 0);
        h.record(
            2.0,
            &[
                shard(0, Some("b"), Some(Lease::Unknown), 2),
                shard(1, Some("a"), Some(Lease::Released), 1),
            ],
            0,
        );
        let p = h.picture();
        assert_eq!(
            summary(&p.lanes[0]),
            vec![
                (0.0, 0.0, None, "vacant", 2),
                (2.0, 2.0, Some("b"), "unknown", 2)
            ]
        );
        assert_eq!(
            summary(&p.lanes[1]),
            vec![
                (0.0, 0.0, Some("a"), "live", 1),
                (0.0, 2.0, Some("a"), "released", 1)
            ]
        );
    }

    #[test]
    fn history_older_than_the_window_is_dropped_and_a_flapping_lane_stays_bounded() {
        let mut h = History::default();
        for step in 0u32..4 * 600 {
            // A change at every step: 1,200 in the window, more than a lane keeps.
            let t = f64::from(step) / 2.0;
            let lease = if step.is_multiple_of(2) {
                Lease::Live
            } else {
                Lease::NotRenewed
            };
            h.record(t, &[shard(0, Some("r0"), Some(lease), 1)], 0);
        }
        let p = h.picture();
        let lane = &p.lanes[0].segments;
        assert_eq!(lane.len(), MAX_SEGMENTS);
        assert!(
            lane[0].from_secs >= p.to_secs - WINDOW,
            "{} {}",
            lane[0].from_secs,
            p.to_secs
        );
        assert!(p.unowned[0].from_secs >= p.to_secs - WINDOW);
    }
}
