//! [`RepoCache`]: the async face of the Git source, shared by every application of a
//! replica. One slot per repository and credentials (single-flight through a tokio mutex:
//! N applications asking at once cause one fetch), revision resolutions kept for
//! `refresh_interval`, and manifests kept per (slot, commit, path), which never change.
//!
//! A remote slot is keyed by the URL's exact form ([`exact_form`]) and everything the
//! fetch authenticates with ([`RepoAccess`]), hashed with a random salt kept in the cache
//! directory (`.salt`, mode 0600): two applications share a mirror only when they fetch
//! the same URL with the same credentials, and a mirror's name says nothing about them.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use fleetshard_manifest::AppSource;
use fleetshard_util::redact::redact_userinfo;
use gix::ObjectId;
use tokio::sync::OnceCell;
use tokio::time::Instant;

use super::access::RepoAccess;
use super::error::SourceError;
use super::kept::KeptRead;
use super::parse::Manifest;
use super::render::JsonnetJob;
use super::repo::{self, Opened};
use super::url::{RepoLocation, cache_key, exact_form, plaintext_scheme};

pub use super::config::{
    DEFAULT_FETCH_TIMEOUT, DEFAULT_MAX_CACHED_READS, DEFAULT_REFRESH_INTERVAL, ReadLimits,
    RepoCacheConfig,
};

/// Whether a request may use what the cache already knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refresh {
    /// Use a resolution younger than `refresh_interval`.
    Normal,
    /// Use a resolution younger than `refresh_interval` made from data fetched at or after
    /// this instant (fetch, unless a fetch started since). A new owner's first comparison
    /// of an app asks it with the instant it took the cluster over: it never compares at a
    /// commit older than the one its predecessor saw (its own resolution may predate the
    /// predecessor's last sync), and its apps share one fetch per repository.
    ResolvedSince(Instant),
    /// Resolve the revision again now (fetch, unless a fetch started after this request
    /// did), but reuse what was rendered for a commit: Argo CD's `noRevisionCache`, asked
    /// by a refresh annotation and by the first comparison after the app's source changed.
    Resolve,
    /// Fetch now and render again (Argo CD's hard refresh: `noCache` too), unless a fetch
    /// started after this request did.
    Hard,
}

/// The desired objects of one source at one commit.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifests {
    /// The commit `targetRevision` resolved to (full hex id).
    pub commit: String,
    /// The objects, in reading order.
    pub objects: Vec<Manifest>,
}

/// A repository opened at a resolved commit.
pub(crate) struct Snapshot {
    /// The repository slot's key (names the repository and credentials, salted).
    pub(crate) key: String,
    /// The commit.
    pub(crate) commit: ObjectId,
    /// The repository.
    pub(crate) opened: Opened,
}

/// Counters of the work done, for metrics and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheStats {
    /// Fetches of a mirror, or openings of a local repository (which re-reads its refs).
    pub fetches: u64,
    /// Revisions resolved against a repository (not answered from the cache).
    pub resolutions: u64,
    /// Trees read and parsed (not answered from the cache).
    pub reads: u64,
}

/// Clones, fetches and reads Git repositories for many applications at once.
///
/// Cheap to clone (shared state). gix is blocking, so every Git operation runs on tokio's
/// blocking pool.
#[derive(Clone)]
pub struct RepoCache {
    inner: Arc<Inner>,
}

struct Inner {
    config: RepoCacheConfig,
    slots: Mutex<HashMap<String, Arc<Slot>>>,
    reads: Mutex<Reads>,
    fetches: AtomicU64,
    resolutions: AtomicU64,
    reads_done: AtomicU64,
    /// The key of the slot names' hash, read (or made) once.
    salt: OnceLock<Vec<u8>>,
}

/// One repository fetched with one set of credentials.
struct Slot {
    key: String,
    location: RepoLocation,
    access: RepoAccess,
    state: tokio::sync::Mutex<SlotState>,
    /// Held by the blocking fetch itself: a fetch abandoned at its timeout still owns the
    /// mirror directory until its transport gives up, and the next one waits for it.
    disk: Arc<Mutex<()>>,
}

#[derive(Default)]
struct SlotState {
    opened: Option<Opened>,
    /// When the data in `opened` was last fetched (or the refs re-read).
    refreshed_at: Option<Instant>,
    /// Revision → (commit, time of the data it was resolved against).
    resolved: HashMap<String, (ObjectId, Instant)>,
}

