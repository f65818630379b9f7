//! Replaying audit logs. Every `fleetshard run` process appends one JSON line per
//! ownership change: `{"ts_ms","identity","event":"acquire"|"release","cluster","shard",
//! "generation"}`, plus `"reason":"lapsed"` on a release caused by the lease lapsing (its
//! `ts_ms` is then when the lease lapsed, which is when ownership ended, although a paused
//! process writes the line only when it resumes).
//!
//! Each process (each *incarnation*: a restarted replica is a new source) gives intervals
//! `[acquire, release)` per cluster. A process killed with SIGKILL logs no release: its open
//! intervals end when the harness knew it dead (after `waitpid`), the latest instant it
//! could have acted. Timestamps are wall-clock milliseconds of one machine, so intervals of
//! different processes compare; at one millisecond a release and an acquire do not overlap
//! (half-open intervals), which is the finest the logs can order.
//!
//! Checks: (a) no overlap — no two sources hold one cluster at one instant; (b) coverage —
//! after a failure, when each of the victim's clusters was acquired again ([`Takeover`]),
//! and every stretch a cluster had no owner, with how it began ([`History::gaps`]): a
//! release on purpose (a handover), a lapsed lease or a kill. A handover that ended a lease
//! duration or more after its release is one that may have waited for the leaver's lease
//! ([`History::handovers_that_waited`]): a successor taking over through expiry sees the
//! leaver's record unchanged for a lease duration, and the leaver's last change to it (the
//! release) comes after its stops.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

/// Who holds each cluster (by identity; more than one is an overlap).
pub type Owners = BTreeMap<String, Vec<String>>;

/// One audit line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Wall-clock ms (for a lapsed release: when the lease lapsed).
    pub ts: u64,
    /// The replica's identity.
    pub identity: String,
    /// Acquire (start) or release (stop).
    pub acquire: bool,
    /// The cluster id.
    pub cluster: String,
    /// The shard held (or last held).
    pub shard: Option<u64>,
    /// The generation applied.
    pub generation: u64,
    /// A release caused by the lease lapsing (`"reason":"lapsed"`).
    pub lapsed: bool,
}

/// Parses one line; errors name the field.
pub fn parse_line(line: &str) -> Result<Event, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON ({e}): {line}"))?;
    let field = |k: &str| v.get(k).ok_or_else(|| format!("no {k:?} in {line}"));
    let ts = field("ts_ms")?.as_u64().ok_or(format!("ts_ms: {line}"))?;
    let identity = field("identity")?
        .as_str()
        .ok_or(format!("identity: {line}"))?;
    let acquire = match field("event")?.as_str() {
        Some("acquire") => true,
        Some("release") => false,
        _ => return Err(format!("event is not acquire|release: {line}")),
    };
    let cluster = field("cluster")?
        .as_str()
        .ok_or(format!("cluster: {line}"))?;
    let shard = match field("shard")? {
        Value::Null => None,
        s => Some(s.as_u64().ok_or(format!("shard: {line}"))?),
    };
    let generation = field("generation")?
        .as_u64()
        .ok_or(format!("generation: {line}"))?;
    let lapsed = match v.get("reason") {
        None | Some(Value::Null) => false,
        Some(r) if r == "lapsed" => true,
        Some(r) => return Err(format!("unknown reason {r}: {line}")),
    };
    if lapsed && acquire {
        return Err(format!("an acquire with reason lapsed: {line}"));
    }
    Ok(Event {
        ts,
        identity: identity.to_owned(),
        acquire,
        cluster: cluster.to_owned(),
        shard,
        generation,
        lapsed,
    })
}

/// Every complete line of one log (a line being written right now, without its newline,
/// is left for the next read). A missing file is an empty log.
pub fn read_log(path: &Path) -> Result<Vec<Event>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    text.split_inclusive('\n')
        .filter(|l| l.ends_with('\n'))
        .enumerate()
        .map(|(i, l)| {
            parse_line(l.trim_end()).map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))
        })
        .collect()
}

/// One process's log and what the harness knows about its end.
#[derive(Debug, Clone)]
pub struct Source {
    /// `identity#incarnation`, for messages.
    pub name: String,
    /// The replica identity.
    pub identity: String,
    /// Its events, in file order.
    pub events: Vec<Event>,
    /// Killed (SIGKILL): known dead at this wall-clock ms; open intervals end there.
    pub killed_at: Option<u64>,
    /// Exited on its own (SIGTERM): it must have released everything.
    pub exited: bool,
}

