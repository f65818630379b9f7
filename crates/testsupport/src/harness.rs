//! The loop of a test binary with its own `main` (`harness = false`): one that must be
//! the launcher or child of what it runs, so libtest's threads cannot start first.

use std::panic::AssertUnwindSafe;
use std::process::ExitCode;

/// Runs each named case whose name contains one of the command line's non-flag
/// arguments (all of them when there is none), printing `test NAME ... ok|FAILED` as
/// libtest does; a case fails by panicking. Failure when any case failed.
pub fn run_cases(cases: &[(&str, &dyn Fn())]) -> ExitCode {
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let mut failed = 0;
    for (name, case) in cases {
        if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(case));
        println!(
            "test {name} ... {}",
            if outcome.is_ok() { "ok" } else { "FAILED" }
        );
        failed += usize::from(outcome.is_err());
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
