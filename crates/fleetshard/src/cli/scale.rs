//! `fleetshard scale N`: stores the desired shard count. Replicas started with
//! `--shards stored[:N]` follow it: the distributor commits a generation with the new
//! count, replicas holding shards beyond it hand their clusters over and become spares,
//! spares claim new shards.

use anyhow::Context as _;
use fleetshard_coord::fenced::{DesiredShards, desired_shards_key, encode};
use fleetshard_coord::store::{Precondition, Store};

use super::shards::check_count;
use super::store::StoreArgs;
use fleetshard_replica::store::OpenMode;

/// `fleetshard scale` options.
#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  fleetshard scale 6 --store sqlite://fleetshard.db")]
pub struct ScaleArgs {
    /// The shard count wanted.
    #[arg(value_name = "N", value_parser = check_count)]
    pub shards: u32,
    /// The store.
    #[command(flatten)]
    pub store: StoreArgs,
}

/// Writes the desired count (last writer wins: it is an operator's instruction).
pub fn run(args: ScaleArgs) -> anyhow::Result<()> {
    let root = args.store.root()?.to_owned();
    let store = args.store.open(OpenMode::Existing)?;
    let runtime = super::runtime(super::Runtime::OneShot)?;
    let (key, version) = runtime.block_on(write_desired(store.as_ref(), &root, args.shards))?;
    super::print_stdout(&format!(
        "desired shards: {} (stored at {key}, version {version}); replicas started with --shards stored follow it\n",
        args.shards
    ))
}

/// Stores `shards` as the desired shard count of the fleet at `root` (last writer wins);
/// returns the key and its new version.
pub async fn write_desired(
    store: &dyn Store,
    root: &str,
    shards: u32,
) -> anyhow::Result<(String, u64)> {
    let key = desired_shards_key(root);
    let value = encode(&DesiredShards { shards });
    let version = store
        .put(&key, value, Precondition::Any)
        .await
        .with_context(|| format!("writing {key} to {}", store.describe()))?;
    Ok((key, version))
}
