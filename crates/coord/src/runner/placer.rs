//! Where the runner computes the distributor's placements: never on its own task, which
//! must keep renewing leases, listing and publishing its status while a placement of a
//! large fleet runs (O(N log N), tens of milliseconds at 50k clusters; it used to be
//! seconds). [`BlockingPlacer`], tokio's blocking pool, unless a test injects another:
//! under paused time a blocking thread races the paused clock (tokio advances it while
//! the runtime waits for the thread), so paused-time tests use [`InlinePlacer`].

use futures::future::BoxFuture;

use super::RunnerFleet;
use crate::fenced::{Placed, PlacementJob};

/// Computes placements for a runner.
pub trait Placer: Send + Sync + 'static {
    /// Runs `job` over `fleet` (the fleet of the job's revision); resolves with the result,
    /// or `None` if it could not be computed (the replica then asks again).
    fn place(&self, job: PlacementJob, fleet: RunnerFleet) -> BoxFuture<'static, Option<Placed>>;
}

/// Runs each placement on tokio's blocking pool.
#[derive(Debug, Clone, Copy, Default)]
pub struct BlockingPlacer;

impl Placer for BlockingPlacer {
    fn place(&self, job: PlacementJob, fleet: RunnerFleet) -> BoxFuture<'static, Option<Placed>> {
        Box::pin(async move {
            let placed = tokio::task::spawn_blocking(move || {
                job.run(&fleet.clusters, &fleet.loads, &fleet.apps)
            });
            match placed.await {
                Ok(placed) => Some(placed),
                Err(e) => {
                    tracing::error!("placement failed: {e}");
                    None
                }
            }
        })
    }
}

/// Runs each placement inside the future that asks for it: deterministic under paused
/// time (no real thread for the paused clock to race), for tests and simulations.
#[derive(Debug, Clone, Copy, Default)]
pub struct InlinePlacer;

impl Placer for InlinePlacer {
    fn place(&self, job: PlacementJob, fleet: RunnerFleet) -> BoxFuture<'static, Option<Placed>> {
        Box::pin(async move { Some(job.run(&fleet.clusters, &fleet.loads, &fleet.apps)) })
    }
}
