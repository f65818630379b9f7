//! A free port on 127.0.0.1 for another process to bind: what `fleetshard up` gives its
//! replicas and simulated clusters, and what tests give the servers they start.
//!
//! Binding port 0 and handing the number on races with everyone else on the machine: the
//! kernel gives ports of its ephemeral range (`net.ipv4.ip_local_port_range`) to every
//! `bind(0)` and to every outgoing connection's source, so between the check and the
//! child's own bind another process can be given the same port ("Address already in
//! use", seen in the test suite and the scale runs). A port below that range is never
//! given out by the kernel, so only another picker like this one could take it: the
//! search starts at a random place and never offers a port twice in one process.

use std::hash::{BuildHasher, Hasher};
use std::net::TcpListener;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

/// Where the search starts: ports below it are left to well-known services.
const LOWEST: u16 = 10_000;

/// Offered so far by this process (each offer moves on).
static OFFERED: AtomicU32 = AtomicU32::new(0);

/// This process's random seed for where the search starts.
static START: OnceLock<u64> = OnceLock::new();

/// A port on 127.0.0.1 that was free when checked, outside the kernel's ephemeral range
/// when one is free there (see the module's documentation); else one the kernel picks.
pub fn free_port() -> std::io::Result<u16> {
    let (low, _) = ephemeral_range().unwrap_or((32_768, 60_999));
    if low > LOWEST {
        let span = u32::from(low - LOWEST);
        // One random start per process: steps from it never repeat an offset within a span
        // (7,919 is prime, so coprime with any span not a multiple of it). A start drawn per
        // call would offer the same port to two calls (seen in CI: 1 in 50).
        let start = *START.get_or_init(|| {
            let mut seed = std::collections::hash_map::RandomState::new().build_hasher();
            seed.write_u32(std::process::id());
            seed.finish()
        }) % u64::from(span);
        let start = u32::try_from(start).unwrap_or(0);
        for _ in 0..256 {
            let step = OFFERED.fetch_add(1, Ordering::Relaxed);
            let offset = (start + step.wrapping_mul(7_919)) % span;
            let port = LOWEST + u16::try_from(offset).unwrap_or(0);
            if TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return Ok(port);
            }
        }
    }
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The kernel's ephemeral port range, if this is Linux and it reads.
fn ephemeral_range() -> Option<(u16, u16)> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let mut parts = text.split_whitespace().map(|p| p.parse::<u16>().ok());
    Some((parts.next()??, parts.next()??))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_free_distinct_and_below_the_ephemeral_range() {
        let low = ephemeral_range().map_or(32_768, |(low, _)| low);
        let ports: Vec<u16> = (0..50).map(|_| free_port().unwrap()).collect();
        let mut distinct = ports.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), ports.len(), "{ports:?}");
        for p in ports {
            assert!((LOWEST..low).contains(&p), "{p}");
            TcpListener::bind(("127.0.0.1", p)).expect("still free");
        }
    }
}
