//! The binary's integration tests, as one test binary (one link of kube, gix and axum
//! instead of twelve): the command line's contract (`cli`, `apps`), the deployment
//! manifests run under their RBAC (`deploy_manifests`), and real `fleetshard run`
//! processes — where a process boundary is the point: kill -9, SIGSTOP, SIGTERM, several
//! processes on one SQLite file — against each store and protocol (`failover`, `run_*`),
//! and a store replaced under running processes (`store_identity`).
//! Replicas that need no process boundary are tested in-process in
//! `crates/replica/tests/in_process.rs`. `figures` holds measurements (`#[ignore]`d; run
//! them with `--ignored`, see `docs/reliability.md`).

mod apps;
mod cli;
mod corrupt_records;
mod dashboard_argocd;
mod deploy_manifests;
mod failover;
mod figures;
mod grafana;
mod health_check;
mod pin;
mod plan_costs;
mod projects;
mod repo_server;
mod run_argocd;
mod run_capacity;
mod run_costs;
mod run_etcd;
mod run_etcd_secured;
mod run_fleet_dir;
mod run_gitops;
mod run_kube;
mod run_kube_deployment;
mod run_redis;
mod run_sqlite;
mod scale_run;
mod secrets;
mod simulate;
mod simulate_seed;
mod store_identity;
mod support;
mod sync_failover;
mod terminal;
mod up;
mod write_overlap;