type ReadResult = Result<Arc<Manifests>, SourceError>;
/// A read as cached: its objects kept as text (`kept.rs`).
type KeptResult = Result<Arc<KeptRead>, SourceError>;
type ReadKey = (String, ObjectId, String);

#[derive(Default)]
struct Reads {
    cells: HashMap<ReadKey, Arc<OnceCell<KeptResult>>>,
    order: VecDeque<ReadKey>,
}

impl RepoCache {
    /// A cache with `config`; nothing is read until asked.
    pub fn new(config: RepoCacheConfig) -> Self {
        RepoCache {
            inner: Arc::new(Inner {
                config,
                slots: Mutex::new(HashMap::new()),
                reads: Mutex::new(Reads::default()),
                fetches: AtomicU64::new(0),
                resolutions: AtomicU64::new(0),
                reads_done: AtomicU64::new(0),
                salt: OnceLock::new(),
            }),
        }
    }

    /// What the cache has done so far.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            fetches: self.inner.fetches.load(Ordering::Relaxed),
            resolutions: self.inner.resolutions.load(Ordering::Relaxed),
            reads: self.inner.reads_done.load(Ordering::Relaxed),
        }
    }

    /// The desired objects of `source`, read anonymously ([`RepoCache::manifests_with`]).
    pub async fn manifests(&self, source: &AppSource, refresh: Refresh) -> ReadResult {
        self.manifests_with(source, &RepoAccess::anonymous(), refresh)
            .await
    }

    /// The desired objects of `source`: its `targetRevision` resolved (see
    /// [`RepoCache::resolve`]), and the manifests under its `path` at that commit, fetched
    /// with `access`.
    pub async fn manifests_with(
        &self,
        source: &AppSource,
        access: &RepoAccess,
        refresh: Refresh,
    ) -> ReadResult {
        let snapshot = self
            .snapshot(&source.repo_url, access, &source.target_revision, refresh)
            .await?;
        self.read_directory(&snapshot, source, None).await
    }

    /// The repository of `repo_url`, fetched with `access`, with `revision` resolved (see
    /// [`RepoCache::resolve_with`]): what a renderer reads the commit's tree from.
    pub(crate) async fn snapshot(
        &self,
        repo_url: &str,
        access: &RepoAccess,
        revision: &str,
        refresh: Refresh,
    ) -> Result<Snapshot, SourceError> {
        let (slot, commit, opened) = self
            .resolve_inner(repo_url, access, revision, refresh)
            .await?;
        Ok(Snapshot {
            key: slot.key.clone(),
            commit,
            opened,
        })
    }

    /// The limits of one app's manifests.
    pub(crate) fn limits(&self) -> ReadLimits {
        self.inner.config.limits
    }

    /// The manifests under `source.path` of the snapshot's commit, read as a directory
    /// app; its Jsonnet files evaluated with `jsonnet`, or refused without it. Cached per
    /// (repository, commit, path, directory options, Jsonnet job).
    pub(crate) async fn read_directory(
        &self,
        snapshot: &Snapshot,
        source: &AppSource,
        jsonnet: Option<Arc<JsonnetJob>>,
    ) -> ReadResult {
        let repo_url = source.repo_url.as_str();
        let path = repo::clean_path(repo_url, &source.path)?;
        let (commit, opened) = (snapshot.commit, snapshot.opened.clone());
        let dir = &source.directory;
        // The directory options change what is read, so they are part of the key.
        let key = (
            snapshot.key.clone(),
            commit,
            format!(
                "{}\0{}\0{}\0{}\0{}",
                path.join("/"),
                dir.recurse,
                dir.include,
                dir.exclude,
                jsonnet.as_ref().map_or("", |j| j.key())
            ),
        );
        let directory = dir.clone();
        let limits = self.inner.config.limits;
        let cell = self.read_cell(&key);
        let result = cell
            .get_or_init(|| {
                let repo_url = repo_url.to_owned();
                let revision = source.target_revision.clone();
                let inner = Arc::clone(&self.inner);
                async move {
                    let task_repo = repo_url.clone();
                    let read = tokio::task::spawn_blocking(move || {
                        inner.reads_done.fetch_add(1, Ordering::Relaxed);
                        let at = repo::At {
                            opened: &opened,
                            repo_url: &task_repo,
                            revision: &revision,
                            commit,
                        };
                        repo::read_manifests(&at, &path, &directory, &limits, jsonnet.as_deref())
                    })
                    .await;
                    match read {
                        Ok(Ok(objects)) => Ok(Arc::new(KeptRead::new(commit.to_string(), objects))),
                        Ok(Err(e)) => Err(e),
                        Err(join) => Err(SourceError::Task {
                            repo: repo_url,
                            message: join.to_string(),
                        }),
                    }
                }
            })
            .await
            .clone()
            .and_then(|kept| kept.manifests(repo_url));
        if let Err(e) = &result
            && !is_permanent(e)
        {
            // A transient failure must be retried by the next call, not remembered.
            self.forget_read(&key, &cell);
        }
        // A cached error names the revision of the request that made it.
        result.map_err(|e| with_revision(e, &source.target_revision))
    }

    /// Resolves `revision` of `repo_url` to a commit (full hex id), anonymously
    /// ([`RepoCache::resolve_with`]).
    pub async fn resolve(
        &self,
        repo_url: &str,
        revision: &str,
        refresh: Refresh,
    ) -> Result<String, SourceError> {
        self.resolve_with(repo_url, &RepoAccess::anonymous(), revision, refresh)
            .await
    }

    /// Resolves `revision` of `repo_url`, fetched with `access`, to a commit (full hex id).
    ///
    /// A resolution younger than `refresh_interval` is reused (a full commit id, forever);
    /// otherwise the repository is fetched (a remote one, or a local one with
    /// `mirror_local`) or its references re-read (a local one), at most once per interval
    /// whatever the number of revisions and callers. A revision not found in data older
    /// than this call is looked for again after one more fetch.
    pub async fn resolve_with(
        &self,
        repo_url: &str,
        access: &RepoAccess,
        revision: &str,
        refresh: Refresh,
    ) -> Result<String, SourceError> {
        let (_, commit, _) = self
            .resolve_inner(repo_url, access, revision, refresh)
            .await?;
        Ok(commit.to_string())
    }

    async fn resolve_inner(
        &self,
        repo_url: &str,
        access: &RepoAccess,
        revision: &str,
        refresh: Refresh,
    ) -> Result<(Arc<Slot>, ObjectId, Opened), SourceError> {
        let requested_at = Instant::now();
        let slot = self.slot(repo_url, access)?;
        let interval = self.inner.config.refresh_interval;
        // Held across the fetch: this is the single flight. Other repositories have their
        // own slot and are not held up.
        let mut state = slot.state.lock().await;
        let now = Instant::now();
        let fresh = |at: Instant| now.saturating_duration_since(at) < interval;
        // The data must have been fetched at or after this instant.
        let since = match refresh {
            Refresh::Normal => None,
            Refresh::ResolvedSince(at) => Some(at),
            Refresh::Resolve | Refresh::Hard => Some(requested_at),
        };
        let recent = |at: Instant| fresh(at) && since.is_none_or(|s| at >= s);
        let is_commit_id = revision.len() == 40 && revision.bytes().all(|b| b.is_ascii_hexdigit());
        if let (Some(opened), Some(&(commit, at))) = (&state.opened, state.resolved.get(revision))
            && matches!(refresh, Refresh::Normal | Refresh::ResolvedSince(_))
            && (is_commit_id || recent(at))
        {
            return Ok((Arc::clone(&slot), commit, opened.clone()));
        }
        let need_fetch = state.opened.is_none() || !state.refreshed_at.is_some_and(recent);
        let mut fetched = false;
        if need_fetch {
            self.fetch(&slot, repo_url, &mut state).await?;
            fetched = true;
        }
        let result = match self.resolve_blocking(&state, repo_url, revision).await {
            Err(SourceError::RevisionNotFound { .. }) if !fetched => {
                // The data may predate the revision (a new branch, a just-pushed commit).
                self.fetch(&slot, repo_url, &mut state).await?;
                self.resolve_blocking(&state, repo_url, revision).await
            }
            other => other,
        };
        let (commit, opened) = result?;
        let data_time = state.refreshed_at.unwrap_or(now);
        state
            .resolved
            .insert(revision.to_owned(), (commit, data_time));
        Ok((Arc::clone(&slot), commit, opened))
    }

    /// Fetches the mirror or reopens the local repository.
    async fn fetch(
        &self,
        slot: &Slot,
        repo_url: &str,
        state: &mut SlotState,
    ) -> Result<(), SourceError> {
        let started = Instant::now();
        let location = slot.location.clone();
        let mirror_dir = self
            .inner
            .config
            .cache_dir
            .join(format!("{}.git", slot.key));
        let mirror_local = self.inner.config.mirror_local;
        let task_repo = repo_url.to_owned();
        let access = slot.access.clone();
        let disk = Arc::clone(&slot.disk);
        let interrupt = Arc::new(AtomicBool::new(false));
        let task_interrupt = Arc::clone(&interrupt);
        self.inner.fetches.fetch_add(1, Ordering::Relaxed);
        let task = tokio::task::spawn_blocking(move || {
            let _disk = lock(&disk);
            let interrupt = &*task_interrupt;
            match location {
                RepoLocation::Local(path) if !mirror_local => repo::open_local(&task_repo, &path),
                RepoLocation::Local(path) => {
                    let url = path.to_string_lossy();
                    let anonymous = RepoAccess::anonymous();
                    repo::fetch_mirror(&task_repo, &url, &mirror_dir, &anonymous, interrupt)
                }
                RepoLocation::Remote(url) => {
                    repo::fetch_mirror(&task_repo, &url, &mirror_dir, &access, interrupt)
                }
            }
        });
        let timeout = self.inner.config.fetch_timeout;
        let Ok(joined) = tokio::time::timeout(timeout, task).await else {
            // The transfer stops at its next read; the transports' own timeouts end a
            // connection that sends nothing.
            interrupt.store(true, Ordering::Relaxed);
            return Err(SourceError::Fetch {
                repo: repo_url.to_owned(),
                message: format!(
                    "no answer within {} s (the fetch timeout); the server is unreachable or too slow",
                    timeout.as_secs()
                ),
            });
        };
        let opened = joined.map_err(|join| SourceError::Task {
            repo: repo_url.to_owned(),
            message: join.to_string(),
        })??;
        // Large trees stay indexed across reopenings (`Opened::keeping_trees_of`).
        state.opened = Some(opened.keeping_trees_of(state.opened.as_ref()));
        state.refreshed_at = Some(started);
        Ok(())
    }

    async fn resolve_blocking(
        &self,
        state: &SlotState,
        repo_url: &str,
        revision: &str,
    ) -> Result<(ObjectId, Opened), SourceError> {
        let Some(opened) = state.opened.clone() else {
            return Err(SourceError::Task {
                repo: repo_url.to_owned(),
                message: "repository not opened".into(),
            });
        };
        self.inner.resolutions.fetch_add(1, Ordering::Relaxed);
        let (task_repo, task_revision) = (repo_url.to_owned(), revision.to_owned());
        tokio::task::spawn_blocking(move || {
            repo::resolve(&opened, &task_repo, &task_revision).map(|id| (id, opened))
        })
        .await
        .map_err(|join| SourceError::Task {
            repo: repo_url.to_owned(),
            message: join.to_string(),
        })?
    }

    /// Refuses what this cache may never read, once per new slot (the settings do not
    /// change): a local repository when local reads are off, and always one inside the
    /// cache directory (another app's mirror, or the cache's salt); plaintext `http://`
    /// and `git://` when refused, else warned about.
    fn admit(&self, repo_url: &str, location: &RepoLocation) -> Result<(), SourceError> {
        let refused = |reason: &str| SourceError::UnsupportedUrl {
            repo: repo_url.to_owned(),
            reason: reason.to_owned(),
        };
        let config = &self.inner.config;
        match location {
            RepoLocation::Local(_) if !config.allow_local => Err(refused(
                "a local repository (file:// or a path) is refused when the apps are Argo CD's \
                 objects: it would read the replica's own files (--allow-local-repositories \
                 allows it)",
            )),
            RepoLocation::Local(path) => {
                let canonical =
                    |p: &std::path::Path| std::fs::canonicalize(p).unwrap_or(p.to_owned());
                if canonical(path).starts_with(canonical(&config.cache_dir)) {
                    return Err(refused(
                        "a path inside the repository cache is never read: it holds other \
                         apps' repositories",
                    ));
                }
                Ok(())
            }
            RepoLocation::Remote(url) if let Some(scheme) = plaintext_scheme(url) => {
                if config.refuse_plaintext {
                    return Err(refused(&format!(
                        "plaintext {scheme}:// is refused by --refuse-plaintext-http: \
                         credentials and manifests would cross the network in clear"
                    )));
                }
                tracing::warn!(
                    repo = %redact_userinfo(url),
                    "plaintext {scheme}:// repository: credentials and manifests cross the \
                     network in clear (--refuse-plaintext-http refuses it)"
                );
                Ok(())
            }
            RepoLocation::Remote(_) => Ok(()),
        }
    }

    /// The slot of `repo_url` fetched with `access`, created on first use. Spellings
    /// with the same exact form share one slot, with the same credentials only.
    fn slot(&self, repo_url: &str, access: &RepoAccess) -> Result<Arc<Slot>, SourceError> {
        let location = RepoLocation::parse(repo_url)?;
        let (key, access) = match &location {
            RepoLocation::Local(path) => (
                cache_key(&[format!("local:{}", path.display()).as_bytes()], b""),
                RepoAccess::anonymous(),
            ),
            RepoLocation::Remote(url) => {
                let salt = self.salt(repo_url)?;
                let (exact, digest) = (exact_form(url), access.digest_input());
                let parts: [&[u8]; 2] = [exact.as_bytes(), &digest];
                (cache_key(&parts, salt), access.clone())
            }
        };
        if let Some(slot) = lock(&self.inner.slots).get(&key) {
            return Ok(Arc::clone(slot));
        }
        // A new slot: checked once, outside the lock (the checks may touch the disk).
        self.admit(repo_url, &location)?;
        let mut slots = lock(&self.inner.slots);
        let slot = slots.entry(key.clone()).or_insert_with(|| {
            Arc::new(Slot {
                key,
                location,
                access,
                state: tokio::sync::Mutex::new(SlotState::default()),
                disk: Arc::new(Mutex::new(())),
            })
        });
        Ok(Arc::clone(slot))
    }

    /// The cache directory's salt (`.salt`, 32 random bytes, made on first use).
    fn salt(&self, repo_url: &str) -> Result<&[u8], SourceError> {
        if let Some(salt) = self.inner.salt.get() {
            return Ok(salt);
        }
        let salt = super::config::read_or_make_salt(&self.inner.config.cache_dir).map_err(|e| {
            SourceError::Git {
                repo: repo_url.to_owned(),
                message: format!(
                    "cannot read or create the cache's salt in {}: {e}",
                    self.inner.config.cache_dir.display()
                ),
            }
        })?;
        Ok(self.inner.salt.get_or_init(|| salt))
    }

    /// The read cell of `key`, created (and the oldest evicted) on first use.
    fn read_cell(&self, key: &ReadKey) -> Arc<OnceCell<KeptResult>> {
        let mut reads = lock(&self.inner.reads);
        if let Some(cell) = reads.cells.get(key) {
            return Arc::clone(cell);
        }
        let cell = Arc::new(OnceCell::new());
        reads.cells.insert(key.clone(), Arc::clone(&cell));
        reads.order.push_back(key.clone());
        while reads.cells.len() > self.inner.config.max_cached_reads.max(1) {
            // Waiters on an evicted cell keep it alive and still get its answer.
            let Some(oldest) = reads.order.pop_front() else {
                break;
            };
            reads.cells.remove(&oldest);
        }
        cell
    }

    /// Drops `key`'s cell if it is still `cell`.
    fn forget_read(&self, key: &ReadKey, cell: &Arc<OnceCell<KeptResult>>) {
        let mut reads = lock(&self.inner.reads);
        if reads.cells.get(key).is_some_and(|c| Arc::ptr_eq(c, cell)) {
            reads.cells.remove(key);
            reads.order.retain(|k| k != key);
        }
    }
}

/// A poisoned lock only means another thread panicked while holding it; the maps stay
/// consistent (every update is a single insert or remove), so keep going.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Errors that depend only on the commit's content, and so hold for as long as it does.
fn is_permanent(e: &SourceError) -> bool {
    matches!(
        e,
        SourceError::PathNotFound { .. }
            | SourceError::Manifest { .. }
            | SourceError::UnsupportedSource { .. }
            | SourceError::Render { .. }
    )
}

/// `e` naming `revision` (a read cached for one spelling of a commit may serve another).
fn with_revision(mut e: SourceError, revision: &str) -> SourceError {
    match &mut e {
        SourceError::PathNotFound { revision: r, .. }
        | SourceError::Manifest { revision: r, .. }
        | SourceError::UnsupportedSource { revision: r, .. }
        | SourceError::Render { revision: r, .. } => *r = revision.to_owned(),
        _ => {}
    }
    e
}

#[cfg(test)]
mod tests;
