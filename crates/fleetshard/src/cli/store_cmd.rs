//! `fleetshard store check|repair`: the fleet's records that no replica can read, and
//! rewriting what can be rebuilt.
//!
//! Replicas recover from every unreadable record by themselves (`docs/reliability.md`,
//! "Corrupt records"); these commands make the problem visible to an operator and end it
//! at once where that is safe:
//!
//! - a shard or distributor record is rewritten, with compare-and-swap on its version, as
//!   a readable lease of an unknown holder (`fleetshard-repair`), not released: it expires
//!   one lease duration later like any abandoned lease. Never "released" or deleted: a
//!   holder whose record was overwritten moments ago may still be acting until its own
//!   deadline, and a free record would be claimed at once;
//! - a presence or inventory record, or a key under `shards/` that is not a shard, is
//!   deleted (its replica writes it again);
//! - the desired shard count is rewritten with the committed assignment's count (deleted
//!   when that is unreadable too);
//! - the assignment is deleted: the distributor commits a new one, from scratch, with a
//!   generation above every generation a holder acknowledged (a live distributor
//!   normally rewrites it from its last good generation before this command runs).
//!
//! `--dry-run` prints the same diff and writes nothing.

use anyhow::{Context as _, bail};
use fleetshard_coord::fenced::{
    DesiredShards, DistributorRecord, FencedSnapshot, RecordKey, ShardRecord, encode,
};
use fleetshard_coord::store::{Listing, Precondition, StoreError};
use fleetshard_replica::store::OpenMode;

use super::print_stdout;
use super::status::Output;
use super::store::StoreArgs;

/// The holder named in a lease record `repair` rewrote.
pub const REPAIR_HOLDER: &str = "fleetshard-repair";

/// `fleetshard store` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum StoreCommand {
    /// Lists the fleet's records that cannot be read (with their keys and reasons) and
    /// inconsistencies; exits with status 1 if there are any.
    #[command(after_help = "Example:\n  fleetshard store check --store sqlite://fleetshard.db")]
    Check(CheckArgs),
    /// Rewrites the unreadable records that can be rebuilt (compare-and-swap on the
    /// version read: a record changed meanwhile is left alone); `--dry-run` shows the diff.
    #[command(
        after_help = "Example:\n  fleetshard store repair --dry-run --store sqlite://fleetshard.db"
    )]
    Repair(RepairArgs),
}

/// `fleetshard store check` options.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The store.
    #[command(flatten)]
    pub store: StoreArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Output::Table, env = "FLEETSHARD_OUTPUT")]
    pub output: Output,
}

/// `fleetshard store repair` options.
#[derive(Debug, clap::Args)]
pub struct RepairArgs {
    /// The store.
    #[command(flatten)]
    pub store: StoreArgs,
    /// Print what would be written, write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// Runs a `store` subcommand.
pub fn run(cmd: StoreCommand) -> anyhow::Result<()> {
    let runtime = super::runtime(super::Runtime::OneShot)?;
    match cmd {
        StoreCommand::Check(args) => runtime.block_on(check(&args)),
        StoreCommand::Repair(args) => runtime.block_on(repair(&args)),
    }
}

async fn read(args: &StoreArgs) -> anyhow::Result<(String, Listing, String)> {
    let store = args.open(OpenMode::ReadOnly)?;
    let root = args.root()?.to_owned();
    let listing = store
        .list(&root)
        .await
        .with_context(|| format!("reading {}", store.describe()))?;
    Ok((root, listing, store.describe()))
}

async fn check(args: &CheckArgs) -> anyhow::Result<()> {
    let (root, listing, describe) = read(&args.store).await?;
    let problems = findings(&root, &listing);
    let out = match args.output {
        Output::Json => {
            let report = CheckReport {
                store: describe,
                revision: listing.revision,
                ok: problems.is_empty(),
                problems: &problems,
            };
            format!("{}\n", serde_json::to_string_pretty(&report)?)
        }
        Output::Table => {
            let mut out = format!("store: {describe} (revision {})\n", listing.revision);
            for p in &problems {
                out.push_str(&format!("{p}\n"));
            }
            if problems.is_empty() {
                out.push_str("every record is readable\n");
            }
            out
        }
    };
    print_stdout(&out)?;
    if !problems.is_empty() {
        bail!(
            "{} problem(s); `fleetshard store repair --dry-run` shows what can be rebuilt",
            problems.len()
        );
    }
    Ok(())
}

/// `store check --output json`.
#[derive(Debug, serde::Serialize)]
struct CheckReport<'a> {
    store: String,
    /// The store revision read.
    revision: u64,
    /// No problem found (the exit status is 1 otherwise).
    ok: bool,
    problems: &'a [Finding],
}

