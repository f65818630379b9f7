//! A set of strings with their bytes copied into one buffer: what Argo CD's algorithms key
//! by server (app counts, the controller's `server → cluster` map).
//!
//! A `HashMap<String, _>` allocates every key on its own; at 10k servers those allocations
//! and the scattered strings they leave cost more than the look-ups. Here the keys live one
//! after another in one `String`, each key's hash is kept beside it (a look-up compares the
//! hash first and reads a key's bytes only on a full match), and a key is known by its
//! index, in insertion order, so values go in a plain `Vec` beside the table.

use std::hash::Hasher;

use rustc_hash::FxHasher;

/// The hash used for keys (also by the name pass of the app counts).
#[inline]
pub(super) fn key_hash(key: &str) -> u64 {
    let mut h = FxHasher::default();
    h.write(key.as_bytes());
    h.finish()
}

/// Distinct strings, numbered `0..len()` in insertion order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct KeyTable {
    /// Every key's bytes, one after another.
    text: String,
    /// Per key: where its bytes end in `text` (a key starts where the previous one ends).
    ends: Vec<usize>,
    /// Per key: [`key_hash`].
    hashes: Vec<u64>,
    /// Open addressing, linear probing: a key's index plus one, or 0 when free. Its length
    /// is a power of two at least twice the number of keys (empty until the first insert).
    slots: Vec<u32>,
}

impl KeyTable {
    /// An empty table with room for `keys` keys of `bytes` bytes in all before it grows.
    ///
    /// Growing is not free here: after a large load glibc's first allocations sort its
    /// freed chunks, and every doubling of a buffer pays a share of that.
    pub(super) fn with_capacity(keys: usize, bytes: usize) -> Self {
        KeyTable {
            text: String::with_capacity(bytes),
            ends: Vec::with_capacity(keys),
            hashes: Vec::with_capacity(keys),
            slots: vec![0; Self::slots_for(keys)],
        }
    }

    fn slots_for(keys: usize) -> usize {
        (keys.max(8) * 2).next_power_of_two()
    }

    /// The number of keys.
    pub(super) fn len(&self) -> usize {
        self.ends.len()
    }

    /// The key numbered `index`.
    #[inline]
    pub(super) fn key(&self, index: usize) -> &str {
        let start = if index == 0 { 0 } else { self.ends[index - 1] };
        &self.text[start..self.ends[index]]
    }

    /// The keys, in insertion order.
    pub(super) fn keys(&self) -> impl Iterator<Item = &str> {
        (0..self.len()).map(|i| self.key(i))
    }

    /// The index of `key`, if present.
    pub(super) fn find(&self, key: &str) -> Option<usize> {
        self.find_hashed(key, key_hash(key)).ok()
    }

    /// The index of `key`, inserted if absent.
    pub(super) fn insert(&mut self, key: &str) -> usize {
        let hash = key_hash(key);
        match self.find_hashed(key, hash) {
            Ok(index) => index,
            Err(slot) => self.insert_at(slot, key, hash),
        }
    }

    /// `Ok(index)` of `key`, or `Err(slot)`: the free slot where it would go.
    #[inline]
    fn find_hashed(&self, key: &str, hash: u64) -> Result<usize, usize> {
        if self.slots.is_empty() {
            return Err(0);
        }
        let mask = self.slots.len() - 1;
        let mut slot = Self::home(hash, mask);
        loop {
            match self.slots[slot] {
                0 => return Err(slot),
                n => {
                    let index = n as usize - 1;
                    if self.hashes[index] == hash && self.key(index) == key {
                        return Ok(index);
                    }
                }
            }
            slot = (slot + 1) & mask;
        }
    }

    fn home(hash: u64, mask: usize) -> usize {
        // The high bits: FxHasher's low bits are the weaker ones.
        (hash >> 32) as usize & mask
    }

    fn insert_at(&mut self, slot: usize, key: &str, hash: u64) -> usize {
        let index = self.len();
        // Index + 1 must fit a slot; 4 billion distinct servers is beyond any fleet.
        let tag = u32::try_from(index + 1).expect("fewer than 2^32 - 1 distinct keys");
        self.text.push_str(key);
        self.ends.push(self.text.len());
        self.hashes.push(hash);
        if (index + 1) * 2 > self.slots.len() {
            self.rebuild(Self::slots_for(index + 1));
        } else {
            self.slots[slot] = tag;
        }
        index
    }

    fn rebuild(&mut self, slots: usize) {
        self.slots = vec![0; slots];
        let mask = slots - 1;
        for (index, &hash) in self.hashes.iter().enumerate() {
            let mut slot = Self::home(hash, mask);
            while self.slots[slot] != 0 {
                slot = (slot + 1) & mask;
            }
            self.slots[slot] = index as u32 + 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_numbered_in_insertion_order_and_found_again() {
        let mut t = KeyTable::default();
        assert_eq!(t.find("a"), None);
        let words: Vec<String> = (0..1000).map(|i| format!("https://c{i}")).collect();
        for (i, w) in words.iter().enumerate() {
            assert_eq!(t.insert(w), i);
        }
        assert_eq!(t.insert(""), 1000);
        for (i, w) in words.iter().enumerate() {
            assert_eq!(t.insert(w), i, "re-insert");
            assert_eq!(t.find(w), Some(i));
            assert_eq!(t.key(i), w);
        }
        assert_eq!(t.find(""), Some(1000));
        assert_eq!(t.find("https://c1000"), None);
        assert_eq!(t.len(), 1001);
        assert!(t.keys().take(1000).eq(words.iter().map(String::as_str)));
    }

    #[test]
    fn prefixes_and_equal_hashes_are_told_apart() {
        let mut t = KeyTable::with_capacity(2, 0);
        let (a, ab) = (t.insert("a"), t.insert("ab"));
        assert_ne!(a, ab);
        assert_eq!(
            (t.find("a"), t.find("ab"), t.find("b")),
            (Some(a), Some(ab), None)
        );
        // Two keys forced onto one slot chain with the same hash still differ by bytes.
        let mut t = KeyTable::with_capacity(4, 0);
        let h = key_hash("x");
        let free = t.find_hashed("x", h).unwrap_err();
        t.insert_at(free, "x", h);
        let next = t.find_hashed("y", h).unwrap_err();
        t.insert_at(next, "y", h);
        assert_eq!(
            (t.find_hashed("x", h), t.find_hashed("y", h)),
            (Ok(0), Ok(1))
        );
    }
}
