//! What the reconciler needs to know about an app, supplied by its caller: the app
//! (source, destination, sync policy) and how to reach its destination cluster; and the
//! wall clock for status timestamps.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use fleetshard_controller::AppKey;
use fleetshard_core::App;

use crate::live::ClusterAccess;

/// An app and its resolved destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppTarget {
    /// The app.
    pub app: App,
    /// Its destination cluster.
    pub cluster: ClusterAccess,
}

/// The app inventory as the reconciler reads it: `None` for an app that does not exist
/// (deleted) or whose destination resolves to no cluster. Called once per refresh and
/// per operation, so it should answer from memory.
pub trait Inventory: Send + Sync + 'static {
    /// The app `key`, if it exists and resolves.
    fn target(&self, key: &AppKey) -> Option<AppTarget>;
}

impl<F: Fn(&AppKey) -> Option<AppTarget> + Send + Sync + 'static> Inventory for F {
    fn target(&self, key: &AppKey) -> Option<AppTarget> {
        self(key)
    }
}

/// An inventory kept by hand (tests, benchmarks, a caller that pushes changes).
#[derive(Debug, Default)]
pub struct StaticInventory {
    targets: Mutex<HashMap<AppKey, AppTarget>>,
}

impl StaticInventory {
    /// Adds or replaces an app.
    pub fn insert(&self, target: AppTarget) {
        let key = AppKey::of(&target.app);
        self.lock().insert(key, target);
    }

    /// Removes an app.
    pub fn remove(&self, key: &AppKey) {
        self.lock().remove(key);
    }

    /// Changes an app in place; false if it is not there.
    pub fn update(&self, key: &AppKey, f: impl FnOnce(&mut AppTarget)) -> bool {
        match self.lock().get_mut(key) {
            Some(t) => {
                f(t);
                true
            }
            None => false,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<AppKey, AppTarget>> {
        self.targets.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Inventory for std::sync::Arc<StaticInventory> {
    fn target(&self, key: &AppKey) -> Option<AppTarget> {
        self.lock().get(key).cloned()
    }
}

/// The wall clock, for status timestamps only (no decision reads it). The binary gives a
/// real one; tests a fixed one.
pub trait Clock: Send + Sync {
    /// Now, as RFC 3339 UTC (`2026-11-21T10:00:00Z`).
    fn now_rfc3339(&self) -> String;
}

/// A clock that always says the same time.
#[derive(Debug, Clone)]
pub struct FixedClock(pub String);

impl Clock for FixedClock {
    fn now_rfc3339(&self) -> String {
        self.0.clone()
    }
}
