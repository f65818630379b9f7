//! Listing a prefix: one read transaction, large values that did not change since the
//! last listing copied instead of read again (see [`ListedValues`]).

use std::collections::HashMap;

use fleetshard_coord::store::{Entry, Listing};
use rusqlite::{Connection, TransactionBehavior, params};

use crate::db::{DbError, prefix_end, under_prefix};

/// Values at least this long are kept by [`ListedValues`] between listings.
pub(crate) const LARGE_VALUE: usize = 16 * 1024;

/// The large values each prefix's last listing held, by key, with their version: a listing
/// copies an unchanged one from here instead of reading it again. The coordination
/// listing runs a few times a second on every replica and holds one value of hundreds of
/// KB at full size (the assignment); read from the file it is a chain of overflow pages,
/// each looked up in the WAL and copied in by a system call. Versions are never reused in
/// a file, and a replaced file fails every operation (`conn.rs`), so (key, version,
/// length) names the bytes. What it costs: a second copy of those values (at full size the
/// assignment and the replicas' cost records, about 3.5 MB per replica).
#[derive(Debug, Default)]
pub(crate) struct ListedValues(HashMap<String, HashMap<String, (u64, Vec<u8>)>>);

/// Every entry under `prefix` and the revision, from one read transaction (one snapshot);
/// large values unchanged since `listed` last saw this prefix are copied from there.
pub(crate) fn list(
    conn: &mut Connection,
    prefix: &str,
    listed: &mut ListedValues,
) -> Result<Listing, DbError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
    let revision: u64 = tx
        .prepare_cached("SELECT revision FROM meta WHERE id = 0")?
        .query_row([], |r| r.get(0))?;
    let end = prefix_end(prefix);
    // A large value is not read here (SQLite reads a blob's overflow pages only when the
    // column is used; `length` of a blob needs only the record's header).
    let sql = format!(
        "SELECT key, CASE WHEN length(value) >= {LARGE_VALUE} THEN NULL ELSE value END, \
         version, length(value) FROM entries WHERE {} ORDER BY key",
        under_prefix(end.is_some())
    );
    let mut stmt = tx.prepare_cached(&sql)?;
    let row = |r: &rusqlite::Row<'_>| {
        let value: Option<Vec<u8>> = r.get(1)?;
        let len: u64 = r.get(3)?;
        Ok((
            Entry {
                key: r.get(0)?,
                value: value.unwrap_or_default(),
                version: r.get(2)?,
            },
            usize::try_from(len).unwrap_or(usize::MAX),
        ))
    };
    let rows = match &end {
        Some(end) => stmt.query_map(params![prefix, end], row)?,
        None => stmt.query_map(params![prefix], row)?,
    }
    .collect::<Result<Vec<_>, _>>()?;
    drop(stmt);
    let mut before = listed.0.remove(prefix).unwrap_or_default();
    let mut now = HashMap::new();
    let mut entries = Vec::with_capacity(rows.len());
    for (mut entry, len) in rows {
        if len >= LARGE_VALUE {
            let known = before
                .remove(&entry.key)
                .filter(|(version, bytes)| *version == entry.version && bytes.len() == len);
            let bytes = match known {
                Some((_, bytes)) => bytes,
                None => tx
                    .prepare_cached("SELECT value FROM entries WHERE key = ?1")?
                    .query_row(params![entry.key], |r| r.get(0))?,
            };
            entry.value = bytes.clone();
            now.insert(entry.key.clone(), (entry.version, bytes));
        }
        entries.push(entry);
    }
    tx.commit()?;
    if !now.is_empty() {
        listed.0.insert(prefix.to_owned(), now);
    }
    Ok(Listing { entries, revision })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use fleetshard_coord::store::Precondition;

    use super::*;
    use crate::db::{Durability, open, put};

    /// An unchanged large value is the listing's own copy, not the file's bytes read again:
    /// the file's bytes changed behind the store's back (same version, same length) are not
    /// seen until the version moves. A small value is read every time.
    #[test]
    fn an_unchanged_large_value_is_copied_not_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = open(
            &dir.path().join("s.db"),
            Duration::from_millis(250),
            Durability::Normal,
            true,
        )
        .unwrap();
        put(&mut conn, "p/big", &vec![1; LARGE_VALUE], Precondition::Any).unwrap();
        put(&mut conn, "p/small", b"a", Precondition::Any).unwrap();
        let mut listed = ListedValues::default();
        let values = |l: &Listing| l.entries.iter().map(|e| e.value[0]).collect::<Vec<_>>();
        assert_eq!(
            values(&list(&mut conn, "p/", &mut listed).unwrap()),
            [1, b'a']
        );
        let poke = |c: &Connection, key: &str, value: &[u8]| {
            c.execute(
                "UPDATE entries SET value = ?2 WHERE key = ?1",
                params![key, value],
            )
            .unwrap();
        };
        poke(&conn, "p/big", &vec![2; LARGE_VALUE]);
        poke(&conn, "p/small", b"b");
        assert_eq!(
            values(&list(&mut conn, "p/", &mut listed).unwrap()),
            [1, b'b']
        );
        // A write moves the version: read again.
        put(&mut conn, "p/big", &vec![3; LARGE_VALUE], Precondition::Any).unwrap();
        assert_eq!(
            values(&list(&mut conn, "p/", &mut listed).unwrap()),
            [3, b'b']
        );
        // Without a known copy, the file's bytes.
        let mut fresh = ListedValues::default();
        poke(&conn, "p/big", &vec![4; LARGE_VALUE]);
        assert_eq!(
            values(&list(&mut conn, "p/", &mut fresh).unwrap()),
            [4, b'b']
        );
    }
}
