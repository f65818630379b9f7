//! The annotations that steer a sync, read as gitops-engine reads them: hooks (Argo CD's
//! own, and Helm's mapped onto them), hook delete policies, sync waves (Helm's hook weight
//! when there is none) and per-object sync options.
//!
//! Every multi-valued annotation is a comma-separated list whose items are trimmed, empty
//! items dropped and repeats removed (gitops-engine's `GetAnnotationCSVs`).

use std::collections::BTreeMap;

/// Argo CD's per-object sync options.
pub const SYNC_OPTIONS: &str = "argocd.argoproj.io/sync-options";
/// Argo CD's sync wave.
pub const SYNC_WAVE: &str = "argocd.argoproj.io/sync-wave";
/// Argo CD's hook type(s).
pub const HOOK: &str = "argocd.argoproj.io/hook";
/// Argo CD's hook delete policies.
pub const HOOK_DELETE_POLICY: &str = "argocd.argoproj.io/hook-delete-policy";
/// On an Application: when a deletion or prune waiting for confirmation was approved
/// (an RFC 3339 time; Argo CD's UI and CLI set it).
pub const DELETION_APPROVED: &str = "argocd.argoproj.io/deletion-approved";
/// Helm's hook type(s).
pub const HELM_HOOK: &str = "helm.sh/hook";
/// Helm's hook weight (a wave when no sync wave is set).
pub const HELM_HOOK_WEIGHT: &str = "helm.sh/hook-weight";
/// Helm's hook delete policies.
pub const HELM_HOOK_DELETE_POLICY: &str = "helm.sh/hook-delete-policy";
/// Helm's resource policy (`keep`: never deleted with the release).
pub const HELM_RESOURCE_POLICY: &str = "helm.sh/resource-policy";

/// Annotations of one object.
pub type Annotations = BTreeMap<String, String>;

/// The sync phase a hook runs in, or `Skip` (never applied).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HookType {
    /// Before the Sync phase.
    PreSync,
    /// With the ordinary resources.
    Sync,
    /// After every resource is healthy.
    PostSync,
    /// Only when the sync failed.
    SyncFail,
    /// Not applied at all.
    Skip,
}

impl HookType {
    /// Argo CD's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            HookType::PreSync => "PreSync",
            HookType::Sync => "Sync",
            HookType::PostSync => "PostSync",
            HookType::SyncFail => "SyncFail",
            HookType::Skip => "Skip",
        }
    }

    /// The type Argo CD's spelling names.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "PreSync" => HookType::PreSync,
            "Sync" => HookType::Sync,
            "PostSync" => HookType::PostSync,
            "SyncFail" => HookType::SyncFail,
            "Skip" => HookType::Skip,
            _ => return None,
        })
    }
}

/// When a hook object is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeletePolicy {
    /// Once the hook succeeded.
    HookSucceeded,
    /// Once the hook failed.
    HookFailed,
    /// Before a new one is created (the default).
    BeforeHookCreation,
}

/// The items of the comma-separated annotation `key`: trimmed, non-empty, each once.
pub fn csv<'a>(annotations: &'a Annotations, key: &str) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for item in annotations.get(key).map_or("", String::as_str).split(',') {
        let item = item.trim();
        if !item.is_empty() && !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

/// Whether the sync options annotation holds `option` (`Name=value`).
pub fn has_option(annotations: &Annotations, option: &str) -> bool {
    csv(annotations, SYNC_OPTIONS).contains(&option)
}

/// The value of sync option `name` in the sync options annotation (`Prune` of
/// `Prune=confirm` is `confirm`).
pub fn option_value<'a>(annotations: &'a Annotations, name: &str) -> Option<&'a str> {
    csv(annotations, SYNC_OPTIONS)
        .into_iter()
        .find_map(|o| o.strip_prefix(name)?.strip_prefix('='))
}

/// Helm's hook types mapped onto Argo CD's (`pre-install`/`pre-upgrade` → PreSync,
/// `post-install`/`post-upgrade` → PostSync; others are not sync hooks).
fn helm_types(annotations: &Annotations) -> Vec<HookType> {
    csv(annotations, HELM_HOOK)
        .into_iter()
        .filter_map(|t| match t {
            "pre-install" | "pre-upgrade" => Some(HookType::PreSync),
            "post-install" | "post-upgrade" => Some(HookType::PostSync),
            _ => None,
        })
        .collect()
}

/// The hook types of an object: Argo CD's annotation, else Helm's (mapped).
pub fn hook_types(annotations: &Annotations) -> Vec<HookType> {
    let own: Vec<HookType> = csv(annotations, HOOK)
        .into_iter()
        .filter_map(HookType::parse)
        .collect();
    if own.is_empty() {
        helm_types(annotations)
    } else {
        own
    }
}

/// The object is only a `Skip` hook: never applied.
pub fn is_skip(annotations: &Annotations) -> bool {
    let types = hook_types(annotations);
    types.contains(&HookType::Skip) && types.len() == 1
}

/// The object is a hook: it carries Argo CD's hook annotation (and is not only `Skip`), or
/// Helm's (other than `crd-install`, which Helm uses for CRDs that are no hooks).
pub fn is_hook(annotations: &Annotations) -> bool {
    if annotations.contains_key(HOOK) {
        return !is_skip(annotations);
    }
    annotations
        .get(HELM_HOOK)
        .is_some_and(|v| v.as_str() != "crd-install")
}

