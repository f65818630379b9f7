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

/// `dir/.salt`: its bytes, or 32 new random bytes written there (mode 0600) first; `dir`
/// is made, or checked, private first ([`private_dir`]): a salt another user planted is
/// never adopted.
pub(crate) fn read_or_make_salt(dir: &std::path::Path) -> std::io::Result<Vec<u8>> {
    use std::io::{Read as _, Write as _};
    private_dir(dir)?;
    let path = dir.join(".salt");
    match std::fs::read(&path) {
        Ok(salt) if salt.len() >= 16 => return Ok(salt),
        Ok(_) => std::fs::remove_file(&path)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
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

/// Makes `dir` (its parents as usual) private to this process's user, mode 0700, or checks
/// that an existing one is: a directory, not a symbolic link, owned by this user and
/// writable by no one else. Anything else is refused with an error naming the path — a
/// shared temporary directory someone else made first could hold a planted salt or
/// mirrors.
pub(crate) fn private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    use std::io::{Error, ErrorKind};
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let mut builder = std::fs::DirBuilder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        builder.mode(0o700);
    }
    match builder.create(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = std::fs::symlink_metadata(dir)?;
    let refuse = |why: String| {
        Err(Error::new(
            ErrorKind::PermissionDenied,
            format!(
                "{}: {why}; refused (choose a directory of your own)",
                dir.display()
            ),
        ))
    };
    if !meta.is_dir() {
        return refuse("not a directory (a symbolic link or a file)".to_owned());
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        let me = rustix::process::geteuid().as_raw();
        if meta.uid() != me {
            return refuse(format!(
                "owned by user id {}, not by this process's user id {me}",
                meta.uid()
            ));
        }
        if meta.mode() & 0o022 != 0 {
            return refuse(format!(
                "writable by its group or by others (mode {:o})",
                meta.mode() & 0o7777
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn mode(path: &std::path::Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn the_cache_directory_is_made_private() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/fleetshard-repos");
        let salt = read_or_make_salt(&dir).unwrap();
        assert_eq!(salt.len(), 32);
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join(".salt")), 0o600);
        assert_eq!(
            read_or_make_salt(&dir).unwrap(),
            salt,
            "its own salt is kept"
        );
    }

    /// Issue 24: a shared temporary cache directory someone else made first, with a salt
    /// planted in it, is refused, naming the path; the salt is not adopted.
    #[test]
    fn a_planted_salt_in_a_directory_others_may_write_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("fleetshard-repos");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join(".salt"), [7u8; 32]).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = read_or_make_salt(&dir).unwrap_err().to_string();
        assert!(
            err.contains(&dir.display().to_string()) && err.contains("writable by its group"),
            "{err}"
        );
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o770)).unwrap();
        assert!(read_or_make_salt(&dir).is_err(), "group-writable");
    }

    #[test]
    fn a_directory_of_another_user_or_a_link_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(tmp.path(), &link).unwrap();
        let err = private_dir(&link).unwrap_err().to_string();
        assert!(err.contains("not a directory"), "{err}");
        let foreign = if rustix::process::geteuid().is_root() {
            let dir = tmp.path().join("nobody's");
            std::fs::create_dir(&dir).unwrap();
            std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap();
            dir
        } else {
            // Owned by root, mode 0755 on every system.
            std::path::PathBuf::from("/")
        };
        let err = private_dir(&foreign).unwrap_err().to_string();
        assert!(err.contains("owned by user id"), "{err}");
    }
}
