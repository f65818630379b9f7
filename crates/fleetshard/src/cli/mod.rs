//! The command line: global options, the subcommand tree, and dispatch.
//!
//! Layout: `fleetshard <command> [<subcommand>] [options]`. Each command is a module with
//! an `Args` struct (clap derive) and a `run` function; a new command is a variant of
//! [`Command`] and a module, nothing else. Every option
//! also reads an environment variable: `FLEETSHARD_*`, or Argo CD's own variable where it
//! means the same thing (`ARGOCD_CONTROLLER_REPLICAS`, ...).

pub mod apps;
pub mod exit;
pub mod fleet;
pub mod health;
pub mod input;
pub mod limits;
pub mod logging;
pub mod pin;
pub mod plan;
pub mod progress;
pub mod protocol;
pub mod redis;
pub mod repo_server;
pub mod run;
pub mod scale;
pub mod shards;
pub mod shell;
pub mod simulate;
pub mod status;
pub mod store;
pub mod store_cmd;
pub mod timing;
pub mod up;

use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

/// What `--version` says: the version, the git commit built (`unknown` outside a git
/// checkout) and the cargo features enabled (`build.rs`).
pub const VERSION: &str = env!("FLEETSHARD_VERSION_TEXT");

/// Spreads a GitOps application controller's clusters over many replicas.
#[derive(Debug, Parser)]
#[command(
    name = "fleetshard",
    version = VERSION,
    propagate_version = true,
    after_help = exit::HELP
)]
pub struct Cli {
    /// Options every command takes.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command takes.
#[derive(Debug, clap::Args)]
pub struct GlobalArgs {
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Human, env = "FLEETSHARD_LOG_FORMAT", help_heading = "Global options")]
    pub log_format: LogFormat,
    /// Log filter: a level (error, warn, info, debug, trace) or tracing directives such
    /// as `fleetshard=debug`.
    #[arg(
        long,
        global = true,
        default_value = "warn",
        env = "FLEETSHARD_LOG",
        help_heading = "Global options"
    )]
    pub log_level: String,
}

/// How logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One readable line per event.
    Human,
    /// One JSON object per line.
    Json,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// What-if distribution of a fleet over controller replicas: per-shard table,
    /// balance, movement, zones; compares algorithms and replica counts; JSON and SVG.
    Plan(plan::PlanArgs),
    /// Work with fleet files.
    #[command(subcommand)]
    Fleet(fleet::FleetCommand),
    /// One replica: claims a shard through the store, owns its clusters, serves
    /// `/healthz`, `/readyz` and `/metrics`; SIGTERM hands the shard over.
    Run(Box<run::RunArgs>),
    /// What the store says: shard holders, distributor, generation, each cluster's owner,
    /// unowned clusters.
    Status(status::StatusArgs),
    /// Applications' statuses recorded in the store by replicas in local mode: sync,
    /// revision, health, last operation, conditions.
    Apps(apps::AppsArgs),
    /// Sets the desired shard count in the store; replicas run with `--shards stored`
    /// follow it without a restart.
    Scale(scale::ScaleArgs),
    /// Serves simulated Kubernetes clusters (in-memory API servers on 127.0.0.1) for demos
    /// and black-box checks, and writes their Argo CD cluster Secrets for `run --fleet-dir`.
    Simulate(simulate::SimulateArgs),
    /// Checks the fleet's records for ones no replica can read (`check`), and rewrites
    /// what can be rebuilt (`repair`, with `--dry-run`).
    #[command(subcommand)]
    Store(store_cmd::StoreCommand),
    /// Balanced shard pins for Argo CD's own controller: writes each cluster Secret's
    /// `shard` (a diff first with --dry-run; --watch keeps it balanced).
    Pin(Box<pin::PinArgs>),
    /// Everything on this machine: simulated clusters, a Git repository of demo apps,
    /// replicas on an SQLite store, and the live dashboard with controls on 127.0.0.1.
    Up(up::UpArgs),
    /// Health of objects in files, as the reconciler assesses it: the built-in checks or
    /// the Lua scripts of an Argo CD resource_customizations directory (`check`).
    #[command(subcommand)]
    Health(health::HealthCommand),
    /// Prints a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(shell::CompletionsArgs),
    /// Prints the man page (roff), fleetshard's or a command's.
    Man(shell::ManArgs),
}

/// Parses the process arguments. The raw matches are returned too: `plan` needs to know
/// whether a value came from an environment variable (Argo CD's fallback rules differ).
pub fn parse() -> (Cli, ArgMatches) {
    let parsed = Cli::command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m).map(|cli| (cli, m)));
    match parsed {
        Ok(parsed) => parsed,
        Err(e) => {
            let _ = e.print();
            std::process::exit(i32::from(exit::Exit::of_clap(&e) as u8))
        }
    }
}

