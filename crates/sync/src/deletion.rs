//! An Application's cascade deletion (`resources-finalizer.argocd.argoproj.io`, or its
//! `/foreground` and `/background` forms), as Argo CD's controller finalizes it: the live
//! objects the app tracks are deleted highest sync wave first, one wave at a time, each
//! wave once the previous one is gone; an object already being deleted is waited for; an
//! object with `Delete=confirm` (or `Prune=confirm`) waits for the app's deletion to be
//! approved; CRDs, objects with `Delete=false` and Helm's `resource-policy: keep` are left.
//! Once nothing is left, the finalizer goes.

use crate::annotations::{self as ann, HELM_RESOURCE_POLICY};
use crate::object::{Live, ObjectKey};
use crate::options::{Propagation, SyncOptions};

/// The finalizer of a foreground cascade deletion.
pub const RESOURCES_FINALIZER: &str = "resources-finalizer.argocd.argoproj.io";
/// Its explicitly foreground form.
pub const FOREGROUND_FINALIZER: &str = "resources-finalizer.argocd.argoproj.io/foreground";
/// Its background form.
pub const BACKGROUND_FINALIZER: &str = "resources-finalizer.argocd.argoproj.io/background";
/// The finalizer that runs PreDelete hooks before any resource is deleted.
pub const PRE_DELETE_FINALIZER: &str = "pre-delete-finalizer.argocd.argoproj.io";
/// The finalizer that deletes the PreDelete hooks by their policy once the PostDelete hooks
/// ran.
pub const PRE_DELETE_CLEANUP_FINALIZER: &str = "pre-delete-finalizer.argocd.argoproj.io/cleanup";
/// The finalizer that runs PostDelete hooks once the resources are gone.
pub const POST_DELETE_FINALIZER: &str = "post-delete-finalizer.argocd.argoproj.io";
/// The finalizer that deletes the PostDelete hooks by their policy afterwards.
pub const POST_DELETE_CLEANUP_FINALIZER: &str = "post-delete-finalizer.argocd.argoproj.io/cleanup";

/// Whether `finalizer` asks for a cascade deletion.
pub fn is_cascade(finalizer: &str) -> bool {
    [
        RESOURCES_FINALIZER,
        FOREGROUND_FINALIZER,
        BACKGROUND_FINALIZER,
    ]
    .contains(&finalizer)
}

/// What a deletion's next step is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CascadeStep {
    /// Wait (objects still being deleted, or a confirmation), and why.
    Wait(String),
    /// Delete these objects (the highest wave left), then look again.
    Delete {
        /// The objects.
        keys: Vec<ObjectKey>,
        /// The propagation (background for the `/background` finalizer, else foreground).
        propagation: Propagation,
    },
    /// Nothing of the app is left: remove the cascade finalizers.
    Done,
}

/// Whether an object of the app is deleted with it (Argo CD's `shouldBeDeleted`).
pub fn deleted_with_app(live: &Live, app_options: &SyncOptions) -> bool {
    let delete =
        ann::option_value(&live.annotations, "Delete").or_else(|| app_options.value("Delete"));
    let crd =
        live.key.group == "apiextensions.k8s.io" && live.key.kind == "CustomResourceDefinition";
    let keep = ann::csv(&live.annotations, HELM_RESOURCE_POLICY).contains(&"keep");
    !crd && delete != Some("false") && !keep
}

/// Whether deleting `live` waits for the app's deletion to be approved.
fn needs_confirmation(live: &Live, app_options: &SyncOptions) -> bool {
    let delete =
        ann::option_value(&live.annotations, "Delete").or_else(|| app_options.value("Delete"));
    let prune =
        ann::option_value(&live.annotations, "Prune").or_else(|| app_options.value("Prune"));
    delete == Some("confirm") || prune == Some("confirm")
}

