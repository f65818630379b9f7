//! fleetshard's pure core: the fleet model, Argo CD's distribution algorithms reproduced
//! bit for bit, fleetshard's own balanced placement, and assignment diffing.
//!
//! The model is the distribution view of the fleet: clusters, and applications as an
//! identity and a destination. It knows nothing of sources, sync policies or operations:
//! an application's GitOps spec lives in `fleetshard-manifest` (`AppSpec`), beside the
//! fleet, so GitOps features never change what every replica recomputes with.
//!
//! **Architecture invariant:** nothing here does I/O, spawns tasks, or reads a clock. Every
//! function is a deterministic function of its arguments, so the coordination layer can
//! run it on any replica and get the same answer, and tests need no fixtures.

pub mod argo;
pub mod assignment;
pub mod model;
pub mod placement;

pub use assignment::{Assignment, Balance, Movement, ShardLoad};
pub use model::{App, Cluster, Destination, DestinationIndex, Fleet, FleetProblem, ShardSpec};
