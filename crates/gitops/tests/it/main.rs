//! The GitOps crate's integration tests, as one test binary: comparison and health rules
//! (`compare`, `compare_props`; health is tested in `fleetshard-health`), the Git source (`source`, `source_cache`, and
//! `source_http` against a real `git http-backend`, `source_auth` with credentials against
//! it and a real `sshd`), the reconciler against fake API servers (`reconcile`), and cluster
//! authentication from a Secret's `config` (`cluster_auth`, `cluster_eks` for EKS) and over TLS
//! (`cluster_tls`). Rendering by source type (`render`: Kustomize with the real `kubectl`,
//! Jsonnet, Helm through a fake `helm`). `compare_bench` holds `#[ignore]`d measurements.

mod cluster_auth;
mod cluster_eks;
mod cluster_tls;
mod compare;
mod compare_bench;
mod compare_ignored;
mod compare_props;
mod live_cache;
mod live_reach;
mod reconcile;
mod render;
mod render_reach;
#[path = "../shared/render.rs"]
mod shared_render;
mod source;
mod source_auth;
mod source_cache;
mod source_http;