/// Runs the chosen command.
pub fn run(cli: Cli, matches: &ArgMatches) -> anyhow::Result<()> {
    match cli.command {
        Command::Plan(args) => {
            let sub = matches.subcommand_matches("plan").unwrap_or(matches);
            plan::run(args, sub)
        }
        Command::Fleet(cmd) => fleet::run(cmd),
        Command::Run(args) => run::run(*args),
        Command::Status(args) => status::run(args),
        Command::Apps(args) => apps::run(args),
        Command::Scale(args) => scale::run(args),
        Command::Simulate(args) => simulate::run(args),
        Command::Store(cmd) => store_cmd::run(cmd),
        Command::Pin(args) => pin::run(*args),
        Command::Up(args) => up::run(args),
        Command::Health(cmd) => health::run(cmd),
        Command::Completions(args) => shell::completions(&args),
        Command::Man(args) => shell::man(&args),
    }
}

/// Which async runtime a command needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    /// One thread: a command that reads or writes the store and exits.
    OneShot,
    /// A replica (runner, HTTP server, controller workers): one worker per CPU the process
    /// may use ([`replica_worker_threads`]).
    Replica,
}

/// The environment variable that sets a replica's worker threads.
pub const WORKER_THREADS_ENV: &str = "FLEETSHARD_WORKER_THREADS";

/// Worker threads of a replica's runtime: `configured` ([`WORKER_THREADS_ENV`]) when set,
/// else the CPUs this process may use (`available`: std's `available_parallelism`, which
/// honours the affinity mask and the cgroup CPU quota a pod's limit sets), and at least 2
/// either way unless configured (the coordination runner keeps a thread beside a busy
/// reconciler).
pub fn replica_worker_threads(
    configured: Option<&str>,
    available: Option<usize>,
) -> anyhow::Result<usize> {
    match configured.map(str::trim).filter(|v| !v.is_empty()) {
        Some(v) => match v.parse::<usize>() {
            Ok(n) if n >= 1 => Ok(n),
            _ => anyhow::bail!(
                "{WORKER_THREADS_ENV}={v:?}: expected a whole number of threads, at least 1"
            ),
        },
        None => Ok(available.unwrap_or(2).max(2)),
    }
}

/// The CPUs this process may use: std's `available_parallelism`, which honours the
/// affinity mask and the cgroup CPU quota a pod's limit sets (`None`: unknown). The default
/// of a replica's worker threads ([`replica_worker_threads`]) and of its `--capacity`.
pub fn available_cpus() -> Option<usize> {
    std::thread::available_parallelism().ok().map(usize::from)
}

/// Builds the tokio runtime a command runs on; the one place that does.
pub fn runtime(kind: Runtime) -> anyhow::Result<tokio::runtime::Runtime> {
    use anyhow::Context as _;
    let mut builder = match kind {
        Runtime::OneShot => tokio::runtime::Builder::new_current_thread(),
        Runtime::Replica => {
            let threads = replica_worker_threads(
                std::env::var(WORKER_THREADS_ENV).ok().as_deref(),
                available_cpus(),
            )?;
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(threads);
            b
        }
    };
    builder
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Prints to stdout; a closed pipe (`| head`) ends quietly instead of panicking.
pub fn print_stdout(text: &str) -> anyhow::Result<()> {
    write_stdout(text).map(|_| ())
}

/// [`print_stdout`], telling whether stdout is still open (false: the reader closed the
/// pipe; a command that prints repeatedly stops).
pub fn write_stdout(text: &str) -> anyhow::Result<bool> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(anyhow::Error::new(e).context("writing to stdout")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn a_replicas_capacity_is_its_cpus_unless_told() {
        assert_eq!(run::capacity(None, Some(8)), 8);
        assert_eq!(run::capacity(None, Some(1)), 1);
        assert_eq!(run::capacity(None, None), 1);
        assert_eq!(run::capacity(None, Some(5000)), 1024);
        assert_eq!(run::capacity(Some(3), Some(8)), 3);
    }

    #[test]
    fn a_replica_uses_every_cpu_it_may_at_least_two_unless_told() {
        assert_eq!(replica_worker_threads(None, Some(8)).unwrap(), 8);
        assert_eq!(replica_worker_threads(None, Some(1)).unwrap(), 2);
        assert_eq!(replica_worker_threads(None, None).unwrap(), 2);
        assert_eq!(replica_worker_threads(Some(" 3 "), Some(8)).unwrap(), 3);
        assert_eq!(replica_worker_threads(Some("1"), Some(8)).unwrap(), 1);
        assert_eq!(replica_worker_threads(Some(""), Some(6)).unwrap(), 6);
        for bad in ["0", "-1", "two", "1.5"] {
            let e = replica_worker_threads(Some(bad), Some(8))
                .unwrap_err()
                .to_string();
            assert!(e.contains(WORKER_THREADS_ENV) && e.contains(bad), "{e}");
        }
    }
}
