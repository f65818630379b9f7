//! A real Redis server for tests: Debian's `redis-server` started on a free loopback
//! port, without persistence, stopped when dropped.
//!
//! ```no_run
//! let mut redis = fleetshard_testsupport::redis::RedisServer::start().unwrap();
//! println!("{}", redis.address()); // 127.0.0.1:PORT
//! redis.kill().unwrap();           // an outage
//! redis.restart().unwrap();        // the same port, empty
//! ```
//!
//! A missing binary is an error naming the package to install, never a skipped test.
//! [`RedisServer::get`] and [`RedisServer::keys`] read the server with `redis-cli`-free
//! plain RESP over a TCP socket, so tests read back what was written independently of
//! the code under test.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// How long a start may take.
const START_DEADLINE: Duration = Duration::from_secs(20);

/// Why a Redis fixture failed.
#[derive(Debug, thiserror::Error)]
pub enum RedisError {
    /// No `redis-server` binary.
    #[error(
        "the redis-server binary was not found; install Debian's `redis-server` package \
         (apt-get install redis-server)"
    )]
    BinaryMissing,
    /// It did not answer in time, or exited.
    #[error("redis-server did not start: {0}")]
    DidNotStart(String),
    /// A socket or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// An answer that is not what RESP allows here.
    #[error("redis answered {0:?}")]
    Protocol(String),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> RedisError {
    let what = what.into();
    move |source| RedisError::Io { what, source }
}

/// A running `redis-server` for one test.
#[derive(Debug)]
pub struct RedisServer {
    binary: PathBuf,
    port: u16,
    child: Option<Child>,
    dir: tempfile::TempDir,
}

impl RedisServer {
    /// Starts a fresh server on a free port and waits until it answers `PING`.
    pub fn start() -> Result<Self, RedisError> {
        let binary = ["/usr/bin/redis-server", "/usr/local/bin/redis-server"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
            .ok_or(RedisError::BinaryMissing)?;
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .map_err(io("finding a free loopback port"))?;
        let dir = tempfile::Builder::new()
            .prefix("fleetshard-redis-")
            .tempdir()
            .map_err(io("creating redis' directory"))?;
        let mut server = RedisServer {
            binary,
            port,
            child: None,
            dir,
        };
        server.spawn_and_wait()?;
        Ok(server)
    }

    /// `127.0.0.1:PORT`.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Kills the server (SIGKILL) and reaps it: clients see the connection drop.
    pub fn kill(&mut self) -> Result<(), RedisError> {
        if let Some(mut child) = self.child.take() {
            child.kill().map_err(io("killing redis-server"))?;
            child.wait().map_err(io("reaping redis-server"))?;
        }
        Ok(())
    }

    /// Starts the server again on the same port (empty: nothing is persisted).
    pub fn restart(&mut self) -> Result<(), RedisError> {
        self.kill()?;
        self.spawn_and_wait()
    }

    fn spawn_and_wait(&mut self) -> Result<(), RedisError> {
        let log = self.dir.path().join("redis.log");
        let child = Command::new(&self.binary)
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--logfile")
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(io(format!("starting {}", self.binary.display())))?;
        self.child = Some(child);
        // Bounds a wait on another process; nothing under test reads this clock.
        #[allow(clippy::disallowed_types)]
        let start = std::time::Instant::now();
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                return Err(RedisError::DidNotStart(format!(
                    "it exited with {status}; log: {}",
                    tail(&log)
                )));
            }
            if matches!(self.command(&["PING"]), Ok(Reply::Text(t)) if t == "PONG") {
                return Ok(());
            }
            if start.elapsed() > START_DEADLINE {
                let _ = self.kill();
                return Err(RedisError::DidNotStart(format!(
                    "no PONG within {START_DEADLINE:?}; log: {}",
                    tail(&log)
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The value of `key`, if it is set.
    pub fn get(&self, key: &str) -> Result<Option<Vec<u8>>, RedisError> {
        match self.command(&["GET", key])? {
            Reply::Bulk(v) => Ok(v),
            other => Err(RedisError::Protocol(format!("{other:?}"))),
        }
    }

    /// The remaining time to live of `key` in milliseconds (-1: none, -2: no such key).
    pub fn ttl_ms(&self, key: &str) -> Result<i64, RedisError> {
        match self.command(&["PTTL", key])? {
            Reply::Integer(n) => Ok(n),
            other => Err(RedisError::Protocol(format!("{other:?}"))),
        }
    }

    /// The keys matching `pattern` (`KEYS`), sorted.
    pub fn keys(&self, pattern: &str) -> Result<Vec<String>, RedisError> {
        match self.command(&["KEYS", pattern])? {
            Reply::Array(items) => {
                let mut keys: Vec<String> = items
                    .into_iter()
                    .map(|i| String::from_utf8_lossy(&i).into_owned())
                    .collect();
                keys.sort();
                Ok(keys)
            }
            other => Err(RedisError::Protocol(format!("{other:?}"))),
        }
    }

    /// Sends one command and reads its reply (RESP2).
    pub fn command(&self, args: &[&str]) -> Result<Reply, RedisError> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).map_err(io("connecting"))?;
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .map_err(io("setting a timeout"))?;
        let mut req = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            req.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            req.extend_from_slice(a.as_bytes());
            req.extend_from_slice(b"\r\n");
        }
        s.write_all(&req).map_err(io("sending a command"))?;
        read_reply(&mut BufReader::new(s))
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.kill();
    }
}

/// A RESP2 reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `+OK`.
    Text(String),
    /// `:n`.
    Integer(i64),
    /// `$n` (None: the null bulk string).
    Bulk(Option<Vec<u8>>),
    /// `*n` of bulk strings.
    Array(Vec<Vec<u8>>),
}

fn read_line(r: &mut impl BufRead) -> Result<String, RedisError> {
    let mut line = String::new();
    r.read_line(&mut line).map_err(io("reading a reply"))?;
    Ok(line.trim_end_matches("\r\n").to_owned())
}

fn read_bulk(r: &mut impl BufRead, len: i64) -> Result<Option<Vec<u8>>, RedisError> {
    if len < 0 {
        return Ok(None);
    }
    let mut buf = vec![0; len as usize + 2];
    r.read_exact(&mut buf).map_err(io("reading a bulk reply"))?;
    buf.truncate(len as usize);
    Ok(Some(buf))
}

fn read_reply(r: &mut impl BufRead) -> Result<Reply, RedisError> {
    let line = read_line(r)?;
    let (kind, rest) = line.split_at(line.len().min(1));
    let number = || {
        rest.parse::<i64>()
            .map_err(|_| RedisError::Protocol(line.clone()))
    };
    match kind {
        "+" => Ok(Reply::Text(rest.to_owned())),
        ":" => Ok(Reply::Integer(number()?)),
        "$" => Ok(Reply::Bulk(read_bulk(r, number()?)?)),
        "*" => {
            let mut items = Vec::new();
            for _ in 0..number()?.max(0) {
                let head = read_line(r)?;
                let len = head
                    .strip_prefix('$')
                    .and_then(|n| n.parse::<i64>().ok())
                    .ok_or_else(|| RedisError::Protocol(head.clone()))?;
                items.push(read_bulk(r, len)?.unwrap_or_default());
            }
            Ok(Reply::Array(items))
        }
        _ => Err(RedisError::Protocol(line)),
    }
}

fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(5)..].join("\n")
}
