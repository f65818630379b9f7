//! What the inventory tests share.

use std::time::Duration;

use fleetshard_controller::inventory::InventorySnapshot;
use tokio::sync::watch;

/// Waits up to 30 s (virtual under paused time) for a snapshot satisfying `pred`; the
/// current one counts.
pub async fn wait_for(
    rx: &mut watch::Receiver<InventorySnapshot>,
    what: &str,
    pred: impl Fn(&InventorySnapshot) -> bool,
) -> InventorySnapshot {
    let waited = tokio::time::timeout(Duration::from_secs(30), rx.wait_for(|s| pred(s)))
        .await
        .map(|snap| snap.expect("inventory alive").clone());
    waited.unwrap_or_else(|_| panic!("timed out waiting for {what}: {:#?}", *rx.borrow()))
}
