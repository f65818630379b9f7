//! Argo CD's environment variables for sharding, parsed exactly as Argo CD parses them
//! (argo-compat §5.1 in `docs/glossary.md`), from a lookup function so that nothing here
//! reads the process environment.

use std::fmt;
use std::time::Duration;

/// `ARGOCD_CONTROLLER_REPLICAS`: the replica count outside dynamic mode.
pub const ENV_REPLICAS: &str = "ARGOCD_CONTROLLER_REPLICAS";
/// `ARGOCD_CONTROLLER_SHARD`: the pinned shard, `-1` for none.
pub const ENV_SHARD: &str = "ARGOCD_CONTROLLER_SHARD";
/// `ARGOCD_ENABLE_DYNAMIC_CLUSTER_DISTRIBUTION`: heartbeat mode on or off.
pub const ENV_DYNAMIC: &str = "ARGOCD_ENABLE_DYNAMIC_CLUSTER_DISTRIBUTION";
/// `ARGOCD_CONTROLLER_HEARTBEAT_TIME`: the heartbeat period H, in seconds.
pub const ENV_HEARTBEAT_TIME: &str = "ARGOCD_CONTROLLER_HEARTBEAT_TIME";

/// Go's `math.MaxInt32`, the bound Argo CD gives the replica and shard variables.
const MAX_INT32: i64 = 2_147_483_647;

/// Argo CD's default and bounds for `ARGOCD_CONTROLLER_HEARTBEAT_TIME`, in seconds.
pub const HEARTBEAT_SECONDS_DEFAULT: i64 = 10;
const HEARTBEAT_SECONDS_MIN: i64 = 10;
const HEARTBEAT_SECONDS_MAX: i64 = 60;

/// An entry is stale after this many heartbeat periods (`HeartbeatTimeout = 3 × H`).
pub const STALE_AFTER_HEARTBEATS: u32 = 3;

/// The sharding settings Argo CD reads from its environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// `ARGOCD_CONTROLLER_REPLICAS`: `0..=MaxInt32`, default 0.
    pub replicas: i64,
    /// `ARGOCD_CONTROLLER_SHARD`: `-MaxInt32..=MaxInt32`, default `-1` (not pinned).
    pub shard: i64,
    /// `ARGOCD_ENABLE_DYNAMIC_CLUSTER_DISTRIBUTION`: `true`/`false` in any case, default
    /// false.
    pub dynamic_cluster_distribution: bool,
    /// `ARGOCD_CONTROLLER_HEARTBEAT_TIME`: `10..=60` seconds, default 10.
    pub heartbeat_seconds: i64,
    /// The variables that were set but not usable, each replaced by its default (Argo CD
    /// logs these and carries on; so does fleetshard).
    pub warnings: Vec<SettingWarning>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            replicas: 0,
            shard: -1,
            dynamic_cluster_distribution: false,
            heartbeat_seconds: HEARTBEAT_SECONDS_DEFAULT,
            warnings: Vec::new(),
        }
    }
}

/// A variable that was set to something Argo CD does not accept; its default was used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingWarning {
    /// The variable.
    pub variable: &'static str,
    /// Its value.
    pub value: String,
    /// Why it was not used.
    pub problem: SettingProblem,
    /// The default used instead, as text.
    pub default: String,
}

/// Why a variable's value was not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingProblem {
    /// Not a decimal integer (Go's `strconv.ParseInt(s, 10, 0)`).
    NotANumber,
    /// A number outside the accepted range.
    OutOfRange {
        /// The smallest accepted value.
        min: i64,
        /// The largest accepted value.
        max: i64,
    },
    /// Neither `true` nor `false` (any case).
    NotABoolean,
}

impl fmt::Display for SettingWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            variable,
            value,
            default,
            ..
        } = self;
        match self.problem {
            SettingProblem::NotANumber => write!(f, "{variable}={value:?} is not a number"),
            SettingProblem::OutOfRange { min, max } => {
                write!(f, "{variable}={value} is outside {min}..={max}")
            }
            SettingProblem::NotABoolean => {
                write!(f, "{variable}={value:?} is neither true nor false")
            }
        }?;
        write!(f, "; using the default {default}")
    }
}

