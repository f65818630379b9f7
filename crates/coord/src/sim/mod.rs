//! The seeded deterministic simulation of both protocols' state machines (tests only).
//!
//! Replicas run the pure machines — fenced mode's [`crate::fenced::Replica`] and Argo CD
//! mode's [`crate::argocd::ArgoReplica`] — over a simulated store with latency (and spikes),
//! store errors and lost replies, crashes and restarts (a new incarnation), pauses (SIGSTOP),
//! partitions from the store, store outages for every replica at once, several failures at
//! once, graceful shutdowns whose stops drain (beyond the runner's 2 s release bound),
//! slow stops, clock-rate drift, clusters joining and leaving the fleet, changes of the
//! shard or replica count, measured costs that change, and (fenced mode) a hub cluster
//! split into slices, re-split and joined, judged per application. Everything random comes from one seed, so a run is replayed
//! exactly by its seed.
//!
//! - `world`: what both share: the event queue, the store, each replica's clocks and life,
//!   latency, the fault schedule, and the checker: at every event, no cluster has two
//!   acting owners, and each window without an acting owner is measured. Who acts is
//!   derived from what the driver executed — a replica acts on a cluster it started (an
//!   executed `Start`, no executed `Stop` since) or whose stop still drains, while the
//!   lease deadline its runner last published is ahead on its own clock (the controller's
//!   gate; work in flight keeps the deadline it was given) — and the machine's own view
//!   must agree with it at every check.
//! - `fenced`: fenced lease mode (G1 checked, G2 bounded), also with corrupt records of
//!   every kind (garbage, a newer schema, oversized) and the store replaced by an empty one.
//! - `argocd`: Argo CD-compatible heartbeat mode (no overlap within the stated clock-rate
//!   tolerance, with no exclusion; a coverage bound; overlap shown possible beyond the
//!   tolerance).
//!
//! A failing run prints its seed. Environment:
//!
//! - `FLEETSHARD_SIM_SEED=<seed>` replays exactly that run (in every simulation test the
//!   filter selects: add the test's name to the `cargo test` command);
//! - `FLEETSHARD_SIM_RUNS=<n>` runs `n` seeds per configuration instead of the default;
//! - `FLEETSHARD_SIM_SEED_OFFSET=<k>` starts at seed `k + 1` (to sweep fresh seeds);
//! - `FLEETSHARD_SIM_TRACE=1` prints every event of the run;
//! - `FLEETSHARD_SIM_SLOW_STOPS=0` makes stops instant (the protocol alone).

use fleetshard_util::rng::SplitMix64;
mod argocd;
mod fenced;
mod world;

/// The simulation's seeded source: the workspace's SplitMix64 (so a seed replays the same
/// run), with the draws the simulation needs.
pub(crate) struct Rng(SplitMix64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(SplitMix64::new(seed))
    }
    pub(crate) fn next(&mut self) -> u64 {
        self.0.next_u64()
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub(crate) fn between(&mut self, a: u64, b: u64) -> u64 {
        a + self.below(b - a + 1)
    }
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The seeds to run: `FLEETSHARD_SIM_SEED` alone, else `FLEETSHARD_SIM_RUNS` (default
/// `default_runs`) seeds from `FLEETSHARD_SIM_SEED_OFFSET + 1`.
pub(crate) fn seeds(default_runs: u64) -> Vec<u64> {
    if let Ok(seed) = std::env::var("FLEETSHARD_SIM_SEED") {
        return vec![seed.parse().expect("FLEETSHARD_SIM_SEED must be a number")];
    }
    let number = |name: &str| {
        std::env::var(name).ok().map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} must be a number"))
        })
    };
    let runs = number("FLEETSHARD_SIM_RUNS").unwrap_or(default_runs);
    let offset = number("FLEETSHARD_SIM_SEED_OFFSET").unwrap_or(0);
    (offset + 1..=offset + runs).collect()
}

/// How to run one seed of the test `test` (its name, as `cargo test` filters) again, for
/// failure messages.
pub(crate) fn replay(seed: u64, test: &str) -> String {
    format!("replay: FLEETSHARD_SIM_SEED={seed} cargo test -p fleetshard-coord --lib {test}")
}

/// The `q`-quantile of sorted values (0 when empty).
pub(crate) fn percentile(sorted: &[u64], q: f64) -> u64 {
    let i = ((sorted.len() as f64 * q) as usize).min(sorted.len().saturating_sub(1));
    sorted.get(i).copied().unwrap_or(0)
}
