//! `sqlite://PATH` URLs.
//!
//! Everything after `sqlite://` is a file path, so `sqlite:///var/lib/fleetshard.db` is
//! absolute and `sqlite://fleetshard.db` or `sqlite://./data/fleetshard.db` are relative to
//! the process's working directory when the store is opened. (This is *not* SQLAlchemy's
//! convention, where `sqlite:////abs` has four slashes: our URLs have no host part, so the
//! path starts right after `//`.) `%XX` escapes are decoded so that any path can be written.

use std::path::PathBuf;

use fleetshard_coord::store::StoreError;

/// The URL scheme, with its `://`.
pub(crate) const SCHEME: &str = "sqlite://";

/// Parses `sqlite://PATH` into the path it names.
pub(crate) fn parse(url: &str) -> Result<PathBuf, StoreError> {
    let invalid = |reason: &str| StoreError::InvalidUrl {
        url: url.to_owned(),
        reason: reason.to_owned(),
    };
    // Schemes are case-insensitive (RFC 3986 §3.1); `get` also guards against slicing
    // through a multi-byte character of a foreign URL.
    let rest = match url.get(..SCHEME.len()) {
        Some(head) if head.eq_ignore_ascii_case(SCHEME) => &url[SCHEME.len()..],
        _ if url.to_ascii_lowercase().starts_with("sqlite:") => {
            return Err(invalid(
                "expected sqlite://PATH (two slashes, then the path: sqlite://fleetshard.db, \
                 sqlite:///var/lib/fleetshard.db)",
            ));
        }
        _ => return Err(invalid("not a sqlite:// URL")),
    };
    if rest.is_empty() {
        return Err(invalid(
            "no path; write sqlite://fleetshard.db (relative to the working directory) or \
             sqlite:///absolute/path.db",
        ));
    }
    // Reserved so that options can be added later without changing what a URL means.
    if rest.contains(['?', '#']) {
        return Err(invalid(
            "query and fragment are not supported; write `?` as %3F and `#` as %23 in a path",
        ));
    }
    let path = percent_decode(rest).map_err(|reason| invalid(&reason))?;
    if path == ":memory:" || path.starts_with("file:") {
        return Err(invalid(
            "an in-memory or URI-named SQLite database cannot be shared between processes; \
             use memory:// for a single process, or a file path",
        ));
    }
    if path.starts_with('~') {
        return Err(invalid("`~` is not expanded; write the full path"));
    }
    if path.contains('\0') {
        return Err(invalid("the path contains a NUL byte"));
    }
    if path.ends_with('/') || path == "." || path == ".." {
        return Err(invalid("the path names a directory, not a database file"));
    }
    Ok(PathBuf::from(path))
}

/// Decodes `%XX` escapes; the result must be UTF-8.
fn percent_decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("bad %-escape at byte {i} (write `%` as %25)"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "the %-escapes do not decode to UTF-8".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        for (url, path) in [
            ("sqlite:///var/lib/fleetshard.db", "/var/lib/fleetshard.db"),
            ("sqlite://fleetshard.db", "fleetshard.db"),
            ("sqlite://./x.db", "./x.db"),
            ("sqlite://../up/x.db", "../up/x.db"),
            ("SQLite://data/x.db", "data/x.db"),
            ("sqlite:///tmp/my%20dir/x%25.db", "/tmp/my dir/x%.db"),
            ("sqlite://caf%C3%A9.db", "café.db"),
        ] {
            assert_eq!(parse(url).unwrap(), PathBuf::from(path), "{url}");
        }
    }

    #[test]
    fn bad_urls_name_the_url_and_the_reason() {
        for (url, reason) in [
            ("sqlite://", "no path"),
            ("sqlite:/x.db", "two slashes"),
            ("sqlite:x.db", "two slashes"),
            ("etcd://localhost:2379", "not a sqlite"),
            ("", "not a sqlite"),
            ("sqlité://x", "not a sqlite"),
            ("sqlite://x.db?mode=ro", "query"),
            ("sqlite://x.db#frag", "query"),
            ("sqlite://:memory:", "in-memory"),
            ("sqlite://file:x.db", "in-memory"),
            ("sqlite://~/x.db", "not expanded"),
            ("sqlite://x%00.db", "NUL"),
            ("sqlite:///var/lib/", "directory"),
            ("sqlite://.", "directory"),
            ("sqlite://x%2", "%-escape"),
            ("sqlite://x%zz.db", "%-escape"),
            ("sqlite://x%ff.db", "UTF-8"),
        ] {
            match parse(url) {
                Err(StoreError::InvalidUrl { url: u, reason: r }) => {
                    assert_eq!(u, url);
                    assert!(r.contains(reason), "{url}: {r}");
                    let shown = StoreError::InvalidUrl { url: u, reason: r }.to_string();
                    assert!(shown.contains(&format!("{url:?}")), "{shown}");
                }
                other => panic!("{url}: {other:?}"),
            }
        }
    }
}
