//! The controller's integration tests, as one test binary: the inventory feeding the
//! shard's work (`inventory`), and its two sources — a polled directory under paused time
//! (`inventory_directory`) and Argo CD's objects watched through the fake API server
//! (`inventory_kubernetes`).

mod inventory;
mod inventory_directory;
mod inventory_kubernetes;
mod support;
