//! Label and field selectors as the API server parses them from `labelSelector` and
//! `fieldSelector`.
//!
//! Labels: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k` (exists), `!k`
//! (does not exist), joined by commas. Fields: `path=v`, `path==v`, `path!=v` joined by
//! commas, where the path is `metadata.name`, `metadata.namespace` or a kind-specific
//! field (see [`field_value`]).

use serde_json::Value;

use super::status::ApiError;

/// One label requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    reqs: Vec<LabelReq>,
}

impl LabelSelector {
    /// Parses a `labelSelector` query value; a malformed one is a 400 naming it.
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let bad = |why: &str| {
            ApiError::bad_request(format!("unable to parse requirement: {why} in {s:?}"))
        };
        let mut reqs = Vec::new();
        for term in split_top_level(s) {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            let req = if let Some(key) = term.strip_prefix('!') {
                LabelReq::NotExists(check_key(key.trim()).map_err(|w| bad(&w))?)
            } else if let Some((k, v)) = term.split_once("!=") {
                LabelReq::NotEq(check_key(k.trim()).map_err(|w| bad(&w))?, value(v)?)
            } else if let Some((k, v)) = term.split_once("==") {
                LabelReq::Eq(check_key(k.trim()).map_err(|w| bad(&w))?, value(v)?)
            } else if let Some((k, v)) = term.split_once('=') {
                LabelReq::Eq(check_key(k.trim()).map_err(|w| bad(&w))?, value(v)?)
            } else if let Some((k, set)) = split_set_op(term, " notin ") {
                LabelReq::NotIn(check_key(k).map_err(|w| bad(&w))?, parse_set(set, s)?)
            } else if let Some((k, set)) = split_set_op(term, " in ") {
                LabelReq::In(check_key(k).map_err(|w| bad(&w))?, parse_set(set, s)?)
            } else {
                LabelReq::Exists(check_key(term).map_err(|w| bad(&w))?)
            };
            reqs.push(req);
        }
        Ok(Self { reqs })
    }

    /// Whether an object's `metadata.labels` satisfy every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels").and_then(Value::as_object);
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.reqs.iter().all(|r| match r {
            LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
            LabelReq::NotEq(k, v) => get(k) != Some(v.as_str()),
            LabelReq::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::NotIn(k, vs) => !get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
        })
    }
}

fn value(v: &str) -> Result<String, ApiError> {
    let v = v.trim();
    if v.len() > 63
        || !v
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(ApiError::bad_request(format!(
            "unable to parse requirement: invalid label value: {v:?}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.'"
        )));
    }
    Ok(v.to_string())
}

fn check_key(k: &str) -> Result<String, String> {
    let name = k.rsplit_once('/').map_or(k, |(_, n)| n);
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && k.chars()
            .all(|c| !c.is_whitespace() && c != '(' && c != ')');
    if ok {
        Ok(k.to_string())
    } else {
        Err(format!("invalid label key {k:?}"))
    }
}

fn split_set_op<'a>(term: &'a str, op: &str) -> Option<(&'a str, &'a str)> {
    let (k, rest) = term.split_once(op)?;
    Some((k.trim(), rest.trim()))
}

fn parse_set(set: &str, whole: &str) -> Result<Vec<String>, ApiError> {
    let inner = set
        .strip_prefix('(')
        .and_then(|x| x.strip_suffix(')'))
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "unable to parse requirement: found '{set}', expected: '(' … ')' in {whole:?}"
            ))
        })?;
    inner.split(',').map(value).collect()
}

/// Splits on commas that are not inside parentheses.
fn split_top_level(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// A parsed field selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    reqs: Vec<(String, bool, String)>,
}

impl FieldSelector {
    /// Parses a `fieldSelector` for objects of `kind`; an unsupported field is a 400, as
    /// on a real server ("field label not supported").
    pub fn parse(s: &str, kind: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for term in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (path, eq, v) = if let Some((p, v)) = term.split_once("!=") {
                (p, false, v)
            } else if let Some((p, v)) = term.split_once("==") {
                (p, true, v)
            } else if let Some((p, v)) = term.split_once('=') {
                (p, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{term}'"
                )));
            };
            let path = path.trim();
            if !supported_field(kind, path) {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {path}"
                )));
            }
            reqs.push((path.to_string(), eq, v.trim().to_string()));
        }
        Ok(Self { reqs })
    }

    /// Whether the object satisfies every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        self.reqs.iter().all(|(path, eq, v)| {
            let actual = field_value(obj, path);
            (actual.as_deref() == Some(v.as_str())) == *eq
        })
    }
}

/// Fields a real server lets each kind be selected by (the subset fleetshard may use).
fn supported_field(kind: &str, path: &str) -> bool {
    matches!(path, "metadata.name" | "metadata.namespace")
        || matches!(
            (kind, path),
            ("Secret", "type")
                | (
                    "Pod",
                    "status.phase" | "spec.nodeName" | "spec.restartPolicy"
                )
                | ("Namespace", "status.phase")
                | ("Job", "status.successful")
                | (
                    "Event",
                    "involvedObject.kind"
                        | "involvedObject.namespace"
                        | "involvedObject.name"
                        | "involvedObject.uid"
                        | "involvedObject.apiVersion"
                        | "involvedObject.resourceVersion"
                        | "involvedObject.fieldPath"
                        | "reason"
                        | "reportingComponent"
                        | "source"
                        | "type"
                )
        )
}

/// The string value of a dotted field path (missing → "" as the server compares it;
/// `metadata.namespace` of a cluster-scoped object is "").
pub fn field_value(obj: &Value, path: &str) -> Option<String> {
    // An Event's `source` is its source's component, as the real server selects it.
    let path = if path == "source" {
        "source.component"
    } else {
        path
    };
    let mut cur = obj;
    for part in path.split('.') {
        match cur.get(part) {
            Some(v) => cur = v,
            None => return Some(String::new()),
        }
    }
    Some(match cur {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "a", "namespace": "ns", "labels": labels}})
    }

    #[test]
    fn label_operators() {
        let o = obj(json!({"app": "web", "tier": "front"}));
        let m = |s: &str| LabelSelector::parse(s).unwrap().matches(&o);
        assert!(m("app=web"));
        assert!(m("app==web,tier"));
        assert!(!m("app!=web"));
        assert!(m("app in (web, db),tier notin (back)"));
        assert!(!m("app notin (web)"));
        assert!(m("!missing"));
        assert!(!m("!app"));
        assert!(m(""));
        assert!(!m("missing"));
        assert!(m("missing!=x"));
        assert!(LabelSelector::parse("app in web").is_err());
        assert!(LabelSelector::parse("a b=c").is_err());
    }

    #[test]
    fn field_selectors() {
        let o = obj(json!({}));
        let f = |s: &str| FieldSelector::parse(s, "ConfigMap").unwrap().matches(&o);
        assert!(f("metadata.name=a"));
        assert!(f("metadata.namespace==ns,metadata.name!=b"));
        assert!(!f("metadata.name=b"));
        let err = FieldSelector::parse("spec.x=1", "ConfigMap").unwrap_err();
        assert_eq!(err.code, 400);
    }
}