/// One source's ownership of one cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interval {
    /// The cluster.
    pub cluster: String,
    /// Index into the sources.
    pub source: usize,
    /// Acquired at.
    pub start: u64,
    /// Released (or the process known dead) at; None: still held.
    pub end: Option<u64>,
    /// Ended by a lapsed lease (dated at the lapse).
    pub lapsed: bool,
    /// Ended because its process was killed (it logged no release).
    pub killed: bool,
}

/// How a stretch without an owner began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GapCause {
    /// The last owner released the cluster on purpose: a handover.
    Released,
    /// The last owner's lease lapsed.
    Lapsed,
    /// The last owner was killed.
    Killed,
    /// Nobody owned the cluster within the window before it.
    NeverOwned,
}

/// A stretch, within a window, during which a cluster had no owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gap {
    /// The cluster.
    pub cluster: String,
    /// When it began (the last owner's end, or the window's start).
    pub start: u64,
    /// When it ended (an acquire), or the window's end while still open.
    pub end: u64,
    /// Still unowned at the window's end.
    pub open: bool,
    /// How it began.
    pub cause: GapCause,
    /// The source whose ownership ended when it began.
    pub last_owner: Option<usize>,
}

impl Gap {
    /// How long it lasted, in ms (so far, while open).
    pub fn len(&self) -> u64 {
        self.end - self.start
    }
}

/// Two sources holding one cluster at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlap {
    /// The cluster.
    pub cluster: String,
    /// The first holder and its interval.
    pub a: (String, u64, Option<u64>),
    /// The second holder and its interval.
    pub b: (String, u64, Option<u64>),
}

/// Every source's intervals.
#[derive(Debug, Clone)]
pub struct History {
    /// The sources, in the order given.
    pub sources: Vec<Source>,
    /// Every interval, by cluster then start.
    pub intervals: Vec<Interval>,
}

impl History {
    /// Builds the intervals; errors on a log that contradicts itself (a release of a
    /// cluster not held, an acquire of one already held, a release dated before its
    /// acquire, an exited process still holding clusters).
    pub fn build(sources: Vec<Source>) -> Result<History, String> {
        let mut intervals = Vec::new();
        for (i, s) in sources.iter().enumerate() {
            let mut open: BTreeMap<&str, u64> = BTreeMap::new();
            for e in &s.events {
                if e.identity != s.identity {
                    return Err(format!("{}: a line of identity {}", s.name, e.identity));
                }
                if e.acquire {
                    if open.insert(&e.cluster, e.ts).is_some() {
                        return Err(format!("{}: acquired {} twice", s.name, e.cluster));
                    }
                } else {
                    let start = open.remove(e.cluster.as_str()).ok_or_else(|| {
                        format!("{}: released {} it did not hold", s.name, e.cluster)
                    })?;
                    if e.ts < start {
                        return Err(format!(
                            "{}: {} released at {} before its acquire at {start}",
                            s.name, e.cluster, e.ts
                        ));
                    }
                    intervals.push(Interval {
                        cluster: e.cluster.clone(),
                        source: i,
                        start,
                        end: Some(e.ts),
                        lapsed: e.lapsed,
                        killed: false,
                    });
                }
            }
            if s.exited && s.killed_at.is_none() && !open.is_empty() {
                return Err(format!("{} exited still holding {:?}", s.name, open.keys()));
            }
            for (c, start) in open {
                intervals.push(Interval {
                    cluster: c.to_owned(),
                    source: i,
                    start,
                    end: s.killed_at.map(|k| k.max(start)),
                    lapsed: false,
                    killed: s.killed_at.is_some(),
                });
            }
        }
        intervals
            .sort_by(|a, b| (&a.cluster, a.start, a.source).cmp(&(&b.cluster, b.start, b.source)));
        Ok(History { sources, intervals })
    }

