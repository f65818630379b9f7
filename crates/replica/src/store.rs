//! The coordination store a replica (or a one-shot command) uses, named by a URL that is
//! parsed once into a [`StoreUrl`] and matched exhaustively from then on: no decision
//! reads a log string.
//!
//! Every store is opened behind a [`GuardedStore`]: once the backend finds that another
//! store now stands behind the URL (a SQLite file deleted or re-created, another etcd
//! cluster, a namespace re-created), every operation is refused for the rest of the
//! process, and [`OpenedStore::replaced`] says why (readiness, metrics).

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use fleetshard_coord::store::Store;
use fleetshard_coord::store::chunked::{self, ChunkedStore};
use fleetshard_coord::store::guard::{self, GuardedStore};
use fleetshard_coord::store::memory::MemoryStore;
use fleetshard_store_kube::{KubeOptions, KubeStore};
/// How a store is opened: [`OpenMode::Create`] (replicas), [`OpenMode::Existing`]
/// (`fleetshard scale`), [`OpenMode::ReadOnly`] (`status`, `apps`). Only SQLite has a
/// store to create or a file to open read-only; an etcd cluster or a namespace is there or
/// not, so the mode changes nothing for them.
pub use fleetshard_store_sqlite::OpenMode;
use fleetshard_store_sqlite::{Durability, OpenMode as SqliteMode, SqliteOptions, SqliteStore};
use fleetshard_util::redact::redact_userinfo;
use tokio::sync::watch;

use crate::ReplicaError;

mod etcd;

pub use etcd::EtcdAccess;

/// A store URL, parsed and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreUrl {
    /// `memory://`: this process only.
    Memory,
    /// `sqlite://PATH`: a file shared by the processes of one machine.
    Sqlite(PathBuf),
    /// `etcd://HOST:PORT[,HOST:PORT…]`, or `etcds://…` over TLS.
    Etcd {
        /// `HOST:PORT` each.
        endpoints: Vec<String>,
        /// `etcds://`.
        tls: bool,
        /// The TLS files and user ([`StoreUrl::with_etcd_access`]).
        access: EtcdAccess,
    },
    /// `kubernetes://NAMESPACE`: ConfigMaps and Leases; `None`: the configuration's
    /// namespace.
    Kubernetes {
        /// The namespace.
        namespace: Option<String>,
    },
}

impl FromStr for StoreUrl {
    type Err = String;

    /// Errors never repeat the URL's user information (`etcd://user:password@…` is
    /// refused, and a mistyped scheme must not print the password either).
    fn from_str(url: &str) -> Result<Self, String> {
        parse_store_url(url.trim()).map_err(|e| redact_userinfo(&e))
    }
}

fn parse_store_url(url: &str) -> Result<StoreUrl, String> {
    let (scheme, rest) = url.split_once("://").ok_or_else(|| expected(url))?;
    match scheme.to_ascii_lowercase().as_str() {
        "memory" if rest.is_empty() => Ok(StoreUrl::Memory),
        "sqlite" => SqliteStore::path_from_url(url)
            .map(StoreUrl::Sqlite)
            .map_err(|e| e.to_string()),
        scheme @ ("etcd" | "etcds") => {
            let endpoints: Vec<String> = rest
                .split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty())
                .map(str::to_owned)
                .collect();
            if endpoints.is_empty() {
                return Err(format!(
                    "store {url:?}: no etcd endpoint ({scheme}://HOST:PORT)"
                ));
            }
            if rest.contains('@') {
                // The URL is not repeated: it holds a password.
                return Err("store: credentials in the URL are refused (a URL shows in \
                                ps, logs and errors); use --etcd-username and \
                                --etcd-password-file"
                    .to_owned());
            }
            let tls = scheme == "etcds";
            Ok(StoreUrl::Etcd {
                endpoints,
                tls,
                access: EtcdAccess::default(),
            })
        }
        // The namespace is checked by the backend (a DNS label); opening does no I/O.
        "kubernetes" => KubeStore::from_url(url)
            .map(|_| StoreUrl::Kubernetes {
                namespace: Some(rest.trim_end_matches('/').to_owned()).filter(|n| !n.is_empty()),
            })
            .map_err(|e| e.to_string()),
        _ => Err(expected(url)),
    }
}

