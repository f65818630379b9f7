//! Running a rendering tool: found on the configured `PATH`, started with a clean
//! environment (in the render sandbox when the replica has one), bounded in time and
//! output, its standard error trimmed into the message.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use fleetshard_sandbox::{Confinement, Launcher};
use tokio::io::AsyncReadExt as _;

use super::RenderConfig;

/// The most of a tool's standard error kept for a message.
const MAX_STDERR: usize = 4096;

/// Where tools are found and how they run.
pub(crate) struct Tools {
    path: OsString,
    home: PathBuf,
    scratch: PathBuf,
    timeout: Duration,
    sandbox: Option<(Launcher, Confinement)>,
}

impl Tools {
    /// Tools on `config.path` (or the replica's `PATH`), with `HOME` in `scratch`, in
    /// the replica's sandbox if it has one (with its network only if `network`).
    pub(crate) fn new(config: &RenderConfig, scratch: &Path, network: bool) -> Self {
        Tools {
            path: config
                .path
                .clone()
                .or_else(|| std::env::var_os("PATH"))
                .unwrap_or_default(),
            home: scratch.join("home"),
            scratch: scratch.to_path_buf(),
            timeout: config.timeout,
            sandbox: config.tool_confinement(network),
        }
    }

    /// The first executable file `name` in the search path.
    pub(crate) fn find(&self, name: &str) -> Option<PathBuf> {
        std::env::split_paths(&self.path)
            .filter(|dir| dir.is_absolute())
            .map(|dir| dir.join(name))
            .find(|candidate| is_executable(candidate))
    }

    /// Runs `program` with `args` in `cwd`; its standard output, at most `max_output`
    /// bytes. The environment holds only `PATH` and `HOME` (a fresh directory): no
    /// credential of the replica reaches the tool.
    pub(crate) async fn run(
        &self,
        program: &Path,
        args: &[OsString],
        cwd: &Path,
        max_output: u64,
    ) -> Result<Vec<u8>, String> {
        std::fs::create_dir_all(&self.home)
            .map_err(|e| format!("cannot create {}: {e}", self.home.display()))?;
        let name = program.file_name().map_or_else(
            || program.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let mut command = match &self.sandbox {
            Some((launcher, confinement)) => {
                let mut confinement = confinement.clone();
                confinement.keep_visible(&self.scratch);
                confinement.keep_visible(program);
                tokio::process::Command::from(launcher.command(&confinement, program))
            }
            None => tokio::process::Command::new(program),
        };
        let mut child = command
            .args(args)
            .current_dir(cwd)
            .env_clear()
            .env("PATH", &self.path)
            .env("HOME", &self.home)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
        let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
            return Err(format!("{name}: no output pipes"));
        };
        let work = async {
            let mut out = Vec::new();
            let mut err = Vec::new();
            let mut stdout = stdout.take(max_output + 1);
            let read_out = stdout.read_to_end(&mut out);
            let read_err = drain_keeping(stderr, &mut err, MAX_STDERR);
            let (o, e) = tokio::join!(read_out, read_err);
            o.and(e)
                .map_err(|e| format!("{name}: reading its output: {e}"))?;
            if out.len() as u64 > max_output {
                return Err(format!(
                    "{name} wrote more than {max_output} bytes (the limit keeps one app from \
                     exhausting the replica)"
                ));
            }
            let status = child.wait().await.map_err(|e| format!("{name}: {e}"))?;
            if !status.success() {
                return Err(format!(
                    "{name} failed ({status}): {}",
                    trimmed(&err, &self.scratch)
                ));
            }
            Ok(out)
        };
        // On timeout the child is dropped, and killed with it.
        tokio::time::timeout(self.timeout, work)
            .await
            .unwrap_or_else(|_| {
                Err(format!(
                    "{name} did not finish within {} s",
                    self.timeout.as_secs()
                ))
            })
    }
}

/// Reads `reader` to its end, keeping its first `keep` bytes in `out` (a tool blocked on
/// a full pipe would never end).
async fn drain_keeping(
    mut reader: impl tokio::io::AsyncRead + Unpin,
    out: &mut Vec<u8>,
    keep: usize,
) -> std::io::Result<usize> {
    let mut buf = [0u8; 8192];
    let mut total = 0;
    loop {
        let n = reader.read(&mut buf).await?;
        if n == 0 {
            return Ok(total);
        }
        total += n;
        let room = keep.saturating_sub(out.len()).min(n);
        out.extend_from_slice(&buf[..room]);
    }
}

/// A tool's standard error on one line, the temporary copy's paths made relative to the
/// repository's root.
fn trimmed(stderr: &[u8], scratch: &Path) -> String {
    let root = format!("{}/", scratch.join("repo").display());
    let text = String::from_utf8_lossy(stderr)
        .replace(&root, "")
        .replace(&scratch.display().to_string(), "<tmp>");
    let text: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let mut joined = text.join("; ");
    if joined.is_empty() {
        joined = "no message".to_owned();
    }
    joined
}

fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}

/// `s` as an argument.
pub(crate) fn arg(s: impl AsRef<OsStr>) -> OsString {
    s.as_ref().to_owned()
}
