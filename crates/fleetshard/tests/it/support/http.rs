//! Minimal HTTP/1.1 requests against a replica's `/readyz`, `/healthz`, `/metrics` and
//! dashboard (no client dependency: one request per connection, `Connection: close`).

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::Duration;

/// A loopback port nobody listened on a moment ago (the OS picks it).
pub fn free_port() -> u16 {
    fleetshard_testsupport::kube_api::free_port().expect("a free port on 127.0.0.1")
}

/// Status code and body of `GET path`, or None when nothing answers (in 2 s).
pub fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    exchange(port, &request, Duration::from_secs(2))
}

/// Status code and body of `GET path` sent with `Host: host` (as a page of another
/// site, its name rebound to 127.0.0.1, sends it), or None when nothing answers.
pub fn get_as(port: u16, path: &str, host: &str) -> Option<(u16, String)> {
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    exchange(port, &request, Duration::from_secs(2))
}

/// Sends `request` on a new connection and reads the answer until the server closes it
/// (within `read_timeout`): its status code and body.
fn exchange(port: u16, request: &str, read_timeout: Duration) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(read_timeout)).ok()?;
    s.set_write_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(request.as_bytes()).ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let code = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())?;
    Some((code, body))
}

/// The value of the metric line `name value` in an OpenMetrics text body.
pub fn metric(body: &str, name: &str) -> Option<f64> {
    body.lines()
        .filter_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .find_map(|v| v.trim().parse().ok())
}

/// Status code and body of `POST path` with `headers` and a JSON `body`, or None when
/// nothing answers (in 10 s).
pub fn post(port: u16, path: &str, headers: &[(&str, &str)], body: &str) -> Option<(u16, String)> {
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n{extra}\r\n{body}",
        body.len()
    );
    exchange(port, &request, Duration::from_secs(10))
}
