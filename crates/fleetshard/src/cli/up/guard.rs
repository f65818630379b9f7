//! `up`'s dashboard answers only requests addressed to it by a loopback name, and takes
//! control requests only from its own page.
//!
//! The page carries the control token, and the controls kill, pause and scale replicas.
//! A page of another site cannot read the token across origins, but DNS rebinding makes
//! the browser treat `http://evil.example:PORT` as that site while its name resolves to
//! 127.0.0.1: every request then arrives with `Host: evil.example:PORT`. So:
//! - `Host` must be `127.0.0.1:PORT`, `localhost:PORT` or `[::1]:PORT` with the port
//!   listened on; anything else (or none) is answered `421 Misdirected Request` and
//!   nothing else;
//! - a request that changes state (any method but `GET`, `HEAD`, `OPTIONS`) carrying an
//!   `Origin` must come from one of those origins (`http://HOST:PORT`); another origin,
//!   `null` included, is answered `403 Forbidden`. Browsers send `Origin` with every such
//!   request; a client that sends none (curl, scripts) still needs the token.

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The names `up`'s dashboard answers to on `port`.
#[derive(Debug, Clone)]
pub struct LoopbackOnly {
    hosts: Vec<String>,
}

impl LoopbackOnly {
    /// The loopback names with `port`.
    pub fn new(port: u16) -> Self {
        LoopbackOnly {
            hosts: ["127.0.0.1", "localhost", "[::1]"]
                .iter()
                .map(|h| format!("{h}:{port}"))
                .collect(),
        }
    }

    /// `router` with every request checked first.
    pub fn guard(self, router: axum::Router) -> axum::Router {
        router.layer(axum::middleware::from_fn_with_state(self, check))
    }

    fn host_allowed(&self, host: &str) -> bool {
        self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host))
    }

    fn origin_allowed(&self, origin: &str) -> bool {
        origin
            .strip_prefix("http://")
            .is_some_and(|host| self.host_allowed(host))
    }
}

async fn check(State(allowed): State<LoopbackOnly>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !allowed.host_allowed(host) {
        return (
            StatusCode::MISDIRECTED_REQUEST,
            "this dashboard answers only to 127.0.0.1, localhost or [::1] with its port\n",
        )
            .into_response();
    }
    let changes_state = !matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    if changes_state
        && let Some(origin) = headers.get(header::ORIGIN)
        && !origin.to_str().is_ok_and(|o| allowed.origin_allowed(o))
    {
        return (
            StatusCode::FORBIDDEN,
            "a control request from another origin is refused\n",
        )
            .into_response();
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::routing::{get, post};
    use tower::ServiceExt as _;

    fn app() -> axum::Router {
        LoopbackOnly::new(8080).guard(
            axum::Router::new()
                .route("/dashboard", get(|| async { "token-in-page" }))
                .route("/api/dashboard/control", post(|| async { "done" })),
        )
    }

    async fn status(method: &str, host: Option<&str>, origin: Option<&str>) -> (u16, String) {
        let path = if method == "GET" {
            "/dashboard"
        } else {
            "/api/dashboard/control"
        };
        let mut request = Request::builder().method(method).uri(path);
        if let Some(h) = host {
            request = request.header(header::HOST, h);
        }
        if let Some(o) = origin {
            request = request.header(header::ORIGIN, o);
        }
        let response = app()
            .oneshot(request.body(Body::empty()).unwrap())
            .await
            .unwrap();
        let code = response.status().as_u16();
        let body = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        (code, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn a_forged_host_gets_nothing() {
        for host in [
            Some("evil.example:8080"),
            Some("127.0.0.1.evil.example:8080"),
            Some("127.0.0.1:9999"),
            Some("localhost"),
            None,
        ] {
            let (code, body) = status("GET", host, None).await;
            assert_eq!(code, 421, "{host:?}");
            assert!(!body.contains("token"), "{host:?}: {body}");
            assert_eq!(status("POST", host, None).await.0, 421, "{host:?}");
        }
        for host in ["127.0.0.1:8080", "LOCALHOST:8080", "[::1]:8080"] {
            assert_eq!(
                status("GET", Some(host), None).await,
                (200, "token-in-page".into())
            );
        }
    }

    #[tokio::test]
    async fn a_control_request_from_another_origin_is_refused() {
        let host = Some("127.0.0.1:8080");
        for origin in ["http://evil.example:8080", "null", "https://127.0.0.1:8080"] {
            assert_eq!(status("POST", host, Some(origin)).await.0, 403, "{origin}");
        }
        for origin in [
            Some("http://127.0.0.1:8080"),
            Some("http://localhost:8080"),
            None,
        ] {
            assert_eq!(status("POST", host, origin).await.0, 200, "{origin:?}");
        }
        // Reading is not changing: a GET's Origin is not judged.
        assert_eq!(
            status("GET", host, Some("http://evil.example:8080"))
                .await
                .0,
            200
        );
    }
}
