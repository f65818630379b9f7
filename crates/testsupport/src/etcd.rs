//! A real etcd server for tests (being written).
