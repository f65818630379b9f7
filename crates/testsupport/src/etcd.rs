//! A real etcd server for tests: Debian's `etcd-server` (`/usr/bin/etcd`) started on free
//! loopback ports with its data in a temporary directory, killed and reaped when dropped.
//!
//! ```no_run
//! let etcd = fleetshard_testsupport::etcd::EtcdServer::start().unwrap();
//! println!("{} {}", etcd.endpoint(), etcd.url()); // 127.0.0.1:PORT etcd://127.0.0.1:PORT
//! ```
//!
//! With `FLEETSHARD_TEST_ETCD=HOST:PORT` set, tests use that (already running) etcd
//! instead, and each fixture gets a unique [`EtcdServer::key_prefix`] so that tests
//! running at once, or one after another, never see each other's keys. A test must then
//! put every key under that prefix. With a local server the prefix is empty (the server
//! is the test's own).
//!
//! There is no "skip when etcd is missing": a missing binary is an error that names the
//! package to install, so that a machine without etcd fails loudly instead of passing
//! nothing.
//!
//! Starting is synchronous (it polls `/health` with short blocking sleeps), so it works
//! from plain `#[test]`s and from async tests alike.
//!
//! [`EtcdServer::start_secured`] starts an etcd that serves only TLS and requires a client
//! certificate (`--client-cert-auth`), optionally with authentication enabled for the user
//! `root` (`secure.rs`); it is always a local server.

mod secure;

pub use secure::EtcdTlsFiles;

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The environment variable naming an external etcd (`HOST:PORT`) to use instead of
/// starting one.
pub const EXTERNAL_ENV: &str = "FLEETSHARD_TEST_ETCD";

/// The environment variable naming the etcd binary (default: `etcd` on `PATH`, then
/// `/usr/bin/etcd`).
pub const BINARY_ENV: &str = "FLEETSHARD_ETCD_BIN";

/// How long a start may take before it is reported as failed. etcd answers in well under
/// a second on an idle machine; the margin is for a loaded 2-core CI machine.
const START_DEADLINE: Duration = Duration::from_secs(30);

/// How many times a start is tried with fresh ports: a port found free can be taken by
/// another process before etcd binds it.
const START_ATTEMPTS: u32 = 3;

/// How many lines of etcd's stderr an error shows.
const STDERR_TAIL_LINES: usize = 25;

/// Why the fixture could not give a server.
#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    /// No etcd binary was found.
    #[error(
        "the etcd binary was not found ({0}); install Debian's `etcd-server` package \
         (apt-get install etcd-server), set {BINARY_ENV} to the binary, or set \
         {EXTERNAL_ENV}=HOST:PORT to use a running etcd"
    )]
    BinaryMissing(String),
    /// etcd was started but did not become healthy in time, or exited.
    #[error("etcd ({binary}) did not start: {reason}; last lines of its stderr:\n{stderr_tail}")]
    DidNotStart {
        /// The binary that was run.
        binary: String,
        /// What was seen (exit status, or the deadline).
        reason: String,
        /// The end of etcd's stderr.
        stderr_tail: String,
    },
    /// `FLEETSHARD_TEST_ETCD` is set but unusable.
    #[error("{EXTERNAL_ENV}={value:?}: {reason}")]
    External {
        /// The variable's value.
        value: String,
        /// What is wrong.
        reason: String,
    },
    /// An operation that needs the local process (pause, kill) on an external etcd.
    #[error("{0} needs an etcd started by the fixture, not the external {EXTERNAL_ENV}")]
    NotLocal(&'static str),
    /// A file or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> EtcdError {
    let what = what.into();
    move |source| EtcdError::Io { what, source }
}

/// A running etcd for one test (see the module docs).
#[derive(Debug)]
pub struct EtcdServer {
    endpoint: String,
    key_prefix: String,
    local: Option<Local>,
}

/// The process this fixture started.
#[derive(Debug)]
struct Local {
    binary: PathBuf,
    /// `None` after [`EtcdServer::kill`].
    child: Option<Child>,
    client_port: u16,
    peer_port: u16,
    /// Where `/health` answers over plain HTTP: the client port, or (TLS) a metrics port.
    health_port: u16,
    /// TLS, for a secured server (boxed: it is six paths, and most servers have none).
    tls: Option<Box<EtcdTlsFiles>>,
    dir: tempfile::TempDir,
}

impl EtcdServer {
    /// Starts a fresh etcd (or attaches to `FLEETSHARD_TEST_ETCD`), waiting until it
    /// answers `/health`.
    pub fn start() -> Result<Self, EtcdError> {
        if let Ok(value) = std::env::var(EXTERNAL_ENV) {
            return Self::external(value);
        }
        Self::start_local(false)
    }

