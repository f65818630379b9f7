//! API errors as the real API server reports them: a `Status` object (`kind: Status`,
//! `status: Failure`, `message`, `reason`, `code`, `details`) with the same HTTP code.

use serde_json::{Value, json};

/// An API error: the HTTP status code, the Kubernetes `reason` and a message. Every failure
/// of the fake (over HTTP or through the handle) is one of these.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    /// HTTP status code (404, 409, 410, 422, …).
    pub code: u16,
    /// Kubernetes reason ("NotFound", "AlreadyExists", "Conflict", "Invalid", "Expired", …).
    pub reason: String,
    /// Human-readable message, worded like the real API server's.
    pub message: String,
    /// What the `Status` says in `details` (boxed: errors travel in every `Result`).
    pub details: Box<ErrorDetails>,
}

/// The `details` of a `Status`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorDetails {
    /// `details.name`, when the error concerns one object.
    pub name: Option<String>,
    /// `details.kind` (the plural resource name, as the real server reports it).
    pub kind: Option<String>,
    /// `details.group`.
    pub group: Option<String>,
    /// `details.causes[].field` for validation errors.
    pub field: Option<String>,
    /// `Retry-After` seconds to send (429 and 503 faults).
    pub retry_after: Option<u64>,
    /// `details.causes` of a validation error with several (schema validation); when
    /// empty, `field` makes the one cause.
    pub causes: Vec<Cause>,
}

/// One entry of `details.causes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// `FieldValueRequired`, `FieldValueInvalid`, `FieldValueNotSupported`, …
    pub reason: &'static str,
    /// The error without its field: `Required value`, `Invalid value: …`.
    pub message: String,
    /// The field's path, `spec.a.b[0].c`.
    pub field: String,
}

impl ApiError {
    /// An error with only a code, reason and message.
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason: reason.to_string(),
            message: message.into(),
            details: Box::default(),
        }
    }

    fn about(mut self, group: &str, plural: &str, name: &str) -> Self {
        self.details.group = Some(group.to_string());
        self.details.kind = Some(plural.to_string());
        self.details.name = Some(name.to_string());
        self
    }

    /// 404 `<plural>.<group> "<name>" not found`.
    pub fn not_found(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(group, plural)),
        )
        .about(group, plural, name)
    }

    /// 409 `<plural>.<group> "<name>" already exists`.
    pub fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(group, plural)),
        )
        .about(group, plural, name)
    }

    /// 409 Conflict, worded as the real server words a stale `resourceVersion`.
    pub fn conflict(group: &str, plural: &str, name: &str) -> Self {
        Self::conflict_with(
            group,
            plural,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 409 Conflict: `Operation cannot be fulfilled on <plural> "<name>": <why>`.
    pub fn conflict_with(group: &str, plural: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                qualified(group, plural)
            ),
        )
        .about(group, plural, name)
    }

    /// 422 Invalid, naming the field.
    pub fn invalid(group: &str, kind: &str, name: &str, field: &str, why: &str) -> Self {
        let mut e = Self::new(
            422,
            "Invalid",
            format!("{kind} \"{name}\" is invalid: {field}: {why}"),
        );
        e.details.group = Some(group.to_string());
        e.details.kind = Some(kind.to_string());
        e.details.name = Some(name.to_string());
        e.details.field = Some(field.to_string());
        e
    }

    /// 422 Invalid with every cause, worded as the real server words a custom resource's
    /// validation errors: `Kind.group "name" is invalid: field: message`, or
    /// `… is invalid: [f1: m1, f2: m2]` for several.
    pub fn invalid_causes(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        let listed: Vec<String> = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        let errors = match listed.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let mut e = Self::new(
            422,
            "Invalid",
            format!(
                "{} \"{name}\" is invalid: {errors}",
                qualified_kind(group, kind)
            ),
        );
        e.details.group = Some(group.to_string());
        e.details.kind = Some(kind.to_string());
        e.details.name = Some(name.to_string());
        e.details.field = causes.first().map(|c| c.field.clone());
        e.details.causes = causes;
        e
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 410 Expired (a resourceVersion older than the retained history).
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    /// 415 UnsupportedMediaType.
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/merge-patch+json, application/strategic-merge-patch+json, application/json-patch+json, application/apply-patch+yaml (got {content_type:?})"
            ),
        )
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// The reason a real server reports for a bare HTTP code (used by injected faults).
    pub fn for_code(code: u16, message: impl Into<String>) -> Self {
        let reason = match code {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            405 => "MethodNotAllowed",
            409 => "Conflict",
            410 => "Expired",
            422 => "Invalid",
            429 => "TooManyRequests",
            500 => "InternalError",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "Unknown",
        };
        Self::new(code, reason, message)
    }

    /// The `Status` object the server sends.
    pub fn to_status(&self) -> Value {
        let mut details = serde_json::Map::new();
        if let Some(n) = &self.details.name {
            details.insert("name".into(), json!(n));
        }
        if let Some(g) = &self.details.group {
            details.insert("group".into(), json!(g));
        }
        if let Some(k) = &self.details.kind {
            details.insert("kind".into(), json!(k));
        }
        if !self.details.causes.is_empty() {
            let causes: Vec<Value> = self
                .details
                .causes
                .iter()
                .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                .collect();
            details.insert("causes".into(), Value::Array(causes));
        } else if let Some(f) = &self.details.field {
            details.insert(
                "causes".into(),
                json!([{"reason": "FieldValueInvalid", "message": self.message, "field": f}]),
            );
        }
        if let Some(s) = self.details.retry_after {
            details.insert("retryAfterSeconds".into(), json!(s));
        }
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if !details.is_empty() {
            status["details"] = Value::Object(details);
        }
        status
    }
}

/// `plural` or `plural.group`, as the real server names a resource in messages.
pub(crate) fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

/// `Kind` or `Kind.group`, as the real server names a kind in validation errors.
fn qualified_kind(group: &str, kind: &str) -> String {
    if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    }
}

/// A success `Status` (DELETE of most built-in kinds).
pub fn success_status(group: &str, plural: &str, name: &str, uid: &str) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": name, "group": group, "kind": plural, "uid": uid},
    })
}
