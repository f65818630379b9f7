//! A client of Argo CD's repo-server: desired state rendered by the repo-server that every
//! Argo CD installation runs (Helm from Git, Helm repositories and OCI, Kustomize, Jsonnet,
//! plugins), asked the way Argo CD's application controller asks it.
//!
//! - [`proto`]: the messages and client generated from `proto/repository.proto`, our own
//!   description of `repository.RepoServerService/GenerateManifest` with Argo CD's field
//!   numbers;
//! - [`source`]: an Application's source JSON → `ApplicationSource`, field by field,
//!   unknown fields refused;
//! - [`request`]: the whole request from typed inputs ([`build_request`], pure), with the
//!   table of where each field comes from; [`settings`] (`argocd-cm`) and [`cluster`]
//!   (the destination's versions) feed it;
//! - [`client`]: [`RepoServerClient`] — TLS verified by default ([`TlsMode`]), a per-call
//!   timeout, bounded concurrency, typed errors that never carry a credential; answers
//!   as [`Rendered`].

pub mod client;
pub mod cluster;
mod error;
mod json;
pub mod proto;
mod redact;
pub mod request;
mod response;
pub mod settings;
pub mod source;
mod tls;

pub use client::{ClientConfig, RepoServerClient};
pub use cluster::{ClusterVersions, api_version_strings, normalize_kube_version};
pub use error::{ClientError, RequestError};
pub use request::{
    ManifestInputs, ProjectInput, RefSource, RepoCredsInput, RepositoryInput, build_request,
    ref_sources,
};
pub use response::Rendered;
pub use settings::{DEFAULT_APP_LABEL_KEY, RenderSettings, TrackingMethod, TrackingSettings};
pub use tls::{ClientIdentity, TlsMode};
