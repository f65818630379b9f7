//! Confining the current process: the system calls behind [`crate::Confinement`].

use std::path::Path;

use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use nix::sys::prctl::set_pdeathsig;
use nix::sys::resource::{Resource, setrlimit};
use nix::sys::signal::Signal;
use nix::unistd::{getgid, getppid, getuid};

use crate::{Confinement, Namespaces, SandboxError};

/// The user a confined program runs as inside its namespaces when the replica runs as
/// root: any id but 0, so that `exec` leaves the program no capability there.
const NOBODY: u32 = 65534;

fn system(what: impl Into<String>) -> impl FnOnce(nix::Error) -> SandboxError {
    let what = what.into();
    move |e| SandboxError::System {
        what,
        source: std::io::Error::from(e),
    }
}

/// Confines this process (which must still be single-threaded when namespaces are
/// wanted) as `c` says: the parent-death signal (and a check that `parent`, the replica,
/// is still this process's parent), the resource limits, then the namespaces. Whether
/// namespaces were made: with [`Namespaces::IfAvailable`], a kernel that refuses them
/// leaves the process bounded only; anything failing after they were made is an error.
pub fn confine_self(
    c: &Confinement,
    namespaces: Namespaces,
    parent: Option<u32>,
) -> Result<bool, SandboxError> {
    set_pdeathsig(Signal::SIGKILL).map_err(system("setting the parent-death signal"))?;
    if let Some(parent) = parent
        && u32::try_from(getppid().as_raw()).ok() != Some(parent)
    {
        return Err(SandboxError::ParentGone);
    }
    if let Some(bytes) = c.max_memory {
        setrlimit(Resource::RLIMIT_AS, bytes, bytes).map_err(system("limiting memory"))?;
    }
    if let Some(seconds) = c.max_cpu_seconds {
        // SIGXCPU at the soft limit, SIGKILL a second later.
        setrlimit(Resource::RLIMIT_CPU, seconds, seconds.saturating_add(1))
            .map_err(system("limiting CPU time"))?;
    }
    if !c.needs_namespaces() {
        return Ok(false);
    }
    let (uid, gid) = (getuid().as_raw(), getgid().as_raw());
    let mut flags = CloneFlags::CLONE_NEWUSER;
    if c.isolate_network {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    if !c.hide.is_empty() {
        flags |= CloneFlags::CLONE_NEWNS;
    }
    if let Err(e) = unshare(flags) {
        return match namespaces {
            Namespaces::IfAvailable => Ok(false),
            Namespaces::Required => Err(system("making user, mount and network namespaces")(e)),
        };
    }
    map_ids(uid, gid)?;
    if !c.hide.is_empty() {
        mount(
            None::<&str>,
            "/",
            None::<&str>,
            MsFlags::MS_REC | MsFlags::MS_PRIVATE,
            None::<&str>,
        )
        .map_err(system("making the mount namespace private"))?;
        for path in &c.hide {
            cover(path)?;
        }
    }
    Ok(true)
}

/// Maps the replica's user and group to one user inside the new user namespace (not 0).
fn map_ids(uid: u32, gid: u32) -> Result<(), SandboxError> {
    let write = |file: &str, text: String| {
        std::fs::write(file, text).map_err(|source| SandboxError::System {
            what: format!("writing {file}"),
            source,
        })
    };
    let inside = |id: u32| if id == 0 { NOBODY } else { id };
    write("/proc/self/setgroups", "deny".to_owned())?;
    write("/proc/self/uid_map", format!("{} {uid} 1", inside(uid)))?;
    write("/proc/self/gid_map", format!("{} {gid} 1", inside(gid)))
}

/// Covers `path`: an empty read-only `tmpfs` over a directory, `/dev/null` over a file.
fn cover(path: &Path) -> Result<(), SandboxError> {
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(());
    };
    let what = format!("hiding {}", path.display());
    if meta.is_dir() {
        mount(
            Some("tmpfs"),
            path,
            Some("tmpfs"),
            MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            Some("size=4k,mode=0555"),
        )
        .map_err(system(what))
    } else {
        mount(
            Some("/dev/null"),
            path,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .map_err(system(what))
    }
}