/// A hook of no sync type (a Helm `test` hook, Argo CD's `PostDelete`): not part of a sync
/// and not compared (gitops-engine's `Ignore`).
pub fn is_ignored(annotations: &Annotations) -> bool {
    is_hook(annotations) && hook_types(annotations).is_empty()
}

/// Whether the object is a hook of the deletion phase `kind` (`PostDelete`, `PreDelete`):
/// Argo CD's annotation or Helm's (`post-delete`, `pre-delete`) lists it.
pub fn is_deletion_hook(annotations: &Annotations, kind: DeletionHook) -> bool {
    let (own, helm) = match kind {
        DeletionHook::PreDelete => ("PreDelete", "pre-delete"),
        DeletionHook::PostDelete => ("PostDelete", "post-delete"),
    };
    csv(annotations, HOOK).contains(&own) || csv(annotations, HELM_HOOK).contains(&helm)
}

/// The hooks of an Application's deletion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeletionHook {
    /// Before the app's resources are deleted.
    PreDelete,
    /// After they are.
    PostDelete,
}

/// The hook's delete policies: Argo CD's and Helm's, `BeforeHookCreation` when none.
pub fn delete_policies(annotations: &Annotations) -> Vec<DeletePolicy> {
    let own = csv(annotations, HOOK_DELETE_POLICY)
        .into_iter()
        .filter_map(|p| match p {
            "HookSucceeded" => Some(DeletePolicy::HookSucceeded),
            "HookFailed" => Some(DeletePolicy::HookFailed),
            "BeforeHookCreation" => Some(DeletePolicy::BeforeHookCreation),
            _ => None,
        });
    let helm = csv(annotations, HELM_HOOK_DELETE_POLICY)
        .into_iter()
        .filter_map(|p| match p {
            "hook-succeeded" => Some(DeletePolicy::HookSucceeded),
            "hook-failed" => Some(DeletePolicy::HookFailed),
            "before-hook-creation" => Some(DeletePolicy::BeforeHookCreation),
            _ => None,
        });
    let mut policies: Vec<DeletePolicy> = own.chain(helm).collect();
    if policies.is_empty() {
        policies.push(DeletePolicy::BeforeHookCreation);
    }
    policies
}

/// Go's `strconv.Atoi`: an optional sign and decimal digits, nothing else.
fn atoi(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// The object's sync wave: `argocd.argoproj.io/sync-wave` when it is an integer, else
/// Helm's hook weight when that is, else 0.
pub fn wave(annotations: &Annotations) -> i64 {
    annotations
        .get(SYNC_WAVE)
        .and_then(|w| atoi(w))
        .or_else(|| annotations.get(HELM_HOOK_WEIGHT).and_then(|w| atoi(w)))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(pairs: &[(&str, &str)]) -> Annotations {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn hooks_are_argo_cds_or_helms_mapped() {
        let pre = a(&[(HOOK, "PreSync, PostSync ,PreSync")]);
        assert_eq!(hook_types(&pre), [HookType::PreSync, HookType::PostSync]);
        assert!(is_hook(&pre));
        let helm = a(&[
            (HELM_HOOK, "pre-install,pre-upgrade"),
            (HELM_HOOK_WEIGHT, "-5"),
        ]);
        assert_eq!(hook_types(&helm), [HookType::PreSync, HookType::PreSync]);
        assert_eq!(wave(&helm), -5);
        // Argo CD's annotation wins over Helm's.
        let both = a(&[(HOOK, "Sync"), (HELM_HOOK, "post-install")]);
        assert_eq!(hook_types(&both), [HookType::Sync]);
        // Helm's crd-install is no hook; a test hook is a hook of no sync type (ignored).
        assert!(!is_hook(&a(&[(HELM_HOOK, "crd-install")])));
        let test = a(&[(HELM_HOOK, "test")]);
        assert!(is_hook(&test) && is_ignored(&test));
        assert!(is_ignored(&a(&[(HOOK, "PostDelete")])));
        assert!(is_deletion_hook(
            &a(&[(HELM_HOOK, "post-delete")]),
            DeletionHook::PostDelete
        ));
        // Skip alone is not a hook, and never applied.
        let skip = a(&[(HOOK, "Skip")]);
        assert!(is_skip(&skip) && !is_hook(&skip));
        assert!(!is_skip(&a(&[(HOOK, "Skip,PreSync")])));
    }

    #[test]
    fn waves_and_policies_default_as_argo_cd() {
        assert_eq!(wave(&a(&[])), 0);
        assert_eq!(wave(&a(&[(SYNC_WAVE, "+3")])), 3);
        assert_eq!(wave(&a(&[(SYNC_WAVE, " 3"), (HELM_HOOK_WEIGHT, "2")])), 2);
        assert_eq!(wave(&a(&[(SYNC_WAVE, "x")])), 0);
        assert_eq!(delete_policies(&a(&[])), [DeletePolicy::BeforeHookCreation]);
        assert_eq!(
            delete_policies(&a(&[
                (HOOK_DELETE_POLICY, "HookSucceeded"),
                (HELM_HOOK_DELETE_POLICY, "hook-failed")
            ])),
            [DeletePolicy::HookSucceeded, DeletePolicy::HookFailed]
        );
        let opts = a(&[(SYNC_OPTIONS, "Prune=confirm, Replace=true")]);
        assert_eq!(option_value(&opts, "Prune"), Some("confirm"));
        assert!(has_option(&opts, "Replace=true"));
        assert_eq!(option_value(&opts, "Delete"), None);
    }
}
