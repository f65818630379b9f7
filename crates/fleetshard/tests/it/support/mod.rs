//! A harness for tests that run real `fleetshard run` processes: start replicas against a
//! store, kill (-9), pause (SIGSTOP/SIGCONT) and stop (SIGTERM) them, wait for conditions by
//! polling (`/readyz`, `/metrics`, `fleetshard status --output json`, the audit logs) with
//! generous deadlines, and replay every replica's audit log to check that no two processes
//! ever owned one cluster at the same instant and that every failure was covered in time.

pub mod audit;
pub mod cdp;
pub mod http;
pub mod replicas;
pub mod store;
pub mod timing;

use std::time::Duration;

/// Wall-clock milliseconds since the epoch. The audit logs' `ts_ms` are wall-clock (one
/// machine, one clock), so the harness dates the signals it sends with the same clock.
#[allow(clippy::disallowed_types)] // A measurement harness comparing with audit-log wall time.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_millis() as u64
}

/// Polls `f` every 50 ms until it returns `Some`, and returns that; panics naming `what`
/// (and `f`'s last explanation) after `deadline`. Generous deadlines make a broken build
/// fail instead of hang, without asserting on timing.
pub fn wait_for<T>(what: &str, deadline: Duration, mut f: impl FnMut() -> Result<T, String>) -> T {
    let start = unix_ms();
    loop {
        match f() {
            Ok(v) => return v,
            Err(why) => {
                if unix_ms() - start > deadline.as_millis() as u64 {
                    panic!("timed out after {deadline:?} waiting for {what}: {why}");
                }
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// p50, p99 and max of `ms` (nearest rank), or None when empty.
pub fn percentiles(ms: &[u64]) -> Option<(u64, u64, u64)> {
    if ms.is_empty() {
        return None;
    }
    let mut v = ms.to_vec();
    v.sort_unstable();
    let rank = |p: f64| {
        let i = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len());
        v[i - 1]
    };
    Some((rank(0.50), rank(0.99), *v.last()?))
}

/// Sends `sig` (`-TERM`, `-KILL`, `-STOP`, `-CONT`) to `pid` with kill(1); panics if it fails.
pub fn signal(pid: u32, sig: &str) {
    let st = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("running kill");
    assert!(st.success(), "kill {sig} {pid}: {st}");
}

/// A child process killed (and reaped) when dropped, so a failing test leaves none behind.
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
