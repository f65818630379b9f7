//! The audit log both protocols write: one JSON line per ownership change,
//! `{"ts_ms","identity","event":"acquire"|"release","cluster","shard","generation"}`,
//! and the matching log line.

use std::fs::File;
use std::io::Write as _;
use std::path::Path;

use anyhow::Context as _;
use tokio::sync::mpsc;

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
    /// For a stop caused by the lease lapsing: how long ago it lapsed, which is when
    /// ownership ended (a replica paused past its deadline reports on resuming). The line's
    /// `ts_ms` is then the lapse time, and it carries `"reason": "lapsed"`.
    pub lapsed_ago: Option<std::time::Duration>,
}

/// Opens (appends to) the audit log at `path`, if any.
pub fn open(path: Option<&Path>) -> anyhow::Result<Option<File>> {
    match path {
        Some(path) => Ok(Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("{}: cannot open the audit log", path.display()))?,
        )),
        None => Ok(None),
    }
}

/// Wall-clock milliseconds since the Unix epoch, for the audit log only: it is read by
/// people and tests, never by the protocol (G6), which is why `SystemTime` is allowed here.
#[allow(clippy::disallowed_types)]
fn unix_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default()
}

/// Logs every ownership change received (mapped by `to_event`), and appends it to the
/// audit log as one JSON line; ends when the channel closes.
pub async fn audit_loop<T>(
    mut events: mpsc::UnboundedReceiver<T>,
    mut file: Option<File>,
    identity: String,
    to_event: impl Fn(T) -> AuditEvent,
) -> anyhow::Result<()> {
    while let Some(e) = events.recv().await {
        let e = to_event(e);
        let event = if e.acquire { "acquire" } else { "release" };
        tracing::info!(cluster = %e.cluster, shard = ?e.shard, generation = e.generation, "{event}");
        if let Some(f) = &mut file {
            let ago = e.lapsed_ago.map_or(0, |d| d.as_millis());
            let mut line = serde_json::json!({
                "ts_ms": unix_ms().saturating_sub(ago) as u64,
                "identity": identity,
                "event": event,
                "cluster": e.cluster,
                "shard": e.shard,
                "generation": e.generation,
            });
            if e.lapsed_ago.is_some() {
                line["reason"] = "lapsed".into();
            }
            // One write per line, unbuffered: a SIGKILL loses no line already reported.
            f.write_all(format!("{line}\n").as_bytes())
                .context("writing the audit log")?;
        }
    }
    Ok(())
}
