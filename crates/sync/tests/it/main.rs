//! The sync engine driven against a model cluster: scenarios of Argo CD's behaviour
//! (`scenarios.rs`) and a seeded simulation with random results, kills and moves
//! (`sim.rs`).

mod scenarios;
mod sim;
mod world;
