//! Confinement of the programs a replica runs on a tenant's behalf (`kustomize`, `kubectl
//! kustomize`, `helm`, and fleetshard's own Jsonnet evaluator).
//!
//! A confined program is started through the replica's own executable (the *launcher*):
//! `fleetshard __sandbox [options] -- PROGRAM ARGS…`. Before anything else, `main` calls
//! [`run_if_invoked`], which confines the (still single-threaded) process and then
//! `exec`s the program, so the confinement is inherited and cannot be undone by it:
//!
//! - **death with the replica**: the parent-death signal is `SIGKILL`, and a launcher whose
//!   replica is already gone exits instead of running the program;
//! - **bounds**: `RLIMIT_AS` (memory) and `RLIMIT_CPU` (CPU seconds, then `SIGKILL`), when
//!   given;
//! - **its own namespaces** (Linux user, mount and network namespaces, when the kernel lets
//!   an unprivileged process make them): a network of its own holds only a loopback that
//!   is down, so nothing is fetched; each hidden path is covered (an empty read-only
//!   `tmpfs` over a directory, `/dev/null` over a file), so the service account's token or
//!   other tenants' repositories are not there to be read. The program runs as a user
//!   without capabilities in those namespaces, so it cannot lift the covers.
//!
//! Namespaces are [`Namespaces::Required`] (a launcher that cannot make them refuses to
//! run the program) or [`Namespaces::IfAvailable`] (the program then runs with the bounds
//! and the death signal only); [`Launcher::probe`] says which a machine gives, once, at
//! start. The contract is what the program can reach, not how: tests run real programs
//! (`sh`, `cat`, a TCP connect) under it.

mod args;
mod confine;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub use confine::confine_self;

/// The first argument that makes the executable a launcher ([`run_if_invoked`]).
pub const ENTRY: &str = "__sandbox";

/// What a confined program may not reach or use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Confinement {
    /// Run the program in a network namespace of its own: it reaches no host, not even
    /// the replica's loopback.
    pub isolate_network: bool,
    /// Paths the program must not see (absent ones are skipped).
    pub hide: Vec<PathBuf>,
    /// The most address space the program may map (`RLIMIT_AS`), in bytes.
    pub max_memory: Option<u64>,
    /// The most CPU time the program may use (`RLIMIT_CPU`), in seconds.
    pub max_cpu_seconds: Option<u64>,
}

impl Confinement {
    /// Keeps `needed` (the program, its working copy) visible: a hidden path that holds
    /// it is not hidden.
    pub fn keep_visible(&mut self, needed: &Path) {
        self.hide.retain(|hidden| !needed.starts_with(hidden));
    }

    /// Whether the confinement needs namespaces.
    pub fn needs_namespaces(&self) -> bool {
        self.isolate_network || !self.hide.is_empty()
    }
}

/// Whether a program may run when namespaces cannot be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Namespaces {
    /// No namespaces, no program.
    Required,
    /// The program runs with the bounds and the death signal only.
    IfAvailable,
}

/// Why confinement failed.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The launcher's arguments are not what [`Launcher::command`] writes.
    #[error("sandbox: bad arguments: {0}")]
    Arguments(String),
    /// The replica that asked for the program is gone.
    #[error("sandbox: the replica that started this program has exited")]
    ParentGone,
    /// A system call of the confinement failed.
    #[error("sandbox: {what}: {source}")]
    System {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// The launcher could not be found or started.
    #[error("sandbox: cannot start {launcher}: {source}")]
    Launcher {
        /// The launcher's path.
        launcher: String,
        /// The error.
        source: std::io::Error,
    },
}

/// The replica's executable, run as a launcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launcher {
    exe: PathBuf,
    namespaces: Namespaces,
}

/// What [`Launcher::probe`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// Namespaces can be made: programs run in their own network, paths hidden.
    Namespaces,
    /// They cannot (the reason, from the kernel): programs run bounded only.
    BoundsOnly(String),
}

impl Launcher {
    /// `exe` (a fleetshard executable whose `main` calls [`run_if_invoked`]) as launcher.
    pub fn new(exe: impl Into<PathBuf>, namespaces: Namespaces) -> Self {
        Launcher {
            exe: exe.into(),
            namespaces,
        }
    }

    /// The running executable as launcher.
    pub fn current(namespaces: Namespaces) -> Result<Self, SandboxError> {
        let exe = std::env::current_exe().map_err(|source| SandboxError::Launcher {
            launcher: "the current executable".to_owned(),
            source,
        })?;
        Ok(Launcher::new(exe, namespaces))
    }

    /// The launcher's executable.
    pub fn exe(&self) -> &Path {
        &self.exe
    }

    /// A command that runs `program` under `confinement` (its arguments are added to the
    /// command as to any other). The environment, working directory and pipes set on the
    /// command reach the program.
    pub fn command(&self, confinement: &Confinement, program: &Path) -> std::process::Command {
        let mut command = std::process::Command::new(&self.exe);
        command.args(args::encode(
            confinement,
            self.namespaces,
            std::process::id(),
            None,
        ));
        command.arg("--").arg(program);
        command
    }

    /// Whether this machine lets the launcher make namespaces (a launcher is run, which
    /// makes them and exits).
    pub fn probe(&self) -> Result<Probe, SandboxError> {
        let scratch = std::env::temp_dir();
        let confinement = Confinement {
            isolate_network: true,
            hide: vec![scratch],
            ..Confinement::default()
        };
        let mut command = std::process::Command::new(&self.exe);
        command.args(args::encode(
            &confinement,
            Namespaces::Required,
            std::process::id(),
            Some(()),
        ));
        let out = command.output().map_err(|source| SandboxError::Launcher {
            launcher: self.exe.display().to_string(),
            source,
        })?;
        if out.status.success() {
            return Ok(Probe::Namespaces);
        }
        let reason = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        Ok(Probe::BoundsOnly(if reason.is_empty() {
            format!("the launcher exited with {}", out.status)
        } else {
            reason
        }))
    }
}

/// When this process was started as a launcher (its first argument is [`ENTRY`]):
/// confines itself and runs the program, returning only if that fails (the exit code,
/// the reason on standard error). `None` otherwise: `main` goes on.
pub fn run_if_invoked() -> Option<ExitCode> {
    let mut argv = std::env::args_os().skip(1);
    if argv.next().as_deref() != Some(OsStr::new(ENTRY)) {
        return None;
    }
    let rest: Vec<OsString> = argv.collect();
    Some(match launch(&rest) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(126)
        }
    })
}

fn launch(argv: &[OsString]) -> Result<ExitCode, SandboxError> {
    use std::os::unix::process::CommandExt as _;
    let request = args::decode(argv)?;
    confine_self(&request.confinement, request.namespaces, request.parent)?;
    if request.probe {
        return Ok(ExitCode::SUCCESS);
    }
    let (program, program_args) = request
        .program
        .split_first()
        .ok_or_else(|| SandboxError::Arguments("no program after `--`".to_owned()))?;
    let error = std::process::Command::new(program)
        .args(program_args)
        .exec();
    Err(SandboxError::System {
        what: format!("cannot run {}", Path::new(program).display()),
        source: error,
    })
}
