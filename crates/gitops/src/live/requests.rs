//! The Kubernetes API requests made on an application's behalf, counted as Argo CD's
//! `argocd_app_k8s_request_total` counts them: by the server, the response code (`0` when
//! no response came: a connection error, or a request cut by its deadline), the verb, the
//! resource (its plural) and namespace as the request's path names them (Argo CD's
//! `kubeclientmetrics` reading of the URL), and whether the app's operation is a dry run.
//!
//! An [`AppConn`] is a cluster's connection with a client of the app's own around the
//! cluster's shared one: every request through it is counted in the app's
//! [`AppRequests`] when its response (or failure) arrives, under the app's own lock only,
//! so apps never wait on each other's counts.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use http::{Method, Request, Response};
use kube::Client;
use kube::client::Body;
use tower::Service;

use super::{ClusterConn, lock};

/// The labels of one request count, beside the app's own (`namespace`, `name`,
/// `project`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestLabels {
    /// `server`: the scheme and host (with port) the request went to.
    pub server: Arc<str>,
    /// `response_code`: the HTTP status, `0` when no response came.
    pub response_code: u16,
    /// `verb`: `Get`, `List`, `Watch`, `Create`, `Update`, `Patch`, `Delete` or `Unknown`.
    pub verb: &'static str,
    /// `resource_kind`: the resource as the path names it (`configmaps`).
    pub resource_kind: String,
    /// `resource_namespace`: the namespace the path names (empty: cluster-scoped).
    pub resource_namespace: String,
    /// `dry_run`: the app's operation is a dry run.
    pub dry_run: bool,
}

/// One app's requests so far, by label set.
#[derive(Debug, Default)]
pub struct AppRequests(Mutex<BTreeMap<RequestLabels, u64>>);

impl AppRequests {
    /// Every label set counted, with its count.
    pub fn counts(&self) -> BTreeMap<RequestLabels, u64> {
        lock(&self.0).clone()
    }

    /// How many requests were counted, every label set together.
    pub fn total(&self) -> u64 {
        lock(&self.0).values().sum()
    }

    fn count(&self, labels: RequestLabels) {
        *lock(&self.0).entry(labels).or_default() += 1;
    }
}

/// A cluster as one app's requests reach it: the connection, and a client that counts
/// every request it sends in the app's [`AppRequests`].
pub struct AppConn<'a> {
    /// The cluster's connection (its caches, options and discovery).
    pub conn: &'a ClusterConn,
    /// The app's client: the cluster's, counting.
    pub client: Client,
}

impl<'a> AppConn<'a> {
    /// `conn` for the app whose requests `requests` counts; `dry_run`: its operation is a
    /// dry run.
    pub fn new(conn: &'a ClusterConn, requests: Arc<AppRequests>, dry_run: bool) -> Self {
        let counting = Counting {
            inner: conn.client().clone(),
            requests,
            server: scheme_and_host(&conn.access.server).into(),
            dry_run,
        };
        let client = Client::new(counting, conn.client().default_namespace().to_owned());
        AppConn { conn, client }
    }
}

/// `https://host:port` of a server URL (Argo CD labels requests with the request URL's
/// scheme and host, without a path).
fn scheme_and_host(server: &str) -> String {
    match server.parse::<http::Uri>() {
        Ok(uri) => match (uri.scheme_str(), uri.authority()) {
            (Some(scheme), Some(authority)) => {
                let host = authority.as_str().rsplit('@').next().unwrap_or_default();
                format!("{scheme}://{host}")
            }
            _ => server.to_owned(),
        },
        Err(_) => server.to_owned(),
    }
}

/// The service of an [`AppConn`]'s client: the cluster's client, each request counted.
#[derive(Clone)]
struct Counting {
    inner: Client,
    requests: Arc<AppRequests>,
    server: Arc<str>,
    dry_run: bool,
}

type Answer = Pin<Box<dyn Future<Output = Result<Response<Body>, kube::Error>> + Send>>;

impl Service<Request<Body>> for Counting {
    type Response = Response<Body>;
    type Error = kube::Error;
    type Future = Answer;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // The cluster's client is readied in `send`.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let (verb, resource_kind, resource_namespace) = describe(
            request.method(),
            request.uri().path(),
            request.uri().query(),
        );
        let pending = Pending {
            requests: self.requests.clone(),
            labels: Some(RequestLabels {
                server: self.server.clone(),
                response_code: 0,
                verb,
                resource_kind,
                resource_namespace,
                dry_run: self.dry_run,
            }),
        };
        let inner = self.inner.clone();
        Box::pin(async move {
            let mut pending = pending;
            let answer = inner.send(request).await;
            pending.finish(answer.as_ref().map_or(0, |r| r.status().as_u16()));
            answer
        })
    }
}

/// A request sent and not yet answered: counted with its code when it is, with `0` if it
/// is dropped first (its deadline cut it).
struct Pending {
    requests: Arc<AppRequests>,
    labels: Option<RequestLabels>,
}

