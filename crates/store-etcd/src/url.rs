//! `etcd://HOST:PORT[,HOST:PORT…]` URLs.
//!
//! The endpoints are etcd's client URLs without their `http://`: one or more `HOST:PORT`
//! separated by commas, where HOST is a name, an IPv4 address or a bracketed IPv6 address.
//! A missing port means 2379 (etcd's client port). Plain HTTP only: TLS and credentials
//! are not supported yet, and a URL asking for them is refused rather than silently sent
//! in the clear. A path, query or fragment is refused too (the key prefix is `--root`).

use fleetshard_coord::store::StoreError;

/// The URL scheme, with its `://`.
pub(crate) const SCHEME: &str = "etcd://";

/// etcd's standard client port.
pub(crate) const DEFAULT_PORT: u16 = 2379;

/// Parses `etcd://HOST:PORT[,HOST:PORT…]` into its endpoints (`HOST:PORT` each).
pub(crate) fn parse(url: &str) -> Result<Vec<String>, StoreError> {
    let invalid = |reason: String| StoreError::InvalidUrl {
        url: url.to_owned(),
        reason,
    };
    let lower = url.to_ascii_lowercase();
    if lower.starts_with("etcds://") || lower.starts_with("https://") {
        return Err(invalid(
            "TLS is not supported by this build's etcd client; use etcd://HOST:PORT (plain \
             HTTP on a trusted network)"
                .into(),
        ));
    }
    // Schemes are case-insensitive (RFC 3986 §3.1); `get` guards against slicing through a
    // multi-byte character.
    let rest = match url.get(..SCHEME.len()) {
        Some(head) if head.eq_ignore_ascii_case(SCHEME) => &url[SCHEME.len()..],
        _ if lower.starts_with("etcd:") => {
            return Err(invalid(
                "expected etcd://HOST:PORT[,HOST:PORT…] (two slashes, then the endpoints)".into(),
            ));
        }
        _ => return Err(invalid("not an etcd:// URL".into())),
    };
    // One trailing slash is harmless (`etcd://host:2379/`); anything after it is not.
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.contains(['/', '?', '#']) {
        return Err(invalid(
            "a path, query or fragment is not supported; the key prefix is set with --root".into(),
        ));
    }
    if rest.contains('@') {
        return Err(invalid(
            "credentials in the URL are not supported (etcd authentication is not implemented)"
                .into(),
        ));
    }
    if rest.is_empty() {
        return Err(invalid(
            "no endpoint; write etcd://HOST:PORT, e.g. etcd://127.0.0.1:2379".into(),
        ));
    }
    rest.split(',')
        .enumerate()
        .map(|(i, ep)| endpoint(ep).map_err(|r| invalid(format!("endpoint {} {ep:?}: {r}", i + 1))))
        .collect()
}

/// Checks one `HOST[:PORT]` and returns `HOST:PORT`.
fn endpoint(ep: &str) -> Result<String, String> {
    if ep.is_empty() {
        return Err("empty (two commas in a row, or a trailing comma?)".into());
    }
    let (host, port) = if let Some(v6) = ep.strip_prefix('[') {
        let (addr, after) = v6
            .split_once(']')
            .ok_or("an IPv6 address needs its closing `]`")?;
        addr.parse::<std::net::Ipv6Addr>()
            .map_err(|e| format!("bad IPv6 address: {e}"))?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or("expected `:PORT` after `]`")?),
        };
        (&ep[..addr.len() + 2], port)
    } else {
        match ep.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (ep, None),
        }
    };
    if host.is_empty() {
        return Err("no host".into());
    }
    if !host.starts_with('[')
        && !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_')
    {
        return Err("the host must be a name, an IPv4 address or [an IPv6 address]".into());
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(p) => match p.parse::<u16>() {
            Ok(0) | Err(_) => return Err(format!("bad port {p:?} (expected 1–65535)")),
            Ok(n) => n,
        },
    };
    Ok(format!("{host}:{port}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        for (url, eps) in [
            ("etcd://127.0.0.1:2379", &["127.0.0.1:2379"][..]),
            ("ETCD://localhost:1234/", &["localhost:1234"]),
            ("etcd://etcd-0.etcd", &["etcd-0.etcd:2379"]),
            ("etcd://a:1,b:2,c", &["a:1", "b:2", "c:2379"]),
            ("etcd://[::1]:2379", &["[::1]:2379"]),
            ("etcd://[fe80::1]", &["[fe80::1]:2379"]),
        ] {
            assert_eq!(parse(url).unwrap(), eps, "{url}");
        }
    }

    #[test]
    fn bad_urls_name_the_url_and_the_reason() {
        for (url, reason) in [
            ("etcd://", "no endpoint"),
            ("etcd:/x:1", "two slashes"),
            ("etcd:x", "two slashes"),
            ("sqlite://x.db", "not an etcd"),
            ("", "not an etcd"),
            ("etcds://x:1", "TLS"),
            ("https://x:1", "TLS"),
            ("etcd://x:1/prefix", "path"),
            ("etcd://x:1?a=b", "query"),
            ("etcd://user:pw@x:1", "credentials"),
            ("etcd://a:1,,b:2", "endpoint 2 \"\": empty"),
            ("etcd://a:1,", "endpoint 2"),
            ("etcd://:2379", "no host"),
            ("etcd://x:0", "bad port"),
            ("etcd://x:65536", "bad port"),
            ("etcd://x:http", "bad port"),
            ("etcd://[::1", "closing"),
            ("etcd://[nope]:1", "IPv6"),
            ("etcd://[::1]2379", "`:PORT`"),
            ("etcd://ho st:1", "host must be"),
            ("etcd://é:1", "host must be"),
        ] {
            match parse(url) {
                Err(StoreError::InvalidUrl { url: u, reason: r }) => {
                    assert_eq!(u, url);
                    assert!(r.contains(reason), "{url}: {r}");
                }
                other => panic!("{url}: {other:?}"),
            }
        }
    }
}
