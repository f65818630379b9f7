//! A real smart-HTTP Git server on 127.0.0.1: Git's own `git http-backend` run as a CGI
//! program for every request, serving the repositories under one directory, anonymously.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use fleetshard_testsupport::git_http::GitHttpServer;
//! let server = GitHttpServer::start("/srv/repos").await?;
//! println!("{}", server.url("app")); // http://127.0.0.1:PORT/app serves /srv/repos/app
//! # Ok(()) }
//! ```
//!
//! Every repository under the root is exported (`GIT_HTTP_EXPORT_ALL`), bare or not (a
//! worktree's `.git` is found as `git clone` finds it). Requests are logged
//! ([`GitHttpServer::requests`]) so that tests can count fetches, and a path prefix can be
//! made to answer 401 or 403 ([`GitHttpServer::deny`]) as a private repository would, or
//! to require HTTP basic authentication ([`GitHttpServer::require_basic_auth`]).
//! Git runs isolated from the user's and the system's configuration. Responses are
//! buffered whole (fine for test repositories).

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, Method, Response, StatusCode, Uri};

/// Failures starting the server.
#[derive(Debug, thiserror::Error)]
pub enum GitHttpError {
    /// Binding or inspecting the loopback listener failed.
    #[error("Git HTTP server: cannot listen on 127.0.0.1: {0}")]
    Bind(#[source] std::io::Error),
}

/// A smart-HTTP Git server on a free loopback port, stopped when dropped.
pub struct GitHttpServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: tokio::sync::watch::Sender<bool>,
}

struct Shared {
    root: PathBuf,
    requests: Mutex<Vec<String>>,
    denied: Mutex<Vec<(String, u16)>>,
    /// Path prefix → the `Authorization` value it requires.
    protected: Mutex<Vec<(String, String)>>,
}

impl GitHttpServer {
    /// Serves the repositories under `root` on `127.0.0.1`, on a port the system picks.
    pub async fn start(root: impl Into<PathBuf>) -> Result<Self, GitHttpError> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(GitHttpError::Bind)?;
        let addr = listener.local_addr().map_err(GitHttpError::Bind)?;
        let shared = Arc::new(Shared {
            root: root.into(),
            requests: Mutex::new(Vec::new()),
            denied: Mutex::new(Vec::new()),
            protected: Mutex::new(Vec::new()),
        });
        let app = axum::Router::new()
            .fallback(handle)
            // A push or a fetch with many `have`s may exceed axum's default 2 MB.
            .layer(DefaultBodyLimit::disable())
            .with_state(Arc::clone(&shared));
        let (shutdown, mut stop) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stop.wait_for(|s| *s).await;
                })
                .await;
            if let Err(e) = served {
                tracing::warn!(error = %e, "Git HTTP server stopped with an error");
            }
        });
        Ok(GitHttpServer {
            addr,
            shared,
            shutdown,
        })
    }

    /// `http://127.0.0.1:PORT/<repo>`: the URL of the repository at `<root>/<repo>`.
    pub fn url(&self, repo: &str) -> String {
        format!("http://{}/{}", self.addr, repo.trim_start_matches('/'))
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request so far, in arrival order, as `METHOD /path?query`.
    pub fn requests(&self) -> Vec<String> {
        lock(&self.shared.requests).clone()
    }

    /// From now on, requests whose path starts with `/<prefix>` are answered `status`
    /// (an HTTP status code; 500 if it is not one) without running Git (401 comes with a
    /// `WWW-Authenticate: Basic` challenge), as a server answers for a private repository.
    pub fn deny(&self, prefix: &str, status: u16) {
        let prefix = format!("/{}", prefix.trim_start_matches('/'));
        lock(&self.shared.denied).push((prefix, status));
    }
}

impl GitHttpServer {
    /// From now on, requests whose path starts with `/<prefix>` need HTTP basic
    /// authentication as `user` with `password`: without it, or with other credentials,
    /// they are answered 401 with a `WWW-Authenticate: Basic` challenge, as a private
    /// repository on a Git host is.
    pub fn require_basic_auth(&self, prefix: &str, user: &str, password: &str) {
        use base64::Engine as _;
        let prefix = format!("/{}", prefix.trim_start_matches('/'));
        let expected = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
        );
        lock(&self.shared.protected).push((prefix, expected));
    }
}

impl Drop for GitHttpServer {
    fn drop(&mut self) {
        self.shutdown.send_replace(true);
    }
}

