//! Health of Kubernetes objects as Argo CD assesses it, and of an application as the worst
//! of its resources'.
//!
//! **Contract.** [`HealthChecks::assess`] gives a live object's health from, in Argo CD's
//! order of precedence: a Lua script configured in argocd-cm for the object's group and
//! kind ([`HealthOverride`]: `resource.customizations.health.<group>_<kind>` or the
//! `resource.customizations` YAML form), then one whose wildcard key matches
//! (`*.example.io/*`), then a script of a [`ScriptDir`] in Argo CD's
//! `resource_customizations` layout (`<group>/<kind>/health.lua`, `_` for a wildcard
//! segment), then the checks built in here (Argo CD's Go checks, [`builtin`](crate)). An
//! object no source checks has **no health** ([`Health::checked`] false): it is shown
//! without health and does not count towards its application's, as in Argo CD. Lua runs
//! sandboxed, with an instruction budget and a memory limit per call, each script compiled
//! once ([`lua`]). Everything here is a function of the object and the configuration: no
//! clock is read, except by a script's own `os.time`/`os.date`. [`ScriptDir::load`] is the
//! only I/O.

mod builtin;
pub mod lua;
mod scripts;

use std::fmt;
use std::sync::Arc;

use fleetshard_manifest::glob::Glob;
use serde::Serialize;
use serde_json::Value;

pub use lua::{LuaLimits, LuaScript};
pub use scripts::{HealthOverride, ScriptDir, ScriptDirError, group_kind_key};

/// The finalizer Argo CD keeps on hooks: an object being deleted that holds it is still
/// assessed (its health is its hook's result).
pub const HOOK_FINALIZER: &str = "argocd.argoproj.io/hook-finalizer";

/// Health of a resource or application, ordered from best to worst as Argo CD's
/// `healthOrder`: Healthy < Suspended < Progressing < Missing < Degraded < Unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum HealthStatus {
    /// Working as intended.
    Healthy,
    /// Paused or suspended on purpose.
    Suspended,
    /// Not healthy yet, still expected to get there.
    Progressing,
    /// The object does not exist in the cluster.
    Missing,
    /// Failed, or cannot become healthy without intervention.
    Degraded,
    /// Health could not be told.
    Unknown,
}

impl HealthStatus {
    /// The status Argo CD spells `s` (`Healthy`, …), exactly.
    pub fn parse(s: &str) -> Option<HealthStatus> {
        Some(match s {
            "Healthy" => HealthStatus::Healthy,
            "Suspended" => HealthStatus::Suspended,
            "Progressing" => HealthStatus::Progressing,
            "Missing" => HealthStatus::Missing,
            "Degraded" => HealthStatus::Degraded,
            "Unknown" => HealthStatus::Unknown,
            _ => return None,
        })
    }
}

impl fmt::Display for HealthStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// The health of one resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Health {
    /// The status (`Unknown`, and meaningless, when `checked` is false).
    pub status: HealthStatus,
    /// Why, for a human (may be empty).
    pub message: String,
    /// Whether a check decided the status. False: no check applies to the object's kind,
    /// or its script gave no health; such a resource has no health (Argo CD shows none) and
    /// does not count towards its application's.
    pub checked: bool,
}

impl Health {
    /// A health decided by a check.
    pub fn new(status: HealthStatus, message: impl Into<String>) -> Health {
        Health {
            status,
            message: message.into(),
            checked: true,
        }
    }

    /// No health: no check applies (`message` says why, for logs and `health check`).
    pub fn none(message: impl Into<String>) -> Health {
        Health {
            status: HealthStatus::Unknown,
            message: message.into(),
            checked: false,
        }
    }

    /// The status, `None` when the resource has no health.
    pub fn status(&self) -> Option<HealthStatus> {
        self.checked.then_some(self.status)
    }
}

/// The health of a live object by the built-in checks only; `None` means it does not exist
/// (Missing). [`HealthChecks::builtin`]`().assess(live)`.
pub fn assess(live: Option<&Value>) -> Health {
    static BUILTIN: std::sync::OnceLock<HealthChecks> = std::sync::OnceLock::new();
    BUILTIN.get_or_init(HealthChecks::builtin).assess(live)
}

/// An application's health: the worst of its checked resources' (Healthy when none is).
pub fn app_health<'a>(resources: impl IntoIterator<Item = &'a Health>) -> HealthStatus {
    resources
        .into_iter()
        .filter(|h| h.checked)
        .map(|h| h.status)
        .max()
        .unwrap_or(HealthStatus::Healthy)
}

