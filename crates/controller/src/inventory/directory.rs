//! A directory of manifests as an inventory source.
//!
//! Every `*.yaml`, `*.yml` and `*.json` file under the directory (recursively; names that
//! start with `.` are skipped, which also skips the `..data` links of a mounted ConfigMap)
//! is read with the manifest crate's
//! [`parse_input_bytes`](fleetshard_manifest::parse_input_bytes):
//! Argo CD cluster Secrets and Applications as `kubectl get -o yaml` exports them, `List`s,
//! multi-document files, or a native fleet file.
//!
//! **Change detection is polling**: every `poll_interval` (1 s by default) the directory is
//! listed and each file's (path, modification time, size) compared with the previous scan;
//! only files whose stamp changed are read again. Polling was chosen over inotify because it
//! is portable, needs no dependency, and works on network and ConfigMap-mounted volumes
//! where events are unreliable; a fleet directory changes rarely, so a second of delay is
//! fine. The cost when nothing changed is one `stat` per file. Limit: a rewrite within the
//! filesystem's timestamp granularity that keeps the size is missed until the next change.
//!
//! **One copy of the applications and clusters.** A file's applications (with their
//! specs), clusters and cluster credentials are held here only until they are published;
//! then only their keys are, and the next assembly takes them from the published
//! inventory (the only writer of which is this source; [`held`]). What is not published
//! as the file has it (an application another file's shadows, say) stays held whole. At
//! 100,000 applications the second copy was about 51 MiB per replica, at 10,000 clusters
//! with their credentials about 15 MiB (heap profiles, `docs/performance.md`).
//!
//! A file that fails to parse (or to read) keeps the objects it had at its last good read,
//! and a [`Problem`] names the file, the object and the field; a deleted file's objects
//! leave the inventory. One Application that cannot be placed (no name, no destination,
//! a destination of the wrong shape) is named in a [`Problem`] and left out, and the
//! file's other objects load; one with a malformed GitOps part (source, sync policy,
//! operation) loads with a refusal naming the field (its own condition). An application key (namespace/name) seen in two files is kept from
//! the first file in path order, and the second is reported.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use fleetshard_manifest::{AppProject, InputFormat, LoadError, RepoSettings};
use tokio::time::MissedTickBehavior;

use super::{
    Inventory, InventoryContent, InventorySnapshot, Problem, Severity, check_app, specs_by_app_key,
};
use crate::AppKey;

mod held;
use held::{FileApp, FileCluster, FileCredentials, Published};

/// Where to read from and how often to look for changes.
#[derive(Debug, Clone)]
pub struct DirectoryConfig {
    /// The directory (read recursively).
    pub dir: PathBuf,
    /// Time between scans (default 1 s).
    pub poll_interval: Duration,
    /// Argo CD's in-cluster destination (default true): when the directory holds Argo CD's
    /// objects and no native fleet file, its clusters are completed into Argo CD's cluster
    /// list ([`InventoryContent::complete_argo_cluster_list`]).
    pub in_cluster_enabled: bool,
}

impl DirectoryConfig {
    /// Reads `dir` every second.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        DirectoryConfig {
            dir: dir.into(),
            poll_interval: Duration::from_secs(1),
            in_cluster_enabled: true,
        }
    }
}

/// What a scan compares to decide that a file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    /// Modification time since the Unix epoch, when the filesystem has one.
    pub modified: Option<Duration>,
    /// Size in bytes.
    pub len: u64,
}

/// The filesystem as the directory source sees it (injected so that tests can drive the
/// polling logic under paused time).
pub trait Files: Send + Sync + 'static {
    /// Whether `list` and `read` do real I/O; if so, scans run on tokio's blocking pool.
    const BLOCKING: bool = true;
    /// The manifest files under `dir`, with their stamps, in path order.
    fn list(&self, dir: &Path) -> io::Result<Vec<(PathBuf, FileStamp)>>;
    /// The bytes of one file.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
}

/// The real filesystem.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealFiles;

