//! The store a scenario runs over: a SQLite file, (with the `etcd` feature) a real etcd
//! server, or a namespace of the fake Kubernetes API server (`kubernetes://`, for what
//! needs one: a Deployment's replicas as the shard count). Scenarios take a
//! [`StoreUnderTest`] so that each runs over every backend.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use fleetshard_coord::fenced::AssignmentDoc;
use fleetshard_coord::store::{Precondition, Store, StoreError};
use fleetshard_store_kube::{KubeOptions, KubeStore};
use fleetshard_store_sqlite::{SqliteOptions, SqliteStore};
use fleetshard_testsupport::kube_api::FakeApiServer;

/// The key prefix `fleetshard run` uses by default; a shared store adds its own prefix.
pub const ROOT: &str = "fleetshard/";

/// A store for one scenario.
pub enum StoreUnderTest {
    /// One SQLite file shared by every process.
    Sqlite {
        /// The database file.
        path: PathBuf,
    },
    /// A real etcd server (or `FLEETSHARD_TEST_ETCD`'s, under a key prefix of its own).
    #[cfg(feature = "etcd")]
    Etcd(fleetshard_testsupport::etcd::EtcdServer),
    /// A namespace of a fake API server, reached through a kubeconfig file (boxed: it is
    /// far larger than the others).
    Kube(Box<KubeUnderTest>),
}

/// A fake API server with the store's namespace, the runtime serving it, and the
/// kubeconfig every process is given (`KUBECONFIG`).
pub struct KubeUnderTest {
    /// The fake API server (the test edits its Deployments).
    pub server: FakeApiServer,
    /// The store's namespace.
    pub namespace: String,
    /// The kubeconfig file.
    pub kubeconfig: PathBuf,
    _rt: tokio::runtime::Runtime,
}

impl StoreUnderTest {
    /// A fresh SQLite file in `dir`.
    pub fn sqlite(dir: &Path) -> Self {
        StoreUnderTest::Sqlite {
            path: dir.join("fleetshard.db"),
        }
    }

    /// A fresh etcd server (its data in its own temporary directory, not `_dir`).
    #[cfg(feature = "etcd")]
    pub fn etcd(_dir: &Path) -> Self {
        let server = fleetshard_testsupport::etcd::EtcdServer::start()
            .unwrap_or_else(|e| panic!("starting etcd: {e}"));
        StoreUnderTest::Etcd(server)
    }

    /// A fresh fake API server with the namespace `namespace` (and `also`, for other
    /// objects: a Deployment), its kubeconfig in `dir`.
    pub fn kube(dir: &Path, namespace: &str, also: &[&str]) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime for the fake API server");
        let server = rt
            .block_on(FakeApiServer::start())
            .expect("starting the fake API server");
        for ns in std::iter::once(&namespace).chain(also) {
            server.create_namespace(ns).expect("creating a namespace");
        }
        let kubeconfig = dir.join("kubeconfig");
        server
            .write_kubeconfig(&kubeconfig)
            .expect("writing the kubeconfig");
        StoreUnderTest::Kube(Box::new(KubeUnderTest {
            server,
            namespace: namespace.to_owned(),
            kubeconfig,
            _rt: rt,
        }))
    }

    /// What every process using the store needs in its environment.
    pub fn env(&self) -> Vec<(&'static str, PathBuf)> {
        match self {
            StoreUnderTest::Kube(k) => vec![("KUBECONFIG", k.kubeconfig.clone())],
            _ => Vec::new(),
        }
    }

    /// The backend's name, for messages and figures.
    pub fn name(&self) -> &'static str {
        match self {
            StoreUnderTest::Sqlite { .. } => "sqlite",
            #[cfg(feature = "etcd")]
            StoreUnderTest::Etcd(_) => "etcd",
            StoreUnderTest::Kube(_) => "kubernetes",
        }
    }

    /// The `--store` URL.
    pub fn url(&self) -> String {
        match self {
            StoreUnderTest::Sqlite { path } => format!("sqlite://{}", path.display()),
            #[cfg(feature = "etcd")]
            StoreUnderTest::Etcd(server) => server.url(),
            StoreUnderTest::Kube(k) => format!("kubernetes://{}", k.namespace),
        }
    }

    /// The `--root` key prefix of the fleet's records.
    pub fn root(&self) -> String {
        match self {
            StoreUnderTest::Sqlite { .. } | StoreUnderTest::Kube(_) => ROOT.to_owned(),
            // A shared server (FLEETSHARD_TEST_ETCD) gives each fixture its own prefix.
            #[cfg(feature = "etcd")]
            StoreUnderTest::Etcd(server) => format!("{}{ROOT}", server.key_prefix()),
        }
    }

    /// Opens the store in this process (for revisions, the assignment, probes), inside the
    /// runtime that will use it (a client may be tied to its runtime).
    async fn open(&self) -> Result<Arc<dyn Store>, StoreError> {
        match self {
            StoreUnderTest::Sqlite { path } => Ok(Arc::new(
                SqliteStore::open_async(path, SqliteOptions::default()).await?,
            )),
            #[cfg(feature = "etcd")]
            StoreUnderTest::Etcd(server) => {
                let url: fleetshard_replica::StoreUrl =
                    server.url().parse().map_err(StoreError::Unavailable)?;
                Ok(url
                    .open()
                    .map_err(|e| StoreError::Unavailable(e.to_string()))?
                    .store)
            }
            StoreUnderTest::Kube(k) => {
                let unavailable = |e: String| StoreError::Unavailable(e);
                let kubeconfig = kube::config::Kubeconfig::from_yaml(&k.server.kubeconfig_yaml())
                    .map_err(|e| unavailable(e.to_string()))?;
                let options = kube::config::KubeConfigOptions::default();
                let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                    .await
                    .map_err(|e| unavailable(e.to_string()))?;
                Ok(Arc::new(KubeStore::from_config(
                    config,
                    Some(&k.namespace),
                    KubeOptions::default(),
                )))
            }
        }
    }

    /// The store-wide revision (every write bumps it) and the committed assignment.
    pub fn read_root(&self) -> Result<(u64, Option<AssignmentDoc>), String> {
        let root = self.root();
        block_on(async {
            let store = self.open().await.map_err(|e| e.to_string())?;
            let listing = store.list(&root).await.map_err(|e| e.to_string())?;
            let key = fleetshard_coord::fenced::assignment_key(&root);
            let doc = listing
                .entries
                .iter()
                .find(|e| e.key == key)
                .map(|e| serde_json::from_slice(&e.value).map_err(|e| format!("{key}: {e}")))
                .transpose()?;
            Ok((listing.revision, doc))
        })
    }

    /// Whether a write next to the fleet's records gets through within `patience`: false
    /// means somebody holds the store's write lock (a process paused inside a transaction).
    pub fn write_probe(&self, patience: Duration) -> bool {
        let key = format!("{}harness-probe", self.root().trim_end_matches('/'));
        block_on(async {
            let Ok(store) = self.open().await else {
                return false;
            };
            let put = store.put(&key, b"probe".to_vec(), Precondition::Any);
            matches!(tokio::time::timeout(patience, put).await, Ok(Ok(_)))
        })
    }

    /// Whether a process paused inside a write transaction can block every other writer
    /// (SQLite's file lock; see docs/reliability.md).
    pub fn pause_can_hold_write_lock(&self) -> bool {
        matches!(self, StoreUnderTest::Sqlite { .. })
    }
}

/// A small runtime for the harness's own store calls (and a test's).
pub fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime")
        .block_on(f)
}
