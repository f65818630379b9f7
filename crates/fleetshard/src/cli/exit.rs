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

    /// The process exit code.
    pub fn code(self) -> ExitCode {
        ExitCode::from(self as u8)
    }
}

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
