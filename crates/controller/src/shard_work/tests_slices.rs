//! A cluster owned in slices (`units.rs`): each app is queued, admitted and waited for
//! under its own slice only.

use std::time::Duration;

use fleetshard_core::placement::slices::slice_of_app;
use fleetshard_core::{App, Cluster};
use tokio::time::timeout;

use super::tests::{drain, queue};
use super::*;

const APPS: usize = 40;

/// c1 with 40 apps, c2 with one.
fn work() -> Arc<ShardWork> {
    let f = ShardWork::new(queue(), queue(), WorkMetrics::default());
    let clusters = [
        Cluster::new("c1", "https://one"),
        Cluster::new("c2", "https://two"),
    ];
    let mut apps: Vec<App> = (0..APPS)
        .map(|i| App::to_server("ns", &format!("a{i}"), "https://one"))
        .collect();
    apps.push(App::to_server("ns", "z", "https://two"));
    f.set_inventory(&clusters, &apps);
    f
}

/// The apps of c1 slice `n` of 2.
fn slice(n: u32) -> Vec<AppKey> {
    let mut v: Vec<AppKey> = (0..APPS)
        .map(|i| format!("a{i}"))
        .filter(|name| slice_of_app("ns", name, 2) == n)
        .map(|name| AppKey::new("ns", &name))
        .collect();
    v.sort();
    v
}

fn admitted(f: &Arc<ShardWork>, app: &AppKey) -> bool {
    matches!(f.admit(app), Admission::Admitted(_))
}

#[tokio::test(start_paused = true)]
async fn a_slice_queues_admits_and_owns_only_its_apps() {
    let f = work();
    let (zero, one) = (slice(0), slice(1));
    assert!(!zero.is_empty() && !one.is_empty());
    f.start_cluster("c1#slice-0-of-2");
    assert_eq!(drain(f.refresh_queue()).await, zero);
    assert!(zero.iter().all(|a| admitted(&f, a)));
    assert!(one.iter().all(|a| !admitted(&f, a)), "slice 1 is not ours");
    assert_eq!(f.unit_of(&zero[0]).as_deref(), Some("c1#slice-0-of-2"));
    assert_eq!(f.unit_of(&one[0]).as_deref(), Some("c1#slice-1-of-2"));
    assert_eq!(f.cluster_of(&one[0]).as_deref(), Some("c1"));
    assert_eq!(f.owned(), ["c1#slice-0-of-2"]);
    // The resync and a cluster's refresh queue slice 0's apps only.
    assert_eq!(f.resync(Duration::ZERO), zero.len());
    assert_eq!(drain(f.refresh_queue()).await, zero);
    f.refresh_clusters(["c1"]);
    assert_eq!(drain(f.refresh_queue()).await, zero);
    f.refresh_apps(one.iter().cloned());
    assert_eq!(drain(f.refresh_queue()).await, Vec::<AppKey>::new());
    // The other slice too: every app of c1; then slice 0 stopped: slice 1's stay ours.
    f.start_cluster("c1#slice-1-of-2");
    assert_eq!(drain(f.refresh_queue()).await, one);
    f.stop_cluster("c1#slice-0-of-2").await;
    assert!(zero.iter().all(|a| !admitted(&f, a)));
    assert!(one.iter().all(|a| admitted(&f, a)));
    f.stop_cluster("c1#slice-1-of-2").await;
    assert!(f.owned().is_empty());
    assert_eq!(f.unit_of(&one[0]).as_deref(), Some("c1"), "whole again");
}

#[tokio::test(start_paused = true)]
async fn a_slices_stop_waits_for_its_own_items_only() {
    let f = work();
    let (zero, one) = (slice(0), slice(1));
    f.start_cluster("c1#slice-0-of-2");
    f.start_cluster("c1#slice-1-of-2");
    let Admission::Admitted(held_zero) = f.admit(&zero[0]) else {
        panic!("not admitted")
    };
    assert_eq!(
        (held_zero.cluster(), held_zero.unit()),
        ("c1", "c1#slice-0-of-2")
    );
    let Admission::Admitted(held_one) = f.admit(&one[0]) else {
        panic!("not admitted")
    };
    assert_eq!(f.in_flight("c1#slice-0-of-2"), 1);
    // Slice 1's stop ends while slice 0's item is still in flight …
    let stop_one = timeout(Duration::from_secs(1), f.stop_cluster("c1#slice-1-of-2"));
    drop(held_one);
    stop_one
        .await
        .expect("slice 1's stop waits for nothing of slice 0");
    // … and slice 0's waits for its item.
    let stop_zero = f.stop_cluster("c1#slice-0-of-2");
    tokio::pin!(stop_zero);
    assert!(
        timeout(Duration::from_secs(5), &mut stop_zero)
            .await
            .is_err()
    );
    drop(held_zero);
    timeout(Duration::from_secs(1), stop_zero).await.unwrap();
}
