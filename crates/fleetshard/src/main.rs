//! `fleetshard`: one binary, many subcommands (see `fleetshard --help`).
//!
//! `main` only parses the command line, sets up logging and maps errors to an exit status (`cli/exit.rs`);
//! each subcommand lives in its own module under `cli`.

mod cli;

use std::process::ExitCode;

use cli::exit::Exit;

fn main() -> ExitCode {
    let (cli, matches) = cli::parse();
    cli::logging::init(&cli.global);
    match cli::run(cli, &matches) {
        Ok(()) => Exit::Success.code(),
        Err(e) => {
            eprintln!("error: {}", one_line(&e));
            Exit::Failure.code()
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
