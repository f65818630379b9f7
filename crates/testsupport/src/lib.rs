//! Test fixtures shared by fleetshard's crates: real services started on loopback ports
//! and faithful fakes of the ones that cannot run here.
//!
//! - [`etcd`]: a real `etcd` process (Debian's `etcd-server`) on free loopback ports, with
//!   its data in a temporary directory, stopped when dropped;
//! - [`redis`]: a real `redis-server` (Debian's `redis-server`) on a free loopback port,
//!   killed and restarted at will, read back over plain RESP;
//! - [`git`]: real Git repositories made with the `git` CLI;
//! - [`git_http`]: a real smart-HTTP Git server on 127.0.0.1 (`git http-backend` as CGI),
//!   optionally behind HTTP basic authentication;
//! - [`git_ssh`]: a real OpenSSH server on 127.0.0.1 with its own host key and one
//!   authorized client key;
//! - [`harness`]: the loop of a test binary with its own `main` ([`harness::run_cases`]);
//! - [`logs`]: what code under test logged ([`logs::LogCapture`]), as text;
//! - [`repo_server`]: a fake of Argo CD's repo-server (gRPC `GenerateManifest`, plain text
//!   or TLS) that decodes every request by field number, records it and answers from a
//!   scripted table;
//! - [`kube_api`]: a fake Kubernetes API server over real HTTP on 127.0.0.1 — strict
//!   `resourceVersion` compare-and-swap (409 Conflict), watch streams with bookmarks and
//!   410 Gone. It is the crate `fleetshard-kube-sim`, re-exported under this name, so
//!   that `fleetshard simulate` can serve it without the rest of this crate.

pub mod etcd;
pub mod git;
pub mod git_http;
pub mod git_ssh;
pub mod harness;
pub mod logs;
pub mod redis;
pub mod repo_server;
pub use fleetshard_kube_sim as kube_api;
