//! How a [`RepoCache`](super::RepoCache) is set up: where it mirrors, how long it trusts a
//! resolution, how long a fetch may take, what one app may read, and which URLs it refuses.

use std::path::PathBuf;
use std::time::Duration;

/// Parsed manifest sets (repository, commit, path) kept by default: at least the apps one
/// replica owns, or every refresh reads Git again.
pub const DEFAULT_MAX_CACHED_READS: usize = 16_384;

/// Argo CD's default reconciliation period (`timeout.reconciliation`).
pub const DEFAULT_REFRESH_INTERVAL: Duration = Duration::from_secs(180);

/// The longest one fetch may take, whatever the transport does (a server that trickles
/// data, a `git://` daemon that never answers): the application gets a condition.
pub const DEFAULT_FETCH_TIMEOUT: Duration = Duration::from_secs(300);

/// How [`RepoCache`](super::RepoCache) behaves.
#[derive(Debug, Clone)]
pub struct RepoCacheConfig {
    /// Where remote repositories are mirrored (one bare repository per URL).
    pub cache_dir: PathBuf,
    /// How long a resolved branch or tag is trusted before the repository is fetched (or,
    /// for a local repository, its references read) again.
    pub refresh_interval: Duration,
    /// Mirror local repositories into `cache_dir` too, as remote ones (through
    /// `git-upload-pack`, like Argo CD's clones), instead of reading them in place.
    pub mirror_local: bool,
    /// How many (repository, commit, path) reads are kept; the oldest go first.
    pub max_cached_reads: usize,
    /// The longest one fetch may take ([`DEFAULT_FETCH_TIMEOUT`]).
    pub fetch_timeout: Duration,
    /// How much one app's manifests may be.
    pub limits: ReadLimits,
    /// Whether `file://` URLs and local paths may be read at all. Off when the apps are
    /// Argo CD's objects (a tenant could otherwise read the replica's own files); a local
    /// path inside `cache_dir` is refused even when on.
    pub allow_local: bool,
    /// Refuse plaintext `http://` repositories (credentials and content would cross the
    /// network in clear); otherwise each is warned about once.
    pub refuse_plaintext: bool,
}

/// How much one app's manifests may be: one app cannot exhaust the replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLimits {
    /// Bytes of manifest files read for one app, and of a renderer's output (Argo CD's
    /// repo-server bounds a directory's combined manifests at 10 MiB by default; so does
    /// this, and it bounds Kustomize, Helm and Jsonnet output too, which Argo CD does not).
    pub max_manifest_bytes: u64,
    /// Objects one app may render to.
    pub max_objects: usize,
    /// Bytes of the repository tree written to disk for a renderer that reads files
    /// itself (`kustomize build`, `helm template`).
    pub max_tree_bytes: u64,
}

impl Default for ReadLimits {
    fn default() -> Self {
        ReadLimits {
            max_manifest_bytes: 10 * 1024 * 1024,
            max_objects: 10_000,
            max_tree_bytes: 256 * 1024 * 1024,
        }
    }
}

impl RepoCacheConfig {
    /// Defaults: refresh every [`DEFAULT_REFRESH_INTERVAL`], local repositories read in
    /// place, [`DEFAULT_MAX_CACHED_READS`] reads kept, fetches bounded by
    /// [`DEFAULT_FETCH_TIMEOUT`].
    pub fn new(cache_dir: impl Into<PathBuf>) -> Self {
        RepoCacheConfig {
            cache_dir: cache_dir.into(),
            refresh_interval: DEFAULT_REFRESH_INTERVAL,
            mirror_local: false,
            max_cached_reads: DEFAULT_MAX_CACHED_READS,
            fetch_timeout: DEFAULT_FETCH_TIMEOUT,
            limits: ReadLimits::default(),
            allow_local: true,
            refuse_plaintext: false,
        }
    }
}

/// `dir/.salt`: its bytes, or 32 new random bytes written there (mode 0600) first.
pub(crate) fn read_or_make_salt(dir: &std::path::Path) -> std::io::Result<Vec<u8>> {
    use std::io::{Read as _, Write as _};
    let path = dir.join(".salt");
    match std::fs::read(&path) {
        Ok(salt) if salt.len() >= 16 => return Ok(salt),
        Ok(_) => std::fs::remove_file(&path)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    std::fs::create_dir_all(dir)?;
    let mut salt = vec![0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut salt)?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    match options.open(&path) {
        Ok(mut file) => {
            file.write_all(&salt)?;
            Ok(salt)
        }
        // Made meanwhile by another cache on the same directory: that one counts.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => std::fs::read(&path),
        Err(e) => Err(e),
    }
}
