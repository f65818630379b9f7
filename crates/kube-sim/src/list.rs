//! LIST: a snapshot at a revision (current, exact, or a continue token's), filtered by
//! selectors, paged by `limit`/`continue` over one consistent snapshot.

use base64::Engine;
use serde_json::{Value, json};

use super::ops;
use super::registry::ResourceKind;
use super::selectors::{FieldSelector, LabelSelector};
use super::state::Shared;
use super::status::ApiError;

/// The query of a LIST.
#[derive(Debug)]
pub struct ListQuery<'a> {
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
    /// `resourceVersion` ("" when absent).
    pub resource_version: &'a str,
    /// `resourceVersionMatch=Exact`.
    pub exact: bool,
    /// `limit`.
    pub limit: Option<usize>,
    /// `continue` ("" when absent).
    pub continue_token: &'a str,
}

/// Answers a LIST of `kind` (in one namespace or all) with a `<Kind>List`.
///
/// `resourceVersion` unset, "0" or not older than the current revision: the current
/// state; with `resourceVersionMatch=Exact`: the state at that revision (410 once its
/// history is gone); newer than the current revision: 504 "Too large resource version".
pub fn list(
    shared: &Shared,
    kind: &ResourceKind,
    namespace: Option<&str>,
    q: &ListQuery<'_>,
) -> Result<Value, ApiError> {
    let store = shared.read();
    let (at, after) = if q.continue_token.is_empty() {
        let current = store.revision();
        let at = match ops::parse_rv(q.resource_version)? {
            Some(0) | None => current,
            Some(rv) if rv > current => {
                return Err(ApiError::for_code(
                    504,
                    format!("Too large resource version: {rv}, current: {current}"),
                ));
            }
            Some(rv) if q.exact => rv,
            Some(_) => current,
        };
        (at, None)
    } else {
        let (rv, after) = decode_continue(q.continue_token)?;
        store.check_retained(rv).map_err(|_| {
            ApiError::expired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")
        })?;
        (rv, Some(after))
    };
    let snapshot = store.snapshot_at((kind.group, kind.plural), namespace, at)?;
    drop(store);
    let mut matching = snapshot
        .iter()
        .filter(|(k, _)| {
            after.as_ref().is_none_or(|(ns, name)| {
                (k.namespace.as_str(), k.name.as_str()) > (ns.as_str(), name.as_str())
            })
        })
        .filter(|(_, o)| q.labels.matches(o) && q.fields.matches(o));
    let mut items = Vec::new();
    let mut last = None;
    for (k, o) in matching.by_ref() {
        items.push((**o).clone());
        last = Some((k.namespace.clone(), k.name.clone()));
        if q.limit.is_some_and(|l| items.len() >= l) {
            break;
        }
    }
    let remaining = matching.count();
    shared.faults.count_listed(kind.plural, items.len() as u64);
    let mut meta = json!({"resourceVersion": at.to_string()});
    if remaining > 0
        && let Some((ns, name)) = last
    {
        meta["continue"] = json!(encode_continue(at, &ns, &name));
        meta["remainingItemCount"] = json!(remaining);
    }
    Ok(json!({
        "kind": format!("{}List", kind.kind),
        "apiVersion": kind.api_version(),
        "metadata": meta,
        "items": items,
    }))
}

/// A continue token: the snapshot revision and the last (namespace, name) served.
fn encode_continue(rv: u64, ns: &str, name: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(serde_json::to_vec(&json!({"rv": rv, "ns": ns, "name": name})).unwrap_or_default())
}

fn decode_continue(token: &str) -> Result<(u64, (String, String)), ApiError> {
    let bad = || ApiError::bad_request(format!("invalid continue token {token:?}"));
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    let rv = v["rv"].as_u64().ok_or_else(bad)?;
    let ns = v["ns"].as_str().ok_or_else(bad)?.to_string();
    let name = v["name"].as_str().ok_or_else(bad)?.to_string();
    Ok((rv, (ns, name)))
}
