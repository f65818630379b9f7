//! JSON kept in memory deflated: what a replica keeps per app for its next write or
//! operation (the status sink's last record, the memo's last operation) is read once per
//! write or operation and kept for every app it owns, so it is kept deflated at the fastest
//! level (a status record or an operation state shrinks three- to fivefold, for some
//! 20 µs per write) and inflated when read.

use std::cell::RefCell;
use std::io::Write as _;

use flate2::write::DeflateEncoder;
use flate2::{Compression, Decompress, FlushDecompress, Status};

thread_local! {
    /// One deflate state per thread, reset for each record: a new one allocates and
    /// zeroes some 270 KiB (window and hash tables) for a record of a few KiB, which was
    /// most of a takeover's packing time.
    static DEFLATE: RefCell<DeflateEncoder<Vec<u8>>> =
        RefCell::new(DeflateEncoder::new(Vec::new(), Compression::fast()));
    /// One inflate state per thread, reset for each record (its 32 KiB window kept).
    static INFLATE: RefCell<Decompress> = RefCell::new(Decompress::new(false));
}

/// `json` deflated at the fastest level (with spare capacity: a caller keeps it in a
/// container of its exact size, `Box<[u8]>` or `Arc<[u8]>`).
pub(super) fn pack(json: &[u8]) -> Vec<u8> {
    DEFLATE.with_borrow_mut(|encoder| {
        // Writing to a `Vec` cannot fail; an empty record is read as none.
        let written = encoder
            .reset(Vec::with_capacity(json.len() / 3))
            .and_then(|_| encoder.write_all(json))
            .and_then(|()| encoder.try_finish());
        let out = std::mem::take(encoder.get_mut());
        written.map(|()| out).unwrap_or_default()
    })
}

/// The JSON [`pack`] deflated; `None` if `packed` is not deflate data (or is cut short).
pub(super) fn unpack(packed: &[u8]) -> Option<Vec<u8>> {
    INFLATE.with_borrow_mut(|inflate| {
        inflate.reset(false);
        let mut json = Vec::with_capacity(packed.len() * 4 + 64);
        loop {
            let (read, written) = (inflate.total_in(), inflate.total_out());
            let rest = packed.get(usize::try_from(read).ok()?..)?;
            match inflate.decompress_vec(rest, &mut json, FlushDecompress::Finish) {
                Ok(Status::StreamEnd) => return Some(json),
                Ok(Status::Ok | Status::BufError) => {
                    let stuck = inflate.total_in() == read && inflate.total_out() == written;
                    if stuck && json.len() < json.capacity() {
                        // Room to write, input left unread or none left: cut short.
                        return None;
                    }
                    json.reserve(json.capacity().max(256));
                }
                Err(_) => return None,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_kept_record_is_deflated_and_unpacks_to_what_was_written() {
        let json = serde_json::to_vec(&serde_json::json!({
            "comparison": {"resources": (0..5).map(|i| serde_json::json!({
                "group": "apps", "kind": "Deployment", "namespace": "team-a",
                "name": format!("web-{i}"), "status": "Synced", "health": {"status": "Healthy"}
            })).collect::<Vec<_>>()}
        }))
        .unwrap();
        let packed = super::pack(&json);
        assert!(
            packed.len() * 3 < json.len(),
            "{} of {}",
            packed.len(),
            json.len()
        );
        assert_eq!(super::unpack(&packed).as_deref(), Some(json.as_slice()));
        assert_eq!(super::unpack(b"not deflate data"), None);
        // Cut short: not a record (and never a loop).
        assert_eq!(super::unpack(&packed[..packed.len() / 2]), None);
        // The thread's states are reset between records: each unpacks to its own.
        let other = br#"{"a":1}"#;
        assert_eq!(
            super::unpack(&super::pack(other)).as_deref(),
            Some(&other[..])
        );
        assert_eq!(super::unpack(&packed).as_deref(), Some(json.as_slice()));
        // A record larger than its first guess of room when packed (incompressible).
        let noise: Vec<u8> = (0..20_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        assert_eq!(super::unpack(&super::pack(&noise)), Some(noise));
        // A record many times larger than its first guess of room when unpacked.
        let zeros = vec![b'0'; 100_000];
        assert_eq!(super::unpack(&super::pack(&zeros)), Some(zeros));
    }
}
