//! What a request addresses: its path parsed into a discovery or resource target, its
//! verb, the caller's token checked, and what fault rules match on.

use std::collections::HashMap;

use axum::http::{HeaderMap, Method, header};

use super::super::faults::{RequestInfo, Verb};
use super::super::rbac::NamespacedToken;
use super::super::registry::ResourceKind;
use super::super::state::Shared;
use super::super::status::ApiError;

/// A parsed path.
pub(super) enum Target {
    Version,
    CoreVersions,
    Groups,
    Group(String),
    ResourceList(String, String),
    Resource {
        kind: ResourceKind,
        namespace: Option<String>,
        name: Option<String>,
        sub: Option<String>,
    },
}

pub(super) fn not_found_path() -> ApiError {
    ApiError::new(
        404,
        "NotFound",
        "the server could not find the requested resource",
    )
}

pub(super) fn parse_target(shared: &Shared, path: &str) -> Result<Target, ApiError> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["version"] => return Ok(Target::Version),
        ["api"] => return Ok(Target::CoreVersions),
        ["apis"] => return Ok(Target::Groups),
        ["apis", g] => return Ok(Target::Group(g.to_string())),
        ["api", v] => return Ok(Target::ResourceList(String::new(), v.to_string())),
        ["apis", g, v] => return Ok(Target::ResourceList(g.to_string(), v.to_string())),
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(not_found_path()),
    };
    let reg = shared.registry();
    let namespaced_plural = |p: &str| {
        reg.by_plural(group, version, p)
            .is_some_and(|k| k.namespaced)
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, plural, ..] if namespaced_plural(plural) => {
            (Some(ns.to_string()), &rest[2..])
        }
        _ => (None, rest),
    };
    let (plural, name, sub) = match rest {
        [p] => (*p, None, None),
        [p, n] => (*p, Some(n.to_string()), None),
        [p, n, s] => (*p, Some(n.to_string()), Some(s.to_string())),
        _ => return Err(not_found_path()),
    };
    let kind = *reg
        .by_plural(group, version, plural)
        .ok_or_else(not_found_path)?;
    // A namespaced object is addressed only inside its namespace.
    if kind.namespaced && namespace.is_none() && name.is_some() {
        return Err(not_found_path());
    }
    match sub.as_deref() {
        None => {}
        Some("status") if kind.status => {}
        Some("scale") if kind.scale => {}
        Some(_) => return Err(not_found_path()),
    }
    Ok(Target::Resource {
        kind,
        namespace,
        name,
        sub,
    })
}

/// With a required token ([`Shared::bearer_token`] or any of
/// [`Shared::namespaced_tokens`]): `Authorization: Bearer TOKEN` or 401, checked before
/// anything else (faults and counters included), as the real server authenticates first.
/// Returns the namespaced token the caller holds, if it holds one (authorized later, per
/// request). The comparison takes the same time wherever the tokens differ.
pub(super) fn authenticate<'s>(
    shared: &'s Shared,
    headers: &HeaderMap,
) -> Result<Option<&'s NamespacedToken>, ApiError> {
    if shared.bearer_token.is_none() && shared.namespaced_tokens.is_empty() {
        return Ok(None);
    }
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim().as_bytes());
    let unauthorized = || ApiError::new(401, "Unauthorized", "Unauthorized");
    let given = given.ok_or_else(unauthorized)?;
    if let Some(scoped) = shared
        .namespaced_tokens
        .iter()
        .find(|t| same_token(given, t.token.as_bytes()))
    {
        return Ok(Some(scoped));
    }
    match &shared.bearer_token {
        Some(want) if same_token(given, want.as_bytes()) => Ok(None),
        _ => Err(unauthorized()),
    }
}

/// Whether two tokens are equal, in a time that does not depend on where they differ.
fn same_token(given: &[u8], want: &[u8]) -> bool {
    given.len() == want.len()
        && given
            .iter()
            .zip(want)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

pub(super) fn flag(q: &HashMap<String, String>, key: &str) -> bool {
    q.get(key).is_some_and(|v| v == "true" || v == "1")
}

/// Whether the query asks for a dry run (`dryRun=All`).
pub(super) fn dry_run(q: &HashMap<String, String>) -> bool {
    q.get("dryRun").is_some_and(|v| v == "All")
}

pub(super) fn verb_of(method: &Method, t: &Target, q: &HashMap<String, String>) -> Option<Verb> {
    let Target::Resource { name, .. } = t else {
        return (method == Method::GET).then_some(Verb::Discovery);
    };
    Some(match (method.as_str(), name.is_some()) {
        ("GET", true) => Verb::Get,
        ("GET", false) if flag(q, "watch") => Verb::Watch,
        ("GET", false) => Verb::List,
        ("POST", false) => Verb::Create,
        ("PUT", true) => Verb::Update,
        ("PATCH", true) => Verb::Patch,
        ("DELETE", true) => Verb::Delete,
        ("DELETE", false) => Verb::DeleteCollection,
        _ => return None,
    })
}

/// The request's attributes, as Kubernetes' request-info factory makes them: a list or
/// watch whose field selector is exactly `metadata.name=NAME` (or `==`) carries NAME, so
/// that RBAC `resourceNames` can grant it.
pub(super) fn info_of(
    path: &str,
    t: &Target,
    verb: Option<Verb>,
    q: &HashMap<String, String>,
) -> RequestInfo {
    let mut info = RequestInfo {
        verb,
        path: path.to_string(),
        dry_run: dry_run(q),
        ..RequestInfo::default()
    };
    if let Target::Resource {
        kind,
        namespace,
        name,
        sub,
    } = t
    {
        info.group = kind.group.to_string();
        info.resource = kind.plural.to_string();
        info.namespace = namespace.clone();
        info.name = name.clone();
        info.subresource = sub.clone();
        if name.is_none() && matches!(verb, Some(Verb::List | Verb::Watch)) {
            info.name = q
                .get("fieldSelector")
                .and_then(|f| {
                    f.strip_prefix("metadata.name==")
                        .or_else(|| f.strip_prefix("metadata.name="))
                })
                .filter(|n| !n.is_empty() && !n.contains([',', '=', '!']))
                .map(str::to_owned);
        }
    }
    info
}
