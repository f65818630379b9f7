//! The process's exit statuses, the one place they are decided (`main` maps a command's
//! result through [`Exit`]; clap's own errors go through [`Exit::of_clap`]). They are
//! listed in `fleetshard --help` ([`HELP`]) and `docs/cli.md`.

use std::process::ExitCode;

/// How `fleetshard` exits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The command did what it was asked (`--help` and `--version` too).
    Success = 0,
    /// The command failed, or found what it checks for (`store check`: records no replica
    /// can read); the reason is one `error:` line on stderr.
    Failure = 1,
    /// The command line was not understood (unknown flag, bad value, missing argument);
    /// nothing was done.
    Usage = 2,
}

impl Exit {
    /// The exit of a command-line error from clap: `--help`/`--version` are successes.
    pub fn of_clap(e: &clap::Error) -> Self {
        if e.use_stderr() {
            Exit::Usage
        } else {
            Exit::Success
        }
    }

    /// The exit of a command's error: [`Exit::Usage`] when a value given on the command
    /// line (or in the environment variable standing for a flag) was refused after parsing
    /// ([`BadValue`] anywhere in the chain), else [`Exit::Failure`].
    pub fn of_error(e: &anyhow::Error) -> Self {
        if e.chain().any(|c| c.is::<BadValue>()) {
            Exit::Usage
        } else {
            Exit::Failure
        }
    }

    /// The process exit code.
    pub fn code(self) -> ExitCode {
        ExitCode::from(self as u8)
    }
}

/// A flag's value refused by a command after clap parsed the line (a value whose meaning
/// depends on other input, or that can come from an environment variable): exits
/// [`Exit::Usage`], as clap's own refusals do. The text names the flag or variable.
#[derive(Debug)]
pub struct BadValue(pub String);

impl std::fmt::Display for BadValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadValue {}

/// The exit statuses as `--help` lists them (keep in step with [`Exit`]).
pub const HELP: &str = "\
Exit status:
  0  success (also --help and --version)
  1  the command failed, or `store check` found unreadable records; one `error:` line on stderr
  2  the command line was not understood; nothing was done
  Ctrl-C stops `run`, `simulate` and `status --watch` with status 0 (`run` and `simulate`: SIGTERM too).";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_value_anywhere_in_the_chain_is_a_usage_error() {
        let e = anyhow::Error::new(BadValue("--replicas: abc".into())).context("planning");
        assert_eq!(Exit::of_error(&e), Exit::Usage);
        assert_eq!(
            Exit::of_error(&anyhow::anyhow!("no such file")),
            Exit::Failure
        );
    }

    #[test]
    fn the_help_text_lists_every_status_with_its_number() {
        for (exit, number) in [(Exit::Success, 0), (Exit::Failure, 1), (Exit::Usage, 2)] {
            assert_eq!(exit as u8, number);
            assert!(
                HELP.contains(&format!("\n  {number}  ")),
                "{number} in {HELP}"
            );
        }
    }
}