/// One request: the denial rules, else `git http-backend` on the blocking pool (it is a
/// child process whose output is read whole).
async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response<Body> {
    let query = uri.query().unwrap_or("").to_owned();
    let path = uri.path().to_owned();
    lock(&shared.requests).push(if query.is_empty() {
        format!("{method} {path}")
    } else {
        format!("{method} {path}?{query}")
    });
    let mut denied = lock(&shared.denied)
        .iter()
        .find(|(prefix, _)| path.starts_with(prefix.as_str()))
        .map(|(_, status)| *status);
    let given = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let refused = lock(&shared.protected)
        .iter()
        .any(|(prefix, expected)| path.starts_with(prefix.as_str()) && given != expected);
    if refused {
        denied = denied.or(Some(401));
    }
    if let Some(status) = denied {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = Response::builder().status(status);
        if status == StatusCode::UNAUTHORIZED {
            response = response.header("WWW-Authenticate", "Basic realm=\"fleetshard-test\"");
        }
        return response
            .body(Body::from(format!("{status}\n")))
            .unwrap_or_default();
    }
    let root = shared.root.clone();
    let request = CgiRequest {
        method: method.to_string(),
        path,
        query,
        headers,
        body,
    };
    let output = tokio::task::spawn_blocking(move || run_backend(&root, request)).await;
    let output = match output {
        Ok(Ok(output)) => output,
        Ok(Err(e)) => return error_response(format!("cannot run git http-backend: {e}")),
        Err(e) => return error_response(format!("git http-backend task failed: {e}")),
    };
    cgi_response(&output).unwrap_or_else(|| {
        error_response(format!(
            "git http-backend wrote no CGI header: {:?}",
            String::from_utf8_lossy(&output[..output.len().min(200)])
        ))
    })
}

struct CgiRequest {
    method: String,
    path: String,
    query: String,
    headers: HeaderMap,
    body: Bytes,
}

/// Runs `git http-backend` with the CGI variables of `request` and its body on stdin;
/// returns its stdout (CGI headers, blank line, body).
fn run_backend(root: &Path, request: CgiRequest) -> std::io::Result<Vec<u8>> {
    let mut command = Command::new("git");
    command
        .arg("http-backend")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REQUEST_METHOD", &request.method)
        .env("PATH_INFO", &request.path)
        .env("QUERY_STRING", &request.query)
        .env("CONTENT_LENGTH", request.body.len().to_string())
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("SERVER_PROTOCOL", "HTTP/1.1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (name, value) in &request.headers {
        let Ok(value) = value.to_str() else { continue };
        if name == "content-type" {
            command.env("CONTENT_TYPE", value);
        } else if name != "content-length" {
            // CGI's names for the other headers; Git reads HTTP_GIT_PROTOCOL (protocol v2)
            // and HTTP_CONTENT_ENCODING (a gzipped request) among them.
            let var = format!(
                "HTTP_{}",
                name.as_str().to_ascii_uppercase().replace('-', "_")
            );
            command.env(var, value);
        }
    }
    let mut child = command.spawn()?;
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| std::io::Error::other("the child has no stdin"))?;
    // Written from another thread: the backend may answer before it has read everything,
    // and a full stdout pipe would otherwise block both sides.
    let body = request.body;
    let writer = std::thread::spawn(move || {
        // A backend that stops reading early (an error answer) closes the pipe: not ours.
        let _ = stdin.write_all(&body);
    });
    let output = child.wait_with_output()?;
    let _ = writer.join();
    if !output.stderr.is_empty() {
        tracing::debug!(stderr = %String::from_utf8_lossy(&output.stderr), "git http-backend");
    }
    Ok(output.stdout)
}

/// The HTTP response of a CGI program's output: `Status:` (200 without one), the other
/// headers, and the body after the first blank line. `None` without a blank line.
fn cgi_response(output: &[u8]) -> Option<Response<Body>> {
    let crlf = find(output, b"\r\n\r\n").map(|i| (i, i + 4));
    let lf = find(output, b"\n\n").map(|i| (i, i + 2));
    let (end, body_start) = match (crlf, lf) {
        (Some(a), Some(b)) => a.min(b),
        (a, b) => a.or(b)?,
    };
    let head = String::from_utf8_lossy(&output[..end]);
    let mut response = Response::builder();
    let mut status = StatusCode::OK;
    for line in head.lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            let code = value.split_whitespace().next().unwrap_or("");
            status = code.parse().ok()?;
        } else {
            response = response.header(name.trim(), value);
        }
    }
    response
        .status(status)
        .body(Body::from(output[body_start..].to_vec()))
        .ok()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn error_response(message: String) -> Response<Body> {
    tracing::warn!(%message, "Git HTTP server");
    Response::builder()
        .status(StatusCode::INTERNAL_SERVER_ERROR)
        .body(Body::from(message))
        .unwrap_or_default()
}

/// A poisoned lock only means a handler panicked; the logs stay usable.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgi_output_becomes_status_headers_and_body() {
        let r =
            cgi_response(b"Status: 404 Not Found\r\nContent-Type: text/plain\r\n\r\nnope").unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
        assert_eq!(r.headers()["content-type"], "text/plain");
        let r = cgi_response(b"Content-Type: application/x-git\n\n\x00\x01").unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        assert!(cgi_response(b"no blank line").is_none());
    }
}
