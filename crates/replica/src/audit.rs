//! The audit log both protocols write: one JSON line per ownership change,
//! `{"ts_ms","identity","event":"acquire"|"release","cluster","shard","generation"}`,
//! and the matching log line.
//!
//! Complete by construction: the coordination runners report a stop for every start before
//! they return (also when a lease lapsed during shutdown, or a stop outlived the release),
//! and [`audit_loop`] writes every event it receives before it ends, which
//! `ReplicaHandle::shutdown` waits for. Lines are buffered while more events are waiting
//! (a handover of 50,000 clusters is 50,000 lines: one write each took longer than the
//! handover) and written out whenever none is.

use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::path::Path;

use fleetshard_coord::ownership::{Ownership, OwnershipChange};
use tokio::sync::mpsc;

use crate::ReplicaError;
use crate::clock::SystemClock;

/// One ownership change, protocol-neutral.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEvent {
    /// `true`: this replica started the cluster ("acquire"); `false`: stopped ("release").
    pub acquire: bool,
    /// The cluster.
    pub cluster: String,
    /// The shard held when it happened.
    pub shard: Option<u32>,
    /// The protocol's generation (fenced: the assignment's; Argo CD mode: see its docs).
    pub generation: u64,
    /// How long ago it happened, when the event is read: the line's `ts_ms` is that
    /// moment, not when the line is written (events wait in a channel; an acquire dated
    /// late could follow the lapse that ended it).
    pub ago: std::time::Duration,
    /// A stop caused by the lease lapsing (it happened at the lapse, which a replica
    /// paused past its deadline reports on resuming): the line carries
    /// `"reason": "lapsed"`.
    pub lapsed: bool,
}

impl From<OwnershipChange> for AuditEvent {
    fn from(e: OwnershipChange) -> Self {
        AuditEvent {
            acquire: matches!(e.change, Ownership::Started(_)),
            cluster: match e.change {
                Ownership::Started(c) | Ownership::Stopped(c) => c,
            },
            shard: e.shard,
            generation: e.generation,
            ago: e.at.elapsed(),
            lapsed: e.lapsed_at.is_some(),
        }
    }
}

/// Opens (appends to) the audit log at `path`, if any.
pub fn open(path: Option<&Path>) -> Result<Option<File>, ReplicaError> {
    match path {
        Some(path) => Ok(Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|source| ReplicaError::Io {
                    what: format!("{}: cannot open the audit log", path.display()),
                    source,
                })?,
        )),
        None => Ok(None),
    }
}

/// Logs every ownership change received, and appends it to the audit log as one JSON
/// line; ends when the channel closes, with every line written.
pub async fn audit_loop(
    mut events: mpsc::UnboundedReceiver<OwnershipChange>,
    file: Option<File>,
    identity: String,
) -> Result<(), ReplicaError> {
    let failed = |source| ReplicaError::Io {
        what: "writing the audit log".into(),
        source,
    };
    let mut file = file.map(|f| BufWriter::with_capacity(1 << 16, f));
    while let Some(e) = events.recv().await {
        let e = AuditEvent::from(e);
        let event = if e.acquire { "acquire" } else { "release" };
        let shard = e.shard.map_or(-1, i64::from);
        tracing::info!(cluster = %e.cluster, shard, generation = e.generation, "{event}");
        if let Some(f) = &mut file {
            let ago = e.ago.as_millis();
            let mut line = serde_json::json!({
                "ts_ms": SystemClock::since_epoch().as_millis().saturating_sub(ago) as u64,
                "identity": identity,
                "event": event,
                "cluster": e.cluster,
                "shard": e.shard,
                "generation": e.generation,
            });
            if e.lapsed {
                line["reason"] = "lapsed".into();
            }
            writeln!(f, "{line}").map_err(failed)?;
            // Written out as soon as no event is waiting: a SIGKILL loses no line of an
            // event handled before the last quiet moment.
            if events.is_empty() {
                f.flush().map_err(failed)?;
            }
        }
    }
    if let Some(f) = &mut file {
        f.flush().map_err(failed)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
