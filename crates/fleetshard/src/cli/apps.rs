//! `fleetshard apps`: the application statuses replicas in local mode recorded in the store
//! (`fleetshard_gitops::reconciler::StoreStatusSink`), one listing of the status prefix
//! beside the fleet's root. A record that does not decode is listed with what is wrong
//! (its key and field), never skipped and never a failure of the command.
//!
//! `reconciledAt` here is at most the sink's heartbeat (10 minutes) older than the last
//! refresh: unchanged refreshes are not rewritten until then.

use anyhow::Context as _;
use fleetshard_gitops::reconciler::{StoredStatusEntry, read_statuses, status_prefix};
use serde::Serialize;
use serde_json::Value;

use super::print_stdout;
use super::status::Output;
use super::store::StoreArgs;
use fleetshard_replica::store::OpenMode;

/// How long a message may be in the table before it is cut.
const MESSAGE_WIDTH: usize = 60;

/// `fleetshard apps` options.
#[derive(Debug, clap::Args)]
pub struct AppsArgs {
    /// The store.
    #[command(flatten)]
    pub store: StoreArgs,
    /// Output format: a table, or the stored records as they are (JSON).
    #[arg(long, value_enum, default_value_t = Output::Table, env = "FLEETSHARD_OUTPUT")]
    pub output: Output,
    /// Only apps with this sync status (records that cannot be read are always listed).
    #[arg(
        long,
        value_name = "STATUS",
        value_parser = ["Synced", "OutOfSync", "Unknown"],
        ignore_case = true,
        env = "FLEETSHARD_APPS_SYNC"
    )]
    pub sync: Option<String>,
    /// Only apps with this health (records that cannot be read are always listed).
    #[arg(
        long,
        value_name = "STATUS",
        value_parser = ["Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown"],
        ignore_case = true,
        env = "FLEETSHARD_APPS_HEALTH"
    )]
    pub health: Option<String>,
}

