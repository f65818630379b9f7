//! Synthetic, seeded fleets for fleetshard's tests, benchmarks and demos.
//!
//! A pure library: [`FleetSpec::generate`] builds a [`fleetshard_core::Fleet`] of Argo
//! CD-like clusters and applications, and [`shards`] builds the replicas to place them on.
//!
//! ```
//! use fleetshard_fleetgen::{FleetSpec, Skew, shards};
//!
//! // The benchmark shape: 10 apps per cluster on a Zipf spread, over three zones.
//! let spec = FleetSpec::new(1_000)
//!     .with_seed(42)
//!     .with_zones(["eu-west-1a", "eu-west-1b", "eu-west-1c"]);
//! let fleet = spec.generate();
//! assert_eq!(fleet.apps.len(), 10_000);
//! assert_eq!(fleet, spec.generate(), "same spec, same fleet");
//!
//! let replicas = shards(6, &spec.zones);
//! assert_eq!(replicas[4].zone.as_deref(), Some("eu-west-1b"));
//! ```
//!
//! **Determinism is a contract:** the same spec gives the same fleet on every platform
//! and with every Rust version. All randomness comes from a hand-rolled, fully specified
//! SplitMix64 and all floating point from correctly rounded IEEE operations (see the
//! private `rng` module for why not `rand` or `f64::powf`). Each purpose (ids, zones,
//! ranks, pins, random spreads) draws from its own stream, so changing one knob leaves
//! the others' choices alone: adding zones does not change the cluster ids, for example.
//!
//! Generated data, for a cluster at index `i` (see [`cluster_name`], [`cluster_server`]):
//! - id: UUID-shaped `xxxxxxxx-xxxx-4xxx-8xxx-xxxxxxxxxxxx`, distinct, from the seed;
//! - name `cluster-00042`, server `https://cluster-00042.fleet.example`;
//! - labels [`ZONE_LABEL`](fleetshard_core::model::ZONE_LABEL) and
//!   [`REGION_LABEL`](fleetshard_core::model::REGION_LABEL) when zones are given;
//! - applications `argocd/<cluster-name>-app-<k>`, project `default`, destination
//!   server = the cluster's server. The model holds no sources; a caller that writes
//!   Applications gives them [`REPO_URL`] at [`FleetSpec::app_paths`] (`apps/<k mod 10>`),
//!   revision [`TARGET_REVISION`] (`HEAD`).

mod costs;
mod generate;
mod rng;
mod spec;

pub use generate::{
    APP_NAMESPACE, APP_PROJECT, REPO_URL, TARGET_REVISION, cluster_name, cluster_server, region_of,
    shards,
};
pub use spec::{FleetSpec, Skew, SpecError};
