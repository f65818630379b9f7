//! The HTTP layer: path parsing into discovery or resource requests, verbs, query
//! parameters, faults and counters, and JSON responses (errors as `Status`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::apply::{self, ApplyOptions, PatchType};
use super::discovery;
use super::faults::{AnswerFate, RequestInfo, Verb};
use super::list;
use super::ops::{self, Sub};
use super::registry::ResourceKind;
use super::selectors::{FieldSelector, LabelSelector};
use super::state::Shared;
use super::status::ApiError;
use super::store::EventType;
use super::watch::{self, WatchRequest};
use super::writes::{WriteOutcome, WriteRecord, WriteTicket};

mod target;

use target::{Target, authenticate, flag, info_of, not_found_path, parse_target, verb_of};

/// The router: every path goes through [`handle`].
pub fn router(shared: Arc<Shared>) -> axum::Router {
    axum::Router::new()
        .fallback(handle)
        .with_state(shared)
        // The limit is the real server's, checked in `handle` to answer with a Status.
        .layer(axum::extract::DefaultBodyLimit::disable())
}

/// The real API server's request body limit.
const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

fn json_response(code: u16, body: &Value, content_type: &str) -> Response {
    let mut r = Response::new(Body::from(serde_json::to_vec(body).unwrap_or_default()));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    if let Ok(v) = HeaderValue::from_str(content_type) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r
}

fn ok(body: &Value) -> Response {
    json_response(200, body, "application/json")
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = json_response(self.code, &self.to_status(), "application/json");
        if let Some(s) = self.details.retry_after
            && let Ok(v) = HeaderValue::from_str(&s.to_string())
        {
            r.headers_mut().insert(header::RETRY_AFTER, v);
        }
        r
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let q: HashMap<String, String> = uri
        .query()
        .and_then(|s| {
            axum::extract::Query::<HashMap<String, String>>::try_from_uri(
                &format!("/?{s}").parse().ok()?,
            )
            .ok()
        })
        .map(|axum::extract::Query(q)| q)
        .unwrap_or_default();
    let caller = match authenticate(&shared, &headers) {
        Ok(caller) => caller.cloned(),
        Err(e) => return e.into_response(),
    };
    let path = uri.path().to_string();
    let target = match parse_target(&shared, &path) {
        Ok(t) => t,
        Err(e) => return e.into_response(),
    };
    let verb = verb_of(&method, &target, &q);
    let mut info = info_of(&path, &target, verb, &q);
    info.user_agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    shared.faults.count(&info);
    // Authorized after counting (the attempt shows in the counters), before faults.
    if let (Some(caller), Target::Resource { kind, .. }) = (&caller, &target)
        && let Err(e) = caller.authorize(&info, kind.namespaced)
    {
        return e.into_response();
    }
    // A write is logged from its arrival; dropped unanswered (the client closed the
    // connection during a delay or a partition), it is logged as abandoned.
    let ticket = verb.filter(|v| v.is_write()).map(|v| {
        WriteTicket::new(
            shared.clone(),
            WriteRecord {
                seq: 0,
                verb: v,
                method: method.to_string(),
                path: path.clone(),
                object: serde_json::from_slice(&body).ok(),
                field_manager: q.get("fieldManager").cloned(),
                dry_run: info.dry_run,
                user_agent: info.user_agent.clone(),
                received: tokio::time::Instant::now(),
                received_unix_ms: super::meta::unix_ms(),
                gave_up: None,
                completed: None,
                outcome: WriteOutcome::InFlight,
            },
        )
    });
    let incoming = Incoming {
        method,
        path,
        target,
        verb,
        info,
        q,
        headers,
        body,
    };
    match shared.faults.answer_fate(&incoming.info) {
        AnswerFate::Answered => {
            let response = respond(&shared, incoming).await;
            if let Some(ticket) = ticket {
                ticket.answered(response.status().as_u16());
            }
            response
        }
        AnswerFate::Lost => {
            let response = respond(&shared, incoming).await;
            if let Some(ticket) = ticket {
                ticket.reply_lost(response.status().as_u16());
            }
            // Held until the client gives up and this future is dropped.
            std::future::pending().await
        }
        AnswerFate::AfterGiveUp(after) => {
            // Served by a task of its own, which outlives this future: dropping it (the
            // client closed the connection) drops `gone`, which starts the countdown.
            let (gone, client_left) = tokio::sync::oneshot::channel::<()>();
            tokio::spawn(async move {
                let _ = client_left.await;
                if let Some(ticket) = &ticket {
                    ticket.client_gave_up();
                }
                tokio::time::sleep(after).await;
                let response = respond(&shared, incoming).await;
                if let Some(ticket) = ticket {
                    ticket.served_after_give_up(response.status().as_u16());
                }
            });
            let _gone = gone;
            std::future::pending().await
        }
    }
}