    /// Starts a fresh local etcd that serves TLS only and requires a client certificate
    /// signed by [`EtcdTlsFiles::ca`]; with `root_password`, authentication is enabled and
    /// the user `root` has that password. Ignores `FLEETSHARD_TEST_ETCD`.
    pub fn start_secured(root_password: Option<&str>) -> Result<Self, EtcdError> {
        let server = Self::start_local(true)?;
        if let (Some(password), Some(local)) = (root_password, &server.local) {
            local.enable_auth(password)?;
        }
        Ok(server)
    }

    fn start_local(tls: bool) -> Result<Self, EtcdError> {
        let binary = find_binary()?;
        let mut last = None;
        for _ in 0..START_ATTEMPTS {
            let dir = tempfile::Builder::new()
                .prefix("fleetshard-etcd-")
                .tempdir()
                .map_err(io("creating etcd's data directory"))?;
            let client_port = free_port()?;
            let mut local = Local {
                binary: binary.clone(),
                child: None,
                client_port,
                peer_port: free_port()?,
                health_port: if tls { free_port()? } else { client_port },
                tls: tls
                    .then(|| secure::write_files(dir.path()).map(Box::new))
                    .transpose()?,
                dir,
            };
            match local.spawn_and_wait() {
                Ok(()) => {
                    return Ok(EtcdServer {
                        endpoint: format!("127.0.0.1:{}", local.client_port),
                        key_prefix: String::new(),
                        local: Some(local),
                    });
                }
                // Only a lost port race is worth another try.
                Err(e @ EtcdError::DidNotStart { .. }) if e.to_string().contains("in use") => {
                    last = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        Err(last.expect("at least one attempt"))
    }

    fn external(value: String) -> Result<Self, EtcdError> {
        let addr: SocketAddr = value.parse().map_err(|e| EtcdError::External {
            value: value.clone(),
            reason: format!("expected HOST:PORT with an IP address ({e})"),
        })?;
        if !health(addr.port(), addr.ip()) {
            return Err(EtcdError::External {
                value,
                reason: "it does not answer GET /health with a healthy status".into(),
            });
        }
        Ok(EtcdServer {
            endpoint: value,
            key_prefix: unique_prefix(),
            local: None,
        })
    }

    /// `127.0.0.1:PORT`: the client endpoint.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// `etcd://127.0.0.1:PORT` (`etcds://` for a secured server): the store URL.
    pub fn url(&self) -> String {
        let scheme = if self.tls_files().is_some() {
            "etcds"
        } else {
            "etcd"
        };
        format!("{scheme}://{}", self.endpoint)
    }

    /// The certificates of a server from [`EtcdServer::start_secured`].
    pub fn tls_files(&self) -> Option<&EtcdTlsFiles> {
        self.local.as_ref()?.tls.as_deref()
    }

    /// The prefix every key of this test must start with: empty for a server of its own,
    /// `fleetshard-test/<unique>/` on an external etcd.
    pub fn key_prefix(&self) -> &str {
        &self.key_prefix
    }

    /// Whether this fixture started the server (so it can pause or kill it).
    pub fn is_local(&self) -> bool {
        self.local.is_some()
    }

    /// The process id of the local etcd, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.local.as_ref()?.child.as_ref().map(Child::id)
    }

    /// Freezes etcd (SIGSTOP): its sockets stay open but nothing answers, as with a hung
    /// server or a partition that drops packets. Returns once every thread of etcd is
    /// stopped, so nothing it does afterwards can race the caller's next step.
    pub fn pause(&self) -> Result<(), EtcdError> {
        self.signal("pause", "-STOP")?;
        self.wait_for_threads("pause", true)
    }

    /// Thaws etcd after [`EtcdServer::pause`] (SIGCONT); returns once no thread is stopped.
    pub fn resume(&self) -> Result<(), EtcdError> {
        self.signal("resume", "-CONT")?;
        self.wait_for_threads("resume", false)
    }

    /// Polls `/proc/PID/task/*/stat` until every thread is (or no thread is) in the stopped
    /// state `T`: a signal is only queued when `kill` returns, and a thread running on
    /// another core goes on until it is next scheduled.
    fn wait_for_threads(&self, what: &'static str, stopped: bool) -> Result<(), EtcdError> {
        let pid = self.pid().ok_or(EtcdError::NotLocal(what))?;
        let tasks = PathBuf::from(format!("/proc/{pid}/task"));
        // Bounds a wait on another process; no decision reads this clock.
        #[allow(clippy::disallowed_types)]
        let start = std::time::Instant::now();
        loop {
            let states: Vec<bool> = std::fs::read_dir(&tasks)
                .map_err(io(format!("reading {}", tasks.display())))?
                .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("stat")).ok())
                // The state follows the parenthesised command name, which may hold spaces.
                .filter_map(|stat| {
                    stat.rsplit_once(')')
                        .map(|(_, rest)| rest.trim_start().starts_with('T'))
                })
                .collect();
            if !states.is_empty() && states.iter().all(|&t| t == stopped) {
                return Ok(());
            }
            if start.elapsed() > Duration::from_secs(10) {
                return Err(EtcdError::Io {
                    what: format!("{what} etcd (pid {pid})"),
                    source: std::io::Error::other("its threads did not change state within 10 s"),
                });
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Kills etcd (SIGKILL) and reaps it; its data stays for [`EtcdServer::restart`].
    pub fn kill(&mut self) -> Result<(), EtcdError> {
        let local = self.local.as_mut().ok_or(EtcdError::NotLocal("kill"))?;
        local.stop();
        Ok(())
    }

    /// Starts etcd again on the same ports and data (after [`EtcdServer::kill`], or kills it
    /// first), waiting until it answers.
    pub fn restart(&mut self) -> Result<(), EtcdError> {
        let local = self.local.as_mut().ok_or(EtcdError::NotLocal("restart"))?;
        local.stop();
        local.spawn_and_wait()
    }

    fn signal(&self, what: &'static str, sig: &str) -> Result<(), EtcdError> {
        let pid = self.pid().ok_or(EtcdError::NotLocal(what))?;
        // `kill(1)` rather than libc: this workspace forbids unsafe code.
        let status = Command::new("kill")
            .args([sig, &pid.to_string()])
            .status()
            .map_err(io(format!("running kill {sig} {pid}")))?;
        if status.success() {
            Ok(())
        } else {
            Err(EtcdError::Io {
                what: format!("kill {sig} {pid}"),
                source: std::io::Error::other(format!("exited with {status}")),
            })
        }
    }
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        if let Some(local) = &mut self.local {
            local.stop();
        }
    }
}

impl Local {
    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn stderr_path(&self) -> PathBuf {
        self.dir.path().join("etcd.stderr")
    }

    /// Runs etcd and waits for `/health`; on failure the process is stopped and the error
    /// carries its stderr tail.
    fn spawn_and_wait(&mut self) -> Result<(), EtcdError> {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let client = format!("{scheme}://127.0.0.1:{}", self.client_port);
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.stderr_path())
            .map_err(io("creating etcd's stderr file"))?;
        let mut command = Command::new(&self.binary);
        if let Some(tls) = &self.tls {
            command
                .arg(format!(
                    "--listen-metrics-urls=http://127.0.0.1:{}",
                    self.health_port
                ))
                .args(tls.server_args());
        }
        let child = command
            .arg("--name=fleetshard-test")
            .arg(format!("--data-dir={}", self.data_dir().display()))
            .arg(format!("--listen-client-urls={client}"))
            .arg(format!("--advertise-client-urls={client}"))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster=fleetshard-test={peer}"))
            .arg("--initial-cluster-state=new")
            .arg("--logger=zap")
            .arg("--log-outputs=stderr")
            .arg("--log-level=warn")
            // Read by the etcd process itself: keeps Go from spreading over every core.
            .env("GOMAXPROCS", "2")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::NotFound {
                    EtcdError::BinaryMissing(self.binary.display().to_string())
                } else {
                    EtcdError::Io {
                        what: format!("starting {}", self.binary.display()),
                        source: e,
                    }
                }
            })?;
        self.child = Some(child);
        // A measurement of the start-up wait, not logic: the fixture has no other clock.
        #[allow(clippy::disallowed_types)]
        let start = std::time::Instant::now();
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                return Err(self.did_not_start(format!("it exited with {status}")));
            }
            if health(self.health_port, [127, 0, 0, 1].into()) {
                return Ok(());
            }
            if start.elapsed() > START_DEADLINE {
                self.stop();
                return Err(self.did_not_start(format!(
                    "no healthy answer on port {}'s /health within {START_DEADLINE:?}",
                    self.health_port
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn did_not_start(&self, reason: String) -> EtcdError {
        EtcdError::DidNotStart {
            binary: self.binary.display().to_string(),
            reason,
            stderr_tail: tail(&self.stderr_path(), STDERR_TAIL_LINES),
        }
    }

    /// SIGKILL (which also ends a stopped process) and reap.
    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The etcd binary: `$FLEETSHARD_ETCD_BIN`, else `etcd` on `PATH`, else `/usr/bin/etcd`.
fn find_binary() -> Result<PathBuf, EtcdError> {
    if let Some(path) = std::env::var_os(BINARY_ENV) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(EtcdError::BinaryMissing(format!(
                "{BINARY_ENV}={} is not a file",
                path.display()
            )))
        };
    }
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("etcd"))
        .find(|p| p.is_file());
    let fallback = Path::new("/usr/bin/etcd");
    on_path
        .or_else(|| fallback.is_file().then(|| fallback.to_owned()))
        .ok_or_else(|| EtcdError::BinaryMissing("no `etcd` on PATH nor /usr/bin/etcd".into()))
}

fn free_port() -> Result<u16, EtcdError> {
    fleetshard_kube_sim::free_port().map_err(io("finding a free loopback port"))
}

/// Whether `GET /health` answers 200 with `"health":"true"` (etcd has a leader and serves).
fn health(port: u16, ip: std::net::IpAddr) -> bool {
    let addr = SocketAddr::new(ip, port);
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = s.set_write_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET /health HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    if s.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut text = String::new();
    if s.read_to_string(&mut text).is_err() {
        return false;
    }
    text.starts_with("HTTP/1.1 200") && text.contains(r#""health":"true""#)
}

/// The last `lines` lines of a file, or a note that it could not be read.
fn tail(path: &Path, lines: usize) -> String {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let all: Vec<&str> = text.lines().collect();
            let shown = all[all.len().saturating_sub(lines)..].join("\n");
            if shown.is_empty() {
                "(empty)".into()
            } else {
                shown
            }
        }
        Err(e) => format!("({} unreadable: {e})", path.display()),
    }
}

