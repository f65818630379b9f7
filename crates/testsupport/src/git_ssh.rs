//! A real OpenSSH server (Debian's `openssh-server`) on 127.0.0.1 serving Git over SSH:
//! its own host key, one authorized client key, a free port, everything in a temporary
//! directory, stopped when dropped.
//!
//! ```no_run
//! # fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use fleetshard_testsupport::git_ssh::GitSshServer;
//! let server = GitSshServer::start()?;
//! let url = server.url(std::path::Path::new("/srv/repos/app"));
//! // ssh://USER@127.0.0.1:PORT/srv/repos/app, with server.client_key() and
//! // server.known_hosts() as an Argo CD repository Secret and known-hosts ConfigMap.
//! # Ok(()) }
//! ```
//!
//! The client logs in as the user running the tests (sshd on an unprivileged port lets
//! only that user in when not run as root). Keys are ed25519, made with `ssh-keygen`.
//! As with etcd, there is no "skip when missing": a missing `sshd` is an error naming the
//! package (`scripts/test` installs it).

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Where Debian's `openssh-server` puts the daemon.
const SSHD: &str = "/usr/sbin/sshd";

/// Failures starting the server.
#[derive(Debug, thiserror::Error)]
pub enum GitSshError {
    /// `sshd` is not installed.
    #[error("{SSHD} not found: install Debian's openssh-server (scripts/test does)")]
    NotInstalled,
    /// A command (`ssh-keygen`, `id`, `sshd`) could not run or failed.
    #[error("SSH server: {0}")]
    Command(String),
    /// The daemon did not accept connections in time.
    #[error("SSH server: sshd did not listen on 127.0.0.1:{port} within 10 s: {stderr}")]
    NotListening {
        /// The port it was given.
        port: u16,
        /// What it said.
        stderr: String,
    },
}

/// A running `sshd`, stopped (killed) when dropped.
pub struct GitSshServer {
    dir: tempfile::TempDir,
    child: Child,
    port: u16,
    user: String,
}

impl GitSshServer {
    /// Generates a host key and a client key, authorizes the client key, and starts
    /// `sshd` on a free loopback port; returns once it accepts connections.
    pub fn start() -> Result<Self, GitSshError> {
        if !Path::new(SSHD).exists() {
            return Err(GitSshError::NotInstalled);
        }
        let dir = tempfile::tempdir().map_err(|e| GitSshError::Command(e.to_string()))?;
        keygen(&dir.path().join("host_key"))?;
        keygen(&dir.path().join("client_key"))?;
        keygen(&dir.path().join("other_host_key"))?;
        std::fs::copy(
            dir.path().join("client_key.pub"),
            dir.path().join("authorized_keys"),
        )
        .map_err(|e| GitSshError::Command(format!("authorized_keys: {e}")))?;
        let user = run("id", &["-un"])?.trim().to_owned();
        if is_root() {
            // sshd run by root separates privileges into this directory.
            std::fs::create_dir_all("/run/sshd")
                .map_err(|e| GitSshError::Command(format!("/run/sshd: {e}")))?;
        }
        let port = free_port()?;
        let config = dir.path().join("sshd_config");
        let d = dir.path().display();
        std::fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nPidFile none\n\
                 AuthorizedKeysFile {d}/authorized_keys\nStrictModes no\nUsePAM no\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                 PubkeyAuthentication yes\nPermitRootLogin prohibit-password\n\
                 AllowUsers {user}\nLogLevel ERROR\n"
            ),
        )
        .map_err(|e| GitSshError::Command(format!("sshd_config: {e}")))?;
        let stderr = dir.path().join("sshd.log");
        let log = std::fs::File::create(&stderr)
            .map_err(|e| GitSshError::Command(format!("sshd.log: {e}")))?;
        let child = Command::new(SSHD)
            .args(["-D", "-e", "-f"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| GitSshError::Command(format!("{SSHD}: {e}")))?;
        let mut server = GitSshServer {
            dir,
            child,
            port,
            user,
        };
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        // 200 attempts 50 ms apart, each up to 200 ms: about 10 s at least.
        for attempt in 0.. {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(server);
            }
            let exited = matches!(server.child.try_wait(), Ok(Some(_)));
            if exited || attempt >= 200 {
                let stderr = std::fs::read_to_string(&stderr).unwrap_or_default();
                let _ = server.child.kill();
                return Err(GitSshError::NotListening { port, stderr });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        unreachable!("the loop returns")
    }

    /// `ssh://USER@127.0.0.1:PORT/<path>`: the repository at the absolute `path`.
    pub fn url(&self, path: &Path) -> String {
        format!(
            "ssh://{}@127.0.0.1:{}{}",
            self.user,
            self.port,
            path.display()
        )
    }

    /// The authorized client's private key (OpenSSH format), as an Argo CD repository
    /// Secret's `sshPrivateKey` holds it.
    pub fn client_key(&self) -> String {
        self.read("client_key")
    }

    /// A known-hosts line for this server's host key (`[127.0.0.1]:PORT ssh-ed25519 …`),
    /// as `argocd-ssh-known-hosts-cm` holds it.
    pub fn known_hosts(&self) -> String {
        self.known_hosts_with("host_key.pub")
    }

    /// A known-hosts line for this server's address with another key: a host whose key
    /// changed, or an impostor.
    pub fn wrong_known_hosts(&self) -> String {
        self.known_hosts_with("other_host_key.pub")
    }

    /// The port sshd listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    fn known_hosts_with(&self, public_key: &str) -> String {
        let key = self.read(public_key);
        let mut fields = key.split_whitespace();
        let (kind, data) = (fields.next().unwrap_or(""), fields.next().unwrap_or(""));
        format!("[127.0.0.1]:{} {kind} {data}\n", self.port)
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(name)).unwrap_or_default()
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

impl Drop for GitSshServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn keygen(path: &Path) -> Result<(), GitSshError> {
    let path = path.to_string_lossy();
    run(
        "ssh-keygen",
        &[
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            "fleetshard-test",
            "-f",
            &path,
        ],
    )
    .map(|_| ())
}

fn run(program: &str, args: &[&str]) -> Result<String, GitSshError> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| GitSshError::Command(format!("{program}: {e}")))?;
    if !out.status.success() {
        return Err(GitSshError::Command(format!(
            "{program} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn is_root() -> bool {
    run("id", &["-u"]).is_ok_and(|uid| uid.trim() == "0")
}

/// A loopback port nobody listens on now (the race with other processes is accepted).
fn free_port() -> Result<u16, GitSshError> {
    fleetshard_kube_sim::free_port()
        .map_err(|e| GitSshError::Command(format!("cannot find a free port: {e}")))
}