/// The next step of a cascade deletion over the app's tracked live objects `live`
/// (`self_key`: the Application object itself, which an app managing its own Application
/// never deletes), with the cascade finalizer `finalizer`.
pub fn cascade(
    live: &[Live],
    app_options: &SyncOptions,
    finalizer: &str,
    confirmed: bool,
    self_key: Option<&ObjectKey>,
) -> CascadeStep {
    let candidates: Vec<&Live> = live
        .iter()
        .filter(|l| l.tracked && Some(&l.key) != self_key)
        .collect();
    if let Some(l) = candidates.iter().find(|l| l.deleting) {
        return CascadeStep::Wait(format!(
            "{} objects remaining for deletion (waiting for {})",
            candidates.len(),
            l.key
        ));
    }
    let doomed: Vec<&Live> = candidates
        .into_iter()
        .filter(|l| deleted_with_app(l, app_options))
        .collect();
    if !confirmed && let Some(l) = doomed.iter().find(|l| needs_confirmation(l, app_options)) {
        return CascadeStep::Wait(format!("{} requires manual confirmation to delete", l.key));
    }
    let Some(top) = doomed.iter().map(|l| ann::wave(&l.annotations)).max() else {
        return CascadeStep::Done;
    };
    let keys = doomed
        .iter()
        .filter(|l| ann::wave(&l.annotations) == top)
        .map(|l| l.key.clone())
        .collect();
    let propagation = if finalizer == BACKGROUND_FINALIZER {
        Propagation::Background
    } else {
        Propagation::Foreground
    };
    CascadeStep::Delete { keys, propagation }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(name: &str, wave: &str, extra: &[(&str, &str)]) -> Live {
        let mut annotations = crate::Annotations::new();
        if !wave.is_empty() {
            annotations.insert(crate::SYNC_WAVE.to_owned(), wave.to_owned());
        }
        for (k, v) in extra {
            annotations.insert((*k).to_owned(), (*v).to_owned());
        }
        Live {
            key: ObjectKey::new("", "ConfigMap", "ns", name),
            version: "v1".into(),
            annotations,
            tracked: true,
            ..Live::default()
        }
    }

    #[test]
    fn highest_wave_first_then_the_next_then_done() {
        let opts = SyncOptions::default();
        let mut objs = vec![
            live("a", "0", &[]),
            live("b", "2", &[]),
            live("c", "2", &[]),
        ];
        let step = cascade(&objs, &opts, RESOURCES_FINALIZER, false, None);
        let CascadeStep::Delete { keys, propagation } = step else {
            panic!("{step:?}")
        };
        let names: Vec<&str> = keys.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(
            (names, propagation),
            (vec!["b", "c"], Propagation::Foreground)
        );
        objs[1].deleting = true;
        assert!(matches!(
            cascade(&objs, &opts, RESOURCES_FINALIZER, false, None),
            CascadeStep::Wait(_)
        ));
        objs.drain(1..);
        let step = cascade(&objs, &opts, BACKGROUND_FINALIZER, false, None);
        assert_eq!(
            step,
            CascadeStep::Delete {
                keys: vec![objs[0].key.clone()],
                propagation: Propagation::Background
            }
        );
        objs.clear();
        assert_eq!(
            cascade(&objs, &opts, RESOURCES_FINALIZER, false, None),
            CascadeStep::Done
        );
    }

    #[test]
    fn kept_and_confirmed_objects() {
        let opts = SyncOptions::default();
        let kept = vec![
            live("a", "", &[(crate::SYNC_OPTIONS, "Delete=false")]),
            live("b", "", &[(HELM_RESOURCE_POLICY, "keep")]),
        ];
        assert_eq!(
            cascade(&kept, &opts, RESOURCES_FINALIZER, false, None),
            CascadeStep::Done
        );
        let confirm = vec![live("c", "", &[(crate::SYNC_OPTIONS, "Delete=confirm")])];
        assert!(
            matches!(cascade(&confirm, &opts, RESOURCES_FINALIZER, false, None), CascadeStep::Wait(m) if m.contains("confirmation"))
        );
        assert!(matches!(
            cascade(&confirm, &opts, RESOURCES_FINALIZER, true, None),
            CascadeStep::Delete { .. }
        ));
        let app_wide = SyncOptions(vec!["Delete=false".into()]);
        assert_eq!(
            cascade(
                &[live("d", "", &[])],
                &app_wide,
                RESOURCES_FINALIZER,
                false,
                None
            ),
            CascadeStep::Done
        );
    }
}
