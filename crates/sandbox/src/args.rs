//! The launcher's command line: what [`Launcher::command`](crate::Launcher::command)
//! writes and [`run_if_invoked`](crate::run_if_invoked) reads.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::{Confinement, ENTRY, Namespaces, SandboxError};

/// A launcher's request, decoded.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Request {
    pub(crate) confinement: Confinement,
    pub(crate) namespaces: Namespaces,
    /// The replica's process id (the launcher's parent when it was started).
    pub(crate) parent: Option<u32>,
    /// Confine, then exit: no program.
    pub(crate) probe: bool,
    /// The program and its arguments (after `--`).
    pub(crate) program: Vec<OsString>,
}

/// The arguments before `--`, [`ENTRY`] first.
pub(crate) fn encode(
    c: &Confinement,
    namespaces: Namespaces,
    parent: u32,
    probe: Option<()>,
) -> Vec<OsString> {
    let mut out: Vec<OsString> = vec![ENTRY.into()];
    if c.isolate_network {
        out.push("--isolate-network".into());
    }
    for path in &c.hide {
        out.push("--hide".into());
        out.push(path.clone().into_os_string());
    }
    if let Some(bytes) = c.max_memory {
        out.push("--max-memory".into());
        out.push(bytes.to_string().into());
    }
    if let Some(seconds) = c.max_cpu_seconds {
        out.push("--max-cpu-seconds".into());
        out.push(seconds.to_string().into());
    }
    out.push("--namespaces".into());
    out.push(
        match namespaces {
            Namespaces::Required => "required",
            Namespaces::IfAvailable => "if-available",
        }
        .into(),
    );
    out.push("--parent".into());
    out.push(parent.to_string().into());
    if probe.is_some() {
        out.push("--probe".into());
    }
    out
}

/// The arguments after [`ENTRY`].
pub(crate) fn decode(argv: &[OsString]) -> Result<Request, SandboxError> {
    let bad = |m: String| SandboxError::Arguments(m);
    let mut request = Request {
        confinement: Confinement::default(),
        namespaces: Namespaces::Required,
        parent: None,
        probe: false,
        program: Vec::new(),
    };
    let mut it = argv.iter();
    while let Some(flag) = it.next() {
        let flag = flag.to_string_lossy();
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| bad(format!("{name} needs a value")))
        };
        let number = |name: &str, v: OsString| {
            v.to_string_lossy()
                .parse::<u64>()
                .map_err(|e| bad(format!("{name}: {e}")))
        };
        match flag.as_ref() {
            "--" => {
                request.program = it.cloned().collect();
                break;
            }
            "--isolate-network" => request.confinement.isolate_network = true,
            "--probe" => request.probe = true,
            "--hide" => request
                .confinement
                .hide
                .push(PathBuf::from(value("--hide")?)),
            "--max-memory" => {
                request.confinement.max_memory = Some(number(&flag, value(&flag)?)?);
            }
            "--max-cpu-seconds" => {
                request.confinement.max_cpu_seconds = Some(number(&flag, value(&flag)?)?);
            }
            "--parent" => {
                let pid = number(&flag, value(&flag)?)?;
                request.parent =
                    Some(u32::try_from(pid).map_err(|e| bad(format!("--parent: {e}")))?);
            }
            "--namespaces" => {
                request.namespaces = match value(&flag)?.to_string_lossy().as_ref() {
                    "required" => Namespaces::Required,
                    "if-available" => Namespaces::IfAvailable,
                    other => return Err(bad(format!("--namespaces {other:?}"))),
                }
            }
            other => return Err(bad(format!("unknown option {other:?}"))),
        }
    }
    Ok(request)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_reads_back_as_written() {
        let confinement = Confinement {
            isolate_network: true,
            hide: vec!["/var/run/secrets".into(), "/cache dir".into()],
            max_memory: Some(1 << 30),
            max_cpu_seconds: Some(90),
        };
        let mut argv = encode(&confinement, Namespaces::IfAvailable, 42, None);
        assert_eq!(argv.remove(0), ENTRY);
        argv.extend(["--".into(), "kustomize".into(), "build".into()]);
        assert_eq!(
            decode(&argv).unwrap(),
            Request {
                confinement,
                namespaces: Namespaces::IfAvailable,
                parent: Some(42),
                probe: false,
                program: vec!["kustomize".into(), "build".into()],
            }
        );
        assert!(decode(&["--max-memory".into()]).is_err());
        assert!(decode(&["--frobnicate".into()]).is_err());
    }
}