    /// (a) Every pair of sources that held one cluster at one instant.
    pub fn overlaps(&self) -> Vec<Overlap> {
        let mut out = Vec::new();
        let by_cluster = self.by_cluster();
        for list in by_cluster.values() {
            for (i, a) in list.iter().enumerate() {
                for b in &list[i + 1..] {
                    let a_end = a.end.unwrap_or(u64::MAX);
                    let b_end = b.end.unwrap_or(u64::MAX);
                    if a.source != b.source && a.start < b_end && b.start < a_end {
                        out.push(Overlap {
                            cluster: a.cluster.clone(),
                            a: (self.sources[a.source].name.clone(), a.start, a.end),
                            b: (self.sources[b.source].name.clone(), b.start, b.end),
                        });
                    }
                }
            }
        }
        out
    }

    /// Overlaps, as a panic message naming them (or Ok).
    pub fn check_no_overlap(&self) -> Result<(), String> {
        let o = self.overlaps();
        if o.is_empty() {
            return Ok(());
        }
        Err(format!(
            "{} overlapping ownerships, e.g. {:?}",
            o.len(),
            &o[..o.len().min(5)]
        ))
    }

    /// Every event of every source about one cluster, in time order, one per line (for
    /// a failure message: who took it, gave it up and took it again, at which generation).
    pub fn cluster_events(&self, cluster: &str) -> String {
        let mut events: Vec<(&Event, &str)> = self
            .sources
            .iter()
            .flat_map(|s| s.events.iter().map(move |e| (e, s.name.as_str())))
            .filter(|(e, _)| e.cluster == cluster)
            .collect();
        events.sort_by_key(|(e, _)| e.ts);
        events
            .iter()
            .map(|(e, who)| {
                format!(
                    "{} {who} {} shard {:?} generation {}{}\n",
                    e.ts,
                    if e.acquire { "acquire" } else { "release" },
                    e.shard,
                    e.generation,
                    if e.lapsed { " (lapsed)" } else { "" }
                )
            })
            .collect()
    }

    fn by_cluster(&self) -> BTreeMap<&str, Vec<&Interval>> {
        let mut m: BTreeMap<&str, Vec<&Interval>> = BTreeMap::new();
        for iv in &self.intervals {
            m.entry(&iv.cluster).or_default().push(iv);
        }
        m
    }

    /// Who holds each cluster now (open intervals), by identity.
    pub fn current_owners(&self) -> Owners {
        let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for iv in self.intervals.iter().filter(|iv| iv.end.is_none()) {
            m.entry(iv.cluster.clone())
                .or_default()
                .push(self.sources[iv.source].identity.clone());
        }
        m
    }

    /// (b) After `victim` failed at `at`: when each cluster it held at `at` was first
    /// acquired by another source (at or after `at`).
    pub fn takeover(&self, victim: usize, at: u64) -> Takeover {
        let held: BTreeSet<&str> = self
            .intervals
            .iter()
            .filter(|iv| iv.source == victim && iv.start <= at && at < iv.end.unwrap_or(u64::MAX))
            .map(|iv| iv.cluster.as_str())
            .collect();
        let clusters = held
            .into_iter()
            .map(|c| {
                let first = self
                    .intervals
                    .iter()
                    .filter(|iv| iv.cluster == c && iv.source != victim && iv.start >= at)
                    .map(|iv| iv.start - at)
                    .min();
                (c.to_owned(), first)
            })
            .collect();
        Takeover { clusters }
    }

    /// (b) Every stretch, within `[from, to)`, that one of `clusters` had no owner, by
    /// cluster then time, with how it began.
    pub fn gaps(&self, clusters: &[String], from: u64, to: u64) -> Vec<Gap> {
        let by_cluster = self.by_cluster();
        let mut out = Vec::new();
        for c in clusters {
            let mut spans: Vec<(u64, u64, &Interval)> = by_cluster
                .get(c.as_str())
                .into_iter()
                .flatten()
                .map(|iv| (iv.start.max(from), iv.end.unwrap_or(u64::MAX).min(to), *iv))
                .filter(|(s, e, _)| s < e)
                .collect();
            spans.sort_unstable_by_key(|&(s, e, _)| (s, e));
            // Covered until, and by which interval's end.
            let mut covered: (u64, Option<&Interval>) = (from, None);
            let gap = |start: u64, end: u64, open: bool, by: Option<&Interval>| Gap {
                cluster: c.clone(),
                start,
                end,
                open,
                cause: match by {
                    None => GapCause::NeverOwned,
                    Some(iv) if iv.killed => GapCause::Killed,
                    Some(iv) if iv.lapsed => GapCause::Lapsed,
                    Some(_) => GapCause::Released,
                },
                last_owner: by.map(|iv| iv.source),
            };
            for (s, e, iv) in spans {
                if s > covered.0 {
                    out.push(gap(covered.0, s, false, covered.1));
                }
                if e > covered.0 {
                    covered = (e, Some(iv));
                }
            }
            if to > covered.0 {
                out.push(gap(covered.0, to, true, covered.1));
            }
        }
        out
    }