impl Files for RealFiles {
    fn list(&self, dir: &Path) -> io::Result<Vec<(PathBuf, FileStamp)>> {
        let mut out = Vec::new();
        walk(dir, &mut out)?;
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        std::fs::read(path)
    }
}

fn walk(dir: &Path, out: &mut Vec<(PathBuf, FileStamp)>) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        // `metadata` follows symbolic links, so a link's stamp is its target's.
        let Ok(meta) = std::fs::metadata(&path) else {
            // Removed between the listing and now, or a dangling link: not a file.
            continue;
        };
        if meta.is_dir() {
            walk(&path, out)?;
        } else if meta.is_file() && is_manifest(&path) {
            let modified = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
            out.push((
                path,
                FileStamp {
                    modified,
                    len: meta.len(),
                },
            ));
        }
    }
    Ok(())
}

fn is_manifest(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml" | "json")
    )
}

/// What one file contributed at its last good read.
#[derive(Debug, Default)]
struct Content {
    /// The file's clusters, in its order.
    clusters: Vec<FileCluster>,
    /// The file's applications, in its order.
    apps: Vec<FileApp>,
    credentials: BTreeMap<String, FileCredentials>,
    projects: BTreeMap<String, Arc<AppProject>>,
    repositories: RepoSettings,
    format: InputFormat,
}

#[derive(Debug)]
struct FileEntry {
    stamp: FileStamp,
    good: Option<Content>,
    problems: Vec<Problem>,
}

/// Reads a directory into an [`Inventory`] and keeps it current (see the module
/// documentation).
#[derive(Debug)]
pub struct DirectorySource<F: Files = RealFiles> {
    config: DirectoryConfig,
    files: F,
    entries: BTreeMap<PathBuf, FileEntry>,
    listing_problem: Option<Problem>,
    listed: bool,
}

impl DirectorySource<RealFiles> {
    /// A source over the real filesystem.
    pub fn new(config: DirectoryConfig) -> Self {
        Self::with_files(config, RealFiles)
    }
}

impl<F: Files> DirectorySource<F> {
    /// A source over `files` (tests inject an in-memory filesystem).
    pub fn with_files(config: DirectoryConfig, files: F) -> Self {
        DirectorySource {
            config,
            files,
            entries: BTreeMap::new(),
            listing_problem: None,
            listed: false,
        }
    }

