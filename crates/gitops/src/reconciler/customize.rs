//! argocd-cm's resource customizations as the reconciler uses them: the health checks
//! (argocd-cm's scripts, then the `--resource-customizations` directory, then the built-in
//! checks), each application's [`Normalizer`] (its `ignoreDifferences` with argocd-cm's),
//! and the live caches' [`UpdateFilter`] (`ignoreResourceUpdates`).
//!
//! Built again only when argocd-cm's customization keys change (they travel with every
//! [`AppTarget`](super::AppTarget), so a change reaches the next refresh without a
//! restart); one normalizer per distinct `ignoreDifferences` list, shared by the apps that
//! have it. argocd-cm that Argo CD would refuse is a comparison error on every app,
//! naming the key, as in Argo CD.
//!
//! Health as Argo CD aggregates it (v3.2): a resource annotated
//! `argocd.argoproj.io/ignore-healthcheck: "true"` has no health and does not count; a
//! Missing resource of a kind no check applies to does not count; an `Application`
//! resource (app of apps) that is Missing or Unknown does not count.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use fleetshard_diff::Normalizer;
use fleetshard_health::{Health, HealthChecks, HealthOverride, LuaLimits, ScriptDir};
use fleetshard_manifest::customizations::{IgnoreDifference, ResourceCustomizations};
use serde_json::Value;

use crate::compare::ResourceKey;
use crate::live::UpdateFilter;

/// The annotation that takes a resource out of its application's health.
pub(crate) const IGNORE_HEALTHCHECK: &str = "argocd.argoproj.io/ignore-healthcheck";

/// Normalizers kept per settings before the cache starts again (distinct
/// `ignoreDifferences` lists are few; this bounds a pathological fleet).
const MAX_NORMALIZERS: usize = 4096;

/// argocd-cm's customizations, compiled.
pub(crate) struct Settings {
    /// As read.
    pub(crate) customizations: ResourceCustomizations,
    /// Where resources' health comes from.
    pub(crate) health: HealthChecks,
    /// Which live changes do not refresh their app; `None` (every change does) when
    /// `resource.ignoreResourceUpdatesEnabled` is false, or when a jq expression does not
    /// compile (Argo CD then hashes nothing and skips no refresh).
    pub(crate) update_filter: Option<Arc<UpdateFilter>>,
    normalizers: Mutex<HashMap<Vec<IgnoreDifference>, Built<Normalizer>>>,
}

/// Something built from the configuration, or why it could not be.
type Built<T> = Result<Arc<T>, String>;

/// The settings of one argocd-cm: the map they were read from, its customization keys,
/// and what was built.
type Current = (Arc<BTreeMap<String, String>>, Keys, Built<Settings>);

impl Settings {
    /// The normalizer of an app with `ignore` as its `spec.ignoreDifferences`; `Err` names
    /// the jq expression that does not compile.
    pub(crate) fn normalizer(
        &self,
        ignore: &[IgnoreDifference],
    ) -> Result<Arc<Normalizer>, String> {
        let mut cache = self
            .normalizers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = cache.get(ignore) {
            return found.clone();
        }
        if cache.len() >= MAX_NORMALIZERS {
            cache.clear();
        }
        let built = Normalizer::new(
            ignore,
            &self.customizations.overrides,
            &self.customizations.compare,
        )
        .map(Arc::new)
        .map_err(|e| e.to_string());
        cache.insert(ignore.to_vec(), built.clone());
        built
    }
}

/// The argocd-cm a [`Settings`] was built from: its customization keys.
type Keys = Vec<(String, String)>;

/// The current [`Settings`], rebuilt when argocd-cm's customization keys change.
pub(crate) struct Customizations {
    scripts: Option<Arc<ScriptDir>>,
    limits: LuaLimits,
    current: Mutex<Option<Current>>,
}

impl Customizations {
    /// With the health scripts of `scripts` (the `--resource-customizations` directory).
    pub(crate) fn new(scripts: Option<Arc<ScriptDir>>, limits: LuaLimits) -> Self {
        Customizations {
            scripts,
            limits,
            current: Mutex::new(None),
        }
    }

    /// The settings of `argocd_cm`; `Err` names the argocd-cm key Argo CD would refuse.
    pub(crate) fn settings(
        &self,
        argocd_cm: &Arc<BTreeMap<String, String>>,
    ) -> Result<Arc<Settings>, String> {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((cm, keys, settings)) = current.as_mut() {
            if Arc::ptr_eq(cm, argocd_cm) {
                return settings.clone();
            }
            if keys
                .iter()
                .map(|(k, v)| (k, v))
                .eq(ResourceCustomizations::keys_in(argocd_cm))
            {
                *cm = argocd_cm.clone();
                return settings.clone();
            }
        }
        let keys: Keys = ResourceCustomizations::keys_in(argocd_cm)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let settings = self.build(argocd_cm);
        *current = Some((argocd_cm.clone(), keys, settings.clone()));
        settings
    }

    fn build(&self, argocd_cm: &BTreeMap<String, String>) -> Result<Arc<Settings>, String> {
        let customizations =
            ResourceCustomizations::from_argocd_cm(argocd_cm).map_err(|e| e.to_string())?;
        let mut health = HealthChecks::builtin();
        if let Some(dir) = &self.scripts {
            health = health.with_directory(dir.clone());
        }
        let overrides = customizations
            .overrides
            .iter()
            .map(|(key, o)| HealthOverride {
                key: key.clone(),
                script: o.health_lua.clone(),
                use_open_libs: o.use_open_libs,
            });
        let health = health.with_overrides(overrides, self.limits);
        let update_filter = UpdateFilter::new(&customizations, health.clone())
            .ok()
            .flatten()
            .map(Arc::new);
        Ok(Arc::new(Settings {
            customizations,
            health,
            update_filter,
            normalizers: Mutex::new(HashMap::new()),
        }))
    }
}

/// A resource's health: as shown, and as counted towards its application's (no health
/// when it does not count).
pub(crate) fn resource_health(
    checks: &HealthChecks,
    key: &ResourceKey,
    live: Option<&Value>,
) -> (Health, Health) {
    let ignored = live
        .and_then(|l| l.pointer("/metadata/annotations"))
        .and_then(|a| a.get(IGNORE_HEALTHCHECK))
        .and_then(Value::as_str)
        == Some("true");
    if ignored {
        let none = Health::none(format!("{IGNORE_HEALTHCHECK}: true"));
        return (none.clone(), none);
    }
    let shown = checks.assess(live);
    let counts = match shown.status() {
        None => false,
        Some(fleetshard_health::HealthStatus::Missing) if live.is_none() => {
            checks.has_configured_or_builtin(&key.group, &key.kind)
                && !(key.group == "argoproj.io" && key.kind == "Application")
        }
        Some(fleetshard_health::HealthStatus::Unknown) => {
            !(key.group == "argoproj.io" && key.kind == "Application")
        }
        Some(_) => true,
    };
    let counted = if counts {
        shown.clone()
    } else {
        Health::none("does not count towards the application's health")
    };
    (shown, counted)
}