fn expected(url: &str) -> String {
    format!(
        "store {url:?}: expected sqlite://PATH, etcd://HOST:PORT, etcds://HOST:PORT, \
         kubernetes://NAMESPACE or memory://"
    )
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreUrl::Memory => f.write_str("memory://"),
            StoreUrl::Sqlite(path) => write!(f, "sqlite://{}", path.display()),
            StoreUrl::Etcd { endpoints, tls, .. } => {
                let scheme = if *tls { "etcds" } else { "etcd" };
                write!(f, "{scheme}://{}", endpoints.join(","))
            }
            StoreUrl::Kubernetes { namespace } => {
                write!(f, "kubernetes://{}", namespace.as_deref().unwrap_or(""))
            }
        }
    }
}

/// An open store, with the Kubernetes backend kept typed when that is what it is (its
/// client reads a Deployment's replicas; its presence keeps statuses off ConfigMaps).
#[derive(Clone)]
pub struct OpenedStore {
    /// The store, with values too large for the backend split into parts transparently
    /// ([`ChunkedStore`]).
    pub store: Arc<dyn Store>,
    /// The Kubernetes backend, for `kubernetes://`.
    pub kube: Option<KubeStore>,
    /// `Some(what)` once the store was found replaced (see the module docs): from then on
    /// every operation on [`OpenedStore::store`] is refused.
    pub replaced: watch::Receiver<Option<String>>,
}

impl fmt::Debug for OpenedStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenedStore")
            .field("store", &self.store.describe())
            .finish_non_exhaustive()
    }
}

impl StoreUrl {
    /// The URL with the TLS files and user of an etcd store, checked with its scheme
    /// (mixed or incomplete settings are refused, naming what is missing). Settings for a
    /// store that is not etcd are refused too: they would be ignored.
    pub fn with_etcd_access(self, access: EtcdAccess) -> Result<StoreUrl, String> {
        match self {
            StoreUrl::Etcd { endpoints, tls, .. } => {
                access.check(tls).map_err(|e| format!("store etcd: {e}"))?;
                Ok(StoreUrl::Etcd {
                    endpoints,
                    tls,
                    access,
                })
            }
            _ if access.is_empty() => Ok(self),
            other => Err(format!(
                "the --etcd-* settings (or FLEETSHARD_ETCD_PASSWORD) are only for etcd:// and \
                 etcds:// stores, and the store is {other}"
            )),
        }
    }

    /// Opens the store, creating it if it is a SQLite file that does not exist yet (a
    /// replica).
    pub fn open(&self) -> Result<OpenedStore, ReplicaError> {
        self.open_in(OpenMode::Create)
    }

    /// [`StoreUrl::open`] for a replica that names itself with `user_agent` in every
    /// request to a Kubernetes store (other backends have no such header).
    pub fn open_as(&self, user_agent: &str) -> Result<OpenedStore, ReplicaError> {
        self.open_with(OpenMode::Create, Some(user_agent))
    }

    /// Opens the store in `mode`: a one-shot command opens an existing store, read-only
    /// when it only reads, and never creates one (a missing SQLite file is an error
    /// naming its path).
    pub fn open_in(&self, mode: OpenMode) -> Result<OpenedStore, ReplicaError> {
        self.open_with(mode, None)
    }

    /// The store app statuses are written to (local mode), beside `coordination`, the
    /// replica's coordination store opened from this URL. For SQLite, a connection of its
    /// own: one connection serves one call at a time, and thousands of status writes
    /// queued on the coordination store's connection delayed lease renewals behind them.
    /// Its commits are not fsynced one by one (`synchronous = NORMAL`: they survive a
    /// crash of the process, and the next lease commit's fsync takes them to disk; a power
    /// loss may roll back the last ones, which the next refresh writes again), so a status
    /// write holds the file's write lock for microseconds, not an fsync. For etcd, a client
    /// of its own (its own gRPC connection): a takeover's burst of first status reads and
    /// writes on the coordination client held lease renewals past their 2 s bound at scale
    /// (`docs/performance.md`, "Takeover"). Every other store is shared as it is.
    pub fn open_for_statuses(
        &self,
        coordination: &OpenedStore,
    ) -> Result<Arc<dyn Store>, ReplicaError> {
        #[cfg(feature = "etcd")]
        if let StoreUrl::Etcd { .. } = self {
            return Ok(self.open_with(OpenMode::Existing, None)?.store);
        }
        let StoreUrl::Sqlite(path) = self else {
            return Ok(coordination.store.clone());
        };
        let options = SqliteOptions {
            durability: Durability::Normal,
            ..SqliteOptions::default()
        };
        let store = SqliteStore::open_in(path, options, SqliteMode::Existing).map_err(|e| {
            ReplicaError::Store {
                url: self.to_string(),
                reason: format!("opening a connection for app statuses: {e}"),
            }
        })?;
        let chunked = Arc::new(ChunkedStore::new(Arc::new(store), chunked::DEFAULT_LIMIT));
        Ok(Arc::new(GuardedStore::new(
            chunked,
            guard::DEFAULT_CHECK_EVERY,
        )))
    }

