//! `fleetshard completions SHELL` and `fleetshard man [COMMAND]`: shell completion
//! scripts and roff man pages, generated from the command line's definition ([`Cli`]),
//! so they cannot drift from it. Both print to stdout.

use anyhow::Context as _;
use clap::CommandFactory as _;

use super::{Cli, print_stdout};

/// `fleetshard completions` options.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Install, for example:\n  \
fleetshard completions bash > ~/.local/share/bash-completion/completions/fleetshard\n  \
fleetshard completions zsh > \"${fpath[1]}/_fleetshard\"\n  \
fleetshard completions fish > ~/.config/fish/completions/fleetshard.fish")]
pub struct CompletionsArgs {
    /// The shell to write a completion script for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `fleetshard man` options.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Read it with `fleetshard man | man -l -`; install with\n  \
fleetshard man > /usr/local/share/man/man1/fleetshard.1\n  \
fleetshard man status > /usr/local/share/man/man1/fleetshard-status.1")]
pub struct ManArgs {
    /// A command's own page (`status`, `fleet generate`, ...); default: fleetshard's.
    #[arg(value_name = "COMMAND", num_args = 0..)]
    pub command: Vec<String>,
}

/// Prints the completion script.
pub fn completions(args: &CompletionsArgs) -> anyhow::Result<()> {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "fleetshard", &mut out);
    print_stdout(&String::from_utf8(out).context("completion script")?)
}

/// Prints the man page.
pub fn man(args: &ManArgs) -> anyhow::Result<()> {
    let mut cmd = Cli::command();
    cmd.build();
    let mut name = "fleetshard".to_owned();
    for word in &args.command {
        let known: Vec<String> = cmd
            .get_subcommands()
            .map(|c| c.get_name().to_owned())
            .collect();
        cmd = cmd.find_subcommand(word).cloned().with_context(|| {
            format!(
                "`{name}` has no command {word:?}; it has: {}",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            )
        })?;
        name = format!("{name}-{word}");
    }
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd)
        .title(name)
        .render(&mut out)
        .context("rendering the man page")?;
    print_stdout(&String::from_utf8(out).context("man page")?)
}