/// Where a live object's health comes from: argocd-cm's scripts, a scripts directory and
/// the built-in checks, in Argo CD's order. Cheap to clone (shared scripts).
#[derive(Debug, Clone, Default)]
pub struct HealthChecks {
    /// argocd-cm's scripts by exact key (`group/Kind`, `Kind` for the core group).
    configured: Arc<Vec<(String, Arc<LuaScript>)>>,
    /// argocd-cm's scripts whose key has a wildcard, in key order.
    configured_wildcards: Arc<Vec<(Glob, Arc<LuaScript>)>>,
    directory: Option<Arc<ScriptDir>>,
}

impl HealthChecks {
    /// The built-in checks only.
    pub fn builtin() -> HealthChecks {
        HealthChecks::default()
    }

    /// With the scripts of `dir` (checked after argocd-cm's, before the built-in checks).
    #[must_use]
    pub fn with_directory(mut self, dir: Arc<ScriptDir>) -> HealthChecks {
        self.directory = Some(dir);
        self
    }

    /// With argocd-cm's scripts (an override with an empty script is no override, as in
    /// Argo CD), each compiled at its first use within `limits`.
    #[must_use]
    pub fn with_overrides(
        mut self,
        overrides: impl IntoIterator<Item = HealthOverride>,
        limits: LuaLimits,
    ) -> HealthChecks {
        let mut exact = Vec::new();
        let mut wildcards = Vec::new();
        for o in overrides {
            if o.script.is_empty() {
                continue;
            }
            let name = format!("resource.customizations.health.{}", o.key.replace('/', "_"));
            let script = Arc::new(LuaScript::new(&name, &o.script, o.use_open_libs, limits));
            if o.key.contains('*') {
                wildcards.push((Glob::new(&o.key), script));
            } else {
                exact.push((o.key, script));
            }
        }
        // Argo CD takes the first wildcard its map iteration meets (no fixed order); a
        // sorted order at least answers the same every time.
        wildcards.sort_by(|a: &(Glob, _), b| a.0.as_str().cmp(b.0.as_str()));
        self.configured = Arc::new(exact);
        self.configured_wildcards = Arc::new(wildcards);
        self
    }

    /// The script that decides the health of objects of `group` and `kind`, if any.
    pub fn script_for(&self, group: &str, kind: &str) -> Option<&Arc<LuaScript>> {
        let key = group_kind_key(group, kind);
        self.configured
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, s)| s)
            .or_else(|| {
                self.configured_wildcards
                    .iter()
                    .find(|(pattern, _)| pattern.is_match(&key))
                    .map(|(_, s)| s)
            })
            .or_else(|| self.directory.as_ref().and_then(|d| d.script_for(&key)))
    }

    /// Whether argocd-cm configures a script for exactly `group` and `kind` or a built-in
    /// check applies: what Argo CD (3.2) asks before it counts a Missing resource towards
    /// its application's health.
    pub fn has_configured_or_builtin(&self, group: &str, kind: &str) -> bool {
        let key = group_kind_key(group, kind);
        self.configured.iter().any(|(k, _)| *k == key) || builtin::has_check(group, kind)
    }

    /// Whether some check (a script or a built-in one) applies to `group` and `kind`.
    pub fn has_check(&self, group: &str, kind: &str) -> bool {
        self.script_for(group, kind).is_some() || builtin::has_check(group, kind)
    }

    /// The health of a live object; `None` means it does not exist (Missing). Any object
    /// with `metadata.deletionTimestamp` is Progressing ("Pending deletion"), unless it
    /// holds Argo CD's hook finalizer ([`HOOK_FINALIZER`]); a script that
    /// fails makes the object Unknown with the script's error.
    pub fn assess(&self, live: Option<&Value>) -> Health {
        let Some(obj) = live else {
            return Health::new(HealthStatus::Missing, "not found in the cluster");
        };
        if !obj.is_object() {
            return Health::new(
                HealthStatus::Unknown,
                "the live object is not a JSON object",
            );
        }
        let hook_finalizer = obj
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| f.iter().any(|f| f == HOOK_FINALIZER));
        if obj
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|t| !t.is_null())
            && !hook_finalizer
        {
            return Health::new(HealthStatus::Progressing, "Pending deletion");
        }
        let text = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or("");
        let api_version = text("/apiVersion");
        let kind = text("/kind");
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        if let Some(script) = self.script_for(group, kind) {
            return match script.run(obj) {
                Ok(Some(health)) => health,
                Ok(None) => Health::none(format!("{} gave no health", script.name())),
                Err(message) => Health::new(HealthStatus::Unknown, message),
            };
        }
        builtin::check(obj)
            .unwrap_or_else(|| Health::none(format!("no health check for {api_version} {kind}")))
    }
}

#[cfg(test)]
mod tests;