    /// Loads the directory, publishes it, then polls for changes forever (abort the task
    /// to stop). Publishes only after a scan that saw a change.
    pub async fn run(mut self, inventory: Inventory) {
        let mut tick = tokio::time::interval(self.config.poll_interval);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let changed;
            if F::BLOCKING {
                let joined = tokio::task::spawn_blocking(move || {
                    let changed = self.scan();
                    (self, changed)
                })
                .await;
                match joined {
                    Ok((source, c)) => (self, changed) = (source, c),
                    // A panic in the scan is a bug: let it surface in this task.
                    Err(e) => std::panic::resume_unwind(e.into_panic()),
                }
            } else {
                changed = self.scan();
            }
            if changed {
                let (content, problems) = self.assemble(&inventory.snapshot());
                inventory.publish(content, problems, self.listed);
            }
        }
    }

    /// One scan: re-reads files whose stamp changed, drops deleted ones. Returns whether
    /// anything the inventory shows may have changed.
    fn scan(&mut self) -> bool {
        let dir = &self.config.dir;
        let listing = match self.files.list(dir) {
            Ok(listing) => listing,
            Err(e) => {
                let source = dir.display().to_string();
                let problem = Problem::error(
                    &source,
                    "directory",
                    None,
                    &format!("cannot list: {e}; keeping the files read before"),
                );
                let changed = self.listing_problem.as_ref() != Some(&problem);
                self.listing_problem = Some(problem);
                return changed;
            }
        };
        let mut changed = self.listing_problem.take().is_some() || !self.listed;
        self.listed = true;
        let mut next = BTreeMap::new();
        for (path, stamp) in listing {
            let entry = match self.entries.remove(&path) {
                Some(entry) if entry.stamp == stamp => entry,
                old => {
                    changed = true;
                    let good = old.and_then(|e| e.good);
                    self.load(&path, stamp, good)
                }
            };
            next.insert(path, entry);
        }
        // What is left was deleted.
        changed |= !self.entries.is_empty();
        self.entries = next;
        changed
    }

    /// Reads one file; on failure keeps `good` (the previous content) and names the problem.
    fn load(&self, path: &Path, stamp: FileStamp, good: Option<Content>) -> FileEntry {
        let source = path.display().to_string();
        let failed = |problem: Problem| FileEntry {
            stamp,
            good,
            problems: vec![problem],
        };
        let bytes = match self.files.read(path) {
            Ok(bytes) => bytes,
            Err(e) => {
                let error = LoadError::Read {
                    path: path.to_owned(),
                    source: e,
                };
                return failed(Problem::from_load_error(&error));
            }
        };
        let loaded = match fleetshard_manifest::parse_input_bytes(&bytes, &source) {
            Ok(loaded) => loaded,
            Err(e) => return failed(Problem::from_load_error(&e)),
        };
        let mut problems: Vec<Problem> =
            loaded.warnings.iter().map(Problem::from_warning).collect();
        let mut file = loaded.value;
        // An application that deploys nowhere is named and left out; the file's others
        // still load.
        file.fleet.apps.retain(|app| match check_app(app, &source) {
            Ok(()) => true,
            Err(problem) => {
                file.specs
                    .remove(&(app.namespace.clone(), app.name.clone()));
                problems.push(problem);
                false
            }
        });
        if !file.shards.is_empty() {
            problems.push(Problem {
                severity: Severity::Warning,
                ..Problem::error(
                    &source,
                    "fleet file",
                    Some("shards"),
                    "shards are decided by coordination, not by the inventory; ignored",
                )
            });
        }
        let mut specs = specs_by_app_key(file.specs);
        let apps = file
            .fleet
            .apps
            .into_iter()
            .map(|app| {
                let spec = specs.remove(&AppKey::of(&app));
                FileApp::Whole(Box::new((app, spec)))
            })
            .collect();
        FileEntry {
            stamp,
            good: Some(Content {
                clusters: (file.fleet.clusters.into_iter())
                    .map(|c| FileCluster::Whole(Box::new(c)))
                    .collect(),
                apps,
                credentials: (file.credentials.into_iter())
                    .map(|(id, c)| (id, FileCredentials::Whole(Box::new(c))))
                    .collect(),
                projects: super::shared_projects(file.projects),
                repositories: file.repositories,
                format: file.format,
            }),
            problems,
        }
    }

    /// The inventory's content: files in path order, duplicate application keys dropped
    /// (first file wins) and reported.
    /// `last`: the inventory as this source last published it (what a file holds by key
    /// or id is taken from there, [`held`]). What is published now is marked so.
    fn assemble(&mut self, last: &InventorySnapshot) -> (InventoryContent, Vec<Problem>) {
        let mut content = InventoryContent::default();
        let mut problems: Vec<Problem> = self.listing_problem.iter().cloned().collect();
        let mut seen: HashMap<AppKey, &Path> = HashMap::new();
        let taken_back = Published::of(last);
        let (mut argo_objects, mut native) = (false, false);
        for (path, entry) in &mut self.entries {
            problems.extend(entry.problems.iter().cloned());
            let Some(good) = &mut entry.good else {
                continue;
            };
            argo_objects |= good.format == InputFormat::Kubernetes;
            native |= good.format == InputFormat::Native;
            taken_back.take_back(&mut good.clusters, &mut good.credentials);
            content
                .clusters
                .extend(held::whole_clusters(&good.clusters).cloned());
            content.credentials.extend(
                held::whole_credentials(&good.credentials).map(|(id, c)| (id.clone(), c.clone())),
            );
            for (name, project) in &good.projects {
                if content.projects.contains_key(name) {
                    let source = path.display().to_string();
                    problems.push(Problem::error(
                        &source,
                        &format!("AppProject {name}"),
                        None,
                        "also defined in an earlier file; the first file's definition is used",
                    ));
                    continue;
                }
                content.projects.insert(name.clone(), project.clone());
            }
            // Files in path order: a later file's ConfigMap replaces an earlier one's.
            content.repositories.merge(good.repositories.clone());
            for held in std::mem::take(&mut good.apps) {
                let (key, app, spec) = match held {
                    FileApp::Whole(held) => {
                        let (app, spec) = *held;
                        (AppKey::of(&app), app, spec)
                    }
                    FileApp::Published(key) => {
                        let Some((app, spec)) = taken_back.app(&key) else {
                            continue;
                        };
                        (key, app, spec)
                    }
                };
                if let Some(first) = seen.get(&key) {
                    let source = path.display().to_string();
                    let object = format!("Application {}/{}", app.namespace, app.name);
                    let why = format!(
                        "also defined in {}; the first file's definition is used",
                        first.display()
                    );
                    problems.push(Problem::error(&source, &object, None, &why));
                    good.apps.push(FileApp::Whole(Box::new((app, spec))));
                    continue;
                }
                seen.insert(key.clone(), path);
                if let Some(spec) = spec {
                    content.specs.insert(key.clone(), spec);
                }
                content.apps.push(app);
                good.apps.push(FileApp::Published(key));
            }
            good.apps.shrink_to_fit();
        }
        // Argo CD's objects alone are Argo CD's view, built-in in-cluster entry included;
        // a native fleet file names the whole fleet.
        if argo_objects && !native {
            let source = self.config.dir.display().to_string();
            content.complete_argo_cluster_list(
                self.config.in_cluster_enabled,
                &source,
                &mut problems,
            );
        }
        let unique = held::unique_clusters(&content);
        for good in self.entries.values_mut().filter_map(|e| e.good.as_mut()) {
            held::mark_published(&unique, &content, &mut good.clusters, &mut good.credentials);
        }
        (content, problems)
    }
}

