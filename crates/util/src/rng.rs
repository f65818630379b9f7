//! SplitMix64 (Steele, Lea & Flood 2014; Vigna's reference `splitmix64.c`): ten lines,
//! passes BigCrush, and its output is fixed by its definition, so a seed gives the same
//! stream on every platform and every Rust version. Range reduction (Lemire) and shuffling
//! (Fisher–Yates) are written out too, so nothing a dependency does can change the stream.
//! Used wherever fleetshard needs seeded, replayable randomness: synthetic fleets,
//! simulations, jitter.

/// SplitMix64: a 64-bit state advanced by the golden-ratio Weyl increment and finalised by
/// the `mix64` variant 13 bijection.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// The SplitMix64 finaliser: a bijection on `u64` with good avalanche.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl SplitMix64 {
    /// A generator whose first output is `mix64(seed + GOLDEN_GAMMA)`, as in the reference.
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// An independent stream for one purpose (ids, zones, ranks, ...): changing how many
    /// values one purpose draws never shifts another purpose's values.
    pub fn stream(seed: u64, purpose: u64) -> Self {
        SplitMix64::new(mix64(seed) ^ mix64(purpose.wrapping_mul(GOLDEN_GAMMA) ^ 0x5EED))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        mix64(self.state)
    }

    /// A uniform integer in `0..n` without bias (Lemire's multiply-and-reject).
    ///
    /// # Panics
    /// If `n` is zero.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "below(0)");
        let mut m = u128::from(self.next_u64()) * u128::from(n);
        if (m as u64) < n {
            let threshold = n.wrapping_neg() % n;
            while (m as u64) < threshold {
                m = u128::from(self.next_u64()) * u128::from(n);
            }
        }
        (m >> 64) as u64
    }

    /// A uniform index in `0..n`.
    pub fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    /// Fisher–Yates shuffle (from the back, `j` uniform in `0..=i`).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.index(i + 1);
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_is_the_reference_one_and_below_stays_in_range() {
        // Vigna's splitmix64.c seeded with 1234567.
        let mut r = SplitMix64::new(1_234_567);
        assert_eq!(r.next_u64(), 6_457_827_717_110_365_317);
        assert_eq!(r.next_u64(), 3_203_168_211_198_807_973);
        let mut r = SplitMix64::new(9);
        assert!((0..1000).all(|_| r.below(7) < 7));
        let mut v: Vec<u32> = (0..10).collect();
        SplitMix64::new(3).shuffle(&mut v);
        v.sort_unstable();
        assert_eq!(v, (0..10).collect::<Vec<_>>());
        assert_ne!(
            SplitMix64::stream(1, 0).next_u64(),
            SplitMix64::stream(1, 1).next_u64()
        );
    }
}