    fn open_with(
        &self,
        mode: OpenMode,
        user_agent: Option<&str>,
    ) -> Result<OpenedStore, ReplicaError> {
        let opening = |e: &dyn fmt::Display| ReplicaError::Store {
            url: self.to_string(),
            reason: e.to_string(),
        };
        let mut kube = None;
        let inner: Arc<dyn Store> = match self {
            StoreUrl::Memory => Arc::new(MemoryStore::new()),
            StoreUrl::Sqlite(path) => Arc::new(
                SqliteStore::open_in(path, SqliteOptions::default(), mode)
                    .map_err(|e| opening(&e))?,
            ),
            #[cfg(feature = "etcd")]
            StoreUrl::Etcd {
                endpoints,
                tls,
                access,
            } => {
                access.check(*tls).map_err(|e| opening(&e))?;
                let options = fleetshard_store_etcd::EtcdOptions {
                    security: access.security(*tls),
                    ..Default::default()
                };
                Arc::new(
                    fleetshard_store_etcd::EtcdStore::new(endpoints, options)
                        .map_err(|e| opening(&e))?,
                )
            }
            // Optional because etcd's client is generated from .proto files at build time,
            // and a plain `cargo build` must work with nothing but cargo.
            #[cfg(not(feature = "etcd"))]
            StoreUrl::Etcd { .. } => {
                return Err(opening(
                    &"etcd is not yet supported in this build (built without the `etcd` \
                      feature); rebuild with `cargo build --features etcd` (it needs protoc: \
                      Debian's protobuf-compiler package)",
                ));
            }
            // Connects on first use: configuration errors surface from the first operation.
            StoreUrl::Kubernetes { .. } => {
                let options = KubeOptions {
                    user_agent: user_agent.map(str::to_owned),
                    ..KubeOptions::default()
                };
                let store = KubeStore::from_url_with(&self.to_string(), options)
                    .map_err(|e| opening(&e))?;
                kube = Some(store.clone());
                Arc::new(store)
            }
        };
        let chunked = Arc::new(ChunkedStore::new(inner, chunked::DEFAULT_LIMIT));
        let guarded = GuardedStore::new(chunked, guard::DEFAULT_CHECK_EVERY);
        Ok(OpenedStore {
            replaced: guarded.subscribe(),
            store: Arc::new(guarded),
            kube,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_into_their_kind_and_print_back() {
        for (text, url) in [
            ("memory://", StoreUrl::Memory),
            ("sqlite://f.db", StoreUrl::Sqlite("f.db".into())),
            (
                "etcd://a:1,b:2",
                StoreUrl::Etcd {
                    endpoints: vec!["a:1".into(), "b:2".into()],
                    tls: false,
                    access: EtcdAccess::default(),
                },
            ),
            (
                "etcds://a:1",
                StoreUrl::Etcd {
                    endpoints: vec!["a:1".into()],
                    tls: true,
                    access: EtcdAccess::default(),
                },
            ),
            (
                "kubernetes://argocd",
                StoreUrl::Kubernetes {
                    namespace: Some("argocd".into()),
                },
            ),
            ("kubernetes://", StoreUrl::Kubernetes { namespace: None }),
        ] {
            let parsed: StoreUrl = text.parse().unwrap();
            assert_eq!(parsed, url, "{text}");
            assert_eq!(parsed.to_string().parse::<StoreUrl>().unwrap(), url);
        }
    }

    #[test]
    fn bad_urls_say_what_is_expected() {
        for text in [
            "ftp://x",
            "fleetshard.db",
            "memory://x",
            "etcd://",
            "etcds://",
            "etcds://root:pw@a:1",
            "kubernetes://Bad_NS",
        ] {
            assert!(text.parse::<StoreUrl>().is_err(), "{text}");
        }
        assert!(
            "ftp://x"
                .parse::<StoreUrl>()
                .unwrap_err()
                .contains("sqlite://PATH")
        );
    }

    #[test]
    fn etcd_access_is_checked_with_the_scheme_and_never_shows_the_password() {
        let access = EtcdAccess {
            ca_file: Some("ca.pem".into()),
            username: Some("root".into()),
            password: Some("pw-secret-2".into()),
            ..EtcdAccess::default()
        };
        let url: StoreUrl = "etcds://a:1".parse().unwrap();
        let url = url.with_etcd_access(access.clone()).unwrap();
        assert_eq!(url.to_string(), "etcds://a:1");
        assert!(!format!("{url:?}").contains("pw-secret-2"), "{url:?}");
        let e = "etcd://a:1"
            .parse::<StoreUrl>()
            .unwrap()
            .with_etcd_access(access.clone())
            .unwrap_err();
        assert!(e.contains("etcds://") && !e.contains("pw-secret-2"), "{e}");
        let e = StoreUrl::Memory.with_etcd_access(access).unwrap_err();
        assert!(e.contains("memory://"), "{e}");
        assert_eq!(
            StoreUrl::Memory.with_etcd_access(EtcdAccess::default()),
            Ok(StoreUrl::Memory)
        );
    }

    /// App statuses on etcd go through a client of their own, not the one the lease
    /// renewals use, and land in the same store.
    #[cfg(feature = "etcd")]
    #[tokio::test]
    async fn statuses_on_etcd_have_a_client_of_their_own() {
        use fleetshard_coord::store::Precondition;
        let etcd = fleetshard_testsupport::etcd::EtcdServer::start().unwrap();
        let url: StoreUrl = etcd.url().parse().unwrap();
        let coordination = url.open().unwrap();
        let statuses = url.open_for_statuses(&coordination).unwrap();
        assert!(!Arc::ptr_eq(&statuses, &coordination.store));
        statuses
            .put("fs-status/a", b"s".to_vec(), Precondition::Absent)
            .await
            .unwrap();
        let seen = coordination.store.list("fs-status/").await.unwrap();
        assert_eq!(seen.entries.len(), 1);
    }

    /// A replica's store on an etcd that serves TLS only, wants a client certificate and
    /// has authentication on: it works with the right files and password, and a wrong
    /// password is a clear error that does not show it.
    #[cfg(feature = "etcd")]
    #[tokio::test]
    async fn a_secured_etcd_is_opened_with_its_files_and_user() {
        let etcd = fleetshard_testsupport::etcd::EtcdServer::start_secured(Some("pw-3")).unwrap();
        let files = etcd.tls_files().unwrap();
        let access = |password: &str| EtcdAccess {
            ca_file: Some(files.ca.clone()),
            cert_file: Some(files.client_cert.clone()),
            key_file: Some(files.client_key.clone()),
            username: Some("root".into()),
            password: Some(password.into()),
        };
        let url: StoreUrl = etcd.url().parse().unwrap();
        let good = url.clone().with_etcd_access(access("pw-3")).unwrap();
        let store = good.open().unwrap().store;
        store
            .put(
                "fs/k",
                b"v".to_vec(),
                fleetshard_coord::store::Precondition::Any,
            )
            .await
            .unwrap();
        assert_eq!(store.list("fs/").await.unwrap().entries.len(), 1);
        let bad = url.with_etcd_access(access("wrong-pw-4")).unwrap();
        let e = bad
            .open()
            .unwrap()
            .store
            .list("fs/")
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("authentication failed"), "{e}");
        assert!(!e.contains("wrong-pw-4"), "{e}");
    }

    #[tokio::test]
    async fn a_store_found_replaced_is_refused_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let url = StoreUrl::Sqlite(path.clone());
        // One-shot commands never create a store.
        for mode in [OpenMode::Existing, OpenMode::ReadOnly] {
            let e = url.open_in(mode).unwrap_err().to_string();
            assert!(e.contains(&path.display().to_string()), "{e}");
            assert!(!path.exists());
        }
        let opened = url.open().unwrap();
        opened.store.list("fs/").await.unwrap();
        assert_eq!(*opened.replaced.borrow(), None);
        std::fs::remove_file(&path).unwrap();
        let e = opened.store.list("fs/").await.unwrap_err().to_string();
        assert!(
            e.starts_with("store replaced: ") && e.contains("no longer exists"),
            "{e}"
        );
        let why = opened.replaced.borrow().clone().unwrap();
        assert!(why.contains(&path.display().to_string()), "{why}");
        // A store at the path again changes nothing for this process.
        drop(url.open().unwrap());
        assert!(opened.store.list("fs/").await.is_err());
        assert!(url.open_in(OpenMode::ReadOnly).is_ok());
    }

    #[test]
    fn memory_opens_and_etcd_without_the_feature_says_how_to_get_it() {
        assert!(StoreUrl::Memory.open().unwrap().kube.is_none());
        #[cfg(not(feature = "etcd"))]
        {
            let e = StoreUrl::Etcd {
                endpoints: vec!["localhost:2379".into()],
                tls: false,
                access: EtcdAccess::default(),
            }
            .open()
            .unwrap_err()
            .to_string();
            assert!(e.contains("--features etcd"), "{e}");
        }
    }
}