/// `fleetshard-test/<pid>-<n>-<nanos>/`: unique across processes, fixtures and runs.
fn unique_prefix() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    // Wall-clock nanoseconds only make the name unique across runs; no decision reads them.
    #[allow(clippy::disallowed_types)]
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "fleetshard-test/{}-{}-{nanos}/",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_answers_pauses_and_stops() {
        let mut etcd = EtcdServer::start().unwrap();
        let url = etcd.url();
        assert_eq!(url, format!("etcd://{}", etcd.endpoint()));
        let addr: SocketAddr = etcd.endpoint().parse().unwrap();
        assert!(health(addr.port(), addr.ip()));
        if !etcd.is_local() {
            assert!(etcd.key_prefix().starts_with("fleetshard-test/"));
            return;
        }
        assert_eq!(etcd.key_prefix(), "");
        etcd.pause().unwrap();
        assert!(!health(addr.port(), addr.ip()), "a paused etcd answers");
        etcd.resume().unwrap();
        assert!(health(addr.port(), addr.ip()));
        etcd.kill().unwrap();
        assert!(etcd.pid().is_none());
        assert!(TcpStream::connect(addr).is_err(), "a killed etcd accepts");
        etcd.restart().unwrap();
        assert!(health(addr.port(), addr.ip()));
        let pid = etcd.pid().unwrap();
        drop(etcd);
        // Reaped: no process with that id is ours any more (kill -0 fails).
        let alive = Command::new("kill")
            .args(["-0", &pid.to_string()])
            .stderr(Stdio::null())
            .status()
            .unwrap()
            .success();
        assert!(!alive, "etcd {pid} still runs after drop");
    }

    #[test]
    fn a_missing_binary_names_the_package() {
        let mut local = Local {
            binary: PathBuf::from("/nonexistent/etcd"),
            child: None,
            client_port: free_port().unwrap(),
            peer_port: free_port().unwrap(),
            health_port: 0,
            tls: None,
            dir: tempfile::tempdir().unwrap(),
        };
        let e = local.spawn_and_wait().unwrap_err();
        assert!(matches!(e, EtcdError::BinaryMissing(_)), "{e:?}");
        assert!(e.to_string().contains("etcd-server"), "{e}");
    }

    #[test]
    fn a_failed_start_shows_stderr() {
        let dir = tempfile::tempdir().unwrap();
        // `false` exits at once: the fixture must report the exit and the stderr tail.
        let mut local = Local {
            binary: PathBuf::from("false"),
            child: None,
            client_port: free_port().unwrap(),
            peer_port: free_port().unwrap(),
            health_port: 0,
            tls: None,
            dir,
        };
        std::fs::write(local.stderr_path(), "line one\nboom: address in use\n").unwrap();
        let e = local.spawn_and_wait().unwrap_err().to_string();
        assert!(e.contains("did not start") && e.contains("exited"), "{e}");
        assert!(e.contains("boom: address in use"), "{e}");
    }

    #[test]
    fn prefixes_are_unique() {
        assert_ne!(unique_prefix(), unique_prefix());
    }
}
