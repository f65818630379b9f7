//! Mutating admission, as a test configures it: webhooks the server calls on every create
//! and update of the main resource (dry runs included, as a real API server calls them
//! with `dryRun: true`), in the order they were added, after the request's changes and its
//! field manager's records and before schema validation and storage. Their changes are
//! recorded in no `managedFields` entry (a real API server tracks the request's fields
//! before admission: Argo CD's recorded dry runs show a webhook's label owned by nobody). A
//! webhook that refuses answers the real server's 400 `admission webhook "NAME" denied the
//! request: …`.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use super::registry::ResourceKind;
use super::status::ApiError;

/// What a webhook is asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmissionRequest<'a> {
    /// The API group (`""` for the core group).
    pub group: &'a str,
    /// The kind.
    pub kind: &'a str,
    /// The namespace (`""` for cluster-scoped objects).
    pub namespace: &'a str,
    /// The object's name.
    pub name: &'a str,
    /// `true` for a create, `false` for an update.
    pub create: bool,
}

/// A mutating webhook: changes the object in place, or refuses it with a message.
pub type MutatingWebhook =
    dyn Fn(&AdmissionRequest<'_>, &mut Value) -> Result<(), String> + Send + Sync;

/// The webhooks of one server, by name, in order.
#[derive(Clone, Default)]
pub struct Admission {
    webhooks: Vec<(String, Arc<MutatingWebhook>)>,
}

impl fmt::Debug for Admission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.webhooks.iter().map(|(name, _)| name))
            .finish()
    }
}

impl Admission {
    /// Adds webhook `name`, called after those added before.
    pub fn add(&mut self, name: &str, webhook: Arc<MutatingWebhook>) {
        self.webhooks.push((name.to_owned(), webhook));
    }

    /// Removes every webhook named `name`.
    pub fn remove(&mut self, name: &str) {
        self.webhooks.retain(|(n, _)| n != name);
    }

    /// Runs every webhook on `obj` (object `name` in `ns` of `kind`).
    pub fn mutate(
        &self,
        kind: &ResourceKind,
        ns: &str,
        name: &str,
        create: bool,
        obj: &mut Value,
    ) -> Result<(), ApiError> {
        let request = AdmissionRequest {
            group: kind.group,
            kind: kind.kind,
            namespace: ns,
            name,
            create,
        };
        for (webhook, call) in &self.webhooks {
            call(&request, obj).map_err(|why| {
                ApiError::bad_request(format!(
                    "admission webhook {webhook:?} denied the request: {why}"
                ))
            })?;
        }
        Ok(())
    }
}
