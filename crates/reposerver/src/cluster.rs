//! What the destination cluster tells about itself, in the form the controller sends it:
//! its server version normalised as gitops-engine does, and every `group/version` and
//! `group/version/Kind` it serves, sorted (Argo CD's `APIResourcesToStrings`).

use std::collections::BTreeSet;

use crate::error::RequestError;

/// The destination's version and API versions (`ManifestRequest.kubeVersion`,
/// `apiVersions`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterVersions {
    /// `v<major>.<minor>[.<patch>…]`, from [`normalize_kube_version`].
    pub kube_version: String,
    /// Sorted, without duplicates, from [`api_version_strings`].
    pub api_versions: Vec<String>,
}

impl ClusterVersions {
    /// From discovery: the server's `gitVersion` (`/version`) and the served resources as
    /// `(group, version, kind)` (the core group is `""`).
    pub fn from_discovery<'a>(
        git_version: &str,
        resources: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
    ) -> Result<Self, RequestError> {
        Ok(ClusterVersions {
            kube_version: normalize_kube_version(git_version)?,
            api_versions: api_version_strings(resources),
        })
    }
}

/// A server's `gitVersion` as gitops-engine sends it: parsed like Kubernetes'
/// `version.ParseGeneric` (an optional `v`, two or more dot-separated numbers, the first
/// without a leading zero, then anything, which is dropped) and printed back with a `v`.
/// `v1.29.3-gke.100` → `v1.29.3`; `1.30.0+k3s1` → `v1.30.0`.
pub fn normalize_kube_version(git_version: &str) -> Result<String, RequestError> {
    let invalid = |message: &str| RequestError::Invalid {
        path: format!("the destination's server version {git_version:?}"),
        message: message.to_owned(),
    };
    let s = git_version.trim_start();
    let s = s.strip_prefix('v').unwrap_or(s);
    // `[0-9]+(\.[0-9]+)*`, greedy; whatever follows is dropped.
    let bytes = s.as_bytes();
    let digits_from = |i: usize| {
        bytes[i..]
            .iter()
            .position(|b| !b.is_ascii_digit())
            .map_or(bytes.len(), |n| i + n)
    };
    let mut numbers = Vec::new();
    let mut at = 0;
    loop {
        let end = digits_from(at);
        if end == at {
            break;
        }
        numbers.push(&s[at..end]);
        if bytes.get(end) == Some(&b'.') && bytes.get(end + 1).is_some_and(u8::is_ascii_digit) {
            at = end + 1;
        } else {
            break;
        }
    }
    if numbers.len() < 2 {
        return Err(invalid("not a version (two or more dot-separated numbers)"));
    }
    if numbers[0].len() > 1 && numbers[0].starts_with('0') {
        return Err(invalid("the major version has a leading zero"));
    }
    let parsed: Vec<u64> = numbers
        .iter()
        .map(|n| n.parse::<u64>())
        .collect::<Result<_, _>>()
        .map_err(|_| invalid("a version number is out of range"))?;
    let joined: Vec<String> = parsed.iter().map(u64::to_string).collect();
    Ok(format!("v{}", joined.join(".")))
}

/// Every `group/version` and `group/version/Kind` of `resources`, sorted and without
/// duplicates; the core group's are `v1` and `v1/Pod`.
pub fn api_version_strings<'a>(
    resources: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
) -> Vec<String> {
    let mut out = BTreeSet::new();
    for (group, version, kind) in resources {
        let gv = if group.is_empty() {
            version.to_owned()
        } else {
            format!("{group}/{version}")
        };
        out.insert(format!("{gv}/{kind}"));
        out.insert(gv);
    }
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_normalise_as_gitops_engine() {
        for (given, want) in [
            ("v1.29.3-gke.100", "v1.29.3"),
            ("v1.30.0+k3s1", "v1.30.0"),
            ("1.28.2-eks-123", "v1.28.2"),
            ("v1.27", "v1.27"),
            ("v1.029.1", "v1.29.1"),
            ("v1.2.3.4", "v1.2.3.4"),
            ("1.2..3", "v1.2"),
            ("v1.2.", "v1.2"),
        ] {
            assert_eq!(normalize_kube_version(given).unwrap(), want, "{given}");
        }
        for bad in [
            "",
            "v1",
            "vx.y",
            "v01.2.3",
            "v1..2",
            "v99999999999999999999.1",
        ] {
            assert!(normalize_kube_version(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn api_versions_are_sorted_with_kinds() {
        let got = api_version_strings([
            ("apps", "v1", "Deployment"),
            ("", "v1", "Pod"),
            ("", "v1", "ConfigMap"),
            ("apps", "v1", "Deployment"),
        ]);
        assert_eq!(
            got,
            [
                "apps/v1",
                "apps/v1/Deployment",
                "v1",
                "v1/ConfigMap",
                "v1/Pod"
            ]
        );
    }
}
