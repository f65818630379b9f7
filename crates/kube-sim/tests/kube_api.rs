//! Tests of the fake Kubernetes API server: over raw HTTP (exact codes, headers and
//! watch lines) and through kube-rs (the client fleetshard uses).

mod kube_api {
    mod apply;
    mod auth;
    mod crd;
    mod crud;
    mod events;
    mod faults;
    mod kube_client;
    mod list_watch;
    mod measure;
    mod raw;
    mod rbac;
    mod schema;
    mod tls;
    mod writes;
}
