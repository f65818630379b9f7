//! `repoURL` → where the repository is: a local path (read in place) or a remote URL
//! (mirrored into the cache), and the normalised form that keys the cache.

use std::path::PathBuf;

use super::error::SourceError;

/// Where a repository is read from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RepoLocation {
    /// A repository on this machine: a plain path or a `file://` URL.
    Local(PathBuf),
    /// A repository reached over a transport (`https://`, `http://`, `ssh://`, `git://`,
    /// scp-like `host:path`): the URL as given (trimmed, the scheme in lower case, as
    /// the transport expects it); [`normalize`] of it keys the cache.
    Remote(String),
}

impl RepoLocation {
    /// Classifies `repo_url`.
    ///
    /// A `file://` URL must be absolute (`file:///srv/repo` or `file://localhost/srv/repo`);
    /// `%XX` escapes in it are decoded. Anything without a scheme and without the scp-like
    /// `host:path` form is a local path.
    pub fn parse(repo_url: &str) -> Result<RepoLocation, SourceError> {
        let unsupported = |reason: &str| SourceError::UnsupportedUrl {
            repo: repo_url.to_owned(),
            reason: reason.to_owned(),
        };
        let url = repo_url.trim();
        if url.is_empty() {
            return Err(unsupported("empty repoURL"));
        }
        if let Some(rest) = url.strip_prefix("file://") {
            let path = rest.strip_prefix("localhost").unwrap_or(rest);
            if !path.starts_with('/') {
                return Err(unsupported(
                    "a file:// URL must name an absolute path on this machine (file:///path)",
                ));
            }
            let decoded = percent_decode(path)
                .ok_or_else(|| unsupported("invalid %-escape in file:// URL"))?;
            return Ok(RepoLocation::Local(PathBuf::from(decoded)));
        }
        if let Some((scheme, rest)) = url.split_once("://") {
            let scheme = scheme.to_ascii_lowercase();
            return match scheme.as_str() {
                // Anonymous over HTTP(S): the fetch refuses to ask for credentials.
                "https" | "http" | "ssh" | "git" | "git+ssh" | "ssh+git" => {
                    if rest.trim_start_matches('/').is_empty() {
                        return Err(unsupported("no host after the scheme"));
                    }
                    Ok(RepoLocation::Remote(format!("{scheme}://{rest}")))
                }
                other => Err(unsupported(&format!("unknown scheme {other:?}"))),
            };
        }
        if is_scp_like(url) {
            return Ok(RepoLocation::Remote(url.to_owned()));
        }
        Ok(RepoLocation::Local(PathBuf::from(url)))
    }
}

/// `user@host:path` or `host:path` (git's scp-like syntax): a `:` before any `/`, and not
/// a Windows drive letter.
fn is_scp_like(url: &str) -> bool {
    match (url.find(':'), url.find('/')) {
        (Some(colon), slash) => colon > 1 && slash.is_none_or(|s| colon < s),
        (None, _) => false,
    }
}

/// The form two spellings of one repository share, as Argo CD's `NormalizeGitURL`: lower
/// case, no trailing `/`, no `.git` suffix.
pub fn normalize(url: &str) -> String {
    let lower = url.trim().to_ascii_lowercase();
    let trimmed = lower.trim_end_matches('/');
    trimmed.strip_suffix(".git").unwrap_or(trimmed).to_owned()
}

/// The cache directory name of a remote repository: a hash of its normalised URL, so any
/// URL (with `/`, `:` or `@`) makes a safe, fixed-length name.
pub fn cache_key(normalized_url: &str) -> String {
    let hash = blake2b_simd::Params::new()
        .hash_length(16)
        .personal(b"fleetshard-repo")
        .hash(normalized_url.as_bytes());
    hash.to_hex().to_string()
}

/// Decodes `%XX` escapes; `None` on a malformed escape or non-UTF-8 result.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_paths_and_file_urls_are_local() {
        assert_eq!(
            RepoLocation::parse("/srv/repo").unwrap(),
            RepoLocation::Local("/srv/repo".into())
        );
        assert_eq!(
            RepoLocation::parse("./repo").unwrap(),
            RepoLocation::Local("./repo".into())
        );
        assert_eq!(
            RepoLocation::parse("file:///srv/my%20repo").unwrap(),
            RepoLocation::Local("/srv/my repo".into())
        );
        assert_eq!(
            RepoLocation::parse("file://localhost/srv/repo").unwrap(),
            RepoLocation::Local("/srv/repo".into())
        );
        assert!(matches!(
            RepoLocation::parse("file://relative/repo"),
            Err(SourceError::UnsupportedUrl { .. })
        ));
        assert!(matches!(
            RepoLocation::parse("file:///bad%zz"),
            Err(SourceError::UnsupportedUrl { .. })
        ));
    }

    #[test]
    fn remotes_are_normalised() {
        assert_eq!(
            RepoLocation::parse("git@github.com:Org/Repo.git").unwrap(),
            RepoLocation::Remote("git@github.com:Org/Repo.git".into())
        );
        assert_eq!(
            RepoLocation::parse("ssh://git@host/org/repo/").unwrap(),
            RepoLocation::Remote("ssh://git@host/org/repo/".into())
        );
        assert_eq!(
            RepoLocation::parse(" https://github.com/argoproj/argocd-example-apps.git ").unwrap(),
            RepoLocation::Remote("https://github.com/argoproj/argocd-example-apps.git".into())
        );
        assert_eq!(
            RepoLocation::parse("HTTP://127.0.0.1:8080/repo").unwrap(),
            RepoLocation::Remote("http://127.0.0.1:8080/repo".into())
        );
        for bad in ["  ", "https://", "http:///", "ftp://host/repo"] {
            assert!(
                matches!(
                    RepoLocation::parse(bad),
                    Err(SourceError::UnsupportedUrl { .. })
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn https_spellings_of_one_repository_share_a_key() {
        let key = cache_key(&normalize("https://github.com/Org/Repo"));
        for spelling in [
            "https://GitHub.com/org/repo.git",
            "https://github.com/org/repo/",
            "https://github.com/org/repo.git/",
        ] {
            assert_eq!(cache_key(&normalize(spelling)), key, "{spelling}");
        }
        // The scheme is part of the repository's name: http and https are two mirrors.
        assert_ne!(cache_key(&normalize("http://github.com/org/repo")), key);
    }

    #[test]
    fn cache_keys_are_fixed_length_hex_and_follow_normalisation() {
        let a = cache_key(&normalize("ssh://host/Org/Repo.git"));
        let b = cache_key(&normalize("ssh://host/org/repo/"));
        assert_eq!(a, b);
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, cache_key("ssh://host/org/other"));
    }
}