impl Settings {
    /// Reads the variables through `lookup` (`None` = unset), as Argo CD does:
    /// - numbers with `ParseNumFromEnv`: unset or empty gives the default silently; text
    ///   that is not a decimal `int` (an optional sign, then digits, nothing else) or is out
    ///   of range gives the default with a warning;
    /// - the flag with `ParseBoolFromEnv`: `true` or `false` in any case, anything else
    ///   (`1`, `yes`, ` true`) gives false with a warning.
    pub fn from_env(lookup: impl Fn(&str) -> Option<String>) -> Settings {
        let mut warnings = Vec::new();
        let mut number = |variable, default, min, max| {
            parse_num(variable, lookup(variable), default, min, max, &mut warnings)
        };
        let replicas = number(ENV_REPLICAS, 0, 0, MAX_INT32);
        let shard = number(ENV_SHARD, -1, -MAX_INT32, MAX_INT32);
        let heartbeat_seconds = number(
            ENV_HEARTBEAT_TIME,
            HEARTBEAT_SECONDS_DEFAULT,
            HEARTBEAT_SECONDS_MIN,
            HEARTBEAT_SECONDS_MAX,
        );
        let dynamic_cluster_distribution = match lookup(ENV_DYNAMIC) {
            None => false,
            Some(value) if value.is_empty() => false,
            Some(value) if value.eq_ignore_ascii_case("true") => true,
            Some(value) if value.eq_ignore_ascii_case("false") => false,
            Some(value) => {
                warnings.push(SettingWarning {
                    variable: ENV_DYNAMIC,
                    value,
                    problem: SettingProblem::NotABoolean,
                    default: "false".to_owned(),
                });
                false
            }
        };
        Settings {
            replicas,
            shard,
            dynamic_cluster_distribution,
            heartbeat_seconds,
            warnings,
        }
    }

    /// The pinned shard: `None` for Argo's `-1`, any other value as is (it may be out of
    /// range; the claim refuses it then).
    pub fn pin(&self) -> Option<i64> {
        (self.shard != -1).then_some(self.shard)
    }

    /// The heartbeat period H.
    pub fn heartbeat(&self) -> Duration {
        Duration::from_secs(self.heartbeat_seconds.unsigned_abs())
    }

    /// How long an entry must be seen unchanged before another replica may take it:
    /// `3 × H` (Argo CD's `HeartbeatTimeout`).
    pub fn stale_after(&self) -> Duration {
        self.heartbeat() * STALE_AFTER_HEARTBEATS
    }
}

/// Argo CD's `ParseNumFromEnv(variable, default, min, max)`.
fn parse_num(
    variable: &'static str,
    value: Option<String>,
    default: i64,
    min: i64,
    max: i64,
    warnings: &mut Vec<SettingWarning>,
) -> i64 {
    let Some(value) = value.filter(|v| !v.is_empty()) else {
        return default;
    };
    let problem = match parse_go_int(&value) {
        None => SettingProblem::NotANumber,
        Some(n) if (min..=max).contains(&n) => return n,
        Some(_) => SettingProblem::OutOfRange { min, max },
    };
    warnings.push(SettingWarning {
        variable,
        value,
        problem,
        default: default.to_string(),
    });
    default
}

