//! The health crate's integration tests, as one test binary: the built-in checks per kind
//! (`builtin`), Lua scripts as argocd-cm and a customizations directory give them
//! (`scripts`), and, when `FLEETSHARD_ARGOCD_CUSTOMIZATIONS` points at a checkout of Argo CD's
//! `resource_customizations`, its own scripts against its own test cases (`conformance`).

mod builtin;
mod conformance;
mod controllers;
