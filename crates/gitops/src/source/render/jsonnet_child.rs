//! Jsonnet evaluated in a child process, bounded: jrsonnet has no bound on time or memory
//! (three lines of Jsonnet can ask for every byte of the machine, a loop for a core
//! forever), so a replica with a [`RenderSandbox`](super::RenderSandbox) evaluates each
//! file in its own executable run as `fleetshard __sandbox … -- fleetshard __jsonnet`:
//! memory (`RLIMIT_AS`) and CPU time (`RLIMIT_CPU`) bounded, no network, the hidden paths
//! hidden, killed with the replica.
//!
//! The child is told what to evaluate on its standard input ([`ChildRequest`]: the
//! repository's Git directory, the commit's tree, the file and the settings), reads the
//! imports from the tree as the in-process evaluation does (the same [`JsonnetJob`] code),
//! and writes the output JSON on its standard output, at most
//! [`ReadLimits::max_manifest_bytes`](super::super::ReadLimits) of it.

use std::io::{Read as _, Write as _};
use std::path::PathBuf;
use std::process::{ExitCode, Stdio};

use fleetshard_sandbox::{Confinement, Launcher};
use serde::{Deserialize, Serialize};

use super::jsonnet::{JsonnetJob, Var};

/// The first argument that makes the executable a Jsonnet child
/// ([`run_jsonnet_child_if_invoked`]).
pub const JSONNET_ENTRY: &str = "__jsonnet";

/// The most of a child's standard error kept for a message.
const MAX_STDERR: u64 = 8192;

/// How Jsonnet children are started: the launcher and its confinement.
#[derive(Debug, Clone)]
pub(crate) struct JsonnetChild {
    pub(crate) launcher: Launcher,
    pub(crate) confinement: Confinement,
}

/// What a child evaluates.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ChildRequest {
    pub(crate) git_dir: PathBuf,
    pub(crate) tree: String,
    pub(crate) file: String,
    pub(crate) ext_vars: Vec<Var>,
    pub(crate) tlas: Vec<Var>,
    pub(crate) search: Vec<Vec<String>>,
    pub(crate) max_manifest_bytes: u64,
    /// The child's memory bound (its launcher set it), to say so when it was reached.
    pub(crate) max_memory: Option<u64>,
}

impl JsonnetChild {
    /// Evaluates `request` in a child: the output JSON text, or why not.
    pub(crate) fn evaluate(&self, request: &ChildRequest) -> Result<String, String> {
        let mut confinement = self.confinement.clone();
        // The child reads the repository; the launcher's own executable must be there.
        confinement.keep_visible(&request.git_dir);
        confinement.keep_visible(self.launcher.exe());
        let mut child = self
            .launcher
            .command(&confinement, self.launcher.exe())
            .arg(JSONNET_ENTRY)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start the Jsonnet evaluator: {e}"))?;
        let input = serde_json::to_vec(request).map_err(|e| e.to_string())?;
        let stderr = child.stderr.take();
        let errors = std::thread::spawn(move || {
            let mut kept = Vec::new();
            if let Some(stderr) = stderr {
                let mut stderr = stderr;
                let _ = (&mut stderr).take(MAX_STDERR).read_to_end(&mut kept);
                // Drain the rest: a child blocked on a full pipe never ends.
                let _ = std::io::copy(&mut stderr, &mut std::io::sink());
            }
            kept
        });
        if let Some(mut stdin) = child.stdin.take() {
            // A child that died early closed its end; its status says why.
            let _ = stdin.write_all(&input);
        }
        let mut out = Vec::new();
        if let Some(stdout) = child.stdout.take() {
            let _ = stdout
                .take(request.max_manifest_bytes + 1)
                .read_to_end(&mut out);
        }
        if out.len() as u64 > request.max_manifest_bytes {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "output is over {} bytes (--max-manifest-bytes)",
                request.max_manifest_bytes
            ));
        }
        let status = child
            .wait()
            .map_err(|e| format!("the Jsonnet evaluator: {e}"))?;
        let errors = errors.join().unwrap_or_default();
        let errors = String::from_utf8_lossy(&errors).trim().to_owned();
        if status.success() {
            return String::from_utf8(out).map_err(|e| format!("output is not UTF-8: {e}"));
        }
        Err(self.failure(status, &errors))
    }

    /// Why a child failed, in the bound's words when a bound ended it.
    fn failure(&self, status: std::process::ExitStatus, errors: &str) -> String {
        use std::os::unix::process::ExitStatusExt as _;
        let memory = self.confinement.max_memory.unwrap_or(0) >> 20;
        let cpu = self.confinement.max_cpu_seconds.unwrap_or(0);
        use rustix::process::Signal;
        let signal = status.signal();
        let is = |wanted: Signal| signal == Some(wanted.as_raw());
        match () {
            // SIGXCPU at the soft limit, SIGKILL at the hard one.
            () if cpu > 0 && (is(Signal::XCPU) || is(Signal::KILL)) => format!(
                "evaluation used more than {cpu} s of CPU time, the bound of one evaluation \
                 (--exec-timeout)"
            ),
            // An allocation refused under RLIMIT_AS aborts the child.
            () if memory > 0 && is(Signal::ABORT) => memory_bound_message(memory),
            () if errors.is_empty() => format!("the Jsonnet evaluator ended with {status}"),
            () => errors.to_owned(),
        }
    }
}

fn memory_bound_message(mib: u64) -> String {
    format!(
        "evaluation needed more than {mib} MiB of memory, the bound of one evaluation \
         (--jsonnet-max-memory-mib)"
    )
}

/// Whether this process came within 16 MiB of `max_memory` (its peak address space): an
/// evaluation that failed there failed for want of memory, whatever it said.
fn reached_memory_bound(max_memory: u64) -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let peak_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmPeak:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
    peak_kib.is_some_and(|kib| kib.saturating_mul(1024) + (16 << 20) >= max_memory)
}

/// When this process was started as a Jsonnet child (its first argument is
/// [`JSONNET_ENTRY`]): evaluates the request on standard input and exits. `None`
/// otherwise: `main` goes on.
pub fn run_jsonnet_child_if_invoked() -> Option<ExitCode> {
    if std::env::args_os().nth(1).as_deref() != Some(std::ffi::OsStr::new(JSONNET_ENTRY)) {
        return None;
    }
    // A panic is caught and reported as the evaluation's failure, not printed.
    std::panic::set_hook(Box::new(|_| {}));
    let mut max_memory = None;
    let outcome = (|| {
        let mut input = Vec::new();
        std::io::stdin()
            .read_to_end(&mut input)
            .map_err(|e| format!("reading the request: {e}"))?;
        let request: ChildRequest =
            serde_json::from_slice(&input).map_err(|e| format!("the request: {e}"))?;
        max_memory = request.max_memory;
        JsonnetJob::evaluate_request(&request)
    })();
    let outcome = outcome.map_err(|message| match max_memory {
        Some(max) if reached_memory_bound(max) => memory_bound_message(max >> 20),
        _ => message,
    });
    Some(match outcome {
        Ok(text) => {
            let mut stdout = std::io::stdout().lock();
            match stdout
                .write_all(text.as_bytes())
                .and_then(|()| stdout.flush())
            {
                Ok(()) => ExitCode::SUCCESS,
                Err(_) => ExitCode::FAILURE,
            }
        }
        Err(message) => {
            eprintln!("{message}");
            ExitCode::FAILURE
        }
    })
}