impl Pending {
    fn finish(&mut self, code: u16) {
        if let Some(mut labels) = self.labels.take() {
            labels.response_code = code;
            self.requests.count(labels);
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.finish(0);
    }
}

/// The verb, resource and namespace of a request, read from its method and path as Argo
/// CD's `kubeclientmetrics` reads them: a `GET` of a collection is `List` (`Watch` with
/// `watch=true`), of one object `Get`; the resource is the collection's segment.
pub(crate) fn describe(
    method: &Method,
    path: &str,
    query: Option<&str>,
) -> (&'static str, String, String) {
    let segments: Vec<&str> = path.split('/').collect();
    let last = |back: usize| {
        segments
            .len()
            .checked_sub(back + 1)
            .and_then(|i| segments.get(i))
            .map_or(String::new(), |s| (*s).to_owned())
    };
    let namespaced = is_namespaced(&segments);
    let verb = match *method {
        Method::POST => "Create",
        Method::DELETE => "Delete",
        Method::PATCH => "Patch",
        Method::PUT => "Update",
        Method::GET if after_version(&segments) % 2 == 1 => {
            let watch = query
                .into_iter()
                .flat_map(|q| q.split('&'))
                .find_map(|pair| pair.strip_prefix("watch="));
            if watch == Some("true") {
                "Watch"
            } else {
                "List"
            }
        }
        Method::GET => "Get",
        _ => return ("Unknown", String::new(), String::new()),
    };
    let (kind_back, namespace_back) = match verb {
        "List" | "Watch" | "Create" => (0, 1),
        _ => (1, 2),
    };
    let namespace = if namespaced {
        last(namespace_back)
    } else {
        String::new()
    };
    (verb, last(kind_back), namespace)
}

/// How many path segments (at most four) follow the API version (`v1`, `v1beta1`).
fn after_version(segments: &[&str]) -> usize {
    let version = segments.iter().position(|s| {
        let mut chars = s.chars();
        chars.next() == Some('v')
            && chars.next().is_some_and(|c| c.is_ascii_digit())
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    });
    version.map_or(0, |i| (segments.len() - i - 1).min(4))
}

/// The path names a namespace: `…/namespaces/NAME/RESOURCE…`.
fn is_namespaced(segments: &[&str]) -> bool {
    let word = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    };
    let starts_word = |s: &str| s.chars().next().is_some_and(|c| word(&c.to_string()));
    // Not the path's first segment: something comes before `/namespaces/`.
    segments
        .windows(3)
        .enumerate()
        .any(|(i, w)| i >= 2 && w[0] == "namespaces" && word(w[1]) && starts_word(w[2]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(method: Method, path: &str, query: Option<&str>) -> (&'static str, String, String) {
        describe(&method, path, query)
    }

    #[test]
    fn requests_are_described_as_argo_cd_describes_them() {
        let ns = |v: &'static str, k: &str, n: &str| (v, k.to_owned(), n.to_owned());
        assert_eq!(
            d(
                Method::PATCH,
                "/api/v1/namespaces/default/configmaps/cm",
                None
            ),
            ns("Patch", "configmaps", "default")
        );
        assert_eq!(
            d(
                Method::GET,
                "/apis/apps/v1/namespaces/web/deployments/api",
                None
            ),
            ns("Get", "deployments", "web")
        );
        assert_eq!(
            d(
                Method::GET,
                "/apis/apps/v1/namespaces/web/deployments",
                None
            ),
            ns("List", "deployments", "web")
        );
        assert_eq!(
            d(
                Method::GET,
                "/api/v1/pods",
                Some("watch=true&timeoutSeconds=60")
            ),
            ns("Watch", "pods", "")
        );
        assert_eq!(
            d(Method::POST, "/api/v1/namespaces/default/configmaps", None),
            ns("Create", "configmaps", "default")
        );
        // A cluster-scoped object, and a namespace itself (not "in" a namespace).
        assert_eq!(
            d(
                Method::DELETE,
                "/apis/rbac.authorization.k8s.io/v1/clusterroles/r",
                None
            ),
            ns("Delete", "clusterroles", "")
        );
        assert_eq!(
            d(Method::PATCH, "/api/v1/namespaces/team-a", None),
            ns("Patch", "namespaces", "")
        );
        assert_eq!(
            d(Method::PUT, "/api/v1/namespaces/a/secrets/s", None),
            ns("Update", "secrets", "a")
        );
        assert_eq!(d(Method::HEAD, "/api/v1/pods", None), ns("Unknown", "", ""));
    }

    #[test]
    fn the_server_label_is_the_scheme_and_host() {
        assert_eq!(
            scheme_and_host("https://rancher.example.com/k8s/clusters/c-1"),
            "https://rancher.example.com"
        );
        assert_eq!(
            scheme_and_host("https://10.0.0.1:6443"),
            "https://10.0.0.1:6443"
        );
    }
}