/// An in-memory [`Files`] for tests of the polling logic: files are set and removed
/// directly, and every read is counted.
#[derive(Debug, Clone, Default)]
pub struct MemoryFiles {
    inner: Arc<std::sync::Mutex<MemoryState>>,
}

#[derive(Debug, Default)]
struct MemoryState {
    files: BTreeMap<PathBuf, (FileStamp, Vec<u8>)>,
    tick: u64,
    reads: u64,
    fail_list: bool,
}

impl MemoryFiles {
    fn state(&self) -> std::sync::MutexGuard<'_, MemoryState> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Writes a file, giving it a new modification time.
    pub fn write(&self, path: impl Into<PathBuf>, contents: &str) {
        let mut s = self.state();
        s.tick += 1;
        let stamp = FileStamp {
            modified: Some(Duration::from_secs(s.tick)),
            len: contents.len() as u64,
        };
        s.files
            .insert(path.into(), (stamp, contents.as_bytes().to_vec()));
    }

    /// Removes a file.
    pub fn remove(&self, path: impl AsRef<Path>) {
        self.state().files.remove(path.as_ref());
    }

    /// How many files have been read so far.
    pub fn reads(&self) -> u64 {
        self.state().reads
    }

    /// Makes listing fail (as an unmounted volume would) until set back.
    pub fn fail_listing(&self, fail: bool) {
        self.state().fail_list = fail;
    }
}

impl Files for MemoryFiles {
    const BLOCKING: bool = false;

    fn list(&self, dir: &Path) -> io::Result<Vec<(PathBuf, FileStamp)>> {
        let s = self.state();
        if s.fail_list {
            return Err(io::Error::new(io::ErrorKind::NotFound, "no such directory"));
        }
        Ok(s.files
            .iter()
            .filter(|(p, _)| p.starts_with(dir))
            .map(|(p, (stamp, _))| (p.clone(), *stamp))
            .collect())
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let mut s = self.state();
        s.reads += 1;
        s.files
            .get(path)
            .map(|(_, bytes)| bytes.clone())
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such file"))
    }
}

#[cfg(test)]
mod tests;