/// One app in the `--output json` document: its sync and health status and its
/// conditions at the top (a contract of automated checks), then the record as stored.
#[derive(Debug, Serialize)]
struct JsonApp {
    /// `namespace/name`.
    app: String,
    /// `Synced`, `OutOfSync` or `Unknown` (absent: no refresh recorded, or unreadable).
    #[serde(skip_serializing_if = "Option::is_none")]
    sync: Option<String>,
    /// The app's health (absent as `sync`).
    #[serde(skip_serializing_if = "Option::is_none")]
    health: Option<String>,
    /// The conditions of the last refresh (`InvalidSpecError`, `ComparisonError`,
    /// `SyncError`), each with `type` and `message`; empty when none.
    conditions: Vec<JsonCondition>,
    key: String,
    version: u64,
    /// The stored JSON as it is (absent when the bytes are not JSON).
    #[serde(skip_serializing_if = "Option::is_none")]
    record: Option<Value>,
    /// Why the record could not be read (absent when it could).
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// One condition: its `type` and `message`.
#[derive(Debug, Serialize)]
struct JsonCondition {
    #[serde(rename = "type")]
    kind: String,
    message: String,
}

/// The `--output json` document.
#[derive(Debug, Serialize)]
struct JsonReport {
    store: String,
    prefix: String,
    apps: Vec<JsonApp>,
}

/// Prints the apps' statuses.
pub fn run(args: AppsArgs) -> anyhow::Result<()> {
    let store = args.store.open(OpenMode::ReadOnly)?;
    let root = args.store.root()?.to_owned();
    let entries = super::runtime(super::Runtime::OneShot)?
        .block_on(read_statuses(store.as_ref(), &root))
        .with_context(|| format!("listing {} in {}", status_prefix(&root), store.describe()))?;
    let entries: Vec<StoredStatusEntry> =
        entries.into_iter().filter(|e| matches(&args, e)).collect();
    let text = match args.output {
        Output::Json => {
            let report = JsonReport {
                store: store.describe(),
                prefix: status_prefix(&root),
                apps: entries.into_iter().map(json_app).collect(),
            };
            format!("{}\n", serde_json::to_string_pretty(&report)?)
        }
        Output::Table => table(&store.describe(), &status_prefix(&root), &entries),
    };
    print_stdout(&text)
}

/// Whether the filters keep `e` (unreadable records are always kept).
fn matches(args: &AppsArgs, e: &StoredStatusEntry) -> bool {
    let Ok(s) = &e.status else { return true };
    let field = |want: &Option<String>, have: Option<&str>| {
        want.as_deref()
            .is_none_or(|w| have.is_some_and(|h| h.eq_ignore_ascii_case(w)))
    };
    let c = s.comparison.as_ref();
    field(&args.sync, c.map(|c| c.sync.status.as_str()))
        && field(&args.health, c.map(|c| c.health.status.as_str()))
}

fn json_app(e: StoredStatusEntry) -> JsonApp {
    let comparison = e.status.as_ref().ok().and_then(|s| s.comparison.as_ref());
    JsonApp {
        sync: comparison.map(|c| c.sync.status.clone()),
        health: comparison.map(|c| c.health.status.clone()),
        conditions: comparison
            .map(|c| {
                c.conditions
                    .iter()
                    .map(|k| JsonCondition {
                        kind: k.kind.clone(),
                        message: k.message.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        record: serde_json::from_slice(&e.raw).ok(),
        error: e.status.err().map(|err| err.to_string()),
        app: e.app,
        key: e.key,
        version: e.version,
    }
}

/// One table row's cells, the app's name first; an unreadable record says why.
fn row(e: &StoredStatusEntry) -> [String; 7] {
    let status = match &e.status {
        Ok(s) => s,
        Err(err) => {
            let mut cells = std::array::from_fn(|_| "?".to_owned());
            cells[0].clone_from(&e.app);
            cells[6] = format!("unreadable: {err}");
            return cells;
        }
    };
    let c = status.comparison.as_ref();
    let dash = || "-".to_owned();
    [
        e.app.clone(),
        c.map_or_else(dash, |c| c.sync.status.clone()),
        c.and_then(|c| c.sync.revision.as_deref())
            .map_or_else(dash, |r| r.chars().take(7).collect()),
        c.map_or_else(dash, |c| c.health.status.clone()),
        status
            .operation
            .as_ref()
            .map_or_else(dash, |o| o.phase.clone()),
        c.map_or_else(dash, |c| c.reconciled_at.clone()),
        c.and_then(|c| c.conditions.first())
            .map_or_else(dash, |k| cut(&k.message, MESSAGE_WIDTH)),
    ]
}

/// `text` on one line, at most `width` characters (an ellipsis marks a cut).
fn cut(text: &str, width: usize) -> String {
    let one_line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if one_line.chars().count() <= width {
        return one_line;
    }
    let mut s: String = one_line.chars().take(width.saturating_sub(1)).collect();
    s.push('…');
    s
}

fn table(store: &str, prefix: &str, entries: &[StoredStatusEntry]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(out, "store: {store}  statuses under {prefix}");
    let header = [
        "APP",
        "SYNC",
        "REVISION",
        "HEALTH",
        "OPERATION",
        "RECONCILED",
        "MESSAGE",
    ];
    let rows: Vec<[String; 7]> = entries.iter().map(row).collect();
    let mut widths = header.map(str::len);
    for cells in &rows {
        for (w, c) in widths.iter_mut().zip(cells) {
            *w = (*w).max(c.chars().count());
        }
    }
    // Padded columns two spaces apart; the last (the message) is not padded.
    let line = |out: &mut String, cells: [&str; 7]| {
        for (c, w) in cells.iter().zip(widths).take(6) {
            let pad = w - c.chars().count();
            let _ = write!(out, "{c}{}  ", " ".repeat(pad));
        }
        let _ = writeln!(out, "{}", cells[6]);
    };
    line(&mut out, header);
    for cells in &rows {
        line(&mut out, cells.each_ref().map(String::as_str));
    }
    let count = |want: &str| {
        entries
            .iter()
            .filter(|e| {
                e.status
                    .as_ref()
                    .ok()
                    .and_then(|s| s.comparison.as_ref())
                    .is_some_and(|c| c.sync.status == want)
            })
            .count()
    };
    let unreadable = entries.iter().filter(|e| e.status.is_err()).count();
    let _ = writeln!(
        out,
        "\n{} apps: {} Synced, {} OutOfSync, {} Unknown; {unreadable} unreadable",
        entries.len(),
        count("Synced"),
        count("OutOfSync"),
        count("Unknown"),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_and_multi_line_messages_are_cut_to_one_line() {
        assert_eq!(cut("short", 10), "short");
        assert_eq!(cut("a\nb", 10), "a b");
        let cut_text = cut(&"x".repeat(100), 60);
        assert_eq!(cut_text.chars().count(), 60);
        assert!(cut_text.ends_with('…'));
    }
}
