//! A custom resource's fields that hold a core Kubernetes type (argocd-cm's
//! `knownTypeFields`, [`KnownField`]) compared as that type is in a core kind: a field
//! declared a `core/Quantity` compares as an amount (`1Gi` = `1024Mi`), and the quantities
//! inside a field declared a `core/v1/PodSpec`, `PodTemplateSpec`, `Container` or
//! `ResourceRequirements` (or a `ResourceList`) compare as amounts where they would in a Pod (a
//! `ResourceRequirements` field need not be named `resources`). Argo CD re-encodes such
//! fields through the Go type, which writes every quantity in its canonical form; nothing
//! else of that re-encoding is reproduced (the server's defaults are not, as the API server
//! does not default a custom resource's fields either). Other types (`meta/v1/Duration`,
//! the other `core/v1` types) are accepted and change nothing.

use fleetshard_diff::KnownField;

/// Where a path of a custom resource sits in core terms.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Core<'p> {
    /// At this path of a Pod (`*` for a list element).
    In(Vec<&'p str>),
    /// At a quantity.
    Quantity,
}

/// The core view of `pattern` (a path with `*` for list elements) under the first of
/// `known` whose path it lies in; `None` when it lies in none.
pub(crate) fn as_core<'p>(known: &[KnownField], pattern: &[&'p str]) -> Option<Core<'p>> {
    known.iter().find_map(|field| {
        let rest = inside(&field.path, pattern)?;
        let prefix: &[&'static str] = match field.type_name.as_str() {
            "core/Quantity" => return rest.is_empty().then_some(Core::Quantity),
            "core/v1/PodTemplateSpec" => &[],
            "core/v1/PodSpec" => &["spec"],
            "core/v1/Container" => &["spec", "containers", "*"],
            "core/v1/ResourceRequirements" => &["spec", "containers", "*", "resources"],
            "core/v1/ResourceList" => &["spec", "containers", "*", "resources", "limits"],
            _ => return None,
        };
        let mut mapped = prefix.to_vec();
        mapped.extend_from_slice(rest);
        Some(Core::In(mapped))
    })
}

/// The part of `pattern` inside the field at `path` (lists met along the path, or at its
/// end, stand for each of their elements), if `pattern` lies in it.
fn inside<'p, 'a>(path: &[String], pattern: &'a [&'p str]) -> Option<&'a [&'p str]> {
    let mut rest = pattern;
    for segment in path {
        rest = skip_elements(rest);
        let (first, tail) = rest.split_first()?;
        if first != segment {
            return None;
        }
        rest = tail;
    }
    Some(skip_elements(rest))
}

fn skip_elements<'p, 'a>(mut pattern: &'a [&'p str]) -> &'a [&'p str] {
    while let Some((&"*", tail)) = pattern.split_first() {
        pattern = tail;
    }
    pattern
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(path: &str, type_name: &str) -> KnownField {
        KnownField {
            path: path.split('.').map(str::to_owned).collect(),
            type_name: type_name.to_owned(),
        }
    }

    #[test]
    fn a_pod_spec_field_maps_to_a_pods_spec_through_lists() {
        let known = [field("spec.jobs.template.spec", "core/v1/PodSpec")];
        let pattern = [
            "spec",
            "jobs",
            "*",
            "template",
            "spec",
            "containers",
            "*",
            "image",
        ];
        assert_eq!(
            as_core(&known, &pattern),
            Some(Core::In(vec!["spec", "containers", "*", "image"]))
        );
        assert_eq!(as_core(&known, &["spec", "jobs", "*", "name"]), None);
    }

    #[test]
    fn a_quantity_field_is_a_quantity_only_itself() {
        let known = [field("spec.storage", "core/Quantity")];
        assert_eq!(as_core(&known, &["spec", "storage"]), Some(Core::Quantity));
        assert_eq!(as_core(&known, &["spec", "storage", "x"]), None);
        assert_eq!(
            as_core(&[field("spec.x", "core/v1/Secret")], &["spec", "x"]),
            None
        );
    }
}
