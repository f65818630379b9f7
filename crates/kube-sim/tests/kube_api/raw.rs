//! A tiny HTTP/1.1 client over a TCP socket, so tests can see exact status codes, headers
//! and streamed watch lines without an HTTP client dependency.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// A complete response.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

async fn send_head(
    addr: SocketAddr,
    method: &str,
    path: &str,
    extra_headers: &[(&str, &str)],
    content_type: Option<&str>,
    body: &[u8],
) -> BufReader<TcpStream> {
    let mut s = TcpStream::connect(addr).await.expect("connect to the fake");
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAccept: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(ct) = content_type {
        head.push_str(&format!("Content-Type: {ct}\r\n"));
    }
    for (name, value) in extra_headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).await.expect("write request");
    s.write_all(body).await.expect("write body");
    BufReader::new(s)
}

async fn read_head(r: &mut BufReader<TcpStream>) -> (u16, Vec<(String, String)>) {
    let mut line = String::new();
    r.read_line(&mut line).await.expect("status line");
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {line:?}"));
    let mut headers = Vec::new();
    loop {
        line.clear();
        r.read_line(&mut line).await.expect("header line");
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    (status, headers)
}

fn is_chunked(headers: &[(String, String)]) -> bool {
    headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"))
}

/// Reads one chunk of a chunked body; None at the end.
async fn read_chunk(r: &mut BufReader<TcpStream>) -> Option<Vec<u8>> {
    let mut line = String::new();
    if r.read_line(&mut line).await.ok()? == 0 {
        return None;
    }
    let size = usize::from_str_radix(line.trim(), 16).ok()?;
    let mut data = vec![0; size + 2];
    r.read_exact(&mut data).await.ok()?;
    data.truncate(size);
    (size > 0).then_some(data)
}

/// Sends a request and reads the whole response.
pub async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: &[u8],
) -> Resp {
    request_with(addr, method, path, &[], content_type, body).await
}

/// Sends a request with more headers (`Authorization`, say) and reads the whole response.
pub async fn request_with(
    addr: SocketAddr,
    method: &str,
    path: &str,
    extra_headers: &[(&str, &str)],
    content_type: Option<&str>,
    body: &[u8],
) -> Resp {
    let mut r = send_head(addr, method, path, extra_headers, content_type, body).await;
    let (status, headers) = read_head(&mut r).await;
    let mut body = Vec::new();
    if is_chunked(&headers) {
        while let Some(c) = read_chunk(&mut r).await {
            body.extend(c);
        }
    } else {
        r.read_to_end(&mut body).await.expect("read body");
    }
    Resp {
        status,
        headers,
        body,
    }
}

pub async fn get(addr: SocketAddr, path: &str) -> Resp {
    request(addr, "GET", path, None, b"").await
}

pub async fn send_json(addr: SocketAddr, method: &str, path: &str, body: &Value) -> Resp {
    request(
        addr,
        method,
        path,
        Some("application/json"),
        &serde_json::to_vec(body).unwrap(),
    )
    .await
}

/// An open watch: its events, one JSON value per line.
pub struct Watch {
    r: BufReader<TcpStream>,
    buf: Vec<u8>,
    pub status: u16,
}

impl Watch {
    pub async fn open(addr: SocketAddr, path: &str) -> Watch {
        let mut r = send_head(addr, "GET", path, &[], None, b"").await;
        let (status, headers) = read_head(&mut r).await;
        assert!(
            is_chunked(&headers) || status != 200,
            "watch bodies stream chunked"
        );
        Watch {
            r,
            buf: Vec::new(),
            status,
        }
    }

    /// The next event, or None when the stream ends.
    pub async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(i) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                return Some(serde_json::from_slice(&line).expect("watch line is JSON"));
            }
            let chunk = read_chunk(&mut self.r).await?;
            self.buf.extend(chunk);
        }
    }

    /// The next event within a generous deadline (a test failure otherwise).
    pub async fn expect(&mut self) -> Value {
        tokio::time::timeout(Duration::from_secs(10), self.next())
            .await
            .expect("a watch event within 10 s")
            .expect("the watch stream ended early")
    }
}
