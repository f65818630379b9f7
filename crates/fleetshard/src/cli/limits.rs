//! The open-file limit of the long-running commands (`run`, `simulate`, `up`): every
//! simulated cluster listens on a socket of its own and every watch or pooled connection
//! is a descriptor on both ends, so a fleet of thousands of clusters needs thousands of
//! them where a login shell's soft limit is often 1,024. The soft limit is raised to the
//! hard one at start; a command that knows its size refuses to start when even that is
//! too low, rather than failing later with "Too many open files" in the middle of a run.

use anyhow::bail;
use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

/// Descriptors one simulated cluster may hold in the process serving it: its listener and
/// the connections of the replica that owns it (about 8 per cluster measured with the
/// `gitops` reconciler: 8,266 at 1,000 clusters), with a margin.
pub const PER_SIMULATED_CLUSTER: u64 = 10;

/// Descriptors a process needs whatever its size (stdio, logs, the store, the runtime).
pub const BASE: u64 = 64;

/// Raises the soft limit on open files to the hard limit (once per process is enough;
/// again is harmless) and returns the soft limit now in force (`u64::MAX`: unlimited).
/// A limit that cannot be raised is left as it was (and returned).
pub fn raise_open_files() -> u64 {
    let now = getrlimit(Resource::Nofile);
    let wanted = Rlimit {
        current: now.maximum,
        maximum: now.maximum,
    };
    if now.current != now.maximum && setrlimit(Resource::Nofile, wanted).is_ok() {
        return now.maximum.unwrap_or(u64::MAX);
    }
    now.current.unwrap_or(u64::MAX)
}

/// Raises the limit ([`raise_open_files`]) and fails, naming `what` and the limit, when
/// `need` descriptors are more than it allows.
pub fn require_open_files(need: u64, what: &str) -> anyhow::Result<()> {
    let limit = raise_open_files();
    check(need, limit, what)
}

fn check(need: u64, limit: u64, what: &str) -> anyhow::Result<()> {
    if need > limit {
        bail!(
            "{what} needs about {need} open files, and this process may open at most {limit} \
             (RLIMIT_NOFILE, already raised to its hard limit): raise the hard limit (`ulimit \
             -Hn` as root, LimitNOFILE= in a systemd unit, nofile in \
             /etc/security/limits.conf) or ask for a smaller size"
        );
    }
    Ok(())
}

/// What `clusters` simulated clusters in one process need ([`PER_SIMULATED_CLUSTER`]
/// each, plus [`BASE`]).
pub fn for_simulated_clusters(clusters: u64) -> u64 {
    BASE + clusters * PER_SIMULATED_CLUSTER
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_ends_at_the_hard_one() {
        let soft = raise_open_files();
        let now = getrlimit(Resource::Nofile);
        assert_eq!(now.current, now.maximum);
        assert_eq!(soft, now.current.unwrap_or(u64::MAX));
    }

    #[test]
    fn too_few_descriptors_are_refused_with_both_figures() {
        assert!(check(10_064, 20_000, "x").is_ok());
        let e = check(
            for_simulated_clusters(2_000),
            20_000,
            "2000 simulated clusters",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("2000 simulated clusters needs about 20064 open files")
                && e.contains("at most 20000"),
            "{e}"
        );
    }
}