    /// (b) The longest stretch, within `[from, to)`, that any of `clusters` had no owner,
    /// with the cluster and where it began.
    pub fn longest_gap(&self, clusters: &[String], from: u64, to: u64) -> (u64, String, u64) {
        self.gaps(clusters, from, to)
            .into_iter()
            .fold((0, String::new(), from), |worst, g| {
                if g.len() > worst.0 {
                    (g.len(), g.cluster, g.start)
                } else {
                    worst
                }
            })
    }

    /// (b) The handovers within `[from, to)` that may have waited for a lease: stretches
    /// that began with a release on purpose and lasted `lease_ms` or more (so far, when
    /// still open). A successor that takes over only once the leaver's lease has run out
    /// sees the leaver's record unchanged for at least `lease_ms` counted from the record's
    /// last change, which is the leaver's release, written after its stops; a handover
    /// through the release is not slowed by any lease.
    pub fn handovers_that_waited(
        &self,
        clusters: &[String],
        from: u64,
        to: u64,
        lease_ms: u64,
    ) -> Vec<Gap> {
        self.gaps(clusters, from, to)
            .into_iter()
            .filter(|g| g.cause == GapCause::Released && g.len() >= lease_ms)
            .collect()
    }
}

/// When a failed replica's clusters were acquired again, each in ms after the failure
/// (None: not yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Takeover {
    /// The victim's clusters at the failure, and when each was taken over.
    pub clusters: Vec<(String, Option<u64>)>,
}

impl Takeover {
    /// The time until the last of them was taken over; None while any is not, or when the
    /// victim held nothing.
    pub fn complete(&self) -> Option<u64> {
        if self.clusters.is_empty() {
            return None;
        }
        self.clusters
            .iter()
            .map(|(_, t)| *t)
            .collect::<Option<Vec<_>>>()?
            .into_iter()
            .max()
    }

    /// The clusters not taken over yet.
    pub fn pending(&self) -> Vec<&str> {
        self.clusters
            .iter()
            .filter(|(_, t)| t.is_none())
            .map(|(c, _)| c.as_str())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ts: u64, id: &str, acquire: bool, c: &str) -> Event {
        Event {
            ts,
            identity: id.into(),
            acquire,
            cluster: c.into(),
            shard: Some(0),
            generation: 1,
            lapsed: false,
        }
    }

    fn src(id: &str, events: Vec<Event>, killed_at: Option<u64>) -> Source {
        Source {
            name: id.into(),
            identity: id.into(),
            events,
            killed_at,
            exited: false,
        }
    }

    #[test]
    fn handover_touching_at_one_millisecond_is_not_an_overlap_but_one_earlier_is() {
        let h = History::build(vec![
            src(
                "a",
                vec![ev(10, "a", true, "c"), ev(20, "a", false, "c")],
                None,
            ),
            src("b", vec![ev(20, "b", true, "c")], None),
        ])
        .unwrap();
        assert!(h.overlaps().is_empty());
        let h = History::build(vec![
            src(
                "a",
                vec![ev(10, "a", true, "c"), ev(20, "a", false, "c")],
                None,
            ),
            src("b", vec![ev(19, "b", true, "c")], None),
        ])
        .unwrap();
        assert_eq!(h.overlaps().len(), 1);
    }

    #[test]
    fn a_killed_holder_owns_until_known_dead() {
        let h = History::build(vec![
            src("a", vec![ev(10, "a", true, "c")], Some(100)),
            src("b", vec![ev(99, "b", true, "c")], None),
        ])
        .unwrap();
        assert_eq!(h.overlaps().len(), 1);
        let h = History::build(vec![
            src("a", vec![ev(10, "a", true, "c")], Some(100)),
            src("b", vec![ev(4100, "b", true, "c")], None),
        ])
        .unwrap();
        assert!(h.overlaps().is_empty());
        assert_eq!(h.takeover(0, 90).complete(), Some(4010));
        assert_eq!(
            h.longest_gap(&["c".into()], 50, 5000),
            (4000, "c".into(), 100)
        );
    }

