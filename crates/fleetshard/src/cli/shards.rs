//! The `--shards` value of `run`: where the shard count comes from.
//!
//! - `N` — exactly N shards;
//! - `stored` or `stored:N` — the count `fleetshard scale` wrote to the store, N (default 3)
//!   until one is written;
//! - `auto` or `auto:MIN-MAX` — one shard per live replica (holders and spares), within
//!   the bounds (default 1-1024);
//! - `deployment` or `deployment:NAME` — `spec.replicas` of a Deployment in the
//!   `kubernetes://` store's namespace, kept current by a watch (NAME defaults to
//!   `ARGOCD_APPLICATION_CONTROLLER_NAME`, else `argocd-application-controller`, as in
//!   Argo CD).
//!
//! Only the elected distributor applies the policy and commits the count with each
//! generation; every replica claims among the committed count.

use std::fmt;
use std::str::FromStr;

use fleetshard_coord::fenced::{MAX_SHARDS, ShardCount};
use fleetshard_replica::deployment::{ARGOCD_CONTROLLER_NAME_ENV, DEFAULT_CONTROLLER_NAME};

/// The parsed `--shards` value: the policy, and for `deployment` the Deployment's name
/// (`None`: the default name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardsArg(pub ShardCount, pub Option<Deployment>);

/// A Deployment whose `spec.replicas` is the shard count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deployment {
    /// Its name; `None`: `ARGOCD_APPLICATION_CONTROLLER_NAME` or Argo CD's default.
    pub name: Option<String>,
}

impl Deployment {
    /// The name to watch.
    pub fn resolve(&self) -> String {
        self.name.clone().unwrap_or_else(|| {
            std::env::var(ARGOCD_CONTROLLER_NAME_ENV)
                .ok()
                .filter(|n| !n.trim().is_empty())
                .unwrap_or_else(|| DEFAULT_CONTROLLER_NAME.to_owned())
        })
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
            let name = rest
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_owned);
            return Ok(ShardsArg(
                ShardCount::External { default: 1 },
                Some(Deployment { name }),
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
            return match &d.name {
                Some(n) => write!(f, "deployment:{n}"),
                None => write!(f, "deployment"),
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
        assert_eq!(d.1, Some(Deployment { name: None }));
        let d: ShardsArg = "deployment:ctrl".parse().unwrap();
        assert_eq!(d.1.as_ref().unwrap().resolve(), "ctrl");
        assert_eq!(d.to_string(), "deployment:ctrl");
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
