//! Headless Chromium (Debian's `chromium`) driven over the DevTools protocol: a small
//! synchronous client over one WebSocket (tungstenite) — start the browser, open a page,
//! evaluate JavaScript in it, take a screenshot. A few commands are all the dashboard's
//! test needs, so no CDP crate (their generated protocol bindings are tens of thousands of
//! lines to compile). Chromium missing is a failure, never a skip.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use tungstenite::{Message, WebSocket};

use super::wait_for;

/// A headless Chromium with one page open; killed when dropped.
pub struct Browser {
    child: Child,
    socket: WebSocket<TcpStream>,
    session: String,
    next_id: u64,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Browser {
    /// Starts `chromium` headless with its profile in `profile`, phone-sized, and opens
    /// `url` in a new page.
    pub fn open(profile: &Path, url: &str) -> Browser {
        let mut child = Command::new("chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--window-size=412,915",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start chromium ({e}): the dashboard's browser test needs Debian's \
                     `chromium` on PATH (scripts/test installs it: apt-get install chromium)"
                )
            });
        // Chromium writes the port it chose, and the browser's WebSocket path.
        let active = profile.join("DevToolsActivePort");
        let (port, path) = wait_for(
            "chromium's DevToolsActivePort",
            Duration::from_secs(30),
            || {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!("chromium exited at start: {status}");
                }
                let text = std::fs::read_to_string(&active).map_err(|e| e.to_string())?;
                let mut lines = text.lines();
                match (lines.next(), lines.next()) {
                    (Some(p), Some(path)) => Ok((p.trim().to_owned(), path.trim().to_owned())),
                    _ => Err(format!("incomplete: {text:?}")),
                }
            },
        );
        let port: u16 = port.parse().expect("a port in DevToolsActivePort");
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connecting to chromium");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("a read timeout");
        let (socket, _) =
            tungstenite::client::client(format!("ws://127.0.0.1:{port}{path}"), stream)
                .expect("the DevTools WebSocket handshake");
        let mut b = Browser {
            child,
            socket,
            session: String::new(),
            next_id: 0,
        };
        let target = b.call("Target.createTarget", json!({"url": url}), false);
        let target_id = target["targetId"].as_str().expect("a targetId").to_owned();
        let attached = b.call(
            "Target.attachToTarget",
            json!({"targetId": target_id, "flatten": true}),
            false,
        );
        b.session = attached["sessionId"]
            .as_str()
            .expect("a sessionId")
            .to_owned();
        b.call("Page.enable", json!({}), true);
        b
    }

    /// Sends one command (to the page's session when `page`) and returns its result;
    /// events that arrive meanwhile are skipped.
    fn call(&mut self, method: &str, params: Value, page: bool) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if page {
            msg["sessionId"] = json!(self.session);
        }
        self.socket
            .send(Message::text(msg.to_string()))
            .unwrap_or_else(|e| panic!("sending {method}: {e}"));
        loop {
            let m = self
                .socket
                .read()
                .unwrap_or_else(|e| panic!("waiting for the answer to {method}: {e}"));
            let Message::Text(text) = m else { continue };
            let v: Value = serde_json::from_str(text.as_str()).expect("DevTools sends JSON");
            if v["id"] == json!(id) {
                if let Some(err) = v.get("error") {
                    panic!("{method}: {err}");
                }
                return v["result"].clone();
            }
        }
    }

    /// Evaluates `expression` in the page and returns its value (JSON-serialisable);
    /// an exception is an `Err` with its description.
    pub fn eval(&mut self, expression: &str) -> Result<Value, String> {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
            true,
        );
        if let Some(ex) = r.get("exceptionDetails") {
            return Err(format!("{expression}: {ex}"));
        }
        Ok(r["result"]["value"].clone())
    }

    /// Saves a PNG screenshot of the page to `path` and returns it.
    pub fn screenshot(&mut self, path: PathBuf) -> PathBuf {
        use base64::Engine as _;
        let r = self.call("Page.captureScreenshot", json!({"format": "png"}), true);
        let png = base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().unwrap_or_default())
            .expect("a base64 screenshot");
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        std::fs::write(&path, png).expect("writing the screenshot");
        path
    }
}
