//! `etcd://HOST:PORT[,HOST:PORT…]` and `etcds://…` URLs.
//!
//! The endpoints are etcd's client URLs without their `http://` or `https://`: one or more
//! `HOST:PORT` separated by commas, where HOST is a name, an IPv4 address or a bracketed
//! IPv6 address. A missing port means 2379 (etcd's client port). `etcd://` is plain HTTP,
//! `etcds://` is TLS (its CA and client certificate are options, `security.rs`).
//! Credentials in the URL are refused (a URL shows in `ps`, logs and errors), and so is a
//! path, query or fragment (the key prefix is `--root`).

use fleetshard_coord::store::StoreError;

/// The URL scheme, with its `://`.
pub(crate) const SCHEME: &str = "etcd://";

/// The TLS URL scheme, with its `://`.
pub(crate) const TLS_SCHEME: &str = "etcds://";

/// etcd's standard client port.
pub(crate) const DEFAULT_PORT: u16 = 2379;

/// Parses `etcd://HOST:PORT[,HOST:PORT…]` (or `etcds://…`) into its endpoints
/// (`HOST:PORT` each) and whether it asks for TLS.
pub(crate) fn parse(url: &str) -> Result<(Vec<String>, bool), StoreError> {
    let invalid = |reason: String| StoreError::InvalidUrl {
        url: url.to_owned(),
        reason,
    };
    let lower = url.to_ascii_lowercase();
    if lower.starts_with("https://") || lower.starts_with("http://") {
        return Err(invalid(
            "write etcd://HOST:PORT (plain HTTP) or etcds://HOST:PORT (TLS)".into(),
        ));
    }
    // Schemes are case-insensitive (RFC 3986 §3.1); `get` guards against slicing through a
    // multi-byte character.
    let scheme = |s: &str| {
        url.get(..s.len())
            .is_some_and(|h| h.eq_ignore_ascii_case(s))
    };
    let (rest, tls) = match () {
        () if scheme(SCHEME) => (&url[SCHEME.len()..], false),
        () if scheme(TLS_SCHEME) => (&url[TLS_SCHEME.len()..], true),
        () if lower.starts_with("etcd:") || lower.starts_with("etcds:") => {
            return Err(invalid(
                "expected etcd://HOST:PORT[,HOST:PORT…] (two slashes, then the endpoints)".into(),
            ));
        }
        () => return Err(invalid("not an etcd:// or etcds:// URL".into())),
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
            "credentials in the URL are refused (a URL shows in ps, logs and errors); give the \
             etcd user and its password file as options"
                .into(),
        ));
    }
    if rest.is_empty() {
        return Err(invalid(
            "no endpoint; write etcd://HOST:PORT, e.g. etcd://127.0.0.1:2379".into(),
        ));
    }
    let endpoints = rest
        .split(',')
        .enumerate()
        .map(|(i, ep)| endpoint(ep).map_err(|r| invalid(format!("endpoint {} {ep:?}: {r}", i + 1))))
        .collect::<Result<_, _>>()?;
    Ok((endpoints, tls))
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
            let (got, tls) = parse(url).unwrap();
            assert_eq!(
                (got, tls),
                (eps.iter().map(|e| e.to_string()).collect(), false),
                "{url}"
            );
        }
        let tls = parse("ETCDS://a:1,b").unwrap();
        assert_eq!(tls, (vec!["a:1".to_owned(), "b:2379".to_owned()], true));
    }

    #[test]
    fn bad_urls_name_the_url_and_the_reason() {
        for (url, reason) in [
            ("etcd://", "no endpoint"),
            ("etcd:/x:1", "two slashes"),
            ("etcd:x", "two slashes"),
            ("sqlite://x.db", "not an etcd"),
            ("", "not an etcd"),
            ("etcds:/x:1", "two slashes"),
            ("https://x:1", "etcds://HOST:PORT (TLS)"),
            ("etcds://u:p@x:1", "credentials"),
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
