//! The helpers every layer shares, written once (rust-analyzer's `stdx` is the model):
//!
//! - [`duration`]: Go's `time.ParseDuration` as Argo CD reads its settings;
//! - [`boolean`]: Go's `strconv.ParseBool` as Argo CD reads its annotations and settings;
//! - [`backoff`]: exponential backoff with a cap, as a pure function of the attempt;
//! - [`rng`]: SplitMix64, a seeded generator whose stream is fixed by its definition;
//! - [`redact`]: URL user information kept out of messages;
//! - [`cases`]: how many cases a property test runs (`PROPTEST_CASES` first).
//!
//! **Architecture invariant:** no dependencies, no I/O, no clock, no global state — the
//! pure crates (`core`, `fleetgen`) may use it.

pub mod backoff;
pub mod boolean;
pub mod cases;
pub mod duration;
pub mod redact;
pub mod rng;