/// One problem `store check` finds.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    /// `corrupt` (a record no replica can read) or `inconsistent` (records that contradict
    /// each other).
    pub kind: &'static str,
    /// The record's key.
    pub key: String,
    /// The version read (`None` for an inconsistency between records).
    pub version: Option<u64>,
    /// What is wrong.
    pub reason: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.version {
            Some(v) => write!(
                f,
                "{}: {} (version {v}): {}",
                self.kind, self.key, self.reason
            ),
            None => write!(f, "{}: {}", self.kind, self.reason),
        }
    }
}

/// One line per problem ([`findings`] as text).
#[cfg(test)]
pub fn problems(root: &str, listing: &Listing) -> Vec<String> {
    findings(root, listing)
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// The problems of `listing`: unreadable records (key, version, reason), and an assignment
/// whose generation is below one a holder acknowledged (generations went backwards).
pub fn findings(root: &str, listing: &Listing) -> Vec<Finding> {
    let snap = FencedSnapshot::decode(root, listing);
    let version = |key: &str| {
        listing
            .entries
            .iter()
            .find(|e| e.key == key)
            .map_or(0, |e| e.version)
    };
    let mut out: Vec<Finding> = snap
        .corrupt
        .iter()
        .map(|c| Finding {
            kind: "corrupt",
            key: c.key.clone(),
            version: Some(version(&c.key)),
            reason: c.reason.clone(),
        })
        .collect();
    if let Some((_, doc)) = &snap.assignment {
        for (n, (_, s)) in &snap.shards {
            if s.acked > doc.generation {
                out.push(Finding {
                    kind: "inconsistent",
                    key: fleetshard_coord::fenced::shard_key(root, *n),
                    version: None,
                    reason: format!(
                        "shard {n} acknowledged generation {} but the assignment is generation {}",
                        s.acked, doc.generation
                    ),
                });
            }
        }
    }
    out
}

/// What `repair` does to one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fix {
    /// The key.
    pub key: String,
    /// The version read (the compare-and-swap condition).
    pub version: u64,
    /// The value read.
    pub old: Vec<u8>,
    /// The value to write; `None`: delete.
    pub new: Option<Vec<u8>>,
    /// Why, for the diff.
    pub why: &'static str,
}

/// The fixes for the unreadable records of `listing`.
pub fn plan(root: &str, listing: &Listing) -> Vec<Fix> {
    let snap = FencedSnapshot::decode(root, listing);
    let mut fixes = Vec::new();
    for c in &snap.corrupt {
        let Some(e) = listing.entries.iter().find(|e| e.key == c.key) else {
            continue;
        };
        let (new, why) = match RecordKey::classify(root, &e.key) {
            RecordKey::Shard(_) => (
                Some(encode(&ShardRecord {
                    holder: REPAIR_HOLDER.into(),
                    incarnation: 0,
                    beat: 0,
                    // Nothing acknowledged: the handover barrier waits for it to expire,
                    // as for the holder it stands for, which may still be acting.
                    acked: 0,
                    released: false,
                    zone: None,
                    capacity: None,
                })),
                "a lease of an unknown holder: claimable once unchanged for the lease duration",
            ),
            RecordKey::Distributor => (
                Some(encode(&DistributorRecord {
                    holder: REPAIR_HOLDER.into(),
                    incarnation: 0,
                    beat: 0,
                    released: false,
                    shard: None,
                })),
                "a lease of an unknown holder: vacant once unchanged for the lease duration",
            ),
            RecordKey::Presence(_) => (None, "its replica writes it again if it is a spare"),
            RecordKey::Inventory(_) => (None, "its replica writes it again if it is running"),
            RecordKey::NotAShard => (None, "not a shard any replica reads"),
            RecordKey::DesiredShards => match &snap.assignment {
                Some((_, doc)) => (
                    Some(encode(&DesiredShards { shards: doc.shards })),
                    "the committed assignment's shard count",
                ),
                None => (None, "no readable count to rebuild it from"),
            },
            RecordKey::Assignment => (
                None,
                "the distributor commits a new generation above every acknowledged one",
            ),
            RecordKey::Other => continue,
        };
        fixes.push(Fix {
            key: e.key.clone(),
            version: e.version,
            old: e.value.clone(),
            new,
            why,
        });
    }
    fixes
}

/// A value as the diff shows it: text, at most 200 bytes.
fn shown(value: &[u8]) -> String {
    const MAX: usize = 200;
    let text = String::from_utf8_lossy(&value[..value.len().min(MAX)]).replace('\n', "\\n");
    if value.len() > MAX {
        format!("{text}… ({} bytes)", value.len())
    } else {
        text
    }
}

/// The diff of `fixes`, one block per key.
pub fn diff(fixes: &[Fix]) -> String {
    let mut out = String::new();
    for f in fixes {
        out.push_str(&format!("{} (version {}): {}\n", f.key, f.version, f.why));
        out.push_str(&format!("- {}\n", shown(&f.old)));
        match &f.new {
            Some(v) => out.push_str(&format!("+ {}\n", shown(v))),
            None => out.push_str("+ (deleted)\n"),
        }
    }
    out
}

