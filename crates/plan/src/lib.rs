//! `fleetshard plan` without the command line: build a what-if [`Report`] of how a fleet's
//! clusters would be spread over controller replicas, by fleetshard's balanced placement
//! and by Argo CD's algorithms, and render it as a table, JSON or an SVG chart; and
//! `fleetshard pin`'s plan of balanced `shard` pins for Argo CD's own controller
//! ([`plan_pins`]).
//!
//! Pure: no file, no clock, no environment. The caller loads the fleet, reads any
//! `--previous` plan with [`PreviousPlan::from_json`], and times the distribution through a
//! [`Stopwatch`] it provides (tests pass [`NoStopwatch`]).
//!
//! ```
//! use fleetshard_core::{Cluster, Fleet};
//! use fleetshard_plan::{Algorithm, NoStopwatch, PlanInput, PlanOptions, build_report, render_json};
//!
//! let fleet = Fleet {
//!     clusters: vec![Cluster::new("a", "https://a"), Cluster::new("b", "https://b")],
//!     apps: vec![],
//! };
//! let options = PlanOptions {
//!     algorithms: Algorithm::parse_list("balanced,legacy").unwrap(),
//!     replicas: fleetshard_plan::parse_replicas("2").unwrap(),
//!     shard_template: vec![],
//!     config: Default::default(),
//!     previous: None,
//!     costs: Default::default(),
//! };
//! let input = PlanInput { fleet, warnings: vec![] };
//! let report = build_report(&input, &options, &mut NoStopwatch).unwrap();
//! assert_eq!(report.plans.len(), 2);
//! assert!(render_json(&report).contains("\"plans\""));
//! ```

mod build;
mod costs;
mod describe;
mod options;
mod pin;
mod previous;
mod report;
mod svg;
mod table;
mod units;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_costs;

pub use build::{PlanInput, build_report};
pub use costs::{MeasuredCosts, cluster_costs};
pub use options::{
    Algorithm, CostOptions, MAX_PLANS, MAX_REPLICAS, PlanOptions, override_template,
    parse_capacities, parse_replicas, parse_zones, shard_specs, valid_names,
};
pub use pin::{
    CurrentShard, MANUAL_PIN_ANNOTATION, MANUAL_PIN_VALUE, PinAction, PinEntry, PinOptions,
    PinPlan, PinRow, ShardLoad, plan_pins, render_pin_text,
};
pub use previous::PreviousPlan;
pub use report::{
    BalanceSummary, ClusterRow, CrossZoneSummary, FleetSummary, MovementFrom, MovementSummary,
    PlanReport, Report, ShardRow, SliceRow, Timings, Unassigned, Warning, ZoneRow, ZonesSummary,
    render_json,
};
pub use svg::render_svg;
pub use table::{MAX_WARNINGS, TableOptions, render_table};

/// Times a piece of work. The report builder reads no clock itself, so that it stays a
/// pure function of its input; the CLI passes one that reads the wall clock.
pub trait Stopwatch {
    /// Runs `f`, returning its result and the milliseconds it took.
    fn time<T>(&mut self, f: impl FnOnce() -> T) -> (T, f64);
}

/// A [`Stopwatch`] that reports 0 ms: for tests and callers that do not care.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoStopwatch;

impl Stopwatch for NoStopwatch {
    fn time<T>(&mut self, f: impl FnOnce() -> T) -> (T, f64) {
        (f(), 0.0)
    }
}

/// Why a plan cannot be made. Messages name the offending value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    /// An algorithm name that is not known.
    #[error("unknown algorithm {name:?} (valid: {valid})")]
    UnknownAlgorithm {
        /// The name given.
        name: String,
        /// The valid names, comma-separated.
        valid: String,
    },
    /// A replica count below zero.
    #[error("replica count {value:?} is negative; a replica count is a whole number ≥ 0")]
    NegativeReplicas {
        /// The text given.
        value: String,
    },
    /// Replica counts that cannot be read.
    #[error("invalid replica count {value:?}: {reason}")]
    InvalidReplicas {
        /// The text given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A tolerance that is negative, absurdly large or not a number.
    #[error("tolerance {0} is not within 0..=10")]
    InvalidTolerance(f64),
    /// Bad shard zones or capacities.
    #[error("invalid shard layout: {0}")]
    InvalidShardLayout(String),
    /// Nothing to plan.
    #[error("no {0} given")]
    Empty(&'static str),
    /// A hysteresis band or takeover cost that is negative, absurdly large or not a number.
    #[error("hysteresis band {0} or takeover cost {1} is not within 0..=10")]
    InvalidHysteresis(f64, f64),
    /// A costs file that cannot be used.
    #[error("{source_name}: {message}")]
    Costs {
        /// The file (or source) name.
        source_name: String,
        /// What is wrong, naming the key.
        message: String,
    },
    /// An earlier plan that cannot be read.
    #[error("{source_name}: {message}")]
    PreviousPlan {
        /// The file (or source) name.
        source_name: String,
        /// What is wrong.
        message: String,
    },
}