/// Go's `strconv.ParseInt(s, 10, 64)`: an optional `+` or `-`, then one or more ASCII
/// digits (leading zeros allowed; no spaces, underscores or prefixes), within `i64`.
fn parse_go_int(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    // Rust's parser accepts exactly this grammar too; the check above only keeps it from
    // depending on that.
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn read(vars: &[(&str, &str)]) -> Settings {
        let env: BTreeMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Settings::from_env(|name| env.get(name).cloned())
    }

    #[test]
    fn defaults() {
        let s = read(&[]);
        assert_eq!(s, Settings::default());
        assert_eq!(s.pin(), None);
        assert_eq!(s.heartbeat(), Duration::from_secs(10));
        assert_eq!(s.stale_after(), Duration::from_secs(30));
        // Set but empty is the same as unset, without a warning.
        let empty = read(&[
            (ENV_REPLICAS, ""),
            (ENV_SHARD, ""),
            (ENV_HEARTBEAT_TIME, ""),
            (ENV_DYNAMIC, ""),
        ]);
        assert_eq!(empty, Settings::default());
    }

    #[test]
    fn heartbeat_time_outside_10_to_60_is_10() {
        for (value, expected) in [
            ("10", 10),
            ("60", 60),
            ("25", 25),
            ("+30", 30),
            ("030", 30),
            ("9", 10),
            ("61", 10),
            ("0", 10),
            ("-20", 10),
            ("abc", 10),
            ("15s", 10),
            (" 15", 10),
            ("1_5", 10),
            ("0x10", 10),
            ("99999999999999999999", 10),
        ] {
            let s = read(&[(ENV_HEARTBEAT_TIME, value)]);
            assert_eq!(s.heartbeat_seconds, expected, "{value:?}");
            assert_eq!(
                s.stale_after(),
                Duration::from_secs(3 * expected.unsigned_abs())
            );
            assert_eq!(
                s.warnings.is_empty(),
                value.parse::<i64>().is_ok_and(|n| (10..=60).contains(&n)),
                "{value:?}"
            );
        }
        let warning = &read(&[(ENV_HEARTBEAT_TIME, "61")]).warnings[0];
        assert_eq!(
            warning.to_string(),
            "ARGOCD_CONTROLLER_HEARTBEAT_TIME=61 is outside 10..=60; using the default 10"
        );
    }

    #[test]
    fn shard_parsing() {
        for (value, expected) in [
            ("0", 0),
            ("3", 3),
            ("-1", -1),
            ("-5", -5),
            ("2147483647", 2_147_483_647),
            ("-2147483647", -2_147_483_647),
            ("-2147483648", -1),
            ("2147483648", -1),
            ("one", -1),
            ("1.0", -1),
            ("-", -1),
        ] {
            assert_eq!(read(&[(ENV_SHARD, value)]).shard, expected, "{value:?}");
        }
        assert_eq!(read(&[(ENV_SHARD, "2")]).pin(), Some(2));
        assert_eq!(read(&[(ENV_SHARD, "-1")]).pin(), None);
        // Negative pins other than -1 are kept: the claim refuses them (W18).
        assert_eq!(read(&[(ENV_SHARD, "-2")]).pin(), Some(-2));
    }

    #[test]
    fn replicas_range() {
        for (value, expected) in [
            ("0", 0),
            ("3", 3),
            ("2147483647", 2_147_483_647),
            ("2147483648", 0),
            ("-1", 0),
            ("three", 0),
        ] {
            assert_eq!(
                read(&[(ENV_REPLICAS, value)]).replicas,
                expected,
                "{value:?}"
            );
        }
        let s = read(&[(ENV_REPLICAS, "-1")]);
        assert_eq!(
            s.warnings,
            vec![SettingWarning {
                variable: ENV_REPLICAS,
                value: "-1".to_owned(),
                problem: SettingProblem::OutOfRange {
                    min: 0,
                    max: MAX_INT32
                },
                default: "0".to_owned(),
            }]
        );
    }

    #[test]
    fn dynamic_distribution_is_only_true_or_false() {
        for (value, expected, warns) in [
            ("true", true, false),
            ("TRUE", true, false),
            ("True", true, false),
            ("tRuE", true, false),
            ("false", false, false),
            ("FALSE", false, false),
            ("1", false, true),
            ("t", false, true),
            ("yes", false, true),
            ("on", false, true),
            (" true", false, true),
            ("true ", false, true),
        ] {
            let s = read(&[(ENV_DYNAMIC, value)]);
            assert_eq!(s.dynamic_cluster_distribution, expected, "{value:?}");
            assert_eq!(!s.warnings.is_empty(), warns, "{value:?}");
        }
    }
}
