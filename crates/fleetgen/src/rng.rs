//! The pseudo-random source and the little floating-point maths the generator needs, all
//! specified down to the bit so that a spec gives the same fleet everywhere.
//!
//! **Why hand-rolled.** Determinism across platforms *and Rust/crate versions* is a
//! contract of this crate. `rand`'s generators are value-stable, but its sampling
//! algorithms (`random_range`, `shuffle`, distributions) are explicitly allowed to change
//! their output between minor releases, and `rand_chacha` would pull in a second
//! `rand_core` next to the workspace's. SplitMix64 (`fleetshard_util::rng`, shared with
//! the simulations) is ten lines, passes BigCrush, and its output is fixed by its
//! definition; range reduction (Lemire) and shuffling (Fisher–Yates) are written out there
//! too, so nothing we depend on can change the stream.
//!
//! Likewise `f64::powf`/`exp`/`ln` are documented as *non-deterministic* (they vary by
//! platform and Rust version), so the Zipf weights use [`pow_neg`], built only from
//! IEEE 754 `+ - * /`, which are correctly rounded and therefore identical everywhere
//! (Rust never contracts them into FMAs).

pub(crate) use fleetshard_util::rng::SplitMix64;

const LN_2: f64 = std::f64::consts::LN_2;
// Cody–Waite split of ln 2 (fdlibm's): `k × LN2_HI` is exact for |k| < 2^11.
const LN2_HI: f64 = f64::from_bits(0x3FE6_2E42_FEE0_0000);
const LN2_LO: f64 = f64::from_bits(0x3DEA_39EF_3579_3C76);
const SQRT_2: f64 = std::f64::consts::SQRT_2;

/// Natural logarithm of a positive, finite, normal `x`, from basic IEEE operations only.
///
/// `x = m·2^e` with `m ∈ [√½, √2)`, then `ln m = 2·atanh((m−1)/(m+1))` by its series
/// (`|z| < 0.172`, so 16 terms reach far below an ulp). Not correctly rounded — within a
/// few ulps — but bit-identical on every IEEE 754 platform.
pub(crate) fn ln(x: f64) -> f64 {
    debug_assert!(x.is_normal() && x > 0.0, "ln({x})");
    let bits = x.to_bits();
    let mut e = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mut m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000);
    if m > SQRT_2 {
        m /= 2.0;
        e += 1;
    }
    let z = (m - 1.0) / (m + 1.0);
    let z2 = z * z;
    let mut term = z;
    let mut sum = 0.0;
    let mut k = 1.0;
    for _ in 0..16 {
        sum += term / k;
        term *= z2;
        k += 2.0;
    }
    let e = e as f64;
    e * LN2_HI + (e * LN2_LO + 2.0 * sum)
}

/// `e^y` for `y ≤ 0`, from basic IEEE operations only; underflows to exactly 0 below
/// about `e^−760`.
///
/// `y = k·ln 2 + r` with `|r| ≤ ½ ln 2`, `e^r` by its Taylor series (22 terms), then
/// scaled by `2^k` through the exponent bits.
pub(crate) fn exp_nonpos(y: f64) -> f64 {
    debug_assert!(y <= 0.0, "exp_nonpos({y})");
    let k = (y / LN_2).round();
    if k < -1100.0 {
        return 0.0;
    }
    let r = (y - k * LN2_HI) - k * LN2_LO;
    let mut term = 1.0;
    let mut sum = 1.0;
    let mut n = 1.0;
    for _ in 0..22 {
        term = term * r / n;
        sum += term;
        n += 1.0;
    }
    let pow2 = |e: i64| f64::from_bits(((e + 1023) as u64) << 52);
    let k = k as i64;
    if k < -1000 {
        // Subnormal results: an exact scaling first, then one correctly rounded one.
        sum * pow2(k + 1000) * pow2(-1000)
    } else {
        sum * pow2(k)
    }
}

/// `x^(−s)` for `x ≥ 1` and `s ≥ 0`, deterministic (see [`ln`], [`exp_nonpos`]).
/// Exponent exactly 1 takes the exact path `1/x`.
pub(crate) fn pow_neg(x: f64, s: f64) -> f64 {
    debug_assert!(x >= 1.0 && s >= 0.0);
    if s == 1.0 {
        return 1.0 / x;
    }
    if s == 0.0 || x == 1.0 {
        return 1.0;
    }
    exp_nonpos(-s * ln(x))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_matches_the_reference_stream() {
        // Vigna's splitmix64.c seeded with 1234567.
        let mut r = SplitMix64::new(1_234_567);
        assert_eq!(r.next_u64(), 6_457_827_717_110_365_317);
        assert_eq!(r.next_u64(), 3_203_168_211_198_807_973);
        assert_eq!(r.next_u64(), 9_817_491_932_198_370_423);
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut r = SplitMix64::new(9);
        let mut seen = [0u32; 7];
        for _ in 0..7000 {
            seen[r.index(7)] += 1;
        }
        assert!(seen.iter().all(|&c| (800..1200).contains(&c)), "{seen:?}");
        assert_eq!(r.below(1), 0);
    }

    #[test]
    fn shuffle_is_a_permutation() {
        let mut v: Vec<u32> = (0..100).collect();
        SplitMix64::new(3).shuffle(&mut v);
        assert_ne!(v, (0..100).collect::<Vec<_>>());
        v.sort_unstable();
        assert_eq!(v, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn streams_differ_by_purpose() {
        let a = SplitMix64::stream(1, 0).next_u64();
        let b = SplitMix64::stream(1, 1).next_u64();
        let c = SplitMix64::stream(2, 0).next_u64();
        assert!(a != b && a != c && b != c);
    }

    #[test]
    fn hand_rolled_math_is_accurate() {
        for &x in &[1.0, 1.5, 2.0, 3.0, 10.0, 12345.678, 1e9, 1e300] {
            let rel = (ln(x) - x.ln()).abs() / x.ln().abs().max(1.0);
            assert!(rel < 1e-14, "ln({x}): {} vs {}", ln(x), x.ln());
        }
        for &y in &[0.0, -1e-9, -0.3, -1.0, -5.5, -50.0, -700.0, -708.0] {
            let rel = (exp_nonpos(y) - y.exp()).abs() / y.exp();
            assert!(rel < 1e-14, "exp({y}): {} vs {}", exp_nonpos(y), y.exp());
        }
        assert_eq!(exp_nonpos(-1e6), 0.0);
        let tiny = exp_nonpos(-740.0); // subnormal
        assert!(tiny > 0.0 && (tiny - (-740.0f64).exp()).abs() <= 2.0 * f64::from_bits(1));
        for &(x, s) in &[
            (2.0f64, 1.0f64),
            (7.0, 1.2),
            (1000.0, 0.8),
            (50_000.0, 2.0),
            (3.0, 0.0),
        ] {
            let want = x.powf(-s);
            assert!((pow_neg(x, s) - want).abs() / want < 1e-13, "{x}^-{s}");
        }
    }

    #[test]
    fn hand_rolled_math_is_pinned() {
        // Bit patterns fixed forever: a change here changes every Zipf fleet.
        assert_eq!(pow_neg(7.0, 1.2).to_bits(), 4_591_639_708_107_947_984);
        assert_eq!(pow_neg(1000.0, 0.8).to_bits(), 4_571_239_885_334_376_070);
    }
}
