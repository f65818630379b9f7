//! `fleetshard`: one binary, many subcommands (see `fleetshard --help`).
//!
//! `main` only parses the command line, sets up logging and maps errors to an exit status (`cli/exit.rs`);
//! each subcommand lives in its own module under `cli`.

mod cli;

use std::process::ExitCode;

use cli::exit::Exit;

/// jemalloc, not glibc's malloc: a `gitops` replica frees much of what its cold start's
/// syncs allocated, and glibc kept it (about twice the live heap, `docs/performance.md`,
/// "A `gitops` replica at its full-size share"); jemalloc returns freed pages to the
/// system 100 ms after they are freed (its options are compiled in from
/// `.cargo/config.toml`). The `system-allocator` feature keeps the system's, for heap
/// profilers that hook malloc.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    // The render sandbox's launcher and the Jsonnet child are this executable, run with
    // a first argument of their own, before anything else (a launcher must still be
    // single-threaded).
    if let Some(code) = fleetshard_sandbox::run_if_invoked() {
        return code;
    }
    if let Some(code) = fleetshard_gitops::source::run_jsonnet_child_if_invoked() {
        return code;
    }
    let (cli, matches) = cli::parse();
    cli::logging::init(&cli.global);
    match cli::run(cli, &matches) {
        Ok(()) => Exit::Success.code(),
        Err(e) => {
            eprintln!("error: {}", one_line(&e));
            Exit::of_error(&e).code()
        }
    }
}

/// The error and its causes on one line, `context: error: cause`, skipping a cause whose
/// text the line already holds (errors that print their source themselves, as
/// `LoadError::Read` does, would otherwise say it twice).
fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}