/// A request, parsed.
struct Incoming {
    method: Method,
    path: String,
    target: Target,
    verb: Option<Verb>,
    info: RequestInfo,
    q: HashMap<String, String>,
    headers: HeaderMap,
    body: Bytes,
}

/// Faults, then the request served.
async fn respond(shared: &Arc<Shared>, incoming: Incoming) -> Response {
    let Incoming {
        method,
        path,
        target,
        verb,
        info,
        q,
        headers,
        body,
    } = incoming;
    if let Err(e) = shared.faults.apply(&info).await {
        return e.into_response();
    }
    if body.len() > MAX_BODY_BYTES {
        return ApiError::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {MAX_BODY_BYTES}"),
        )
        .into_response();
    }
    let Some(verb) = verb else {
        return ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({method} {path})"
        ))
        .into_response();
    };
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    match target {
        Target::Version => ok(&discovery::version()),
        Target::CoreVersions if discovery::wants_aggregated(accept) => json_response(
            200,
            &discovery::aggregated(&shared.registry(), true),
            discovery::AGGREGATED_CONTENT_TYPE,
        ),
        Target::CoreVersions => ok(&discovery::api_versions(&shared.address)),
        Target::Groups if discovery::wants_aggregated(accept) => json_response(
            200,
            &discovery::aggregated(&shared.registry(), false),
            discovery::AGGREGATED_CONTENT_TYPE,
        ),
        Target::Groups => ok(&discovery::api_group_list(&shared.registry())),
        Target::Group(g) => discovery::api_group(&shared.registry(), &g)
            .map_or_else(|| not_found_path().into_response(), |d| ok(&d)),
        Target::ResourceList(g, v) => discovery::api_resource_list(&shared.registry(), &g, &v)
            .map_or_else(|| not_found_path().into_response(), |d| ok(&d)),
        Target::Resource {
            kind,
            namespace,
            name,
            sub,
        } => {
            let req = ResourceRequest {
                shared,
                kind,
                namespace,
                name: name.unwrap_or_default(),
                sub,
                q: &q,
                headers: &headers,
                body: &body,
                info,
            };
            match req.serve(verb) {
                Ok(r) => r,
                Err(e) => e.into_response(),
            }
        }
    }
}

struct ResourceRequest<'a> {
    shared: &'a Arc<Shared>,
    kind: ResourceKind,
    namespace: Option<String>,
    name: String,
    sub: Option<String>,
    q: &'a HashMap<String, String>,
    headers: &'a HeaderMap,
    body: &'a Bytes,
    info: RequestInfo,
}

