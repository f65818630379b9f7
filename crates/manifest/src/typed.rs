//! Which list items the parser reads straight into the model, without a `Value`
//! ([`crate::placement_app`] for Applications, [`crate::placement_secret`] for cluster
//! Secrets), and the reading of one JSON item that way.

use crate::stream::Item;

/// Which items the parser reads straight into the model, without a value.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Typed {
    /// Plain Applications, when the input drops the GitOps specs.
    pub(crate) apps: bool,
    /// Plain cluster Secrets.
    pub(crate) secrets: bool,
}

impl Typed {
    /// Whether any item may be typed.
    pub(crate) fn any(self) -> bool {
        self.apps || self.secrets
    }
}

/// One JSON item: a plain Application as its app and a plain cluster Secret as its
/// cluster (as `typed` allows), anything else as a value.
pub(crate) fn json_item(text: &str, typed: Typed) -> Result<Item, serde_json::Error> {
    use crate::placement_app::PlacementApp;
    use crate::placement_secret::TypedSecret;
    // A struct reads from a sequence too; an item that is not an object is refused.
    if text.starts_with('{') {
        if typed.apps
            && let Some(app) = serde_json::from_str::<PlacementApp<'_>>(text)
                .ok()
                .and_then(PlacementApp::placement)
        {
            return Ok(Item::App(app));
        }
        if typed.secrets
            && let Some(cluster) = serde_json::from_str::<TypedSecret<'_>>(text)
                .ok()
                .and_then(|secret| secret.cluster())
        {
            return Ok(Item::Cluster(Box::new(cluster)));
        }
    }
    serde_json::from_str(text).map(Item::Value)
}
