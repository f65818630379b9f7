//! `repoURL` → where the repository is: a local path (read in place) or a remote URL
//! (mirrored into the cache); the exact form that keys the cache ([`exact_form`]) and
//! Argo CD's looser form that matches repository Secrets ([`normalize`]).

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

/// The scheme of a remote URL whose transport is not encrypted — `http` or `git` (the Git
/// daemon's protocol) — or `None` (`https`, `ssh`, scp-like, local). Such a fetch crosses
/// the network in clear and can be answered by anyone on the path.
pub fn plaintext_scheme(url: &str) -> Option<&'static str> {
    let (scheme, _) = url.trim().split_once("://")?;
    match scheme.to_ascii_lowercase().as_str() {
        "http" => Some("http"),
        "git" => Some("git"),
        _ => None,
    }
}

/// `user@host:path` or `host:path` (git's scp-like syntax): a `:` before any `/`, and not
/// a Windows drive letter.
pub(crate) fn is_scp_like(url: &str) -> bool {
    match (url.find(':'), url.find('/')) {
        (Some(colon), slash) => colon > 1 && slash.is_none_or(|s| colon < s),
        (None, _) => false,
    }
}

/// The form two spellings of one repository share, as Argo CD's `NormalizeGitURL`: lower
/// case, no trailing `/`, no `.git` suffix. It matches repository Secrets to URLs; it
/// never keys the cache (two repositories can differ only in case or `.git`).
pub fn normalize(url: &str) -> String {
    let lower = url.trim().to_ascii_lowercase();
    let trimmed = lower.trim_end_matches('/');
    trimmed.strip_suffix(".git").unwrap_or(trimmed).to_owned()
}

/// The exact form of a remote URL that keys the cache: the scheme and the host in lower
/// case (they are case-insensitive), trailing `/` removed, everything else as written.
pub fn exact_form(url: &str) -> String {
    let url = url.trim().trim_end_matches('/');
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (Some(scheme.to_ascii_lowercase()), rest),
        None => (None, url),
    };
    // The authority (`user@host:port`, or scp-like `user@host`) ends at the first `/`
    // (or, scp-like, at the first `:`); only its host part is folded.
    let end = match scheme {
        Some(_) => rest.find('/').unwrap_or(rest.len()),
        None => rest.find(':').unwrap_or(rest.len()),
    };
    let (authority, path) = rest.split_at(end);
    let (user, host) = match authority.rsplit_once('@') {
        Some((user, host)) => (Some(user), host),
        None => (None, authority),
    };
    let mut out = String::with_capacity(url.len());
    if let Some(scheme) = scheme {
        out.push_str(&scheme);
        out.push_str("://");
    }
    if let Some(user) = user {
        out.push_str(user);
        out.push('@');
    }
    out.push_str(&host.to_ascii_lowercase());
    out.push_str(path);
    out
}

/// A cache directory name: a keyed hash of `parts` (the exact URL and what the fetch
/// authenticates with), so any URL makes a safe, fixed-length name and the name says
/// nothing about the credentials to someone without `salt`.
pub fn cache_key(parts: &[&[u8]], salt: &[u8]) -> String {
    let mut params = blake2b_simd::Params::new();
    params.hash_length(16).personal(b"fleetshard-repo");
    if !salt.is_empty() {
        params.key(&salt[..salt.len().min(64)]);
    }
    let mut state = params.to_state();
    for part in parts {
        state.update(&(part.len() as u64).to_le_bytes());
        state.update(part);
    }
    state.finalize().to_hex().to_string()
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
    fn only_case_insensitive_parts_and_trailing_slashes_share_a_key() {
        let key = |url: &str| cache_key(&[exact_form(url).as_bytes()], b"");
        let base = key("https://github.com/Org/Repo");
        for spelling in [
            "https://GitHub.com/Org/Repo",
            "HTTPS://github.com/Org/Repo/",
            " https://github.com/Org/Repo// ",
        ] {
            assert_eq!(key(spelling), base, "{spelling}");
        }
        // A path is case-sensitive and `.git` names another directory on many servers:
        // one tenant's spelling never serves another's repository.
        for other in [
            "https://github.com/org/repo",
            "https://github.com/Org/Repo.git",
            "http://github.com/Org/Repo",
        ] {
            assert_ne!(key(other), base, "{other}");
        }
        assert_eq!(
            exact_form("Git@GitHub.com:Org/Repo.git"),
            "Git@github.com:Org/Repo.git"
        );
        assert_eq!(
            exact_form("ssh://Git@Host:22/Org/Repo/"),
            "ssh://Git@host:22/Org/Repo"
        );
    }

    #[test]
    fn cache_keys_are_fixed_length_hex_and_depend_on_every_part_and_the_salt() {
        let a = cache_key(&[b"ssh://host/Org/Repo", b"creds-a"], b"salt");
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, cache_key(&[b"ssh://host/Org/Repo", b"creds-b"], b"salt"));
        assert_ne!(
            a,
            cache_key(&[b"ssh://host/Org/Repo", b"creds-a"], b"other")
        );
        // Parts are length-prefixed: moving a byte across the boundary changes the key.
        assert_ne!(
            cache_key(&[b"ab", b"c"], b"salt"),
            cache_key(&[b"a", b"bc"], b"salt")
        );
        assert_eq!(normalize("https://H/Org/Repo.git/"), "https://h/org/repo");
    }
}