impl ResourceRequest<'_> {
    fn ns(&self) -> &str {
        self.namespace.as_deref().unwrap_or_default()
    }

    fn sub(&self) -> Sub {
        if self.sub.as_deref() == Some("status") {
            Sub::Status
        } else {
            Sub::Main
        }
    }

    fn body_json(&self) -> Result<Value, ApiError> {
        serde_json::from_slice(self.body).map_err(|e| {
            ApiError::bad_request(format!(
                "the body of the request for {} {:?} could not be decoded as JSON: {e}",
                self.kind.kind, self.name
            ))
        })
    }

    /// Runs a write, or with `dryRun=All` runs it on a throw-away copy and reports the
    /// object as a real dry run does: with the stored resourceVersion (none for a create).
    fn write<T>(
        &self,
        f: impl FnOnce(&mut super::store::Store) -> Result<T, ApiError>,
    ) -> Result<T, ApiError>
    where
        T: DryRunResult,
    {
        self.write_dry(false, f)
    }

    /// [`Self::write`], also as a dry run when `dry` (a DELETE's body asked for it:
    /// `DeleteOptions.dryRun: ["All"]`, as client libraries send it).
    fn write_dry<T>(
        &self,
        dry: bool,
        f: impl FnOnce(&mut super::store::Store) -> Result<T, ApiError>,
    ) -> Result<T, ApiError>
    where
        T: DryRunResult,
    {
        if dry || target::dry_run(self.q) {
            let key = ops::key(&self.kind, self.ns(), &self.name);
            let stored = self.shared.read().get(&key).map(|o| ops::stored_rv(o));
            let mut out = self.shared.dry_run(f)?;
            out.reset_rv(stored);
            Ok(out)
        } else {
            self.shared.write(f)
        }
    }

    fn labels(&self) -> Result<LabelSelector, ApiError> {
        LabelSelector::parse(self.q.get("labelSelector").map_or("", String::as_str))
    }

    fn fields(&self) -> Result<FieldSelector, ApiError> {
        FieldSelector::parse(
            self.q.get("fieldSelector").map_or("", String::as_str),
            self.kind.kind,
        )
    }

    fn serve(self, verb: Verb) -> Result<Response, ApiError> {
        let kind = self.kind;
        let shared = self.shared;
        let ns = self.ns().to_string();
        // Writes to a namespaced collection need the namespace in the path.
        if kind.namespaced && self.namespace.is_none() && verb.is_write() {
            return Err(ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource ({} across all namespaces)",
                kind.plural
            )));
        }
        match verb {
            Verb::Get => {
                let store = shared.read();
                let obj = store
                    .get(&ops::key(&kind, &ns, &self.name))
                    .ok_or_else(|| ApiError::not_found(kind.group, kind.plural, &self.name))?;
                Ok(if self.sub.as_deref() == Some("scale") {
                    ok(&apply::scale_of(obj))
                } else {
                    ok(obj)
                })
            }
            Verb::List => self.list().map(|v| ok(&v)),
            Verb::Watch => self.watch(),
            Verb::Create => {
                let body = self.body_json()?;
                let (obj, _) = self.write(|s| ops::create(s, &kind, &ns, body))?;
                Ok(json_response(201, &obj, "application/json"))
            }
            Verb::Update if self.sub.as_deref() == Some("scale") => {
                let body = self.body_json()?;
                let scale = shared.write(|s| {
                    apply::write_scale(s, &kind, &ns, &self.name, |sc| {
                        *sc = body;
                        Ok(())
                    })
                })?;
                Ok(ok(&scale))
            }
            Verb::Update => {
                let body = self.body_json()?;
                let sub = self.sub();
                let (obj, event) =
                    self.write(|s| ops::update(s, &kind, &ns, &self.name, body, sub))?;
                // A PUT that created (Leases) answers 201, as a create does.
                let created = event.is_some_and(|e| e.ty == EventType::Added);
                Ok(json_response(
                    if created { 201 } else { 200 },
                    &obj,
                    "application/json",
                ))
            }
            Verb::Patch => self.patch(),
            Verb::Delete => {
                let options = if self.body.is_empty() {
                    json!({})
                } else {
                    self.body_json()?
                };
                let dry = options
                    .get("dryRun")
                    .and_then(Value::as_array)
                    .is_some_and(|a| a.iter().any(|v| v == "All"));
                let (body, _) =
                    self.write_dry(dry, |s| ops::delete(s, &kind, &ns, &self.name, &options))?;
                Ok(ok(&body))
            }
            Verb::DeleteCollection => {
                let (labels, fields) = (self.labels()?, self.fields()?);
                let deleted = shared.write(|s| {
                    let names: Vec<String> = s
                        .objects_of((kind.group, kind.plural), Some(&ns))
                        .filter(|(_, o)| labels.matches(o) && fields.matches(o))
                        .map(|(k, _)| k.name.clone())
                        .collect();
                    let mut items = Vec::new();
                    for n in names {
                        if let Ok((obj, _)) = ops::delete(s, &kind, &ns, &n, &json!({})) {
                            items.push(obj);
                        }
                    }
                    items
                });
                Ok(ok(&json!({
                    "kind": format!("{}List", kind.kind),
                    "apiVersion": kind.api_version(),
                    "metadata": {"resourceVersion": shared.read().revision().to_string()},
                    "items": deleted,
                })))
            }
            Verb::Discovery => Err(not_found_path()),
        }
    }

    fn patch(self) -> Result<Response, ApiError> {
        let ct = self
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let pt =
            PatchType::from_content_type(ct).ok_or_else(|| ApiError::unsupported_media_type(ct))?;
        let body = apply::parse_body(pt, self.body)?;
        let (kind, ns, name) = (self.kind, self.ns().to_string(), self.name.clone());
        if self.sub.as_deref() == Some("scale") {
            let scale = self.shared.write(|s| {
                apply::write_scale(s, &kind, &ns, &name, |sc| match pt {
                    PatchType::Json => super::patch::json_patch(sc, &body),
                    _ => {
                        super::patch::merge_patch(sc, &body);
                        Ok(())
                    }
                })
            })?;
            return Ok(ok(&scale));
        }
        let opts = ApplyOptions {
            field_manager: self.q.get("fieldManager").cloned(),
            force: flag(self.q, "force"),
        };
        let sub = self.sub();
        let (obj, event) =
            self.write(|s| apply::patch(s, &kind, &ns, &name, pt, body, sub, &opts))?;
        // An apply that created the object answers 201, as a create does.
        let created = event.is_some_and(|e| e.ty == EventType::Added);
        let code = if created { 201 } else { 200 };
        Ok(json_response(code, &obj, "application/json"))
    }

    fn list(&self) -> Result<Value, ApiError> {
        let query = |k: &str| self.q.get(k).map(String::as_str).unwrap_or_default();
        list::list(
            self.shared,
            &self.kind,
            self.namespace.as_deref(),
            &list::ListQuery {
                labels: self.labels()?,
                fields: self.fields()?,
                resource_version: query("resourceVersion"),
                exact: query("resourceVersionMatch") == "Exact",
                limit: query("limit").parse::<usize>().ok().filter(|l| *l > 0),
                continue_token: query("continue"),
            },
        )
    }

    fn watch(&self) -> Result<Response, ApiError> {
        let req = WatchRequest {
            kind: self.kind,
            namespace: self.namespace.clone(),
            resource_version: self.q.get("resourceVersion").cloned().unwrap_or_default(),
            bookmarks: flag(self.q, "allowWatchBookmarks"),
            send_initial_events: flag(self.q, "sendInitialEvents"),
            timeout: self
                .q
                .get("timeoutSeconds")
                .and_then(|t| t.parse::<u64>().ok())
                .map(Duration::from_secs),
            labels: self.labels()?,
            fields: self.fields()?,
            info: self.info.clone(),
        };
        let stream = watch::start(self.shared.clone(), req)?;
        let mut r = Response::new(Body::from_stream(stream));
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        Ok(r)
    }
}

/// What a dry run reports: the object with the stored resourceVersion (or none).
trait DryRunResult {
    fn reset_rv(&mut self, stored: Option<u64>);
}

fn reset_rv_of(obj: &mut Value, stored: Option<u64>) {
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        match stored {
            Some(rv) => m.insert("resourceVersion".into(), json!(rv.to_string())),
            None => m.remove("resourceVersion"),
        };
    }
}

impl DryRunResult for ops::Written {
    fn reset_rv(&mut self, stored: Option<u64>) {
        reset_rv_of(&mut self.0, stored);
    }
}

impl DryRunResult for (Value, Vec<super::store::Event>) {
    fn reset_rv(&mut self, stored: Option<u64>) {
        reset_rv_of(&mut self.0, stored);
    }
}