async fn repair(args: &RepairArgs) -> anyhow::Result<()> {
    let store = args.store.open(OpenMode::Existing)?;
    let root = args.store.root()?.to_owned();
    let listing = store
        .list(&root)
        .await
        .with_context(|| format!("reading {}", store.describe()))?;
    let fixes = plan(&root, &listing);
    let mut out = diff(&fixes);
    if fixes.is_empty() {
        out.push_str("nothing to repair\n");
    } else if args.dry_run {
        out.push_str(&format!(
            "dry run: {} record(s) would change\n",
            fixes.len()
        ));
    } else {
        let mut skipped = 0;
        for f in &fixes {
            let pre = Precondition::Version(f.version);
            let result = match &f.new {
                Some(v) => store.put(&f.key, v.clone(), pre).await.map(|_| ()),
                None => store.delete(&f.key, pre).await,
            };
            match result {
                Ok(()) => {}
                Err(StoreError::Conflict { .. }) => {
                    skipped += 1;
                    out.push_str(&format!("{}: changed since read, left alone\n", f.key));
                }
                Err(e) => return Err(e).with_context(|| format!("repairing {}", f.key)),
            }
        }
        out.push_str(&format!("repaired {} record(s)\n", fixes.len() - skipped));
    }
    print_stdout(&out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleetshard_coord::store::Entry;

    fn entry(key: &str, value: &[u8], version: u64) -> Entry {
        Entry {
            key: key.into(),
            value: value.to_vec(),
            version,
        }
    }

    #[test]
    fn every_kind_of_corrupt_record_has_a_fix() {
        let listing = Listing {
            revision: 20,
            entries: vec![
                entry(
                    "f/assignment",
                    br#"{"generation":3,"shards":2,"clusters":{}}"#,
                    1,
                ),
                entry(
                    "f/shards/0",
                    br#"{"holder":"a","incarnation":1,"beat":1,"acked":3}"#,
                    2,
                ),
                entry("f/shards/1", b"garbage", 3),
                entry("f/shards/x", b"{}", 4),
                entry("f/distributor", br#"{"holder":"a","epoch":1}"#, 5),
                entry("f/replicas/b", b"[", 6),
                entry("f/desired-shards", br#"{"shards":0}"#, 7),
            ],
        };
        let problems = problems("f/", &listing);
        assert_eq!(problems.len(), 5, "{problems:?}");
        assert!(problems[0].starts_with("corrupt: f/shards/1 (version 3): "));
        let fixes = plan("f/", &listing);
        let keys: Vec<(&str, bool)> = fixes
            .iter()
            .map(|f| (f.key.as_str(), f.new.is_some()))
            .collect();
        assert_eq!(
            keys,
            [
                ("f/shards/1", true),
                ("f/shards/x", false),
                ("f/distributor", true),
                ("f/replicas/b", false),
                ("f/desired-shards", true),
            ]
        );
        let shard: ShardRecord = serde_json::from_slice(fixes[0].new.as_ref().unwrap()).unwrap();
        assert_eq!(
            (shard.holder.as_str(), shard.acked, shard.released),
            (REPAIR_HOLDER, 0, false)
        );
        let text = diff(&fixes);
        assert!(
            text.contains("f/shards/1 (version 3): a lease of an unknown holder"),
            "{text}"
        );
        assert!(
            text.contains("- garbage\n+ {\"holder\":\"fleetshard-repair\""),
            "{text}"
        );
        assert!(text.contains("f/desired-shards (version 7)") && text.contains("+ {\"shards\":2}"));
    }

    #[test]
    fn a_corrupt_assignment_is_deleted_and_a_backwards_generation_reported() {
        let listing = Listing {
            revision: 3,
            entries: vec![
                entry("f/assignment", &[b'x'; 500], 1),
                entry(
                    "f/shards/0",
                    br#"{"holder":"a","incarnation":1,"beat":1,"acked":3}"#,
                    2,
                ),
            ],
        };
        let fixes = plan("f/", &listing);
        assert_eq!(fixes.len(), 1);
        assert_eq!(fixes[0].new, None);
        assert!(diff(&fixes).contains("… (500 bytes)"));
        let backwards = Listing {
            revision: 3,
            entries: vec![
                entry(
                    "f/assignment",
                    br#"{"generation":2,"shards":1,"clusters":{}}"#,
                    1,
                ),
                listing.entries[1].clone(),
            ],
        };
        let p = problems("f/", &backwards);
        assert_eq!(p.len(), 1);
        assert!(p[0].contains("shard 0 acknowledged generation 3"), "{p:?}");
    }
}