    #[test]
    fn gaps_say_how_they_began_and_a_handover_waited_when_a_lease_passed_after_its_release() {
        let mut lapse = ev(30, "b", false, "c");
        lapse.lapsed = true;
        let h = History::build(vec![
            src(
                "a",
                vec![
                    ev(10, "a", true, "c"),
                    ev(20, "a", false, "c"),
                    ev(10, "a", true, "x"),
                    ev(20, "a", false, "x"),
                    ev(10, "a", true, "y"),
                    ev(20, "a", false, "y"),
                ],
                None,
            ),
            src(
                "b",
                vec![ev(25, "b", true, "c"), lapse, ev(4020, "b", true, "x")],
                None,
            ),
            src("d", vec![ev(5000, "d", true, "c")], Some(6000)),
            src("e", vec![ev(7000, "e", true, "c")], None),
        ])
        .unwrap();
        let c = ["c".to_owned()];
        let found: Vec<(u64, u64, GapCause)> = h
            .gaps(&c, 0, 8000)
            .iter()
            .map(|g| (g.start, g.end, g.cause))
            .collect();
        assert_eq!(
            found,
            [
                (0, 10, GapCause::NeverOwned),
                (20, 25, GapCause::Released),
                (30, 5000, GapCause::Lapsed),
                (6000, 7000, GapCause::Killed),
            ]
        );
        assert_eq!(h.longest_gap(&c, 0, 8000), (4970, "c".into(), 30));
        let all = ["c".to_owned(), "x".to_owned(), "y".to_owned()];
        // x: acquired a lease (4,000 ms) after its release; y: released and never
        // acquired again, open for a lease by the window's end.
        let waited: Vec<(String, u64, bool)> = h
            .handovers_that_waited(&all, 0, 8000, 4000)
            .into_iter()
            .map(|g| (g.cluster, g.start, g.open))
            .collect();
        assert_eq!(
            waited,
            [("x".to_owned(), 20, false), ("y".to_owned(), 20, true)]
        );
        // A millisecond short of a lease, neither has waited (yet).
        assert!(h.handovers_that_waited(&all, 0, 4019, 4000).is_empty());
    }

    #[test]
    fn contradictory_logs_are_errors() {
        assert!(History::build(vec![src("a", vec![ev(1, "a", false, "c")], None)]).is_err());
        assert!(
            History::build(vec![src(
                "a",
                vec![ev(1, "a", true, "c"), ev(2, "a", true, "c")],
                None
            )])
            .is_err()
        );
        let mut exited = src("a", vec![ev(1, "a", true, "c")], None);
        exited.exited = true;
        assert!(History::build(vec![exited]).is_err());
    }

    #[test]
    fn lines_parse_with_named_fields() {
        let e = parse_line(r#"{"ts_ms":5,"identity":"r","event":"release","cluster":"c","shard":null,"generation":2,"reason":"lapsed"}"#).unwrap();
        assert!(e.lapsed && !e.acquire && e.shard.is_none());
        let err = parse_line(
            r#"{"ts_ms":5,"identity":"r","event":"x","cluster":"c","shard":1,"generation":2}"#,
        )
        .unwrap_err();
        assert!(err.contains("event"), "{err}");
        assert!(
            parse_line(r#"{"ts_ms":5}"#)
                .unwrap_err()
                .contains("identity")
        );
    }

    #[test]
    fn takeover_waits_for_every_cluster_and_percentiles_rank() {
        let h = History::build(vec![
            src(
                "a",
                vec![ev(10, "a", true, "x"), ev(10, "a", true, "y")],
                Some(100),
            ),
            src("b", vec![ev(4200, "b", true, "x")], None),
        ])
        .unwrap();
        let t = h.takeover(0, 90);
        assert_eq!(t.complete(), None);
        assert_eq!(t.pending(), ["y"]);
        assert_eq!(super::super::percentiles(&[5, 1, 3, 2, 4]), Some((3, 5, 5)));
        assert_eq!(super::super::percentiles(&[]), None);
    }
}
