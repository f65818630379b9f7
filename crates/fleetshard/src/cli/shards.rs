//! The `--shards` value of `run`: where the shard count comes from.
//!
//! - `N` — exactly N shards;
//! - `stored` or `stored:N` — the count `fleetshard scale` wrote to the store, N (default 3)
//!   until one is written;
//! - `auto` or `auto:MIN-MAX` — one shard per live replica (holders and spares), within
//!   the bounds (default 1-1024);
//! - `deployment`, `deployment:NAME` or `deployment:NAMESPACE/NAME` — `spec.replicas` of a
//!   Deployment, kept current by a watch, in NAMESPACE or else the `kubernetes://` store's
//!   namespace (NAME defaults to `ARGOCD_APPLICATION_CONTROLLER_NAME`, else
//!   `argocd-application-controller`, as in Argo CD). The fenced overlay's store has a
//!   namespace of its own, so it names the replicas' namespace
//!   (`deployment:$(POD_NAMESPACE)/fleetshard`).
//!
//! Only the elected distributor applies the policy and commits the count with each
//! generation; every replica claims among the committed count.

use std::fmt;
use std::str::FromStr;

use fleetshard_coord::fenced::{MAX_SHARDS, ShardCount};
use fleetshard_replica::deployment::{
    ARGOCD_CONTROLLER_NAME_ENV, DEFAULT_CONTROLLER_NAME, DeploymentRef,
};

/// The parsed `--shards` value: the policy, and for `deployment` the Deployment's name
/// (`None`: the default name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardsArg(pub ShardCount, pub Option<Deployment>);

/// A Deployment whose `spec.replicas` is the shard count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deployment {
    /// Its namespace; `None`: the `kubernetes://` store's.
    pub namespace: Option<String>,
    /// Its name; `None`: `ARGOCD_APPLICATION_CONTROLLER_NAME` or Argo CD's default.
    pub name: Option<String>,
}

impl Deployment {
    /// The Deployment to watch.
    pub fn resolve(&self) -> DeploymentRef {
        let name = self.name.clone().unwrap_or_else(|| {
            std::env::var(ARGOCD_CONTROLLER_NAME_ENV)
                .ok()
                .map(|n| n.trim().to_owned())
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| DEFAULT_CONTROLLER_NAME.to_owned())
        });
        DeploymentRef {
            namespace: self.namespace.clone(),
            name,
        }
    }

    /// `NAME` or `NAMESPACE/NAME` (after `deployment:`); an empty value is the default name.
    fn parse(rest: &str) -> Result<Deployment, String> {
        let rest = rest.trim();
        let (namespace, name) = match rest.split_once('/') {
            Some((ns, name)) => (Some(ns.trim()), name.trim()),
            None => (None, rest),
        };
        let bad = |what: &str, v: &str| {
            format!(
                "deployment:{rest}: the {what} {v:?} is not a Kubernetes name (lowercase \
                 letters, digits, '-'{}; at most {})",
                if what == "namespace" { "" } else { ", '.'" },
                if what == "namespace" { 63 } else { 253 }
            )
        };
        if let Some(ns) = namespace
            && !is_name(ns, false)
        {
            return Err(bad("namespace", ns));
        }
        if !name.is_empty() && !is_name(name, true) {
            return Err(bad("name", name));
        }
        if namespace.is_some() && name.is_empty() {
            return Err(format!(
                "deployment:{rest}: a namespace needs a name (deployment:NAMESPACE/NAME)"
            ));
        }
        Ok(Deployment {
            namespace: namespace.map(str::to_owned),
            name: Some(name.to_owned()).filter(|n| !n.is_empty()),
        })
    }
}

/// A DNS label (a namespace) or, with `dots`, a DNS subdomain (a Deployment's name).
fn is_name(s: &str, dots: bool) -> bool {
    let label = |part: &str| {
        !part.is_empty()
            && part.len() <= 63
            && part
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !part.starts_with('-')
            && !part.ends_with('-')
    };
    if dots {
        s.len() <= 253 && s.split('.').all(label)
    } else {
        label(s)
    }
}

/// The count `stored` uses until `fleetshard scale` writes one.
pub const STORED_DEFAULT: u32 = 3;

/// The upper bound `auto` uses when none is given.
pub const AUTO_MAX_DEFAULT: u32 = 1024;

