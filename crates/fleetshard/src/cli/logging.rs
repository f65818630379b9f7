//! Logs on stderr through `tracing`: human-readable by default, JSON lines on request.
//! Stdout is kept for the command's output, so `plan --output json | jq` always works.

use std::io::IsTerminal as _;

use tracing_subscriber::EnvFilter;

use super::{GlobalArgs, LogFormat};

/// Installs the global subscriber. `--log-level` takes an `EnvFilter` directive
/// (`warn`, `info`, `fleetshard=debug`, ...); a bad directive falls back to `warn` with
/// a note rather than failing the command.
pub fn init(args: &GlobalArgs) {
    let (filter, bad) = match EnvFilter::try_new(&args.log_level) {
        Ok(f) => (f, None),
        Err(e) => (EnvFilter::new("warn"), Some(e)),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour only for a person at a terminal, never into files or CI logs.
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false);
    // A second init (only possible in tests) keeps the first subscriber.
    let _ = match args.log_format {
        LogFormat::Human => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    if let Some(e) = bad {
        tracing::warn!(directive = %args.log_level, error = %e, "invalid --log-level; using warn");
    }
}
