//! The fake Kubernetes API server (being written).