impl FromStr for ShardsArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let number = |what: &str, v: &str| -> Result<u32, String> {
            v.trim()
                .parse::<u32>()
                .map_err(|_| format!("{what} {v:?} is not a whole number"))
        };
        let (kind, rest) = match s.split_once(':') {
            Some((k, r)) => (k, Some(r)),
            None => (s, None),
        };
        if kind == "deployment" {
            return Ok(ShardsArg(
                ShardCount::External { default: 1 },
                Some(Deployment::parse(rest.unwrap_or_default())?),
            ));
        }
        let count = match (kind, rest) {
            ("auto", None) => ShardCount::Auto {
                min: 1,
                max: AUTO_MAX_DEFAULT,
            },
            ("auto", Some(bounds)) => {
                let (min, max) = bounds.split_once('-').ok_or_else(|| {
                    format!("auto bounds {bounds:?}: expected MIN-MAX, e.g. auto:2-10")
                })?;
                ShardCount::Auto {
                    min: number("auto minimum", min)?,
                    max: number("auto maximum", max)?,
                }
            }
            ("stored", None) => ShardCount::Desired {
                default: STORED_DEFAULT,
            },
            ("stored", Some(n)) => ShardCount::Desired {
                default: number("stored default", n)?,
            },
            (n, None) => ShardCount::Fixed(
                number("shard count", n)
                    .map_err(|e| format!("{e}; expected N, stored[:N] or auto[:MIN-MAX]"))?,
            ),
            (other, Some(_)) => {
                return Err(format!(
                    "{other:?}: expected N, stored[:N] or auto[:MIN-MAX]"
                ));
            }
        };
        count.validate().map_err(|e| e.to_string())?;
        Ok(ShardsArg(count, None))
    }
}

impl fmt::Display for ShardsArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(d) = &self.1 {
            return match (&d.namespace, &d.name) {
                (Some(ns), Some(n)) => write!(f, "deployment:{ns}/{n}"),
                (_, Some(n)) => write!(f, "deployment:{n}"),
                (_, None) => write!(f, "deployment"),
            };
        }
        match self.0 {
            ShardCount::Fixed(n) => write!(f, "{n}"),
            ShardCount::Desired { default } => write!(f, "stored:{default}"),
            ShardCount::Auto { min, max } => write!(f, "auto:{min}-{max}"),
            ShardCount::External { default } => write!(f, "external:{default}"),
        }
    }
}

/// Checks a count given to `fleetshard scale`.
pub fn check_count(text: &str) -> Result<u32, String> {
    let n: u32 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a whole number"))?;
    if (1..=MAX_SHARDS).contains(&n) {
        Ok(n)
    } else {
        Err(format!("{n} shards: expected 1..={MAX_SHARDS}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_parses_and_prints_back() {
        for (text, count) in [
            ("5", ShardCount::Fixed(5)),
            ("stored", ShardCount::Desired { default: 3 }),
            ("stored:7", ShardCount::Desired { default: 7 }),
            ("auto", ShardCount::Auto { min: 1, max: 1024 }),
            ("auto:2-9", ShardCount::Auto { min: 2, max: 9 }),
        ] {
            let parsed: ShardsArg = text.parse().unwrap();
            assert_eq!(parsed.0, count, "{text}");
            assert_eq!(parsed.1, None);
            let again: ShardsArg = parsed.to_string().parse().unwrap();
            assert_eq!(again, parsed);
        }
    }

    #[test]
    fn deployment_forms() {
        let d: ShardsArg = "deployment".parse().unwrap();
        assert_eq!(d.0, ShardCount::External { default: 1 });
        assert_eq!(
            d.1,
            Some(Deployment {
                namespace: None,
                name: None
            })
        );
        let d: ShardsArg = "deployment:ctrl".parse().unwrap();
        let want = DeploymentRef {
            namespace: None,
            name: "ctrl".into(),
        };
        assert_eq!(d.1.as_ref().unwrap().resolve(), want);
        assert_eq!(d.to_string(), "deployment:ctrl");
        // The fenced overlay: the store in a namespace of its own, the Deployment in the
        // replicas'.
        let d: ShardsArg = "deployment:argocd/fleetshard".parse().unwrap();
        let want = DeploymentRef {
            namespace: Some("argocd".into()),
            name: "fleetshard".into(),
        };
        assert_eq!(d.1.as_ref().unwrap().resolve(), want);
        assert_eq!(d.to_string(), "deployment:argocd/fleetshard");
        assert_eq!(d.to_string().parse::<ShardsArg>().unwrap(), d);
    }

    #[test]
    fn bad_deployment_names_say_which_part() {
        for (text, needle) in [
            ("deployment:Argo/x", "namespace \"Argo\""),
            ("deployment:a.b/x", "namespace \"a.b\""),
            ("deployment:argocd/", "needs a name"),
            ("deployment:/x", "namespace \"\""),
            ("deployment:argocd/x/y", "name \"x/y\""),
            ("deployment:ctrl_1", "name \"ctrl_1\""),
        ] {
            let e = text.parse::<ShardsArg>().unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn bad_values_say_what_is_wrong() {
        for (text, needle) in [
            ("0", "outside 1..="),
            ("five", "not a whole number"),
            ("auto:9-2", "min 9 is above max 2"),
            ("auto:3", "expected MIN-MAX"),
            ("stored:x", "stored default"),
            ("replicaset:x", "expected N, stored"),
            ("99999", "outside"),
        ] {
            let e = text.parse::<ShardsArg>().unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }
}
