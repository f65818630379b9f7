//! Tests through the public API: fixtures as inline strings, one per format and per bad
//! input, and property tests (no panics; write→read round trips).

mod applications;
mod corpus;
mod native;
mod placement;
mod placement_secrets;
mod proptests;
mod secrets;
mod stream;

use fleetshard_core::App;

use crate::{AppSpec, FleetFile, LoadError, LoadWarning, spec_key};

/// The GitOps spec the loader gave `app`; panics if it gave none.
fn spec_of<'a>(file: &'a FleetFile, app: &App) -> &'a AppSpec {
    file.specs
        .get(&spec_key(app))
        .unwrap_or_else(|| panic!("no spec for {}/{}", app.namespace, app.name))
}

/// The error's `(object, field)` when it is a field error, for compact asserts.
fn field_of(err: &LoadError) -> (String, String) {
    match err {
        LoadError::Field { object, field, .. } => (object.clone(), field.clone()),
        other => panic!("expected a field error, got {other:?}: {other}"),
    }
}

/// Asserts that exactly one warning mentions each of `needles` and that every warning
/// renders on one line.
fn assert_warned(warnings: &[LoadWarning], needles: &[&str]) {
    for w in warnings {
        assert!(!w.to_string().contains('\n'), "multi-line warning: {w}");
    }
    for needle in needles {
        assert!(
            warnings.iter().any(|w| w.to_string().contains(needle)),
            "no warning mentions {needle:?}: {warnings:#?}"
        );
    }
}
