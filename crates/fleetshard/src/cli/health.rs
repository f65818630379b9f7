//! `fleetshard health check`: the health of objects in files, assessed as the reconciler
//! assesses live objects (`fleetshard_health::HealthChecks`): the built-in checks, or the
//! Lua scripts of a directory in Argo CD's `resource_customizations` layout, found by the
//! object's group and kind. For people debugging their own health scripts.
//!
//! A contract used by automated checks: the command, its flags and its JSON output stay
//! as they are. `--output json` prints one array, one `{"file", "status", "message"}` per
//! input file in the order given; `status` is `null` when no check applies. A file that
//! cannot be read, or does not hold exactly one object (YAML or JSON), fails the command
//! with an error naming it, before anything is printed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, bail};
use clap::{Subcommand, ValueEnum};
use fleetshard_health::{Health, HealthChecks, LuaLimits, ScriptDir};
use serde::Serialize;
use serde_json::Value;

/// `fleetshard health` subcommands.
#[derive(Debug, Subcommand)]
pub enum HealthCommand {
    /// Assess the health of each object file (YAML or JSON) with the built-in checks or the
    /// Lua scripts of a customizations directory.
    Check(CheckArgs),
}

/// Output of `health check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputArg {
    /// One line per file: `FILE: STATUS: MESSAGE`.
    Text,
    /// A JSON array of `{"file", "status", "message"}`, in input order.
    Json,
}

/// `fleetshard health check` options.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
    fleetshard health check deployment.yaml\n  \
    fleetshard health check --customizations argo-cd/resource_customizations certificate.yaml\n  \
    fleetshard health check --output json *.yaml")]
pub struct CheckArgs {
    /// A directory in Argo CD's resource_customizations layout
    /// (`<group>/<kind>/health.lua`, `_` for a wildcard segment): its scripts come before
    /// the built-in checks.
    #[arg(long, value_name = "DIR", env = "FLEETSHARD_RESOURCE_CUSTOMIZATIONS")]
    pub customizations: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputArg::Text)]
    pub output: OutputArg,
    /// Object files (YAML or JSON), one object each.
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
}

/// One line of the JSON output.
#[derive(Debug, Serialize)]
struct Assessed {
    file: String,
    status: Option<String>,
    message: String,
}

/// Runs `fleetshard health`.
pub fn run(cmd: HealthCommand) -> anyhow::Result<()> {
    let HealthCommand::Check(args) = cmd;
    let mut checks = HealthChecks::builtin();
    if let Some(dir) = &args.customizations {
        let scripts = ScriptDir::load(dir, LuaLimits::default())
            .with_context(|| format!("--customizations {}", dir.display()))?;
        checks = checks.with_directory(Arc::new(scripts));
    }
    let objects = args
        .files
        .iter()
        .map(|f| read_object(f).map(|o| (f, o)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let assessed: Vec<Assessed> = objects
        .iter()
        .map(|(file, obj)| {
            let health: Health = checks.assess(Some(obj));
            Assessed {
                file: file.display().to_string(),
                status: health.status().map(|s| s.to_string()),
                message: health.message,
            }
        })
        .collect();
    match args.output {
        OutputArg::Json => println!("{}", serde_json::to_string_pretty(&assessed)?),
        OutputArg::Text => {
            for a in &assessed {
                let status = a.status.as_deref().unwrap_or("(no health)");
                if a.message.is_empty() {
                    println!("{}: {status}", a.file);
                } else {
                    println!("{}: {status}: {}", a.file, a.message);
                }
            }
        }
    }
    Ok(())
}

/// The one object `path` holds (JSON, or YAML with one document).
fn read_object(path: &Path) -> anyhow::Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let value: Value = if text.trim_start().starts_with('{') {
        serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?
    } else {
        let options = fleetshard_manifest::yaml_options(text.len());
        let docs: Vec<Value> = serde_saphyr::from_str_multiple_with_options(&text, options)
            .with_context(|| format!("{}: not YAML", path.display()))?;
        let mut docs: Vec<Value> = docs.into_iter().filter(|d| !d.is_null()).collect();
        if docs.len() != 1 {
            bail!(
                "{}: {} documents; give one object per file",
                path.display(),
                docs.len()
            );
        }
        docs.remove(0)
    };
    if !value.is_object() || value.get("kind").and_then(Value::as_str).is_none() {
        bail!(
            "{}: not a Kubernetes object (a map with apiVersion and kind)",
            path.display()
        );
    }
    Ok(value)
}
