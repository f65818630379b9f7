//! How many cases a property test runs: proptest reads `PROPTEST_CASES` into its default
//! configuration (256 when unset); a test that sets its own count would ignore it, so a
//! sweep (`scripts/sweep`) asking for 10,000 cases would silently run the test's own.

/// Proptest's default case count, when `PROPTEST_CASES` is not set.
pub const PROPTEST_DEFAULT: u32 = 256;

/// The cases a property test runs: `configured` (proptest's default configuration's
/// count, `ProptestConfig::default().cases`) when `PROPTEST_CASES` set it, else the test's
/// own `default`.
pub fn property_cases(configured: u32, default: u32) -> u32 {
    if configured == PROPTEST_DEFAULT {
        default
    } else {
        configured
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_wins_over_the_tests_own_count() {
        assert_eq!(property_cases(PROPTEST_DEFAULT, 64), 64);
        assert_eq!(property_cases(10_000, 64), 10_000);
        assert_eq!(property_cases(1, 512), 1);
    }
}
