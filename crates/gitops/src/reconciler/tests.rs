//! Instance names and the apps they stand for.

use super::*;

#[test]
fn instance_names_map_back_to_their_apps() {
    let cfg = ReconcilerConfig::default();
    for key in [
        AppKey::new("argocd", "guestbook"),
        AppKey::new("team-a", "web_app"),
        AppKey::new("argocd", "a_b"),
    ] {
        let instance = cfg.instance_name(&key);
        assert!(cfg.apps_of_instance(&instance).contains(&key), "{instance}");
    }
    assert_eq!(
        cfg.apps_of_instance("guestbook"),
        [AppKey::new("argocd", "guestbook")]
    );
}
